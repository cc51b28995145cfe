"""The wheel, built and installed the way a user would.

From a fresh ``git clone`` of this checkout's HEAD, ``make wheel-build``
(what ``make wheel`` runs, with this interpreter): ``pip wheel . --no-deps``
builds the verified engine through the build backend (setup.py runs ``make
proofs lib``) into a platform wheel, and ``auditwheel repair`` gives it the
manylinux tag the library satisfies. The wheel is installed, building
nothing, into a new virtual environment with the ``[torch]`` extra only; there,
from a directory outside any checkout, the ``pypm-verified`` console script
rewrites a model and the engine reports the build id of the clone's sources.

Takes a few minutes: the wheel build, and torch installed into the new
environment (``--no-compile``; pip's cache or local wheels make it quick). To
save the Coq build, the clone is given this checkout's proof build products
when the Coq sources are byte-identical and built here (as after ``make
proofs lib``); make's own rules then decide they are up to date, and ``make
proofs`` still re-checks the assumptions against them. ``PYPM_WHEEL_FULL_BUILD=1``
builds everything from scratch instead (about 5 minutes more on 2 cores).
Skipped without git or the Coq/OCaml toolchain, except under
``PYPM_REQUIRE_TOOLS=1`` (``make test``), where that fails.
"""
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import pytest

from pypm_verified import _version

ROOT = Path(__file__).resolve().parents[1]

REQUIRE = bool(os.environ.get("PYPM_REQUIRE_TOOLS"))

# minutes: a clone, make wheel-build, a venv with torch
pytestmark = [pytest.mark.wheel, pytest.mark.slow]
LIB_IN_WHEEL = "pypm_verified/_lib/libpypm_verified.so"

# make proofs' inputs and the products copied with them (see the docstring)
COQ_INPUTS = ("_CoqProject", "theories/*.v", "extraction/*.v")
COQ_PRODUCTS = ("CoqMakefile", "CoqMakefile.conf", ".CoqMakefile.d",
                "theories/*.vo", "theories/*.vos", "theories/*.vok", "theories/*.glob",
                "theories/.*.aux", "extraction/*.vo", "extraction/*.vos", "extraction/*.vok",
                "extraction/*.glob", "extraction/.*.aux", "build/coqchk.ok", "build/coqchk.out",
                "ocaml/extracted/matcher.ml", "ocaml/extracted/matcher.mli")


def _unavailable(msg):
    if REQUIRE:
        pytest.fail(f"PYPM_REQUIRE_TOOLS is set but {msg}")
    pytest.skip(msg)


def _env():
    """The environment without anything pointing at this checkout or venv."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYPM_VERIFIED_LIB", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith(str(ROOT)))
    return env


def _run(cmd, cwd, timeout=900, env=None):
    return subprocess.run([str(c) for c in cmd], cwd=str(cwd), env=env or _env(), text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)


def _files(root: Path, patterns):
    return {str(p.relative_to(root)) for pat in patterns for p in root.glob(pat) if p.is_file()}


def seed_proof_products(src: Path, dst: Path) -> bool:
    """Copy the proof build products of ``src`` into the clone ``dst`` when
    both have the same Coq sources, byte for byte, and ``src`` is built
    (every product newer than every source); all copies get one mtime, now,
    so make finds them up to date. Returns whether it copied."""
    inputs = _files(dst, COQ_INPUTS)
    if not inputs or inputs != _files(src, COQ_INPUTS):
        return False
    if any((src / f).read_bytes() != (dst / f).read_bytes() for f in inputs):
        return False
    products = _files(src, COQ_PRODUCTS)
    if not {"CoqMakefile", "build/coqchk.ok", "ocaml/extracted/matcher.ml"} <= products:
        return False
    newest_input = max((src / f).stat().st_mtime for f in inputs)
    if min((src / f).stat().st_mtime for f in products) < newest_input:
        return False
    now = time.time()
    for f in products:
        (dst / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / f, dst / f)
        os.utime(dst / f, (now, now))
    return True


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A fresh clone of HEAD (with the proof products, when they apply)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        _unavailable("git or the repository's .git is missing")
    if _run(["make", "-s", "NO_APT=1", "check-toolchain"], ROOT).returncode != 0:
        _unavailable("the Coq/OCaml toolchain is missing (make deps)")
    dst = tmp_path_factory.mktemp("wheel") / "clone"
    r = _run(["git", "clone", "-q", "--no-hardlinks", ROOT, dst], ROOT)
    assert r.returncode == 0, r.stdout
    seeded = False if os.environ.get("PYPM_WHEEL_FULL_BUILD") else seed_proof_products(ROOT, dst)
    print(f"clone at {dst}; proof products {'copied' if seeded else 'built from scratch'}")
    return dst


@pytest.fixture(scope="module")
def built(clone):
    """``(wheel path, the build's output)`` of ``make wheel-build`` (``pip
    wheel . -w build/wheel --no-deps -v``, then ``auditwheel repair -w dist``)."""
    if _run([sys.executable, "-m", "auditwheel", "--version"], ROOT).returncode != 0:
        _unavailable("auditwheel is not installed (the [test] extra; make venv installs it)")
    t = time.perf_counter()
    r = _run(["make", "--no-print-directory", "wheel-build", f"WHEEL_PY={sys.executable}",
              "PIP_WHEEL_FLAGS=-v"], clone, timeout=1800)
    print(f"make wheel-build: {time.perf_counter() - t:.0f} s")
    assert r.returncode == 0, r.stdout[-6000:]
    wheels = glob.glob(str(clone / "dist" / "*.whl"))
    assert len(wheels) == 1, (wheels, r.stdout[-3000:])
    return Path(wheels[0]), r.stdout


#: the tag docs/guides/install.md names (and explains to users: glibc >= 2.N)
MANYLINUX = re.compile(r"manylinux_2_(\d+)_" + re.escape(platform.machine()))


def test_wheel_is_manylinux_and_auditwheel_agrees(built, clone):
    """The wheel's tag is the manylinux policy ``auditwheel show`` finds,
    the one the install guide names; the plain build it repaired was
    ``linux_ARCH`` and holds the same library, byte for byte."""
    wheel, _ = built
    m = re.search(r"-py3-none-(manylinux_2_\d+_\w+)\.whl$", wheel.name)
    assert m and MANYLINUX.fullmatch(m.group(1)), wheel.name
    tag = m.group(1)
    show = _run([sys.executable, "-m", "auditwheel", "show", wheel], clone)
    assert show.returncode == 0, show.stdout
    words = " ".join(show.stdout.split())  # auditwheel wraps its lines
    assert f'consistent with the following platform tag: "{tag}"' in words, show.stdout
    (raw,) = (clone / "build" / "wheel").glob("*.whl")
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    assert raw.name.endswith(f"-py3-none-{plat}.whl"), raw.name
    with zipfile.ZipFile(raw) as a, zipfile.ZipFile(wheel) as b:
        assert a.read(LIB_IN_WHEEL) == b.read(LIB_IN_WHEEL)
    install = (ROOT / "docs" / "guides" / "install.md").read_text()
    assert f"The wheel's tag is `{tag}`" in install, f"install.md does not name {tag}"
    glibc = f"glibc is 2.{MANYLINUX.fullmatch(tag).group(1)} or newer"
    assert glibc in install, f"install.md does not say {glibc!r}"


def test_wheel_is_a_platform_wheel_with_the_engine(built):
    wheel, _ = built
    plat = MANYLINUX.search(wheel.name).group(0)
    assert wheel.name.endswith(f"-py3-none-{plat}.whl"), wheel.name
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta_dir = next(n.split("/")[0] for n in names if n.endswith(".dist-info/WHEEL"))
        wheel_meta = z.read(f"{meta_dir}/WHEEL").decode()
        metadata = z.read(f"{meta_dir}/METADATA").decode()
        entry_points = z.read(f"{meta_dir}/entry_points.txt").decode()
    assert LIB_IN_WHEEL in names
    assert "pypm_verified/_lib/BUILD_ID" in names  # what the package expects its library to be
    assert "Root-Is-Purelib: false" in wheel_meta
    assert f"Tag: py3-none-{plat}" in wheel_meta
    assert re.search(r"^pypm-verified = pypm_verified\.cli\.app:run$", entry_points, re.M)
    # extras by job: [torch] brings neither transformers nor z3
    requires = re.findall(r"^Requires-Dist: (.*)$", metadata, re.M)
    torch_extra = [r for r in requires if "extra == \"torch\"" in r]
    assert any(r.startswith("torch") for r in torch_extra), requires
    assert not any(r.startswith(("transformers", "z3")) for r in torch_extra), torch_extra
    assert any(r.startswith("transformers") and "extra == \"hf\"" in r for r in requires)
    assert any(r.startswith("z3-solver") and "extra == \"check\"" in r for r in requires)


def test_wheel_build_ran_the_proof_checks(built):
    _, log = built
    assert "check-admitted: no Admitted, admit or axiom" in log
    assert "check-assumptions: main theorems closed under the global context" in log


def test_engine_needs_no_ocaml_or_compiler(built, tmp_path):
    """The packaged library links only the C library (the OCaml runtime is
    inside it)."""
    wheel, _ = built
    with zipfile.ZipFile(wheel) as z:
        z.extract(LIB_IN_WHEEL, tmp_path)
    r = _run(["ldd", tmp_path / LIB_IN_WHEEL], tmp_path)
    assert r.returncode == 0, r.stdout
    needed = {line.split()[0] for line in r.stdout.splitlines() if line.strip()}
    allowed = re.compile(r"^(linux-vdso\.so\.1|libc\.so\.6|libm\.so\.6|libdl\.so\.2|"
                         r"libpthread\.so\.0|/lib(64)?/ld-linux[-\w.]*\.so\.\d)$")
    assert needed and all(allowed.match(n) for n in needed), needed


@pytest.fixture(scope="module")
def venv(built, clone, tmp_path_factory):
    """A new virtual environment with the wheel and its [torch] extra,
    installed from wheels only (pip may build nothing)."""
    wheel, _ = built
    env_dir = tmp_path_factory.mktemp("venv") / "env"
    r = _run([sys.executable, "-m", "venv", env_dir], env_dir.parent)
    assert r.returncode == 0, r.stdout
    py = env_dir / "bin" / "python"
    t = time.perf_counter()
    r = _run([py, "-m", "pip", "install", "--no-compile", "--only-binary=:all:",
              "-c", clone / "requirements" / "constraints.txt", f"{wheel}[torch]"],
             env_dir.parent, timeout=1800)
    print(f"venv with torch: {time.perf_counter() - t:.0f} s")
    assert r.returncode == 0, r.stdout[-4000:]
    assert "Building wheel" not in r.stdout and "setup.py" not in r.stdout, r.stdout[-4000:]
    return env_dir


def test_installed_engine_is_the_clones(venv, clone, tmp_path):
    py = venv / "bin" / "python"
    r = _run([py, "-c", "import json, pypm_verified, pypm_verified._version as v; "
                        "print(json.dumps([pypm_verified.__file__, v.version_info(), "
                        "v.package_build_id()[0]]))"],
             tmp_path)
    assert r.returncode == 0, r.stdout
    where, info, expected = json.loads(r.stdout.strip().splitlines()[-1])
    assert where.startswith(str(venv)), where  # not the checkout
    assert info["library_path"].startswith(str(venv)), info
    assert info["engine_build_id"] == _version.expected_build_id(str(clone)), info
    assert re.fullmatch(r"[0-9a-f]{64}", info["engine_build_id"])
    assert expected == info["engine_build_id"]  # recorded by the wheel's build, checked at load
    coq = _run(["coqc", "--version"], tmp_path).stdout
    assert info["coq"] and f"version {info['coq']}" in coq, (info, coq)
    assert info["package"] == _version.package_version()
    r = _run([venv / "bin" / "pypm-verified", "--version"], tmp_path)
    assert r.returncode == 0, r.stdout
    assert r.stdout.splitlines()[:3] == [
        f"pypm_verified {info['package']}", f"engine build id: {info['engine_build_id']}",
        f"proofs checked with Coq {info['coq']}"], r.stdout


@pytest.fixture(scope="module")
def mha_model(tmp_path_factory):
    """nn.MultiheadAttention (examples/attention_models.py), exported to .pt2
    with this environment's torch: a plain-torch model, so [torch] suffices."""
    torch = pytest.importorskip("torch")
    import attention_models  # examples/, on sys.path (conftest.py)
    model, inputs = attention_models.build("mha")
    path = tmp_path_factory.mktemp("model") / "mha.pt2"
    torch.export.save(torch.export.export(model, (), inputs), str(path))
    return path


def test_console_script_rewrites_without_the_checkout(venv, mha_model, tmp_path):
    """``pypm-verified rewrite`` from a directory outside any checkout, with
    neither transformers nor z3 installed: the attention block is fused."""
    py = venv / "bin" / "python"
    r = _run([py, "-c", "import importlib.util as u; "
                        "print([u.find_spec(m) is None for m in ('transformers', 'z3')])"],
             tmp_path)
    assert r.stdout.strip() == "[True, True]", r.stdout
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(mha_model, work / "mha.pt2")
    t = time.perf_counter()
    r = _run([venv / "bin" / "pypm-verified", "rewrite", "mha.pt2", "-o", "out.pt2",
              "--target", "cuda", "--report", "report.json"], work)
    print(f"rewrite: {time.perf_counter() - t:.0f} s")
    assert r.returncode == 0, r.stdout[-4000:]
    assert (work / "out.pt2").stat().st_size > 0
    report = json.loads((work / "report.json").read_text())
    assert report["engine"] == "verified"
    assert report["firings"] == {"sdpa": 1}, report["firings"]


def test_readme_pip_path_with_the_torch_extra_only(venv, tmp_path):
    """The README's first rewrite as a pip user runs it (the wheel and
    ``[torch]`` only): ``pypm-verified example mlp`` writes a model the
    library rewrites; torch imports without the NumPy warning (the extra
    brings numpy); ``check-rules`` says in one line, exit 2, that z3 is the
    ``[check]`` extra, and ``--no-symbolic`` needs none."""
    bin_dir = venv / "bin"
    r = _run([bin_dir / "python", "-W", "default", "-c", "import torch, torch.export"],
             tmp_path)
    assert r.returncode == 0 and "NumPy" not in r.stdout, r.stdout[-3000:]
    r = _run([bin_dir / "pypm-verified", "example", "mlp", "-o", "mlp.pt2"], tmp_path)
    assert r.returncode == 0 and "wrote mlp.pt2 (mlp, size small" in r.stdout, r.stdout[-3000:]
    assert "NumPy" not in r.stdout, r.stdout[-3000:]
    r = _run([bin_dir / "pypm-verified", "rewrite", "mlp.pt2", "-o", "mlp.fast.pt2",
              "--report", "report.json", "-q"], tmp_path)
    assert r.returncode == 0, r.stdout[-4000:]
    firings = json.loads((tmp_path / "report.json").read_text())["firings"]
    assert firings == {"gelu_tanh": 2, "linear_act": 2}, firings
    r = _run([bin_dir / "pypm-verified", "example", "bert", "-o", "bert.pt2"], tmp_path)
    assert r.returncode == 2 and "pip install 'pypm_verified[hf]'" in r.stdout, r.stdout
    r = _run([bin_dir / "pypm-verified", "check-rules", "--fast", "--rules", "gelu"], tmp_path)
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stdout[-3000:]
    assert lines[0].startswith("error: check-rules proves the rules with z3, which is not "
                               "installed: pip install 'pypm_verified[check]'"), lines
    r = _run([bin_dir / "pypm-verified", "check-rules", "--fast", "--rules", "gelu",
              "--no-symbolic", "-q"], tmp_path)
    assert r.returncode == 0 and "2 rule(s): 2 tested" in r.stdout, r.stdout[-3000:]


def test_sdist_has_what_the_build_needs_and_no_products(built, clone, tmp_path):
    """``python -m build --sdist`` (after the wheel build, so the clone holds
    every build product): the sources make proofs and make lib need, none of
    their products."""
    pytest.importorskip("build")
    r = _run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o", tmp_path, "."],
             clone)
    assert r.returncode == 0, r.stdout[-4000:]
    (sdist,) = tmp_path.glob("pypm_verified-*.tar.gz")
    import tarfile
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    for needed in ("Makefile", "_CoqProject", "setup.py", "pyproject.toml", "MANIFEST.in",
                   "requirements/constraints.txt", "extraction/Extraction.v",
                   "tests/coq/Assumptions.v", "tests/coq/assumptions.golden",
                   "ocaml/dune-project", "ocaml/capi/build_id.sh", "ocaml/capi/pypm_capi.c",
                   "ocaml/capi/pypm_verified.h", "ocaml/lib/decode.ml", "ocaml/proved/dune",
                   "python/pypm_verified/_version.py"):
        assert needed in names, needed
    theories = {f"theories/{p.name}" for p in (clone / "theories").glob("*.v")}
    assert theories and theories <= names, theories - names
    products = [n for n in names if n.endswith((".vo", ".vok", ".vos", ".glob", ".so"))
                or n.startswith(("ocaml/_build/", "ocaml/extracted/", "build/"))]
    assert not products, products


def test_wheel_build_without_the_toolchain_names_make_deps(clone, tmp_path):
    """With make but no Coq/OCaml on PATH, the build stops before building
    anything, with one message naming ``make deps`` and the Debian packages."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "make").symlink_to(shutil.which("make"))
    env = dict(_env(), PATH=str(bin_dir))
    r = _run([sys.executable, "-m", "pip", "wheel", ".", "-w", tmp_path / "dist", "--no-deps",
              "--no-build-isolation"], clone, env=env)
    assert r.returncode != 0
    assert "missing: coqc coq_makefile coqchk dune ocamlfind" in r.stdout, r.stdout[-3000:]
    assert "`make deps`" in r.stdout and "apt-get install coq ocaml-nox ocaml-compiler-libs dune" in r.stdout
    assert not list((tmp_path / "dist").glob("*.whl"))
