"""Crafted ``.pt2`` archives: the checks cover
exactly what torch will read, and small files cannot make the loader
compute or allocate without bound.

* a program stored under ``models/`` under any other name than
  ``models/<name>.json`` (torch reads *every* member there as a program) is
  refused before torch sees it; so are AOTInductor members (a shared
  library torch would load), members outside the top folder (torch's
  reader refuses them and ``torch.export.load`` falls back to a legacy
  reader the checks do not cover) and names torch does not write;
* size expressions and guards whose integers outgrow
  :data:`untrusted.MAX_INT_BITS` (``10**10**10``, ``1 << 10**10``,
  ``math.factorial``) are refused instead of evaluated;
* duplicate or case-colliding names, overlapping entries and members
  larger than the limits are refused from the central directory, before
  anything is inflated;
* a tree spec nested 100k deep is a ``LoadError``, not a ``RecursionError``.

Each crafted file that would run code creates a marker when loaded by the
old code; each test asserts on the refusal and that the marker is absent."""
import json
import os
import subprocess
import sys
import time
import zipfile

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

import pypm_verified as pm  # noqa: E402
from pypm_verified.torch import archive, untrusted  # noqa: E402
from pypm_verified.torch.loader import LoadError, load_model  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYDIR = os.path.join(ROOT, "python")


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).eval()
    path = tmp_path_factory.mktemp("good") / "good.pt2"
    torch.export.save(torch.export.export(m, (torch.randn(3, 4),)), str(path))
    return path


def _marker_guard(marker):
    code = f"getattr(__import__('builtins'), 'open')({str(marker)!r}, 'w')"
    return f"{code} is not None"


def _rezip(src, dst, rename=None, json_fn=None, extra=(), compress=zipfile.ZIP_STORED):
    """A copy of ``src`` with models/model.json passed through ``json_fn``
    and renamed to ``rename`` (below the top folder), plus ``extra``
    members ``(name below the top folder, bytes)``."""
    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w", compress) as zo:
        top = zi.namelist()[0].split("/", 1)[0] + "/"
        for info in zi.infolist():
            name, data = info.filename, zi.read(info.filename)
            if name == top + "models/model.json":
                if json_fn is not None:
                    data = json.dumps(json_fn(json.loads(data))).encode()
                if rename is not None:
                    name = top + rename
            zo.writestr(name, data)
        for n, d in extra:
            zo.writestr(top + n, d)
    return dst


def _guarded(marker):
    def fn(d):
        d["guards_code"] = [_marker_guard(marker)]
        return d
    return fn


def _load_and_run(path):
    """What rewrite (or pm.load(path).module()) does with a file."""
    ep = pm.load(str(path))
    m = ep.module()
    m(*ep.example_inputs[0])


# ------------------------------------------------ item 1: what torch reads

@pytest.mark.parametrize("rename", ["models/model.JSON", "models/model_json",
                                    "models/a/b.json", "models/modelxjson"])
def test_a_program_under_another_name_is_refused(good, tmp_path, rename):
    """torch.export.load reads every member under models/ and drops the last
    five characters of its name: a renamed program would skip the checks
    and its guards would run when the module is called."""
    marker = tmp_path / "RAN"
    evil = _rezip(good, tmp_path / "evil.pt2", rename=rename, json_fn=_guarded(marker))
    with pytest.raises(LoadError, match="under models/, so torch would read it as a program"):
        _load_and_run(evil)
    assert not marker.exists()


def test_a_second_program_is_checked_too(good, tmp_path):
    """A well-named second program is read by torch too, so it is checked."""
    marker = tmp_path / "RAN"
    with zipfile.ZipFile(good) as z:
        top = z.namelist()[0].split("/", 1)[0] + "/"
        prog = json.loads(z.read(top + "models/model.json"))
    prog["guards_code"] = [_marker_guard(marker)]
    evil = _rezip(good, tmp_path / "evil.pt2",
                  extra=[("models/other.json", json.dumps(prog).encode()),
                         ("data/sample_inputs/other.pt",
                          zipfile.ZipFile(good).read(top + "data/sample_inputs/model.pt"))])
    with pytest.raises(LoadError, match="a guard .*in models/other.json"):
        _load_and_run(evil)
    assert not marker.exists()


def test_compiled_members_are_refused(good, tmp_path):
    """torch's load_pt2 loads every data/aotinductor/<model>/ as a compiled
    package (a shared library)."""
    evil = _rezip(good, tmp_path / "evil.pt2",
                  extra=[("data/aotinductor/model/model.so", b"\x7fELF....")])
    with pytest.raises(LoadError, match="compiled code"):
        pm.load(str(evil))


def test_legacy_members_outside_the_top_folder_are_refused(good, tmp_path):
    """A member outside the top folder makes torch's reader fail, and
    torch.export.load then reads root-level serialized_* members with a
    legacy reader no check covers."""
    marker = tmp_path / "RAN"
    with zipfile.ZipFile(good) as z:
        top = z.namelist()[0].split("/", 1)[0] + "/"
        prog = json.loads(z.read(top + "models/model.json"))
    prog["guards_code"] = [_marker_guard(marker)]
    evil = tmp_path / "evil.pt2"
    with zipfile.ZipFile(good) as zi, zipfile.ZipFile(evil, "w") as zo:
        for info in zi.infolist():
            zo.writestr(info.filename, zi.read(info.filename))
        zo.writestr("serialized_exported_program.json", json.dumps(prog))
        zo.writestr("version", "8.0")
    with pytest.raises(LoadError, match="not inside the archive's top folder"):
        _load_and_run(evil)
    assert not marker.exists()


def test_unknown_members_are_refused(good, tmp_path):
    evil = _rezip(good, tmp_path / "evil.pt2", extra=[("code/__torch__.py", b"x")])
    with pytest.raises(LoadError, match="not one torch.export.save writes"):
        pm.load(str(evil))


def test_config_found_without_case_is_checked(good, tmp_path):
    """miniz finds data/weights/model_weights_config.json case-insensitively:
    a config under another case is a config, and its names are checked."""
    evil = tmp_path / "evil.pt2"
    with zipfile.ZipFile(good) as zi, zipfile.ZipFile(evil, "w") as zo:
        for info in zi.infolist():
            name, data = info.filename, zi.read(info.filename)
            if name.endswith("model_weights_config.json"):
                c = json.loads(data)
                c["config"]['x"+__import__("os").getcwd()+"'] = c["config"].pop("0.weight")
                data = json.dumps(c).encode()
                name = name.replace("model_weights_config.json", "MODEL_weights_config.JSON")
            zo.writestr(name, data)
    with pytest.raises(LoadError, match="refused, not a program torch writes"):
        pm.load(str(evil))


def test_files_torch_writes_still_load(good, tmp_path):
    """The classification accepts what torch.export.save writes, including
    extra files and a program whose sample inputs are absent."""
    ep = pm.load(str(good))
    assert ep.example_inputs is not None
    out = tmp_path / "extra.pt2"
    torch.export.save(ep, str(out), extra_files={"notes.txt": "hello"})
    assert pm.load(str(out)).module()(torch.randn(3, 4)).shape == (3, 2)


# ------------------------------------------------ item 3: magnitudes

@pytest.mark.parametrize("text", [
    "Pow(Integer(10), Pow(Integer(10), Integer(10)))",
    "10**10**10",
    "Pow(Integer(10), Integer(100000))",
    "LShift(Symbol('s0', positive=True, integer=True), Integer(100000000))",
    "PowByNatural(Integer(7), Symbol('s0', positive=True, integer=True))",
    "Integer('1e999999')",
    "Float('1.0', 1000000000)",
    "Float('1.0', precision=1000000000)",
])
def test_size_expressions_that_compute_without_end_are_refused(text):
    why = untrusted.sym_expr_problem(text)
    assert why is not None and any(w in why for w in ("exponent", "bits", "shift",
                                                       "precision")), why


@pytest.mark.parametrize("text", [
    "L['x'].size()[0] <= 10**10**10",
    "L['x'].size()[0] <= pow(10, pow(10, 10))",
    "L['x'].size()[0] <= math.factorial(100000000)",
    "(L['x'].size()[0] << 10**10) > 0",
    "L['x'].size()[0] < 2 ** L['x'].size()[0]",
    "L['x'].size()[0] ** 100000 > 0",
])
def test_guards_that_compute_without_end_are_refused(text):
    why = untrusted.guard_problem(text)
    assert why is not None, text


@pytest.mark.parametrize("text", [
    "L['y'].size()[0] == (2*L['x'].size()[0])",
    "max(1, L['x'].size()[1] // 20) == 3",
    "L['x'].size()[0] <= 9223372036854775807",
    "L['x'].size()[0] ** 2 <= 4096",
    "(L['x'].size()[0] << 3) >= 8",
])
def test_guards_torch_writes_keep_passing(text):
    assert untrusted.guard_problem(text) is None


def test_a_huge_guard_in_a_file_is_refused_quickly(good, tmp_path):
    evil = _rezip(good, tmp_path / "evil.pt2",
                  json_fn=lambda d: {**d, "guards_code": ["L['x'].size()[0] <= 10**10**10"]})
    t = time.monotonic()
    with pytest.raises(LoadError, match="exponent that is not a literal"):
        _load_and_run(evil)
    assert time.monotonic() - t < 60


def test_a_huge_size_expression_from_the_cli_is_exit_2(good, tmp_path):
    def fn(d):
        tv = d["graph_module"]["graph"]["tensor_values"]["input"]
        tv["sizes"][0] = {"as_expr": {"expr_str":
                                      "Pow(Integer(10), Pow(Integer(10), Integer(10)))",
                                      "hint": {"as_int": 3}}}
        return d
    evil = _rezip(good, tmp_path / "evil.pt2", json_fn=fn)
    r = subprocess.run([sys.executable, "-m", "pypm_verified", "rewrite", str(evil), "-o",
                        str(tmp_path / "o.pt2")], env=dict(os.environ, PYTHONPATH=PYDIR),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "exponent that is not a literal" in r.stderr
    assert not (tmp_path / "o.pt2").exists()


# ------------------------------------------------ item 4: zip bombs

def _bomb(good, dst, copies, member_bytes):
    """``good`` plus one deflated member of zeros listed ``copies`` times in
    the central directory (same name: zipfile's header check passes)."""
    with zipfile.ZipFile(good) as zi:
        top = zi.namelist()[0].split("/", 1)[0] + "/"
        members = [(i.filename, zi.read(i.filename)) for i in zi.infolist()]
    with zipfile.ZipFile(dst, "w") as zo:
        for n, d in members:
            zo.writestr(n, d)
        zo.writestr(zipfile.ZipInfo(top + "extra/blob"), b"\0" * member_bytes,
                    compress_type=zipfile.ZIP_DEFLATED)
        info = zo.filelist[-1]
        for _ in range(copies - 1):
            zo.filelist.append(info)
    return dst


def test_a_member_listed_many_times_is_refused_before_inflating(good, tmp_path, monkeypatch):
    """Refused from the central directory: not one byte of the 16 MiB member
    is inflated (the old check inflated it 400 times, 6.4 GB). Counted, not
    timed."""
    evil = _bomb(good, tmp_path / "bomb.pt2", copies=400, member_bytes=16 << 20)
    assert os.path.getsize(evil) < 200_000
    inflated = []
    real = zipfile.ZipExtFile.read

    def read(self, n=-1):
        data = real(self, n)
        inflated.append((self.name, len(data)))
        return data
    monkeypatch.setattr(zipfile.ZipExtFile, "read", read)
    with pytest.raises(LoadError, match="twice"):
        load_model(str(evil))
    assert not [r for r in inflated if r[0].endswith("extra/blob")], len(inflated)
    # the spy sees reads: the checked read of a sound file reads its members
    archive.read_all(str(good), archive.inspect(str(good)))
    assert inflated


def test_overlapping_entries_are_refused(good, tmp_path):
    """Member ``data/weights/a`` (stored) holds a whole local entry of ``b``,
    and the directory lists ``data/weights/b`` there too: both read back with
    valid headers and CRCs, but their data overlap (how zip bombs reuse
    one stream)."""
    import io
    inner = io.BytesIO()
    with zipfile.ZipFile(good) as zi:
        top = zi.namelist()[0].split("/", 1)[0] + "/"
        members = [(i.filename, zi.read(i.filename)) for i in zi.infolist()]
    with zipfile.ZipFile(inner, "w") as zb:
        zb.writestr(top + "data/weights/b", b"payload" * 100)
        binfo = zb.filelist[0]
    entry = inner.getvalue()[:zb.start_dir]
    evil = tmp_path / "overlap.pt2"
    with zipfile.ZipFile(evil, "w") as zo:
        for n, d in members:
            zo.writestr(n, d)
        zo.writestr(top + "data/weights/a", entry)
        a = zo.filelist[-1]
        binfo.header_offset = a.header_offset + 30 + len(a.filename.encode()) + len(a.extra)
        zo.filelist.append(binfo)
    with zipfile.ZipFile(evil) as z:  # Python's reader takes it as it is
        assert z.read(top + "data/weights/b") == b"payload" * 100 and z.testzip() is None
    with pytest.raises(LoadError, match="the data of members .* overlap"):
        load_model(str(evil))


def test_oversized_json_is_refused_before_inflating(good, tmp_path):
    """A program padded with 300 MiB of spaces (a ~300 KB file): refused from
    the directory's sizes, never read whole."""
    pad = 300 << 20
    evil = tmp_path / "padded.pt2"
    with zipfile.ZipFile(good) as zi, zipfile.ZipFile(evil, "w") as zo:
        for i in zi.infolist():
            data = zi.read(i.filename)
            if i.filename.endswith("models/model.json"):
                data = data + b" " * pad
                zo.writestr(i.filename, data, compress_type=zipfile.ZIP_DEFLATED)
            else:
                zo.writestr(i.filename, data)
    assert os.path.getsize(evil) < 2 << 20
    with pytest.raises(LoadError, match="of JSON, more than the limit"):
        pm.load(str(evil))


def test_case_colliding_names_are_refused(good, tmp_path):
    evil = _rezip(good, tmp_path / "evil.pt2", extra=[("extra/A", b"1"), ("extra/a", b"2")])
    with pytest.raises(LoadError, match="differs only in case"):
        pm.load(str(evil))


def test_member_claiming_more_than_deflate_gives_is_refused(good, tmp_path):
    evil = tmp_path / "liar.pt2"
    with zipfile.ZipFile(good) as zi, zipfile.ZipFile(evil, "w") as zo:
        for i in zi.infolist():
            zo.writestr(i.filename, zi.read(i.filename))
        top = zi.namelist()[0].split("/", 1)[0] + "/"
        zo.writestr(top + "extra/x", b"abc" * 10, compress_type=zipfile.ZIP_DEFLATED)
        zo.filelist[-1].file_size = 50 << 30
    with pytest.raises(LoadError, match="more than|claims"):
        load_model(str(evil))


def test_limits_are_checked_on_the_directory(good):
    arch = archive.inspect(str(good))
    small = archive.Limits(members=3)
    with pytest.raises(LoadError, match="more than the limit of 3"):
        archive.inspect(str(good), limits=small)
    with pytest.raises(LoadError, match="more than the limit"):
        archive.inspect(str(good), limits=archive.Limits(total_bytes=100))
    assert [m.kind for m in archive.classify(arch).members].count("program") == 1


# ------------------------------------------------ item 10: deep nesting

def test_a_deeply_nested_tree_spec_is_a_load_error(good, tmp_path):
    def deep(n):
        def fn(d):
            sig = d["graph_module"]["module_call_graph"][0]["signature"]
            leaf = '{"type": null, "context": null, "children_spec": []}'
            sig["in_spec"] = ("[1, " + '{"type": "builtins.tuple", "context": "null", '
                              '"children_spec": [' * n + leaf + "]}" * n + "]")
            return d
        return fn
    for n in (100_000, 1000):
        evil = _rezip(good, tmp_path / f"deep{n}.pt2", json_fn=deep(n))
        with pytest.raises(LoadError, match="nested deeper"):
            pm.load(str(evil))


def test_a_deeply_nested_program_is_a_load_error(good, tmp_path):
    evil = _rezip(good, tmp_path / "deep.pt2",
                  json_fn=lambda d: {**d, "metadata": json.loads("[" * 50 + "]" * 50)})
    with zipfile.ZipFile(evil) as z:
        name = [n for n in z.namelist() if n.endswith("models/model.json")][0]
    data = zipfile.ZipFile(evil).read(name).decode()
    data = data.replace("[" * 50 + "]" * 50, "[" * 100_000 + "]" * 100_000)
    evil2 = tmp_path / "deep2.pt2"
    with zipfile.ZipFile(evil) as zi, zipfile.ZipFile(evil2, "w") as zo:
        for i in zi.infolist():
            zo.writestr(i.filename, data if i.filename == name else zi.read(i.filename))
    with pytest.raises(LoadError, match="nest"):
        pm.load(str(evil2))


# ------------------------------------------------ fork during a guarded load

def test_fork_while_another_thread_loads(good, tmp_path):
    """A child forked while another thread is inside the loader's guard (its
    lock held for the whole torch load) loads a file itself, not hangs."""
    script = tmp_path / "fork.py"
    script.write_text(f"""
import os, sys, threading, time
import pypm_verified as pm
from pypm_verified.torch import untrusted
inside, release = threading.Event(), threading.Event()
def hold():
    with untrusted.guarded():
        inside.set()
        release.wait()
t = threading.Thread(target=hold); t.start(); inside.wait()
pids = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        try:
            pm.load({str(good)!r})
            os._exit(0)
        except BaseException:
            os._exit(3)
    pids.append(pid)
deadline = time.time() + 60
codes = []
for pid in pids:
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            codes.append(os.waitstatus_to_exitcode(status)); break
        if time.time() > deadline:
            os.kill(pid, 9); os.waitpid(pid, 0); codes.append("hung"); break
        time.sleep(0.05)
release.set(); t.join()
print(codes)
sys.exit(0 if codes == [0, 0, 0] else 1)
""")
    r = subprocess.run([sys.executable, str(script)], env=dict(os.environ, PYTHONPATH=PYDIR),
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr


# ------------------------------------------------ pickled data that expands

def _dag(depth):
    x = (torch.zeros(2),)
    for _ in range(depth):
        x = (x, x)  # pickled once each: memo references
    return x


def test_sample_inputs_that_expand_when_walked_are_refused(good, tmp_path):
    """A 2 KB sample-inputs pickle whose tuples share their halves (2^60
    leaves once torch flattens it) made the load hang; refused."""
    import io
    b = io.BytesIO()
    torch.save(((torch.randn(3, 4),), {"junk": _dag(60)}), b)
    assert len(b.getvalue()) < 10_000
    evil = tmp_path / "dag.pt2"
    with zipfile.ZipFile(good) as zi, zipfile.ZipFile(evil, "w") as zo:
        for i in zi.infolist():
            d = zi.read(i.filename)
            zo.writestr(i.filename, b.getvalue() if i.filename.endswith(
                "sample_inputs/model.pt") else d)
    r = subprocess.run([sys.executable, "-c", f"import pypm_verified as pm; pm.load({str(evil)!r})"],
                       env=dict(os.environ, PYTHONPATH=PYDIR), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1 and "a container reached twice" in r.stderr, r.stderr[-2000:]


def test_example_inputs_that_expand_or_nest_are_refused(good, tmp_path):
    from pypm_verified.cli import main
    dag, deep = tmp_path / "dag.pt", tmp_path / "deep.pt"
    torch.save(_dag(60), dag)
    nested = torch.zeros(3, 4)
    for _ in range(300):
        nested = [nested]
    torch.save(nested, deep)
    for f, why in ((dag, "reached twice"), (deep, "nested more than")):
        r = subprocess.run([sys.executable, "-m", "pypm_verified", "rewrite", str(good),
                            "--example-inputs", str(f), "-o", str(tmp_path / "o.pt2")],
                           env=dict(os.environ, PYTHONPATH=PYDIR), capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 2 and why in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / "o.pt2").exists()


def test_example_inputs_zip_bomb_is_refused(tmp_path, good):
    x = tmp_path / "x.pt"
    torch.save((torch.randn(3, 4),), x)
    with zipfile.ZipFile(x, "a") as z:
        top = z.namelist()[0].split("/", 1)[0] + "/"
        z.writestr(zipfile.ZipInfo(top + "data/9"), b"\0" * (8 << 20),
                   compress_type=zipfile.ZIP_DEFLATED)
        info = z.filelist[-1]
        for _ in range(50):
            z.filelist.append(info)
    r = subprocess.run([sys.executable, "-m", "pypm_verified", "rewrite", str(good),
                        "--example-inputs", str(x), "-o", str(tmp_path / "o.pt2")],
                       env=dict(os.environ, PYTHONPATH=PYDIR), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and "twice" in r.stderr, r.stderr[-2000:]
