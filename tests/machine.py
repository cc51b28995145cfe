"""A direct transcription of ``theories/Interpreter.v`` (``step_fn``, ``run``,
``match_pattern``), ``theories/RootIndex.v`` (``root_index``) and
``theories/Entry.v`` (``match_root``) over Python values: a test oracle for
what the verified engine computes, including how much fuel (machine steps)
it needs. (The index is written from the Coq text, independently of
``core.root_symbols``.)

States: ``("run", Θ, Φ, nf, stk, k)``, ``("success", Θ, Φ)``, ``("failure",)``.
Θ / Φ map slots to nodes / symbols; an environment ρ is a pair of dicts
(variable -> slot); continuations are cons lists ``(action, rest)`` / None.
"""
from pypm_verified import core
from pypm_verified.engines import declarative


def _push_matches(ps, ts, rho, k):
    for p, t in reversed(list(zip(ps, ts))):
        k = (("match", p, t, rho), k)
    return k


def _backtrack(nf, stk):
    if not stk:
        return ("failure",)
    (theta, phi, k), rest = stk
    return ("run", theta, phi, nf, rest, k)


def _gsub(store, env):
    return {x: store[s] for x, s in env.items() if s in store}


def step(defs, graph, st):
    _, theta, phi, nf, stk, k = st
    if k is None:
        return ("success", theta, phi)
    a, k = k
    if a[0] == "match":
        _, p, t, rho = a
        tenv, fenv = rho
        if isinstance(p, core.PVar):
            s = tenv.get(p.x)
            if s is None:
                return _backtrack(nf, stk)
            if s not in theta:
                return ("run", {**theta, s: t}, phi, nf, stk, k)
            return ("run", theta, phi, nf, stk, k) if theta[s] == t else _backtrack(nf, stk)
        if isinstance(p, core.PApp):
            if t.label == p.f and len(p.args) == len(t.args):
                return ("run", theta, phi, nf, stk, _push_matches(p.args, t.args, rho, k))
            return _backtrack(nf, stk)
        if isinstance(p, core.PAlt):
            frame = (theta, phi, (("match", p.p2, t, rho), k))
            return ("run", theta, phi, nf, (frame, stk), (("match", p.p1, t, rho), k))
        if isinstance(p, core.PGuard):
            return ("run", theta, phi, nf, stk, (("match", p.p, t, rho), (("guard", p.g, rho), k)))
        if isinstance(p, core.PExists):
            rho2 = ({**tenv, p.x: nf}, fenv)
            return ("run", theta, phi, nf + 1, stk,
                    (("match", p.p, t, rho2), (("check", nf), k)))
        if isinstance(p, core.PExistsF):
            rho2 = (tenv, {**fenv, p.F: nf})
            return ("run", theta, phi, nf + 1, stk,
                    (("match", p.p, t, rho2), (("fcheck", nf), k)))
        if isinstance(p, core.PConstr):
            return ("run", theta, phi, nf, stk,
                    (("match", p.p, t, rho), (("constr", p.p2, p.x, rho), k)))
        if isinstance(p, core.PFunVar):
            if len(p.args) != len(t.args):
                return _backtrack(nf, stk)
            s = fenv.get(p.F)
            if s is None:
                return _backtrack(nf, stk)
            if s not in phi:
                return ("run", theta, {**phi, s: t.label}, nf, stk,
                        _push_matches(p.args, t.args, rho, k))
            if phi[s] == t.label:
                return ("run", theta, phi, nf, stk, _push_matches(p.args, t.args, rho, k))
            return _backtrack(nf, stk)
        if isinstance(p, core.PCall):
            d = defs[p.P] if 0 <= p.P < len(defs) else None
            if d is None or len(p.xs) != d.nparams or len(p.Fs) != d.nfparams:
                return _backtrack(nf, stk)
            rho2 = ({i: tenv[x] for i, x in enumerate(p.xs) if x in tenv},
                    {i: fenv[F] for i, F in enumerate(p.Fs) if F in fenv})
            return ("run", theta, phi, nf, stk, (("match", d.body, t, rho2), k))
        raise TypeError(p)
    if a[0] == "guard":
        _, g, (tenv, fenv) = a
        ok = declarative.guard_holds(g, _gsub(theta, tenv), _gsub(phi, fenv), graph)
        return ("run", theta, phi, nf, stk, k) if ok else _backtrack(nf, stk)
    if a[0] == "check":
        return ("run", theta, phi, nf, stk, k) if a[1] in theta else _backtrack(nf, stk)
    if a[0] == "fcheck":
        return ("run", theta, phi, nf, stk, k) if a[1] in phi else _backtrack(nf, stk)
    if a[0] == "constr":
        _, p, x, rho = a
        s = rho[0].get(x)
        if s is None or s not in theta:
            return _backtrack(nf, stk)
        return ("run", theta, phi, nf, stk, (("match", p, theta[s], rho), k))
    raise AssertionError(a)


OUT_OF_FUEL = "out of fuel"


def match_pattern(program: core.Program, t, fuel: int):
    """``run fuel (init n m body t)``: ``(θ, φ)`` of the root's parameters,
    None (failure) or OUT_OF_FUEL."""
    defs = program.defs
    d = defs[program.root]
    n, m = d.nparams, d.nfparams
    rho = ({i: i for i in range(n)}, {i: i for i in range(m)})
    st = ("run", {}, {}, max(n, m), None, (("match", d.body, t, rho), None))
    while True:
        if st[0] == "success":
            theta, phi = st[1], st[2]
            return ({i: theta[i] for i in range(n) if i in theta},
                    {i: phi[i] for i in range(m) if i in phi})
        if st[0] == "failure":
            return None
        if fuel == 0:
            return OUT_OF_FUEL
        fuel -= 1
        st = step(defs, t.graph, st)


# ------------------------------------------------------- RootIndex.v, Entry.v
# rootsets: ("any",) or ("syms", sorted list of symbols, list of (attr, value) conditions)

ANY = ("any",)


def _sunion(l1, l2):
    out, i, j = [], 0, 0
    while i < len(l1) and j < len(l2):
        if l1[i] < l2[j]:
            out.append(l1[i])
            i += 1
        elif l2[j] < l1[i]:
            out.append(l2[j])
            j += 1
        else:
            out.append(l1[i])
            i += 1
            j += 1
    return out + l1[i:] + l2[j:]


def _rs_le(a, b):
    if b == ANY:
        return True
    if a == ANY:
        return False
    return all(x in b[1] for x in a[1]) and all(c in b[2] for c in a[2])


def _guard_class(F, g):
    """``guard_class``: the first conjunct F.a = c (or c = F.a)."""
    if isinstance(g, core.GEq):
        for e1, e2 in ((g.e1, g.e2), (g.e2, g.e1)):
            if isinstance(e1, core.EFAttr) and isinstance(e2, core.EConst):
                return (e1.attr, e2.z) if e1.F == F else None
        return None
    if isinstance(g, core.GAnd):
        c = _guard_class(F, g.g1)
        return c if c is not None else _guard_class(F, g.g2)
    return None


def _ri_find(R, P):
    return R.get(P, ANY)


def _root_of(R, p):
    if isinstance(p, (core.PVar, core.PFunVar)):
        return ANY
    if isinstance(p, core.PApp):
        return ("syms", [p.f], [])
    if isinstance(p, core.PAlt):
        a, b = _root_of(R, p.p1), _root_of(R, p.p2)
        if a == ANY or b == ANY:
            return ANY
        return ("syms", _sunion(a[1], b[1]), a[2] + [c for c in b[2] if c not in a[2]])
    if isinstance(p, core.PGuard) and isinstance(p.p, core.PFunVar):
        c = _guard_class(p.p.F, p.g)
        return ANY if c is None else ("syms", [], [c])
    if isinstance(p, (core.PGuard, core.PExists, core.PExistsF, core.PConstr)):
        return _root_of(R, p.p)
    if isinstance(p, core.PCall):
        return _ri_find(R, p.P)
    raise AssertionError(p)


def _post_from(defs, R):
    return all(_rs_le(_root_of(R, d.body), _ri_find(R, i)) for i, d in enumerate(defs))


INDEX_ROUNDS = 64


def root_index(defs):
    """``root_index``: definition number -> rootset."""
    R = {i: ("syms", [], []) for i in range(len(defs))}  # index_bottom
    k = INDEX_ROUNDS
    while True:  # iterate
        if _post_from(defs, R):
            return R
        if k == 0:
            return {}  # VarMap.empty: every lookup is "any"
        k -= 1
        R = {i: _root_of(R, d.body) for i, d in enumerate(defs)}  # index_step


def match_root(program: core.Program, t, fuel: int):
    """``Entry.match_root``: the index first (no match if the root cannot
    have ``t``'s label), then ``match_pattern``."""
    defs = program.defs
    if not 0 <= program.root < len(defs):
        return None
    r = _ri_find(root_index(defs), program.root)
    if r != ANY and t.label not in r[1] and not any(
            t.graph.sym_attr(t.label, a) == v for a, v in r[2]):
        return None
    return match_pattern(program, t, fuel)
