"""What is checked before any work: paths, the engine library, modules to
import, ``--html``'s Graphviz, and the rules (loaded, and their bodies
scanned for undefined names)."""
from __future__ import annotations

import builtins
import dis
import ast
import inspect
import os
import textwrap
import types
from typing import Dict, List, Optional, Sequence, Tuple

from . import heap
from .exitcodes import RuleFailure, UsageError
from .logs import log
from ..errors import first_line


def check_engine_library(engine: Optional[str]) -> None:
    """``--engine verified``: UsageError (exit 2, before any work) unless the
    engine library (``$PYPM_VERIFIED_LIB`` or the built one) loads and reads this
    package's format."""
    if engine != "verified":
        return
    from ..engines import binding
    from ..errors import EngineUnavailable
    try:
        binding.open_engine_library()
    except EngineUnavailable as e:
        raise UsageError(f"--engine verified: {e}".replace(
            "engine='reference' needs no library", "--engine reference needs no library")) \
            from None
    except Exception as e:  # noqa: BLE001 -- a library that is not ours (missing symbols)
        raise UsageError(f"--engine verified: cannot use {binding.engine_library_path()}: "
                         f"{type(e).__name__}: {first_line(e)} (not a pypm_verified engine "
                         "library?); rebuild it with `make lib`, or point "
                         f"{binding.ENV_VAR} at it (--engine reference needs no library)") \
            from None


def check_imports(modules) -> None:
    """``--import MODULE``: each module can be found (it is imported when the
    model is loaded); UsageError otherwise."""
    import importlib.util
    for mod in modules or ():
        try:
            found = importlib.util.find_spec(mod) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise UsageError(f"--import {mod}: no such module here (check the name and "
                             "PYTHONPATH)")


def check_html(args, *others: Tuple[Optional[str], str]) -> Optional[str]:
    """For ``--html``: UsageError unless its path can be written and is none
    of ``others`` (``(path, what)``) and Graphviz's ``dot`` runs; the path
    of ``dot`` (None without ``--html``)."""
    if args.html_layers is not None and not args.html:
        raise UsageError("--html-layers: only with --html")
    if not args.html:
        return None
    for path, what in others:
        if path and _same(args.html, path):
            raise UsageError(f"--html {args.html}: is also the {what}")
    check_writable(args.html, "--html")
    from ..torch.html import GraphvizMissing, find_dot
    try:
        return find_dot()
    except GraphvizMissing as e:
        raise UsageError(f"--html {args.html}: {e}") from None


def check_model_path(path: str) -> None:
    """UsageError unless ``path`` is a readable, non-empty file."""
    if not os.path.exists(path):
        raise UsageError(f"MODEL {path}: no such file")
    if os.path.isdir(path):
        raise UsageError(f"MODEL {path}: is a directory, expected a model file")
    if not os.access(path, os.R_OK):
        raise UsageError(f"MODEL {path}: cannot be read (permission denied)")
    if os.path.getsize(path) == 0:
        raise UsageError(f"MODEL {path}: is empty (0 bytes), not a model file")


def check_writable(path: str, what: str) -> None:
    """UsageError unless a file can be created (or replaced) at ``path``:
    its directory exists and is writable, and it is not a directory, nor
    anything else that is not a regular file (a device such as
    ``/dev/null``, a FIFO, a socket, a symlink to one, ``/dev/stdout``):
    the atomic writer would replace it by a regular file
    (:func:`pypm_verified._atomic.check_destination`)."""
    if os.path.isdir(path):
        raise UsageError(f"{what} {path}: is a directory; give a file name")
    from .._atomic import NotARegularFile, check_destination
    try:
        check_destination(path)
    except NotARegularFile as e:
        hint = {"-o": " (--dry-run writes nothing)",
                "--report": " (--report - prints it on stdout)"}.get(what, "")
        raise UsageError(f"{what} {path}: not a regular file ({e.kind}); the file written "
                         "replaces what is at that path, so give the path of a regular file "
                         f"or a new one{hint}") from None
    except OSError:
        pass  # the checks below, or the write, say what is wrong
    d = os.path.dirname(path) or "."
    if not os.path.exists(d):
        raise UsageError(f"{what} {path}: directory {d} does not exist")
    if not os.path.isdir(d):
        raise UsageError(f"{what} {path}: {d} is not a directory")
    if not os.access(d, os.W_OK | os.X_OK):
        raise UsageError(f"{what} {path}: directory {d} is not writable")


def _same(a: str, b: str) -> bool:
    return os.path.abspath(a) == os.path.abspath(b) or (
        os.path.exists(a) and os.path.exists(b) and os.path.samefile(a, b))


def undefined_globals(fn) -> List[Tuple[str, int]]:
    """``(name, line)`` for each global name ``fn`` (or a function or
    comprehension nested in it) reads that is neither in its module nor a
    builtin: a ``NameError`` waiting for the first match."""
    g = fn.__globals__
    b = g.get("__builtins__", builtins)
    b = b if isinstance(b, dict) else vars(b)
    out, seen = [], set()

    def walk(code):
        line = code.co_firstlineno
        for ins in dis.get_instructions(code):
            pos = getattr(ins, "positions", None)
            line = (pos.lineno if pos is not None and pos.lineno else
                    ins.starts_line or line)
            if ins.opname == "LOAD_GLOBAL" and ins.argval not in g \
                    and ins.argval not in b and ins.argval not in seen:
                seen.add(ins.argval)
                out.append((ins.argval, line))
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                walk(c)
    walk(fn.__code__)
    return out


def check_undefined_globals(patterns: Sequence) -> None:
    """RuleFailure for a rule whose body reads an undefined name."""
    for p in patterns:
        for r in getattr(p, "rules", ()):
            fn = getattr(r, "fn", None)
            if not isinstance(fn, types.FunctionType):
                continue
            bad = undefined_globals(fn)
            if bad:
                name, line = bad[0]
                raise RuleFailure(
                    f"rule {r.name!r} ({r.where}) uses the name {name!r} (line {line}), which "
                    "is not defined in its module (a NameError at its first match)")


def _library_names() -> Dict[str, Tuple[str, str]]:
    """lower-cased pattern and rule name -> (name, library module)."""
    import importlib
    from ..library import ALL_MODULES, _patterns_of
    names = {}
    for m in ALL_MODULES:
        try:
            mod = importlib.import_module(f"pypm_verified.library.{m}")
        except Exception:  # noqa: BLE001 -- a hint only
            continue
        for p in _patterns_of(mod):
            names.setdefault(p.name.lower(), (p.name, m))
            for r in p.rules:
                names.setdefault(r.name.lower(), (r.name, m))
    return names


def load_rule_spec(spec: str) -> list:
    """The patterns of one ``--rules`` argument; UsageError saying which
    names are valid when it names nothing."""
    import warnings
    from ..errors import PatternError, PatternWarning
    from ..library import ALL_MODULES, load_rules
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", PatternWarning)
            pats = load_rules(spec)
        for w in caught:
            if issubclass(w.category, PatternWarning):
                log.warning("--rules %s: %s", spec, w.message)
            else:
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)
        return pats
    except (ValueError, PatternError) as e:
        msg = f"--rules {spec}: {e}"
        looks_like_file = spec.endswith(".py") or os.sep in spec
        if not looks_like_file and f"No module named {spec.split('.')[0]!r}" in str(e):
            msg = f"--rules {spec}: no library module or importable module of that name"
        if not looks_like_file:
            hint = ""
            known = _library_names().get(spec.lower())
            if known:
                what = "pattern" if known[0][:1].isupper() else "rule"
                hint = (f"; {known[0]!r} is a {what} of the library module "
                        f"{known[1]!r}: use --rules {known[1]}")
            elif spec.lower() in ALL_MODULES:
                hint = f"; did you mean --rules {spec.lower()}"
            msg += (f"{hint} (--rules takes 'library' (the whole default library), a library "
                    f"module: {', '.join(ALL_MODULES)}; a dotted module path; or a .py file)")
        raise UsageError(msg) from None


def load_rule_specs(specs: Sequence[str]) -> list:
    """The patterns of several ``--rules`` arguments, in the order given,
    each pattern once (``--rules library --rules gelu`` tries the GELU
    patterns once): :func:`load_rule_spec` of each."""
    return list(dict.fromkeys(p for spec in specs for p in load_rule_spec(spec)))


def check_patterns(patterns: Sequence, engine: Optional[str]) -> None:
    """Everything about the rules that can be known without a model, so that
    a mistake in a rules file is exit 2 in seconds, naming its file and line,
    not a failure after the model's export: every pattern linked (lowered to
    the core calculus, with its well-formedness checks) and loaded into
    ``engine``'s matcher (the verified engine: serialized into its library);
    every rule's body scanned for calls of an operator with the wrong number
    of arguments and for pattern parameters it takes that no alternate of
    its pattern binds (always None). UsageError otherwise."""
    from ..errors import PatternError
    for p in patterns:
        try:
            p.linked
        except PatternError as e:
            raise UsageError(str(e)) from None
        except Exception as e:  # noqa: BLE001 -- lowering a user's pattern
            raise UsageError(f"pattern {p.name!r} ({_pattern_where(p)}): cannot lower it: "
                             f"{type(e).__name__}: {first_line(e)}") from None
        unbound = _unbound_params(p)
        for r in getattr(p, "rules", ()):
            _check_rule_calls(r)
            for name in r.params:
                if name in unbound and name not in r.optional:
                    raise UsageError(
                        f"rule {r.name!r} ({r.where}): its parameter {name!r} is bound by no "
                        f"alternate of pattern {p.name!r} ({_pattern_where(p)}), so it would "
                        "always be None; use it in the pattern's body, or drop it")
    from ..engines.matching import PatternSet
    try:
        pset = PatternSet(patterns, engine or "verified")
        if pset.engine == "verified":
            pset.candidates(0)  # serialized and loaded into the library now
    except PatternError as e:
        raise UsageError(str(e)) from None
    except Exception as e:  # noqa: BLE001 -- the engine refusing a pattern set
        raise UsageError(f"the rules cannot be loaded into the {engine} engine: "
                         f"{type(e).__name__}: {first_line(e)}") from None


def _pattern_where(p) -> str:
    defs = getattr(p, "definitions", None)
    if defs:
        code = defs[0].fn.__code__
        return f"{code.co_filename}:{code.co_firstlineno}"
    return "?"


def _unbound_params(p) -> set:
    """Parameters of pattern ``p`` that occur in none of its alternates (a
    match never binds them)."""
    if getattr(p, "is_multi", False):
        return set()
    from ..core.wellformed import free_vars
    linked = p.linked
    tp, op = linked.term_params[p], linked.op_params[p]
    used = set()
    for alt in linked.alternates[p]:
        tv, fv = free_vars(alt)
        used |= {tp[i] for i in tv if i < len(tp)} | {op[i] for i in fv if i < len(op)}
    return (set(tp) | set(op)) - used


def _check_rule_calls(rule) -> None:
    """UsageError for a call in ``rule``'s body of an operator (``@pm.op``)
    with a number of arguments other than its arity: it would raise when the
    rule fires, after the model is loaded."""
    from ..dsl.operators import Op
    fn = getattr(rule, "fn", None)
    if not isinstance(fn, types.FunctionType):
        return
    try:
        lines, start = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return  # no source: the rule is checked when it fires
    local = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
             and isinstance(n.ctx, ast.Store)} | set(fn.__code__.co_varnames)
    scope = dict(fn.__globals__)
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            scope[name] = cell.cell_contents
        except ValueError:  # an empty cell
            pass

    def resolve(e):
        if isinstance(e, ast.Name):
            return None if e.id in local else scope.get(e.id)
        if isinstance(e, ast.Attribute):
            base = resolve(e.value)
            return getattr(base, e.attr, None) if isinstance(base, types.ModuleType) else None
        return None

    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or any(isinstance(a, ast.Starred) for a in node.args):
            continue
        op = resolve(node.func)
        if isinstance(op, Op) and len(node.args) != op.arity:
            raise UsageError(
                f"rule {rule.name!r} ({fn.__code__.co_filename}:{start + node.lineno - 1}): "
                f"operator {op.name} takes {op.arity} argument(s), got {len(node.args)}")


def read_example_inputs(args, torch) -> Optional[tuple]:
    """``--example-inputs``: the tuple it holds (None without it)."""
    if not args.example_inputs:
        return None
    from ..torch import archive
    from ..torch.errors import LoadError
    from ..torch.untrusted import unpickled_problem
    try:  # the zip directory first: no bomb reaches torch's reader
        archive.inspect(args.example_inputs, f"--example-inputs {args.example_inputs}")
    except LoadError as e:
        raise UsageError(str(e)) from None
    except Exception:  # noqa: BLE001 -- not a zip archive: torch.load says what it is
        pass
    try:
        example = torch.load(args.example_inputs, weights_only=True)
    except Exception as e:  # noqa: BLE001 -- torch raises many types
        import zipfile
        why = (f"{type(e).__name__}: {first_line(e)}" if zipfile.is_zipfile(
            args.example_inputs) else "not a file torch.save wrote (not a zip archive)")
        raise UsageError(f"--example-inputs {args.example_inputs}: cannot read it as a "
                         f"torch.save'd tuple of tensors: {why}") from None
    why = unpickled_problem(example)
    if why:
        raise UsageError(f"--example-inputs {args.example_inputs}: refused: it holds {why}")
    return tuple(example) if isinstance(example, (list, tuple)) else (example,)


def load_program(args, example):
    """MODEL, loaded and exported (exit 2 if it cannot be): the last check,
    and the start of the work."""
    from ..torch.loader import LoadError, load_model
    try:
        # outputs of transformers' classes: stand-ins (the command only compares
        # and saves them), not an import of transformers (~0.5 s)
        prog = load_model(args.model, example, imports=args.imports or (),
                          allow_pickle=args.allow_pickle, stand_in_outputs=True)
    except LoadError as e:
        raise UsageError(str(e)) from None
    except Exception as e:  # noqa: BLE001 -- anything torch raises
        raise UsageError(f"{args.model}: cannot load it: {type(e).__name__}: "
                         f"{first_line(e)}") from None
    heap.settle()  # the program lives until the end
    return prog
