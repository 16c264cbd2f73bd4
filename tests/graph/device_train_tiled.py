#!/usr/bin/python3
"""The device mode's tiled elementwise groups (scheduler/fused_kernel.h, BuildFusedLaunches'
tile_rows) end to end on cpu: htr-train with rows of 192 and 768 columns (not powers of two, so
GELU / residual / bias groups tile with HTR_TILE_ROWS=1), every op a generated kernel, fusion
forced; per-step losses within 1e-5 relative of the reference mode (HTR_EXEC=host HTR_FUSION=0),
and the debug log must show a tiled GELU group (launch grid y > 1). Without HTR_TILE_ROWS the cpu plugin must not tile
(scheduler/fused_exec.h TileRowsFor: cuda only by default) and match the reference too. The
states are updated in place in both device runs (device_exec.h AssignInPlace; the log line
is checked).

usage: device_train_tiled.py HTR_TRAIN [STEPS]"""
import os
import re
import sys
import tempfile

from train_runs import make_data, not_generated, plan_rows, run, worst_rel

SHAPE = ["--layers", "1", "--width", "192", "--heads", "2", "--ctx", "16", "--batch", "4",
         "--warmup", "0", "--lr", "1e-2", "--seed", "11"]


def main():
    exe = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    failed = []
    with tempfile.TemporaryDirectory() as work:
        make_data(os.path.join(work, "data.txt"), 20000)
        ref, _ = run(exe, work, "reference", steps, {"HTR_EXEC": "host", "HTR_FUSION": "0"}, SHAPE, 900)
        for tile in ("1", None):
            name = "generated tile_rows=%s" % (tile or "default")
            env = {"HTR_EXEC": "device", "HTR_KERNELS": "generated", "HTR_FUSION": "force",
                   "HTR_CPU_JIT": "compiler", "HTR_LOG": "debug"}
            env["HTR_TILE_ROWS"] = tile or ""  # "": the default (TileRowsFor)
            losses, text = run(exe, work, name.replace(" ", "_").replace("=", "_"), steps, env, SHAPE, 900)
            # fused_exec.cc logs each group's launch grids at debug level; a tiled row group has
            # grid (cols / seg, row blocks), the row layout (rows, 1).
            tiled = [l for l in text.splitlines()
                     if re.search(r"fusion: \S*gelu\S* launch grid \d+ x ([2-9]|\d\d+) x 1", l)]
            gelu = [l for l in text.splitlines() if re.search(r"fusion: \S*gelu\S* launch grid", l)]
            if not gelu:
                failed.append("%s: no GELU group's launch in the debug log" % name)
            rows = plan_rows(text)
            bad = not_generated(rows)
            if bad:
                failed.append("%s: steps not generated: %s" % (name, "; ".join(bad)))
            if tile and not tiled:
                failed.append("%s: no tiled group in the debug log" % name)
            if not tile and tiled:
                failed.append("%s: tiled on cpu without HTR_TILE_ROWS: %s" % (name, tiled[0]))
            if not any("write their state in place" in l for l in text.splitlines()):
                failed.append("%s: no assignment written in place" % name)
            worst = worst_rel(losses, ref)
            print("%-30s %s worst rel %.2e (%d tiled group builds)" %
                  (name, " ".join("%.8f" % v for v in losses), worst, len(tiled)))
            if worst > 1e-5:
                failed.append("%s: losses differ by %.2e relative (bound 1e-5)" % (name, worst))
    print("%-30s %s" % ("reference", " ".join("%.8f" % v for v in ref)))
    if failed:
        sys.exit("\n".join(failed))
    print("ok: %d steps, tiled and untiled generated runs within 1e-5 of the reference" % steps)


if __name__ == "__main__":
    main()
