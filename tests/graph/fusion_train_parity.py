#!/usr/bin/python3
"""htr-train --preset tiny on cpu with the fusion pass on (the default) and off (HTR_FUSION=0):
the fused run's plan must contain fused groups (generated kernels), the unfused run's none, and
the per-step training losses must agree within 1e-5 relative.

usage: fusion_train_parity.py HTR_TRAIN [STEPS]"""
import csv
import os
import subprocess
import sys
import tempfile


def make_data(path, n=60000):
    words = b"alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    out, x = [], 12345
    while sum(map(len, out)) < n:
        x = (x * 1103515245 + 12345) % 2**31
        out.append(words[x % len(words)] + (b"\n" if x % 7 == 0 else b" "))
    with open(path, "wb") as f:
        f.write(b"".join(out))


def run(exe, work, name, steps, fusion):
    out = os.path.join(work, name)
    env = dict(os.environ)
    env["HTR_FUSION"] = "1" if fusion else "0"
    cmd = [exe, "--preset", "tiny", "--device", "cpu", "--steps", str(steps), "--data",
           os.path.join(work, "data.txt"), "--eval-every", "0", "--sample-tokens", "0",
           "--progress", "plain", "--print-plan", "--out-dir", out]
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    text = p.stdout.decode(errors="replace")
    if p.returncode != 0:
        print(text)
        sys.exit("htr-train (HTR_FUSION=%s) exited with %d" % (env["HTR_FUSION"], p.returncode))
    with open(os.path.join(out, "loss.csv")) as f:
        losses = [float(r["loss"]) for r in csv.DictReader(f)]
    return losses, text


def main():
    exe = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    with tempfile.TemporaryDirectory() as work:
        make_data(os.path.join(work, "data.txt"))
        fused, ftext = run(exe, work, "fused", steps, True)
        plain, ptext = run(exe, work, "plain", steps, False)
    fused_lines = [l for l in ftext.splitlines() if "[fused:" in l]
    print("fused plan rows:\n  " + "\n  ".join(l.strip() for l in fused_lines))
    if not fused_lines:
        sys.exit("the fused run's plan has no fused groups")
    if "[fused:" in ptext:
        sys.exit("HTR_FUSION=0 still fused ops")
    if len(fused) != steps or len(plain) != steps:
        sys.exit("expected %d losses, got %d and %d" % (steps, len(fused), len(plain)))
    worst = 0.0
    for i, (a, b) in enumerate(zip(fused, plain)):
        rel = abs(a - b) / abs(b)
        worst = max(worst, rel)
        print("step %d: fused %.8f unfused %.8f rel %.2e" % (i + 1, a, b, rel))
    if worst > 1e-5:
        sys.exit("losses differ by %.2e relative (bound 1e-5)" % worst)
    print("ok: worst relative difference %.2e over %d steps" % (worst, steps))


if __name__ == "__main__":
    main()
