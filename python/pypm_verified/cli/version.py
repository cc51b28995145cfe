"""``--version``: what this installation is (:mod:`pypm_verified._version`)."""
from __future__ import annotations

import os

from .._version import package_build_id, version_info


def version_text() -> str:
    """What ``pypm-verified --version`` prints: the package's version, the
    verified engine's build id (the SHA-256 of the sources it was compiled
    from) and the Coq version its proofs were checked with, and the library's
    path, and the build id the package expects when it is another; or why
    the engine is not there."""
    info = version_info()
    lines = [f"pypm_verified {info['package']}"]
    path = info["library_path"]
    if info["engine_build_id"]:
        lines.append(f"engine build id: {info['engine_build_id']}")
        lines.append(f"proofs checked with Coq {info['coq']}")
        lines.append(f"engine library: {os.path.abspath(path)}")
        expected, source = package_build_id()
        if expected != info["engine_build_id"]:  # refused at load, unless overridden
            lines.append(f"this package expects build id {expected or 'unknown'} ({source}): "
                         "the library is refused unless PYPM_ALLOW_BUILD_MISMATCH=1")
    elif os.path.isfile(path):
        lines.append(f"engine library: {os.path.abspath(path)} (built without a build id)")
    else:
        lines.append(f"engine library: not found at {path} (run `make lib`, or install a wheel)")
    return "\n".join(lines)
