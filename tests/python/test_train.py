"""samples/python/train_gpt.py (htr-train's GPT written in Python through the
graph API) against htr-train: same flags and seed -> the same per-step
losses and gradient norms, bit for bit, and the same final weights. Both
runs share HTR_CACHE_DIR (set by Meson), so the fusion pass's timed
decisions, cached by the first run, are the same for the second."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import htr

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import words_corpus  # noqa: E402  (tests/words_corpus.py)

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN_GPT = os.path.join(HERE, "..", "..", "samples", "python", "train_gpt.py")
TINY = ["--layers", "2", "--width", "32", "--heads", "2", "--ctx", "32", "--seq", "32",
        "--batch", "4", "--steps", "6", "--warmup", "2"]


def make_data(path, n=6000):
    words_corpus.make_data(path, n)


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


@pytest.mark.parametrize("variant", [
    ["--data-order", "sequential", "--seed", "5"],
    ["--data-order", "random", "--seed", "7", "--grad-accum", "2", "--grad-clip", "0.5",
     "--lr-schedule", "constant"],
], ids=["sequential", "random-accum-clip"])
def test_same_seed_same_losses(tmp_path, paths, child_env, variant):
    data = tmp_path / "data.txt"
    make_data(data)
    args = TINY + ["--data", str(data)] + variant
    c_log, p_log = tmp_path / "c.jsonl", tmp_path / "p.jsonl"
    c_out, p_weights = tmp_path / "c", tmp_path / "p.safetensors"
    subprocess.run([paths["htr-train"]] + args +
                   ["--eval-every", "0", "--sample-tokens", "0", "--progress", "plain",
                    "--out-dir", str(c_out), "--log-json", str(c_log)],
                   check=True, env=child_env, stdout=subprocess.DEVNULL)
    p = subprocess.run([sys.executable, TRAIN_GPT] + args +
                       ["--log-json", str(p_log), "--save", str(p_weights)],
                       env=child_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert p.returncode == 0, p.stdout
    c, py = records(c_log), records(p_log)
    assert len(c) == len(py) == 6
    for a, b in zip(c, py):
        assert (a["step"], a["loss"], a["grad_norm"], a["lr"]) == \
            (b["step"], b["loss"], b["grad_norm"], b["lr"]), (a, b)
    assert c[-1]["loss"] < c[0]["loss"]  # it trains
    with htr.Checkpoint(c_out / "model.safetensors") as cw, htr.Checkpoint(p_weights) as pw:
        assert cw.names() == pw.names()
        for name in cw.names():
            np.testing.assert_array_equal(cw.read(name), pw.read(name), err_msg=name)


def test_rng_matches_htr_train_first_draws():
    # xoshiro256** from splitmix64(0): the reference sequence of the
    # generator's authors (prng.di.unimi.it), seeded as rng.h seeds it.
    import gpt
    r = gpt.Rng(0)
    s = r.s
    assert s == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F, 0xF88BB8A8724C81EC]
    assert 0 <= r.uniform() < 1
    assert r.below(10) < 10
