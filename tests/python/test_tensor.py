"""Runtime, plugins (loaded and rejected, with reasons), devices, and tensors:
create, copy between devices, views, NumPy in and out, errors as htr.Error."""
import numpy as np
import pytest

import htr


def test_plugins_and_devices(rt, cpu):
    names = [p.name for p in rt.plugins]
    assert "cpu" in names
    assert cpu.host_accessible and cpu.kind == "cpu"
    props = cpu.properties()
    assert "f32" in props["dtypes"] and "host_accessible" in props["capabilities"]
    free, total = cpu.memory_info()
    assert 0 < free <= total
    assert any(d.id == "cpu:0" for d in rt.devices)
    assert rt.search_paths
    with pytest.raises(htr.Error) as e:
        rt.device("nosuch:3")
    assert e.value.code == "NOT_FOUND" and "nosuch:3" in str(e.value)


def test_rejected_plugin_has_a_reason(tmp_path):
    bad = tmp_path / "libhtr_bogus.so"
    bad.write_bytes(b"this is not an ELF file")
    with htr.Runtime(no_default_search=True, plugin_files=[str(bad)]) as r:
        assert r.plugins == []
        (rej,) = r.rejected
        assert rej.path.endswith("libhtr_bogus.so") and rej.reason
        with pytest.raises(htr.Error, match="libhtr_bogus.so"):
            r.load_plugin(str(bad))


def test_create_copy_and_numpy(rt, cpu):
    a = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    t = htr.from_numpy(a, cpu)
    assert (t.shape, t.strides, t.dtype, t.numel, t.nbytes) == ((3, 5), (5, 1), "f32", 15, 60)
    np.testing.assert_array_equal(t.numpy(), a)
    u = htr.empty([3, 5], "f32", cpu).copy_from(t)
    np.testing.assert_array_equal(np.asarray(u), a)
    z = htr.zeros([4], "i64", cpu)
    assert list(z.numpy()) == [0, 0, 0, 0]
    v = t.view([5], [3], 1)  # column 1... every third element from offset 1
    np.testing.assert_array_equal(v.numpy(), a.reshape(-1)[1::3])
    assert not htr.from_numpy(np.zeros((2, 2), np.float32), cpu).view([2], [2]).is_contiguous
    s = htr.empty_strided([2, 3], [1, 2], "f32", cpu).copy_from(a[:2, :3])
    np.testing.assert_array_equal(s.numpy(), a[:2, :3])


def test_copy_across_devices(rt, cpu):
    others = [d for d in rt.devices if d != cpu]
    if not others:
        pytest.skip("only one device")
    a = np.arange(8, dtype=np.int32)
    for d in others:
        t = htr.from_numpy(a, cpu).to(d)
        assert t.device == d
        np.testing.assert_array_equal(t.numpy(), a)
        np.testing.assert_array_equal(t.to(cpu).numpy(), a)


def test_bad_input_is_an_error_not_a_crash(cpu):
    t = htr.empty([2, 2], "f32", cpu)
    with pytest.raises(ValueError, match="3 elements into a tensor of shape \\[2, 2\\]"):
        t.copy_from(np.zeros(3, np.float32))
    with pytest.raises(TypeError, match="float64"):
        t.copy_from(np.zeros(4, np.float64))
    with pytest.raises(htr.Error) as e:
        t.view([3, 3], [3, 1])
    assert e.value.code == "INVALID_ARGUMENT"
    with pytest.raises(htr.Error):
        htr.empty([-1], "f32", cpu)
    with pytest.raises(TypeError, match="no htr dtype for 'f33'"):
        htr.empty([1], "f33", cpu)
