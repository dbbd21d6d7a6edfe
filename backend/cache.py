"""The kernel cache, compiler side: keys, lookup, and publishing entries built once and
imported by every later process.

An entry is a folder ``<root>/<key>`` (format and runtime checks: ``tilecute.runtime.entry``;
the whole story: ``docs/cache.md``).  :func:`get_or_build` builds a missing entry in a
temporary folder inside the root, under a per-key file lock, and publishes it with one
``os.rename``; :func:`lookup` hands out an entry only after checking that it is private
and whole, and moves a damaged one aside so that it is rebuilt.

Imports the standard library, ``filelock``, ``tilecute.runtime.entry`` and
``tilecute.toolchain`` (for :func:`tool_versions`); not the rest of the compiler (the build
function brings what it needs), not CUTLASS, not torch.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import re
import secrets
import shutil
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, TypeVar

from .runtime import env_switch, native
from .runtime.entry import (
    LOCK,
    MANIFEST,
    SCHEMA,
    CacheEntryWarning,
    CacheLockTimeout,
    UnsafeCacheError,
    check_lock_folder,
    check_private,
    file_record,
    hold_lock,
    load_manifest,
    remove_stale_staging,
    try_lock,
    verify_entry,
    write_manifest,
)
from .toolchain import tool_versions

__all__ = [
    "CacheError", "CacheKeyError", "CacheEntry", "UnsafeCacheError", "CacheLockTimeout",
    "cache_root", "cache_key", "tool_versions", "lookup", "get_or_build", "published_path",
    "list_entries", "clear", "remove_stale_builds", "verify_all", "entry_path",
]

ENV_DIR = "TILECUTE_CACHE_DIR"
ENV_DISABLE = "TILECUTE_DISABLE_CACHE"
ENV_RUNTIME_DIR = native.ENV_RUNTIME_DIR

_KEY = re.compile(r"[0-9a-f]{64}\Z")
_TMP_PREFIX = ".tmp-"  # a build in progress: .tmp-<key>-<random>, made under the key's lock
_TRASH_PREFIX = ".trash-"
_LOCKS = ".locks"
# clear() removes a build folder whose name holds no key (made by an older tilecute) only
# when it is this old: a younger one may belong to a build running right now
_STALE_TMP_SECONDS = 3600.0
# the manifest fields a build function must return; the cache adds schema, key, created, files
_BUILD_FIELDS = ("function", "arch", "versions", "options", "ir", "abi")


class CacheError(Exception):
    """An expected cache failure with a message for the user (no such entry, a build that
    returned no manifest fields)."""


class CacheKeyError(CacheError):
    """A key or key prefix given by the user that names no single entry by its form: not
    hex digits, or a prefix of several keys (a usage error: ``tilecute`` exits 2)."""


T = TypeVar("T")


# --- where and what --------------------------------------------------------------------


def cache_root() -> Path:
    """The cache folder: ``$TILECUTE_CACHE_DIR``, else ``~/.cache/tilecute``.

    Created with mode 0700 when missing (and so are the parents created with it);
    refused with :class:`UnsafeCacheError` when it is not private to the current user."""
    root = Path(os.environ.get(ENV_DIR) or Path.home() / ".cache" / "tilecute").expanduser()
    if not root.is_absolute():
        root = Path.cwd() / root
    if not root.is_dir():
        _make_private_dirs(root)
    check_private(root)
    return root


_make_private_dirs = native.make_private_dirs


def cache_key(ir_json: str, arch: str, options: dict, versions: dict) -> str:
    """The entry key: sha256 (hex) of a canonical encoding (sorted-key JSON) of the
    canonical IR JSON, the target arch, the compile options and the tool versions
    (:func:`tool_versions`).  Changing any ingredient changes the key."""
    if not isinstance(ir_json, str):
        raise TypeError(f"cache_key: ir_json must be the canonical IR JSON text, got "
                        f"{type(ir_json).__name__}")
    ingredients = {"cache-schema": SCHEMA, "ir": ir_json, "arch": arch,
                   "options": options, "versions": versions}
    try:
        text = json.dumps(ingredients, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                          allow_nan=False)
    except (TypeError, ValueError) as e:
        raise TypeError(f"cache_key: options and versions must be plain JSON values "
                        f"(str, int, float, bool, None, list, dict): {e}") from None
    return hashlib.sha256(text.encode()).hexdigest()


def _check_key(key: str) -> str:
    if not isinstance(key, str) or not _KEY.match(key):
        raise ValueError(f"tilecute cache: {key!r} is not a cache key (64 lowercase hex "
                         "digits, from cache_key)")
    return key


# --- lookup and publishing -------------------------------------------------------------


def lookup(key: str) -> Optional[Path]:
    """The entry for ``key`` if it is present, private and whole, else ``None``.

    A damaged entry (a file missing, truncated or altered, a manifest that does not match)
    is reported with a :class:`~tilecute.runtime.entry.CacheEntryWarning` naming the file
    and the entry, and removed so that the next build replaces it; it is never returned.
    An entry that another user could have written raises :class:`UnsafeCacheError`."""
    return _lookup(cache_root(), _check_key(key), lock=None)


def _lookup(root: Path, key: str, lock) -> Optional[Path]:
    """``lock``: True when the caller holds the key's lock, else None (then the lock is
    taken before removing a damaged entry, so that an entry published meanwhile by another
    process is not removed in its place)."""
    path = root / key
    if not os.path.lexists(path):
        return None
    if not path.is_dir() or path.is_symlink():
        problems = [f"{key}: not a folder"]
    else:
        try:
            check_private(path, recursive=True)
        except FileNotFoundError:  # removed meanwhile (tilecute cache clear)
            return None
        problems = _entry_problems(path, key)
    if not problems:
        return path
    if lock is None:
        with _key_lock(root, key, f"checking the damaged entry {key[:12]}"):
            return _lookup(root, key, lock=True)
    if path.is_dir() and not path.is_symlink():
        # a process producing a lazy artifact holds the entry's own lock between moving
        # the file in and recording it in the manifest: look again once it is done
        with hold_lock(path / LOCK, f"checking the damaged entry {key[:12]}"):
            problems = _entry_problems(path, key)
        if not problems:
            return path
    warnings.warn(f"tilecute cache: entry {path} is damaged ({'; '.join(problems)}); "
                  "removing it so that it is rebuilt", CacheEntryWarning, stacklevel=2)
    _remove(path)
    return None


def _entry_problems(path: Path, key: Optional[str]) -> list[str]:
    problems = verify_entry(path)
    if problems or key is None:
        return problems
    recorded = load_manifest(path).get("key")
    if recorded != key:
        return [f"{MANIFEST}: records key {recorded!r}, not the folder's key"]
    return []


def cache_disabled() -> bool:
    """``TILECUTE_DISABLE_CACHE`` set to a value other than empty, 0, false, no or off (the
    false values every tilecute switch takes)."""
    return env_switch(ENV_DISABLE, False)


def get_or_build(key: str, build: Callable[[Path], dict],
                 use: Optional[Callable[[Path], T]] = None):
    """The entry folder for ``key``, built by ``build`` if the cache has none; with
    ``use``, the result of ``use(folder)`` instead.

    ``build(folder)`` writes the entry's artifacts into ``folder`` (an empty private
    temporary folder inside the cache root, published as :func:`published_path`) and
    returns the manifest fields ``function``, ``arch``, ``versions``, ``options``, ``ir``
    (object or JSON text) and ``abi``.  The cache then writes ``manifest.json`` with the
    sha256 and size of every file and publishes the folder with one ``os.rename`` to
    ``<root>/<key>``.  A per-key file lock makes concurrent processes build a key once; the
    others wait and reuse the entry.  A failing build leaves nothing behind and its
    exception propagates.

    ``use(folder)`` runs under the key's lock, so what it reads from the entry (``Kernel``
    imports ``host.py``) is not removed under it by ``tilecute cache clear``, which takes
    the same lock.  Waiting for the lock ends after ``TILECUTE_LOCK_TIMEOUT`` seconds
    with a :class:`CacheLockTimeout` naming the holder's pid.

    With ``TILECUTE_DISABLE_CACHE=1`` nothing is looked up or published: the entry is
    built into a fresh temporary folder outside the cache (removed at exit) and returned.
    """
    _check_key(key)
    if cache_disabled():
        folder = Path(tempfile.mkdtemp(prefix=f"tilecute-{key[:12]}-"))
        atexit.register(shutil.rmtree, folder, True)
        _build_into(folder, key, build)
        return use(folder) if use is not None else folder
    root = cache_root()
    path = _lookup(root, key, lock=None)
    if path is not None and use is None:
        return path
    with _key_lock(root, key, f"building or loading entry {key[:12]}"):
        if path is None or not path.is_dir():  # a miss, or removed since the lookup
            path = _lookup(root, key, lock=True)
        if path is None:  # else another process built it while we waited for the lock
            tmp = Path(tempfile.mkdtemp(dir=root, prefix=f"{_TMP_PREFIX}{key}-"))
            try:
                _build_into(tmp, key, build)
                os.rename(tmp, root / key)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            path = root / key
        return use(path) if use is not None else path


def launcher_runtime_folder() -> Optional[Path]:
    """Where the launcher runtime is compiled once per toolchain and linked from by every
    launcher (``tilecute.toolchain.launcher_runtime_object``), and the kernels' call path
    beside it: ``$TILECUTE_LAUNCHER_RUNTIME_DIR``, else ``~/.cache/tilecute/.launcher-runtime``
    -- the default cache root's, whatever ``TILECUTE_CACHE_DIR`` says, so that many cache
    roots (a test suite's, a tuner's fresh folders) share one (``runtime.native``).  None when
    it cannot be made private."""
    return native.runtime_folder()


def published_path(key: str, folder: Path) -> Path:
    """Where the folder that :func:`get_or_build` handed to a build function for ``key``
    is published: ``<root>/<key>`` for a build folder in the cache, the folder itself with
    ``TILECUTE_DISABLE_CACHE``.  A build writes it into what must name the entry's files
    later (the launcher's source path, which its error tracebacks show)."""
    folder = Path(folder)
    if folder.name.startswith(f"{_TMP_PREFIX}{key}-"):
        return folder.parent / key
    return folder


def _build_into(folder: Path, key: str, build: Callable[[Path], dict]) -> None:
    fields = build(folder)
    if not isinstance(fields, dict):
        raise CacheError(f"tilecute cache: the build function returned "
                         f"{type(fields).__name__}, not the manifest fields {_BUILD_FIELDS}")
    missing = [f for f in ("function", "arch") if f not in fields]
    if missing:
        raise CacheError(f"tilecute cache: the build function returned no {missing} "
                         f"(manifest fields: {_BUILD_FIELDS})")
    manifest = {"versions": {}, "options": {}, "ir": None, "abi": None, **fields}
    if isinstance(manifest["ir"], str):
        manifest["ir"] = json.loads(manifest["ir"])
    manifest.update(schema=SCHEMA, key=key, created=time.time(), files=_record_files(folder))
    write_manifest(folder, manifest)


def _record_files(folder: Path) -> dict:
    """sha256 and size of every artifact under ``folder`` (names starting with ``.`` are
    bookkeeping, not artifacts); group/world write bits are dropped on the way."""
    files = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for fname in sorted(filenames):
            if fname.startswith(".") or (dirpath == str(folder) and fname == MANIFEST):
                continue
            file = Path(dirpath) / fname
            mode = file.stat().st_mode & 0o7777
            if mode & 0o022:
                os.chmod(file, mode & ~0o022)
            files[file.relative_to(folder).as_posix()] = file_record(file)
    return files


def _key_lock(root: Path, key: str, what: str):
    """The key's lock (``<root>/.locks/<key>.lock``) as a context manager; ``.locks`` is
    checked first (a real folder, private), since a lock file is created and written."""
    locks = _lock_folder(root)
    return hold_lock(locks / f"{key}.lock", what)


def _lock_folder(root: Path) -> Path:
    locks = root / _LOCKS
    if not os.path.lexists(locks):
        _make_private_dirs(locks)
    check_lock_folder(locks)
    return locks


def _remove(path: Path) -> bool:
    """Move ``path`` aside (one rename, so no reader sees it half deleted), then delete it.
    False if it was already gone."""
    trash = path.parent / f"{_TRASH_PREFIX}{path.name[:16]}-{secrets.token_hex(6)}"
    try:
        os.rename(path, trash)
    except FileNotFoundError:
        return False
    if trash.is_dir() and not trash.is_symlink():
        shutil.rmtree(trash, ignore_errors=True)
    else:
        trash.unlink()
    return True


# --- helpers for the CLI -----------------------------------------------------------------


@dataclass(frozen=True)
class CacheEntry:
    """One entry as ``tilecute cache ls`` shows it."""

    key: str
    function: str
    arch: str
    size: int  # bytes, all files of the folder
    age: float  # seconds since it was built
    path: Path


def _entry_folders(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if _KEY.match(p.name) and p.is_dir())


def list_entries() -> list[CacheEntry]:
    """Every entry of the cache, oldest first."""
    now = time.time()
    entries = []
    for path in _entry_folders(cache_root()):
        try:
            manifest = load_manifest(path)
        except (OSError, ValueError):
            manifest = {}
        created = manifest.get("created")
        if not isinstance(created, (int, float)):
            created = path.stat().st_mtime
        entries.append(CacheEntry(key=path.name, function=str(manifest.get("function", "?")),
                                  arch=str(manifest.get("arch", "?")), size=_folder_size(path),
                                  age=max(0.0, now - created), path=path))
    return sorted(entries, key=lambda e: -e.age)


def _folder_size(folder: Path) -> int:
    total = 0
    for dirpath, _, filenames in os.walk(folder):
        for fname in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, fname)).st_size
            except FileNotFoundError:
                pass
    return total


def clear(older_than_seconds: Optional[float] = None) -> list[str]:
    """Remove every entry (or those built more than ``older_than_seconds`` ago); returns
    the removed keys.  Each is removed under its key's lock, so a process loading it right
    now (``tilecute.compile``) finishes first; processes that already loaded an entry keep
    working.  Leftovers of killed processes go too: removals in progress, build folders
    whose key's lock is free (their builder is dead), and staging folders of lazy artifacts
    in the entries that stay."""
    root = cache_root()
    removed = []
    for e in list_entries():
        if older_than_seconds is not None and e.age <= older_than_seconds:
            try:
                remove_stale_staging(e.path)
            except FileNotFoundError:  # removed meanwhile
                pass
            continue
        with _key_lock(root, e.key, f"removing entry {e.key[:12]}"):
            if _remove(root / e.key):
                removed.append(e.key)
    remove_stale_builds(older_than_seconds)
    return removed


def remove_stale_builds(older_than_seconds: Optional[float] = None) -> int:
    """Remove what killed processes left in the cache root: removals in progress, and build
    folders (``.tmp-<key>-*``) whose key's lock is free (their builder is dead: the lock
    died with it); returns how many.  A build folder whose name holds no key (an older
    tilecute's) goes only when older than an hour (and ``older_than_seconds``)."""
    root = cache_root()
    now, n = time.time(), 0
    for p in root.iterdir():
        if p.name.startswith(_TRASH_PREFIX):
            shutil.rmtree(p, ignore_errors=True)
            n += 1
        elif p.name.startswith(_TMP_PREFIX):
            key = p.name[len(_TMP_PREFIX):len(_TMP_PREFIX) + 64]
            if _KEY.match(key) and p.name[len(_TMP_PREFIX) + 64:].startswith("-"):
                with try_lock(_lock_folder(root) / f"{key}.lock") as free:
                    if free:
                        shutil.rmtree(p, ignore_errors=True)
                        n += 1
                continue
            try:
                stale = now - p.stat().st_mtime > max(_STALE_TMP_SECONDS, older_than_seconds or 0)
            except FileNotFoundError:
                continue
            if stale:
                shutil.rmtree(p, ignore_errors=True)
                n += 1
    return n


def verify_all() -> dict[str, list[str]]:
    """Every entry's key with the problems found in it (an empty list when it is whole).
    Reports only: nothing is removed (a damaged entry is rebuilt on its next lookup)."""
    result = {}
    for path in _entry_folders(cache_root()):
        try:
            check_private(path, recursive=True)
        except UnsafeCacheError as e:
            result[path.name] = [str(e)]
            continue
        problems = _entry_problems(path, path.name)
        if problems:  # once more after a lazy artifact being published (moved in, not yet
            try:      # recorded) is done; a read-only cache or a stuck lock: report as found
                with hold_lock(path / LOCK, f"verifying entry {path.name[:12]}"):
                    problems = _entry_problems(path, path.name)
            except OSError:
                pass
        result[path.name] = problems
    return result


def entry_path(key: str) -> Path:
    """The folder of the entry whose key is ``key`` or starts with it (like git, a unique
    prefix is enough).  :class:`CacheError` when none matches, :class:`CacheKeyError` when
    ``key`` is not hex digits or several entries match."""
    if not key or not re.fullmatch(r"[0-9a-f]{1,64}", key):
        raise CacheKeyError(f"{key!r} is not a cache key or key prefix (lowercase hex digits)")
    matches = [p for p in _entry_folders(cache_root()) if p.name.startswith(key)]
    if not matches:
        raise CacheError(f"no cache entry matches {key!r}")
    if len(matches) > 1:
        raise CacheKeyError(f"{key!r} is ambiguous: it matches {len(matches)} entries ("
                         + ", ".join(p.name[:12] for p in matches[:5])
                         + (", ..." if len(matches) > 5 else "") + ")")
    return matches[0]
