"""Every file hloscope writes, written whole or not at all.

A file is written to a temporary file in the same folder and renamed into
place (`os.replace`, atomic on POSIX and Windows), so a killed process, a full
disk or a failed render never leaves an empty or truncated file where the
previous one was: the reader sees the old file or the new one.  A failure
raises `HloscopeError` naming the path and the cause (the CLI prints it and
exits 2); the temporary file is removed.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from ._errors import HloscopeError

__all__ = ["atomic_path", "locked", "write_bytes", "write_text"]


def _write_error(path: str, e: OSError) -> HloscopeError:
    cause = e.strerror or str(e)
    hint = {errno.ENOSPC: "the disk is full: free some space or write elsewhere",
            errno.EDQUOT: "the disk quota is used up: free some space or write elsewhere",
            errno.EACCES: "no permission to write there: choose another path",
            errno.EROFS: "the file system is read-only: choose another path",
            errno.ENOENT: "the folder does not exist: create it or choose another path",
            errno.EISDIR: "that is a folder: give a file name"}.get(e.errno or 0, "")
    return HloscopeError(f"cannot write {path}: {cause}", hint=hint)


def _mode(path: str) -> int:
    """The permissions the file would get if opened plainly (or keeps, if it exists)."""
    try:
        return os.stat(path).st_mode & 0o777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[str]:
    """A temporary path beside `path` to write to; renamed to `path` when the block
    succeeds, removed when it fails."""
    target = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(target))
    if os.path.isdir(target):
        raise _write_error(target, IsADirectoryError(errno.EISDIR, "is a folder", target))
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".part",
                                   dir=folder)
        os.close(fd)
    except OSError as e:
        raise _write_error(target, e) from None
    try:
        yield tmp
        os.chmod(tmp, _mode(target))
        os.replace(tmp, target)
    except OSError as e:
        _remove(tmp)
        raise _write_error(target, e) from None
    except BaseException:
        _remove(tmp)
        raise


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def write_bytes(path: str | os.PathLike[str], data: bytes) -> str:
    """Write `data` to `path` atomically; returns the path."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    return os.fspath(path)


def write_text(path: str | os.PathLike[str], text: str) -> str:
    """Write `text` (UTF-8) to `path` atomically; returns the path."""
    return write_bytes(path, text.encode("utf-8"))


@contextmanager
def locked(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive lock tied to `path` (a ``.lock`` file beside it) for a
    read-modify-write, so that processes adding rows to one file at once lose none.
    Where the platform has no `fcntl`, the block runs unlocked."""
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks through fcntl
        yield
        return
    target = os.fspath(path)
    lock = os.path.join(os.path.dirname(os.path.abspath(target)),
                        f".{os.path.basename(target)}.lock")
    while True:
        try:
            os.makedirs(os.path.dirname(lock), exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as e:
            raise _write_error(target, e) from None
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            same = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the holder before us removed that file: lock the new one
    try:
        yield
    finally:
        # Removed while still held (no lock file is left beside the user's file); a
        # process that opened it meanwhile finds it gone and locks a new one.
        try:
            os.unlink(lock)
        except OSError:
            pass
        os.close(fd)  # closing releases the lock
