#!/usr/bin/python3
"""Data-parallel htr-train across processes under Open MPI (GitHub issue 34).

  parity   2 ranks x batch B log the same per-step losses as 1 process x
           batch 2B over 50 tiny steps, within 1e-5 relative (random data
           order, warmup, clipping); with ACCUM given, also --grad-accum ACCUM.
  mixed    a cpu rank and a vulkan rank (lavapipe) train together: their
           losses within 1e-4 of the single-process cpu run.
  kill     rank 1 SIGKILLs itself after step 20 (--kill-after-step 20
           --kill-rank 1): the job exits non-zero within 60 s naming rank 1;
           the last checkpoint (step 20) is intact and --resume with 2 ranks,
           then with 1 rank, continues the uninterrupted curve.
  hang     rank 1 stops (SIGSTOP) after step 5: rank 0's step barrier gives up
           within --comm-timeout, naming rank 1, and the job ends non-zero.

Exit 77 (skipped) when mpirun is missing, or for `mixed` when there is no
vulkan device.
usage: dp_train_test.py HTR_TRAIN MPIRUN parity|mixed|kill|hang [ACCUM]"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import words_corpus  # noqa: E402  (tests/words_corpus.py)

TINY = ["--layers", "2", "--width", "32", "--heads", "2", "--ctx", "32", "--seq", "32",
        "--eval-every", "0", "--eval-batches", "1", "--sample-tokens", "0", "--warmup", "5",
        "--lr", "3e-3", "--progress", "plain", "--print-every", "10", "--data-order", "random"]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", HTR_CPU_THREADS="1",
           ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")


def make_data(path, n=20000):
    words_corpus.make_data(path, n)


def run(cmd, check=True, timeout=600):
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                       env=ENV, timeout=timeout)
    p.elapsed = time.monotonic() - t0
    if check and p.returncode != 0:
        print(p.stdout[-4000:], p.stderr[-4000:])
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited {p.returncode}")
    return p


def mpi(mpirun, n):
    return [mpirun, "--oversubscribe", "--bind-to", "none", "-np", str(n)]


def losses(path):
    with open(path) as f:
        return {r["step"]: r["loss"] for r in map(json.loads, f)}


def compare(name, want, got, tol, steps):
    worst = 0.0
    for s in range(steps):
        if s not in want or s not in got:
            raise SystemExit(f"FAIL: {name}: step {s} missing (reference {s in want}, data parallel {s in got})")
        rel = abs(got[s] - want[s]) / abs(want[s])
        worst = max(worst, rel)
        if rel > tol:
            raise SystemExit(f"FAIL: {name}: step {s}: loss {got[s]:.9g}, single process {want[s]:.9g} "
                             f"(relative {rel:.2e} > {tol:g})")
    print(f"{name}: {steps} steps, worst relative loss difference {worst:.2e} (limit {tol:g})")


def train(work, tag, batch, extra, launcher=()):
    out = os.path.join(work, tag)
    log = os.path.join(out, "log.jsonl")
    os.makedirs(out, exist_ok=True)
    cmd = list(launcher) + [HTR] + TINY + ["--data", DATA, "--out-dir", out, "--log-json", log,
                                           "--batch", str(batch)] + extra
    p = run(cmd)
    return losses(log), p


def test_parity(mpirun, work, accum):
    steps = 50
    extra = ["--steps", str(steps), "--device", "cpu:0"] + (["--grad-accum", str(accum)] if accum > 1 else [])
    want, _ = train(work, "single", 4, extra)
    got, p = train(work, "dp", 2, extra, mpi(mpirun, 2))
    if "data parallel: 2 ranks x batch 2" not in p.stdout:
        raise SystemExit("FAIL: the 2-rank run did not report data parallelism:\n" + p.stdout[-2000:])
    compare(f"parity (2 ranks x batch 2 vs 1 x 4, grad-accum {accum})", want, got, 1e-5, steps)


def test_mixed(mpirun, work):
    probe = run([HTR] + TINY + ["--data", DATA, "--out-dir", os.path.join(work, "probe"), "--steps", "0",
                                "--device", "vulkan:0"], check=False)
    if probe.returncode != 0:
        print("skip: no vulkan device:", (probe.stderr.strip().splitlines() or [""])[-1])
        return 77
    steps = 30
    extra = ["--steps", str(steps)]
    want, _ = train(work, "single", 4, extra + ["--device", "cpu:0"])
    out = os.path.join(work, "mixed")
    os.makedirs(out, exist_ok=True)
    log = os.path.join(out, "log.jsonl")
    common = TINY + ["--data", DATA, "--out-dir", out, "--log-json", log, "--batch", "2"] + extra
    cmd = [mpirun, "--oversubscribe", "--bind-to", "none", "-np", "1", HTR] + common + ["--device", "cpu:0"] + \
          [":", "-np", "1", HTR] + common + ["--device", "vulkan:0"]
    run(cmd)
    compare("mixed (cpu rank + vulkan rank vs 1 cpu process)", want, losses(log), 1e-4, steps)
    return 0


def test_kill(mpirun, work):
    steps = 30
    base = ["--steps", str(steps), "--device", "cpu:0", "--checkpoint-every", "10", "--batch", "2"]
    ref, _ = train(work, "ref", 2, base, mpi(mpirun, 2))
    out = os.path.join(work, "killed")
    os.makedirs(out, exist_ok=True)
    log = os.path.join(out, "log.jsonl")
    cmd = mpi(mpirun, 2) + [HTR] + TINY + base + ["--data", DATA, "--out-dir", out, "--log-json", log,
                                                 "--kill-after-step", "20", "--kill-rank", "1"]
    p = run(cmd, check=False, timeout=120)
    text = p.stdout + p.stderr
    if p.returncode == 0:
        raise SystemExit("FAIL: the job with a killed rank exited 0")
    if p.elapsed > 60:
        raise SystemExit(f"FAIL: the job took {p.elapsed:.1f} s to stop after rank 1 died (limit 60 s)")
    if "rank 1" not in text:
        raise SystemExit("FAIL: no message names rank 1:\n" + text[-3000:])
    print(f"kill: job exited {p.returncode} after {p.elapsed:.1f} s; message: "
          f"{[l for l in text.splitlines() if 'rank 1' in l][0].strip()}")
    ckpt = os.path.join(out, "checkpoint.safetensors")
    if not os.path.exists(ckpt):
        raise SystemExit("FAIL: no checkpoint after the kill")
    # Rank 0 wrote the checkpoint after step 19 (next step 20) before step 20's all-reduce, which
    # rank 1 finished before dying: the checkpoint holds step 20. Resume it with 2 ranks, then 1.
    for ranks in (2, 1):
        shutil.copy(ckpt, ckpt + f".{ranks}")
        rdir = os.path.join(work, f"resumed{ranks}")
        os.makedirs(rdir, exist_ok=True)
        rlog = os.path.join(rdir, "log.jsonl")
        launcher = mpi(mpirun, 2) if ranks == 2 else []
        batch = "2" if ranks == 2 else "4"
        args = TINY + ["--steps", str(steps), "--device", "cpu:0", "--checkpoint-every", "10", "--data", DATA,
                       "--out-dir", rdir, "--log-json", rlog, "--resume", ckpt + f".{ranks}", "--batch", batch]
        r = run(launcher + [HTR] + args)
        got = losses(rlog)
        first = min(got)
        if first not in (10, 20):
            raise SystemExit(f"FAIL: resumed ({ranks} ranks) at step {first}, expected 20 (or 10)")
        tol = 1e-5
        for s in range(first, steps):
            rel = abs(got[s] - ref[s]) / abs(ref[s])
            if rel > tol:
                raise SystemExit(f"FAIL: resumed with {ranks} ranks: step {s}: loss {got[s]:.9g}, "
                                 f"uninterrupted {ref[s]:.9g} (relative {rel:.2e})")
        print(f"kill: resumed with {ranks} rank(s) at step {first}: steps {first}..{steps - 1} match the "
              f"uninterrupted 2-rank curve within {tol:g}" + ("" if r.returncode == 0 else " (rc!)"))
    return 0


def test_hang(mpirun, work):
    out = os.path.join(work, "hang")
    os.makedirs(out, exist_ok=True)
    # Once 5 steps are logged, the test stops rank 1 (SIGSTOP): a hung rank, not a dead one.
    log = os.path.join(out, "log.jsonl")
    cmd = mpi(mpirun, 2) + [HTR] + TINY + ["--steps", "400", "--device", "cpu:0", "--batch", "2", "--data", DATA,
                                           "--out-dir", out, "--log-json", log, "--comm-timeout", "10"]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                            env=ENV)
    stopped = None
    while time.monotonic() - t0 < 120 and proc.poll() is None:
        time.sleep(0.2)
        if stopped is None and os.path.exists(log) and len(open(log).read().splitlines()) >= 5:
            pids = subprocess.run(["pgrep", "-P", str(proc.pid)], stdout=subprocess.PIPE, text=True).stdout.split()
            ranks = []
            for pid in pids:
                try:
                    env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
                except OSError:
                    continue
                if b"OMPI_COMM_WORLD_RANK=1" in env:
                    ranks.append(int(pid))
            if ranks:
                os.kill(ranks[0], signal.SIGSTOP)
                stopped = (ranks[0], time.monotonic())
    if proc.poll() is None:
        proc.kill()
        raise SystemExit("FAIL: the job did not stop within 120 s of a hung rank")
    so, se = proc.communicate()
    text = so + se
    if stopped is None:
        raise SystemExit("FAIL: could not find rank 1 to stop:\n" + text[-2000:])
    took = time.monotonic() - stopped[1]
    if proc.returncode == 0:
        raise SystemExit("FAIL: the job with a hung rank exited 0")
    if "rank 1 did not reach" not in text:
        raise SystemExit("FAIL: no watchdog message naming rank 1:\n" + text[-3000:])
    if took > 60:
        raise SystemExit(f"FAIL: {took:.1f} s from the hang to the end (limit 60 s)")
    line = [l for l in text.splitlines() if "did not reach" in l][0].strip()
    print(f"hang: job exited {proc.returncode} {took:.1f} s after rank 1 stopped; {line}")
    return 0


def main():
    global HTR, DATA
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    HTR, mpirun, what = sys.argv[1], sys.argv[2], sys.argv[3]
    if not shutil.which(mpirun):
        print("skip: mpirun not found (Debian: apt-get install openmpi-bin)")
        return 77
    work = tempfile.mkdtemp(prefix=f"htr-dp-{what}-")
    DATA = os.path.join(work, "data.txt")
    make_data(DATA)
    try:
        if what == "parity":
            test_parity(mpirun, work, int(sys.argv[4]) if len(sys.argv) > 4 else 1)
            rc = 0
        elif what == "mixed":
            rc = test_mixed(mpirun, work)
        elif what == "kill":
            rc = test_kill(mpirun, work)
        elif what == "hang":
            rc = test_hang(mpirun, work)
        else:
            raise SystemExit(__doc__)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if rc == 0:
        print("PASS")
    return rc


if __name__ == "__main__":
    sys.exit(main())
