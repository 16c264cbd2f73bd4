#!/usr/bin/env python3
"""End-to-end profiler tests (issue 6).

Usage: test_profile.py HTR_TRAIN HTR_PROF trace|html [HTR_BENCH]

trace: `htr-train --preset tiny --steps 5 --profile t.json --print-plan`;
  the strict checker (check_trace.py) accepts t.json with 5 step ranges and
  microsecond units against the run's wall time; the checker rejects a copy
  with a broken nesting and a copy in nanoseconds (so it can fail);
  `htr-prof t.json` lists every op that runs on the training path (the plan
  printed by --print-plan, alias reshapes excluded: they run nothing) with
  calls = plan count x 5 steps, `--step last` / `--step 2` list each plan op once and
  `--step 6` fails naming the step count; htr-prof rejects a file that is not a trace.
  With HTR_BENCH: `htr-bench peak` (small sizes) first fills a private peaks
  cache (HTR_CACHE_DIR), so the trace carries the peaks and htr-prof shows
  a % of peak for matmul.
html: `htr-prof --html` on a 1-step trace (batch 4) renders in headless Chromium
  without script errors and with the timeline drawn (check_html.py); a copy
  with a script error is rejected. Exit 77 (skip) when chromium is absent.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_html  # noqa: E402
import check_trace  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
from lsan_tracer_flake import run_retrying  # noqa: E402


def train(htr_train, work, steps, extra=(), env=None):
    trace = os.path.join(work, "t.json")
    cmd = [htr_train, "--preset", "tiny", "--steps", str(steps), "--profile", trace, "--print-plan",
           "--progress", "plain", "--print-every", "1", "--eval-every", "0", "--sample-tokens", "0",
           "--val-fraction", "0", "--out-dir", os.path.join(work, "out"), *extra]
    t0 = time.monotonic()
    r = run_retrying(cmd, capture_output=True, text=True, timeout=900, env=env)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"htr-train failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return trace, wall, r.stdout


def plan_ops(stdout):
    """op name -> ops per step that run (not alias), from --print-plan lines."""
    ops = {}
    for line in stdout.splitlines():
        m = re.match(r"^  (\S+) \[([^\]]+)\]\s+x(\d+)\s", line)
        if not m:
            continue
        name, impl, n = m.group(1), m.group(2), int(m.group(3))
        if impl == "alias":
            continue
        ops[name] = ops.get(name, 0) + n
    return ops


def prof_ops(stdout):
    """op name -> calls, from htr-prof's table (rows between the header and the blank line)."""
    calls, in_table = {}, False
    for line in stdout.splitlines():
        if line.startswith("op ") and "calls" in line:
            in_table = True
            continue
        if in_table:
            if not line.strip():
                break
            parts = line.split()
            calls[parts[0]] = calls.get(parts[0], 0) + int(parts[2])
    return calls


def test_trace(htr_train, htr_prof, work, htr_bench=None):
    failures = []
    steps = 5
    env = None
    if htr_bench:
        env = dict(os.environ, HTR_CACHE_DIR=os.path.join(work, "cache"))
        r = subprocess.run([htr_bench, "peak", "--sizes", "256", "--dtypes", "f32", "--mem-mib", "16",
                            "--reps", "3"], capture_output=True, text=True, timeout=300, env=env)
        if r.returncode != 0:
            failures.append(f"htr-bench peak failed: {r.stderr[-1000:]}")
    trace, wall, out = train(htr_train, work, steps, env=env)
    errs = check_trace.check(trace, steps=steps, wall_s=wall)
    failures += [f"trace: {e}" for e in errs]
    with open(trace, encoding="utf-8") as f:
        doc = json.load(f)
    # Negative 1: a child pushed past its parent's end must be rejected.
    bad = json.loads(json.dumps(doc))
    evs = [e for e in bad["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "library"]
    if evs:
        evs[0]["dur"] = evs[0]["dur"] + 1e6
        p = os.path.join(work, "bad_nesting.json")
        with open(p, "w", encoding="utf-8") as f:
            json.dump(bad, f)
        if not any("without nesting" in e or "host_us" in e for e in check_trace.check(p)):
            failures.append("checker accepted a trace with broken nesting")
    else:
        failures.append("trace has no library dispatch events (matmul on cpu)")
    # Negative 2: nanoseconds instead of microseconds must be rejected.
    bad = json.loads(json.dumps(doc))
    for e in bad["traceEvents"]:
        if "ts" in e:
            e["ts"] *= 1000
        if "dur" in e:
            e["dur"] *= 1000
    p = os.path.join(work, "bad_units.json")
    with open(p, "w", encoding="utf-8") as f:
        json.dump(bad, f)
    if not check_trace.check(p, steps=steps, wall_s=wall):
        failures.append("checker accepted a trace in nanoseconds")

    r = subprocess.run([htr_prof, trace], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        failures.append(f"htr-prof failed: {r.stderr}")
    plan, listed = plan_ops(out), prof_ops(r.stdout)
    if not plan:
        failures.append("no plan lines from --print-plan")
    for op, n in sorted(plan.items()):
        if op not in listed:
            failures.append(f"htr-prof does not list op '{op}'")
        elif listed[op] != n * steps:
            failures.append(f"htr-prof lists {listed[op]} calls of '{op}', the plan runs {n} x {steps}")
    for op in listed:
        if op not in plan:
            failures.append(f"htr-prof lists '{op}', which is not on the training path")
    # --step: one step's ops only (each plan op once per step), a step past the end is an error.
    for sel in ("last", "2"):
        r1 = subprocess.run([htr_prof, trace, "--step", sel], capture_output=True, text=True, timeout=300)
        one = prof_ops(r1.stdout)
        if r1.returncode != 0 or "ops of step" not in r1.stdout:
            failures.append(f"htr-prof --step {sel} failed or did not say which step: {r1.stderr[-500:]}")
        for op, n in sorted(plan.items()):
            if one.get(op) != n:
                failures.append(f"htr-prof --step {sel} lists {one.get(op)} calls of '{op}', the plan runs {n} a step")
    r1 = subprocess.run([htr_prof, trace, "--step", str(steps + 1)], capture_output=True, text=True, timeout=300)
    if r1.returncode != 1 or f"the trace has {steps} training steps" not in r1.stderr:
        failures.append(f"htr-prof --step {steps + 1} did not fail naming the step count: {r1.stderr[-500:]}")
    junk = os.path.join(work, "junk.json")
    with open(junk, "w", encoding="utf-8") as f:
        f.write("[1, 2")
    if subprocess.run([htr_prof, junk], capture_output=True, timeout=60).returncode != 1:
        failures.append("htr-prof did not reject a malformed trace with exit 1")
    if htr_bench:
        if "[cache]" not in r.stdout:
            failures.append("htr-prof does not show the peaks measured by htr-bench peak")
        m = re.search(r"^matmul\s+library:\S+\s+\d+\s+\S+\s+\S+\s+\S+\s+\S+(?: \S)?\s+\S+(?: \S)?\s+([\d.]+)\s+(compute|memory)",
                      r.stdout, re.M)
        if m is None:
            failures.append("htr-prof shows no % of peak for matmul")
    print(r.stdout)
    return failures


def test_html(htr_train, htr_prof, work):
    if check_html.find_chromium() is None:
        print("SKIP: chromium not installed (Debian: apt-get install chromium); the HTML page is not checked")
        return None
    trace, _, _ = train(htr_train, work, 1, ('--batch', '4'))
    page = os.path.join(work, "t.html")
    r = subprocess.run([htr_prof, trace, "--top", "5", "--html", page], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        return [f"htr-prof --html failed: {r.stderr}"]
    ok, errs = check_html.check(page)
    failures = [f"html: {e}" for e in errs] if not ok else []
    with open(page, encoding="utf-8") as f:
        text = f.read()
    broken = os.path.join(work, "broken.html")
    with open(broken, "w", encoding="utf-8") as f:
        f.write(text.replace("<script>", "<script>htrNoSuchFunction();</script><script>", 1))
    ok2, _ = check_html.check(broken)
    if ok2:
        failures.append("the HTML check accepted a page with a script error")
    return failures


def main(argv):
    if len(argv) not in (4, 5) or argv[3] not in ("trace", "html"):
        print(__doc__)
        return 2
    htr_train, htr_prof, mode = argv[1], argv[2], argv[3]
    with tempfile.TemporaryDirectory(prefix="htr-prof-test-") as work:
        if mode == "trace":
            failures = test_trace(htr_train, htr_prof, work, argv[4] if len(argv) == 5 else None)
        else:
            failures = test_html(htr_train, htr_prof, work)
    if failures is None:
        return 77
    for f in failures:
        print(f"FAIL: {f}")
    print(f"test_profile {mode}: {'ok' if not failures else f'{len(failures)} failures'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
