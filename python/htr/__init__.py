"""htr from Python: pure-Python bindings over libhtr's C ABI (ctypes, no
compiled extension). See python/README.md.

    import htr, numpy as np
    htr.info()                                # what htr-info prints
    rt = htr.default_runtime()                # plugins and devices
    t = htr.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3), "cpu:0")
    a = np.from_dlpack(t)                     # zero-copy on cpu
    u = htr.from_dlpack(torch.ones(3))        # zero-copy the other way
"""
from ._lib import Error, Library, MissingSymbolError, lib, load_library
from .checkpoint import Checkpoint, save_checkpoint
from .dlpack import from_dlpack
from .graph import Executable, Graph, Value
from .info import info, report as info_report
from .profiler import profile, profile_range
from . import profiler
from .runtime import (DTYPES, Device, Event, PluginInfo, RejectedPlugin, Runtime, Stream,
                      default_runtime, set_default_runtime)
from .tensor import Tensor, empty, empty_strided, from_numpy, tensor, zeros

__version__ = "0.1.0"

__all__ = [
    "Checkpoint", "DTYPES", "Device", "Error", "Event", "Executable", "Graph", "Library",
    "MissingSymbolError", "PluginInfo", "RejectedPlugin", "Runtime", "Stream", "Tensor", "Value",
    "default_runtime", "empty", "empty_strided", "from_dlpack", "from_numpy", "info",
    "info_report", "lib", "load_library", "profile", "profile_range", "profiler",
    "save_checkpoint", "set_default_runtime", "tensor", "zeros",
]
