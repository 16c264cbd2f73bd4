#!/usr/bin/python3
"""Loss curve of htr-train against PyTorch from the same init and the same data (issue 9).

1. Runs htr-train with --data-order sequential, --save-init (the weights its first step starts
   from, safetensors with Hugging Face names) and --log-json (every step's loss before its
   update).
2. Trains the same GPT-2 in PyTorch from that file, on the same batches (row b of step s starts at
   byte ((s*B + b)*T) mod (len - T - 1) of the data, samples/htr-train/data.cc), with the same
   AdamW (betas, eps, weight decay on 2-D tensors only), learning-rate schedule (linear warmup,
   then cosine to lr*min_lr_ratio or constant: samples/htr-train/optimizer.cc) and gradient
   clipping (clip_grad_norm_, as htr's global_norm + min(clip/(norm+1e-6), 1)).
3. Measures the noise: more PyTorch runs from the same init on the same batches that are just as
   correct as the first but round differently (--noise, each kind one run): "micro", each batch
   split into two micro-batches whose gradients are accumulated; "ulp", every initial weight
   moved one float32 ulp; "attn", the other attention formulation (SDPA or softmax(QK^T)V).
   Training is chaotic, so two such runs drift apart by an amount that grows with the step
   count and the learning rate; the widest of these spreads is what "within noise" means. (The
   micro-batch split alone was too narrow a bound: it changes only some sums' rounding order,
   while htr rounds differently everywhere. Measured, tiny fp32: on the H200 htr's first-step
   gradients were 0.52x PyTorch's error against float64 and its 3-step parameters/moments
   0.77x/0.29x/0.19x, yet its 200-step curve was 3.8x the micro-batch spread; on the cpu the
   micro-batch spread was 1.7e-4, the one-ulp spread 1.9e-3, htr-on-the-H200 vs PyTorch-on-cpu
   2.4e-3.)
4. Compares the per-step losses: worst and mean relative difference |htr - torch| / |torch|, and
   the worst mean over --window consecutive steps (of htr vs torch and of the noise run vs
   torch); prints a table, a verdict and one JSON summary line (also written to --json).
   MATCH when the worst per-step difference is within --rtol, or when htr's worst windowed
   difference is within --noise-factor times the noise run's (MATCH_WITHIN_NOISE);
   --no-noise skips the noise runs (then only --rtol decides).
5. --grad-check K instead compares htr's state after K steps (its checkpoint: parameters and
   AdamW moments; for K = 1 the first-step gradient) with PyTorch's, both against PyTorch in
   float64: MATCH when htr's relative L2 errors are within --noise-factor times PyTorch's own
   (fp32 or bf16 autocast, one batch or two micro-batches). This separates a semantic
   difference (a formula, a stale value, a lossy kernel: errors far above PyTorch's) from
   rounding (errors of PyTorch's size) in seconds, where the curve needs 200 steps.

usage:
  compare_loss_curve.py --htr-train PATH [--preset tiny|small|gpt2] [--steps 200]
      [--device cpu:0] [--torch-device auto|cpu|cuda[:N]] [--precision fp32|bf16]
      [--batch N] [--seq N] [--data FILE] [--rtol X] [--workdir DIR] [--json FILE]
      [--reuse-htr] [--perturb none|init|data|lr] [--threads N] [--attention auto|manual|sdpa]
      [--lr X] [--warmup N] [--lr-schedule cosine|constant] [--min-lr-ratio X]
      [--weight-decay X] [--grad-clip X] [--seed N] [--window N] [--noise-factor K] [--no-noise]
      [--noise micro,ulp,attn] [--grad-check K]

--rtol defaults to 1e-3 with fp32 on both sides and 3e-2 with bf16 (htr rounds activations where
its precision pass does, PyTorch where autocast does: the curves differ by bf16 rounding, not by a
bug); past a few dozen steps the noise measurement (3.) is the meaningful bound. --reuse-htr skips the htr-train run when --workdir
holds one made with the same command. --perturb deliberately breaks the PyTorch side (init: fresh
normal weights of the same std; data: every batch taken one step late; lr: learning rate x1.05):
a check that the bound is tight enough to catch such mistakes (tests/train/loss_curve_test.py).
Without --data a deterministic 1 MiB English-like corpus is generated in the work directory.

Exit status: 0 MATCH, 1 MISMATCH or failure, 77 when torch (or numpy) is not installed.
Run it with Debian's /usr/bin/python3 (python3-torch) here, or any python3 with torch on a GPU
machine.
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:  # an htr-train run whose only fault is LeakSanitizer's tracer crash at exit is run once more
    from lsan_tracer_flake import run_retrying
except ImportError:  # the script copied alone (a GPU bundle): plain runs
    run_retrying = subprocess.run

# PyTorch's OpenMP threads spin by default; on a small shared machine that makes the reference
# run many times slower (htr-bench train does the same for its peer). libgomp reads this when
# torch is imported; htr-train gets the caller's environment back (run_htr).
_OMP_WAIT_POLICY = os.environ.get("OMP_WAIT_POLICY")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e}", flush=True)
    sys.exit(77)

# samples/htr-train/args.cc ApplyPreset: layers, width, heads, ctx, batch, lr, warmup
PRESETS = {
    "tiny": (4, 128, 4, 128, 16, 3e-3, 50),
    "small": (6, 384, 6, 256, 32, 1e-3, 100),
    "gpt2": (12, 768, 12, 1024, 8, 6e-4, 200),
}
VOCAB = 256
ST_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64}


def read_safetensors(path):
    """Float tensors of a safetensors file (numpy only: the pip package is optional)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if info["dtype"] == "BF16":
            b, e = info["data_offsets"]
            u16 = np.frombuffer(data[b:e], dtype="<u2").astype(np.uint32) << 16
            out[name] = u16.view(np.float32).reshape(info["shape"])
        elif info["dtype"] in ST_DTYPES:
            b, e = info["data_offsets"]
            out[name] = np.frombuffer(data[b:e], dtype=np.dtype(ST_DTYPES[info["dtype"]]).newbyteorder("<")
                                      ).astype(np.float32).reshape(info["shape"])
    return out


def make_corpus(path, size=1 << 20):
    rng = np.random.default_rng(20261130)
    words = ("the of and to in a is that for it as was with be by on not he i this are or his from "
             "at which but have an they you were her she there one all we their has been would when "
             "tensor gradient device kernel runtime plugin graph stream memory step loss weight "
             "train model layer batch token byte vulkan cuda hopper fused attention").split()
    p = 1.0 / np.arange(1, len(words) + 1)  # Zipf-like word frequencies
    p /= p.sum()
    out, n = [], 0
    while n < size:
        k = int(rng.integers(5, 16))
        line = " ".join(words[i] for i in rng.choice(len(words), k, p=p)).capitalize() + ".\n"
        out.append(line)
        n += len(line)
    text = "".join(out).encode()[:size]
    with open(path, "wb") as f:
        f.write(text)


def learning_rate(a, step):
    """samples/htr-train/optimizer.cc LearningRate."""
    if a.warmup > 0 and step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    if a.lr_schedule == "constant":
        return a.lr
    min_lr = a.lr * a.min_lr_ratio
    span = a.steps - a.warmup - 1
    if span <= 0:
        return a.lr
    progress = min((step - a.warmup) / span, 1.0)
    return min_lr + 0.5 * (a.lr - min_lr) * (1.0 + math.cos(math.pi * progress))


def batches(data, B, T, step):
    """samples/htr-train/data.cc BatchSampler::Fill, sequential order, --val-fraction 0."""
    span = len(data) - T - 1
    rows = [((step * B + b) * T) % span for b in range(B)]
    x = np.stack([data[s:s + T] for s in rows])
    y = np.stack([data[s + 1:s + T + 1] for s in rows])
    return torch.from_numpy(x.astype(np.int64)), torch.from_numpy(y.astype(np.int64))


def htr_command(a, paths):
    cmd = [a.htr_train, "--preset", a.preset, "--device", a.device, "--steps", str(a.steps),
           "--batch", str(a.batch), "--seq", str(a.seq), "--seed", str(a.seed),
           "--data", paths["data"], "--data-order", "sequential", "--val-fraction", "0",
           "--eval-every", "0", "--sample-tokens", "0", "--precision", a.precision,
           "--lr", repr(a.lr), "--warmup", str(a.warmup), "--lr-schedule", a.lr_schedule,
           "--min-lr-ratio", repr(a.min_lr_ratio), "--weight-decay", repr(a.weight_decay),
           "--grad-clip", repr(a.grad_clip), "--beta1", "0.9", "--beta2", "0.95", "--eps", "1e-8",
           "--save-init", paths["init"], "--log-json", paths["log"],
           "--out-dir", paths["out"], "--progress", "plain",
           "--print-every", str(max(1, a.steps // 10))]
    if a.threads:
        cmd += ["--threads", str(a.threads)]
    return cmd


def run_htr(a, paths):
    cmd = htr_command(a, paths)
    stamp = os.path.join(a.workdir, "htr-run.json")
    if a.reuse_htr and os.path.exists(stamp) and os.path.exists(paths["init"]):
        with open(stamp) as f:
            prev = json.load(f)
        if prev.get("cmd") == cmd and prev.get("rc") == 0:
            print(f"reusing the htr-train run in {a.workdir}", flush=True)
            return prev.get("seconds", 0.0)
    for k in ("log", "init"):
        if os.path.exists(paths[k]):
            os.remove(paths[k])
    print("+ " + " ".join(cmd), flush=True)
    env = dict(os.environ)
    if _OMP_WAIT_POLICY is None:
        env.pop("OMP_WAIT_POLICY", None)
    if a.threads:
        env["HTR_CPU_THREADS"] = str(a.threads)
    t0 = time.time()
    proc = run_retrying(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                        errors="replace", env=env)
    secs = time.time() - t0
    print(proc.stdout, end="", flush=True)
    with open(stamp, "w") as f:
        json.dump({"cmd": cmd, "rc": proc.returncode, "seconds": secs}, f)
    if proc.returncode != 0:
        raise RuntimeError(f"htr-train exited {proc.returncode}")
    return secs


class Gpt2:
    """htr-train's GPT-2 (samples/htr-train/model.cc): learned positions, pre-LayerNorm (eps
    1e-5), Conv1D linears y = x W + b, causal attention scaled by 1/sqrt(hd), tanh GELU, head tied
    to wte; mean cross-entropy."""

    def __init__(self, L, C, H, weights, dev, attention, dtype=torch.float32):
        self.L, self.C, self.H = L, C, H
        self.p = {}
        for name, arr in weights.items():
            key = name[len("transformer."):] if name.startswith("transformer.") else name
            self.p[key] = torch.tensor(np.array(arr), dtype=dtype, device=dev).requires_grad_(True)
        self.names = ["wte.weight", "wpe.weight"]
        for l in range(L):
            self.names += [f"h.{l}.{n}" for n in (
                "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias")]
        self.names += ["ln_f.weight", "ln_f.bias"]
        missing = [n for n in self.names if n not in self.p]
        if missing:
            raise RuntimeError(f"init file lacks {missing[:3]}")
        self.sdpa = attention == "sdpa" or (attention == "auto" and dev.type != "cpu"
                                            and hasattr(F, "scaled_dot_product_attention"))

    def params(self):
        return [self.p[n] for n in self.names]

    def loss(self, ids, tgt):
        p, C, H = self.p, self.C, self.H
        b, t = ids.shape
        hd = C // H
        x = (p["wte.weight"][ids] + p["wpe.weight"][:t]).view(b * t, C)
        mask = None if self.sdpa else torch.triu(torch.ones(t, t, dtype=torch.bool, device=ids.device), 1)
        for l in range(self.L):
            h = f"h.{l}."
            a = F.layer_norm(x, (C,), p[h + "ln_1.weight"], p[h + "ln_1.bias"], eps=1e-5)
            qkv = torch.addmm(p[h + "attn.c_attn.bias"], a, p[h + "attn.c_attn.weight"])
            q, k, v = (z.view(b, t, H, hd).transpose(1, 2) for z in qkv.split(C, dim=-1))
            if self.sdpa:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
                y = att.masked_fill(mask, float("-inf")).softmax(dim=-1) @ v
            y = y.transpose(1, 2).reshape(b * t, C)
            x = x + torch.addmm(p[h + "attn.c_proj.bias"], y, p[h + "attn.c_proj.weight"])
            m = F.layer_norm(x, (C,), p[h + "ln_2.weight"], p[h + "ln_2.bias"], eps=1e-5)
            m = F.gelu(torch.addmm(p[h + "mlp.c_fc.bias"], m, p[h + "mlp.c_fc.weight"]), approximate="tanh")
            x = x + torch.addmm(p[h + "mlp.c_proj.bias"], m, p[h + "mlp.c_proj.weight"])
        x = F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], eps=1e-5)
        logits = x @ p["wte.weight"].t()
        return F.cross_entropy(logits if logits.dtype == torch.float64 else logits.float(), tgt.reshape(-1))


def perturb_init(weights, L):
    """A wrong init of the right shapes: fresh normal values with htr-train's stds."""
    g = torch.Generator().manual_seed(99)
    out = dict(weights)
    proj = 0.02 / math.sqrt(2 * L)
    for name, arr in weights.items():
        if arr.ndim == 2:
            std = proj if name.endswith("c_proj.weight") else 0.02
            out[name] = (torch.randn(*arr.shape, generator=g) * std).numpy()
    return out


NOISE_KINDS = {
    "micro": "each batch as two accumulated micro-batches",
    "ulp": "every initial weight one float32 ulp up or down",
    "attn": "the other attention formulation (SDPA vs softmax(QK^T)V)",
}


def ulp_init(weights, seed=7):
    """The same weights, each element moved one float32 ulp up or down at random: a perturbation
    of exactly the size of one float32 rounding, for the noise measurement."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, arr in weights.items():
        a32 = np.asarray(arr, dtype=np.float32)
        up = rng.random(a32.shape) < 0.5
        out[name] = np.where(up, np.nextafter(a32, np.float32(np.inf)), np.nextafter(a32, np.float32(-np.inf)))
    return out


def train_torch(a, data, weights, dev, micro=1, dtype=torch.float32, state=None, attention=None):
    """Per-step losses of the PyTorch run. micro > 1 splits every batch into that many
    micro-batches (rows weighted by their share) whose gradients are accumulated: the same
    update up to rounding order, for the noise measurement. dtype float64 runs without autocast
    (the exact reference of --grad-check); a dict `state` receives every parameter, AdamW's
    moments and the first step's gradient (name, name + ".m", ".v", ".g0") as float64 arrays."""
    L, C, H = a.layers, a.width, a.heads
    if a.perturb == "init":
        weights = perturb_init(weights, L)
    model = Gpt2(L, C, H, weights, dev, attention or a.attention, dtype)
    params = model.params()
    extra = {"fused": True} if dev.type == "cuda" else {}
    opt = torch.optim.AdamW([{"params": [t for t in params if t.dim() == 2], "weight_decay": a.weight_decay},
                             {"params": [t for t in params if t.dim() != 2], "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, **extra)
    losses = []
    lr_scale = 1.05 if a.perturb == "lr" else 1.0
    lowp = a.precision == "bf16" and dtype != torch.float64
    for step in range(a.steps):
        x, y = batches(data, a.batch, a.seq, step + 1 if a.perturb == "data" else step)
        x, y = x.to(dev), y.to(dev)
        for group in opt.param_groups:
            group["lr"] = learning_rate(a, step) * lr_scale
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for xm, ym in zip(x.tensor_split(micro), y.tensor_split(micro)):
            with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=lowp):
                loss = model.loss(xm, ym) * (xm.shape[0] / x.shape[0])
            loss.backward()
            total += loss.item()
        losses.append(total)
        if state is not None and step == 0:
            for n in model.names:
                state[n + ".g0"] = model.p[n].grad.double().cpu().numpy().copy()
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(params, a.grad_clip)
        opt.step()
    if state is not None:
        for n in model.names:
            t = model.p[n]
            state[n] = t.detach().double().cpu().numpy().copy()
            state[n + ".m"] = opt.state[t]["exp_avg"].double().cpu().numpy()
            state[n + ".v"] = opt.state[t]["exp_avg_sq"].double().cpu().numpy()
    return losses


def grad_check(a, paths, data, dev):
    """--grad-check K: htr-train runs K steps (its checkpoint holds the parameters and AdamW's
    moments; after one step the first moment is (1 - beta1) * clip * g, so g = m / (0.1 * clip)
    with the clipping factor from the logged grad_norm); PyTorch runs the same K steps in fp32
    (or bf16 autocast) on --torch-device, once more with two micro-batches (noise), and in
    float64 on the same device (the exact reference). Per tensor: the relative L2 error against float64
    of the first-step gradient (K = 1) or of the parameter change p_K - p_0 and of both moments.
    A drift that is not rounding (a wrong formula, a stale value, a lossy kernel) shows as
    tensors whose htr error is far above PyTorch's."""
    k = a.grad_check
    one = argparse.Namespace(**vars(a))
    one.steps, one.reuse_htr = k, False
    run_htr(one, paths)
    with open(paths["log"]) as f:
        log = {r["step"]: r for r in map(json.loads, f) if "step" in r}
    ck = read_safetensors(os.path.join(paths["out"], "checkpoint.safetensors"))
    weights = read_safetensors(paths["init"])
    init = {(n[len("transformer."):] if n.startswith("transformer.") else n): v for n, v in weights.items()}
    ref, t32, tn = {}, {}, {}
    l64 = train_torch(one, data, weights, dev, dtype=torch.float64, state=ref)  # float64: exact enough anywhere
    l32 = train_torch(one, data, weights, dev, state=t32)
    ln = train_torch(one, data, weights, dev, micro=2, state=tn)
    names = [n for n in ref if not n.endswith((".m", ".v", ".g0"))]
    htr = {}
    coef = min(a.grad_clip / (log[0]["grad_norm"] + 1e-6), 1.0) if a.grad_clip > 0 else 1.0
    for n in names:
        if n not in ck or "adam.m." + n not in ck or "adam.v." + n not in ck:
            print(f"FAIL: htr's checkpoint lacks {n} or its moments")
            return 1
        htr[n] = ck[n].astype(np.float64)
        htr[n + ".m"] = ck["adam.m." + n].astype(np.float64)
        htr[n + ".v"] = ck["adam.v." + n].astype(np.float64)
        if k == 1:
            htr[n + ".g0"] = htr[n + ".m"] / (0.1 * coef)
    for st in (ref, t32, tn, htr):  # the parameter change, not the parameter
        for n in names:
            st[n + ".dp"] = st[n] - init[n].astype(np.float64)
    kinds = [".g0"] if k == 1 else [".dp", ".m", ".v"]

    def err(st, key):
        return float(np.linalg.norm(st[key] - ref[key]) / max(np.linalg.norm(ref[key]), 1e-30))

    def total_err(st, kind):
        num = sum(float(np.sum((st[n + kind] - ref[n + kind]) ** 2)) for n in names)
        den = sum(float(np.sum(ref[n + kind] ** 2)) for n in names)
        return math.sqrt(num / max(den, 1e-300))

    rows = [(n + kind, err(htr, n + kind), err(t32, n + kind), err(tn, n + kind)) for kind in kinds for n in names]
    rows.sort(key=lambda r: -r[1] / max(r[2], r[3], 1e-30))
    print(f"{'tensor':<30} {'htr':>9} {'pytorch':>9} {'noise':>9} {'htr/pt':>7}")
    for key, eh, et, en in rows[:20]:
        print(f"{key:<30} {eh:>9.2e} {et:>9.2e} {en:>9.2e} {eh / max(et, en, 1e-30):>7.1f}")
    totals = {kind: (total_err(htr, kind), total_err(t32, kind), total_err(tn, kind)) for kind in kinds}
    if k >= 2:  # the losses after the updates: the forward pass at the updated parameters
        lh = [log[s]["loss"] for s in range(k)]

        def loss_err(ls):
            return sum(abs(x - y) / abs(y) for x, y in zip(ls[1:], l64[1:])) / (k - 1)
        floor = 2e-7  # a few float32 ulps of the loss: below it the errors are equal
        totals[".loss"] = (loss_err(lh), max(loss_err(l32), floor), max(loss_err(ln), floor))
    verdict = "MATCH" if all(h <= a.noise_factor * max(t, nz) for h, t, nz in totals.values()) else "MISMATCH"
    summary = {"compare": "grad_check", "verdict": verdict.lower(), "steps": k, "preset": a.preset,
               "batch": a.batch, "seq": a.seq, "htr_device": a.device, "torch_device": str(dev),
               "precision": a.precision, "rel_err_htr_torch_noise": {kd[1:]: v for kd, v in totals.items()},
               "worst": list(rows[0]), "loss_htr": [log[s]["loss"] for s in range(k)],
               "loss_torch": l32, "loss_f64": l64, "grad_norm_htr": log[0]["grad_norm"],
               "torch": torch.__version__, "workdir": a.workdir}
    what = {".g0": "first-step gradient", ".dp": "parameter change", ".m": "first moment", ".v": "second moment",
            ".loss": "loss at the updated parameters (steps 1..K-1)"}
    for kind, (h, t, nz) in totals.items():
        how = "mean relative error" if kind == ".loss" else "relative L2 error"
        print(f"{what[kind]} after {k} step(s), {how} against float64: htr {h:.3e}, PyTorch "
              f"{t:.3e}, PyTorch two micro-batches {nz:.3e} (htr {h / max(t, nz, 1e-300):.2f}x the larger)")
    print(f"{verdict} (bound {a.noise_factor:g}x); losses htr {summary['loss_htr']} PyTorch {l32} float64 {l64}")
    line = json.dumps(summary)
    print(line, flush=True)
    if a.json:
        with open(a.json, "w") as f:
            f.write(line + "\n")
    return 0 if verdict == "MATCH" else 1


def moving(v, w):
    return [sum(v[i:i + w]) / w for i in range(0, len(v) - w + 1)]


def rel_diffs(xs, ref):
    return [abs(x - t) / abs(t) if x is not None and math.isfinite(x) else float("inf")
            for x, t in zip(xs, ref)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--htr-train", required=True)
    ap.add_argument("--preset", default="tiny", choices=sorted(PRESETS))
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--device", default="cpu:0", help="htr-train's device")
    ap.add_argument("--torch-device", default="auto")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--seq", type=int, default=0)
    ap.add_argument("--data")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--lr", type=float)
    ap.add_argument("--warmup", type=int)
    ap.add_argument("--lr-schedule", default="cosine", choices=["cosine", "constant"])
    ap.add_argument("--min-lr-ratio", type=float, default=0.1)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--attention", default="auto", choices=["auto", "manual", "sdpa"])
    ap.add_argument("--rtol", type=float)
    ap.add_argument("--window", type=int, default=10)
    ap.add_argument("--noise-factor", type=float, default=3.0)
    ap.add_argument("--no-noise", action="store_true")
    ap.add_argument("--noise", default="micro,ulp,attn",
                    help="the equally valid PyTorch runs whose spread is the noise: " + ", ".join(NOISE_KINDS))
    ap.add_argument("--workdir")
    ap.add_argument("--json")
    ap.add_argument("--reuse-htr", action="store_true")
    ap.add_argument("--perturb", default="none", choices=["none", "init", "data", "lr"])
    ap.add_argument("--grad-check", type=int, default=0, metavar="K",
                    help="instead of the curve: K steps' gradients/parameters/moments against float64")
    a = ap.parse_args()

    unknown = [k for k in a.noise.split(",") if k and k not in NOISE_KINDS]
    if unknown:
        ap.error(f"--noise: unknown kind {unknown[0]} (known: {', '.join(NOISE_KINDS)})")
    a.layers, a.width, a.heads, ctx, batch, lr, warmup = PRESETS[a.preset]
    a.batch = a.batch or batch
    a.seq = a.seq or ctx
    a.lr = lr if a.lr is None else a.lr
    a.warmup = warmup if a.warmup is None else a.warmup
    if a.rtol is None:
        a.rtol = 3e-2 if a.precision == "bf16" else 1e-3
    if a.torch_device == "auto":
        a.torch_device = "cuda" if not a.device.startswith("cpu") and torch.cuda.is_available() else "cpu"
    dev = torch.device(a.torch_device)
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.backends.cuda.matmul.allow_tf32 = False  # htr's f32 matmuls are IEEE f32
    torch.backends.cudnn.allow_tf32 = False
    a.workdir = a.workdir or tempfile.mkdtemp(prefix="htr-loss-curve-")
    os.makedirs(a.workdir, exist_ok=True)
    paths = {"data": a.data or os.path.join(a.workdir, "data.txt"),
             "init": os.path.join(a.workdir, "init.safetensors"),
             "log": os.path.join(a.workdir, "htr-log.jsonl"),
             "out": os.path.join(a.workdir, "htr-out")}
    if not a.data and not os.path.exists(paths["data"]):
        make_corpus(paths["data"])
    with open(paths["data"], "rb") as f:
        data = np.frombuffer(f.read(), dtype=np.uint8)
    if len(data) < a.seq + 2:
        print(f"FAIL: {paths['data']}: {len(data)} bytes is too little data for --seq {a.seq}")
        return 1

    if a.grad_check:
        try:
            return grad_check(a, paths, data, dev)
        except RuntimeError as e:
            print(f"FAIL: {e}")
            return 1
    try:
        htr_s = run_htr(a, paths)
    except RuntimeError as e:
        print(f"FAIL: {e}")
        return 1
    with open(paths["log"]) as f:
        htr_loss = {r["step"]: r["loss"] for r in map(json.loads, f) if "loss" in r}
    weights = read_safetensors(paths["init"])

    t0 = time.time()
    ref = train_torch(a, data, weights, dev)
    torch_s = time.time() - t0
    noises = {}  # kind -> per-step losses of that equally valid PyTorch run
    for kind in ([] if a.no_noise else [k for k in a.noise.split(",") if k]):
        if kind == "micro" and a.batch >= 2:
            noises[kind] = train_torch(a, data, weights, dev, micro=2)
        elif kind == "ulp":
            noises[kind] = train_torch(a, data, ulp_init(weights), dev)
        elif kind == "attn":
            uses_sdpa = a.attention == "sdpa" or (a.attention == "auto" and dev.type != "cpu"
                                                   and hasattr(F, "scaled_dot_product_attention"))
            if uses_sdpa or hasattr(F, "scaled_dot_product_attention"):
                noises[kind] = train_torch(a, data, weights, dev, attention="manual" if uses_sdpa else "sdpa")
            else:
                print(f"noise run 'attn' skipped: torch {torch.__version__} has no scaled_dot_product_attention")

    with open(os.path.join(a.workdir, "curves.json"), "w") as f:  # every run's per-step losses
        json.dump({"htr": [htr_loss.get(s) for s in range(len(ref))], "pytorch": ref, "noise": noises}, f)
    rels = rel_diffs([htr_loss.get(s) for s in range(len(ref))], ref)
    worst_step = max(range(len(rels)), key=lambda i: rels[i])
    w = min(a.window, len(ref))
    hs = [htr_loss.get(s, float("nan")) for s in range(len(ref))]
    avg_rel = max((abs(x - y) / abs(y) for x, y in zip(moving(hs, w), moving(ref, w))), default=0.0)
    htr_win = max(moving(rels, w), default=0.0)
    noise_wins = {k: max(moving(rel_diffs(v, ref), w), default=0.0) for k, v in noises.items()}
    noise_kind = max(noise_wins, key=noise_wins.get) if noises else None  # the widest spread
    noise = noises.get(noise_kind)
    noise_rels = rel_diffs(noise, ref) if noise else None
    noise_win = noise_wins[noise_kind] if noise else None
    if rels[worst_step] <= a.rtol:
        verdict = "MATCH"
    elif noise and htr_win <= a.noise_factor * noise_win:
        verdict = "MATCH_WITHIN_NOISE"
    else:
        verdict = "MISMATCH"

    every = 1 if a.steps <= 40 else max(1, a.steps // 20)
    print(f"{'step':>5} {'htr':>11} {'pytorch':>11} {'rel diff':>9}" + (f" {'noise':>9}" if noise else ""))
    for s in range(len(ref)):
        if s % every == 0 or s == len(ref) - 1 or s == worst_step:
            flag = "  <-- over rtol" if rels[s] > a.rtol else ""
            nz = f" {noise_rels[s]:>9.2e}" if noise else ""
            print(f"{s:>5} {hs[s]:>11.6f} {ref[s]:>11.6f} {rels[s]:>9.2e}{nz}{flag}")
    summary = {
        "compare": "loss_curve", "verdict": verdict.lower(), "preset": a.preset, "steps": a.steps,
        "batch": a.batch, "seq": a.seq, "htr_device": a.device, "torch_device": str(dev),
        "precision": a.precision, "perturb": a.perturb, "rtol": a.rtol,
        "worst_rel": rels[worst_step], "worst_step": worst_step,
        "mean_rel": sum(rels) / len(rels), f"worst_rel_avg{w}": avg_rel,
        f"worst_window{w}_rel": htr_win, f"noise_worst_window{w}_rel": noise_win,
        "noise_worst_rel": max(noise_rels) if noise else None, "noise_factor": a.noise_factor,
        "noise_kind": noise_kind, f"noise_worst_window{w}_rel_by_kind": noise_wins,
        "first_loss": [hs[0], ref[0]], "final_loss": [hs[-1], ref[-1]],
        "htr_s": round(htr_s, 2), "torch_s": round(torch_s, 2), "torch": torch.__version__,
        "workdir": a.workdir,
    }
    print(f"{verdict}: worst relative difference {rels[worst_step]:.3e} at step {worst_step} "
          f"(bound {a.rtol:g}), mean {summary['mean_rel']:.3e}, {w}-step averages "
          f"{avg_rel:.3e}; final loss htr {hs[-1]:.6f} vs pytorch {ref[-1]:.6f}")
    if noise:
        for k, v in noise_wins.items():
            print(f"noise run '{k}' ({NOISE_KINDS[k]}): worst {w}-step mean {v:.3e}")
        print(f"noise (the widest: '{noise_kind}'): worst {max(noise_rels):.3e}, worst {w}-step mean "
              f"{noise_win:.3e}; htr's worst {w}-step mean {htr_win:.3e} = "
              f"{htr_win / noise_win if noise_win > 0 else float('inf'):.2f}x the noise (bound {a.noise_factor:g}x)")
    line = json.dumps(summary)
    print(line, flush=True)
    if a.json:
        with open(a.json, "w") as f:
            f.write(line + "\n")
    return 0 if verdict != "MISMATCH" else 1


if __name__ == "__main__":
    sys.exit(main())
