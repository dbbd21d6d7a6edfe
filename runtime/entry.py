"""Cache entries as the runtime sees them: the manifest, the safety check, verification,
and the lazy-artifact protocol (how ``kernel.cubin`` joins an entry on first use).

An entry is a folder holding the artifacts of one compiled kernel under fixed names
(``manifest.json``, ``host.py``, ``kernel_cute.py``, ``launcher.cpp``, ``launcher.so``,
``abi.json``, ``ir.json``, later ``kernel.cubin``).  ``manifest.json`` records the sha256
and size of every artifact; names starting with ``.`` are bookkeeping (locks, staging
folders, temporary manifests) and never artifacts.

Generated host modules import this module at run time, so it imports the standard library
only (``filelock`` lazily, inside :func:`publish_artifact`): never CUTLASS, torch, jinja2
or tilecute's compiler.  The compiler side of the cache is ``tilecute.cache``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
import warnings
from pathlib import Path
from typing import Callable, Iterable, Optional, Union

MANIFEST = "manifest.json"
SCHEMA = 1
LOCK = ".lock"  # the entry's lock file, taken by publish_artifact

PathLike = Union[str, "os.PathLike[str]"]

_HASH_CHUNK = 1 << 20


class UnsafeCacheError(PermissionError):
    """A cache folder (or a file in it) that another user could have written.  Importing a
    generated module from it would run their code, so tilecute refuses it."""


class CacheEntryWarning(RuntimeWarning):
    """A damaged cache entry or artifact was found; it is rebuilt, never used."""


# --- safety ----------------------------------------------------------------------------


def _unsafe_reason(path: Path, st: os.stat_result, uid: int) -> Optional[str]:
    if st.st_uid != uid:
        return (f"it is owned by uid {st.st_uid}, not by the current user (uid {uid}); "
                "a cache folder and its files must belong to the user who imports from it")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        who = "group- and world-" if st.st_mode & stat.S_IWGRP and st.st_mode & stat.S_IWOTH \
            else "group-" if st.st_mode & stat.S_IWGRP else "world-"
        return (f"it is {who}writable (mode {stat.S_IMODE(st.st_mode):04o}); a cache folder "
                f"and its files must be writable by their owner only (chmod go-w {str(path)!r})")
    return None


def check_private(path: PathLike) -> None:
    """Refuse ``path`` unless it is a folder owned by the current user that neither its
    group nor others can write, and the same holds for each regular file directly in it.

    Raises :class:`UnsafeCacheError` naming the path and the rule.  Called on the cache
    root and on every entry before anything is imported or loaded from it: importing a
    generated module is running its code.  Symbolic links are followed: what counts is
    the folder or file that would be read.
    """
    path = Path(path)
    uid = os.getuid()
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"tilecute cache: {str(path)!r} does not exist") from None
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeCacheError(f"tilecute cache: refusing {str(path)!r}: it is not a folder")
    reason = _unsafe_reason(path, st, uid)
    if reason:
        raise UnsafeCacheError(f"tilecute cache: refusing folder {str(path)!r}: {reason}")
    with os.scandir(path) as it:
        for item in it:
            try:
                if not item.is_file():  # follows links: a link to a file is checked too
                    continue
                fst = item.stat()
            except FileNotFoundError:  # removed meanwhile (a lock, a temporary manifest)
                continue
            reason = _unsafe_reason(Path(item.path), fst, uid)
            if reason:
                raise UnsafeCacheError(
                    f"tilecute cache: refusing {str(path)!r}: its file {item.name!r}: {reason}")


# --- manifest --------------------------------------------------------------------------


def load_manifest(path: PathLike) -> dict:
    """The parsed ``manifest.json`` of the entry folder ``path``.

    Raises ``FileNotFoundError`` when there is none and ``ValueError`` when it is not a
    manifest this tilecute wrote: bad JSON, another schema, no ``files`` table, a
    ``manifest_sha256`` that does not match the other fields, or text that differs from
    the canonical form :func:`write_manifest` writes (so no byte of it can change unseen).
    """
    file = Path(path) / MANIFEST
    with open(file, "rb") as f:
        raw = f.read()
    try:
        manifest = json.loads(raw)
    except ValueError as e:
        raise ValueError(f"{file}: not valid JSON ({e})") from None
    if not isinstance(manifest, dict):
        raise ValueError(f"{file}: not a JSON object")
    if manifest.get("schema") != SCHEMA:
        raise ValueError(f"{file}: manifest schema {manifest.get('schema')!r}, this tilecute "
                         f"reads schema {SCHEMA}")
    if not isinstance(manifest.get("files"), dict):
        raise ValueError(f"{file}: no 'files' table")
    if manifest.get("manifest_sha256") != _manifest_digest(manifest):
        raise ValueError(f"{file}: manifest_sha256 does not match the manifest's content")
    if raw != _manifest_text(manifest).encode():
        raise ValueError(f"{file}: not in the canonical form tilecute writes (edited?)")
    return manifest


def _manifest_digest(manifest: dict) -> str:
    body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _manifest_text(manifest: dict) -> str:
    return json.dumps(manifest, indent=1, sort_keys=True, ensure_ascii=True, allow_nan=False) + "\n"


def write_manifest(path: PathLike, manifest: dict) -> None:
    """Write ``manifest`` as the entry's ``manifest.json`` atomically: a temporary file in
    the entry, then ``os.replace``, so a reader sees the old manifest or the new one.
    ``manifest_sha256`` (the sha256 of the other fields) is set here."""
    path = Path(path)
    manifest["manifest_sha256"] = _manifest_digest(manifest)
    text = _manifest_text(manifest)
    fd, tmp = tempfile.mkstemp(dir=path, prefix=".manifest-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path / MANIFEST)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def file_record(file: PathLike) -> dict:
    """``{"sha256": hex, "size": bytes}`` of one file, as the manifest records it."""
    with open(file, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        return {"sha256": _sha256(f), "size": size}


def _sha256(f) -> str:
    if hasattr(hashlib, "file_digest"):  # Python 3.11+: hashes in C without copies
        return hashlib.file_digest(f, "sha256").hexdigest()
    h = hashlib.sha256()
    buf = bytearray(_HASH_CHUNK)
    view = memoryview(buf)
    while True:
        n = f.readinto(buf)
        if not n:
            break
        h.update(view[:n])
    return h.hexdigest()


def _is_plain_relative(name: str) -> bool:
    parts = name.split("/")
    return bool(name) and not name.startswith("/") and all(p not in ("", ".", "..") for p in parts)


# --- verification ----------------------------------------------------------------------


def verify_entry(path: PathLike, files: Optional[Iterable[str]] = None) -> list[str]:
    """Problems found in the entry ``path``, one string per problem, each naming its file:
    a missing file, a size or sha256 that differs from the manifest.  ``files``: the
    artifacts to check (default: every file the manifest lists).  An empty list means the
    entry is whole.  Sizes are compared before any hashing, so a truncated file costs one
    ``stat``."""
    path = Path(path)
    try:
        manifest = load_manifest(path)
    except FileNotFoundError:
        return [f"{MANIFEST}: missing"]
    except (OSError, ValueError) as e:
        return [f"{MANIFEST}: unreadable: {e}"]
    recorded = manifest["files"]
    problems = []
    for name in (sorted(recorded) if files is None else files):
        record = recorded.get(name)
        if not isinstance(record, dict) or "sha256" not in record or "size" not in record:
            problems.append(f"{name}: not recorded in the manifest")
            continue
        if not _is_plain_relative(name):
            problems.append(f"{name}: not a relative path inside the entry")
            continue
        problem = _check_file(path / name, record)
        if problem:
            problems.append(f"{name}: {problem}")
    return problems


def _check_file(file: Path, record: dict) -> Optional[str]:
    try:
        with open(file, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size != record["size"]:
                return f"size {size} bytes, the manifest records {record['size']}"
            digest = _sha256(f)
    except FileNotFoundError:
        return "missing"
    except IsADirectoryError:
        return "is a folder, not a file"
    if digest != record["sha256"]:
        return f"sha256 {digest[:16]}... differs from the manifest's {str(record['sha256'])[:16]}..."
    return None


# --- lazy artifacts --------------------------------------------------------------------


def publish_artifact(entry: PathLike, name: str, produce: Callable[[str], object]) -> Path:
    """The path of the artifact ``name`` of ``entry``, produced first if the entry has no
    valid one yet (the protocol behind ``kernel.cubin`` on a kernel's first call).

    ``produce(staging_dir)`` must write the file ``name`` into ``staging_dir``, a private
    folder created inside the entry.  Under the entry's file lock (``<entry>/.lock``) the
    file is moved into place with ``os.replace`` and its sha256 and size are recorded in
    the manifest (rewritten atomically), so concurrent threads and processes produce it
    once and a reader never sees a partial file.  An artifact that is present and matches
    the manifest is returned without taking the lock (a read-only entry with its cubin
    works); one that does not match is warned about and produced again.
    """
    entry = Path(entry)
    if "/" in name or not _is_plain_relative(name) or name.startswith(".") or name == MANIFEST:
        raise ValueError(f"publish_artifact: {name!r} is not a plain artifact file name")
    target = entry / name
    if _artifact_ok(entry, name):
        return target
    check_private(entry)
    from filelock import FileLock

    with FileLock(str(entry / LOCK), mode=0o600):
        manifest = load_manifest(entry)
        record = manifest["files"].get(name)
        if record is not None and _check_file(target, record) is None:
            return target  # another thread or process produced it while we waited
        if record is not None or target.exists():
            problem = _check_file(target, record) if record else "not recorded in the manifest"
            warnings.warn(f"tilecute cache: {name} in {entry} does not match its manifest "
                          f"({problem}); producing it again", CacheEntryWarning, stacklevel=2)
        staging = tempfile.mkdtemp(dir=entry, prefix=".staging-")
        try:
            produce(staging)
            produced = Path(staging) / name
            if not produced.is_file():
                raise RuntimeError(f"tilecute: producing {name} for {entry} wrote no file "
                                   f"{name!r} into the staging folder")
            _drop_group_other_write(produced)
            new_record = file_record(produced)
            os.replace(produced, target)
            manifest["files"][name] = new_record
            write_manifest(entry, manifest)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


def _artifact_ok(entry: Path, name: str) -> bool:
    try:
        record = load_manifest(entry)["files"].get(name)
    except (OSError, ValueError):
        return False
    return record is not None and _check_file(entry / name, record) is None


def _drop_group_other_write(file: Path) -> None:
    # a umask of 002 leaves new files group-writable, which check_private refuses
    mode = stat.S_IMODE(os.stat(file).st_mode)
    if mode & 0o022:
        os.chmod(file, mode & ~0o022)
