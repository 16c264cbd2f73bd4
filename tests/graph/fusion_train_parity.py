#!/usr/bin/python3
"""htr-train --preset tiny on cpu with the fusion pass on (the default) and off (HTR_FUSION=0):
the fused run's plan must contain fused groups (generated kernels), the unfused run's none, and
the per-step training losses must agree within 1e-5 relative.

usage: fusion_train_parity.py HTR_TRAIN [STEPS]"""
import os
import sys
import tempfile

from train_runs import compare, make_data, run


def main():
    exe = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    with tempfile.TemporaryDirectory() as work:
        make_data(os.path.join(work, "data.txt"))
        tiny = ["--preset", "tiny"]
        fused, ftext = run(exe, work, "fused", steps, {"HTR_FUSION": "1"}, tiny)
        plain, ptext = run(exe, work, "plain", steps, {"HTR_FUSION": "0"}, tiny)
    fused_lines = [l for l in ftext.splitlines() if "[fused:" in l]
    print("fused plan rows:\n  " + "\n  ".join(l.strip() for l in fused_lines))
    if not fused_lines:
        sys.exit("the fused run's plan has no fused groups")
    if "[fused:" in ptext:
        sys.exit("HTR_FUSION=0 still fused ops")
    worst = compare("fused", fused, "unfused", plain)
    print("ok: worst relative difference %.2e over %d steps" % (worst, steps))


if __name__ == "__main__":
    main()
