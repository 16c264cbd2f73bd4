#!/usr/bin/python3
"""htr-train memory and precision checks (issue 5), each a few tiny-model steps.

  memory_cli_test.py HTR_TRAIN recompute    --recompute: identical fp32 losses, peak activations -50%
  memory_cli_test.py HTR_TRAIN precision    bf16/fp16: a few steps close to fp32; report numbers
  memory_cli_test.py HTR_TRAIN overflow     fp16 overflow injected: step skipped, scale halved
  memory_cli_test.py HTR_TRAIN oom          OOM mid-step: clear error, last checkpoint intact
  memory_cli_test.py HTR_TRAIN accuracy     300 tiny steps, fp32 vs bf16 vs fp16 val loss (long;
                                            run by hand, not in CI)
Exits 1 with a message on the first failed check.
"""
import os
import re
import sys

from htr_train_cli import check_skips_halve, fail, losses, memory_json, run_mode, skipped_steps, val_loss
from htr_train_cli import run as run_train

EXE = sys.argv[1]
MODE = sys.argv[2]
# A small model so a step is cheap even under ASan: 2 layers, batch 2, seq 64.
SMALL = ["--preset", "tiny", "--layers", "2", "--batch", "2", "--seq", "64", "--eval-every", "0",
         "--eval-batches", "1", "--sample-tokens", "0", "--progress", "plain", "--print-every", "1"]


# Under the asan test setup, LeakSanitizer's exit-time check of these htr-train runs crashes its
# own tracer thread now and then ("Tracer caught signal 11", exit 1; seen for the
# recompute and oom modes, ~4 in 5 runs under meson, never when run by hand): the leak check is off
# for this script's runs only (ASan and UBSan stay on); htr-train's leaks are still checked by the
# train suite's tests under the same setup. Open: which thread is alive at exit (notes/ROADMAP.md).
ENV = dict(os.environ)
if "detect_leaks=1" in ENV.get("ASAN_OPTIONS", ""):
    ENV["ASAN_OPTIONS"] = ENV["ASAN_OPTIONS"].replace("detect_leaks=1", "detect_leaks=0")


def run(args, out_dir, expect_rc=0, timeout=1200):
    return run_train(EXE, args, out_dir, expect_rc=expect_rc, timeout=timeout, env=ENV)


def test_recompute(tmp):
    res = {}
    for name, extra in (("base", []), ("recompute", ["--recompute"])):
        log = os.path.join(tmp, name + ".json")
        p = run(SMALL + ["--steps", "3", "--memory-report", "--log-json", log] + extra, os.path.join(tmp, name))
        res[name] = (losses(log), memory_json(p.stdout))
    (l0, m0), (l1, m1) = res["base"], res["recompute"]
    print("losses", l0, l1)
    print("peak activation bytes", m0["peak_activation_bytes"], "->", m1["peak_activation_bytes"])
    if l0 != l1:
        fail("--recompute changed the fp32 losses: %s vs %s" % (l0, l1))
    if m1["recomputed_segments"] < 1:
        fail("nothing was recomputed: %s" % m1)
    if m1["peak_activation_bytes"] > 0.5 * m0["peak_activation_bytes"]:
        fail("peak activations %d -> %d: less than 50%% lower" % (m0["peak_activation_bytes"], m1["peak_activation_bytes"]))
    # A budget recomputes fewer segments.
    p = run(SMALL + ["--steps", "1", "--memory-report", "--memory-budget", "1G"], os.path.join(tmp, "budget"))
    mb = memory_json(p.stdout)
    if mb["recomputed_segments"] != 0:
        fail("a 1 GiB budget should need no recomputation: %s" % mb)


def test_precision(tmp):
    res = {}
    for prec in ("fp32", "bf16", "fp16"):
        log = os.path.join(tmp, prec + ".json")
        p = run(SMALL + ["--steps", "3", "--precision", prec, "--memory-report", "--log-json", log],
                os.path.join(tmp, prec))
        res[prec] = (losses(log), memory_json(p.stdout), val_loss(p.stdout))
    base = res["fp32"]
    for prec in ("bf16", "fp16"):
        l, m, v = res[prec]
        print(prec, "losses", l, "val", v, "fp32", base[0], base[2])
        if m["precision"] != prec or m["low_precision_matmuls"] == 0:
            fail("%s: the pass did not run: %s" % (prec, m))
        for a, b in zip(l, base[0]):
            if abs(a - b) > 0.02 * abs(b):
                fail("%s loss %g vs fp32 %g" % (prec, a, b))
        if abs(v - base[2]) > 0.02 * base[2]:
            fail("%s validation loss %g vs fp32 %g" % (prec, v, base[2]))
        if m["peak_activation_bytes"] > 0.75 * base[1]["peak_activation_bytes"]:
            fail("%s peak activations %d vs fp32 %d" % (prec, m["peak_activation_bytes"], base[1]["peak_activation_bytes"]))
    if res["fp32"][1]["planned_peak_bytes"] >= res["fp32"][1]["naive_peak_bytes"]:
        fail("planned peak not below naive: %s" % res["fp32"][1])


def test_overflow(tmp):
    # A loss scale far above fp16's range makes every scaled gradient inf: each step is skipped and
    # the scale halves; the parameters stay as they were (validation loss equals the untrained one).
    p = run(SMALL + ["--steps", "3", "--precision", "fp16", "--loss-scale", "1e30"], os.path.join(tmp, "ovf"))
    skipped = skipped_steps(p.stdout)
    print("skipped", skipped)
    check_skips_halve(skipped, 3, p.stdout)
    if abs(float(skipped[0][1]) - 1e30) > 1e24:
        fail("first scale %s" % skipped[0][1])
    # Fusion stays on under loss scaling (the gate's maximum/minimum are fused like the reference);
    # HTR_FUSION=0 in the environment would make this check meaningless.
    fused = re.search(r"(\d+) fused kernels for (\d+) graph ops", p.stdout)
    print("fused", fused.group(0) if fused else None)
    if os.environ.get("HTR_FUSION") != "0" and (not fused or int(fused.group(1)) == 0):
        fail("no fused kernels in the fp16 loss-scaling run:\n" + p.stdout[-2000:])
    p0 = run(SMALL + ["--steps", "0", "--precision", "fp16"], os.path.join(tmp, "untrained"))
    if val_loss(p.stdout) != val_loss(p0.stdout):
        fail("skipped steps changed the parameters: val %g vs untrained %g" % (val_loss(p.stdout), val_loss(p0.stdout)))
    # A sane scale trains (no skips at all in 2 steps).
    p = run(SMALL + ["--steps", "2", "--precision", "fp16"], os.path.join(tmp, "fp16ok"))
    if "skipped" in p.stdout:
        fail("unexpected skip with the default scale:\n" + p.stdout[-2000:])


def test_oom(tmp):
    out = os.path.join(tmp, "oom")
    p = run(SMALL + ["--steps", "4", "--checkpoint-every", "1", "--oom-at-step", "2"], out, expect_rc=1)
    err = p.stderr
    print(err.strip())
    for want in ("step 2", "out of memory", "bytes requested", "output 'loss'", "retried once"):
        if want not in err:
            fail("OOM error lacks %r:\n%s" % (want, err))
    ckpt = os.path.join(out, "checkpoint.safetensors")
    if not os.path.exists(ckpt):
        fail("no checkpoint after the failed step")
    # The checkpoint from before the failed step resumes.
    p = run(SMALL + ["--steps", "3", "--resume", ckpt], out)
    if "resumed from" not in p.stdout or "at step 2" not in p.stdout:
        fail("resume from the last checkpoint failed:\n" + p.stdout[-2000:])


def test_accuracy(tmp):
    steps = os.environ.get("HTR_ACCURACY_STEPS", "300")
    vals = {}
    for prec in ("fp32", "bf16", "fp16"):
        p = run(["--preset", "tiny", "--steps", steps, "--sample-tokens", "0", "--progress", "plain",
                 "--print-every", "50", "--precision", prec], os.path.join(tmp, prec), timeout=None)
        vals[prec] = val_loss(p.stdout)
        print(prec, "val loss", vals[prec], flush=True)
    for prec in ("bf16", "fp16"):
        rel = abs(vals[prec] - vals["fp32"]) / vals["fp32"]
        print("%s vs fp32: %.4f%%" % (prec, 100 * rel))
        if rel > 0.003:
            fail("%s validation loss %g is %.3f%% from fp32's %g" % (prec, vals[prec], 100 * rel, vals["fp32"]))


if __name__ == "__main__":
    run_mode({"recompute": test_recompute, "precision": test_precision, "overflow": test_overflow,
              "oom": test_oom, "accuracy": test_accuracy}, MODE)
