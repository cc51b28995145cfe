"""The C API's declarations and constants agree across the places that copy
them: ``ocaml/capi/pypm_verified.h`` (the source of truth) against the cffi
declarations ``binding.CDEF``, the linker version script, the Python status
codes (``serialize.STATUS_*``) and the format constants of the Python
serializer, the OCaml reader and the C wrapper. Needs no built library.

(The OCaml side's copy of the codes, ``ocaml/lib/codes.ml``, is checked
against the header by ``ocaml/test/test_codes.ml``.)"""
import os
import re

import pytest

try:
    from pypm_verified.engines import binding, serialize
except ImportError:
    from pypm_verified import binding, serialize

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
HEADER = os.path.join(ROOT, "ocaml", "capi", "pypm_verified.h")
VERSION_SCRIPT = os.path.join(ROOT, "ocaml", "capi", "pypm_verified.map")
CAPI_C = os.path.join(ROOT, "ocaml", "capi", "pypm_capi.c")
DECODE_ML = os.path.join(ROOT, "ocaml", "lib", "decode.ml")


def _read(path):
    with open(path) as f:
        return f.read()


def _strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def _normalise(decl):
    """One spelling per declaration: single spaces, none around ( ) , *."""
    decl = " ".join(decl.split())
    return re.sub(r"\s*([(),*])\s*", r"\1", decl)


def parse_c(text):
    """``(defines, functions)`` of C declarations: ``{name: int value}`` for
    every ``#define PYPM_... <int>`` and ``{name: normalised prototype}``
    for every ``pypm_*`` function declaration."""
    text = _strip_comments(text)
    defines, code = {}, []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#"):
            m = re.match(r"#\s*define\s+(PYPM_\w+)\s+(-?\w+)\s*$", s)
            if m:
                defines[m.group(1)] = int(m.group(2), 0)
        else:
            code.append(line)
    functions = {}
    for decl in " ".join(code).split(";"):
        m = re.search(r"\b(pypm_\w+)\s*\(", decl)
        if m:
            assert m.group(1) not in functions, f"{m.group(1)} declared twice"
            functions[m.group(1)] = _normalise(decl)
    return defines, functions


@pytest.fixture
def header():
    return parse_c(_read(HEADER))


@pytest.fixture
def cdef():
    return parse_c(binding.CDEF)


def test_header_is_parsed(header):
    defines, functions = header
    # a parser that found nothing would make every comparison below vacuous
    assert defines["PYPM_OK"] == 0
    assert defines["PYPM_E_BUFFER_TOO_SMALL"] == 4
    assert defines["PYPM_STATUS_OUT_OF_FUEL"] == 2
    assert len(defines) == 27  # with PYPM_E_MEMORY and the 13 PYPM_REJECT_* reasons
    assert defines["PYPM_E_MEMORY"] == 10
    assert defines["PYPM_REJECT_DEAD"] == 8
    assert len(functions) == 19  # with pypm_build_id, pypm_coq_version, pypm_validate_rewrite,
    # pypm_validate_firings, pypm_candidates_at
    assert functions["pypm_build_id"] == "const char*pypm_build_id(void)"
    assert functions["pypm_release"] == "int pypm_release(int64_t handle)"
    assert functions["pypm_graph_load"] == (
        "int pypm_graph_load(const int64_t*buf,size_t len,int64_t*handle)")


def test_cdef_functions_are_the_headers(header, cdef):
    """Every function of CDEF is declared identically in the header, and
    every function of the header is in CDEF."""
    h, c = header[1], cdef[1]
    assert sorted(c) == sorted(h), "functions differ between binding.CDEF and the header"
    for name in h:
        assert c[name] == h[name], f"{name}: binding.CDEF and pypm_verified.h differ"


def test_cdef_constants_are_the_headers(header, cdef):
    assert cdef[0] == header[0], "PYPM_* constants differ between binding.CDEF and the header"


def test_cffi_reads_the_headers_values(header):
    """What cffi makes of CDEF (``lib.PYPM_*``) is the header's values.
    dlopen(None): the constants come from the cdef, not from the library."""
    lib = binding.ffi.dlopen(None)
    for name, value in header[0].items():
        assert getattr(lib, name) == value, name


def test_version_script_exports_the_header_functions(header):
    text = re.sub(r"/\*.*?\*/", " ", _read(VERSION_SCRIPT), flags=re.S)
    exported = re.findall(r"\b(pypm_\w+)\s*;", text)
    assert sorted(exported) == sorted(header[1])


def test_python_status_codes_are_the_headers(header):
    defines = header[0]
    statuses = {n: v for n, v in vars(serialize).items() if n.startswith("STATUS_")}
    assert set(statuses) == {"STATUS_MATCH", "STATUS_NO_MATCH", "STATUS_OUT_OF_FUEL"}
    assert {"PYPM_" + n for n in statuses} == {n for n in defines if n.startswith("PYPM_STATUS_")}
    for name, value in statuses.items():
        assert value == defines["PYPM_" + name], f"serialize.{name}"


def test_python_error_codes_are_the_headers(header):
    """Any PYPM_* integer the Python modules define (none today besides
    CDEF) must be the header's."""
    defines = header[0]
    for module in (binding, serialize):
        for name, value in vars(module).items():
            if name.startswith("PYPM_") and isinstance(value, int):
                assert defines.get(name) == value, f"{module.__name__}.{name}"


def _ocaml_int(name, text):
    m = re.search(r"^let " + name + r" = (0x[0-9a-fA-F]+|[0-9_]+)L?\b", text, re.M)
    assert m, f"decode.ml: no `let {name} = ...`"
    return int(m.group(1).replace("_", ""), 0)


def test_format_constants_agree():
    """Magic numbers, VERSION and MAX_DEPTH: Python serializer, OCaml reader
    (decode.ml) and the C wrapper's FORMAT_VERSION (pypm_capi.c)."""
    ml = _read(DECODE_ML)
    assert serialize.MAGIC_GRAPH == _ocaml_int("magic_graph", ml) == int.from_bytes(b"PYPMGRPH", "little")
    assert serialize.MAGIC_PATTERNS == _ocaml_int("magic_patterns", ml) == int.from_bytes(
        b"PYPMPATS", "little")
    assert serialize.MAGIC_EXTENSION == _ocaml_int("magic_extension", ml) == int.from_bytes(
        b"PYPMGEXT", "little")
    assert serialize.MAX_DEPTH == _ocaml_int("max_depth", ml)
    m = re.search(r"^#define FORMAT_VERSION (\d+)\s*$", _read(CAPI_C), re.M)
    assert m, "pypm_capi.c: no #define FORMAT_VERSION"
    assert serialize.VERSION == _ocaml_int("version", ml) == int(m.group(1))
