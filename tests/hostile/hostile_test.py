#!/usr/bin/python3
"""Hostile input against htr-train, htr-info and the plugin loader (issue 42).

Every case passes a malformed file, flag or environment variable, the way a
new user might, and requires a clean failure: exit status 1 or 2 (never a
signal, an abort or the timeout), a one-line error on stderr that names the
input (a path, a flag, a variable, a tensor), no raw control bytes or
ill-formed UTF-8 on the terminal, and no output file created or changed (a
snapshot of every regular file in the case's directory before and after; the
directories htr-train creates are allowed). A few cases are behaviours rather
than errors (a stale temporary checkpoint is cleaned, a resumed --log-json has
each step once, an HTR_PLUGIN_PATH entry that is not a directory is named in a
warning). The plugin part copies every plugin the build tree loads into a
search directory as truncated, zero-filled, wrong-architecture, wrong-class
and not-a-shared-object files and requires htr-info to reject each with a
reason while every real plugin still loads.

usage: hostile_test.py HTR_TRAIN HTR_INFO [WORKDIR]
Prints one line per case and "hostile: N inputs tried, N passed, N failed".
"""
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile

TIMEOUT = 120
TINY = ["--layers", "1", "--width", "32", "--heads", "2", "--ctx", "16", "--batch", "2",
        "--steps", "2", "--eval-every", "0", "--sample-tokens", "0", "--progress", "plain"]

results = []  # (name, ok, detail)


def snapshot(root):
    files = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if not os.path.isfile(p) or os.path.islink(p):
                continue
            with open(p, "rb") as f:
                head = f.read(1 << 20) if st.st_size < (1 << 30) else b"(large)"
            files[p] = (st.st_size, st.st_mtime_ns, hash(head))
    return files


def clean_text(b):
    """The stderr bytes as text, or None when they hold raw control bytes / bad UTF-8."""
    try:
        t = b.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if any(ord(ch) < 0x20 and ch not in "\n\t\r" for ch in t):
        return None
    return t


def execute(cmd, env_extra, cwd, timeout=TIMEOUT, preexec=None):
    env = dict(os.environ)
    env.update(env_extra)
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           stdin=subprocess.DEVNULL, timeout=timeout, preexec_fn=preexec)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        return "timeout", e.stdout or b"", e.stderr or b""


def record(name, ok, detail):
    results.append((name, ok, detail))
    print(f"hostile[{name}]: {'ok' if ok else 'FAIL'}  {detail}", flush=True)


def expect_error(name, cmd, cwd, needles, env=None, codes=(1, 2), watch=None, timeout=TIMEOUT, preexec=None):
    """A clean error: exit in `codes`, every needle in stderr, files under `watch` untouched."""
    watch = watch or cwd
    before = snapshot(watch)
    rc, out, err = execute(cmd, env or {}, cwd, timeout, preexec)
    after = snapshot(watch)
    text = clean_text(err)
    problems = []
    if rc == "timeout":
        problems.append(f"timed out after {timeout} s")
    elif rc < 0:
        problems.append(f"killed by signal {signal.Signals(-rc).name}")
    elif rc not in codes:
        problems.append(f"exit {rc}, expected {'/'.join(map(str, codes))}")
    if text is None:
        problems.append("stderr holds raw control bytes or ill-formed UTF-8: %r" % err[-300:])
    else:
        for n in needles:
            if n not in text:
                problems.append(f"stderr lacks {n!r}")
    changed = sorted(p for p in after if before.get(p) != after[p])
    if changed:
        problems.append("output files touched: " + ", ".join(os.path.relpath(p, watch) for p in changed))
    line = (text or repr(err)).strip().splitlines()
    first = next((l for l in line if "error" in l), line[-1] if line else "")
    record(name, not problems, "; ".join(problems) if problems else f"exit {rc}: {first[:220]}")


def expect_ok(name, cmd, cwd, needles=(), env=None, check=None):
    rc, out, err = execute(cmd, env or {}, cwd)
    text = clean_text(err) or ""
    problems = []
    if rc != 0:
        problems.append(f"exit {rc}: {text.strip()[-300:]}")
    for n in needles:
        if n not in text and n not in out.decode("utf-8", "replace"):
            problems.append(f"output lacks {n!r}")
    if check and not problems:
        problems += check()
    record(name, not problems, "; ".join(problems) if problems else "as expected")
    return rc == 0


# ----------------------------------------------------------------- safetensors files

DT = {"F32": ("f", 4), "F16": ("e", 2), "BF16": (None, 2), "I64": ("q", 8)}


def safetensors(tensors, metadata=None, pad=b" ", raw_header=None):
    """tensors: list of (name, dtype, shape, float value or bytes)."""
    header, blobs, at = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, value in tensors:
        n = 1
        for d in shape:
            n *= d
        size = n * DT[dtype][1]
        blob = value if isinstance(value, bytes) else struct.pack("<%d%s" % (n, DT[dtype][0]), *([value] * n))
        assert len(blob) == size
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + size]}
        blobs.append(blob)
        at += size
    h = raw_header if raw_header is not None else json.dumps(header).encode()
    while len(h) % 8:
        h += pad
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def gpt2_tensors(layers=1, C=32, V=256, T=16, wpe_rows=None, extra=(), drop=(), value=0.01):
    wpe_rows = T if wpe_rows is None else wpe_rows
    t = [("wte.weight", "F32", [V, C], value), ("wpe.weight", "F32", [wpe_rows, C], value)]
    for l in range(layers):
        p = f"h.{l}."
        t += [(p + "ln_1.weight", "F32", [C], 1.0), (p + "ln_1.bias", "F32", [C], 0.0),
              (p + "attn.c_attn.weight", "F32", [C, 3 * C], value), (p + "attn.c_attn.bias", "F32", [3 * C], 0.0),
              (p + "attn.c_proj.weight", "F32", [C, C], value), (p + "attn.c_proj.bias", "F32", [C], 0.0),
              (p + "ln_2.weight", "F32", [C], 1.0), (p + "ln_2.bias", "F32", [C], 0.0),
              (p + "mlp.c_fc.weight", "F32", [C, 4 * C], value), (p + "mlp.c_fc.bias", "F32", [4 * C], 0.0),
              (p + "mlp.c_proj.weight", "F32", [4 * C, C], value), (p + "mlp.c_proj.bias", "F32", [C], 0.0)]
    t += [("ln_f.weight", "F32", [C], 1.0), ("ln_f.bias", "F32", [C], 0.0)]
    t = [x for x in t if x[0] not in drop]
    return t + list(extra)


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def read_safetensors(path):
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]


def rewrite_metadata(src, dst, **changes):
    header, data = read_safetensors(src)
    for k, v in changes.items():
        if v is None:
            header["__metadata__"].pop(k, None)
        else:
            header["__metadata__"][k] = v
    h = json.dumps(header).encode()
    while len(h) % 8:
        h += b" "
    return write(dst, struct.pack("<Q", len(h)) + h + data)


# ----------------------------------------------------------------- cases

def case_dir(work, name):
    d = os.path.join(work, "cases", name)
    os.makedirs(d, exist_ok=True)
    return d


def train_cases(htr, work, data, ckpt):
    big = os.path.join(work, "big.bin")  # sparse: larger than the host memory of any machine this runs on
    with open(big, "wb") as f:
        f.truncate(1 << 40)
    fifo = os.path.join(work, "fifo.safetensors")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    regular = write(os.path.join(work, "regular.txt"), b"not a directory\n")
    a_dir = os.path.join(work, "adir.safetensors")
    os.makedirs(a_dir, exist_ok=True)
    base = TINY + ["--data", data]

    def train(name, args, needles, env=None, codes=(1, 2), **kw):
        d = case_dir(work, name)
        expect_error(name, [htr] + base + ["--out-dir", os.path.join(d, "out")] + args, d, needles,
                     env=env, codes=codes, **kw)

    def weights(name, tensors, needles, args=(), **kw):
        d = case_dir(work, name)
        path = write(os.path.join(d, name + ".safetensors"), tensors if isinstance(tensors, bytes) else safetensors(tensors))
        expect_error(name, [htr] + base + ["--out-dir", os.path.join(d, "out"), "--init-from", path] + list(args),
                     d, [name + ".safetensors"] + needles, **kw)

    # 1. Signals from model files: every dimension taken from a file.
    weights("wpe-zero-rows", gpt2_tensors(wpe_rows=0), ["wpe.weight", "context length"])
    weights("wte-zero-rows", gpt2_tensors(V=0), ["wte.weight"])
    weights("wte-zero-width", [("wte.weight", "F32", [256, 0], b""), ("wpe.weight", "F32", [16, 0], b""),
                               ("h.0.ln_1.weight", "F32", [0], b"")], ["wte.weight"])
    weights("wte-rank-1", [("wte.weight", "F32", [256], 0.0), ("wpe.weight", "F32", [16, 32], 0.0)], ["wte.weight"])
    weights("wpe-width-mismatch", gpt2_tensors()[:1] + [("wpe.weight", "F32", [16, 8], 0.0)], ["wpe.weight"])
    weights("vocab-below-256", gpt2_tensors(V=100), ["vocabulary"])
    weights("heads-not-dividing", gpt2_tensors(), ["divisible"], args=["--heads", "3"])
    # 3. Sizes from files and flags: one check, before allocation.
    weights("block-index-huge", gpt2_tensors(extra=[("h.999999999.ln_1.weight", "F32", [32], 1.0)]),
            ["h.999999999.ln_1.weight", "h.1.ln_1.weight"])
    weights("block-index-int64-max", gpt2_tensors(extra=[("h.9223372036854775807.ln_1.weight", "F32", [32], 1.0)]),
            ["h.9223372036854775807.ln_1.weight"])
    weights("block-gap", gpt2_tensors(layers=3, drop=[f"h.1.{s}" for s in ("ln_1.weight",)]), ["h.1.ln_1.weight"])
    weights("missing-block-tensor", gpt2_tensors(drop=["h.0.mlp.c_fc.weight"]), ["h.0.mlp.c_fc.weight"])
    weights("wrong-shape-tensor", [x if x[0] != "h.0.attn.c_proj.weight" else (x[0], "F32", [32, 16], 0.0)
                                   for x in gpt2_tensors()], ["h.0.attn.c_proj.weight"])
    weights("huge-width-from-file", safetensors([], raw_header=json.dumps({
        "wte.weight": {"dtype": "F32", "shape": [1 << 20, 1 << 20, 0], "data_offsets": [0, 0]},
        "wpe.weight": {"dtype": "F32", "shape": [16, 0], "data_offsets": [0, 0]}}).encode()), ["wte.weight"])
    weights("nonfinite-weights", gpt2_tensors(value=float("nan")), ["wte.weight", "NaN"])
    train("grad-accum-1e9", ["--grad-accum", "1000000000"], ["--grad-accum", "out of memory"])
    train("batch-1e9", ["--batch", "1000000000"], ["out of memory"])
    train("layers-100000", ["--layers", "100000", "--width", "128", "--heads", "4"],
          ["out of memory", "100000 layers"], timeout=60)
    train("width-1e9", ["--width", "1000000000", "--heads", "1"], ["width"], timeout=60)
    train("ctx-overflow", ["--ctx", "4611686018427387904", "--seq", "16"], ["overflows"], timeout=60)
    train("data-larger-than-memory", ["--data", big], ["big.bin", "out of memory"])
    train("seq-above-ctx", ["--seq", "64"], ["--seq 64"])
    # 4. Hangs: special files where a file is expected.
    for flag in ("--init-from", "--resume", "--data"):
        train("fifo" + flag, [flag, fifo], ["fifo.safetensors"], timeout=30)
    train("devzero--init-from", ["--init-from", "/dev/zero"], ["/dev/zero", "not a regular file"], timeout=30)
    # The same for the token paths: a FIFO or a device as --tokenizer, and a transformers
    # directory whose config.json is a FIFO (user_file.h: no blocking open, regular files only).
    train("fifo--tokenizer", ["--tokenizer", fifo], ["fifo.safetensors", "not a regular file"], timeout=30)
    train("devzero--tokenizer", ["--tokenizer", "/dev/zero"], ["/dev/zero", "not a regular file"], timeout=30)
    hf_dir = os.path.join(work, "hf-fifo-config")
    if not os.path.isdir(hf_dir):
        os.makedirs(hf_dir)
        os.mkfifo(os.path.join(hf_dir, "config.json"))
        shutil.copy(ckpt, os.path.join(hf_dir, "model.safetensors"))
    train("fifo-config.json--init-from", ["--init-from", hf_dir], ["config.json", "not a regular file"], timeout=30)
    train("directory--init-from", ["--init-from", a_dir], ["adir.safetensors"], timeout=30)
    train("missing--init-from", ["--init-from", os.path.join(work, "nope.safetensors")], ["nope.safetensors"])
    # 5 and 8. Variables: garbage is rejected with the valid values.
    for var, value, needle in (("HTR_CACHE_DIR", "/proc/foo", "HTR_CACHE_DIR"),
                               ("HTR_CACHE_DIR", regular, "not a directory"),
                               ("HTR_CPU_JIT", "garbage", "auto|compiler|interpreter"),
                               ("HTR_FUSION", "garbage", "force"),
                               ("HTR_GRAPHS", "yes", "HTR_GRAPHS"),
                               ("HTR_FUSE_ATTENTION", "2", "HTR_FUSE_ATTENTION"),
                               ("HTR_COMPILE_THREADS", "garbage", "[1, 256]"),
                               ("HTR_COMPILE_THREADS", "0", "HTR_COMPILE_THREADS"),
                               ("HTR_COMPILE_THREADS", "99999999999999999999", "HTR_COMPILE_THREADS"),
                               ("HTR_LOG", "loud", "error, warn, info"),
                               ("HTR_EXEC", "gpu", "auto|host|device|staged"),
                               ("HTR_KERNELS", "all", "auto|generated"),
                               ("HTR_COLSUM_BLOCK", "33", "power of two"),
                               ("HTR_LN_BWD_ROWS", "1x", "HTR_LN_BWD_ROWS")):
        train(f"env-{var}={os.path.basename(value)[:12]}", [], [var], env={var: value})
    # 8. Flags.
    for flag, value, needle in (("--threads", "99999999999", "must be <="), ("--lr", "inf", "finite"),
                                ("--eps", "inf", "finite"), ("--lr", "nan", "--lr"), ("--lr", "1e999", "--lr"),
                                ("--eps", "-inf", "--eps"), ("--temperature", "inf", "finite"),
                                ("--grad-clip", "nan", "--grad-clip"), ("--weight-decay", "inf", "finite"),
                                ("--steps", "99999999999999999999", "64-bit"), ("--batch", "-1", ">= 1"),
                                ("--batch", "0x10", "not an integer"), ("--beta1", "1", "< 1"),
                                ("--val-fraction", "1", "< 1"), ("--preset", "huge", "tiny, small"),
                                ("--data-order", "shuffled", "random|sequential"), ("--layers", "", "--layers"),
                                ("--precision", "fp8", "--precision"),
                                ("--memory-budget", "99999999999999G", "byte count"),
                                ("--memory-budget", " 5", "byte count"),
                                ("--oom-at-step", "18446744073709551615", "step number"),
                                ("--loss-scale", "inf", "positive"),
                                ("--loss-scale-window", "0", "positive")):
        train(f"flag{flag}={value[:12]}", [flag, value], [flag, needle])
    train("flag-unknown", ["--frobnicate", "1"], ["--frobnicate"])
    train("flag-missing-value", ["--steps"], ["--steps"])
    # 7. Output locations, checked before the first step.
    train("out-dir-devnull", ["--out-dir", "/dev/null"], ["/dev/null"])
    train("out-dir-regular-file", ["--out-dir", regular], ["regular.txt", "not a directory"])
    train("checkpoint-dir-regular-file", ["--checkpoint-dir", regular], ["regular.txt"])
    train("out-dir-under-file", ["--out-dir", regular + "/sub"], ["regular.txt"])
    train("save-weights-missing-dir", ["--save-weights", os.path.join(work, "no", "such", "w.safetensors")],
          ["--save-weights", "no/such"])
    train("save-weights-directory", ["--save-weights", a_dir], ["--save-weights", "adir.safetensors"])
    train("save-weights-devnull", ["--save-weights", "/dev/null"], ["--save-weights", "/dev/null"])
    train("save-weights-fifo", ["--save-weights", fifo], ["--save-weights", "fifo.safetensors"], timeout=30)
    train("save-init-missing-dir", ["--save-init", os.path.join(work, "no", "i.safetensors")], ["--save-init"])
    train("profile-missing-dir", ["--profile", os.path.join(work, "no", "trace.json")], ["--profile"])
    train("profile-directory", ["--profile", a_dir], ["--profile"])
    train("log-json-missing-dir", ["--log-json", os.path.join(work, "no", "log.jsonl")], ["--log-json"])
    train("log-json-fifo", ["--log-json", fifo], ["--log-json", "fifo.safetensors"], timeout=30)
    # 6. Resume metadata.
    for name, changes, needles in (
            ("next-step-beyond-int64", {"next_step": "99999999999999999999"}, ["next_step"]),
            ("next-step-1000000", {"next_step": "1000000"}, ["step 1000000", "train nothing"]),
            ("next-step-equals-steps", {"next_step": "4"}, ["train nothing"]),
            ("next-step-negative", {"next_step": "-1"}, ["next_step"]),
            ("next-step-garbage", {"next_step": "3x"}, ["next_step"]),
            ("next-step-empty", {"next_step": ""}, ["next_step"]),
            ("next-step-rows-overflow", {"next_step": "4611686018427387904"}, ["next_step"]),
            ("n-head-zero", {"n_head": "0"}, ["n_head"]),
            ("n-head-huge", {"n_head": "99999999999"}, ["n_head"]),
            ("n-head-not-heads-flag", {"n_head": "3"}, ["3 heads", "--heads"]),
            ("n-layer-mismatch", {"n_layer": "7"}, ["n_layer"]),
            ("history-garbage", {"history": "zero one two\n"}, ["history"]),
            ("format-wrong", {"format": "something-else"}, ["format"]),
            ("format-missing", {"format": None}, ["format"]),
            ("data-rng-garbage", {"data_rng": "not a state"}, ["data_rng"])):
        d = case_dir(work, "resume-" + name)
        ck = rewrite_metadata(ckpt, os.path.join(d, "checkpoint.safetensors"), **changes)
        expect_error("resume-" + name, [htr] + base + ["--steps", "4", "--out-dir", d, "--resume", ck], d,
                     ["checkpoint.safetensors"] + needles)
    # 9. Smaller.
    d = case_dir(work, "nul-padded-header")
    good = safetensors(gpt2_tensors())
    n = struct.unpack("<Q", good[:8])[0]
    header = good[8:8 + n].rstrip(b" ") + b"\0" * 16
    padded = struct.pack("<Q", len(header)) + header + good[8 + n:]
    weights("nul-padded-header", padded, ["NUL"])
    weights("nul-then-garbage", struct.pack("<Q", len(header) + 8) + header + b"garbage!" + good[8 + n:], ["NUL"])
    bad_utf8 = json.dumps({"wte.weight": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    bad_utf8 = bad_utf8.replace(b"wte.weight", b"wte\xff\xfe\x1b[31m")
    weights("invalid-utf8-name", safetensors([], raw_header=bad_utf8) + b"\0" * 4, ["UTF-8"])
    esc = json.dumps({"\u001b[31mred": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                      "x": {"dtype": "X\u0007", "shape": [1], "data_offsets": [4, 8]}}).encode()
    weights("control-chars-in-names", safetensors([], raw_header=esc) + b"\0" * 8, ["\\x07"])
    weights("truncated-file", safetensors(gpt2_tensors())[:-100], ["truncated"])
    weights("header-length-huge", struct.pack("<Q", 1 << 62) + b"{}", ["header length"])
    weights("empty-file", b"", ["too short"])
    d = case_dir(work, "too-little-data")
    tiny = write(os.path.join(d, "tiny.txt"), b"x" * 15)
    expect_error("too-little-data", [htr] + TINY + ["--data", tiny, "--out-dir", os.path.join(d, "out")], d,
                 ["tiny.txt", "training split", "needs at least 18"])
    # --log-json on a full disk (RLIMIT_FSIZE with SIGXFSZ ignored: writes fail with EFBIG).
    d = case_dir(work, "log-json-full-disk")
    log = os.path.join(d, "log.jsonl")
    def small_files():
        import resource
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (150, 150))
    expect_error("log-json-full-disk", [htr] + base + ["--out-dir", os.path.join(d, "out"), "--log-json", log,
                                                       "--steps", "4"], d, ["--log-json", "log.jsonl", "write failed"],
                 codes=(1,), watch=os.path.join(d, "none"), preexec=small_files)

    # Behaviours.
    expect_ok("help-lists-kill-after-step", [htr, "--help"], work, ["--kill-after-step"])
    d = case_dir(work, "extra-block-tensor")
    extra = write(os.path.join(d, "extra.safetensors"),
                  safetensors(gpt2_tensors(extra=[("h.9.extra", "F32", [4], 0.0)])))
    expect_ok("extra-block-tensor", [htr] + base + ["--out-dir", os.path.join(d, "out"), "--init-from", extra,
                                                    "--steps", "1"], d, ["'h.9.extra' ignored"])
    d = case_dir(work, "stale-temporaries")
    out = os.path.join(d, "out")
    os.makedirs(out, exist_ok=True)
    stale = [write(os.path.join(out, ".checkpoint.safetensors.tmp-" + s), b"x" * 4096) for s in ("AbC123", "zz9_99")]
    keep = write(os.path.join(out, ".checkpoint.safetensors.tmp-short"), b"not ours")
    expect_ok("stale-temporaries-cleaned", [htr] + base + ["--out-dir", out, "--steps", "1"], d,
              check=lambda: [f"{os.path.basename(p)} left" for p in stale if os.path.exists(p)] +
              ([] if os.path.exists(keep) else ["a file of another name was removed"]))
    d = case_dir(work, "resume-log-once")
    log = os.path.join(d, "log.jsonl")
    common = [htr] + TINY + ["--data", data, "--out-dir", d, "--steps", "6", "--checkpoint-every", "2",
                             "--log-json", log]
    rc, _, _ = execute(common + ["--kill-after-step", "2"], {}, d)
    def steps_once():
        with open(log) as f:
            steps = [json.loads(l)["step"] for l in f if l.strip()]
        return [] if steps == list(range(6)) else [f"--log-json holds steps {steps}, expected 0..5 once"]
    if rc != -signal.SIGKILL:
        record("resume-log-once", False, f"--kill-after-step: exit {rc}")
    else:
        expect_ok("resume-log-once", common + ["--resume"], d, check=steps_once)


def plugin_cases(info, work):
    rc, out, err = execute([info, "--json"], {}, work)
    if rc != 0:
        record("htr-info-baseline", False, f"exit {rc}: {err.decode()[-300:]}")
        return
    base = json.loads(out)
    real = {p["name"]: p["path"] for p in base["plugins"]}
    if not real:
        record("htr-info-baseline", False, "no plugin loads from the build tree")
        return
    d = os.path.join(work, "plugin-dir")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    expected = {}  # file -> needle of its reason
    for name, path in sorted(real.items()):
        with open(path, "rb") as f:
            elf = f.read()
        for k, size in (("trunc100k", 100000), ("trunchalf", len(elf) // 2), ("trunc64", 64), ("trunc7", 7)):
            p = write(os.path.join(d, f"libhtr_{k}_{name}.so"), elf[:min(size, len(elf) - 1)])
            expected[p] = "truncated" if size >= 64 else "ELF"
        expected[write(os.path.join(d, f"libhtr_zero_{name}.so"), b"\0" * len(elf))] = "not an ELF file"
        arch = bytearray(elf)
        arch[18:20] = struct.pack("<H", 183 if struct.unpack("<H", elf[18:20])[0] != 183 else 62)  # AArch64 / x86-64
        expected[write(os.path.join(d, f"libhtr_arch_{name}.so"), bytes(arch))] = "wrong architecture"
        cls = bytearray(elf)
        cls[4] = 1  # ELFCLASS32
        expected[write(os.path.join(d, f"libhtr_class32_{name}.so"), bytes(cls))] = "32-bit"
        exe = bytearray(elf)
        exe[16:18] = struct.pack("<H", 2)  # ET_EXEC
        expected[write(os.path.join(d, f"libhtr_exec_{name}.so"), bytes(exe))] = "not a shared object"
        bigph = bytearray(elf)
        bigph[54:56] = struct.pack("<H", 32)  # e_phentsize
        expected[write(os.path.join(d, f"libhtr_phnum_{name}.so"), bytes(bigph))] = "program headers"
    expected[write(os.path.join(d, "libhtr_empty.so"), b"")] = "ELF"
    expected[write(os.path.join(d, "libhtr_text.so"), b"#!/bin/sh\necho not a plugin\n" * 10)] = "ELF"
    os.mkfifo(os.path.join(d, "libhtr_fifo.so"))  # not a regular file: never listed, never opened
    os.makedirs(os.path.join(d, "libhtr_dir.so"))
    missing = os.path.join(work, "no-such-plugin-dir")
    env = {"HTR_PLUGIN_PATH": d + ":" + regular_file(work) + ":" + missing}
    rc, out, err = execute([info, "--json"], env, work, timeout=60)
    problems = []
    if rc != 0:
        problems.append(f"exit {rc}" + (f" (signal {signal.Signals(-rc).name})" if isinstance(rc, int) and rc < 0 else ""))
    else:
        got = json.loads(out)
        loaded = {p["name"] for p in got["plugins"]}
        if not set(real) <= loaded:
            problems.append(f"real plugins missing: {sorted(set(real) - loaded)}")
        rej = {r["path"]: r["reason"] for r in got["rejected"]}
        for p, needle in sorted(expected.items()):
            rp = os.path.realpath(p)
            reason = rej.get(p, rej.get(rp))
            if reason is None:
                problems.append(f"{os.path.basename(p)} not rejected")
            elif needle not in reason:
                problems.append(f"{os.path.basename(p)}: reason {reason!r} lacks {needle!r}")
        text = clean_text(err) or ""
        for w in ("regular.txt", "no-such-plugin-dir"):
            if w not in text:
                problems.append(f"no warning naming the HTR_PLUGIN_PATH entry {w}")
    for p in expected:
        results.append(("plugin " + os.path.basename(p), not problems, ""))
    print(f"hostile[plugins]: {len(expected)} hostile plugin files against {len(real)} real plugins "
          f"({', '.join(sorted(real))}): {'ok' if not problems else 'FAIL: ' + '; '.join(problems)}", flush=True)


def regular_file(work):
    return write(os.path.join(work, "regular.txt"), b"not a directory\n")


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    htr, info = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    work = sys.argv[3] if len(sys.argv) > 3 else tempfile.mkdtemp(prefix="htr-hostile-")
    os.makedirs(work, exist_ok=True)
    os.environ.setdefault("HTR_CACHE_DIR", os.path.join(work, "kernel-cache"))
    data = write(os.path.join(work, "data.txt"), b"".join(b"the quick brown fox %d jumps over the lazy dog\n" % i
                                                          for i in range(200)))
    # One real checkpoint to corrupt.
    good = os.path.join(work, "good")
    rc, out, err = execute([htr] + TINY + ["--data", data, "--out-dir", good], {}, work)
    if rc != 0:
        print(f"FAIL: the baseline run failed (exit {rc}):\n{err.decode()[-2000:]}")
        return 1
    train_cases(htr, work, data, os.path.join(good, "checkpoint.safetensors"))
    plugin_cases(info, work)
    failed = [r for r in results if not r[1]]
    print(f"hostile: {len(results)} inputs tried, {len(results) - len(failed)} passed, {len(failed)} failed")
    if len(sys.argv) <= 3 and not failed:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
