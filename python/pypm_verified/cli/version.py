"""``--version``: what this installation is."""
from __future__ import annotations

import os
import re


def package_version() -> str:
    """The installed distribution's version, else the one in the source
    tree's ``pyproject.toml``, else ``unknown``."""
    from importlib import metadata
    try:
        return metadata.version("pypm_verified")
    except metadata.PackageNotFoundError:
        pass
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, os.pardir, os.pardir, os.pardir, "pyproject.toml")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return "unknown"
    try:
        import tomllib
        return str(tomllib.loads(text)["project"]["version"])
    except ImportError:  # Python < 3.11
        m = re.search(r'^version\s*=\s*"([^"]+)"', text, re.M)
        return m.group(1) if m else "unknown"
    except (KeyError, ValueError):
        return "unknown"


def version_text() -> str:
    """What ``python -m pypm_verified --version`` prints: the package's
    version and, when the verified engine's library is where it is looked for
    (``$PYPM_VERIFIED_LIB`` or the package's ``_lib``), its path. One place
    to add more (a build id) to."""
    lines = [f"pypm_verified {package_version()}"]
    try:
        from ..engines.binding import library_path
        path = library_path()
    except ImportError:  # cffi missing: where the library would be looked for
        path = os.environ.get("PYPM_VERIFIED_LIB") or os.path.join(
            os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_lib",
            "libpypm_verified.so")
    if os.path.isfile(path):
        lines.append(f"engine library: {os.path.abspath(path)}")
    return "\n".join(lines)
