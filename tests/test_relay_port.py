"""Relay's dataflow-pattern features, and the cases of TVM's
``tests/python/relay/test_dataflow_pattern.py`` that translate to this
language, rewritten in its words (operators declared with ``@pm.op``,
patterns with ``@pm.pattern``, graphs built with ``pm.Graph``). Every
matching test runs on both engines (the ``engine`` fixture: reference,
verified, and the verified path answered by the simulated machine).
The partitioning cases (``test_partition_*``, ``test_double_partition``,
``test_matched_outside_but_dominated``, ``test_overlappting_partitions``)
are in tests/test_partition.py.

Cases that do not translate, and why:

* ``test_expr_pattern``, ``test_var_pattern``, ``test_constant_pattern``,
  ``test_wildcard_pattern``, ``test_CallPattern``, ``test_TuplePattern``,
  ``test_TupleGetItemPattern``, ``test_AltPattern``, ``test_TypePattern``,
  ``test_DataTypePattern``, ``test_ShapePattern``, ``test_AttrPattern``,
  ``test_IfPattern``, ``test_LetPattern``: they check the Python classes of
  Relay's pattern objects; patterns here are traced into the calculus, whose
  terms the other tests check by matching.
* ``test_match_op``, ``test_no_match_op``, ``test_match_op_or``: they match
  a bare operator (no call); here an operator is only matched applied, and
  "one of several operators" is an operator variable with a guard or two
  alternates (``test_alternate_operators`` below).
* ``test_match_call`` (second half: ``wildcard()(None)``, a call of any
  arity) and ``test_match_tuple`` / ``test_partition_fuzzy_tuple``
  (``is_tuple(None)``, a tuple of any length): an operator variable has a
  fixed arity in the calculus (``F(p1..pn)``); write one alternate per arity.
* ``test_match_func``, ``test_no_match_func``, ``test_match_func_attr``,
  ``test_no_match_func_attr``, ``test_rewrite_func``,
  ``test_rewrite_func_with_attr``, ``test_partition_function``,
  ``test_partition_optional_function``, ``test_partition_fuzzy_function_args``,
  ``test_rewrite_function_with_fuzzy_body``,
  ``test_partition_function_with_fuzzy_body``, and the non-operator calls of
  ``test_match_call_attr`` / ``test_no_match_call_attr``: first-class
  functions, calls of a function value and attributes of functions; the
  graphs here (``pm.Graph``, an exported FX graph) are first-order dataflow.
* ``test_match_if``, ``test_no_match_if``, ``test_match_let``,
  ``test_no_match_let``, ``test_match_match``: ``If``, ``Let`` and ADT
  ``Match`` expressions; exported programs have no control flow nodes.
* ``test_rewrite_once``: Relay's per-callback ``rewrite_once``; rules here
  run to a fixpoint (``max_iterations`` caps the passes, not one rule). For
  the same reason ``test_rewrite_with_pattern_recursion`` is ported as a
  match (``CastChain``: recursion is native here, no ``redirect_to``), not
  a rewrite: a rule returning ``Relu(root)`` would fire again above it.
* ``test_partition_constant_embedding``: embedding a matched constant
  *tensor* in the partitioned function vs lifting it to a parameter; here
  tensor constants are inputs (parameters, buffers) and literals are always
  embedded (``tests/test_partition.py`` checks literals stay inside).
* The "associate multiply/divide" half of ``test_fuse_batchnorm_commutation``
  is Relay's built-in reassociation of ``*`` and ``/``; here it is an explicit
  second alternate of the pattern (``Batchnorm`` below), which is what the
  language offers instead.

Where the semantics differ: ``optional`` tries the longer form first
(Relay the shorter); a wildcard used twice is one node (as in Relay); and
the dominator walk checks *every* input of the child and of each path node
(Relay stops at the first input that matches the parent), skipping constant
leaves (attributes in this project's graphs).
"""
import pytest

import pypm_verified as pm
from pypm_verified import core
from pypm_verified.dsl import relay
from pypm_verified.engines import declarative
from pypm_verified.errors import PatternError


def valid(m):
    """A returned match satisfies the declarative relation ``p@θ ≈ t``."""
    if m is not None and isinstance(m.pattern, pm.Pattern):
        assert declarative.check(m.pattern.program, m.substitution, m.root, m.fsubstitution)
    return m


# ------------------------------------------------------------- operators

EW = "elemwise"


@pm.op
def Conv(x, w): return 1
@pm.op
def Conv2(x, w, data_layout, kernel_size): return 1  # attributes are constant arguments
@pm.op
def Dense(x, w): return 1
@pm.op
def BiasAdd(x, b): return 1
@pm.op(op_class=EW)
def Relu(x): return 1
@pm.op(op_class=EW)
def LeakyRelu(x, alpha): return 1
@pm.op(op_class=EW)
def Tanh(x): return 1
@pm.op(op_class=EW)
def Sigmoid(x): return 1
@pm.op(op_class=EW)
def Sqrt(x): return 1
@pm.op(commutative=True)
def Add(x, y): return 1
@pm.op(commutative=True)
def Mul(x, y): return 1
@pm.op
def Sub(x, y): return 1
@pm.op
def Div(x, y): return 1
@pm.op
def Cast(x, dtype): return 1
@pm.op
def Less(x, y): return 1
@pm.op
def BatchNormOp(x, gamma, beta, mean, var, eps): return 3
@pm.op
def BatchNorm(x, gamma, beta, mean, var, eps): return 1   # what the rule builds


def graph():
    g = pm.Graph()
    return g, g.input("x"), g.input("y")


# ---------------------------------------------------------------- wildcard


@pm.pattern
def AddAny():
    return Add(pm.wildcard(), pm.wildcard())


@pm.pattern
def Twice():
    a = pm.wildcard()
    return Add(a, a)


def test_match_call_and_no_match_call(engine):
    g, x, y = graph()
    assert valid(pm.match(AddAny, g.apply(Add, x, y), engine=engine)).bindings == {}
    assert pm.match(AddAny, g.apply(Sub, x, y), engine=engine) is None


def test_wildcard_used_twice_is_one_node(engine):
    g, x, y = graph()
    assert valid(pm.match(Twice, g.apply(Add, x, x), engine=engine)) is not None
    assert pm.match(Twice, g.apply(Add, x, y), engine=engine) is None


# ---------------------------------------------------------- commutativity


@pm.pattern
def AddXY(x, y):
    return Add(x, y)


@pm.pattern
def MulXY(x, y):
    return Mul(x, y)


@pm.pattern
def SubXY(x, y):
    return Sub(x, y)


@pm.pattern
def DivXY(x, y):
    return Div(x, y)


def test_match_call_commutative(engine):
    g, x, y = graph()
    for P, op in ((AddXY, Add), (MulXY, Mul)):
        assert valid(pm.match(P, g.apply(op, x, y), engine=engine)).bindings == {"x": x, "y": y}
        # the other order: the second alternate, x and y swapped
        assert valid(pm.match(P, g.apply(op, y, x), engine=engine)).bindings == {"x": y, "y": x}


@pm.pattern
def AddInputFirst(x):
    return Add(pm.is_input(), x)


def test_commutative_order_serves_a_structure(engine):
    g, x, y = graph()
    r = g.apply(Relu, x)
    # the input is the second argument: only the swapped order matches
    assert valid(pm.match(AddInputFirst, g.apply(Add, r, y), engine=engine)).bindings == {"x": r}


def test_no_match_call_not_commutative(engine):
    g, x, y = graph()
    for P, op in ((SubXY, Sub), (DivXY, Div)):
        assert valid(pm.match(P, g.apply(op, x, y), engine=engine)) is not None
        assert pm.match(P, g.apply(op, y, x), engine=engine).bindings == {"x": y, "y": x}
    # with a structure on one side, the order is fixed
    @pm.pattern
    def SubRelu(x, y):
        return Sub(Relu(x), y)
    assert pm.match(SubRelu, g.apply(Sub, g.apply(Relu, x), y), engine=engine) is not None
    assert pm.match(SubRelu, g.apply(Sub, y, g.apply(Relu, x)), engine=engine) is None


def test_commute_sugar_and_lowering():
    @pm.pattern
    def SubEither(x):
        return pm.commute(Sub(Relu(x), pm.is_constant()))
    g, x, _ = graph()
    assert pm.match(SubEither, g.apply(Sub, 2, g.apply(Relu, x))).bindings == {"x": x}
    assert isinstance(AddXY.core, core.PAlt)  # f(x, y) ‖ f(y, x)
    assert not isinstance(Twice.core, core.PAlt)  # identical arguments are not swapped


def test_commutative_errors():
    with pytest.raises(PatternError, match="exactly 2 arguments"):
        @pm.op(commutative=True)
        def Three(a, b, c): return 1
    with pytest.raises(PatternError, match="distinct argument positions"):
        @pm.op(commutative=(0, 5))
        def Two(a, b): return 1

    @pm.op(commutative=(0, 1))
    def AddAlpha(a, b, alpha): return 1   # aten.add.Tensor's shape

    @pm.pattern
    def PA(x):
        return AddAlpha(Relu(x), pm.wildcard(), 1)
    g, x, y = graph()
    assert pm.match(PA, g.apply(AddAlpha, y, g.apply(Relu, x), 1)).bindings == {"x": x}


def test_commutative_bound():
    n = relay.MAX_COMMUTATIVE + 1
    src = "Add(" * n + "x" + "".join(f", y{i})" for i in range(n))

    ns = {"pm": pm, "Add": Add}
    params = ", ".join(["x"] + [f"y{i}" for i in range(n)])
    import textwrap
    import linecache
    code = textwrap.dedent(f"""
        @pm.pattern
        def TooMany({params}):
            return {src}
    """)
    fname = "<relay-bound-test>"
    linecache.cache[fname] = (len(code), None, code.splitlines(True), fname)
    exec(compile(code, fname, "exec"), ns)
    with pytest.raises(PatternError, match="more than 8 commutative"):
        ns["TooMany"].program


# ------------------------------------------------------------- constants


@pm.pattern
def ConvConstBias(x):
    return BiasAdd(Conv(x, pm.is_constant()), pm.wildcard())


def test_match_const(engine):
    g, x, _ = graph()
    w, b = g.input("w"), g.input("b")
    out = g.apply(BiasAdd, g.apply(Conv, x, w), b)
    assert pm.match(ConvConstBias, out, engine=engine) is None  # w is an input
    out = g.apply(BiasAdd, g.apply(Conv, x, g.const(1.5)), b)   # bound to a constant
    assert valid(pm.match(ConvConstBias, out, engine=engine)).bindings == {"x": x}


@pm.pattern
def ConvInput(x):
    return Conv(x, pm.is_input())


@pm.pattern
def ConvLiteral(x):
    return Conv(x, pm.is_constant(2))


def test_input_and_literal_tests(engine):
    g, x, y = graph()
    assert valid(pm.match(ConvInput, g.apply(Conv, x, y), engine=engine)) is not None
    assert pm.match(ConvInput, g.apply(Conv, x, 2.0), engine=engine) is None
    assert valid(pm.match(ConvLiteral, g.apply(Conv, x, 2.0), engine=engine)) is not None
    assert pm.match(ConvLiteral, g.apply(Conv, x, 3), engine=engine) is None
    assert pm.match(ConvLiteral, g.apply(Conv, x, y), engine=engine) is None


# --------------------------------------------------------------- optional


@pm.pattern
def ReluConvMaybeBias():
    return Relu(pm.optional(Conv(pm.wildcard(), pm.wildcard()), BiasAdd, pm.wildcard()))


@pm.pattern
def ConvMaybeReluMaybeTanh():
    return Conv(pm.wildcard(), pm.wildcard()).optional(Relu).optional(Tanh)


def test_match_option(engine):
    g, x, _ = graph()
    w, b = g.input("w"), g.input("b")
    conv = g.apply(Conv, x, w)
    assert valid(pm.match(ReluConvMaybeBias, g.apply(Relu, conv), engine=engine))
    assert valid(pm.match(ReluConvMaybeBias, g.apply(Relu, g.apply(BiasAdd, conv, b)),
                          engine=engine))
    relu, tanh = g.apply(Relu, conv), g.apply(Tanh, conv)
    for t in (conv, relu, tanh, g.apply(Tanh, relu)):
        assert valid(pm.match(ConvMaybeReluMaybeTanh, t, engine=engine)) is not None
    assert pm.match(ConvMaybeReluMaybeTanh, g.apply(Relu, tanh), engine=engine) is None


def test_no_match_option(engine):
    g, x, _ = graph()
    w, b = g.input("w"), g.input("b")
    conv, dense = g.apply(Conv, x, w), g.apply(Dense, x, w)
    for t in (g.apply(Tanh, conv), g.apply(Tanh, dense),
              g.apply(Relu, g.apply(BiasAdd, dense, b)),
              g.apply(Relu, g.apply(Add, conv, w))):
        assert pm.match(ReluConvMaybeBias, t, engine=engine) is None


@pm.pattern
def PlusMaybeBias(x, bias):
    return pm.optional(Relu(x), Add, bias)   # "Add(Relu(x), optional bias)"


@pm.rule(PlusMaybeBias)
def plus_maybe_bias(x, bias):
    return Tanh(x) if bias is None else Add(Tanh(x), bias)


def test_optional_variable_unbound_when_absent(engine):
    g, x, y = graph()
    with_bias = valid(pm.match(PlusMaybeBias, g.apply(Add, y, g.apply(Relu, x)), engine=engine))
    assert with_bias.bindings == {"x": x, "bias": y}
    without = valid(pm.match(PlusMaybeBias, g.apply(Relu, x), engine=engine))
    assert without.bindings == {"x": x}
    out = g.output(g.apply(Relu, x))
    assert pm.rewrite(g, [PlusMaybeBias], engine=engine).firings == {"plus_maybe_bias": 1}
    assert g.outputs[0].op is Tanh and out not in g.outputs


def test_optional_errors():
    @pm.pattern
    def BadGuard(x, b):
        assert b.rank == 2   # b is bound only when the option is there
        return pm.optional(Relu(x), Add, b)
    with pytest.raises(PatternError, match="does not bind"):
        BadGuard.program


# ------------------------------------------------------------- attributes


@pm.pattern
def ConvNCHW(x, w):
    return Conv2(x, w, pm.wildcard(), pm.wildcard()).has_attr(data_layout="NCHW")


@pm.pattern
def Conv33(x, w):
    return pm.has_attr(Conv2(x, w, pm.wildcard(), pm.wildcard()), kernel_size=[3, 3])


@pm.pattern
def CastF32(x):
    return Cast(x, pm.wildcard()).has_attr(dtype=pm.f32)


@pm.pattern
def ConvLayoutVar(x, w, layout):
    return Conv2(x, w, layout, pm.wildcard()).has_attr(data_layout="NCHW")


def test_match_call_attr(engine):
    g, x, w = graph()
    nchw = g.apply(Conv2, x, w, "NCHW", (1, 1))
    assert valid(pm.match(ConvNCHW, nchw, engine=engine)).bindings == {"x": x, "w": w}
    k33 = g.apply(Conv2, x, w, "NHWC", [3, 3])
    assert valid(pm.match(Conv33, k33, engine=engine)) is not None
    assert valid(pm.match(CastF32, g.apply(Cast, x, pm.f32), engine=engine)) is not None
    # an attribute argument written as a variable stays bound
    m = valid(pm.match(ConvLayoutVar, nchw, engine=engine))
    assert m.bindings["layout"].value == "NCHW"


def test_no_match_call_attr(engine):
    g, x, w = graph()
    assert pm.match(ConvNCHW, g.apply(Conv2, x, w, "NHWC", (1, 1)), engine=engine) is None
    assert pm.match(Conv33, g.apply(Conv2, x, w, "NCHW", [2, 1]), engine=engine) is None
    assert pm.match(CastF32, g.apply(Cast, x, pm.f16), engine=engine) is None
    assert pm.match(ConvLayoutVar, g.apply(Conv2, x, w, "NHWC", 1), engine=engine) is None


def test_has_attr_errors():
    @pm.pattern
    def Random(x, w):
        return Conv2(x, w, pm.wildcard(), pm.wildcard()).has_attr(RandomAttr="NCHW")
    with pytest.raises(PatternError, match="has no argument 'RandomAttr'"):
        Random.program


# ------------------------------------------------------- operator classes


@pm.pattern
def DenseElemwise(x, w):
    F = pm.Op(2, 1)
    assert F.op_class == pm.opclass(EW)   # Relay's has_attr({"TOpPattern": kElemWise})
    return F(x, w)


@pm.pattern
def AddOrSub(x, y):
    return Add(x, y)
@pm.pattern
def AddOrSub(x, y):  # noqa: F811 -- an alternate
    return Sub(x, y)


def test_match_op_attr_and_alternate_operators(engine):
    @pm.op(op_class=EW)
    def EwBinary(x, y): return 1
    g, x, y = graph()
    assert valid(pm.match(DenseElemwise, g.apply(EwBinary, x, y), engine=engine)) is not None
    assert pm.match(DenseElemwise, g.apply(Dense, x, y), engine=engine) is None
    assert valid(pm.match(AddOrSub, g.apply(Sub, x, y), engine=engine)) is not None
    assert pm.match(AddOrSub, g.apply(Div, x, y), engine=engine) is None


# ------------------------------------------------------------------ types


@pm.pattern
def Typed(x):
    assert x.shape == (10, 10) and x.dtype == pm.f32   # Relay's has_type / has_shape / has_dtype
    return x


def test_match_type_dtype_shape(engine):
    g = pm.Graph()
    assert valid(pm.match(Typed, g.input("a", shape=(10, 10), dtype=pm.f32), engine=engine))
    assert pm.match(Typed, g.input("b", shape=(10, 10), dtype=pm.i32), engine=engine) is None
    assert pm.match(Typed, g.input("c", shape=(10, 5), dtype=pm.f32), engine=engine) is None


# ----------------------------------------------------------------- tuples


@pm.pattern
def Tup3(x):
    return pm.is_tuple(x, pm.wildcard(), Relu(pm.wildcard()))


@pm.pattern
def Tup3Item1(x):
    return pm.getitem(pm.is_tuple(x, pm.wildcard(), Relu(pm.wildcard())), 1)


@pm.pattern
def Tup3AnyItem(x):
    return pm.getitem(pm.is_tuple(x, pm.wildcard(), Relu(pm.wildcard())))


@pm.pattern
def BnFirst(x):
    return pm.getitem(BatchNormOp(x, pm.wildcard(), pm.wildcard(), pm.wildcard(),
                                  pm.wildcard(), pm.wildcard()), 0)


def test_match_tuple(engine):
    g, x, y = graph()
    t = g.apply(pm.tuple_op(3), x, y, g.apply(Relu, y))
    assert valid(pm.match(Tup3, t, engine=engine)).bindings == {"x": x}
    GI = pm.GetItem()
    assert valid(pm.match(Tup3Item1, g.apply(GI, t, 1), engine=engine)) is not None
    for i in range(3):
        assert valid(pm.match(Tup3AnyItem, g.apply(GI, t, i), engine=engine)) is not None
    bn = g.apply(BatchNormOp, x, y, y, y, y, 1e-5)
    assert valid(pm.match(BnFirst, g.apply(GI, bn, 0), engine=engine)).bindings == {"x": x}
    assert pm.match(BnFirst, g.apply(GI, bn, 1), engine=engine) is None


def test_no_match_tuple(engine):
    g, x, y = graph()
    t = g.apply(pm.tuple_op(3), x, y, g.apply(Relu, y))
    t4 = g.apply(pm.tuple_op(4), x, y, g.apply(Relu, y), x)
    assert pm.match(Tup3, t4, engine=engine) is None
    assert pm.match(Tup3Item1, g.apply(pm.GetItem(), t, 2), engine=engine) is None


def test_getitem_index_checked():
    @pm.pattern
    def Beyond(x):
        return pm.getitem(BatchNormOp(x, x, x, x, x, x), 3)
    with pytest.raises(PatternError, match="has 3 outputs, no index 3"):
        Beyond.program


# ---------------------------------------------------------------- diamonds


@pm.pattern
def Diamond():
    c = Conv(pm.wildcard(), pm.wildcard())
    return Add(Relu(c), LeakyRelu(c, pm.wildcard()))


def test_match_diamond(engine):
    g = pm.Graph()
    conv = g.apply(Conv, g.input("input"), g.input("weight"))
    out = g.apply(Add, g.apply(Relu, conv), g.apply(LeakyRelu, conv, 0))
    assert valid(pm.match(Diamond, out, engine=engine)) is not None
    assert pm.match(Diamond, g.apply(LeakyRelu, conv, 0), engine=engine) is None
    assert pm.match(Diamond, g.apply(Relu, conv), engine=engine) is None


def test_match_fake_diamond_and_multi_diamond(engine):
    g = pm.Graph()
    c1 = g.apply(Conv, g.input("input1"), g.input("weight1"))
    c2 = g.apply(Conv, g.input("input2"), g.input("weight2"))
    out = g.apply(Add, g.apply(Relu, c1), g.apply(LeakyRelu, c2, 0))
    assert pm.match(Diamond, out, engine=engine) is None   # two convs: the wildcards differ
    c = g.apply(Conv, g.input("input"), g.input("weight"))
    multi = g.apply(Add, g.apply(Add, g.apply(Relu, c), g.apply(LeakyRelu, c, 0)), c)
    assert pm.match(Diamond, multi, engine=engine) is None


# -------------------------------------------------------------- dominators

@pm.pattern
def ConvP(inp, weight):
    return Conv(inp, weight)


@pm.pattern
def UnaryEw(x):
    F = pm.Op(1, 1)
    assert F.op_class == pm.opclass(EW)
    return F(pm.wildcard())
@pm.pattern
def UnaryEw(x):  # noqa: F811 -- LeakyRelu: elementwise, with an attribute
    return LeakyRelu(pm.wildcard(), pm.wildcard())


@pm.pattern
def UnaryEwOrAdd(x):
    return UnaryEw(x)
@pm.pattern
def UnaryEwOrAdd(x):  # noqa: F811
    return Add(pm.wildcard(), pm.wildcard())


@pm.pattern
def Reduction():
    return Add(pm.wildcard(), pm.wildcard())


@pm.pattern
def ReluP():
    return Relu(pm.wildcard())


DIAMOND = pm.dominates(ConvP, UnaryEw, Reduction)
FUZZY = pm.dominates(ConvP, UnaryEwOrAdd, Reduction)


def classic(g, inp, w):
    conv = g.apply(Conv, inp, w)
    relu = g.apply(Relu, g.apply(Relu, conv))
    return g.apply(Add, relu, g.apply(LeakyRelu, conv, 0))


def deeper(g, inp, w):
    conv = g.apply(Conv, inp, w)
    t = g.apply(Tanh, g.apply(Relu, g.apply(Relu, conv)))
    return g.apply(Add, t, g.apply(LeakyRelu, conv, 0))


def single(g, inp, w):
    conv = g.apply(Conv, inp, w)
    relu = g.apply(Relu, g.apply(Relu, conv))
    return g.apply(Add, relu, g.apply(Tanh, relu))


def nested(g, inp, w):
    conv = g.apply(Conv, inp, w)
    r = g.apply(Relu, conv)
    t = g.apply(Tanh, g.apply(Add, r, r))
    return g.apply(Add, t, g.apply(LeakyRelu, conv, 0))


def test_match_dominator(engine):
    for build, pat in ((classic, DIAMOND), (deeper, DIAMOND), (single, DIAMOND),
                       (nested, FUZZY)):
        g = pm.Graph()
        inp, w = g.input("input"), g.input("weight")
        out = g.output(build(g, inp, w))
        m = pm.match(pat, out, engine=engine)
        assert m is not None, build.__name__
        assert m.bindings == {"inp": inp, "weight": w}
        assert m.parent_node.op is Conv and set(m.nodes) >= {out, m.parent_node}


def test_not_match_dominator(engine):
    g = pm.Graph()
    c1 = g.apply(Conv, g.input("input1"), g.input("weight1"))
    c2 = g.apply(Conv, g.input("input2"), g.input("weight2"))
    fake = g.output(g.apply(Add, g.apply(Relu, c1), g.apply(LeakyRelu, c2, 0)))
    assert pm.match(DIAMOND, fake, engine=engine) is None          # fake diamond
    g = pm.Graph()
    inp, w = g.input("input"), g.input("weight")
    conv = g.apply(Conv, inp, w)
    r = g.apply(Relu, conv)
    add_path = g.output(g.apply(Add, g.apply(Add, r, r), g.apply(LeakyRelu, conv, 0)))
    assert pm.match(DIAMOND, add_path, engine=engine) is None      # Add is not on the path
    relu_input = g.output(g.apply(Add, g.apply(Relu, inp), g.apply(LeakyRelu, conv, 0)))
    assert pm.match(DIAMOND, relu_input, engine=engine) is None    # relu on the input
    r2 = g.apply(Relu, g.apply(Relu, inp))
    no_conv = g.output(g.apply(Add, r2, g.apply(Tanh, r2)))
    assert pm.match(DIAMOND, no_conv, engine=engine) is None       # no conv


def test_at_most_one_parent(engine):
    P = pm.dominates(ConvP, ReluP, Reduction)
    g = pm.Graph()
    x, w = g.input("x"), g.input("w")
    n6 = g.apply(Conv, x, w)
    n8 = g.apply(Conv, g.apply(Tanh, n6), w)
    n11 = g.output(g.apply(Add, g.apply(Relu, n8), g.apply(Relu, n6)))
    assert pm.match(P, n11, engine=engine) is None
    n10 = g.output(g.apply(Add, n8, g.apply(Relu, n6)))          # test_not_match_dominator2
    assert pm.match(P, n10, engine=engine) is None


def test_dominator_needs_domination(engine):
    """The parent's value used outside the region: not dominated."""
    g = pm.Graph()
    inp, w = g.input("input"), g.input("weight")
    out = g.output(classic(g, inp, w))
    assert pm.match(DIAMOND, out, engine=engine) is not None
    g.output(g.apply(Sigmoid, out.args[1].args[0]))   # the conv also feeds another output
    assert pm.match(DIAMOND, out, engine=engine) is None


@pm.pattern
def TypedPath(y):
    F = pm.Op(1, 1)
    z = pm.var()
    assert F.op_class == pm.opclass(EW) and y.dtype == pm.f32
    y <= F(z)
    return y
@pm.pattern
def TypedPath(y):  # noqa: F811
    assert y.dtype == pm.f32
    y <= LeakyRelu(pm.wildcard(), pm.wildcard())
    return y


@pm.pattern
def TypedReduction(r):
    assert r.shape == (1, 3, 10, 10)
    r <= Add(pm.wildcard(), pm.wildcard())
    return r


@pm.pattern
def TypedReduction11(r):
    assert r.shape == (1, 1, 10, 10)
    r <= Add(pm.wildcard(), pm.wildcard())
    return r


def test_match_typed_dominator(engine):
    g = pm.Graph()
    t, w = dict(shape=(1, 3, 10, 10), dtype=pm.f32), dict(shape=(3, 3, 3, 3), dtype=pm.f32)
    inp, wt = g.input("input", shape=(1, 3, 12, 12), dtype=pm.f32), g.input("weight", **w)
    conv = g.apply(Conv, inp, wt, **t)
    relu = g.apply(Relu, g.apply(Relu, conv, **t), **t)
    out = g.output(g.apply(Add, relu, g.apply(LeakyRelu, conv, 0, **t), **t))
    assert pm.match(pm.dominates(ConvP, TypedPath, TypedReduction), out, engine=engine)
    assert pm.match(pm.dominates(ConvP, TypedPath, TypedReduction11), out,
                    engine=engine) is None
    g2 = pm.Graph()
    t16 = dict(shape=(1, 3, 10, 10), dtype=pm.f16)
    inp, wt = g2.input("input", shape=(1, 3, 12, 12), dtype=pm.f16), g2.input("weight", **w)
    conv = g2.apply(Conv, inp, wt, **t16)
    out = g2.output(g2.apply(Add, g2.apply(Relu, conv, **t16),
                             g2.apply(LeakyRelu, conv, 0, **t16), **t16))
    assert pm.match(pm.dominates(ConvP, TypedPath, TypedReduction), out, engine=engine) is None


def test_dominates_takes_patterns():
    with pytest.raises(PatternError, match="must be a @pm.pattern"):
        pm.dominates(ConvP, Relu, Reduction)


# -------------------------------------------------------------- rewriting


@pm.pattern
def AddToSub(x, y):
    return Add(x, y)


@pm.rule(AddToSub)
def add_to_sub(x, y):
    return Sub(x, y)


def test_rewrite(engine):
    g, x, y = graph()
    g.output(g.apply(Add, x, y))
    pm.rewrite(g, [AddToSub], engine=engine)
    assert pm.match(SubXY, g.outputs[0], engine=engine) is not None


@pm.pattern
def Batchnorm(x, var, mean, beta, gamma, eps):
    eps <= pm.is_constant()
    return Add(Div(Mul(gamma, Sub(x, mean)), Sqrt(Add(var, eps))), beta)
@pm.pattern
def Batchnorm(x, var, mean, beta, gamma, eps):  # noqa: F811 -- gamma * ((x - mean) / sqrt(..))
    eps <= pm.is_constant()
    return Add(Mul(gamma, Div(Sub(x, mean), Sqrt(Add(var, eps)))), beta)


@pm.rule(Batchnorm)
def fuse_batchnorm(x, var, mean, beta, gamma, eps):
    return BatchNorm(x, gamma, beta, mean, var, eps)


def bn_graph():
    g = pm.Graph()
    names = ("x", "var", "mean", "beta", "gamma")
    return g, dict(zip(names, (g.input(n) for n in names)))


def bn(g, v, x, form=0, last=Add):
    denom = g.apply(Sqrt, g.apply(Add, v["var"], 1e-5))
    centred = g.apply(Sub, x, v["mean"])
    if form == 0:
        scaled = g.apply(Div, g.apply(Mul, v["gamma"], centred), denom)
    elif form == 1:   # commuted multiply
        scaled = g.apply(Div, g.apply(Mul, centred, v["gamma"]), denom)
    else:             # gamma * ((x - mean) / sqrt(...))
        scaled = g.apply(Mul, v["gamma"], g.apply(Div, centred, denom))
    return g.apply(last, scaled, v["beta"]) if last is not Add or form != 1 else \
        g.apply(Add, v["beta"], scaled)  # commuted add too


def test_fuse_batchnorm_and_commutation(engine):
    for form in (0, 1, 2):
        g, v = bn_graph()
        g.output(bn(g, v, v["x"], form))
        assert pm.rewrite(g, [Batchnorm], engine=engine).firings == {"fuse_batchnorm": 1}
        out = g.outputs[0]
        assert out.op is BatchNorm and out.args[:5] == (v["x"], v["gamma"], v["beta"],
                                                         v["mean"], v["var"])
        assert out.args[5].value == 1e-5


def test_no_fuse_batchnorm(engine):
    g, v = bn_graph()
    g.output(bn(g, v, v["x"], last=Sub))
    assert pm.rewrite(g, [Batchnorm], engine=engine).firings == {}


def test_fuse_double_and_partial_batchnorm(engine):
    g, v = bn_graph()
    g.output(bn(g, v, bn(g, v, v["x"]), 0))
    assert pm.rewrite(g, [Batchnorm], engine=engine).firings == {"fuse_batchnorm": 2}
    out = g.outputs[0]
    assert out.op is BatchNorm and out.args[0].op is BatchNorm
    g, v = bn_graph()
    g.output(bn(g, v, bn(g, v, v["x"], last=Sub), 0))
    assert pm.rewrite(g, [Batchnorm], engine=engine).firings == {"fuse_batchnorm": 1}
    out = g.outputs[0]
    assert out.op is BatchNorm and out.args[0].op is Sub


# algebraic simplification: x + 0, x - 0, x * 1, x / 1, 0 * x, 0 / x (numbers
# compare by value, so the literal 0 is also 0.0)

@pm.pattern
def AddZero(x):
    return Add(x, 0)
@pm.pattern
def SubZero(x):
    return Sub(x, 0)
@pm.pattern
def MulOne(x):
    return Mul(x, 1)
@pm.pattern
def DivOne(x):
    return Div(x, 1)
@pm.pattern
def MulZero(z):
    z <= pm.is_constant(0)
    return Mul(z, pm.wildcard())
@pm.pattern
def ZeroDiv(z):
    z <= pm.is_constant(0)
    return Div(z, pm.wildcard())


for _P, _param in ((AddZero, "x"), (SubZero, "x"), (MulOne, "x"), (DivOne, "x"),
                   (MulZero, "z"), (ZeroDiv, "z")):
    exec(f"@pm.rule(_P)\ndef simplify_{_P.name}({_param}):\n    return {_param}\n")

SIMPLIFY = [AddZero, SubZero, MulOne, DivOne, MulZero, ZeroDiv]


def test_algebraic_simplify(engine):
    for build, want in ((lambda g, x, y: g.apply(Add, x, 0), "x"),
                        (lambda g, x, y: g.apply(Add, 0.0, x), "x"),
                        (lambda g, x, y: g.apply(Sub, x, 0.0), "x"),
                        (lambda g, x, y: g.apply(Mul, 1, x), "x"),
                        (lambda g, x, y: g.apply(Mul, x, 1.0), "x"),
                        (lambda g, x, y: g.apply(Div, x, 1), "x"),
                        (lambda g, x, y: g.apply(Mul, x, 0), "zero"),
                        (lambda g, x, y: g.apply(Div, 0.0, x), "zero")):
        g, x, y = graph()
        g.output(build(g, x, y))
        pm.rewrite(g, SIMPLIFY, engine=engine)
        out = g.outputs[0]
        assert out == x if want == "x" else (out.kind == "const" and out.value == 0)
    g, x, y = graph()
    e = g.apply(Sub, g.apply(Add, g.apply(Div, g.apply(Add, x, g.apply(Mul, 0, y)), 1),
                             g.apply(Mul, y, 1)), g.apply(Div, 0, x))
    g.output(e)
    pm.rewrite(g, SIMPLIFY, engine=engine)
    out = g.outputs[0]
    assert out.op is Add and set(out.args) == {x, y}


# recursion: Relay builds it with wildcard().redirect_to(...); here a pattern
# calls itself (test_rewrite_with_pattern_recursion)

@pm.pattern
def CastChain(x, w):
    return Cast(CastChain(x, w), pm.f32)
@pm.pattern
def CastChain(x, w):  # noqa: F811
    return Dense(x, w)


def test_rewrite_with_pattern_recursion(engine):
    g = pm.Graph()
    data, w = g.input("data", shape=(2, 8), dtype=pm.f32), g.const(0.0)
    feat = g.apply(Dense, data, w)
    for _ in range(6):
        feat = g.apply(Cast, feat, pm.f32)
    m = valid(pm.match(CastChain, feat, engine=engine))
    assert m.bindings == {"x": data, "w": w}
    assert pm.match(CastChain, g.apply(Cast, feat, pm.f16), engine=engine) is None
