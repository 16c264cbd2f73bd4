"""Graphs, autodiff and executables (abi/htr/htr_graph.h).

    g = htr.Graph()
    x = g.input("x", "f32", [4, 3])
    w = g.state("w", "f32", [3, 2])
    loss = g.op("mean", [g.op("matmul", [x, w])])
    (dw,) = g.gradients(loss, [w])
    g.output("loss", loss)
    g.assign(w, g.op("sub", [w, g.op("mul_scalar", [dw], value=0.1)]))
    exe = g.compile("cpu:0")
    exe.set_input("x", np.ones((4, 3), np.float32))
    exe.run()
    exe.output("loss").numpy()

Op names and attributes: ops/GRAPH_OPS.md. Attributes are keyword
arguments: int/bool -> HTR_ATTR_INT, float -> HTR_ATTR_FLOAT, str ->
HTR_ATTR_STRING, a list/tuple of ints -> HTR_ATTR_INTS. A graph call that
fails raises htr.Error naming the op, and leaves the graph unchanged.

Ownership: Graph owns its htr_graph_t, Executable its htr_executable_t
(and keeps the device's Runtime alive). Tensors returned by get_state and
output are new references (Tensor objects).
"""
import ctypes

import numpy as np

from . import _structs as S
from ._lib import lib
from ._owned import Owned
from .runtime import DTYPE_NAMES, Device, default_runtime, dtype_code
from .tensor import Tensor, _i64, from_numpy

PORT_INPUT, PORT_STATE, PORT_OUTPUT = 0, 1, 2
_ATTR_INT, _ATTR_FLOAT, _ATTR_STRING, _ATTR_INTS = 0, 1, 2, 3


class Value:
    """A value handle of one graph (htr_value_t) with its dtype and shape."""
    __slots__ = ("graph", "id")

    def __init__(self, graph, vid):
        self.graph = graph
        self.id = vid

    @property
    def dtype(self):
        return self.graph.value_info(self)[0]

    @property
    def shape(self):
        return self.graph.value_info(self)[1]

    def __repr__(self):
        dt, shape = self.graph.value_info(self)
        return f"<htr.Value %{self.id} {dt}{list(shape)}>"


def _attrs(kwargs, keep):
    arr = (S.htr_attr_t * max(1, len(kwargs)))()
    for i, (name, v) in enumerate(kwargs.items()):
        a = arr[i]
        nb = name.encode()
        keep.append(nb)
        a.name = nb
        if isinstance(v, (bool, int, np.integer)):
            a.kind, a.i = _ATTR_INT, int(v)
        elif isinstance(v, (float, np.floating)):
            a.kind, a.f = _ATTR_FLOAT, float(v)
        elif isinstance(v, str):
            sb = v.encode()
            keep.append(sb)
            a.kind, a.s = _ATTR_STRING, sb
        elif isinstance(v, (list, tuple)):
            ints = _i64(v)
            keep.append(ints)
            a.kind, a.ints, a.num_ints = _ATTR_INTS, ctypes.cast(ints, ctypes.POINTER(ctypes.c_int64)), len(v)
        else:
            raise TypeError(f"htr: attribute {name}={v!r}: int, float, str or a list of ints")
    return arr


class Graph(Owned):
    def __init__(self):
        L = lib()
        self._lib = L
        self._handle = None
        out = ctypes.c_void_p()
        L.check(L.htr_graph_create(ctypes.byref(out)), "htr_graph_create")
        self._handle = out.value

    _closed = "the graph is destroyed"

    def _release(self, handle):
        self._lib.htr_graph_destroy(handle)

    def _v(self, v):
        if isinstance(v, Value):
            if v.graph is not self:
                raise ValueError(f"htr: {v!r} belongs to another graph")
            return v.id
        raise TypeError(f"htr: expected an htr.Value, got {type(v).__name__}")

    # ------------------------------------------------------------ building
    def _declare(self, fn, kind, name, dtype, shape):
        shape = list(shape)
        out = ctypes.c_uint32()
        self._lib.check(fn(self.handle, name.encode(), dtype_code(dtype), len(shape), _i64(shape),
                           ctypes.byref(out)), f"{kind} {name}")
        return Value(self, out.value)

    def input(self, name, dtype, shape):
        return self._declare(self._lib.htr_graph_input, "input", name, dtype, shape)

    def state(self, name, dtype, shape):
        return self._declare(self._lib.htr_graph_state, "state", name, dtype, shape)

    def scalar(self, value, dtype="f32"):
        out = ctypes.c_uint32()
        self._lib.check(self._lib.htr_graph_constant_scalar(self.handle, dtype_code(dtype),
                                                            float(value), ctypes.byref(out)),
                        "constant")
        return Value(self, out.value)

    def constant(self, array, dtype=None):
        """A dense constant copied from a NumPy array."""
        arr = np.ascontiguousarray(array)
        from .tensor import numpy_to_htr_dtype
        code = dtype_code(dtype) if dtype is not None else numpy_to_htr_dtype(arr.dtype)
        out = ctypes.c_uint32()
        self._lib.check(self._lib.htr_graph_constant(
            self.handle, code, arr.ndim, _i64(arr.shape), arr.ctypes.data_as(ctypes.c_void_p),
            ctypes.byref(out)), "constant")
        return Value(self, out.value)

    def op_n(self, op, inputs, **attrs):
        """Appends `op`; returns all its output values (a list)."""
        keep = []
        ids = (ctypes.c_uint32 * max(1, len(inputs)))(*[self._v(v) for v in inputs])
        a = _attrs(attrs, keep)
        cap = 4
        while True:
            outs = (ctypes.c_uint32 * cap)()
            n = ctypes.c_uint32()
            st = self._lib.htr_graph_op(self.handle, op.encode(), ids, len(inputs), a, len(attrs),
                                        outs, cap, ctypes.byref(n))
            if st and self._lib.htr_status_code(st) == 8 and n.value > cap:  # RESOURCE_EXHAUSTED
                self._lib.htr_status_free(st)
                cap = n.value
                continue
            self._lib.check(st, f"op {op}")
            return [Value(self, outs[i]) for i in range(n.value)]

    def op(self, op, inputs, **attrs):
        """Appends a one-output op; returns its value."""
        out = self.op_n(op, inputs, **attrs)
        if len(out) != 1:
            raise ValueError(f"htr: op {op} has {len(out)} outputs; use op_n")
        return out[0]

    def output(self, name, value):
        self._lib.check(self._lib.htr_graph_output(self.handle, name.encode(), self._v(value)),
                        f"output {name}")

    def assign(self, state, value):
        self._lib.check(self._lib.htr_graph_assign(self.handle, self._v(state), self._v(value)),
                        "assign")

    def gradients(self, loss, wrt):
        """d(loss)/d(w) for each w in `wrt` (appends the backward graph)."""
        wrt = list(wrt)
        ids = (ctypes.c_uint32 * max(1, len(wrt)))(*[self._v(v) for v in wrt])
        out = (ctypes.c_uint32 * max(1, len(wrt)))()
        self._lib.check(self._lib.htr_graph_gradients(self.handle, self._v(loss), ids, len(wrt),
                                                      out), "gradients")
        return [Value(self, out[i]) for i in range(len(wrt))]

    # ------------------------------------------------------------ shorthands
    def add(self, a, b):
        return self.op("add", [a, b])

    def mul(self, a, b):
        return self.op("mul", [a, b])

    def matmul(self, a, b, trans_b=False):
        return self.op("matmul", [a, b], trans_b=1) if trans_b else self.op("matmul", [a, b])

    def reshape(self, x, shape):
        return self.op("reshape", [x], shape=list(shape))

    def transpose(self, x, perm):
        return self.op("transpose", [x], perm=list(perm))

    def slice(self, x, axis, start, end):
        return self.op("slice", [x], axis=axis, start=start, end=end)

    # ------------------------------------------------------------ queries
    def value_info(self, value):
        """(dtype name, shape tuple)."""
        dt = ctypes.c_int()
        rank = ctypes.c_uint32()
        shape = (ctypes.c_int64 * S.MAX_RANK)()
        vid = value.id if isinstance(value, Value) else int(value)
        self._lib.check(self._lib.htr_graph_value_info(self.handle, vid, ctypes.byref(dt),
                                                       ctypes.byref(rank), shape), "value_info")
        return DTYPE_NAMES.get(dt.value, "invalid"), tuple(shape[i] for i in range(rank.value))

    @property
    def value_count(self):
        return self._lib.htr_graph_value_count(self.handle)

    @property
    def node_count(self):
        return self._lib.htr_graph_node_count(self.handle)

    def ports(self, kind):
        """Named values of one kind ("input", "state", "output"), in creation order:
        a list of dicts (name, value, dtype, shape, assigned)."""
        k = {"input": PORT_INPUT, "state": PORT_STATE, "output": PORT_OUTPUT}[kind]
        out = []
        for i in range(self._lib.htr_graph_port_count(self.handle, k)):
            p = S.new(S.htr_graph_port_info_t)
            self._lib.check(self._lib.htr_graph_port_info(self.handle, k, i, ctypes.byref(p)),
                            f"{kind} port {i}")
            out.append({"name": p.name.decode(), "value": Value(self, p.value),
                        "dtype": DTYPE_NAMES.get(p.dtype, "invalid"),
                        "shape": tuple(p.shape[j] for j in range(p.rank)),
                        "assigned": None if p.assigned_value == S.VALUE_INVALID
                        else Value(self, p.assigned_value)})
        return out

    def compile(self, device=None, **options):
        return Executable(self, device, **options)


class Executable(Owned):
    """A graph compiled for one device (htr_executable_create). Options (all
    optional, as htr_executable_options_t): disable_library_ops,
    disable_memory_reuse, num_threads, force_host_staging, disable_fusion,
    precision ("fp32", "bf16", "fp16", "auto"), recompute, memory_budget,
    execution ("auto", "device", "host", "staged"), kernels ("auto",
    "generated")."""

    def __init__(self, graph, device=None, **options):
        if isinstance(device, Device):
            dev = device
        else:
            dev = default_runtime().device(device)
        self.device = dev
        self.runtime = dev.runtime
        L = self.runtime._lib
        self._lib = L
        self._handle = None
        o = S.new(S.htr_executable_options_t)
        keep = []
        for k, v in options.items():
            if k not in dict(S.htr_executable_options_t._fields_) or k == "struct_size":
                raise TypeError(f"htr: unknown executable option '{k}'")
            if k in ("precision", "execution", "kernels"):
                b = v.encode() if v is not None else None
                keep.append(b)
                setattr(o, k, b)
            else:
                setattr(o, k, int(v))
        out = ctypes.c_void_p()
        L.check(L.htr_executable_create(graph.handle, dev.handle, ctypes.byref(o),
                                        ctypes.byref(out)), f"compiling the graph for {dev.id}")
        self._handle = out.value
        self._bound = {}  # inputs made here from NumPy, kept for reuse

    _closed = "the executable is destroyed"

    def _release(self, handle):
        self._lib.htr_executable_destroy(handle)

    def close(self):
        super().close()
        self._bound.clear()

    def set_input(self, name, value):
        """Binds input `name` to a Tensor (retained by the executable), or copies
        a NumPy array / Python scalar into an input tensor made for it once."""
        if isinstance(value, Tensor):
            t = value
        else:
            arr = np.asarray(value)
            t = self._bound.get(name)
            if t is not None and t.shape == arr.shape and t.dtype == _np_name(arr.dtype):
                t.copy_from(arr)
                return
            t = from_numpy(arr, self.device)
            self._bound[name] = t
        self._lib.check(self._lib.htr_executable_set_input(self.handle, name.encode(), t.handle),
                        f"input {name}")

    def set_state(self, name, value):
        """Copies a Tensor or NumPy array into state `name`."""
        t = value if isinstance(value, Tensor) else from_numpy(np.asarray(value), self.device)
        self._lib.check(self._lib.htr_executable_set_state(self.handle, name.encode(), t.handle),
                        f"state {name}")

    def get_state(self, name):
        """The executable's live state tensor (later runs update it in place)."""
        out = ctypes.c_void_p()
        self._lib.check(self._lib.htr_executable_get_state(self.handle, name.encode(),
                                                           ctypes.byref(out)), f"state {name}")
        return Tensor(self.device, out.value)

    def run(self, stream=None):
        self._lib.check(self._lib.htr_executable_run(self.handle,
                                                     stream.handle if stream else None), "run")

    def output(self, name):
        out = ctypes.c_void_p()
        self._lib.check(self._lib.htr_executable_output(self.handle, name.encode(),
                                                        ctypes.byref(out)), f"output {name}")
        return Tensor(self.device, out.value)

    def plan_stats(self):
        s = S.new(S.htr_plan_stats_t)
        self._lib.check(self._lib.htr_executable_plan_stats(self.handle, ctypes.byref(s)),
                        "plan_stats")
        return {n: getattr(s, n) for n, _ in S.htr_plan_stats_t._fields_[1:]}

    def ops(self):
        """Per-step plan: a list of dicts (op, impl, num_inputs, num_outputs,
        output_bytes, num_graph_ops)."""
        out = []
        for i in range(self._lib.htr_executable_op_count(self.handle)):
            s = S.new(S.htr_executable_op_info_t)
            self._lib.check(self._lib.htr_executable_op_info(self.handle, i, ctypes.byref(s)),
                            f"op_info {i}")
            out.append({"op": s.op.decode(), "impl": s.impl.decode(), "num_inputs": s.num_inputs,
                        "num_outputs": s.num_outputs, "output_bytes": s.output_bytes,
                        "num_graph_ops": s.num_graph_ops})
        return out

    def memory_report(self):
        s = S.new(S.htr_memory_report_t)
        self._lib.check(self._lib.htr_executable_memory_report(self.handle, ctypes.byref(s)),
                        "memory_report")
        d = {n: getattr(s, n) for n, _ in S.htr_memory_report_t._fields_[1:]}
        d["precision"] = d["precision"].decode() if d["precision"] else None
        return d

    def memory_report_text(self):
        n = ctypes.c_size_t()
        probe = ctypes.create_string_buffer(1)
        self._lib.check(self._lib.htr_executable_memory_report_text(self.handle, probe, 1,
                                                                    ctypes.byref(n)),
                        "memory_report_text")
        buf = ctypes.create_string_buffer(n.value + 1)
        self._lib.check(self._lib.htr_executable_memory_report_text(self.handle, buf, len(buf),
                                                                    None), "memory_report_text")
        return buf.value.decode(errors="replace")


def _np_name(dtype):
    from .tensor import numpy_to_htr_dtype
    return DTYPE_NAMES[numpy_to_htr_dtype(dtype)]
