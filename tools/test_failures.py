#!/usr/bin/python3
"""Prints what each failed test of a meson test log printed last, for tools/test.sh's closing report.

meson test --print-errorlogs prints a failed test's output where it fails, which in a long run
(and in a CI log that keeps only its tail) is far from the summary. tools/test.sh calls this
after each meson test run and prints the collected lines once more, just above the summary, so
the last screen of a run names every failed test with the end of its output.

usage: test_failures.py LABEL TESTLOG.json [LINES]
For every test whose result is not OK, SKIP or EXPECTEDFAIL: a header "LABEL: NAME (RESULT,
DURATION s)" and the last LINES (default 25) lines of its stdout and stderr. Prints nothing when
every test passed; exits 0 either way (the counts come from meson's own summary).
"""
import json
import sys

PASSING = ("OK", "SKIP", "EXPECTEDFAIL")


def tail(text, n):
    lines = (text or "").rstrip().splitlines()
    return lines[-n:]


def main(label, path, n):
    try:
        f = open(path, encoding="utf-8", errors="replace")
    except OSError as e:
        print("%s: cannot read %s: %s" % (label, path, e))
        return
    with f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                t = json.loads(line)
            except ValueError:
                continue
            result = t.get("result", "?")
            if result in PASSING:
                continue
            print("---- %s: %s (%s, %.1f s)" % (label, t.get("name", "?"), result,
                                                 float(t.get("duration") or 0.0)))
            out = tail(t.get("stdout"), n)
            err = tail(t.get("stderr"), n)
            for l in out:
                print("  | " + l)
            if err:
                print("  stderr:")
                for l in err:
                    print("  | " + l)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) == 4 else 25)
