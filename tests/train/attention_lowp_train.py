#!/usr/bin/python3
"""htr-train --preset tiny on cpu under mixed precision with the attention rewrite of the fusion
pass (scheduler/attention_fusion.h) on and off (HTR_FUSE_ATTENTION=0: the precision pass's unfused
lowp program, what ran before the rewrite took bf16/f16 programs); HTR_FUSION=force in both so
that no timing decides what fuses. For bf16 and fp16 in the device execution mode (HTR_EXEC=device)
and bf16 in the host mode, the run with the rewrite must plan every layer's attention as one
fused:attention and one fused:attention_grad step and no softmax, causal_mask or softmax_grad
(nor a fused group containing one), the run without it none; the losses must fall and
agree within 1e-3 relative per step (bf16 rounding of the T x T values that the unfused program
stores; measured about 2e-5 over 4 steps).

usage: attention_lowp_train.py HTR_TRAIN [STEPS]"""
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "graph"))
from train_runs import compare, make_data, run  # noqa: E402


def plan_count(text, impl):
    """Steps of the printed plan whose impl is `impl` (rows read 'op [impl]   xN   ...')."""
    n = 0
    for line in text.splitlines():
        m = re.search(r"\[%s\]\s+x(\d+)" % re.escape(impl), line)
        if m:
            n += int(m.group(1))
    return n


def layers(text):
    m = re.search(r"model (\d+) layers", text)
    if not m:
        sys.exit("htr-train did not print its model's layer count")
    return int(m.group(1))


def main():
    exe = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    worst_all = 0.0
    with tempfile.TemporaryDirectory() as work:
        make_data(os.path.join(work, "data.txt"))
        for precision, mode in (("bf16", "device"), ("fp16", "device"), ("bf16", "host")):
            tag = "%s-%s" % (precision, mode)
            args = ["--preset", "tiny", "--precision", precision]
            env = {"HTR_FUSION": "force", "HTR_EXEC": mode}
            fused, ftext = run(exe, work, tag + "-attention", steps, dict(env, HTR_FUSE_ATTENTION="1"), args)
            plain, ptext = run(exe, work, tag + "-composite", steps, dict(env, HTR_FUSE_ATTENTION="0"), args)
            n = layers(ftext)
            fwd, bwd = plan_count(ftext, "fused:attention"), plan_count(ftext, "fused:attention_grad")
            print("%s: %d layers, %d fused:attention, %d fused:attention_grad" % (tag, n, fwd, bwd))
            if fwd != n or bwd != n:
                print(ftext)
                sys.exit("%s: expected %d fused:attention and fused:attention_grad steps, got %d and %d"
                         % (tag, n, fwd, bwd))
            plan = [l for l in ftext.splitlines() if l.startswith("  ") and "[" in l]
            # (mul_scalar is not looked for: fp16's loss scaling has its own)
            left = [l.strip() for l in plan if re.search(r"softmax|causal_mask", l)]
            if left:
                sys.exit("%s: the attention pattern's ops are still planned:\n  %s" % (tag, "\n  ".join(left)))
            if plan_count(ptext, "fused:attention") or plan_count(ptext, "fused:attention_grad"):
                sys.exit("%s: HTR_FUSE_ATTENTION=0 still fused attention" % tag)
            if not fused[-1] < fused[0]:
                sys.exit("%s: the loss did not fall (%s)" % (tag, fused))
            worst_all = max(worst_all, compare(tag + " fused", fused, "unfused", plain, bound=1e-3))
    print("ok: worst relative difference %.2e" % worst_all)


if __name__ == "__main__":
    main()
