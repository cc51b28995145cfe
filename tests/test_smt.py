"""The symbolic check of check-rules (checking/smt.py): proofs over the
reals for every size, from an index-level semantics of ATen ops and z3.

Hand-built structures, right and wrong: the right ones are proved, the wrong
ones (bugs once found in the library's rules: a transpose of the wrong axes, a softmax on the
wrong axis, a GELU constant off, a mask that does not broadcast to the
scores) are not, with sizes showing where they differ. The semantics' shapes
are checked against torch's on every proof (``SemanticsMismatch``).
"""
import pytest
import torch
import torch.fx as fx

pytest.importorskip("z3")

from pypm_verified.checking import smt as S  # noqa: E402

aten = torch.ops.aten


class B:
    """A graph under construction, with fake-tensor metadata."""

    def __init__(self, **shapes):
        from torch._subclasses.fake_tensor import FakeTensorMode
        self.mode = FakeTensorMode()
        self.g = fx.Graph()
        self.shapes = shapes
        self.p = {}
        for name, shp in shapes.items():
            ph = self.g.placeholder(name)
            ph.meta["val"] = self.mode.from_tensor(torch.randn(shp))
            self.p[name] = ph

    def __call__(self, target, *args, **kw):
        n = self.g.call_function(target, args, kw)
        fake = fx.node.map_arg((args, kw), lambda a: a.meta["val"])
        with self.mode:
            n.meta["val"] = target(*fake[0], **fake[1])
        return n

    def prove(self, a, b, like=False):
        return S.prove(a, b, self.shapes, like_instance=like)


@pytest.mark.parametrize("xshape", [(3,), (2, 3), (4, 2, 3), (2, 4, 2, 3)])
def test_matmul_transposed_is_linear_at_every_rank(xshape):
    b = B(x=xshape, y=(5, 3))
    for axes in ((0, 1), (1, 0), (-1, -2)):
        orig = b(aten.matmul.default, b.p["x"], b(aten.transpose.int, b.p["y"], *axes))
        assert b.prove(orig, b(aten.linear.default, b.p["x"], b.p["y"])).status == "proved"


def test_matmul_without_the_transpose_is_not_linear():
    b = B(x=(3, 3), y=(3, 3))
    r = b.prove(b(aten.matmul.default, b.p["x"], b.p["y"]),
                b(aten.linear.default, b.p["x"], b.p["y"]))
    assert r.status == "differs" and "sizes" in r.detail


def test_transposing_the_wrong_axes_is_caught():
    b = B(q=(2, 3, 3, 3), k=(2, 3, 3, 3))
    orig = b(aten.matmul.default, b.p["q"], b(aten.transpose.int, b.p["k"], 1, 3))
    new = b(aten.matmul.default, b.p["q"], b(aten.transpose.int, b.p["k"], -1, -2))
    assert b.prove(orig, new).status != "proved"


def _gelu_erf(b, c, div=False):
    x = b.p["x"]
    inner = b(aten.div.Tensor, x, c) if div else b(aten.mul.Tensor, x, c)
    return b(aten.mul.Tensor, b(aten.mul.Tensor, x, 0.5),
             b(aten.add.Tensor, b(aten.erf.default, inner), 1.0))


def test_gelu_forms():
    b = B(x=(2, 3))
    gelu = b(aten.gelu.default, b.p["x"])
    assert b.prove(_gelu_erf(b, 0.7071067811865476), gelu).status == "proved"
    # a constant off by a little is not GELU over the reals, but no input
    # shows it beyond float64's tolerance: unknown, naming erf, never "differs"
    # without a counterexample torch confirms
    for off in (_gelu_erf(b, 0.70710678), _gelu_erf(b, 1.4142135623730951, div=True)):
        r = b.prove(off, gelu)  # x / fl(sqrt 2) is not x * fl(1/sqrt 2) over the reals
        assert r.status == "unknown" and r.detail.startswith("uninterpreted: erf;"), r
        assert "not confirmed numerically" in r.detail and r.counterexample is None
    # the tanh form with the kernel's constants
    x = b.p["x"]
    cube = b(aten.pow.Tensor_Scalar, x, 3)
    inner = b(aten.mul.Tensor, b(aten.add.Tensor, x, b(aten.mul.Tensor, cube, 0.044715)),
              S.GELU_TANH_BETA)
    tanh_form = b(aten.mul.Tensor, b(aten.mul.Tensor, x, 0.5),
                  b(aten.add.Tensor, b(aten.tanh.default, inner), 1.0))
    assert b.prove(tanh_form, b(aten.gelu.default, x, approximate="tanh")).status == "proved"
    assert b.prove(tanh_form, gelu).status == "differs"


def _attention(b, axis=-1, scale=0.125, mask=True):
    s = b(aten.matmul.default, b.p["q"], b(aten.transpose.int, b.p["k"], -1, -2))
    s = b(aten.mul.Tensor, s, scale)
    if mask:
        s = b(aten.add.Tensor, s, b.p["m"])
    orig = b(aten.matmul.default, b(aten.softmax.int, s, axis), b.p["v"])
    new = b(aten.scaled_dot_product_attention.default, b.p["q"], b.p["k"], b.p["v"],
            b.p["m"] if mask else None, scale=scale)
    return orig, new


def test_attention_without_mask_is_sdpa_for_every_size():
    b = B(q=(2, 2, 3, 4), k=(2, 2, 5, 4), v=(2, 2, 5, 6), m=(1,))
    assert b.prove(*_attention(b, mask=False)).status == "proved"


def test_attention_mask_broadcasting():
    """A float mask is SDPA's only where it broadcasts to the scores without
    growing them: not for every size (a mask with a larger batch makes
    scores + mask larger), but for sizes like a well-shaped instance; the
    issue's bug, mask (1, 2, 1, 1) over scores (1, 1, 1, 1), differs."""
    ok = B(q=(2, 3, 4, 5), k=(2, 3, 6, 5), v=(2, 3, 6, 7), m=(2, 1, 4, 6))
    assert ok.prove(*_attention(ok)).status == "differs"
    assert ok.prove(*_attention(ok), like=True).status == "proved"
    bad = B(q=(1, 1, 1, 1), k=(1, 1, 1, 1), v=(1, 1, 1, 1), m=(1, 2, 1, 1))
    assert bad.prove(*_attention(bad), like=True).status == "differs"


def test_softmax_on_the_wrong_axis_is_not_proved():
    b = B(q=(2, 2, 3, 4), k=(2, 2, 5, 4), v=(2, 2, 5, 6), m=(2, 1, 1, 5))
    assert b.prove(*_attention(b, axis=2)).status != "proved"


def test_rms_norm():
    b = B(x=(2, 3, 4), w=(4,))
    x = b.p["x"]
    ms = b(aten.mean.dim, b(aten.pow.Tensor_Scalar, x, 2), [-1], True)
    y = b(aten.mul.Tensor, x, b(aten.rsqrt.default, b(aten.add.Tensor, ms, 1e-6)))
    orig = b(aten.mul.Tensor, b.p["w"], y)
    assert b.prove(orig, b(aten.rms_norm.default, x, [4], b.p["w"], 1e-6)).status == "proved"
    # another eps, or the mean over another axis, is not rms_norm
    assert b.prove(orig, b(aten.rms_norm.default, x, [4], b.p["w"], 1e-5)).status == "differs"
    ms0 = b(aten.mean.dim, b(aten.pow.Tensor_Scalar, x, 2), [0], True)
    y0 = b(aten.mul.Tensor, x, b(aten.rsqrt.default, b(aten.add.Tensor, ms0, 1e-6)))
    assert b.prove(b(aten.mul.Tensor, b.p["w"], y0),
                   b(aten.rms_norm.default, x, [4], b.p["w"], 1e-6)).status != "proved"


def test_unsupported_ops_and_values_say_so():
    b = B(x=(2, 3))
    r = b.prove(b(aten.add.Tensor, b.p["x"], float("inf")), b.p["x"])
    assert r.status == "unsupported" and "inf" in r.detail
    r = b.prove(b(aten.cumsum.default, b.p["x"], 0), b.p["x"])
    assert r.status == "unsupported" and "cumsum" in r.detail


@pytest.mark.parametrize("a,bshape", [((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)),
                                      ((5, 2, 3), (3, 4)), ((1, 2, 3), (4, 3, 2)),
                                      ((4, 1, 2, 3), (5, 3, 2))])
def test_matmul_shapes_agree_with_torch(a, bshape):
    """The semantics' matmul (1-D operands, broadcast batch axes) has torch's
    shape: ``prove`` checks it on the instance and raises otherwise."""
    b = B(x=a, y=bshape)
    n = b(aten.matmul.default, b.p["x"], b.p["y"])
    assert b.prove(n, n).status == "proved"


def test_a_semantics_shape_bug_is_loud():
    b = B(x=(2, 3))
    n = b(aten.transpose.int, b.p["x"], 0, 1)
    n.meta["val"] = b.p["x"].meta["val"]  # torch's shape, lied about
    with pytest.raises(S.SemanticsMismatch):
        b.prove(n, n)


def test_a_long_search_is_interruptible():
    """A signal during z3's search reaches Python at once (the search runs in
    a worker thread; the main thread interrupts z3 and re-raises): one z3
    call can outlast the resource limit by minutes, and a handler otherwise
    runs only when it returns (``check-rules`` ignored SIGTERM for minutes)."""
    import os
    import signal
    import threading
    import time
    import z3
    x, y, z = z3.Ints("x y z")
    s = z3.Solver()
    s.set("ctrl_c", False)
    s.set("timeout", 120_000)  # a failure rather than a hang if the signal is lost
    s.add(x > 0, y > 0, z > 0, x * x * x + y * y * y == z * z * z)  # no answer soon
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    t0 = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            S._check(s)
    finally:
        timer.cancel()  # z3 answered first: fail here, not with a stray Ctrl-C later
    assert time.monotonic() - t0 < 30
    assert not any(t.is_alive() for t in threading.enumerate() if t.name == "z3-check")
    s2 = z3.Solver()
    s2.add(x > 1)
    assert S._check(s2) == z3.sat  # z3 still usable
