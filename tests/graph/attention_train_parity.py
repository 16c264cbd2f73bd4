#!/usr/bin/python3
"""htr-train --preset tiny on cpu with the attention rewrite of the fusion pass on and off
(HTR_FUSE_ATTENTION=0; both runs HTR_FUSION=force so that no timing decides what fuses): the run
with it must plan every layer's attention as the fused flash-attention steps (op_info impl
fused:attention and fused:attention_grad, scheduler/attention_fusion.h), the other none, and the
per-step training losses must agree within 1e-5 relative.

usage: attention_train_parity.py HTR_TRAIN [STEPS]"""
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


def run(exe, work, name, steps, attention):
    out = os.path.join(work, name)
    env = dict(os.environ)
    env["HTR_FUSION"] = "force"
    env["HTR_FUSE_ATTENTION"] = "1" if attention else "0"
    cmd = [exe, "--preset", "tiny", "--device", "cpu", "--steps", str(steps), "--data",
           os.path.join(work, "data.txt"), "--eval-every", "0", "--sample-tokens", "0",
           "--progress", "plain", "--print-plan", "--out-dir", out]
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    text = p.stdout.decode(errors="replace")
    if p.returncode != 0:
        print(text)
        sys.exit("htr-train (HTR_FUSE_ATTENTION=%s) exited with %d" % (env["HTR_FUSE_ATTENTION"], p.returncode))
    with open(os.path.join(out, "loss.csv")) as f:
        losses = [float(r["loss"]) for r in csv.DictReader(f)]
    return losses, text


def rows(text, impl):
    return [l.strip() for l in text.splitlines() if "[fused:%s]" % impl in l]


def main():
    exe = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    with tempfile.TemporaryDirectory() as work:
        make_data(os.path.join(work, "data.txt"))
        fused, ftext = run(exe, work, "attention", steps, True)
        plain, ptext = run(exe, work, "composite", steps, False)
    fwd, bwd = rows(ftext, "attention"), rows(ftext, "attention_grad")
    print("fused attention plan rows:\n  " + "\n  ".join(fwd + bwd))
    if not fwd or len(fwd) != len(bwd):
        sys.exit("expected one fused:attention and one fused:attention_grad step per layer, got %d and %d"
                 % (len(fwd), len(bwd)))
    if rows(ptext, "attention") or rows(ptext, "attention_grad"):
        sys.exit("HTR_FUSE_ATTENTION=0 still fused attention")
    if "[fused:" not in ptext:
        sys.exit("HTR_FUSE_ATTENTION=0 turned the rest of the fusion pass off too")
    if len(fused) != steps or len(plain) != steps:
        sys.exit("expected %d losses, got %d and %d" % (steps, len(fused), len(plain)))
    worst = 0.0
    for i, (a, b) in enumerate(zip(fused, plain)):
        rel = abs(a - b) / abs(b)
        worst = max(worst, rel)
        print("step %d: fused attention %.8f composite %.8f rel %.2e" % (i + 1, a, b, rel))
    if worst > 1e-5:
        sys.exit("losses differ by %.2e relative (bound 1e-5)" % worst)
    print("ok: worst relative difference %.2e over %d steps" % (worst, steps))


if __name__ == "__main__":
    main()
