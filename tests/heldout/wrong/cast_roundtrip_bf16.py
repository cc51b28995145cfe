"""WRONG: a float32 tensor cast to bfloat16 and back, ``x.to(bf16).to(f32)``,
dropped as a no-op: the round trip keeps 8 bits of mantissa (a relative
error up to 2**-9), far beyond float32's tolerance."""
import torch

import pypm_verified as pm
from pypm_verified.torch.ops import ToCopy


@pm.pattern
def RoundTrip(x, lo, hi, l1, d1, p1, n1, m1, l2, d2, p2, n2, m2):
    return ToCopy(ToCopy(x, lo, l1, d1, p1, n1, m1), hi, l2, d2, p2, n2, m2)


@pm.rule(RoundTrip)
def cast_round_trip(x, lo, hi, l1, d1, p1, n1, m1, l2, d2, p2, n2, m2):
    assert x.dtype == pm.f32
    assert lo.is_const and lo.value == torch.bfloat16
    assert hi.is_const and hi.value == torch.float32
    return x  # WRONG: the cast to bfloat16 rounds


PATTERNS = [RoundTrip]
