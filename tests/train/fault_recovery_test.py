#!/usr/bin/env python3
"""Fault recovery, tier 1 (runtime/retry.h, samples/htr-train/recovery.h), through the fault layer.

Usage: fault_recovery_test.py HTR_TRAIN STEPS

Runs tiny htr-train on cpu:0 in the device execution mode (every step a kernel launch):
  1. fault-free: the reference losses;
  2. HTR_FAULT=kernel_launch:transient:p=0.01:seed=7: losses bit-identical, retries counted;
  3. OUT_OF_MEMORY injected into one kernel launch mid-run with --step-replays 2: the cache is
     released, the step replayed from its snapshot, losses bit-identical;
  4. a bad HTR_FAULT spec: htr-train fails, naming the rule and the reason.
"""
import os
import re
import subprocess
import sys
import tempfile


def run(htr, steps, out, env_extra, extra=()):
    env = dict(os.environ, HTR_EXEC="device")
    env.pop("HTR_LAYERS", None)
    env.pop("HTR_FAULT", None)
    env.update(env_extra)
    cmd = [htr, "--preset", "tiny", "--steps", str(steps), "--batch", "2", "--seq", "16", "--device", "cpu:0",
           "--threads", "1", "--eval-batches", "1", "--sample-tokens", "0", "--progress", "plain",
           "--out-dir", out, "--checkpoint-dir", out] + list(extra)
    print("+ " + " ".join(f"{k}={v}" for k, v in env_extra.items()) + " " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


def losses(out):
    with open(os.path.join(out, "loss.csv")) as f:
        rows = [line.strip().split(",") for line in f if line.strip()]
    return [r[1] for r in rows[1:]]  # as text: bit-identical means identical digits


def recovery_line(p):
    m = re.search(r"recovery: (\d+) TRANSIENT retries in the runtime \((\d+) gave up\), (\d+) step replays",
                  p.stdout)
    return tuple(int(x) for x in m.groups()) if m else None


def main():
    htr, steps = sys.argv[1], int(sys.argv[2])
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        def case(name, env, extra=()):
            out = os.path.join(tmp, name)
            os.makedirs(out)
            p = run(htr, steps, out, env, extra)
            if p.returncode != 0:
                print(p.stdout[-3000:], p.stderr[-3000:])
                failures.append(f"{name}: exit {p.returncode}")
                return None, p
            return losses(out), p

        ref, _ = case("reference", {})
        if ref is None:
            print("FAIL: the fault-free run failed")
            return 1
        print(f"reference: {len(ref)} losses, last {ref[-1]}")

        got, p = case("transient", {"HTR_LAYERS": "fault", "HTR_FAULT": "kernel_launch:transient:p=0.01:seed=7"})
        if got is not None:
            rec = recovery_line(p)
            print(f"transient 1%: {rec}")
            if got != ref:
                failures.append("transient: losses differ from the fault-free run")
            if rec is None or rec[0] == 0 or rec[1] != 0:
                failures.append(f"transient: retries not counted as expected ({rec})")

        # Kernel launches of a 2-step run (the trace layer logs one line each): OUT_OF_MEMORY goes
        # into the third-last launch of step 2, after the optimizer has updated states in place.
        out = os.path.join(tmp, "probe")
        os.makedirs(out)
        probe = run(htr, 2, out, {"HTR_LAYERS": "trace"})
        launches = probe.stderr.count(".kernel_launch(")
        print(f"a 2-step run makes {launches} kernel launches")
        oom_nth = max(1, launches - 2)
        got, p = case("oom", {"HTR_LAYERS": "fault", "HTR_FAULT": "kernel_launch:oom:nth=%d" % oom_nth},
                      ["--step-replays", "2"])
        if got is not None:
            rec = recovery_line(p)
            print(f"oom: {rec}; " + "; ".join(l for l in p.stdout.splitlines() if "replaying" in l))
            if got != ref:
                failures.append("oom: losses differ from the fault-free run")
            if "released" not in p.stdout or rec is None or rec[2] != 1:
                failures.append(f"oom: no cache release and single replay ({rec})")

        out = os.path.join(tmp, "bad")
        os.makedirs(out)
        p = run(htr, 1, out, {"HTR_LAYERS": "fault", "HTR_FAULT": "kernel_launch:transient:p=7"})
        text = p.stdout + p.stderr
        print("bad spec:", [l for l in text.splitlines() if "HTR_FAULT" in l][:1])
        if p.returncode == 0 or "HTR_FAULT rule 1 'kernel_launch:transient:p=7': p= needs a probability" not in text:
            failures.append("bad spec: not rejected with the reason")

    for f in failures:
        print("FAIL:", f)
    print("PASS" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
