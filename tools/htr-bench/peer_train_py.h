// peer_train_py.h — the PyTorch side of `htr-bench train`, kept as Python source inside the
// binary so an installed htr-bench needs no data files. bench_train.cc writes it to a temporary
// file and runs it with the Python given by --python (default /usr/bin/python3, Debian's
// python3-torch). `htr-bench train --print-peer-script` prints it.
//
// The model is htr-train's GPT-2 (samples/htr-train/model.cc) written the usual PyTorch way:
// learned positions, pre-LayerNorm (eps 1e-5), fused qkv Conv1D-style linear (y = x W + b with W
// [in, out]), causal attention with scale 1/sqrt(head dim), GELU (tanh), tied output head, vocab
// 256; mean cross-entropy; AdamW (betas 0.9/0.95, eps 1e-8, weight decay 0.1 on matrices only) and
// gradient clipping at 1.0, as htr-train's defaults. Each step is timed from the forward pass to
// the end of the optimizer step (with a device synchronize on a GPU); the last line is a JSON
// summary with the per-step seconds after --warmup.
//
// Two set-ups, chosen by bench_train.cc's flags:
// - cpu (the default, unchanged): fp32, eager, attention written out (matmul, mask, softmax),
//   AdamW's default implementation, torch.set_num_threads(--threads).
// - a GPU (--device cuda[:N]): what a PyTorch user runs for speed: --precision bf16 autocasts
//   the forward and loss to bf16 (fp32 weights, AdamW state and gradients), fp32 disables TF32
//   (htr's f32 matmuls are IEEE f32); --mode compile wraps the loss in torch.compile (the warmup
//   steps absorb the compile; the first step's seconds are reported as first_step_s); attention
//   through F.scaled_dot_product_attention(is_causal=True) (flash attention for bf16 on Hopper);
//   torch.optim.AdamW(fused=True).
// --attention and --fused-adamw override either default. --profile N records the last step with
// torch.profiler and prints its top N kernels by self device time to stderr (that step's timing
// includes the profiler's cost); for reading where the peer's step goes next to htr-prof's.
#ifndef HTR_TOOLS_HTR_BENCH_PEER_TRAIN_PY_H_
#define HTR_TOOLS_HTR_BENCH_PEER_TRAIN_PY_H_

namespace bench {

inline constexpr const char kPeerTrainPy[] = R"PY(
import argparse, json, math, sys, time
import torch
import torch.nn.functional as F

# layers, width, heads, ctx, batch: htr-train's presets (samples/htr-train/args.cc)
PRESETS = {"tiny": (4, 128, 4, 128, 16), "small": (6, 384, 6, 256, 32), "gpt2": (12, 768, 12, 1024, 8)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="tiny", choices=sorted(PRESETS))
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--seq", type=int, default=0)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--mode", default="eager", choices=["eager", "compile"])
    ap.add_argument("--attention", default="auto", choices=["auto", "manual", "sdpa"])
    ap.add_argument("--fused-adamw", default="auto", choices=["auto", "on", "off"])
    ap.add_argument("--profile", type=int, default=0)
    a = ap.parse_args()
    L, C, H, CTX, B = PRESETS[a.preset]
    B = a.batch or B
    T = a.seq or CTX
    V = 256
    hd = C // H
    dev = torch.device(a.device)
    gpu = dev.type != "cpu"
    sdpa = a.attention == "sdpa" or (a.attention == "auto" and gpu)
    fused = a.fused_adamw == "on" or (a.fused_adamw == "auto" and gpu)
    torch.set_num_threads(a.threads)
    if gpu and dev.index is not None:
        torch.cuda.set_device(dev)
    if a.precision == "fp32":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
    torch.manual_seed(0)

    def param(*shape, std=0.02, fill=None):
        t = torch.full(shape, float(fill)) if fill is not None else torch.randn(*shape) * std
        return t.float().to(dev).requires_grad_(True)

    proj = 0.02 / math.sqrt(2 * L)
    wte, wpe = param(V, C), param(CTX, C)
    blocks = [dict(ln1w=param(C, fill=1), ln1b=param(C, fill=0),
                   aw=param(C, 3 * C), ab=param(3 * C, fill=0),
                   pw=param(C, C, std=proj), pb=param(C, fill=0),
                   ln2w=param(C, fill=1), ln2b=param(C, fill=0),
                   fw=param(C, 4 * C), fb=param(4 * C, fill=0),
                   fpw=param(4 * C, C, std=proj), fpb=param(C, fill=0)) for _ in range(L)]
    lnfw, lnfb = param(C, fill=1), param(C, fill=0)
    params = [wte, wpe] + [t for b in blocks for t in b.values()] + [lnfw, lnfb]
    extra = {"fused": True} if fused else {}
    opt = torch.optim.AdamW([{"params": [t for t in params if t.dim() == 2], "weight_decay": 0.1},
                             {"params": [t for t in params if t.dim() != 2], "weight_decay": 0.0}],
                            lr=3e-3, betas=(0.9, 0.95), eps=1e-8, **extra)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=dev), diagonal=1)

    def attention(q, k, v):
        if sdpa:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0 / math.sqrt(hd))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        return att @ v

    def forward(ids):
        x = (wte[ids] + wpe[:T]).view(B * T, C)
        for b in blocks:
            h = F.layer_norm(x, (C,), b["ln1w"], b["ln1b"], eps=1e-5)
            qkv = torch.addmm(b["ab"], h, b["aw"])
            q, k, v = (z.view(B, T, H, hd).transpose(1, 2) for z in qkv.split(C, dim=-1))
            y = attention(q, k, v).transpose(1, 2).reshape(B * T, C)
            x = x + torch.addmm(b["pb"], y, b["pw"])
            h = F.layer_norm(x, (C,), b["ln2w"], b["ln2b"], eps=1e-5)
            h = F.gelu(torch.addmm(b["fb"], h, b["fw"]), approximate="tanh")
            x = x + torch.addmm(b["fpb"], h, b["fpw"])
        x = F.layer_norm(x, (C,), lnfw, lnfb, eps=1e-5)
        return x @ wte.t()

    def loss_of(ids, tgt):
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            return F.cross_entropy(forward(ids).float(), tgt.view(-1))

    step_loss = torch.compile(loss_of) if a.mode == "compile" else loss_of
    sync = (lambda: torch.cuda.synchronize(dev)) if gpu else (lambda: None)
    g = torch.Generator(device=dev).manual_seed(1)
    times, first = [], None
    last = a.warmup + a.steps - 1
    for step in range(a.warmup + a.steps):
        prof = None
        if a.profile > 0 and step == last:
            acts = [torch.profiler.ProfilerActivity.CPU]
            if gpu:
                acts.append(torch.profiler.ProfilerActivity.CUDA)
            prof = torch.profiler.profile(activities=acts)
            prof.__enter__()
        ids = torch.randint(0, V, (B, T), generator=g, device=dev)
        tgt = torch.randint(0, V, (B, T), generator=g, device=dev)
        sync()
        t0 = time.perf_counter()
        loss = step_loss(ids, tgt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sync()
        dt = time.perf_counter() - t0
        if prof is not None:
            prof.__exit__(None, None, None)
            table = None
            for key in ("self_device_time_total", "self_cuda_time_total", "self_cpu_time_total"):
                try:
                    table = prof.key_averages().table(sort_by=key, row_limit=a.profile, max_name_column_width=90)
                    break
                except Exception:  # older / newer spellings of the sort key
                    continue
            print(table, file=sys.stderr, flush=True)
        if first is None:
            first = dt
        if step >= a.warmup:
            times.append(dt)
        print(json.dumps({"step": step, "loss": loss.item(), "step_s": dt,
                          "tokens_per_s": B * T / dt}), flush=True)
    print(json.dumps({"summary": True, "threads": torch.get_num_threads(),
                      "torch": torch.__version__, "tokens_per_step": B * T,
                      "device": str(dev),
                      "device_name": torch.cuda.get_device_name(dev) if gpu else "cpu",
                      "precision": a.precision, "mode": a.mode,
                      "attention": "sdpa" if sdpa else "manual", "fused_adamw": fused,
                      "first_step_s": first, "step_s": times}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
)PY";

}  // namespace bench

#endif  // HTR_TOOLS_HTR_BENCH_PEER_TRAIN_PY_H_
