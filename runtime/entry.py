"""Cache entries as the runtime sees them: the manifest, the safety checks, verification,
the cache's file locks (waits that end, naming the holder), the lazy-artifact protocol (how
``kernel.cubin`` joins an entry on first use), and importing an entry's generated modules
from their source, without bytecode files.

An entry is a folder holding the artifacts of one compiled kernel under fixed names
(``manifest.json``, ``host.py``, ``kernel_cute.py``, ``launcher.cpp``, ``launcher.so``,
``abi.json``, ``ir.json``, later ``kernel.cubin``).  ``manifest.json`` records the sha256
and size of every artifact; names starting with ``.`` are bookkeeping (locks, staging
folders, temporary manifests) and never artifacts.

Generated host modules import this module at run time, so it imports the standard library
only (``filelock`` lazily, inside :func:`hold_lock`): never CUTLASS, torch, jinja2 or
tilecute's compiler.  The compiler side of the cache is ``tilecute.cache``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import shutil
import stat
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional, Union

MANIFEST = "manifest.json"
SCHEMA = 1
LOCK = ".lock"  # the entry's lock file, taken by publish_artifact
STAGING_PREFIX = ".staging-"  # publish_artifact's private folders, used under LOCK only
ENV_LOCK_TIMEOUT = "TILECUTE_LOCK_TIMEOUT"
# how long a process waits for a cache lock before it reports the holder (seconds): far
# above a real build (launcher ~3 s, a large cubin a minute), far below "forever"
DEFAULT_LOCK_TIMEOUT = 600.0

PathLike = Union[str, "os.PathLike[str]"]

_HASH_CHUNK = 1 << 20


class UnsafeCacheError(PermissionError):
    """A cache folder (or a file in it) that another user could have written.  Importing a
    generated module from it would run their code, so tilecute refuses it."""


class CacheEntryWarning(RuntimeWarning):
    """A damaged cache entry or artifact was found; it is rebuilt, never used."""


class CacheLockTimeout(TimeoutError):
    """A cache lock stayed held longer than ``TILECUTE_LOCK_TIMEOUT``; the message names
    the lock file and the process holding it."""


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


def check_private(path: PathLike, recursive: bool = False) -> None:
    """Refuse ``path`` unless it is a folder owned by the current user that neither its
    group nor others can write, and the same holds for each regular file directly in it.
    With ``recursive`` (an entry: importing or loading anything from it) every subfolder
    is held to the same rules, and so are the files in it; a bookkeeping folder directly in
    the entry (a name starting with ``.``, e.g. ``.staging-*``) is checked as a folder, not
    its content, which tilecute never reads.

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
    _check_contents(path, path, uid, recursive)


def _check_contents(top: Path, folder: Path, uid: int, recursive: bool) -> None:
    with os.scandir(folder) as it:
        items = list(it)
    for item in items:
        try:
            is_dir = item.is_dir()  # follows links, as the checks below do
            if not (is_dir and recursive) and not item.is_file():
                continue
            st = item.stat()
        except FileNotFoundError:  # removed meanwhile (a lock, a temporary manifest)
            continue
        reason = _unsafe_reason(Path(item.path), st, uid)
        if reason:
            what = "folder" if is_dir else "file"
            raise UnsafeCacheError(
                f"tilecute cache: refusing {str(top)!r}: its {what} "
                f"{Path(item.path).relative_to(top).as_posix()!r}: {reason}")
        if is_dir and not (folder == top and item.name.startswith(".")):
            if item.is_symlink():
                raise UnsafeCacheError(
                    f"tilecute cache: refusing {str(top)!r}: its folder {item.name!r} is a "
                    "symbolic link (an entry holds its own files only)")
            try:
                _check_contents(top, Path(item.path), uid, recursive)
            except FileNotFoundError:
                continue


def check_lock_folder(path: PathLike) -> None:
    """Refuse the lock folder ``path`` (the cache's ``.locks``) unless it is a real folder,
    not a symbolic link, owned by the current user and writable by no one else: a lock file
    is created and written, so a folder someone else controls could point that write at
    any of the user's files.  The lock files in it are not checked one by one (there is
    one per key ever built); ``filelock`` opens them with ``O_NOFOLLOW``."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"tilecute cache: {str(path)!r} does not exist") from None
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeCacheError(f"tilecute cache: refusing the lock folder {str(path)!r}: it is "
                               "a symbolic link; remove it (tilecute recreates it)")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeCacheError(f"tilecute cache: refusing the lock folder {str(path)!r}: it "
                               "is not a folder")
    reason = _unsafe_reason(path, st, os.getuid())
    if reason:
        raise UnsafeCacheError(f"tilecute cache: refusing the lock folder {str(path)!r}: {reason}")


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
    artifacts to check (default: every file the manifest lists, and then the entry holds
    nothing else: a file or folder the manifest does not list, a planted
    ``__pycache__/host.*.pyc`` say, is a problem too).  An empty list means the entry is
    whole.  Sizes are compared before any hashing, so a truncated file costs one
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
    if files is None:
        problems += _unrecorded(path, recorded)
    return problems


def _unrecorded(path: Path, recorded: dict) -> list[str]:
    """What the entry holds besides its manifest, its recorded artifacts and its
    bookkeeping (names starting with ``.`` directly in it), one problem per item."""
    folders = {p for name in recorded for p in Path(name).parents if p != Path(".")}
    problems = []
    for dirpath, dirnames, filenames in os.walk(path):
        here = Path(dirpath).relative_to(path)
        if here == Path("."):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            filenames = [f for f in filenames if not f.startswith(".") and f != MANIFEST]
        for d in sorted(dirnames):
            if here / d not in folders or os.path.islink(os.path.join(dirpath, d)):
                count = sum(len(fs) for _, _, fs in os.walk(os.path.join(dirpath, d)))
                problems.append(f"{(here / d).as_posix()}/: a folder the manifest does not list "
                                f"({count} file{'' if count == 1 else 's'}); an entry holds "
                                "only its recorded artifacts")
        dirnames[:] = sorted(d for d in dirnames if here / d in folders
                             and not os.path.islink(os.path.join(dirpath, d)))
        for f in sorted(filenames):
            name = (here / f).as_posix()
            if name not in recorded:
                problems.append(f"{name}: not recorded in the manifest; an entry holds only its "
                                "recorded artifacts")
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


# --- locks -----------------------------------------------------------------------------


def lock_timeout() -> float:
    """Seconds a process waits for a cache lock: ``$TILECUTE_LOCK_TIMEOUT``, else 600."""
    text = os.environ.get(ENV_LOCK_TIMEOUT, "")
    try:
        value = float(text) if text else DEFAULT_LOCK_TIMEOUT
    except ValueError:
        raise ValueError(f"{ENV_LOCK_TIMEOUT}={text!r} is not a number of seconds") from None
    if not value >= 0:
        raise ValueError(f"{ENV_LOCK_TIMEOUT}={text!r}: the wait must be 0 seconds or more")
    return value


@contextlib.contextmanager
def hold_lock(lock_file: PathLike, what: str, timeout: Optional[float] = None) -> Iterator[None]:
    """Hold the file lock ``lock_file`` (``filelock``, an OS lock released if its holder
    dies) for the ``with`` block.  ``what`` says what it guards, for the message of the
    :class:`CacheLockTimeout` raised after ``timeout`` seconds (default
    :func:`lock_timeout`), which names the holder's pid and whether it is stopped."""
    from filelock import FileLock, Timeout

    wait = lock_timeout() if timeout is None else timeout
    lock = FileLock(str(lock_file), mode=0o600, timeout=wait)
    try:
        lock.acquire()
    except Timeout:
        raise CacheLockTimeout(_lock_timeout_message(Path(lock_file), what, wait)) from None
    try:
        yield
    finally:
        lock.release()


@contextlib.contextmanager
def try_lock(lock_file: PathLike) -> Iterator[bool]:
    """``with try_lock(f) as held:`` takes the lock only if it is free right now."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(lock_file), mode=0o600, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


def _lock_timeout_message(lock_file: Path, what: str, wait: float) -> str:
    pid = lock_holder(lock_file)
    if pid is None:
        holder = "another process (its pid is not known here)"
        advice = "if a tilecute process is stopped or hung, end it"
    else:
        state = _process_state(pid)
        holder = f"pid {pid}" + (f" ({state})" if state else "")
        advice = (f"that process is stopped: resume it (kill -CONT {pid}) or end it"
                  if state == "stopped" else f"if pid {pid} is hung, end it (kill {pid})")
    return (f"tilecute cache: waited {wait:g} s for the lock {str(lock_file)!r} ({what}), "
            f"held by {holder}; {advice}, or set {ENV_LOCK_TIMEOUT} (seconds) to wait longer")


def lock_holder(lock_file: PathLike) -> Optional[int]:
    """The pid of the process holding the ``flock`` on ``lock_file``, from ``/proc/locks``
    (Linux); None where that cannot be told."""
    try:
        st = os.stat(lock_file)
        with open("/proc/locks") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    exact, same_inode = [], []
    for line in lines:
        # "1: FLOCK  ADVISORY  WRITE 9465 fe:00:2146577 0 EOF"; waiters are "1: -> FLOCK ..."
        fields = line.split()
        if len(fields) < 6 or fields[1] != "FLOCK" or not fields[4].isdigit():
            continue
        if fields[5] == device:
            exact.append(int(fields[4]))
        elif fields[5].rsplit(":", 1)[-1] == str(st.st_ino):  # overlay file systems
            same_inode.append(int(fields[4]))
    found = exact or same_inode
    return found[0] if len(set(found)) == 1 else None


def _process_state(pid: int) -> Optional[str]:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None
    return {"T": "stopped", "t": "stopped", "Z": "a zombie", "D": "in uninterruptible I/O"}.get(state)


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
    works); one that does not match is warned about and produced again.  Staging folders
    that a killed process left behind are removed under the lock (only the lock's holder
    uses one, so every other one is dead).
    """
    entry = Path(entry)
    if "/" in name or not _is_plain_relative(name) or name.startswith(".") or name == MANIFEST:
        raise ValueError(f"publish_artifact: {name!r} is not a plain artifact file name")
    target = entry / name
    if _artifact_ok(entry, name):
        return target
    check_private(entry, recursive=True)
    with hold_lock(entry / LOCK, f"producing {name} in {entry}"):
        _remove_staging(entry)
        manifest = load_manifest(entry)
        record = manifest["files"].get(name)
        if record is not None and _check_file(target, record) is None:
            return target  # another thread or process produced it while we waited
        if record is not None or target.exists():
            problem = _check_file(target, record) if record else "not recorded in the manifest"
            warnings.warn(f"tilecute cache: {name} in {entry} does not match its manifest "
                          f"({problem}); producing it again", CacheEntryWarning, stacklevel=2)
        staging = tempfile.mkdtemp(dir=entry, prefix=STAGING_PREFIX)
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


def remove_stale_staging(entry: PathLike) -> int:
    """Remove the staging folders a killed process left in ``entry``, if no process is
    producing an artifact there right now (the entry's lock is free); returns how many."""
    entry = Path(entry)
    if not any(p.name.startswith(STAGING_PREFIX) for p in entry.iterdir()):
        return 0
    with try_lock(entry / LOCK) as held:
        return _remove_staging(entry) if held else 0


def _remove_staging(entry: Path) -> int:
    """Under the entry's lock: every staging folder is a dead process's."""
    stale = [p for p in entry.iterdir() if p.name.startswith(STAGING_PREFIX)]
    for p in stale:
        shutil.rmtree(p, ignore_errors=True)
    return len(stale)


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


# --- importing generated modules -------------------------------------------------------


class _SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Compiles the source file every time: never reads a ``__pycache__/*.pyc`` (one
    planted in an entry would run instead of the checked source) and never writes one
    (an entry holds only the files its manifest lists).  ``get_source`` still works, so
    ``inspect`` (which CuTe DSL uses to read kernels) finds the text."""

    def get_code(self, fullname):
        return self.source_to_code(self.get_data(self.path), self.path)


def import_source(path: PathLike, name: str, register: bool = False):
    """Import the Python file ``path`` as module ``name`` without bytecode files.
    ``register``: leave it in ``sys.modules`` (otherwise it is there only while it runs,
    for ``inspect``)."""
    path = str(path)
    spec = importlib.util.spec_from_file_location(name, path, loader=_SourceOnlyLoader(name, path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    if not register:
        sys.modules.pop(name, None)
    return module
