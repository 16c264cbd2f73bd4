#!/usr/bin/python3
"""Lists the failed tests of a meson test log whose only fault is LeakSanitizer's own tracer crash.

LeakSanitizer stops the world at process exit by ptrace-attaching a tracer to every thread; on
some kernels and VMs that tracer itself dies ("Tracer caught signal 11", then "LeakSanitizer has
encountered a fatal error") about once in a few hundred exits, after the test body has passed and
before any leak is looked for. Such a failure says nothing about the code under test.

usage: lsan_tracer_flake.py TESTLOG.json
Prints, one per line, the bare names of failed tests whose output has both tracer-crash lines and
no sanitizer report (no "ERROR: AddressSanitizer", "ERROR: LeakSanitizer: detected memory leaks",
"runtime error:", "SUMMARY: ...Sanitizer") and whose return code is not a plain test failure
signal of Catch2 or python (an assertion failure message). tools/test.sh reruns exactly those once.
"""
import json
import subprocess
import sys

CRASH = ("Tracer caught signal", "LeakSanitizer has encountered a fatal error")
REPORTS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer: detected memory leaks",
           "runtime error:", "SUMMARY: AddressSanitizer", "SUMMARY: UndefinedBehaviorSanitizer",
           "SUMMARY: LeakSanitizer")
TEST_FAILED = ("FAILED:", "test cases failed", "Traceback (most recent call last)", "FAIL:")


def tracer_crash_only(output):
    """Whether `output` (a process's stdout and stderr) shows LeakSanitizer's tracer crash and no
    sanitizer report: the whole fault of a run that otherwise did its work. Test helpers that run
    htr-train children (tests/graph/train_runs.py, tests/memory/htr_train_cli.py) use it to run
    such a child once more."""
    return all(c in output for c in CRASH) and not any(r in output for r in REPORTS)


def run_retrying(cmd, **kwargs):
    """subprocess.run(cmd, **kwargs), once more when the run failed and its captured output (the
    caller passes stdout/stderr pipes) shows LeakSanitizer's tracer crash and nothing else
    (tracer_crash_only); never for a command with --resume (the first run may have moved its
    checkpoint on). Returns the CompletedProcess that counts."""
    p = subprocess.run(cmd, **kwargs)

    def text(x):
        return x.decode(errors="replace") if isinstance(x, bytes) else (x or "")

    if p.returncode != 0 and "--resume" not in cmd and tracer_crash_only(text(p.stdout) + text(p.stderr)):
        print("note: LeakSanitizer's tracer crashed at exit of %s; running it once more" % cmd[0], flush=True)
        p = subprocess.run(cmd, **kwargs)
    return p


def main(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            t = json.loads(line)
            if t.get("result") not in ("FAIL", "ERROR"):
                continue
            out = (t.get("stdout") or "") + (t.get("stderr") or "")
            if not tracer_crash_only(out) or any(r in out for r in TEST_FAILED):
                continue
            print(t["name"].split(" / ")[-1])


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
