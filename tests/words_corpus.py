"""The small synthetic corpus the training tests share: deterministic pseudo-random words.

Import it after putting tests/ on sys.path (the tests' scripts do so from their own location).
"""


def make_data(path, n):
    """Writes about n bytes of words from a fixed 12-word list, picked by a fixed LCG, to path."""
    words = b"alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    out, x = [], 12345
    while sum(map(len, out)) < n:
        x = (x * 1103515245 + 12345) % 2**31
        out.append(words[x % len(words)] + (b"\n" if x % 7 == 0 else b" "))
    with open(path, "wb") as f:
        f.write(b"".join(out))
