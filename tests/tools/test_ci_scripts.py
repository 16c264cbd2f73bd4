#!/usr/bin/python3
"""tools/test.sh's two helpers over meson test logs, on made-up logs:
 - lsan_tracer_flake.py names exactly the failed tests whose only fault is LeakSanitizer's tracer
   crash (not one with a leak report, an ASan error or a failed assertion, not a passed test);
 - test_failures.py prints a header and the end of the output of each failed or timed-out test,
   nothing for passing, skipped or expected-fail tests.

usage: test_ci_scripts.py TOOLS_DIR"""
import json
import os
import subprocess
import sys
import tempfile

CRASH = "Tracer caught signal 11: addr=0xd40\n==1==LeakSanitizer has encountered a fatal error.\n"


def write_log(path, tests):
    with open(path, "w") as f:
        for name, result, stdout, stderr in tests:
            f.write(json.dumps({"name": "htr:s / " + name, "result": result, "duration": 1.5,
                                "stdout": stdout, "stderr": stderr}) + "\n")


def run(tools, script, *args):
    p = subprocess.run([sys.executable, os.path.join(tools, script)] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    if p.returncode != 0:
        sys.exit("%s exited %d: %s" % (script, p.returncode, p.stderr))
    return p.stdout


# A child that fails with LeakSanitizer's tracer crash on its first run (counted in a file), then
# succeeds; or always fails with an ASan report.
CHILD = r"""
import os, sys
count = sys.argv[1]
n = int(open(count).read()) if os.path.exists(count) else 0
open(count, "w").write(str(n + 1))
if sys.argv[2] == "asan":
    sys.stderr.write("ERROR: AddressSanitizer: heap-buffer-overflow\n" + %r)
    sys.exit(1)
if n == 0:
    sys.stderr.write(%r)
    sys.exit(1)
print("done")
""" % (CRASH, CRASH)


def check_run_retrying(tools, tmp):
    sys.path.insert(0, tools)
    from lsan_tracer_flake import run_retrying
    child = os.path.join(tmp, "child.py")
    with open(child, "w") as f:
        f.write(CHILD)
    failed = []
    for name, extra, want_rc, want_runs in (("crash once", ["flaky"], 0, 2), ("asan report", ["asan"], 1, 1),
                                            ("resume", ["flaky", "--resume"], 1, 1)):
        count = os.path.join(tmp, name.replace(" ", "_") + ".count")
        p = run_retrying([sys.executable, child, count] + extra, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        runs = int(open(count).read())
        if p.returncode != want_rc or runs != want_runs:
            failed.append("run_retrying %s: rc %d after %d runs, want rc %d after %d" %
                          (name, p.returncode, runs, want_rc, want_runs))
    count = os.path.join(tmp, "bytes.count")  # bytes output (no text=True), stderr into stdout
    p = run_retrying([sys.executable, child, count, "flaky"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode != 0 or p.stdout.strip() != b"done":
        failed.append("run_retrying with bytes output: rc %d, %r" % (p.returncode, p.stdout))
    return failed


def main():
    tools = sys.argv[1]
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "testlog.json")
        write_log(log, [
            ("flaky", "FAIL", "All tests passed\n", CRASH),
            ("leak", "FAIL", "", CRASH + "ERROR: LeakSanitizer: detected memory leaks\n"),
            ("asan", "FAIL", "", "ERROR: AddressSanitizer: heap-use-after-free\n" + CRASH),
            ("assert", "FAIL", "FAILED:\n  CHECK( x == 1 )\n", CRASH),
            ("passed", "OK", "", CRASH),
            ("plain", "FAIL", "line1\nline2\nlast words\n", "stderr words\n"),
            ("slow", "TIMEOUT", "still running\n", ""),
            ("skipped", "SKIP", "", ""),
            ("xfail", "EXPECTEDFAIL", "", ""),
        ])
        flaky = run(tools, "lsan_tracer_flake.py", log).split()
        if flaky != ["flaky"]:
            failed.append("lsan_tracer_flake.py named %s, want ['flaky']" % flaky)
        report = run(tools, "test_failures.py", "meson test", log, "2")
        headers = [l for l in report.splitlines() if l.startswith("---- ")]
        names = [h.split(" / ")[1].split(" (")[0] for h in headers]
        want = ["flaky", "leak", "asan", "assert", "plain", "slow"]
        if names != want:
            failed.append("test_failures.py reported %s, want %s" % (names, want))
        if "---- meson test: htr:s / slow (TIMEOUT, 1.5 s)" not in report:
            failed.append("no TIMEOUT header with its duration:\n" + report)
        if "  | last words" not in report or "  | stderr words" not in report:
            failed.append("the end of a failed test's output is missing:\n" + report)
        if "  | line1" in report:
            failed.append("more than the last 2 lines printed:\n" + report)
        ok = os.path.join(tmp, "ok.json")
        write_log(ok, [("a", "OK", "x", ""), ("b", "SKIP", "", "")])
        if run(tools, "test_failures.py", "meson test", ok).strip():
            failed.append("test_failures.py printed something for a log without failures")
        if run(tools, "lsan_tracer_flake.py", ok).strip():
            failed.append("lsan_tracer_flake.py named a test of a log without failures")
        failed += check_run_retrying(tools, tmp)
    if failed:
        sys.exit("\n".join(failed))
    print("ok: lsan_tracer_flake.py and test_failures.py on 11 made-up test results; run_retrying on 4 commands")


if __name__ == "__main__":
    main()
