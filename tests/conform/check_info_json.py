#!/usr/bin/env python3
"""Smoke test of `htr-info --json`: one JSON object with the documented keys.

usage: check_info_json.py HTR_INFO [PLUGIN_FILE...]

Every PLUGIN_FILE is passed to htr-info with --plugin and must show up among
the loaded plugins (by path) with name, version, abi and score; a bogus file
must show up among the rejected ones with a reason; every device has an id
and a name. Exits non-zero with a message on the first violation.
"""
import json
import os
import subprocess
import sys
import tempfile


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    info, plugins = sys.argv[1], sys.argv[2:]
    with tempfile.TemporaryDirectory() as tmp:
        bogus = os.path.join(tmp, "libhtr_bogus.so")
        with open(bogus, "w") as f:
            f.write("not an ELF file\n")
        args = [info, "--json"]
        for p in plugins + [bogus]:
            args += ["--plugin", p]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=100)
    if proc.returncode != 0:
        fail(f"htr-info exited {proc.returncode}: {proc.stderr}")
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        fail(f"output is not one JSON object: {e}\n{proc.stdout[:2000]}")
    for key in ("search_paths", "plugins", "rejected", "devices"):
        if not isinstance(doc.get(key), list):
            fail(f"missing array '{key}'")
    for p in doc["plugins"]:
        for key in ("name", "path", "version", "abi", "score"):
            if key not in p:
                fail(f"plugin entry lacks '{key}': {p}")
    for r in doc["rejected"]:
        if not r.get("path") or not r.get("reason"):
            fail(f"rejected entry lacks path/reason: {r}")
    for d in doc["devices"]:
        if not d.get("id") or "name" not in d:
            fail(f"device entry lacks id/name: {d}")
    loaded = {os.path.realpath(p["path"]) for p in doc["plugins"]}
    rejected_reasons = {os.path.basename(r["path"]): r["reason"] for r in doc["rejected"]}
    for p in plugins:
        name = os.path.basename(p)
        if os.path.realpath(p) not in loaded and name not in rejected_reasons:
            fail(f"{p} neither loaded nor rejected")
    if "libhtr_bogus.so" not in rejected_reasons:
        fail("the bogus plugin file was not reported as rejected")
    print(f"ok: {len(doc['plugins'])} plugins, {len(doc['rejected'])} rejected, "
          f"{len(doc['devices'])} devices; bogus rejected: {rejected_reasons['libhtr_bogus.so']}")


if __name__ == "__main__":
    main()
