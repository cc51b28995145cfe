"""WRONG: a two-layer MLP ``linear(relu(linear(x, w1, b1)), w2, b2)``
rewritten (to re-associate the second layer) as ``relu(linear(x, w1, b1))
@ w2^T + b1`` -- the first layer's bias reused for the second. The guards
check ``b2``'s shape, so where both layers have the same width the shapes
all agree and only the values differ."""
import pypm_verified as pm
from pypm_verified.torch.ops import Add, Linear, MatMul, Relu, T


@pm.pattern
def Mlp(x, w1, b1, w2, b2):
    assert w1.rank == 2 and w2.rank == 2
    return Linear(Relu(Linear(x, w1, b1)), w2, b2)


@pm.rule(Mlp)
def mlp_reassociated(x, w1, b1, w2, b2):
    assert x.dtype in (pm.f32, pm.f64)
    assert all(t is not None and not t.is_const and t.dtype == x.dtype for t in (w1, b1, w2, b2))
    assert b1.rank == 1 and b1.shape[0] == w1.shape[0]
    assert b2.rank == 1 and b2.shape[0] == w2.shape[0]
    assert w2.shape[0] == w1.shape[0]  # square second layer
    h = Relu(Linear(x, w1, b1))
    return Add(MatMul(h, T(w2)), b1, 1)  # WRONG: b2


PATTERNS = [Mlp]
