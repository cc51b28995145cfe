"""A Griffe extension for the API pages (mkdocs.yml: mkdocstrings' python
handler, ``extensions``): the Sphinx cross-reference roles of the
docstrings (``:mod:`.core```, ``:class:`~pypm_verified.torch.Backend```,
``:func:`write_atomic```) become cross-references of the site.

mkdocstrings renders docstrings as Markdown and knows nothing of Sphinx's
roles, which otherwise appear raw on the page (``:mod:`` then the name). Each
role becomes an *optional* autoref (``<autoref identifier=... optional>``,
what mkdocstrings' own templates emit for annotations): a link to the
object's entry where the site documents it, the name in code font where it
does not (an object of another library, a private helper), never a broken
link nor a warning. The target is resolved as Sphinx and Python's relative
imports read it, against the loaded package: ``.x`` from the package the
docstring's module is in (from the package itself in an ``__init__``),
``..x`` one level up; an unqualified name from the class, then the module,
then its package; a ``~`` shows only the last component.
"""
from __future__ import annotations

import html
import re
from typing import Iterator, List, Optional

import griffe

#: ``:role:`target``` and ``:role:`title <target>```, with or without ``py:``
ROLE_RE = re.compile(r":(?:py:)?(?:mod|class|func|meth|attr|data|exc|obj|const|type)"
                     r":`(?P<body>[^`]+)`")


def _lookup(collection, path: str) -> Optional[str]:
    """The path of the object ``path`` names in the loaded package (an
    import followed to what it imports: that is where the site documents
    it), or None."""
    try:
        obj = collection.get_member(path)
    except Exception:  # noqa: BLE001 -- KeyError, AliasResolutionError, ...
        return None
    try:
        return obj.final_target.path if obj.is_alias else obj.path
    except Exception:  # noqa: BLE001 -- an import of something not loaded
        return path


def _module_of(obj) -> "griffe.Module":
    while not obj.is_module:
        obj = obj.parent
    return obj


def _candidates(obj, target: str) -> List[str]:
    """Absolute paths ``target`` may name from ``obj``'s docstring, the most
    likely first."""
    mod = _module_of(obj)
    if target.startswith("."):
        dots = len(target) - len(target.lstrip("."))
        in_init = mod.is_init_module or mod.is_package  # a package's __init__
        base = mod.path if in_init else mod.path.rpartition(".")[0]
        for _ in range(dots - 1):
            base = base.rpartition(".")[0]
        rest = target[dots:]
        return [f"{base}.{rest}" if base else rest, f"{mod.path}.{rest}"]
    out = []
    scope = obj if obj.is_class else obj.parent
    while scope is not None:  # the class, the module, its packages
        out.append(f"{scope.path}.{target}")
        scope = scope.parent
    out.append(target)
    return out


def resolve(obj, target: str, collection) -> str:
    """The identifier ``target`` (a role's target in ``obj``'s docstring)
    names: the first candidate the loaded package has, else the likeliest."""
    cands = _candidates(obj, target)
    for c in cands:
        found = _lookup(collection, c)
        if found is not None:
            return found
    return cands[0] if target.startswith(".") else target


def convert(text: str, obj, collection) -> str:
    """``text`` (a docstring) with every Sphinx role an optional autoref."""
    def sub(m: re.Match) -> str:
        body = m.group("body").strip()
        title: Optional[str] = None
        explicit = re.fullmatch(r"(?P<title>.*?)\s*<(?P<target>[^<>]+)>", body)
        if explicit:
            title, body = explicit.group("title"), explicit.group("target")
        short = body.startswith("~")
        target = body.lstrip("~").strip()
        if title is None:
            title = target.rsplit(".", 1)[-1] if short else target.lstrip(".")
        ident = resolve(obj, target, collection)
        return (f'<autoref identifier="{html.escape(ident, quote=True)}" optional>'
                f"<code>{html.escape(title)}</code></autoref>")
    return ROLE_RE.sub(sub, text)


def _walk(obj) -> Iterator:
    yield obj
    for member in list(obj.members.values()):
        if member.is_alias:
            continue
        yield from _walk(member)


class SphinxRoles(griffe.Extension):
    """Sphinx cross-reference roles in docstrings as optional autorefs."""

    def on_package(self, *, pkg, loader, **kwargs) -> None:
        for obj in _walk(pkg):
            if obj.docstring is not None and ":" in obj.docstring.value:
                obj.docstring.value = convert(obj.docstring.value, obj,
                                              loader.modules_collection)
