"""The zip container of a PyTorch file, read as torch will read it, before
torch reads it.

PyTorch's reader (``PyTorchFileReader``, miniz) and Python's ``zipfile`` see
a zip archive differently wherever the archive is ambiguous, and torch's
``load_pt2`` decides what a member *is* from its name alone. So before any
member is inflated, :func:`inspect` reads the central directory and refuses:

* **ambiguity**: two entries with one name, or names equal but for case
  (miniz looks names up case-insensitively, ``zipfile`` exactly: each would
  read a different member); entries whose data overlap (a zip bomb lists one
  compressed stream many times); a member outside the archive's one top
  folder (torch's reader refuses it, and ``torch.export.load`` then falls
  back to its legacy reader, which no check here covers); encryption, or a
  compression torch cannot read (only stored and deflate);
* **size**: more than :attr:`Limits.members` entries, a member or a total
  larger than :attr:`Limits.total_bytes` uncompressed, a member that claims
  more than deflate can produce from its compressed size, a JSON member
  (parsed whole, twice: here and by torch) larger than
  :attr:`Limits.json_bytes`;
* for a ``.pt2`` (:func:`classify`): a member torch would read that the
  checks do not cover. Every name is given one :class:`Member` ``kind``:
  ``program`` (``models/<name>.json``: torch parses *every* member under
  ``models/`` as a program, whatever its suffix, so any other name there is
  refused), ``config`` (a weights or constants config, matched without
  case as miniz finds it), ``pickle`` (sample inputs; read under the safe
  unpickler), ``data`` (raw tensors, version stamps, ``extra/`` strings);
  AOTInductor members (a compiled shared library torch would load) and
  names torch does not write are refused.

Only then are the members read whole, checking each CRC-32 (torch does not).
Reading is bounded by the stated sizes, which the caps bound; deflate's
largest ratio (1032:1) bounds the work a small file can ask for.
"""
from __future__ import annotations

import os
import re
import struct
import zipfile
import zlib
from dataclasses import dataclass, field
from typing import BinaryIO, Dict, List, Optional, Union

from .errors import LoadError

GiB = 1 << 30
MiB = 1 << 20

#: deflate's largest expansion is about 1032:1; a member claiming more than
#: this many bytes per compressed byte (plus a little) cannot be honest
_DEFLATE_RATIO = 1100
_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
_LOCAL_MAGIC = b"PK\x03\x04"


@dataclass(frozen=True)
class Limits:
    """Bounds on an archive, checked on its central directory before any
    member is inflated. ``members``: entries; ``total_bytes``: uncompressed
    bytes of all members (each member too); ``json_bytes``: one JSON member
    (a program or a config: parsed whole)."""

    members: int = 200_000
    total_bytes: int = 64 * GiB
    json_bytes: int = 256 * MiB


DEFAULT_LIMITS = Limits()


@dataclass
class Member:
    """One entry: ``name`` (as stored), ``rel`` (below the top folder),
    ``kind`` (see the module docs; ``""`` before :func:`classify`),
    ``size`` (uncompressed) and ``compressed``."""

    name: str
    rel: str
    size: int
    compressed: int
    kind: str = ""


@dataclass
class Archive:
    """What :func:`inspect` found: ``label`` (names the file in messages),
    ``prefix`` (the top folder, ``"m/"``) and the members in directory order."""

    label: str
    prefix: str
    members: List[Member] = field(default_factory=list)

    @property
    def names(self) -> List[str]:
        return [m.name for m in self.members]

    @property
    def rels(self) -> List[str]:
        return [m.rel for m in self.members]

    def of_kind(self, kind: str) -> List[Member]:
        return [m for m in self.members if m.kind == kind]


Source = Union[str, os.PathLike, BinaryIO]


def _fmt(n: int) -> str:
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def _short(s: str, n: int = 80) -> str:
    return repr(s if len(s) <= n else s[:n] + "...")


def _data_extent(f: BinaryIO, info: zipfile.ZipInfo, label: str) -> range:
    """Where ``info``'s local header and data lie in the file."""
    f.seek(info.header_offset)
    head = f.read(_LOCAL_HEADER.size)
    if len(head) != _LOCAL_HEADER.size or head[:4] != _LOCAL_MAGIC:
        raise LoadError(f"{label}: the file is corrupt: member {_short(info.filename)} has no "
                        "local header where the zip directory says; re-save or re-copy it")
    fields = _LOCAL_HEADER.unpack(head)
    start = info.header_offset + _LOCAL_HEADER.size + fields[9] + fields[10]
    return range(info.header_offset, start + info.compress_size)


def inspect(source: Source, label: Optional[str] = None,
            limits: Limits = DEFAULT_LIMITS) -> Archive:
    """The central directory of the zip archive ``source`` (a path or a
    seekable binary file), checked as the module docs say: nothing is
    inflated. LoadError (one line) naming what is refused. A file that is
    not a zip archive at all gets ``zipfile.BadZipFile`` (the caller says
    what it is instead)."""
    label = label or str(source)
    own = isinstance(source, (str, os.PathLike))
    f = open(source, "rb") if own else source
    try:
        f.seek(0)
        with zipfile.ZipFile(f) as z:
            infos = z.infolist()
            start_dir = getattr(z, "start_dir", None)
        return _check(f, infos, start_dir, label, limits)
    finally:
        if own:
            f.close()
        else:
            f.seek(0)


def _check(f, infos, start_dir, label: str, limits: Limits) -> Archive:
    if not infos:
        raise LoadError(f"{label}: an empty zip archive, not a PyTorch file")
    if len(infos) > limits.members:
        raise LoadError(f"{label}: refused: the archive lists {len(infos)} members, more than "
                        f"the limit of {limits.members}")
    first = infos[0].filename
    prefix = first[:first.index("/") + 1] if "/" in first else ""
    seen: Dict[str, str] = {}
    total = 0
    members: List[Member] = []
    extents = []
    for info in infos:
        name = info.filename
        if info.flag_bits & 0x1:
            raise LoadError(f"{label}: refused: member {_short(name)} is encrypted")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise LoadError(f"{label}: refused: member {_short(name)} is compressed with zip "
                            f"method {info.compress_type}; PyTorch reads only stored and "
                            "deflated members")
        key = name.casefold()
        if key in seen:
            same = "the name" if seen[key] == name else f"a name that differs only in case ({_short(seen[key])})"
            raise LoadError(f"{label}: refused: the archive lists member {_short(name)} twice "
                            f"({same}); PyTorch's reader and Python's would read different "
                            "members: it may have been crafted")
        seen[key] = name
        if not prefix or not name.startswith(prefix) or name == prefix:
            raise LoadError(f"{label}: refused: member {_short(name)} is not inside the "
                            f"archive's top folder ({_short(prefix or first)}) as in every file "
                            "PyTorch writes")
        size = info.file_size
        if size > limits.total_bytes:
            raise LoadError(f"{label}: refused: member {_short(name)} would be {_fmt(size)} "
                            f"uncompressed, more than the limit of {_fmt(limits.total_bytes)}")
        if info.compress_type == zipfile.ZIP_STORED and size != info.compress_size:
            raise LoadError(f"{label}: the file is corrupt: stored member {_short(name)} says "
                            f"{size} bytes but holds {info.compress_size}")
        if info.compress_type == zipfile.ZIP_DEFLATED \
                and size > _DEFLATE_RATIO * info.compress_size + 4096:
            raise LoadError(f"{label}: refused: member {_short(name)} claims {_fmt(size)} from "
                            f"{_fmt(info.compress_size)} compressed, more than deflate can "
                            "produce: a zip bomb or a damaged file")
        total += size
        if total > limits.total_bytes:
            raise LoadError(f"{label}: refused: the archive would be more than "
                            f"{_fmt(limits.total_bytes)} uncompressed (the limit)")
        extents.append((_data_extent(f, info, label), name))
        members.append(Member(name, name[len(prefix):], size, info.compress_size))
    extents.sort(key=lambda e: e[0].start)
    end, last = 0, None
    for ext, name in extents:
        if ext.start < end:
            raise LoadError(f"{label}: refused: the data of members {_short(last)} and "
                            f"{_short(name)} overlap (a zip bomb lists one compressed stream "
                            "many times); no file PyTorch writes does that")
        end, last = ext.stop, name
    if start_dir is not None and end > start_dir:
        raise LoadError(f"{label}: refused: member {_short(last)} overlaps the zip directory")
    return Archive(label, prefix, members)


# ------------------------------------------------------------------ .pt2 members

#: what ``torch.export.save`` (torch 2.13) writes below the top folder,
#: other than programs, configs and pickles
_STAMPS = frozenset({"archive_format", "archive_version", "byteorder", "version"})
_PROGRAM = re.compile(r"models/([^/]+)\.json\Z")
_CONFIG = re.compile(r"data/(weights|constants)/[^/]*_config\.json\Z", re.IGNORECASE)
_SAMPLE = re.compile(r"data/sample_inputs/[^/]+\Z")
_PAYLOAD = re.compile(r"data/(weights|constants)/[^/]+\Z")
_EXTRA = re.compile(r"(extra/.+|\.data/[^/]+)\Z")
_COMPILED = re.compile(r"data/(aotinductor|executorch|mtia)/", re.IGNORECASE)


def classify(archive: Archive, limits: Limits = DEFAULT_LIMITS) -> Archive:
    """Give every member of a ``.pt2`` its kind (module docs), refusing one
    torch would read that no check covers, and JSON members past
    :attr:`Limits.json_bytes`. Returns ``archive``."""
    label = archive.label
    for m in archive.members:
        rel = m.rel
        if rel.startswith("models/"):
            # torch.export.load reads every member under models/ as a program,
            # dropping the name's last five characters whatever they are
            mt = _PROGRAM.match(rel)
            if not mt or not re.fullmatch(r"[A-Za-z0-9_.\-]+", mt.group(1)):
                raise LoadError(f"{label}: refused: member {_short(m.name)} is under models/, "
                                "so torch would read it as a program, but it is not named "
                                "models/<name>.json as torch.export.save names programs; it "
                                "may have been crafted to skip the checks")
            m.kind = "program"
        elif _COMPILED.match(rel):
            raise LoadError(f"{label}: refused: member {_short(m.name)} is compiled code "
                            "(an AOTInductor, ExecuTorch or MTIA package member: torch would "
                            "load it as a shared library); this tool reads exported programs "
                            "only")
        elif _CONFIG.match(rel):
            m.kind = "config"
        elif _SAMPLE.match(rel):
            m.kind = "pickle"
        elif _PAYLOAD.match(rel) or rel in _STAMPS or _EXTRA.match(rel):
            m.kind = "data"
        else:
            raise LoadError(f"{label}: refused: member {_short(m.name)} is not one "
                            "torch.export.save writes")
        if m.kind in ("program", "config") and m.size > limits.json_bytes:
            raise LoadError(f"{label}: refused: {'the program' if m.kind == 'program' else 'the config'} "
                            f"{_short(m.name)} is {_fmt(m.size)} of JSON, more than the limit of "
                            f"{_fmt(limits.json_bytes)}")
    if "models/model.json" not in archive.rels:
        raise LoadError(f"{label}: the archive holds no program models/model.json (the one "
                        "torch.export.load returns)")
    return archive


def read_all(source: Source, archive: Archive) -> None:
    """Read every member of ``archive`` (from ``source``) whole, checking its
    CRC-32; LoadError naming a damaged member."""
    label = archive.label
    try:
        with zipfile.ZipFile(source) as z:
            for info in z.infolist():
                try:
                    with z.open(info) as m:
                        while m.read(1 << 22):
                            pass
                except (zipfile.BadZipFile, zlib.error, EOFError, ValueError,
                        NotImplementedError) as e:
                    text = str(e)
                    why = ("its CRC-32 does not match its contents" if "CRC" in text
                           else (text.strip().splitlines() or [type(e).__name__])[0])
                    raise LoadError(f"{label}: the file is corrupt: member {info.filename!r} "
                                    f"is damaged ({why}); re-save or re-copy it") from None
    finally:
        if hasattr(source, "seek"):
            source.seek(0)
