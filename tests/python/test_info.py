"""htr.info() prints what htr-info prints (text and --json), in fresh
processes so both see an untouched runtime. Free memory is the one value
that moves between the two runs and is masked."""
import json
import re
import subprocess
import sys


def run(cmd, env):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, env=env).stdout


def mask(text):
    return re.sub(r"total, [0-9.]+ [KMGT]?i?B free", "total, <free> free", text)


def test_text_matches_htr_info(paths, child_env):
    c = run([paths["htr-info"]], child_env)
    py = run([sys.executable, "-c", "import htr; htr.info()"], child_env)
    assert "Plugins loaded:" in c and "[cpu:0]" in c
    assert mask(py) == mask(c)


def test_json_matches_htr_info(paths, child_env):
    c = json.loads(run([paths["htr-info"], "--json"], child_env))
    py = json.loads(run([sys.executable, "-c", "import htr; htr.info(as_json=True)"], child_env))
    for r in (c, py):
        for d in r["devices"]:
            d.pop("memory_free_bytes", None)
    assert py == c
