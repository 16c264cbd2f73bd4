"""htr.info(): what `htr-info` prints, from Python.

report() mirrors tools/htr-info/collect.cc (one pass over the runtime's
public queries; a failed query is recorded in "errors", never raised) and
text() mirrors tools/htr-info/text.cc line for line, so `htr.info()` and
`htr-info` print the same text and `htr.info(as_json=True)` the same JSON
as `htr-info --json` (tests/python/test_info.py compares them).
"""
import json
import math
import sys

from ._lib import Error
from .runtime import Runtime


def _err(e):
    return f"{e.code}: {e.message}"


def _device(dev, errors):
    d = {"id": dev.id or "", "plugin": dev.plugin or ""}
    try:
        d.update(dev.properties())
    except Error as e:
        d["name"] = ""
        d["error"] = _err(e)
        errors.append(f"{d['id']}: properties: {_err(e)}")
    try:
        free, total = dev.memory_info()
        d["memory_free_bytes"], d["memory_total_bytes"] = free, total
    except Error as e:
        errors.append(f"{d['id']}: memory_info: {_err(e)}")
    try:
        d["pool"] = dev.pool_stats()
    except Error as e:
        errors.append(f"{d['id']}: pool_stats: {_err(e)}")
    return d


def report(runtime):
    """The dict `htr-info --json` prints, for `runtime`."""
    errors = []
    out = {"search_paths": runtime.search_paths}
    plugins = []
    for i, p in enumerate(_each(runtime, "plugins", errors, "plugin")):
        plugins.append({"name": p.name or "", "version": p.version or "", "path": p.path or "",
                        "abi": f"{p.abi_major}.{p.abi_minor}", "abi_major": p.abi_major,
                        "abi_minor": p.abi_minor, "score": p.score,
                        "device_count": p.device_count,
                        "unavailable_reason": p.unavailable_reason})
    out["plugins"] = plugins
    out["rejected"] = [{"path": r.path or "", "reason": r.reason or ""}
                       for r in _each(runtime, "rejected", errors, "rejected")]
    out["devices"] = [_device(d, errors) for d in _each(runtime, "devices", errors, "device")]
    try:
        out["default_device"] = runtime.default_device().id
    except Error:
        out["default_device"] = None  # no devices at all is a normal state
    out["errors"] = errors
    return out


def _each(runtime, what, errors, label):
    """Entries of one list, one query each: a failing entry is recorded in
    `errors` and skipped, as htr-info does."""
    L, h = runtime._lib, runtime.handle
    count = {"devices": L.htr_runtime_device_count, "plugins": L.htr_runtime_plugin_count,
             "rejected": L.htr_runtime_rejected_count}[what](h)
    out = []
    for i in range(count):
        try:
            out.append(_one(runtime, what, i))
        except Error as e:
            errors.append(f"{label} {i}: {_err(e)}")
    return out


def _one(runtime, what, i):
    import ctypes
    from . import _structs as S
    from .runtime import PluginInfo, RejectedPlugin, _s
    L, h = runtime._lib, runtime.handle
    if what == "devices":
        p = ctypes.c_void_p()
        L.check(L.htr_runtime_device(h, i, ctypes.byref(p)))
        return runtime._wrap(p.value)
    if what == "plugins":
        info = S.new(S.htr_plugin_info_t)
        L.check(L.htr_runtime_plugin_info(h, i, ctypes.byref(info)))
        return PluginInfo(_s(info.name), _s(info.version), _s(info.path), info.abi_major,
                          info.abi_minor, info.score, info.device_count,
                          _s(info.unavailable_reason))
    r = S.new(S.htr_rejected_plugin_t)
    L.check(L.htr_runtime_rejected_info(h, i, ctypes.byref(r)))
    return RejectedPlugin(_s(r.path), _s(r.reason))


# ------------------------------------------------------------------ text

def _num(v):
    """A number as nlohmann::json::dump writes it."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if math.isnan(v) or math.isinf(v):
        return "null"
    return repr(float(v))


def _dump(v):
    if v is None:
        return "null"
    if isinstance(v, (int, float)):
        return _num(v)
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _bytes(v, zero_unknown=True):
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return "?"
    b = float(v)
    if b == 0:
        return "unknown" if zero_unknown else "0 B"
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    u = 0
    while b >= 1024.0 and u < 4:
        b /= 1024.0
        u += 1
    return "%.1f %s" % (b, units[u])


def _rate(v, unit):
    if not isinstance(v, (int, float)) or v <= 0:
        return "unknown"
    x = float(v)
    prefix = ["", "K", "M", "G", "T", "P"]
    p = 0
    while x >= 1000.0 and p < 5:
        x /= 1000.0
        p += 1
    return "%.1f %s%s" % (x, prefix[p], unit)


def _join(arr):
    if not isinstance(arr, list):
        return "?"
    s = ", ".join(e if isinstance(e, str) else _dump(e) for e in arr)
    return s or "(none)"


def _get(o, key):
    if not isinstance(o, dict) or key not in o:
        return "?"
    v = o[key]
    if isinstance(v, str):
        return v
    if v is None:
        return "-"
    return _dump(v)


def text(r):
    """The text `htr-info` prints for report `r`."""
    w = []
    w.append("Search paths (in order):\n")
    for p in r.get("search_paths", []):
        w.append(f"  {p}\n")
    plugins = r.get("plugins", [])
    w.append(f"\nPlugins loaded: {len(plugins)}\n")
    for p in plugins:
        w.append("  %-10s version %s, ABI %s, score %s\n" % (_get(p, "name"), _get(p, "version"),
                                                           _get(p, "abi"), _get(p, "score")))
        w.append(f"             path {_get(p, 'path')}\n")
        if p.get("device_count", 0) > 0:
            w.append(f"             devices: {_get(p, 'device_count')}\n")
        else:
            w.append(f"             devices: 0 (unavailable: {_get(p, 'unavailable_reason')})\n")
    rejected = r.get("rejected", [])
    w.append(f"\nPlugins rejected: {len(rejected)}\n")
    for p in rejected:
        w.append(f"  {_get(p, 'path')}\n      reason: {_get(p, 'reason')}\n")
    devices = r.get("devices", [])
    w.append(f"\nDevices: {len(devices)} (default: {_get(r, 'default_device')})\n")
    for d in devices:
        w.append(f"  [{_get(d, 'id')}] {_get(d, 'name')}\n")
        if "error" in d:
            w.append(f"      error: {_get(d, 'error')}\n")
            continue
        w.append(f"      vendor:         {_get(d, 'vendor')} (driver {_get(d, 'driver_version')})\n")
        w.append(f"      kind:           {_get(d, 'kind')}\n")
        w.append(f"      compute units:  {_get(d, 'compute_units')}\n")
        w.append(f"      memory:         {_bytes(d.get('memory_bytes'))} total, "
                 f"{_bytes(d.get('memory_free_bytes'))} free, max alloc "
                 f"{_bytes(d.get('max_alloc_bytes'))}\n")
        w.append(f"      dtypes:         {_join(d.get('dtypes'))}\n")
        w.append(f"      capabilities:   {_join(d.get('capabilities'))}\n")
        w.append(f"      peak f32:       {_rate(d.get('peak_flops_f32'), 'FLOP/s')}\n")
        w.append(f"      peak bf16:      {_rate(d.get('peak_flops_bf16'), 'FLOP/s')}\n")
        w.append(f"      bandwidth:      {_rate(d.get('memory_bandwidth'), 'B/s')}\n")
        t = d.get("topology", {})
        w.append(f"      topology:       {_get(t, 'packages')} packages, {_get(t, 'numa_nodes')} "
                 f"NUMA nodes, {_get(t, 'cores')} cores, {_get(t, 'threads')} threads\n")
        w.append(f"      caches:         L1d {_bytes(t.get('cache_l1d_bytes'))}, "
                 f"L2 {_bytes(t.get('cache_l2_bytes'))}, L3 {_bytes(t.get('cache_l3_bytes'))}\n")
        w.append(f"      description:    {_get(d, 'description')}\n")
        if "pool" in d:
            p = d["pool"]
            w.append("      pool:           in use %s, cached %s, peak %s, reserved %s; "
                     "%s allocs, %s frees, %s cache hits, %s device allocs, %s OOM retries\n" % (
                         _bytes(p.get("bytes_in_use"), False), _bytes(p.get("bytes_cached"), False),
                         _bytes(p.get("peak_bytes_in_use"), False),
                         _bytes(p.get("bytes_reserved"), False), _get(p, "num_allocs"),
                         _get(p, "num_frees"), _get(p, "cache_hits"), _get(p, "device_allocs"),
                         _get(p, "oom_retries")))
            w.append("      pool blocks:    %s splits, %s merges, largest free %s, "
                     "fragmentation %s\n" % (_get(p, "num_splits"), _get(p, "num_merges"),
                                             _bytes(p.get("largest_free_bytes"), False),
                                             _get(p, "fragmentation")))
    errors = r.get("errors", [])
    if errors:
        w.append(f"\nQuery errors: {len(errors)}\n")
        for e in errors:
            w.append(f"  {e}\n")
    return "".join(w)


def to_json(r):
    """`htr-info --json`'s text for report `r` (nlohmann's dump(2): keys sorted)."""
    return json.dumps(r, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def info(as_json=False, plugin_files=(), file=None):
    """Prints what `htr-info` (or `htr-info --json`) prints, from a fresh runtime
    that also loads `plugin_files` (as `--plugin FILE`)."""
    rt = Runtime(plugin_files=list(plugin_files))
    try:
        r = report(rt)
    finally:
        rt.close()
    (file or sys.stdout).write(to_json(r) if as_json else text(r))
