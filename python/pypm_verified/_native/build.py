"""Build the native FX reader (``_fxreader.c``) in place, next to its source.

``python -m pypm_verified._native.build`` (``make venv`` runs it with the
venv's Python): compiles ``_fxreader.c`` with the C compiler and the headers
of the running interpreter into ``_fxreader<EXT_SUFFIX>`` (e.g.
``_fxreader.cpython-311-x86_64-linux-gnu.so``), written atomically, so a
process that has the old one loaded is not disturbed. Up to date: nothing
done. Without a C compiler or the interpreter's headers (Debian:
``apt-get install python3-dev``) it says so and exits 0 -- the package then
reads FX graphs in Python, the same result, slower -- unless ``--require``
is given. A compiler error always fails.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "_fxreader.c")


def target() -> str:
    """The path of the built extension for the running interpreter."""
    return os.path.join(HERE, "_fxreader" + sysconfig.get_config_var("EXT_SUFFIX"))


def up_to_date(out: str) -> bool:
    return os.path.isfile(out) and all(
        os.path.getmtime(out) >= os.path.getmtime(p) for p in (SOURCE, __file__))


def compiler() -> str:
    """The C compiler the interpreter was built with (``sysconfig``'s CC),
    else ``cc``."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return cc if shutil.which(cc) is not None else "cc"


def compile_command(source: str, out: str, cc: "str | None" = None) -> list:
    """The command that compiles the CPython extension ``source`` (C, with
    the running interpreter's headers) into the shared object ``out``."""
    return [cc or compiler(), "-O2", "-shared", "-fPIC", "-Wall", "-Wextra",
            "-Wno-unused-parameter", "-Wno-missing-field-initializers",
            "-I", sysconfig.get_paths()["include"], source, "-o", out]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    require = "--require" in argv
    out = target()
    if up_to_date(out) and "--force" not in argv:
        print(f"native reader: {os.path.relpath(out)} up to date")
        return 0
    include = sysconfig.get_paths()["include"]
    cc = compiler()
    missing = []
    if shutil.which(cc) is None:
        missing.append("a C compiler (cc)")
    if not os.path.isfile(os.path.join(include, "Python.h")):
        missing.append(f"the Python headers ({include}/Python.h; Debian: python3-dev)")
    if missing:
        print(f"native reader: not built, missing {' and '.join(missing)}; "
              "FX graphs are read in Python (same result, slower)")
        return 1 if require else 0
    tmp = f"{out}.tmp{os.getpid()}"
    cmd = compile_command(SOURCE, tmp, cc)
    print("native reader:", " ".join(cmd))
    r = subprocess.run(cmd)
    if r.returncode != 0:
        if os.path.exists(tmp):
            os.unlink(tmp)
        print("native reader: the compiler failed (above)")
        return 1
    os.replace(tmp, out)
    return 0

if __name__ == "__main__":
    sys.exit(main())
