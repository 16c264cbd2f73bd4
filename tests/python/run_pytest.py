#!/usr/bin/python3
"""Runs the pytest suite in this folder (Meson test `python`).

    run_pytest.py --libhtr PATH --layout-probe PATH --old-libhtr PATH
                  --htr-info PATH --htr-train PATH [pytest args...]

The options go to conftest.py. Exit status: pytest's, except that pytest
collecting no test at all (its status 5) and a missing pytest are failures
(1), never a pass or a skip."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

try:
    import pytest
except ImportError:
    print("run_pytest.py: pytest is missing for /usr/bin/python3; install it with\n"
          "  /usr/bin/python3 -m pip install --break-system-packages pytest", file=sys.stderr)
    sys.exit(1)


class _Count:
    def __init__(self):
        self.collected = 0

    def pytest_collection_finish(self, session):
        self.collected = len(session.items)


count = _Count()
args = ["-p", "no:cacheprovider", "-v", "--durations=5", "--rootdir", HERE, HERE] + sys.argv[1:]
rc = int(pytest.main(args, plugins=[count]))
if rc == 5 or (rc == 0 and count.collected == 0):
    print("run_pytest.py: pytest collected no tests", file=sys.stderr)
    sys.exit(1)
sys.exit(rc)
