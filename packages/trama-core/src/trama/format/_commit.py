"""Putting a document's files in place so that a crash or a second writer never loses a good copy.

What must hold, at every instant and after a crash at any instant (a SIGKILL, an OOM kill):
the path names either the previous document or the new one, and whichever it names loads
whole, with its own weights. Two processes writing the same path leave one writer's document,
never one writer's JSON with the other's weights.

**One commit point.** Every file is written under a hidden temporary name, flushed and synced,
then renamed into place; a rename within a folder is atomic. An inline document is one file.
An external document is two, and two renames cannot be made one, so the weights file is *not*
renamed over its predecessor: its name is new for new content. The writer names it after what it
holds (``model.<16 hex digits>.safetensors``, the XXH3 of its header and of its tensors'
checksums; ``model`` is the document's name less ``.trama.json`` and any character a reader
refuses in an external path, :func:`weights_stem`), renames it into place beside the old one,
syncs the folder, and only then renames the JSON over the old JSON. That last rename is the
commit: before it the old JSON still names the old weights file, which nothing has touched;
after it the new JSON names a weights file that is already durable. Equal content gives an
equal name, so rewriting an unchanged model replaces the weights file with identical bytes,
which no reader can tell apart.

**Collecting superseded weights files.** After the commit, weights files of this document that
the new JSON does not name are removed. A file is this document's if trama wrote it for this
document: its safetensors header starts with ``__metadata__`` naming the document's file name (a
sibling ``model.json`` next to ``model.trama.json`` shares the ``model.`` prefix but not the
owner). A weights file of the old fixed name (``model.safetensors``, written by earlier trama)
is removed only when the previous JSON named it; a hidden note (``.model.trama.json.retire``),
written before the commit and removed with the file, carries that decision over a crash.

The danger is a concurrent writer: its weights file, renamed into place but not yet committed,
is named by no JSON and looks exactly like garbage. So the step from "rename the weights file
into place" to "collect" runs under an exclusive ``flock`` on the document's folder, taken by
every writer (inline ones too, since they collect as well). While one writer holds it, no other
writer has a renamed-but-uncommitted weights file, and everything unnamed really is garbage.
Writing the files, the slow part, happens outside the lock; the locked step is a few renames and
syncs. The lock dies with its process, so a writer killed while holding it blocks nobody. Where
the folder cannot be locked (a file system without ``flock``), no writer can lock it, so none
collects: superseded weights files are then left behind, never wrongly removed. (A writer that
may write the folder but not read it cannot lock it while others can: such mixed permissions on
one folder are not supported.) A writer waits
at most :data:`LOCK_TIMEOUT_S` for the lock and then fails with a :class:`~trama.errors.WriteError`
rather than hang behind a stopped process.

**Stale temporary files.** A writer holds an exclusive ``flock`` on each of its temporary files
from creation until it is renamed or removed. A later write to the same target removes the
temporary files of that target that it can lock: their writer is gone (killed, or a power cut),
because a live writer still holds its lock. Between creating a temporary file and locking it
there is an instant when a cleaner could take the lock first and remove the file; the writer
therefore checks, once it holds the lock, that its path still names the file it opened, and
starts again under a new name if not. Temporary files left by earlier trama (which did not
lock them) are removed the same way, which would remove a *running* old-version writer's file;
mixing versions on one path at the same moment is not supported.

Readers need no lock: a reader that opened the old JSON just before a commit and then finds its
weights file collected reopens the document (see :func:`trama.format.load`).

Tests observe every step through :data:`step_hook` (each write, sync, rename, lock and removal
calls it first, with the step's kind), which lets a test kill the writer at any one of them.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO

from trama.errors import WriteError
from trama.format._files import read_at, refused_in_path

try:
    import fcntl

    _LOCKS = True
except ImportError:  # pragma: no cover - not POSIX: no locks, so nothing is collected
    _LOCKS = False

__all__ = [
    "LOCK_TIMEOUT_S",
    "TempFile",
    "check_target",
    "commit_document",
    "document_stem",
    "owner_prefix",
    "remove_stale_temps",
    "replace_file",
    "step",
    "step_hook",
    "weights_stem",
    "write_errors",
]

#: How long a writer waits for another writer's commit before giving up.
LOCK_TIMEOUT_S = 60.0

#: Called with the kind of each step that changes the folder ("create", "write", "fsync",
#: "lock", "rename", "fsync-folder", "unlink") just before it happens. ``None`` outside tests.
step_hook: Callable[[str], None] | None = None

_TEMP = re.compile(r"\.(?P<target>.+)\.[0-9a-f]{12}\.tmp")
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_OPEN_FLAGS = _CLOEXEC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)


def step(kind: str) -> None:
    """Announce a step to :data:`step_hook` (a no-op unless a test installed one)."""
    if step_hook is not None:
        step_hook(kind)


def document_stem(name: str) -> str:
    """The part of a document's file name its weights files are named after:
    ``model.trama.json`` -> ``model`` (also ``.json``; other names are kept whole)."""
    for suffix in (".trama.json", ".json"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


#: The stem of the weights files of a document whose name keeps nothing of its own (below).
FALLBACK_STEM = "weights"
#: The longest stem, in bytes of UTF-8: a weights file's name adds 29 bytes to it and its
#: temporary file's 31, and a file name has at most 255 on most file systems.
MAX_STEM_BYTES = 200


def weights_stem(name: str) -> str:
    """The part of the names of the weights files of the document named ``name`` that comes
    from it: its :func:`document_stem` without the characters a reader refuses in an external
    path (:func:`~trama.format._files.refused_in_path`: ``a\tb.trama.json`` -> ``ab``), at most
    :data:`MAX_STEM_BYTES` long, and :data:`FALLBACK_STEM` when nothing is left. The document
    names its weights file, so a name the reader refuses would make a document that cannot be
    loaded."""
    stem = "".join(char for char in document_stem(name) if not refused_in_path(char) and char != "/")
    stem = stem.encode("utf-8")[:MAX_STEM_BYTES].decode("utf-8", "ignore")
    return stem or FALLBACK_STEM


def owner_prefix(document: str) -> bytes:
    """How the safetensors header of a weights file written for ``document`` begins (after its
    8-byte length): its ``__metadata__`` first, naming the document's file name."""
    owner = json.dumps({"trama.document": document}, separators=(",", ":"))
    return b'{"__metadata__":' + owner.encode("ascii")


@contextmanager
def write_errors(target: Path) -> Iterator[None]:
    """Turn an ``OSError`` raised while writing ``target`` into one :class:`WriteError`."""
    try:
        yield
    except OSError as exc:
        raise WriteError(f"cannot write {str(target)!r}: {_reason(exc)}") from None


def check_target(target: Path) -> None:
    """Refuse to write over anything but a regular file (or nothing).

    A dump renames a new file over its target, so a target that is a FIFO, a socket or a device
    (``/dev/stdout``, ``/dev/full``) would be replaced by a regular file rather than written to,
    and a folder cannot be replaced at all. A symbolic link is followed: what it names is checked.
    """
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return  # a new file; a missing folder is reported when the temporary file is created
    except (UnicodeEncodeError, ValueError):
        return  # a NUL or a lone surrogate: reported when the temporary file is created
    except OSError as exc:
        raise WriteError(f"cannot write {str(target)!r}: {_reason(exc)}") from None
    if stat.S_ISDIR(mode):
        raise WriteError(f"cannot write {str(target)!r}: it is a folder")
    if not stat.S_ISREG(mode):
        raise WriteError(
            f"cannot write {str(target)!r}: it is not a regular file (a FIFO, socket or device), and a "
            "dump replaces its target"
        )


def _reason(exc: OSError) -> str:
    if exc.errno == errno.EFBIG:
        return "File too large (past the file size limit of this process or file system)"
    return exc.strerror or str(exc)


class TempFile:
    """A new hidden temporary file beside ``target``, locked by this process until it is
    renamed into place or discarded (see the module's notes on stale temporary files)."""

    def __init__(self, folder: Path, target: str) -> None:
        for _ in range(100):
            path = folder / f".{target}.{uuid.uuid4().hex[:12]}.tmp"
            step("create")
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OPEN_FLAGS, 0o666)
            except ValueError as exc:  # a NUL byte, a lone surrogate: no file can have that name
                raise WriteError(f"cannot write {str(folder / target)!a}: the path cannot be encoded ({exc})") from None
            try:
                if _LOCKS:
                    with suppress(OSError):  # no locks on this file system: nothing is cleaned either
                        fcntl.flock(fd, fcntl.LOCK_EX)
                if _same_file(path, os.fstat(fd)):
                    break
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # a cleaner removed it before it was locked: start again
        else:  # pragma: no cover - a cleaner winning a hundred races in a row
            raise OSError(errno.EAGAIN, "temporary files keep disappearing")
        self.path = path
        self.handle: BinaryIO = os.fdopen(fd, "wb")

    def write(self, data: bytes | memoryview) -> None:
        step("write")
        self.handle.write(data)

    def sync(self) -> None:
        """Flush and sync the contents to disk (before the file may be renamed into place)."""
        self.handle.flush()
        step("fsync")
        os.fsync(self.handle.fileno())

    def close(self) -> None:
        """Close (and so unlock) the file; once it is renamed, its lock has done its work."""
        self.handle.close()

    def discard(self) -> None:
        """Remove the file (it was not renamed) and close it."""
        with suppress(OSError):
            self.path.unlink()
        with suppress(OSError):
            self.handle.close()


def _same_file(path: Path, info: os.stat_result) -> bool:
    try:
        now = os.lstat(path)
    except FileNotFoundError:
        return False
    return (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino)


def _sync_folder(folder: Path) -> None:
    step("fsync-folder")
    if os.name == "nt":  # pragma: no cover - folders cannot be opened, nor synced, there
        return
    fd = os.open(folder, os.O_RDONLY | _CLOEXEC)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):  # folders that cannot be synced
            raise
    finally:
        os.close(fd)


def _rename(source: Path, target: Path) -> None:
    step("rename")
    os.replace(source, target)


def _unlink(path: Path) -> None:
    step("unlink")
    with suppress(FileNotFoundError):
        path.unlink()


@contextmanager
def _folder_lock(folder: Path) -> Iterator[bool]:
    """Hold an exclusive ``flock`` on ``folder``; yields whether it is held (``False`` where
    the file system has no locks: then nothing may be collected)."""
    if not _LOCKS:  # pragma: no cover - not POSIX
        yield False
        return
    try:
        fd = os.open(folder, os.O_RDONLY | _CLOEXEC)
    except OSError:  # a folder this process may write but not read: it cannot list it either
        yield False
        return
    try:
        step("lock")
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        pause = 0.0005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = True
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise WriteError(
                        f"cannot write in {str(folder)!r}: another process has held its commit lock for "
                        f"{LOCK_TIMEOUT_S:.0f} s (a stopped writer?)"
                    ) from None
                time.sleep(pause)
                pause = min(pause * 2, 0.02)
            except OSError:  # ENOLCK, EOPNOTSUPP...: a file system without locks
                held = False
                break
        yield held
    finally:
        os.close(fd)  # releases the lock


def replace_file(target: Path, temp: TempFile) -> None:
    """Rename a synced temporary file over ``target`` (a file with no weights to collect), sync
    the folder, and remove the target's stale temporary files."""
    _rename(temp.path, target)
    temp.close()
    _sync_folder(target.parent)
    remove_stale_temps(target.parent, [target.name])


def commit_document(document: Path, temp: TempFile, weights: tuple[TempFile, str] | None = None) -> None:
    """Put a written and synced document (and its weights file, renamed to the given name) in
    place at ``document``, then collect what no longer belongs to it (see the module notes)."""
    folder = document.parent
    with _folder_lock(folder) as locked:
        legacy = _legacy_to_retire(document) if locked else None
        placed: Path | None = None
        if weights is not None:
            weights_temp, name = weights
            target = folder / name
            existed = target.exists()
            _rename(weights_temp.path, target)
            weights_temp.close()
            placed = None if existed else target
        try:
            if placed is not None or legacy is not None:
                _sync_folder(folder)  # the weights file and the retirement note are durable
            _rename(temp.path, document)  # the commit
        except BaseException:
            if placed is not None:  # not committed, and no other document can name it yet
                _unlink(placed)
            raise
        temp.close()
        _sync_folder(folder)
        if locked:
            _collect(document, {weights[1]} if weights is not None else set(), legacy)
    remove_stale_temps(folder, [document.name, weights_stem(document.name) + ".safetensors"])


def _retirement_note(document: Path) -> Path:
    return document.with_name(f".{document.name}.retire")


def _legacy_to_retire(document: Path) -> Path | None:
    """The weights file of the old fixed name to remove after this commit, if any.

    It is removed only if it is this document's: the document being replaced names it. The
    decision is written down (a hidden note beside the document) before the commit, so that a
    writer killed between the commit and the removal leaves the note to the next dump, which
    can no longer learn it from the document."""
    legacy = document.with_name(document_stem(document.name) + ".safetensors")
    note = _retirement_note(document)
    if not legacy.exists():
        if note.exists():
            _unlink(note)
        return None
    if not (note.exists() or _names(document, legacy.name)):
        return None  # someone else's file of that name
    if not note.exists():
        step("create")
        os.close(os.open(note, os.O_WRONLY | os.O_CREAT | _OPEN_FLAGS, 0o666))
    return legacy


def _collect(document: Path, keep: set[str], legacy: Path | None) -> None:
    """Remove this document's weights files that it no longer names. Runs under the lock."""
    stem = re.escape(weights_stem(document.name))
    pattern = re.compile(stem + r"\.[0-9a-f]{16}\.safetensors")
    prefix = owner_prefix(document.name)
    with os.scandir(document.parent) as entries:
        candidates = [Path(e.path) for e in entries if e.name not in keep and pattern.fullmatch(e.name)]
    stale = [path for path in candidates if _starts_with(path, prefix)]
    if legacy is not None:
        stale += [legacy, _retirement_note(document)]
    for path in stale:
        _unlink(path)
    if stale:
        _sync_folder(document.parent)


def _starts_with(path: Path, prefix: bytes) -> bool:
    """Whether the regular file at ``path`` holds a safetensors header beginning with ``prefix``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _OPEN_FLAGS)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        head = read_at(fd, 8 + len(prefix) + 1, 0)
    except OSError:
        return False
    finally:
        os.close(fd)
    return head[8 : 8 + len(prefix)] == prefix and head[8 + len(prefix) : 9 + len(prefix)] in (b",", b"}")


def _names(document: Path, weights: str) -> bool:
    """Whether the document now at ``document`` names ``weights`` as an external path (read only
    to retire a weights file of the old fixed name; anything unreadable names nothing)."""
    from trama.format._files import read_regular
    from trama.format._jsontext import parse_json

    try:
        data = parse_json(read_regular(document)).data
        parameters = data.get("parameters")
    except Exception:  # a broken or hostile previous file: keep what it might have named
        return False
    if data.get("weights") in (weights, f"./{weights}"):  # format 1.3 names its file once
        return True
    if type(parameters) is not dict:
        return False
    for entry in parameters.values():
        value = entry.get("value") if type(entry) is dict else None
        external = value.get("external") if type(value) is dict else None
        if type(external) is dict and external.get("path") in (weights, f"./{weights}"):
            return True
    return False


def remove_stale_temps(folder: Path, targets: Iterable[str]) -> None:
    """Remove the temporary files of ``targets`` in ``folder`` whose writer is gone (those this
    process can lock). Best effort: whatever cannot be examined is left alone."""
    if not _LOCKS:  # pragma: no cover - not POSIX: cannot tell a live writer from a dead one
        return
    names = set(targets)
    try:
        with os.scandir(folder) as entries:
            found = [Path(e.path) for e in entries if e.name.endswith(".tmp")]
    except OSError:
        return
    for path in found:
        match = _TEMP.fullmatch(path.name)
        if match is None or match["target"] not in names:
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _OPEN_FLAGS)
        except OSError:
            continue
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError: its writer is alive
            if _same_file(path, info):
                _unlink(path)
        except OSError:
            continue
        finally:
            os.close(fd)
