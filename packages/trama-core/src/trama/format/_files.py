"""Opening the files a document names, safely: only regular files, never a wait.

A document and its weights come from anywhere, so the path it gives may name a FIFO, a device
(``/dev/zero``) or a socket. A plain ``open()`` of a FIFO blocks until a writer appears, and
reading a device never ends. :func:`open_regular` opens without blocking (``O_NONBLOCK``, which
does not change how a regular file reads) and checks the type of what it opened, on the open
descriptor itself, so nothing can be swapped in between the check and the read.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

__all__ = ["NotRegularFileError", "open_regular", "read_at", "read_into", "read_regular", "refused_in_path"]

_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


class NotRegularFileError(OSError):
    """The path names something other than a regular file; ``kind`` says what (``"a folder"``)."""

    def __init__(self, path: Path, kind: str) -> None:
        super().__init__(f"{str(path)!r} is {kind}, not a regular file")
        self.kind = kind


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def refused_in_path(char: str) -> bool:
    """Whether an external weights path may not hold ``char``: the one rule for the characters of
    such a path, which the reader enforces and the writer follows when it names a weights file.

    Refused: whatever is not printable (a NUL, a tab, a newline, DEL, a no-break or zero-width
    space, a line separator, a bidirectional override, the lone surrogate that stands for a byte
    of a file name that is not UTF-8: a name that cannot be shown, typed or spelled the same on
    every system) and the backslash (a folder separator on Windows)."""
    return char == "\\" or not char.isprintable()


def open_regular(path: Path) -> tuple[int, int]:
    """An open read-only descriptor of the regular file at ``path``, and its size.

    Raises :class:`NotRegularFileError` for anything else, ``OSError`` when it cannot be opened,
    and ``ValueError`` for a path the system cannot spell (a NUL byte, a lone surrogate). The
    caller closes the descriptor."""
    try:
        fd = os.open(path, _FLAGS)
    except UnicodeEncodeError as exc:
        raise ValueError(f"the path cannot be encoded: {exc.reason}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFileError(path, _kind(info.st_mode))
    except BaseException:
        os.close(fd)
        raise
    return fd, info.st_size


def read_regular(path: Path) -> bytes:
    """The bytes of the regular file at ``path`` (the errors of :func:`open_regular`)."""
    fd, _ = open_regular(path)
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


#: Where the system has no positional reads (Windows), a seek and a read must not interleave.
_SEEK_LOCK = threading.Lock()


def read_at(fd: int, size: int, offset: int) -> bytes:
    """Up to ``size`` bytes at ``offset``, without moving a file position other threads share."""
    if hasattr(os, "pread"):
        return os.pread(fd, size, offset)
    with _SEEK_LOCK:  # pragma: no cover - not POSIX
        os.lseek(fd, offset, os.SEEK_SET)
        return os.read(fd, size)


def read_into(fd: int, buffer: memoryview, offset: int) -> int:
    """Read from ``offset`` straight into ``buffer`` (no intermediate copy where the system
    allows); the number of bytes read, 0 at the end of the file."""
    if hasattr(os, "preadv"):
        return os.preadv(fd, [buffer], offset)
    data = read_at(fd, len(buffer), offset)  # pragma: no cover - not POSIX
    buffer[: len(data)] = data  # pragma: no cover
    return len(data)  # pragma: no cover
