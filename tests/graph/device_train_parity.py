#!/usr/bin/python3
"""htr-train on cpu with every op a generated kernel (HTR_EXEC=device HTR_KERNELS=generated):
fusion on and off (HTR_FUSION=force / 0), cpu JIT compiler and interpreter (HTR_CPU_JIT); each run's
per-step losses must agree with the reference mode (HTR_EXEC=host HTR_FUSION=0: reference kernels
and library matmul) within 1e-5 relative, and the generated plans must have no step that runs a
reference kernel or a library op. Small shapes (the interpreter is slow on tiny's matmuls).

usage: device_train_parity.py HTR_TRAIN [STEPS]"""
import os
import sys
import tempfile

from train_runs import make_data, not_generated, plan_rows, run, worst_rel

SHAPE = ["--layers", "2", "--width", "32", "--heads", "2", "--ctx", "16", "--batch", "4",
         "--warmup", "0", "--lr", "1e-2", "--seed", "7"]


def main():
    exe = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    failed = []
    with tempfile.TemporaryDirectory() as work:
        make_data(os.path.join(work, "data.txt"), 20000)
        ref, _ = run(exe, work, "reference", steps, {"HTR_EXEC": "host", "HTR_FUSION": "0"}, SHAPE, 900)
        # force: every group that compiles (no speed auto-tune: the interpreter's fused kernels
        # are slower than the reference, and this test is about which kernels run).
        for fusion in ("force", "0"):
            for jit in ("compiler", "interpreter"):
                name = "generated fusion=%s jit=%s" % (fusion, jit)
                losses, text = run(exe, work, name.replace(" ", "_"), steps,
                                   {"HTR_EXEC": "device", "HTR_KERNELS": "generated",
                                    "HTR_FUSION": fusion, "HTR_CPU_JIT": jit}, SHAPE, 900)
                rows = plan_rows(text)
                if not rows:
                    failed.append("%s: no plan printed" % name)
                bad = not_generated(rows)
                if bad:
                    failed.append("%s: steps not generated: %s" % (name, "; ".join(bad)))
                if fusion == "force" and not any("[fused:" in r for r in rows):
                    failed.append("%s: no fused groups" % name)
                if fusion == "0" and any("[fused:" in r for r in rows):
                    failed.append("%s: fused with HTR_FUSION=0" % name)
                worst = worst_rel(losses, ref)
                print("%-36s %s worst rel %.2e" % (name, " ".join("%.8f" % v for v in losses), worst))
                if worst > 1e-5:
                    failed.append("%s: losses differ by %.2e relative (bound 1e-5)" % (name, worst))
    print("%-36s %s" % ("reference", " ".join("%.8f" % v for v in ref)))
    if failed:
        sys.exit("\n".join(failed))
    print("ok: %d steps, 4 generated configurations within 1e-5 of the reference" % steps)


if __name__ == "__main__":
    main()
