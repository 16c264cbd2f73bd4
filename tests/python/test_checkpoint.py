"""Checkpoints through libhtr's reader and writer, and against the
`safetensors` package where it is installed."""
import numpy as np
import pytest

import htr


def test_write_and_read_back(tmp_path, cpu):
    path = tmp_path / "ck.safetensors"
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([1, 2, 3], np.int64)
    t = htr.from_numpy(np.full((4,), 7, np.float32), cpu)
    htr.save_checkpoint(path, {"a": a, "b": b, "t": t}, {"format": "pt", "note": "ünïcode"})
    with htr.Checkpoint(path) as ck:
        assert ck.names() == ["a", "b", "t"]
        assert ck.metadata == {"format": "pt", "note": "ünïcode"}
        assert ck.info("a")["shape"] == (2, 3) and "b" in ck and "zz" not in ck
        np.testing.assert_array_equal(ck.read("a"), a)
        np.testing.assert_array_equal(ck.read("b"), b)
        np.testing.assert_array_equal(ck.read("a", "f64"), a.astype(np.float64))
        np.testing.assert_array_equal(ck.load_tensor("t", cpu).numpy(), t.numpy())
        dst = htr.empty([2, 3], "f32", cpu)
        np.testing.assert_array_equal(ck.read_into("a", dst).numpy(), a)
        with pytest.raises(htr.Error) as e:
            ck.read("missing")
        assert e.value.code == "NOT_FOUND" and "missing" in str(e.value)


def test_damaged_file_is_rejected_naming_it(tmp_path):
    path = tmp_path / "bad.safetensors"
    htr.save_checkpoint(path, {"a": np.zeros(100, np.float32)})
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    with pytest.raises(htr.Error) as e:
        htr.Checkpoint(path)
    assert e.value.code == "DATA_LOSS" and "bad.safetensors" in str(e.value)


def test_interop_with_safetensors(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    path = str(tmp_path / "x.safetensors")
    a = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    htr.save_checkpoint(path, {"w": a}, {"format": "pt"})
    np.testing.assert_array_equal(st.load_file(path)["w"], a)
    st.save_file({"v": a * 2}, path)
    with htr.Checkpoint(path) as ck:
        np.testing.assert_array_equal(ck.read("v"), a * 2)
