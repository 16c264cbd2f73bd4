"""Helpers the htr-train command-line checks in tests/memory share (memory_cli_test.py,
device_precision_cli.py): run htr-train, read what it prints and logs, fail with a message.

The scripts import this module from their own folder: meson passes them by their source path
(files(...)), so Python puts tests/memory first on sys.path, from a build dir too.
"""
import json
import os
import re
import subprocess
import sys
import tempfile


def fail(msg):
    """Prints the failure and exits 1 (the check's result for meson)."""
    print("FAIL: " + msg)
    sys.exit(1)


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from lsan_tracer_flake import tracer_crash_only  # noqa: E402


def lsan_tracer_crashed(stderr):
    """Whether a run's only fault is LeakSanitizer's own tracer dying at exit (under the asan setup,
    now and then, after the program's work is done; nothing about the code under test)."""
    return tracer_crash_only(stderr)


def run(exe, args, out_dir, expect_rc=0, timeout=1200, env=None, label=""):
    """Runs `exe args --out-dir out_dir` (env: the whole environment, None: this one); fails unless
    it exits expect_rc, with the command (after `label`) and the ends of its output. A run whose
    only fault is LeakSanitizer's tracer crash (lsan_tracer_crashed) is run once more, and judged
    by that second run (not with --resume: the first run may have moved its checkpoint on)."""
    cmd = [exe] + args + ["--out-dir", out_dir]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout, env=env)
    if p.returncode != expect_rc and "--resume" not in args and lsan_tracer_crashed(p.stderr):
        print("note: LeakSanitizer's tracer crashed at exit of %s; running it once more" % " ".join(cmd), flush=True)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout, env=env)
    if p.returncode != expect_rc:
        fail("%s%s exited %d (want %d)\nstdout:\n%s\nstderr:\n%s" % (label + " " if label else "", " ".join(cmd),
                                                                   p.returncode, expect_rc, p.stdout[-4000:],
                                                                   p.stderr[-4000:]))
    return p


def memory_json(stdout):
    """The object of the `htr-train: memory-json` line (--memory-report)."""
    for line in stdout.splitlines():
        if line.startswith("htr-train: memory-json "):
            return json.loads(line[len("htr-train: memory-json "):])
    fail("no memory-json line in:\n" + stdout[-3000:])


def losses(path):
    """The per-step losses of a --log-json file."""
    with open(path) as f:
        return [json.loads(l)["loss"] for l in f if l.strip()]


def val_loss(stdout):
    """The final validation loss htr-train printed."""
    m = re.search(r"final validation loss ([0-9.]+)", stdout)
    if not m:
        fail("no final validation loss in:\n" + stdout[-2000:])
    return float(m.group(1))


def skipped_steps(stdout):
    """The fp16 overflow skips htr-train printed: (step, scale before, scale after) strings."""
    return re.findall(r"step (\d+) skipped: fp16 gradients overflowed \(inf/NaN\); loss scale ([0-9.e+]+) -> "
                      r"([0-9.e+]+)", stdout)


def check_skips_halve(skipped, want, stdout, what=""):
    """Fails unless there are `want` skips, of steps 0, 1, ..., each halving the loss scale."""
    prefix = what + ": " if what else ""
    if len(skipped) != want:
        fail("%swant %d skipped steps, got %s\n%s" % (prefix, want, skipped, stdout[-3000:]))
    for i, (step, before, after) in enumerate(skipped):
        if int(step) != i or abs(float(after) * 2 - float(before)) > 1e-6 * float(before):
            fail("%sstep %s: scale %s -> %s is not a halving" % (prefix, step, before, after))


def run_mode(tests, mode):
    """Runs tests[mode](a temporary directory) and prints "ok"; fails on an unknown mode."""
    if mode not in tests:
        fail("unknown mode " + mode)
    with tempfile.TemporaryDirectory() as tmp:
        tests[mode](tmp)
    print("ok")
