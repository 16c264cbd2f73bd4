#!/usr/bin/python3
"""htr-train --preset tiny on cpu with the attention rewrite of the fusion pass on and off
(HTR_FUSE_ATTENTION=0; both runs HTR_FUSION=force so that no timing decides what fuses): the run
with it must plan every layer's attention as the fused flash-attention steps (op_info impl
fused:attention and fused:attention_grad, scheduler/attention_fusion.h), the other none, and the
per-step training losses must agree within 1e-5 relative.

usage: attention_train_parity.py HTR_TRAIN [STEPS]"""
import os
import sys
import tempfile

from train_runs import compare, make_data, run


def rows(text, impl):
    return [l.strip() for l in text.splitlines() if "[fused:%s]" % impl in l]


def main():
    exe = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    with tempfile.TemporaryDirectory() as work:
        make_data(os.path.join(work, "data.txt"))
        tiny = ["--preset", "tiny"]
        fused, ftext = run(exe, work, "attention", steps,
                           {"HTR_FUSION": "force", "HTR_FUSE_ATTENTION": "1"}, tiny)
        plain, ptext = run(exe, work, "composite", steps,
                           {"HTR_FUSION": "force", "HTR_FUSE_ATTENTION": "0"}, tiny)
    fwd, bwd = rows(ftext, "attention"), rows(ftext, "attention_grad")
    print("fused attention plan rows:\n  " + "\n  ".join(fwd + bwd))
    if not fwd or len(fwd) != len(bwd):
        sys.exit("expected one fused:attention and one fused:attention_grad step per layer, got %d and %d"
                 % (len(fwd), len(bwd)))
    if rows(ptext, "attention") or rows(ptext, "attention_grad"):
        sys.exit("HTR_FUSE_ATTENTION=0 still fused attention")
    if "[fused:" not in ptext:
        sys.exit("HTR_FUSE_ATTENTION=0 turned the rest of the fusion pass off too")
    worst = compare("fused attention", fused, "composite", plain)
    print("ok: worst relative difference %.2e over %d steps" % (worst, steps))


if __name__ == "__main__":
    main()
