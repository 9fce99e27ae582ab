"""Reading under memory pressure: a clean error, never a crash.

Python turns a failed allocation into ``MemoryError``, which the readers turn into a
:class:`~trama.errors.TramaError` (:func:`out_of_memory`). A C extension that does not check
what its allocator returned crashes instead: msgspec's JSON decoder copies a string's bytes into
the result of ``PyUnicode_New`` without checking it (a SIGSEGV when the allocation fails), and
its ``encode`` releases a buffer it has already lost when growing it fails (``encode_into`` does
not). Where allocations can fail at all (an address-space limit, ``RLIMIT_AS``, or the kernel's
strict overcommit accounting), the typed reader therefore asks :func:`can_reserve` first for all
the address space that decoding could take, and leaves a document it cannot promise that much to
the careful reader (the standard library's parser, whose every allocation is checked).
"""

from __future__ import annotations

import functools
import mmap
from collections.abc import Callable
from functools import cache
from typing import ParamSpec, TypeVar

from trama.errors import TramaError

__all__ = ["allocations_may_fail", "can_reserve", "out_of_memory", "raising_out_of_memory"]

P = ParamSpec("P")
R = TypeVar("R")

_PRIVATE = {"flags": mmap.MAP_PRIVATE} if hasattr(mmap, "MAP_PRIVATE") else {}


def can_reserve(nbytes: int) -> bool:
    """Whether this process can get ``nbytes`` more of private memory now: a mapping of that
    size is made and given back at once (address space only: no page of it is touched)."""
    if nbytes <= 0:
        return True
    try:
        probe = mmap.mmap(-1, nbytes, **_PRIVATE)
    except (OSError, ValueError, OverflowError, MemoryError):
        return False
    probe.close()
    return True


def allocations_may_fail() -> bool:
    """Whether an allocation can fail before memory is really exhausted: under an address-space
    limit, or strict overcommit accounting. Elsewhere (Linux's default heuristic) only a single
    allocation larger than the machine's memory fails; running out is the OOM killer's."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX: assume the worst
        return True
    if resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY:
        return True
    return _strict_overcommit()


@cache
def _strict_overcommit() -> bool:
    try:
        with open("/proc/sys/vm/overcommit_memory", "rb") as handle:
            return handle.read().strip() == b"2"
    except OSError:
        return False


def out_of_memory(what: str) -> TramaError:
    """The error for a ``MemoryError`` raised while doing ``what`` (``"read the document"``)."""
    return TramaError(
        f"not enough memory to {what}: the process ran out of memory (or reached its address-space "
        "limit) while doing it"
    )


def raising_out_of_memory(what: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a function so that a ``MemoryError`` inside it is :func:`out_of_memory`'s
    error for ``what``, raised once the handler has let go of the failed call's frames (and of
    the memory they held)."""

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return function(*args, **kwargs)
            except MemoryError:
                pass
            raise out_of_memory(what)

        return guarded

    return decorate
