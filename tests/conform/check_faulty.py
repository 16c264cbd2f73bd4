#!/usr/bin/env python3
"""Runs htr-conform on the deliberately faulty plugin and checks that the kit
catches exactly the planted violations (see faulty_plugin.cc), and that
everything else still passes — including cases after the planted crash.

usage: check_faulty.py HTR_CONFORM FAULTY_PLUGIN_PATH OUT_JSON
"""
import json
import subprocess
import sys

EXPECTED_FAILS = {
    ("abi", "properties_short_struct"),
    ("abi", "properties_header_only"),
    ("copies", "out_of_range"),
    ("memory", "impossible_size"),
    ("robustness", "stream_synchronize(NULL)"),
}


def main():
    conform, plugin, out = sys.argv[1:4]
    proc = subprocess.run([conform, "--plugin", plugin, "--json", out],
                          capture_output=True, text=True, timeout=500)
    print(proc.stdout[-6000:])
    if proc.returncode == 0:
        print("FAIL: htr-conform exited 0 on a faulty plugin")
        return 1
    with open(out) as f:
        doc = json.load(f)
    fails = {(r["suite"], r["case"]) for r in doc["results"] if r["result"] == "FAIL"}
    missed = EXPECTED_FAILS - fails
    extra = fails - EXPECTED_FAILS
    ok = True
    if missed:
        print(f"FAIL: planted violations not caught: {sorted(missed)}")
        ok = False
    if extra:
        print(f"FAIL: unexpected failures (kit cases not independent, or the null plugin "
              f"regressed): {sorted(extra)}")
        ok = False
    suites_after_crash = [r for r in doc["results"] if r["suite"] == "ops"]
    if not suites_after_crash:
        print("FAIL: no 'ops' results: the run did not survive the planted crash")
        ok = False
    if ok:
        print(f"ok: caught {len(EXPECTED_FAILS)} planted violations, nothing else failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
