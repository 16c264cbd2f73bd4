"""The profiler from Python: a recorded run with a user range, exported as a
Chrome trace."""
import json

import numpy as np

import htr


def test_profile_a_run(tmp_path, rt, cpu):
    g = htr.Graph()
    x = g.input("x", "f32", [64, 64])
    g.output("y", g.op("gelu", [g.matmul(x, x)]))
    exe = g.compile(cpu)
    exe.set_input("x", np.ones((64, 64), np.float32))
    trace = tmp_path / "trace.json"
    assert not htr.profiler.enabled()
    with htr.profile(rt, trace):
        assert htr.profiler.enabled()
        with htr.profile_range("python step"):
            exe.run()
    assert not htr.profiler.enabled()
    stats = htr.profiler.stats()
    assert stats["ops"] >= 2 and stats["events"] > stats["ops"]
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("name") == "python step" for e in events)
    peaks = cpu.peaks()
    assert peaks["source"] in ("plugin", "cache", "none")
