"""The graph API from Python: build, autodiff, an optimizer step as
assignments, compile, run; gradients against NumPy."""
import numpy as np
import pytest

import htr


def test_linear_regression_trains(cpu):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((32, 4)).astype(np.float32)
    w_true = np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)
    Y = X @ w_true
    g = htr.Graph()
    x = g.input("x", "f32", [32, 4])
    y = g.input("y", "f32", [32, 1])
    w = g.state("w", "f32", [4, 1])
    err = g.op("sub", [g.matmul(x, w), y])
    loss = g.op("mean", [g.mul(err, err)])
    (dw,) = g.gradients(loss, [w])
    assert dw.shape == (4, 1) and dw.dtype == "f32"
    g.output("loss", loss)
    g.output("dw", dw)
    g.assign(w, g.op("sub", [w, g.op("mul_scalar", [dw], value=0.1)]))
    assert [p["name"] for p in g.ports("input")] == ["x", "y"]
    (st,) = g.ports("state")
    assert st["name"] == "w" and st["assigned"] is not None
    exe = g.compile(cpu)
    exe.set_input("x", X)
    exe.set_input("y", Y)
    exe.run()
    w0 = np.zeros((4, 1), np.float32)
    np.testing.assert_allclose(exe.output("dw").numpy(), 2 * X.T @ (X @ w0 - Y) / 32, rtol=1e-5)
    first = float(exe.output("loss").numpy())
    for _ in range(200):
        exe.run()
    assert float(exe.output("loss").numpy()) < 1e-3 * first
    np.testing.assert_allclose(exe.get_state("w").numpy(), w_true, atol=1e-2)
    assert exe.plan_stats()["num_ops"] == len(exe.ops()) > 0
    assert exe.memory_report_text().strip()
    assert exe.memory_report()["state_bytes"] == 16


def test_errors_name_the_op(cpu):
    g = htr.Graph()
    a = g.input("a", "f32", [2, 3])
    b = g.input("b", "f32", [4, 5])
    n = g.value_count
    with pytest.raises(htr.Error, match="matmul"):
        g.matmul(a, b)
    assert g.value_count == n  # unchanged
    with pytest.raises(htr.Error):
        g.input("a", "f32", [1])  # duplicate name
    with pytest.raises(TypeError, match="attribute"):
        g.op("mul_scalar", [a], value=object())
    exe = g.compile(cpu)
    with pytest.raises(htr.Error) as e:
        exe.run()
    assert e.value.code in ("FAILED_PRECONDITION", "INVALID_ARGUMENT")
    with pytest.raises(TypeError, match="unknown executable option"):
        g.compile(cpu, bogus=1)


def test_multi_output_op_and_state_io(cpu):
    g = htr.Graph()
    p = g.state("p", "f32", [3])
    gr = g.input("g", "f32", [3])
    m = g.state("m", "f32", [3])
    v = g.state("v", "f32", [3])
    lr = g.scalar(0.1)
    step = g.scalar(1.0)
    outs = g.op_n("adamw_update", [p, gr, m, v, lr, step], beta1=0.9, beta2=0.999, eps=1e-8,
                  weight_decay=0.0)
    assert len(outs) == 3
    for s, o in zip((p, m, v), outs):
        g.assign(s, o)
    exe = g.compile(cpu)
    exe.set_state("p", np.ones(3, np.float32))
    exe.set_input("g", np.array([1, -1, 0], np.float32))
    exe.run()
    # First Adam step moves each coordinate by lr * sign(g) (0 where g is 0).
    np.testing.assert_allclose(exe.get_state("p").numpy(), [0.9, 1.1, 1.0], rtol=1e-5)
