"""Struct layouts: every ctypes mirror (python/htr/_structs.py) against the C
compiler's view of the headers (layout_probe.c): sizeof, and each field's
offset and size, both ways."""
import ctypes
import json
import subprocess

import pytest

from htr import _structs as S


@pytest.fixture(scope="module")
def probe(paths):
    out = subprocess.run([paths["layout-probe"]], check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(out.stdout)


def compare(name, cls, c):
    """Differences between mirror `cls` and the probe's entry `c` (a list of strings)."""
    problems = []
    if ctypes.sizeof(cls) != c["size"]:
        problems.append(f"{name}: sizeof {ctypes.sizeof(cls)} in ctypes, {c['size']} in C")
    py_fields = [f[0] for f in cls._fields_]
    for f in c["fields"]:
        if f not in py_fields:
            problems.append(f"{name}.{f}: in the C header, missing from the ctypes mirror")
    for f in py_fields:
        if f not in c["fields"]:
            problems.append(f"{name}.{f}: in the ctypes mirror, not in the C header")
            continue
        d = getattr(cls, f)
        off, size = c["fields"][f]
        if (d.offset, d.size) != (off, size):
            problems.append(f"{name}.{f}: offset/size {d.offset}/{d.size} in ctypes, "
                            f"{off}/{size} in C")
    if list(c["fields"]) != [f for f in py_fields if f in c["fields"]]:
        problems.append(f"{name}: field order differs")
    return problems


def test_every_mirror_matches_the_headers(probe):
    problems = []
    for name, cls in S.STRUCTS.items():
        if name not in probe:
            problems.append(f"{name}: mirrored in ctypes but not printed by layout_probe.c")
            continue
        problems += compare(name, cls, probe[name])
    for name in probe:
        if name not in S.STRUCTS:
            problems.append(f"{name}: printed by layout_probe.c but not mirrored")
    assert not problems, "\n".join(problems)
    assert len(probe) == len(S.STRUCTS) >= 20


def test_a_wrong_mirror_is_caught(probe):
    # The same comparison on deliberately wrong mirrors: a dropped field, a
    # narrowed type, and a struct missing a field the header appended.
    class dropped(ctypes.Structure):
        _fields_ = [f for f in S.htr_plugin_info_t._fields_ if f[0] != "score"]

    class narrowed(ctypes.Structure):
        _fields_ = [(n, ctypes.c_uint32 if n == "bytes_in_use" else t)
                    for n, t in S.htr_pool_stats_t._fields_]

    class short(ctypes.Structure):
        _fields_ = S.htr_executable_options_t._fields_[:-1]

    assert any("score" in p for p in compare("htr_plugin_info_t", dropped,
                                             probe["htr_plugin_info_t"]))
    assert any("bytes_in_use" in p for p in compare("htr_pool_stats_t", narrowed,
                                                    probe["htr_pool_stats_t"]))
    assert any("kernels" in p for p in compare("htr_executable_options_t", short,
                                               probe["htr_executable_options_t"]))
