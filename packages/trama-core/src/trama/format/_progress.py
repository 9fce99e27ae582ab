"""A progress line for long reads and writes, on a terminal only.

Loading or dumping a document of hundreds of megabytes takes seconds; a person at a terminal
should see that something is happening, and how far along it is. A program that reads trama's
output (a pipe, a log file, a test) must never see it. So the line is drawn only when the work
is large (:data:`PROGRESS_THRESHOLD` bytes or more) and standard error is a terminal, unless the
caller decides: ``progress=True`` draws it whatever the size (still only on a terminal: escape
codes in a log help nobody), ``progress=False`` never. A program can also set the default for
everything it calls (:func:`progress_default`): ``trama`` commands take ``--quiet`` that way.

The line is redrawn in place (carriage return) at most every :data:`REDRAW_SECONDS`, so that
drawing costs nothing next to the work, and is erased when the work ends, leaving the terminal
as it was.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TextIO

__all__ = ["PROGRESS_THRESHOLD", "REDRAW_SECONDS", "Progress", "progress_default", "progress_line"]

#: Work this large (in bytes read or written) shows progress by default.
PROGRESS_THRESHOLD = 100 * 1024 * 1024
#: The line is redrawn at most this often.
REDRAW_SECONDS = 0.1
_MB = 1024 * 1024


class Progress:
    """Reports how many of ``total`` bytes are done. Silent unless drawing was decided on
    (:func:`progress_line`); a silent one costs one comparison per report."""

    __slots__ = ("_drawn", "_last", "_stream", "done", "label", "total")

    def __init__(self, label: str, total: int, stream: TextIO | None = None) -> None:
        self.label = label
        self.total = max(total, 1)
        self.done = 0
        self._stream = stream
        self._last = 0.0
        self._drawn = False

    @property
    def shown(self) -> bool:
        """Whether this progress is drawn at all."""
        return self._stream is not None

    def advance(self, count: int) -> None:
        """``count`` more bytes are done."""
        self.done += count
        if self._stream is not None:
            now = time.monotonic()
            if now - self._last >= REDRAW_SECONDS:
                self._last = now
                self._draw()

    def finish(self) -> None:
        """The work ended (done or failed): erase the line."""
        if self._stream is not None and self._drawn:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
        self._drawn = False

    def _draw(self) -> None:
        assert self._stream is not None
        done = min(self.done, self.total)
        percent = 100 * done // self.total
        self._stream.write(f"\r\x1b[K{self.label}: {done / _MB:,.0f} of {self.total / _MB:,.0f} MB ({percent}%)")
        self._stream.flush()
        self._drawn = True

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *_: object) -> None:
        self.finish()


_DEFAULT: ContextVar[bool | None] = ContextVar("trama_progress_default", default=None)


@contextmanager
def progress_default(setting: bool | None) -> Iterator[None]:
    """For the code run inside, a ``progress=None`` means ``setting`` (``False``: quiet)."""
    token = _DEFAULT.set(setting)
    try:
        yield
    finally:
        _DEFAULT.reset(token)


def progress_line(setting: bool | None, label: str, total: int, stream: TextIO | None = None) -> Progress:
    """A :class:`Progress` for ``total`` bytes of work, drawn on ``stream`` (standard error)
    when ``setting`` says so: ``None`` for work of at least :data:`PROGRESS_THRESHOLD` bytes
    (or what :func:`progress_default` set), ``True`` for any, ``False`` never; and in every case
    only when ``stream`` is a terminal."""
    if setting is None:
        setting = _DEFAULT.get()
    out = sys.stderr if stream is None else stream
    if setting is False or (setting is None and total < PROGRESS_THRESHOLD) or not _is_terminal(out):
        return Progress(label, total)
    return Progress(label, total, out)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False
