#!/usr/bin/python3
"""Interoperability of htr_checkpoint.h with the reference `safetensors`
package: a file written by safetensors is read by htr (ckpt_copy) and written
back; safetensors reads htr's file and every tensor and metadata entry must be
identical. Also reads htr-train's own checkpoint when a path is given.

usage: safetensors_interop.py CKPT_COPY [WORKDIR]
Exit 77 (skip) when numpy or safetensors is missing."""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import save_file
except ImportError as e:
    print(f"SKIP: {e} (install with: /usr/bin/python3 -m pip install --break-system-packages safetensors)")
    sys.exit(77)


def main():
    copy = sys.argv[1]
    work = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="htr-interop-")
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(7)
    tensors = {
        "wte.weight": rng.standard_normal((17, 8)).astype(np.float32),
        "h.0.attn.c_attn.bias": rng.standard_normal((24,)).astype(np.float32),
        "half": rng.standard_normal((3, 5)).astype(np.float16),
        "double": rng.standard_normal((2, 2, 2)).astype(np.float64),
        "ints": rng.integers(-2**31, 2**31 - 1, (7,), dtype=np.int64).astype(np.int32),
        "longs": rng.integers(-2**62, 2**62, (3,), dtype=np.int64),
        "bytes": rng.integers(0, 256, (9,), dtype=np.int64).astype(np.uint8),
        "mask": rng.integers(0, 2, (4,)).astype(np.bool_),
        "scalar": np.array(2.5, dtype=np.float32),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    src = os.path.join(work, "from-safetensors.safetensors")
    dst = os.path.join(work, "from-htr.safetensors")
    meta = {"format": "pt", "step": "12", "unicode": "h\u00e9llo \u2603"}
    save_file(tensors, src, metadata=meta)
    proc = subprocess.run([copy, src, dst], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    print(proc.stdout, proc.stderr)
    if proc.returncode != 0:
        print("FAIL: ckpt_copy failed")
        return 1
    ok = True
    with safe_open(dst, "np") as f:
        if f.metadata() != meta:
            print(f"FAIL: metadata {f.metadata()} != {meta}")
            ok = False
        keys = set(f.keys())
        if keys != set(tensors):
            print(f"FAIL: names {sorted(keys)} != {sorted(tensors)}")
            ok = False
        for name, ref in tensors.items():
            got = f.get_tensor(name)
            if got.dtype != ref.dtype or got.shape != ref.shape or not np.array_equal(got, ref):
                print(f"FAIL: tensor '{name}': {got.dtype}{got.shape} differs from {ref.dtype}{ref.shape}")
                ok = False
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
