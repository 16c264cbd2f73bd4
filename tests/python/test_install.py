"""`pip install ./python` works (into a temporary target, from a copy of
the source so the checkout stays clean), and the installed package finds
libhtr through HTR_LIBRARY, or says how to point it there."""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def test_pip_install_and_import(tmp_path, paths):
    src = tmp_path / "src"
    shutil.copytree(os.path.join(ROOT, "python"), src,
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    target = tmp_path / "site"
    env = dict(os.environ, HOME=str(tmp_path), PIP_DISABLE_PIP_VERSION_CHECK="1")
    p = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
                        "--no-index", "--target", str(target), str(src)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    if p.returncode != 0 and "No module named pip" in p.stdout:
        pytest.skip("pip is not installed for this Python")
    assert p.returncode == 0, p.stdout
    assert (target / "htr" / "__init__.py").exists()
    code = ("import htr, sys; rt = htr.default_runtime(); "
            "print(htr.__file__); print(rt.device('cpu:0').id)")
    env = dict(os.environ, PYTHONPATH=str(target), HTR_LIBRARY=paths["libhtr"])
    out = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env,
                         cwd=tmp_path, check=True).stdout.split()
    assert out[0].startswith(str(target)) and out[1] == "cpu:0"
    # A wrong HTR_LIBRARY: a clear error naming the variable and the path.
    env["HTR_LIBRARY"] = str(tmp_path / "nowhere" / "libhtr.so")
    p = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, env=env, cwd=tmp_path)
    assert p.returncode != 0
    assert "HTR_LIBRARY" in p.stderr and "nowhere" in p.stderr
