"""The profiler (abi/htr/htr_profiler.h): one recording per process,
exported as a Chrome trace.

    with htr.profile(runtime, "trace.json"):
        with htr.profile_range("step 0"):
            exe.run()
"""
import contextlib
import ctypes

from . import _structs as S
from ._lib import lib


def start(runtime, no_device_timers=False, no_memory=False, max_events=0):
    o = S.new(S.htr_profiler_options_t)
    o.no_device_timers = int(bool(no_device_timers))
    o.no_memory = int(bool(no_memory))
    o.max_events = int(max_events)
    L = lib()
    L.check(L.htr_profiler_start(runtime.handle, ctypes.byref(o)), "htr_profiler_start")


def stop():
    L = lib()
    L.check(L.htr_profiler_stop(), "htr_profiler_stop")


def enabled():
    return bool(lib().htr_profiler_enabled())


def write(path):
    L = lib()
    L.check(L.htr_profiler_write(str(path).encode()), str(path))


def range_push(name):
    L = lib()
    L.check(L.htr_profiler_range_push(str(name).encode()), "htr_profiler_range_push")


def range_pop():
    L = lib()
    L.check(L.htr_profiler_range_pop(), "htr_profiler_range_pop")


def stats():
    s = S.new(S.htr_profiler_stats_t)
    L = lib()
    L.check(L.htr_profiler_stats(ctypes.byref(s)), "htr_profiler_stats")
    return {n: getattr(s, n) for n, _ in S.htr_profiler_stats_t._fields_[1:]}


@contextlib.contextmanager
def profile(runtime, path=None, **options):
    """Records the block; writes the trace to `path` (when given) at the end."""
    start(runtime, **options)
    try:
        yield
    finally:
        stop()
    if path is not None:
        write(path)


@contextlib.contextmanager
def profile_range(name):
    range_push(name)
    try:
        yield
    finally:
        range_pop()


def device_peaks(device):
    p = S.new(S.htr_device_peaks_t)
    L = lib()
    L.check(L.htr_device_peaks(device.handle, ctypes.byref(p)), f"{device.id}: peaks")
    return {"flops_f32": p.flops_f32, "flops_bf16": p.flops_bf16, "flops_f16": p.flops_f16,
            "memory_bandwidth": p.memory_bandwidth,
            "source": p.source.decode() if p.source else None}
