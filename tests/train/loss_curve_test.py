#!/usr/bin/python3
"""train-loss-curve: tools/compare_loss_curve.py on cpu (issue 9's loss-curve comparison).

Runs htr-train's tiny model (smaller batch and sequence so CI stays quick) for a few dozen steps
with its warmup + cosine schedule, AdamW with weight decay and clipping, and PyTorch from the
weights htr-train starts from (--save-init) on the same sequential batches. Passes when
  1. the curves MATCH within the bound, and
  2. the same comparison reports MISMATCH when the PyTorch side is given a wrong init, batches
     one step late, or a learning rate 5% off (the htr-train run is reused), so the bound is
     tight enough to catch those mistakes.

usage: loss_curve_test.py COMPARE_SCRIPT HTR_TRAIN [--workdir DIR]
Exit 0 on success, 1 on failure, 77 (skip) without torch/numpy.
"""
import json
import os
import subprocess
import sys
import tempfile

STEPS = 40
RTOL = 1e-3  # compare_loss_curve.py's fp32 default, spelled out


def run(script, htr_train, work, perturb):
    cmd = [sys.executable, script, "--htr-train", htr_train, "--preset", "tiny",
           "--steps", str(STEPS), "--batch", "8", "--seq", "64", "--warmup", "10",
           "--device", "cpu:0", "--torch-device", "cpu", "--threads", "2", "--rtol", str(RTOL),
           "--workdir", work, "--perturb", perturb, "--json", os.path.join(work, perturb + ".json")]
    if perturb != "none":
        cmd.append("--reuse-htr")
    print("+ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace")
    print(proc.stdout, flush=True)
    if proc.returncode == 77:
        print("SKIP: compare_loss_curve.py skipped (torch or numpy missing)")
        sys.exit(77)
    summary = None
    path = os.path.join(work, perturb + ".json")
    if os.path.exists(path):
        with open(path) as f:
            summary = json.loads(f.read())
    return proc.returncode, summary


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    script, htr_train = sys.argv[1], sys.argv[2]
    work = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--workdir" else tempfile.mkdtemp(
        prefix="htr-loss-curve-test-")
    ok = True
    rc, s = run(script, htr_train, work, "none")
    if rc != 0 or s is None or s["verdict"] != "match" or s["steps"] != STEPS:
        print(f"FAIL: htr and PyTorch curves should match (rc {rc}, summary {s})")
        return 1
    print(f"ok: same init and data: worst {s['worst_rel']:.2e} <= {RTOL:g}")
    for perturb in ("init", "data", "lr"):
        rc, p = run(script, htr_train, work, perturb)
        if rc != 1 or p is None or p["verdict"] != "mismatch":
            print(f"FAIL: --perturb {perturb} should be a MISMATCH (rc {rc}, summary {p})")
            ok = False
        else:
            print(f"ok: --perturb {perturb}: worst {p['worst_rel']:.2e} > {RTOL:g} "
                  f"({p['worst_rel'] / max(s['worst_rel'], 1e-12):.0f}x the unperturbed difference)")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
