"""Build steps of the wheel that pyproject.toml cannot declare.

``pip wheel .`` (or ``make wheel``) builds the verified engine first:
``make proofs lib`` checks every theorem (and fails on a proof hole, an axiom
or a changed Print Assumptions), extracts the matcher and links
``libpypm_verified.so`` with the OCaml runtime in it, so the installed wheel
needs no OCaml, Coq or compiler. ``make`` is incremental: with the proofs
and the library built, this takes seconds. The library is loaded with cffi's
ABI mode (``dlopen``), not as a CPython extension, so the wheel is tagged
``py3-none-PLATFORM``: any Python 3, this platform.

An editable install (``pip install -e .``, what ``make venv`` does) builds
nothing: it uses the library that ``make lib`` puts in the source tree.
"""
import os
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.join(ROOT, "python", "pypm_verified", "_lib", "libpypm_verified.so")
TOOLCHAIN_HELP = ("the verified engine is built from the Coq proofs with the Coq/OCaml "
                  "toolchain: run `make deps` (Debian/Ubuntu), or apt-get install coq "
                  "ocaml-nox ocaml-compiler-libs dune ocaml-findlib libctypes-ocaml-dev libffi-dev")


def build_engine() -> None:
    """``make proofs lib`` in the source tree (NO_APT=1: check the toolchain,
    never install it); raises SystemExit with the reason on failure."""
    if shutil.which("make") is None:
        raise SystemExit(f"error: `make` not found; {TOOLCHAIN_HELP}")
    check = subprocess.run(["make", "-s", "--no-print-directory", "NO_APT=1", "check-toolchain"],
                           cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if check.returncode != 0:  # its message names what is missing and how to install it
        raise SystemExit(check.stdout.strip() or f"error: {TOOLCHAIN_HELP}")
    if subprocess.run(["make", "--no-print-directory", "NO_APT=1", "proofs", "lib"],
                      cwd=ROOT).returncode != 0:
        raise SystemExit("error: `make proofs lib` failed (above): the wheel is only built "
                         "with an engine whose proofs check")
    if not os.path.isfile(LIB):
        raise SystemExit(f"error: `make lib` did not produce {LIB}")


class BuildPyWithEngine(build_py):
    """build_py that builds the engine into ``pypm_verified/_lib`` first."""

    def run(self):
        if not self.editable_mode:
            build_engine()
            # no module left over from an earlier build of another tree state
            shutil.rmtree(os.path.join(self.build_lib, "pypm_verified"), ignore_errors=True)
            self.__dict__.pop("data_files", None)  # the .so is new: glob package_data again
        super().run()
        if not self.editable_mode:
            record_build_id(os.path.join(self.build_lib, "pypm_verified", "_lib", "BUILD_ID"))


def record_build_id(path: str) -> None:
    """Write the build id of this tree's sources to ``path`` (the wheel's
    ``pypm_verified/_lib/BUILD_ID``): the id the installed package expects
    its library to carry (``_version.package_build_id``), computed from the
    sources by ``_version.expected_build_id``, not read from the library."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "_pypm_version", os.path.join(ROOT, "python", "pypm_verified", "_version.py"))
    version = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(version)
    with open(path, "w", encoding="ascii") as f:
        f.write(version.expected_build_id(ROOT) + "\n")


class EngineDistribution(Distribution):
    """Ships a native library: platlib, a platform wheel (``Root-Is-Purelib:
    false``, the package at the wheel's root)."""

    def has_ext_modules(self):
        return True


class PlatformWheel(bdist_wheel):
    """A platform wheel for any Python 3 (``py3-none-PLATFORM``): the library
    is loaded with dlopen, so it does not depend on CPython's ABI."""

    def get_tag(self):
        return ("py3", "none", super().get_tag()[2])


setup(distclass=EngineDistribution,
      cmdclass={"build_py": BuildPyWithEngine, "bdist_wheel": PlatformWheel},
      # build/ also holds make's stamps and examples: keep setuptools' apart
      options={"build": {"build_base": "build/setuptools"}})
