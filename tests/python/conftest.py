"""Fixtures of the python suite: the paths Meson passes (run_pytest.py) and
one runtime per session over the libhtr under test."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "samples", "python"))

OPTIONS = ("libhtr", "layout-probe", "old-libhtr", "htr-info", "htr-train")


def pytest_addoption(parser):
    for name in OPTIONS:
        parser.addoption("--" + name, default=None, help=f"path of {name} (from Meson)")


def _path(config, name):
    p = config.getoption(name.replace("-", "_"))
    if not p:
        pytest.fail(f"--{name} was not given (run through run_pytest.py / meson test)")
    return p


def pytest_configure(config):
    lib = config.getoption("libhtr")
    if lib:
        import htr
        htr.load_library(lib)
        os.environ["HTR_LIBRARY"] = lib  # for child Python processes


@pytest.fixture(scope="session")
def paths(request):
    return {n: _path(request.config, n) for n in OPTIONS}


@pytest.fixture(scope="session")
def rt():
    import htr
    return htr.default_runtime()


@pytest.fixture(scope="session")
def cpu(rt):
    return rt.device("cpu:0")


@pytest.fixture
def child_env():
    """Environment for child processes: the library under test and the package."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + env.get("PYTHONPATH", "")
    return env
