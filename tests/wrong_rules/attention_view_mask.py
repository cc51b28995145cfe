"""WRONG on purpose (tests/test_attention_forms.py): MBart's 3-D attention
``view(bmm(q, kT), (b, h, l, s)) + mask`` viewed back to ``(b * h, l, s)``
takes the 4-D mask batch-major (row ``i`` of the 3-D scores is batch ``i //
h``, head ``i % h``); this rule flattens it head-major (``mask.permute(1, 0,
2, 3)``), right only when ``b`` or ``h`` is 1 or the mask is the same for
every batch and head."""
import pypm_verified as pm
from pypm_verified.torch.ops import Add, Bmm, Permute, Reshape, SDPA, Softmax, Transpose, View


@pm.pattern
def ViewedBack(q, k, v, m, vs4, vs3):
    """bmm(softmax(view(view(bmm(q, k^T), vs4) + m, vs3)), v), rank 3."""
    assert q.rank == 3 and k.rank == 3 and v.rank == 3
    return Bmm(Softmax(View(Add(View(Bmm(q, Transpose(k, 1, 2)), vs4), m, 1), vs3), -1, None), v)


@pm.rule(ViewedBack)
def sdpa_head_major(q, k, v, m, vs4, vs3):
    assert q.dtype == k.dtype and q.dtype == v.dtype and q.dtype in (pm.f32, pm.f64)
    assert not m.is_const and m.dtype == q.dtype and m.rank == 4
    n, ll, ss = q.shape[0], q.shape[1], k.shape[1]
    assert vs4.is_const and list(vs4.value) == list(m.shape)
    assert m.shape[0] * m.shape[1] == n and tuple(m.shape[2:]) == (ll, ss)
    assert vs3.is_const and list(vs3.value) == [n, ll, ss]
    mask = Reshape(Permute(m, [1, 0, 2, 3]), [n, ll, ss])  # wrong: Reshape(m, [n, ll, ss])
    return SDPA(q, k, v, mask, 0.0, False, 1.0, False)


PATTERNS = [ViewedBack]
