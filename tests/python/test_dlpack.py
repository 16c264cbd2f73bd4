"""DLPack both ways with NumPy and PyTorch: same data pointer (zero-copy),
same values, writes visible on both sides, DLPack 1.0 versioned capsules
and the 0.8 fallback, and every deleter run exactly when it should."""
import ctypes
import gc

import numpy as np
import pytest

import htr
import htr._structs
from htr import dlpack

torch = pytest.importorskip("torch")


def capsule_name(c):
    return ctypes.pythonapi.PyCapsule_GetName(c)  # argtypes set by htr.dlpack




@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.int64,
                                   np.uint8])
def test_numpy_to_htr_and_back(cpu, dtype):
    a = (np.arange(24).reshape(2, 3, 4) * 3 % 17).astype(dtype)
    t = htr.from_dlpack(a, cpu)
    assert t.host_ptr() == a.ctypes.data
    assert t.shape == (2, 3, 4) and t.strides == (12, 4, 1)
    np.testing.assert_array_equal(t.numpy(), a)
    a[1, 2, 3] = 5
    assert t.numpy()[1, 2, 3] == 5  # the same memory
    b = np.from_dlpack(t)
    assert b.ctypes.data == a.ctypes.data
    np.testing.assert_array_equal(b, a)


def test_htr_to_numpy_keeps_the_tensor_alive(cpu):
    base = cpu.pool_stats()["bytes_in_use"]
    t = htr.from_numpy(np.arange(10, dtype=np.float32), cpu)
    ptr = t.host_ptr()
    in_use = cpu.pool_stats()["bytes_in_use"]
    assert in_use > base
    n = np.from_dlpack(t)
    del t
    gc.collect()
    assert n.ctypes.data == ptr
    np.testing.assert_array_equal(n, np.arange(10, dtype=np.float32))
    assert cpu.pool_stats()["bytes_in_use"] == in_use  # still held by the capsule's tensor
    del n
    gc.collect()
    assert cpu.pool_stats()["bytes_in_use"] == base


def test_torch_to_htr_zero_copy(cpu):
    x = torch.randn(5, 7)
    t = htr.from_dlpack(x, cpu)
    assert t.host_ptr() == x.data_ptr()
    np.testing.assert_array_equal(t.numpy(), x.numpy())
    x.mul_(2)
    np.testing.assert_array_equal(t.numpy(), x.numpy())
    # A strided view keeps its strides (no copy).
    xt = x.t()
    v = htr.from_dlpack(xt, cpu)
    assert v.strides == (1, 7) and v.host_ptr() == xt.data_ptr()
    np.testing.assert_array_equal(v.numpy(), xt.numpy())
    # bf16 and i64 come through with their dtypes.
    b = torch.arange(6, dtype=torch.bfloat16)
    hb = htr.from_dlpack(b, cpu)
    assert hb.dtype == "bf16" and hb.host_ptr() == b.data_ptr()
    hi = htr.from_dlpack(torch.arange(4), cpu)
    assert hi.dtype == "i64" and list(hi.numpy()) == [0, 1, 2, 3]


def test_torch_memory_outlives_the_torch_tensor(cpu):
    x = torch.arange(1000, dtype=torch.float32)
    t = htr.from_dlpack(x, cpu)
    del x
    gc.collect()
    np.testing.assert_array_equal(t.numpy(), np.arange(1000, dtype=np.float32))


def test_htr_to_torch_zero_copy(cpu):
    t = htr.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4), cpu)
    x = torch.from_dlpack(t)
    assert x.data_ptr() == t.host_ptr()
    assert x.shape == (3, 4)
    np.testing.assert_array_equal(x.numpy(), t.numpy())
    x[0, 0] = 42
    assert t.numpy()[0, 0] == 42
    # A view with an offset and strides.
    v = t.view([2, 2], [4, 1], 5)
    xv = torch.from_dlpack(v)
    assert xv.data_ptr() == t.host_ptr() + 5 * 4
    np.testing.assert_array_equal(xv.numpy(), [[5, 6], [9, 10]])


def test_versioned_and_legacy_capsules(cpu):
    t = htr.from_numpy(np.arange(6, dtype=np.int32), cpu)
    live = len(dlpack._LIVE)
    c = t.__dlpack__(max_version=(1, 0))
    assert capsule_name(c) == b"dltensor_versioned"
    u = htr.from_dlpack(c, cpu)
    assert capsule_name(c) == b"used_dltensor_versioned"
    assert u.host_ptr() == t.host_ptr()
    with pytest.raises(BufferError, match="not an unconsumed"):
        htr.from_dlpack(c, cpu)
    c2 = t.__dlpack__()
    assert capsule_name(c2) == b"dltensor"
    u2 = htr.from_dlpack(c2, cpu)
    assert capsule_name(c2) == b"used_dltensor" and u2.host_ptr() == t.host_ptr()
    # htr -> htr goes through the versioned path (max_version=(1, 0)).
    u3 = htr.from_dlpack(t, cpu)
    assert u3.host_ptr() == t.host_ptr()
    assert len(dlpack._LIVE) > live
    del c, c2, u, u2, u3
    gc.collect()
    assert len(dlpack._LIVE) == live  # every versioned header freed by its deleter


def test_unconsumed_capsules_are_freed(cpu):
    base = cpu.pool_stats()["bytes_in_use"]
    t = htr.empty([256], "f32", cpu)
    in_use = cpu.pool_stats()["bytes_in_use"]
    assert in_use >= base + 1024
    caps = [t.__dlpack__(max_version=(1, 0)), t.__dlpack__()]
    del t
    gc.collect()
    assert cpu.pool_stats()["bytes_in_use"] == in_use  # the capsules hold the tensor
    del caps
    gc.collect()
    assert cpu.pool_stats()["bytes_in_use"] == base


def test_copy_and_stream_arguments(cpu):
    t = htr.from_numpy(np.ones(4, np.float32), cpu)
    c = htr.from_dlpack(t, cpu, copy=True)
    assert c.host_ptr() != t.host_ptr()
    np.testing.assert_array_equal(c.numpy(), t.numpy())
    x = torch.from_dlpack(t.__dlpack__(copy=True))  # a legacy capsule of a copy
    assert x.data_ptr() != t.host_ptr()
    np.testing.assert_array_equal(x.numpy(), t.numpy())
    v = t.__dlpack__(max_version=(1, 0), copy=True)
    vp = ctypes.cast(ctypes.pythonapi.PyCapsule_GetPointer(ctypes.py_object(v), b"dltensor_versioned"),
                     ctypes.POINTER(htr._structs.DLManagedTensorVersioned))
    assert vp.contents.flags & dlpack.FLAG_IS_COPIED
    assert vp.contents.dl_tensor.data != t.host_ptr()
    with pytest.raises(BufferError, match="stream"):
        t.__dlpack__(stream=1)
    assert t.__dlpack_device__() == (1, 0)


def test_non_host_memory_is_refused_with_a_reason(cpu):
    class FakeCuda:
        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, **kw):
            raise AssertionError("must not be asked for a capsule")

    with pytest.raises(BufferError, match="kDLCUDA"):
        htr.from_dlpack(FakeCuda(), cpu)
    if torch.cuda.is_available():
        with pytest.raises(BufferError, match="kDLCUDA"):
            htr.from_dlpack(torch.ones(2, device="cuda"), cpu)


def test_device_memory_exports_only_as_a_host_copy(rt, cpu):
    # A device without host access (vulkan:0 on lavapipe here, cuda:N on a GPU).
    devs = [d for d in rt.devices if not d.host_accessible]
    if not devs:
        pytest.skip("no device without host access")
    d = devs[0]
    a = np.arange(8, dtype=np.float32)
    t = htr.from_numpy(a, d)
    kind, index = t.__dlpack_device__()
    assert kind != dlpack.kDLCPU
    with pytest.raises(BufferError, match=d.id):
        t.__dlpack__()
    with pytest.raises(BufferError, match="copy=False"):
        t.__dlpack__(dl_device=(dlpack.kDLCPU, 0), copy=False)
    c = t.__dlpack__(dl_device=(dlpack.kDLCPU, 0), max_version=(1, 0))
    vp = ctypes.cast(ctypes.pythonapi.PyCapsule_GetPointer(ctypes.py_object(c), b"dltensor_versioned"),
                     ctypes.POINTER(htr._structs.DLManagedTensorVersioned))
    assert vp.contents.flags & dlpack.FLAG_IS_COPIED
    assert vp.contents.dl_tensor.device.device_type == dlpack.kDLCPU
    u = htr.from_dlpack(c, cpu)
    np.testing.assert_array_equal(u.numpy(), a)
    with pytest.raises(BufferError, match="not host-accessible"):
        htr.from_dlpack(a, d)
