"""The layer order of docs/internals/architecture.md holds in both directions.

The page's table (``| Layer | Modules | May import |``, lowest layer first)
is the one place the order is written: this test reads it, gives every
module of ``python/pypm_verified`` the layer of the entry that names it (a
folder ``core/`` or a file ``errors.py``, relative to the package; the
package's own ``__init__.py`` is the API, ``import pypm_verified``) and
parses every module with :mod:`ast`.

Every import counts, wherever it stands: at module level, inside a
function (a lazy import is still a dependency, and the way cycles hide),
under ``if TYPE_CHECKING:`` (an annotation naming a higher layer is a
dependency of the code's meaning even if it never runs: the stricter
reading, and it costs nothing to keep), and ``importlib.import_module``
of a literal name (the way a loader hides one). An import goes *up* when
the imported module's layer comes after the importing module's in the
table; each such import fails the test, listed with its file and line,
unless it is in :data:`KNOWN` with its reason. A KNOWN entry that no
longer occurs fails too, so that the list only shrinks.
"""
import ast
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG_DIR = os.path.join(ROOT, "python", "pypm_verified")
PKG = "pypm_verified"
DOC = os.path.join(ROOT, "docs", "internals", "architecture.md")

#: imports that still go up: (importing module, imported module) -> why.
#: The architecture page lists the same, with what ending each takes.
KNOWN = {
    ("pypm_verified.torch.backend", "pypm_verified.library"):
        "Backend(rules=None) defaults to the rule library, which is written on torch/ops.py",
    ("pypm_verified.torch.pipeline", "pypm_verified.library"):
        "rewrite_program(prog) defaults to the rule library (documented in the quickstart)",
    ("pypm_verified.torch.partition", "pypm_verified.library"):
        "partition(program) defaults to the rule library's patterns",
}


def layer_table():
    """``[(layer, [entry, ...]), ...]`` from the page's table, lowest first."""
    rows, inside = [], False
    with open(DOC, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line.startswith("|"):
                if inside:
                    break
                continue
            cells = [c.strip() for c in line.strip("|").split("|")]
            if cells[:2] == ["Layer", "Modules"]:
                inside = True
            elif inside and not set(cells[0]) <= set("-: "):
                rows.append((cells[0].strip("`"), re.findall(r"`([^`]+)`", cells[1])))
    assert rows, f"{DOC}: no table with the header | Layer | Modules |"
    return rows


def modules():
    """``{module name: (path relative to the package, is a package)}``."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(PKG_DIR):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__pycache__")))
        for name in sorted(filenames):
            if not name.endswith(".py"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), PKG_DIR).replace(os.sep, "/")
            parts = [PKG] + rel[:-3].split("/")
            is_pkg = parts[-1] == "__init__"
            if is_pkg:
                parts.pop()
            out[".".join(parts)] = (rel, is_pkg)
    return out


MODULES = modules()
TABLE = layer_table()
ORDER = {layer: i for i, (layer, _) in enumerate(TABLE)}


def places(rel):
    """The layers whose entries name the module at ``rel``."""
    return [layer for layer, entries in TABLE
            for e in entries if (rel.startswith(e) if e.endswith("/") else rel == e)]


def layer_of(module):
    return places(MODULES[module][0])[0]


def _known_module(name):
    """``name`` or its longest prefix that is a module of the package."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _absolute(module, is_pkg, level, name):
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    if level > 1:
        base = base[:len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _literal_name(node):
    """A string constant, or an f-string's literal prefix (``f"pkg.x.{y}"`` -> ``pkg.x``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return node.values[0].value.rstrip(".")
    return None


def imports(module):
    """``[(imported module, line), ...]``: every import of the package's own
    modules in ``module``."""
    rel, is_pkg = MODULES[module]
    with open(os.path.join(PKG_DIR, rel), encoding="utf-8") as f:
        return imports_in(module, is_pkg, f.read())


def imports_in(module, is_pkg, source):
    """:func:`imports` of ``source``, the text of ``module``."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = (_absolute(module, is_pkg, node.level, node.module) if node.level
                    else node.module or "")
            # ``from pkg import sub`` imports the module ``pkg.sub`` when there is one
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                     for a in node.names]
        elif isinstance(node, ast.Call) and node.args and (
                getattr(node.func, "attr", None) == "import_module"
                or getattr(node.func, "id", None) in ("import_module", "__import__")):
            name = _literal_name(node.args[0])
            if name and name.startswith("."):  # import_module(".x", __name__)
                level = len(name) - len(name.lstrip("."))
                name = _absolute(module, True, level, name.lstrip("."))
            if name:
                names = [name]
        for name in names:
            if name == PKG or name.startswith(PKG + "."):
                target = _known_module(name)
                if target is not None and target != module \
                        and (target, node.lineno) not in found:
                    found.append((target, node.lineno))
    return found


def upward_imports():
    """``{(importing, imported): [description, ...]}`` for each import that goes up."""
    out = {}
    for module in sorted(MODULES):
        src = layer_of(module)
        for target, line in imports(module):
            dst = layer_of(target)
            if ORDER[dst] > ORDER[src]:
                out.setdefault((module, target), []).append(
                    f"{MODULES[module][0]}:{line}: {module} ({src}) imports {target} ({dst})")
    return out


def test_the_table_names_the_layers_once_each_in_order():
    names = [layer for layer, _ in TABLE]
    assert len(set(names)) == len(names), names
    assert names[:2] == ["base", "core"] and names[-1] == "cli", names
    for layer in ("dsl", "engines", "rewriting", "torch", "library", "checking"):
        assert layer in names, layer
    # the documented chain, in this order
    chain = ["core", "dsl", "engines", "rewriting", "torch", "library", "checking", "cli"]
    assert [n for n in names if n in chain] == chain


def test_every_module_has_exactly_one_place():
    nowhere = [rel for rel, _ in MODULES.values() if not places(rel)]
    twice = [f"{rel}: {places(rel)}" for rel, _ in MODULES.values() if len(places(rel)) > 1]
    assert not nowhere, "modules the layer table of docs/internals/architecture.md does " \
        f"not place: {nowhere}"
    assert not twice, f"modules placed twice: {twice}"
    unused = [e for _, entries in TABLE for e in entries
              if not any(rel.startswith(e) if e.endswith("/") else rel == e
                         for rel, _ in MODULES.values())]
    assert not unused, f"table entries naming no module: {unused}"


def test_no_import_goes_up():
    found = upward_imports()
    new = [line for key, lines in sorted(found.items()) if key not in KNOWN for line in lines]
    assert not new, "imports from a lower layer to a higher one " \
        "(docs/internals/architecture.md, Layers):\n" + "\n".join(new)


def test_known_exceptions_still_occur():
    found = upward_imports()
    gone = [f"{a} -> {b}" for a, b in KNOWN if (a, b) not in found]
    assert not gone, f"no longer imported: remove from KNOWN (and the page): {gone}"


def test_the_parser_sees_hidden_imports():
    """The scan finds imports in functions, relative ones, ``from pkg import
    sub`` and literal ``import_module`` calls (what used to hide cycles)."""
    by = {m: [t for t, _ in imports(m)] for m in ("pypm_verified.core.graph",
                                                  "pypm_verified.torch.pipeline",
                                                  "pypm_verified.dsl.symbolic")}
    assert "pypm_verified.core.encoding" in by["pypm_verified.core.graph"]  # in a method
    assert "pypm_verified.library" in by["pypm_verified.torch.pipeline"]  # in a function
    assert "pypm_verified.core.symbols" in by["pypm_verified.dsl.symbolic"]  # from .. import


@pytest.mark.parametrize("text", [
    "import importlib\nimportlib.import_module('.torch.ops', __name__)\n",
    "import importlib\nimportlib.import_module(f'pypm_verified.torch.ops.{1}')\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .torch import ops\n",
    "def f():\n    import pypm_verified.torch.ops as o\n    return o\n",
])
def test_hidden_forms_count(text):
    """An ``import_module`` of a literal name, a ``TYPE_CHECKING`` import and
    an import in a function count like any import."""
    assert "pypm_verified.torch.ops" in [t for t, _ in imports_in(PKG, True, text)]
