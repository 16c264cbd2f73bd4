#!/usr/bin/python3
"""PyTorch parity for htr-train (GitHub issue 3).

Builds a small GPT-2 in PyTorch (float32), saves it as safetensors with Hugging
Face names (with the "transformer." prefix and the attn.bias buffers, which
htr-train must ignore), trains N steps with AdamW (weight decay 0, constant lr,
no clipping) on sequential batches of a small data file, then runs htr-train
from the same file and data and compares every step's loss (relative 1e-4) and
the final weights (1e-4).

usage: gpt2_parity.py --htr-train PATH [--workdir DIR] [--steps N] [--device ID]
Exit 0 on success, 1 on a mismatch or failure, 77 (skip) without torch.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from lsan_tracer_flake import run_retrying  # noqa: E402

try:
    from safetensors.numpy import load_file as st_load, save_file as st_save
except ImportError:
    st_load = st_save = None

L, C, H, CTX, V = 2, 64, 4, 32, 256
B, T = 4, 32
LR, BETAS, EPS = 1e-3, (0.9, 0.95), 1e-8


def make_corpus(path):
    rng = np.random.default_rng(1234)
    words = ("the quick brown fox jumps over a lazy dog while seven tensors "
             "train on bytes and every gradient flows back through time").split()
    lines = []
    for _ in range(400):
        n = int(rng.integers(4, 12))
        lines.append(" ".join(words[int(i)] for i in rng.integers(0, len(words), n)).capitalize() + ".")
    text = "\n".join(lines).encode()
    with open(path, "wb") as f:
        f.write(text)
    return np.frombuffer(text, dtype=np.uint8)


def init_params():
    g = torch.Generator().manual_seed(0)
    p = {}

    def normal(shape, std):
        return (torch.randn(*shape, generator=g) * std).float()

    proj = 0.02 / math.sqrt(2 * L)
    p["wte.weight"] = normal((V, C), 0.02)
    p["wpe.weight"] = normal((CTX, C), 0.02)
    for l in range(L):
        h = f"h.{l}."
        # Non-trivial LayerNorm/bias values so their gradients are exercised.
        p[h + "ln_1.weight"] = 1 + normal((C,), 0.1)
        p[h + "ln_1.bias"] = normal((C,), 0.1)
        p[h + "attn.c_attn.weight"] = normal((C, 3 * C), 0.02)
        p[h + "attn.c_attn.bias"] = normal((3 * C,), 0.02)
        p[h + "attn.c_proj.weight"] = normal((C, C), proj)
        p[h + "attn.c_proj.bias"] = normal((C,), 0.02)
        p[h + "ln_2.weight"] = 1 + normal((C,), 0.1)
        p[h + "ln_2.bias"] = normal((C,), 0.1)
        p[h + "mlp.c_fc.weight"] = normal((C, 4 * C), 0.02)
        p[h + "mlp.c_fc.bias"] = normal((4 * C,), 0.02)
        p[h + "mlp.c_proj.weight"] = normal((4 * C, C), proj)
        p[h + "mlp.c_proj.bias"] = normal((C,), 0.02)
    p["ln_f.weight"] = 1 + normal((C,), 0.1)
    p["ln_f.bias"] = normal((C,), 0.1)
    return p


def forward(p, ids):
    b, t = ids.shape
    hd = C // H
    x = p["wte.weight"][ids] + p["wpe.weight"][:t]
    mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
    for l in range(L):
        h = f"h.{l}."
        a = F.layer_norm(x, (C,), p[h + "ln_1.weight"], p[h + "ln_1.bias"], eps=1e-5)
        qkv = a @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"]
        q, k, v = qkv.split(C, dim=-1)
        q, k, v = (z.view(b, t, H, hd).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, C)
        x = x + (y @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"])
        m = F.layer_norm(x, (C,), p[h + "ln_2.weight"], p[h + "ln_2.bias"], eps=1e-5)
        m = F.gelu(m @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"], approximate="tanh")
        x = x + (m @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], eps=1e-5)
    return x @ p["wte.weight"].t()


def batch(data, step):
    span = len(data) - T - 1
    xs, ys = [], []
    for r in range(B):
        s = ((step * B + r) * T) % span
        xs.append(data[s:s + T])
        ys.append(data[s + 1:s + T + 1])
    return (torch.tensor(np.array(xs), dtype=torch.long),
            torch.tensor(np.array(ys), dtype=torch.long))


def save_weights(path, params):
    tensors = {"transformer." + k: v.detach().numpy().copy() for k, v in params.items()}
    for l in range(L):  # HF buffers that a loader must ignore
        tensors[f"transformer.h.{l}.attn.bias"] = np.tril(np.ones((1, 1, CTX, CTX), np.float32))
    if st_save is not None:
        st_save(tensors, path, metadata={"format": "pt"})
    else:
        st_io.save(path, tensors, {"format": "pt"})


def load_weights(path):
    if st_load is not None:
        return st_load(path)
    return st_io.load(path)[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--htr-train", required=True)
    ap.add_argument("--workdir")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--device", default="")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--wtol", type=float, default=1e-4)
    args = ap.parse_args()
    torch.set_num_threads(1)
    work = args.workdir or tempfile.mkdtemp(prefix="htr-parity-")
    os.makedirs(work, exist_ok=True)
    data_path = os.path.join(work, "data.txt")
    init_path = os.path.join(work, "init.safetensors")
    data = make_corpus(data_path)

    params = init_params()
    save_weights(init_path, params)
    for v in params.values():
        v.requires_grad_(True)
    opt = torch.optim.AdamW(list(params.values()), lr=LR, betas=BETAS, eps=EPS, weight_decay=0.0)
    ref_losses = []
    for step in range(args.steps):
        x, y = batch(data, step)
        logits = forward(params, x)
        loss = F.cross_entropy(logits.view(-1, V), y.view(-1))
        ref_losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()

    log_path = os.path.join(work, "htr-log.jsonl")
    out_path = os.path.join(work, "htr-final.safetensors")
    if os.path.exists(log_path):
        os.remove(log_path)
    cmd = [args.htr_train, "--init-from", init_path, "--data", data_path,
           "--data-order", "sequential", "--steps", str(args.steps), "--batch", str(B),
           "--seq", str(T), "--heads", str(H), "--lr", repr(LR), "--lr-schedule", "constant",
           "--warmup", "0", "--weight-decay", "0", "--grad-clip", "0", "--beta1", "0.9",
           "--beta2", "0.95", "--eps", "1e-8", "--val-fraction", "0", "--eval-every", "0",
           "--sample-tokens", "0", "--log-json", log_path, "--save-weights", out_path,
           "--out-dir", os.path.join(work, "out"), "--progress", "plain"]
    if args.device:
        cmd += ["--device", args.device]
    print("+", " ".join(cmd), flush=True)
    proc = run_retrying(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                        errors="replace")
    print(proc.stdout)
    if proc.returncode != 0:
        print(f"FAIL: htr-train exited {proc.returncode}")
        return 1

    with open(log_path) as f:
        got = {r["step"]: r["loss"] for r in map(json.loads, f)}
    ok = True
    print(f"{'step':>4} {'pytorch':>12} {'htr':>12} {'rel diff':>10}")
    for s, ref in enumerate(ref_losses):
        h = got.get(s)
        rel = abs(h - ref) / abs(ref) if h is not None else float("inf")
        flag = "" if rel <= args.rtol else "  <-- MISMATCH"
        ok &= rel <= args.rtol
        print(f"{s:>4} {ref:>12.7f} {h if h is not None else float('nan'):>12.7f} {rel:>10.2e}{flag}")

    final = load_weights(out_path)
    worst, worst_name = 0.0, ""
    for name, ref in params.items():
        if name not in final:
            print(f"FAIL: {out_path}: tensor '{name}' missing")
            return 1
        got_w = np.asarray(final[name], dtype=np.float32)
        ref_w = ref.detach().numpy()
        if got_w.shape != ref_w.shape:
            print(f"FAIL: tensor '{name}': shape {got_w.shape} vs {ref_w.shape}")
            return 1
        d = float(np.max(np.abs(got_w - ref_w)))
        if d > worst:
            worst, worst_name = d, name
    print(f"final weights: max |htr - pytorch| = {worst:.3e} ({worst_name})")
    ok &= worst <= args.wtol
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
