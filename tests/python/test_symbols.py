"""Lazy binding: a library lacking symbols loads, its functions work, and a
missing one raises MissingSymbolError naming the symbol and the file."""
import pytest

import htr
from htr import _lib


def test_missing_symbol_is_a_clear_error(paths):
    old = htr.Library(paths["old-libhtr"])  # loads although most symbols are absent
    assert old.htr_dtype_size(1) == 4
    assert old.htr_status_code_name(0) == b"OK"
    with pytest.raises(htr.MissingSymbolError) as e:
        old.htr_runtime_create
    msg = str(e.value)
    assert "htr_runtime_create" in msg and paths["old-libhtr"] in msg
    # The high-level layer fails the same way, naming the symbol, not with a crash.
    with pytest.raises(htr.MissingSymbolError, match="htr_graph_create"):
        old.htr_graph_create(None)


def test_unknown_name_is_refused():
    with pytest.raises(htr.MissingSymbolError, match="no signature"):
        htr.lib().htr_not_a_function


def test_every_signature_binds_on_the_library_under_test():
    L = htr.lib()
    missing = []
    for name in _lib.SIGNATURES:
        try:
            L.bind(name)
        except htr.MissingSymbolError:
            missing.append(name)
    assert not missing, f"{L.path} lacks {missing}"


def test_library_is_the_one_meson_built(paths):
    import os
    assert os.path.realpath(htr.lib().path) == os.path.realpath(paths["libhtr"])
