"""Shared by the *_train_parity.py tests: a small synthetic corpus and one htr-train run on cpu
that returns its per-step losses (loss.csv) and its printed output (the plan with each step's impl).
"""
import csv
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from lsan_tracer_flake import tracer_crash_only  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import words_corpus  # noqa: E402  (tests/words_corpus.py)


def make_data(path, n=60000):
    words_corpus.make_data(path, n)


def run(exe, work, name, steps, env_extra, model_args, timeout=600):
    """htr-train on cpu with `model_args` (e.g. ["--preset", "tiny"]) and `env_extra` over the
    environment, data from work/data.txt, output in work/name. Exits the test on failure or when
    the run logs a number of losses other than `steps`. Returns (losses, printed text)."""
    out = os.path.join(work, name)
    env = dict(os.environ)
    env.update(env_extra)
    cmd = [exe, "--device", "cpu", "--steps", str(steps), "--data", os.path.join(work, "data.txt"),
           "--eval-every", "0", "--sample-tokens", "0", "--progress", "plain", "--print-plan",
           "--out-dir", out] + model_args
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    text = p.stdout.decode(errors="replace")
    if p.returncode != 0 and tracer_crash_only(text):
        # Under the asan setup LeakSanitizer's exit-time tracer crashes now and then after the run's
        # work is done (tools/lsan_tracer_flake.py); such a run is judged by a second one.
        print("note: LeakSanitizer's tracer crashed at exit of %s; running it once more" % name, flush=True)
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        text = p.stdout.decode(errors="replace")
    if p.returncode != 0:
        print(text)
        sys.exit("htr-train (%s) exited with %d" % (name, p.returncode))
    with open(os.path.join(out, "loss.csv")) as f:
        losses = [float(r["loss"]) for r in csv.DictReader(f)]
    if len(losses) != steps:
        sys.exit("%s: expected %d losses, got %d" % (name, steps, len(losses)))
    return losses, text


def plan_rows(text):
    """The plan lines --print-plan printed (indented, each with its step's impl in brackets)."""
    return [l.strip() for l in text.splitlines() if l.startswith("  ") and "[" in l]


def not_generated(rows):
    """The plan rows that run a reference kernel or a library op."""
    return [r for r in rows if "[reference" in r or "[library" in r]


def worst_rel(a, b):
    """The largest relative difference of per-step losses a against b."""
    return max(abs(x - y) / abs(y) for x, y in zip(a, b))


def compare(a_name, a, b_name, b, bound=1e-5):
    """Prints per-step losses of two runs; exits the test when they differ by more than `bound`
    relative. Returns the worst relative difference."""
    worst = 0.0
    for i, (x, y) in enumerate(zip(a, b)):
        rel = abs(x - y) / abs(y)
        worst = max(worst, rel)
        print("step %d: %s %.8f %s %.8f rel %.2e" % (i + 1, a_name, x, b_name, y, rel))
    if worst > bound:
        sys.exit("losses differ by %.2e relative (bound %g)" % (worst, bound))
    return worst
