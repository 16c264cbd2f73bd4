#!/usr/bin/env python3
"""Trains htr-train's GPT-2 from Python through htr's graph API, on any
device htr finds (cpu, cuda, vulkan):

    PYTHONPATH=python python3 samples/python/train_gpt.py --steps 50
    python3 samples/python/train_gpt.py --device cuda:0 --preset small

The model (gpt.py), the training step (forward, cross-entropy, autodiff,
global-norm clipping, AdamW with decoupled weight decay on matmul weights
and embeddings, optional gradient accumulation: one executable run per
micro-batch), the learning-rate schedule (linear warmup, then cosine or
constant), the data (a byte-level corpus: --data FILE or the fortunes
collection, split off a validation tail) and batching (--data-order
sequential|random) follow samples/htr-train exactly, so with the same
flags and seed the per-step losses equal htr-train's
(tests/python/test_train.py checks that). --log-json writes htr-train's
JSON lines. fp16 (which needs dynamic loss scaling) is left to htr-train.
"""
import argparse
import math
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
try:
    import htr
except ImportError:  # run from a checkout without PYTHONPATH
    sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
    import htr

import gpt  # noqa: E402

FORTUNES = "/usr/share/games/fortunes"
PRESETS = {  # layers, width, heads, ctx, batch, steps, lr, warmup (samples/htr-train/args.cc)
    "tiny": (4, 128, 4, 128, 16, 400, 3e-3, 50),
    "small": (6, 384, 6, 256, 32, 2000, 1e-3, 100),
    "gpt2": (12, 768, 12, 1024, 8, 5000, 6e-4, 200),
}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    for name in ("layers", "width", "heads", "ctx", "batch", "steps", "warmup", "seq"):
        p.add_argument("--" + name, type=int)
    p.add_argument("--lr", type=float)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--device", default=None, help="device id (cpu:0, cuda:0); default: the best")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--min-lr-ratio", type=float, default=0.1)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.95)
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--lr-schedule", choices=["cosine", "constant"], default="cosine")
    p.add_argument("--grad-clip", type=float, default=1.0, help="0 = off")
    p.add_argument("--grad-accum", type=int, default=1)
    p.add_argument("--data", default="", help="a text file (default: the fortunes corpus)")
    p.add_argument("--data-order", choices=["random", "sequential"], default="random")
    p.add_argument("--val-fraction", type=float, default=0.1)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--log-json", default="", help="append one JSON line per step (htr-train's)")
    p.add_argument("--save", default="", help="final weights (safetensors, Hugging Face names)")
    p.add_argument("--profile", default="", help="Chrome trace of the steps")
    p.add_argument("--print-every", type=int, default=10)
    a = p.parse_args(argv)
    layers, width, heads, ctx, batch, steps, lr, warmup = PRESETS[a.preset]
    a.layers = a.layers if a.layers is not None else layers
    a.width = a.width if a.width is not None else width
    a.heads = a.heads if a.heads is not None else heads
    a.ctx = a.ctx if a.ctx is not None else ctx
    a.batch = a.batch if a.batch is not None else batch
    a.steps = a.steps if a.steps is not None else steps
    a.lr = a.lr if a.lr is not None else lr
    a.warmup = a.warmup if a.warmup is not None else warmup
    a.seq = a.seq if a.seq is not None else a.ctx
    if a.seq > a.ctx:
        p.error(f"--seq {a.seq} exceeds the context length {a.ctx}")
    if a.width % a.heads:
        p.error(f"width {a.width} is not divisible by {a.heads} heads")
    if a.grad_accum < 1:
        p.error("--grad-accum must be >= 1")
    return a


# ---------------------------------------------------------------- data

def load_corpus(path, val_fraction, min_len):
    """(train bytes, validation bytes) as in samples/htr-train/data.cc."""
    if path:
        with open(path, "rb") as f:
            data = f.read()
        source = path
    else:
        if not os.path.isdir(FORTUNES):
            raise SystemExit(f"{FORTUNES}: not found: install the 'fortunes' package or pass --data")
        names = sorted(n for n in os.listdir(FORTUNES)
                       if not n.startswith(".") and not n.endswith((".dat", ".u8"))
                       and os.path.isfile(os.path.join(FORTUNES, n)))
        data = b"".join(open(os.path.join(FORTUNES, n), "rb").read() for n in names)
        source = FORTUNES
    if not data:
        raise SystemExit(f"{source}: the data is empty")
    val_len = int(math.floor(len(data) * val_fraction))
    train = np.frombuffer(data[:len(data) - val_len], dtype=np.uint8)
    if len(train) < min_len:
        raise SystemExit(f"{source}: {len(data)} bytes is too little data for --seq")
    return source, train, np.frombuffer(data[len(data) - val_len:], dtype=np.uint8)


class BatchSampler:
    """Row starts: sequential ((step*rows_per_step + r) * seq mod span) or
    uniform from the sampler's RNG (seed ^ 0xda7a5eed), as htr-train."""

    def __init__(self, data, seq, sequential, seed):
        self.data, self.seq, self.sequential = data, seq, sequential
        self.rng = gpt.Rng(seed ^ 0xDA7A5EED)

    def fill(self, step, rows_per_step, first_row, rows):
        span = len(self.data) - self.seq - 1
        starts = []
        for r in range(rows):
            if self.sequential:
                idx = step * rows_per_step + first_row + r
                starts.append((idx * self.seq) % span)
            else:
                starts.append(self.rng.below(span))
        rows_ = np.stack([self.data[s:s + self.seq + 1] for s in starts]).astype(np.int32)
        return np.ascontiguousarray(rows_[:, :-1]), np.ascontiguousarray(rows_[:, 1:])


def learning_rate(a, step, total):
    if a.warmup > 0 and step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    if a.lr_schedule == "constant":
        return a.lr
    min_lr = a.lr * a.min_lr_ratio
    span = total - a.warmup - 1
    if span <= 0:
        return a.lr
    progress = min(1.0, (step - a.warmup) / span)
    return min_lr + 0.5 * (a.lr - min_lr) * (1.0 + math.cos(3.141592653589793 * progress))


# ---------------------------------------------------------------- step graph

def build_train_step(g, a, m, specs, B, T):
    """samples/htr-train/optimizer.cc BuildTrainStep (without fp16 loss scaling)."""
    accum = a.grad_accum > 1
    params = gpt.declare_params(g, specs)
    mom1, mom2, acc = [], [], []
    for s in specs:
        mom1.append(g.state("adam.m." + s.name, "f32", s.shape))
        mom2.append(g.state("adam.v." + s.name, "f32", s.shape))
        if accum:
            acc.append(g.state("accum." + s.name, "f32", s.shape))
    ids = g.input("ids", "i32", [B, T])
    targets = g.input("targets", "i32", [B, T])
    lr = g.input("lr", "f32", [])
    step = g.input("step", "f32", [])
    apply = g.input("apply", "f32", []) if accum else None

    logits = gpt.forward(g, m, params, ids, B, T)
    loss = gpt.loss(g, logits, targets, B * T)
    g.output("loss", loss)
    grads = g.gradients(loss, params)
    keep = None
    if accum:
        keep = g.op("add_scalar", [g.op("neg", [apply])], value=1.0)
        for i in range(len(grads)):
            total = g.add(acc[i], grads[i])
            g.assign(acc[i], g.mul(total, keep))
            grads[i] = g.op("mul_scalar", [total], value=1.0 / a.grad_accum)
    norm = g.op_n("global_norm", grads)[0]
    g.output("grad_norm", norm)
    if a.grad_clip > 0:
        # coef = min(max_norm / (norm + 1e-6), 1), as torch.nn.utils.clip_grad_norm_
        clip = g.scalar(a.grad_clip)
        denom = g.op("add_scalar", [norm], value=1e-6)
        coef = g.op("minimum", [g.op("div", [clip, denom]), g.scalar(1.0)])
        grads = [g.mul(gr, coef) for gr in grads]
    for i, s in enumerate(specs):
        out = g.op_n("adamw_update", [params[i], grads[i], mom1[i], mom2[i], lr, step],
                     beta1=a.beta1, beta2=a.beta2, eps=a.eps,
                     weight_decay=a.weight_decay if s.decay else 0.0)
        for k, old in enumerate((params[i], mom1[i], mom2[i])):
            nxt = out[k]
            if accum:
                kept = g.mul(old, keep)
                nxt = g.add(g.mul(nxt, apply), kept)
            g.assign(old, nxt)


# ---------------------------------------------------------------- main

def main(argv=None):
    a = parse_args(argv)
    rt = htr.default_runtime()
    dev = rt.device(a.device)
    m = gpt.ModelShape(a.layers, a.width, a.heads, a.ctx, a.vocab)
    specs = gpt.model_params(m)
    source, train, val = load_corpus(a.data, a.val_fraction, a.seq + 2)
    nparams = sum(s.numel for s in specs)
    print(f"train_gpt: device {dev.id} | model {m.layers} layers, width {m.width}, {m.heads} heads, "
          f"ctx {m.ctx}, vocab {m.vocab} ({nparams / 1e6:.2f}M parameters)")
    print(f"train_gpt: data {source}: {len(train)} train + {len(val)} validation bytes")
    print(f"train_gpt: batch {a.batch} x {a.seq} tokens x {a.grad_accum} accumulation, "
          f"{a.steps} steps, lr {a.lr:g} ({a.lr_schedule}, warmup {a.warmup})", flush=True)

    g = htr.Graph()
    build_train_step(g, a, m, specs, a.batch, a.seq)
    exe = g.compile(dev, num_threads=a.threads, precision=a.precision)
    st = exe.plan_stats()
    print(f"train_gpt: plan: {st['num_ops']} ops per step ({st['num_library_ops']} library, "
          f"{st['num_fused_ops']} fused, {st['num_reference_ops']} reference), activations "
          f"{st['planned_peak_bytes'] / 1e6:.1f} MB planned, state {st['state_bytes'] / 1e6:.1f} MB")
    for s, v in zip(specs, gpt.init_params(specs, a.seed)):
        exe.get_state(s.name).copy_from(v)

    # Inputs: tensors on the executable's device, bound once and refilled.
    inputs = {"ids": htr.zeros([a.batch, a.seq], "i32", dev),
              "targets": htr.zeros([a.batch, a.seq], "i32", dev),
              "lr": htr.zeros([], "f32", dev), "step": htr.zeros([], "f32", dev)}
    if a.grad_accum > 1:
        inputs["apply"] = htr.zeros([], "f32", dev)
    for name, t in inputs.items():
        exe.set_input(name, t)

    sampler = BatchSampler(train, a.seq, a.data_order == "sequential", a.seed)
    log = open(a.log_json, "a") if a.log_json else None
    tokens_per_step = a.batch * a.seq * a.grad_accum
    if a.profile:
        htr.profiler.start(rt)
    start = time.perf_counter()
    for step in range(a.steps):
        t0 = time.perf_counter()
        lr = learning_rate(a, step, a.steps)
        inputs["lr"].copy_from(np.float32(lr))
        inputs["step"].copy_from(np.float32(step + 1))
        losses = []
        with htr.profile_range(f"step {step}") if a.profile else _nothing():
            for k in range(a.grad_accum):
                x, y = sampler.fill(step, a.batch * a.grad_accum, k * a.batch, a.batch)
                inputs["ids"].copy_from(x)
                inputs["targets"].copy_from(y)
                if a.grad_accum > 1:
                    inputs["apply"].copy_from(np.float32(1.0 if k + 1 == a.grad_accum else 0.0))
                exe.run()
                losses.append(float(exe.output("loss").numpy()))
        grad_norm = float(exe.output("grad_norm").numpy())
        loss = sum(losses) if a.grad_accum == 1 else sum(losses) / a.grad_accum
        if not math.isfinite(loss):
            raise SystemExit(f"train_gpt: step {step}: the loss is not finite ({loss}); lower --lr?")
        dt = time.perf_counter() - t0
        if log:
            log.write('{"step": %d, "loss": %.9g, "lr": %.9g, "tokens_per_s": %.6g, '
                      '"grad_norm": %.9g}\n' % (step, loss, lr, tokens_per_step / dt, grad_norm))
            log.flush()
        if step % a.print_every == 0 or step + 1 == a.steps:
            print(f"step {step:5d} | loss {loss:.4f} | lr {lr:.2e} | grad norm {grad_norm:.3f} | "
                  f"{tokens_per_step / dt:.0f} tok/s", flush=True)
    elapsed = time.perf_counter() - start
    if a.profile:
        htr.profiler.stop()
        htr.profiler.write(a.profile)
        print(f"train_gpt: trace {a.profile}")
    if log:
        log.close()
    print(f"train_gpt: {a.steps} steps in {elapsed:.1f} s "
          f"({tokens_per_step * a.steps / max(elapsed, 1e-9):.0f} tokens/s)")
    if a.save:
        htr.save_checkpoint(a.save, {s.name: exe.get_state(s.name) for s in specs},
                            {"format": "pt"})
        print(f"train_gpt: weights {a.save}")
    return 0


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    sys.exit(main())
