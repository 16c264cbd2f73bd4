#!/usr/bin/python3
"""Concurrent kernel compiles of executable creation (scheduler/parallel_compile.h): htr-train on
cpu in the device mode (HTR_EXEC=device) with HTR_COMPILE_THREADS=4 and =1 must print the same plan
(every step's impl) and log the same losses bit for bit, on a cold kernel cache (the threads=4 run
compiles every kernel concurrently; the threads=1 run then reads the cache it wrote, through the
same htr_kernel_compile calls).

Then with a compiler (HTR_CC) that refuses two kernels, a fused group's (fused_add_gelu) and a
generated one's (pw_add_scalar): both runs must still agree on plan and losses, the refused group must
be left unfused and the refused step run its reference kernel, and the refusal log lines (the
group or step and the error, temp file names removed) must be the same, in the same order.

usage: compile_threads_parity.py HTR_TRAIN [STEPS]"""
import os
import re
import stat
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "graph"))
from train_runs import make_data, run  # noqa: E402

SHAPE = ["--layers", "2", "--width", "32", "--heads", "2", "--ctx", "16", "--batch", "4",
         "--warmup", "0", "--lr", "1e-2", "--seed", "7"]

WRAPPER = """#!/bin/sh
# Refuses the sources of two kernels (htr_k_fused_add_gelu, htr_k_pw_add_scalar); compiles the rest.
for a in "$@"; do
  case "$a" in
    *.cc) if grep -q -e 'htr_k_fused_add_gelu(' -e 'htr_k_pw_add_scalar(' "$a"; then
            echo "injected compile failure" >&2; exit 1
          fi ;;
  esac
done
exec c++ "$@"
"""


def plan_rows(text):
    """The plan: its summary line and one row per op kind with its impl."""
    return [l.rstrip() for l in text.splitlines()
            if (l.startswith("  ") and "[" in l) or l.startswith("htr-train: plan:")]


def refusals(text):
    """First lines of the refusal logs, with the compiler's temp file names (pid.counter) and the
    cache directory removed."""
    out = []
    for l in text.splitlines():
        if "runs its reference kernel" in l or "left unfused" in l:
            l = re.sub(r"source [^ )]*", "source <tmp>", l)
            out.append(l)
    return out


def both(exe, work, tag, steps, env):
    """The threads=4 run, then the threads=1 run, on one (initially empty) cache directory."""
    cache = os.path.join(work, "cache-" + tag)
    os.mkdir(cache)
    res = {}
    for threads in ("4", "1"):
        # HTR_BIAS_EPILOGUE=0: keep the add+gelu group the refusing compiler looks for (the bias
        # epilogue, scheduler/bias_epilogue.h, would fold the add into the library matmul).
        e = dict(env, HTR_EXEC="device", HTR_COMPILE_THREADS=threads, HTR_CACHE_DIR=cache, HTR_LOG="info",
                 HTR_BIAS_EPILOGUE="0")
        res[threads] = run(exe, work, "%s_t%s" % (tag, threads), steps, e, SHAPE, 900)
    return res


def compare(tag, res, failed):
    (l4, t4), (l1, t1) = res["4"], res["1"]
    p4, p1 = plan_rows(t4), plan_rows(t1)
    print("%s: threads=4 losses %s" % (tag, " ".join("%.9g" % v for v in l4)))
    print("%s: threads=1 losses %s" % (tag, " ".join("%.9g" % v for v in l1)))
    if not p4:
        failed.append("%s: no plan printed" % tag)
    if p4 != p1:
        diff = [(a, b) for a, b in zip(p4, p1) if a != b][:3]
        failed.append("%s: plans differ (%d vs %d rows; first differences %s)" % (tag, len(p4), len(p1), diff))
    if l4 != l1:
        failed.append("%s: losses differ: %s vs %s" % (tag, l4, l1))
    return p4


def main():
    exe = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    failed = []
    with tempfile.TemporaryDirectory() as work:
        make_data(os.path.join(work, "data.txt"), 20000)
        rows = compare("plain", both(exe, work, "plain", steps, {}), failed)
        if not any("[fused:" in r for r in rows) or not any("[kernel:" in r for r in rows):
            failed.append("plain: expected fused and generated kernels in the plan")
        cc = os.path.join(work, "refusing-cc")
        with open(cc, "w") as f:
            f.write(WRAPPER)
        os.chmod(cc, os.stat(cc).st_mode | stat.S_IXUSR)
        res = both(exe, work, "refusing", steps, {"HTR_CC": cc})
        rows = compare("refusing", res, failed)
        r4, r1 = refusals(res["4"][1]), refusals(res["1"][1])
        for l in r4:
            print("refusing: " + l)
        if r4 != r1:
            failed.append("refusing: refusal logs differ:\n  %s\nvs\n  %s" % ("\n  ".join(r4), "\n  ".join(r1)))
        if not any("left unfused" in l and "gelu" in l for l in r4):
            failed.append("refusing: no add+gelu group was left unfused")
        if not any("runs its reference kernel" in l and "kernel compile" in l for l in r4):
            failed.append("refusing: no step fell back to its reference kernel after a refused compile")
        if not any("[reference" in r for r in rows):
            failed.append("refusing: no reference step in the plan")
        if any("fused:" in r and "gelu" in r for r in rows):
            failed.append("refusing: a group with gelu is still fused")
    if failed:
        sys.exit("\n".join(failed))
    print("ok: plans, losses and refusals identical with HTR_COMPILE_THREADS=4 and 1")


if __name__ == "__main__":
    main()
