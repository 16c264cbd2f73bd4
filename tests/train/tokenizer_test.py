#!/usr/bin/python3
"""htr-train's byte-level BPE tokenizer (samples/htr-train/tokenizer.h) against
the `tokenizers` package with the same tokenizer.json (GitHub issue 40).

A BPE with GPT-2's byte-level pre-tokenizer is trained here with `tokenizers`
on generated multilingual text; then over >= 1 MB of other generated text
(Latin, Greek, Cyrillic, CJK, Arabic, Devanagari with combining marks, Thai,
emoji with ZWJ sequences and modifiers, ASCII and non-ASCII digits, Roman
numerals and fractions, whitespace runs with tabs, CR LF, NBSP, U+3000 and
U+0085, contractions in both cases, the special token <|endoftext|>, and
random assigned BMP and astral code points):
  - tokenizer_tool's ids equal `tokenizers`' ids exactly,
  - decode(encode(x)) == x (and `tokenizers` decodes the ids to x too),
  - the same with merges written as "a b" strings, and with add_prefix_space
    on (then decode equals `tokenizers`' decode, which keeps the added spaces),
  - htr-train --tokenizer encodes a text corpus into its token cache (the ids
    `tokenizers` gives) and reads the cache back on the next run.

usage: tokenizer_test.py TOKENIZER_TOOL HTR_TRAIN
Exits 77 (skipped) when `tokenizers` is not installed."""
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import unicodedata

try:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
except ImportError:
    print("tokenizers not installed: skipped (pip install tokenizers)")
    sys.exit(77)

WORDS = ("the of and to in is was that for it with as his on be at by had are but from or have an "
         "they which one you were her all she there would their we him been has when who will more "
         "no if out so said what up its about into than them can only other new some time could").split()
CONTRACTIONS = ["don't", "it's", "they're", "we've", "I'm", "you'll", "he'd", "DON'T", "IT'S", "O'Neil",
                "'tis", "rock'n'roll", "''quoted''", "y'all", "can't", "'s", "'ll've"]
SCRIPTS = [
    "Ελληνικά γράμματα και λέξεις", "Русский текст с буквами ёЁ", "日本語のテキストと漢字", "中文字符和标点，。",
    "한국어 문장입니다", "العربية النص مع التشكيل", "हिन्दी पाठ में मात्राएँ", "ภาษาไทยไม่มีช่องว่าง",
    "עברית טקסט", "café naïve façade Ærøskøbing", "cafe\u0301 e\u0308 n\u0303", "Ǆǅǆ ﬁﬂ",
    "😀😃🙂 👍🏽 👨‍👩‍👧‍👦 🇩🇪🇯🇵 ❤️", "∑∫√ ≤≥ ∞ → ⇒", "٠١٢٣٤٥٦٧٨٩ ۱۲۳", "１２３ ４５６", "Ⅻ ⅷ ² ³ ½ ¾ ①②",
    "𝐀𝐁𝐂 𝒜𝒷 𠀀𠀁𠀂", "ß ẞ ŉ", "Ω ω µ", "¿¡ «» „“ ‹›", "—–‐", "§¶†‡", "ʼn ʻokina",
]
SPACES = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n", "\u00a0", "\u3000", "\u2003",
          "\u0085", " \t ", "\u2028", "    \n  "]
PUNCT = list(".,;:!?-()[]{}\"'/\\@#$%^&*+=<>|~`_") + ["...", "?!", "--", "''", "\"'", "'\"", "'''"]


def random_assigned(rng, lo, hi):
    while True:
        cp = rng.randrange(lo, hi)
        if 0xD800 <= cp <= 0xDFFF:
            continue
        if unicodedata.category(chr(cp)) not in ("Cn", "Cs", "Co"):
            return chr(cp)


def gen_text(seed, size):
    rng = random.Random(seed)
    out, n = [], 0
    while n < size:
        r = rng.random()
        if r < 0.40:
            w = rng.choice(WORDS)
            if rng.random() < 0.1:
                w = w.capitalize()
            piece = w
        elif r < 0.47:
            piece = rng.choice(CONTRACTIONS)
        elif r < 0.62:
            s = rng.choice(SCRIPTS)
            piece = s if rng.random() < 0.5 else s[: rng.randrange(1, len(s) + 1)]
        elif r < 0.70:
            piece = str(rng.randrange(0, 10 ** rng.randrange(1, 12)))
        elif r < 0.78:
            piece = rng.choice(PUNCT)
        elif r < 0.81:
            piece = "".join(random_assigned(rng, 0x20, 0x3000) for _ in range(rng.randrange(1, 6)))
        elif r < 0.82:
            piece = "".join(random_assigned(rng, 0x10000, 0x2FFFF) for _ in range(rng.randrange(1, 4)))
        elif r < 0.825:
            piece = "<|endoftext|>"
        else:
            piece = ""
        sep = rng.choice(SPACES) if rng.random() < 0.3 else " "
        if rng.random() < 0.05:
            sep = ""
        out.append(piece + sep)
        n += len((piece + sep).encode())
    return "".join(out)


def train_tokenizer(path):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=3000, min_frequency=2, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    corpus = gen_text(1, 400_000)
    tok.train_from_iterator([corpus[i:i + 4000] for i in range(0, len(corpus), 4000)], trainer=trainer)
    tok.save(path)


def tool(exe, tok_json, mode, src, dst):
    p = subprocess.run([exe, tok_json, mode, src, dst], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise SystemExit(f"FAIL: tokenizer_tool {mode}: {p.stderr.strip()}")


def check(exe, tok_json, text, work, label, exact=True):
    ref = Tokenizer.from_file(tok_json)
    want = ref.encode(text).ids
    src, ids_path, back = (os.path.join(work, f"{label}.{e}") for e in ("txt", "ids", "back"))
    with open(src, "wb") as f:
        f.write(text.encode())
    tool(exe, tok_json, "encode", src, ids_path)
    with open(ids_path, "rb") as f:
        raw = f.read()
    got = list(struct.unpack(f"<{len(raw) // 4}i", raw))
    if got != want:
        k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        ctx = lambda ids: [ref.id_to_token(i) for i in ids[max(0, k - 3):k + 4]]  # noqa: E731
        raise SystemExit(f"FAIL [{label}]: ids differ at {k} of {len(want)} (htr {len(got)} ids): "
                         f"htr {ctx(got)} vs tokenizers {ctx(want)}")
    tool(exe, tok_json, "decode", ids_path, back)
    # add_prefix_space adds a space to each segment: the round trip is then
    # tokenizers' decode, not x itself.
    expect = text if exact else ref.decode(want, skip_special_tokens=False)
    with open(back, "rb") as f:
        if f.read() != expect.encode():
            raise SystemExit(f"FAIL [{label}]: decode(encode(x)) != " + ("x" if exact else "tokenizers' decode"))
    if exact and ref.decode(want, skip_special_tokens=False) != text:
        raise SystemExit(f"FAIL [{label}]: tokenizers' own decode differs from x (test setup)")
    print(f"ok [{label}]: {len(text.encode())} bytes, {len(want)} ids identical, decode "
          + ("== x" if exact else "== tokenizers' decode"))
    return want


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    exe, htr = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="htr-tok-") as work:
        tok_json = os.path.join(work, "tokenizer.json")
        train_tokenizer(tok_json)
        text = gen_text(2, 1_100_000)
        assert len(text.encode()) >= 1_000_000
        check(exe, tok_json, text, work, "byte-level")

        with open(tok_json) as f:
            j = json.load(f)
        variants = []
        pre = json.loads(json.dumps(j))
        pre["pre_tokenizer"]["add_prefix_space"] = True
        variants.append(("add-prefix-space", pre))
        legacy = json.loads(json.dumps(j))
        merges = legacy["model"]["merges"]
        if merges and isinstance(merges[0], list):
            legacy["model"]["merges"] = [" ".join(m) for m in merges]
        variants.append(("merges-as-strings", legacy))
        for label, v in variants:
            path = os.path.join(work, f"{label}.json")
            with open(path, "w") as f:
                json.dump(v, f, ensure_ascii=False)
            check(exe, path, text[:200_000], work, label, exact=label != "add-prefix-space")

        # htr-train: the corpus is encoded once into the token cache, then read back.
        data = os.path.join(work, "corpus.txt")
        small = gen_text(3, 60_000)
        with open(data, "wb") as f:
            f.write(small.encode())
        out = os.path.join(work, "out")
        args = [htr, "--tokenizer", tok_json, "--data", data, "--out-dir", out, "--device", "cpu:0",
                "--layers", "1", "--width", "32", "--heads", "2", "--ctx", "32", "--batch", "2",
                "--steps", "2", "--eval-batches", "1", "--sample-tokens", "16", "--progress", "plain"]
        logs = []
        for _ in range(2):
            p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
            if p.returncode != 0:
                raise SystemExit(f"FAIL: htr-train --tokenizer exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
            logs.append(p.stdout)
        if "vocab 3000" not in logs[0] or "encoded" not in logs[0] or "from the cache" not in logs[1]:
            raise SystemExit(f"FAIL: htr-train did not encode then reuse the token cache:\n{logs[0]}\n{logs[1]}")
        caches = [n for n in os.listdir(out) if n.startswith("tokens-") and n.endswith(".bin")]
        if len(caches) != 1:
            raise SystemExit(f"FAIL: expected one token cache in {out}, found {caches}")
        with open(os.path.join(out, caches[0]), "rb") as f:
            raw = f.read()
        magic, version, count = struct.unpack("<3i", raw[:12])
        cached = list(struct.unpack(f"<{count}H", raw[1024:]))
        if (magic, version) != (20240520, 1) or cached != Tokenizer.from_file(tok_json).encode(small).ids:
            raise SystemExit("FAIL: htr-train's token cache is not the tokenizers ids of the corpus")
        print(f"ok [htr-train]: {len(small.encode())} bytes -> {count} cached tokens (llm.c v1), reused on rerun")
    print("PASS")


if __name__ == "__main__":
    main()
