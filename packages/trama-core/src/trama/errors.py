"""Every error trama raises on purpose derives from :class:`TramaError`.

Callers that load files they did not write can catch ``TramaError`` alone and be sure that a
malformed document never escapes as a ``KeyError`` or ``ValueError`` from deep inside. Each
error says *what* is wrong in ``message`` and *where* in ``location`` (a JSON Pointer into the
document, RFC 6901) and, when a node is involved, ``node_id``.
"""

from __future__ import annotations

__all__ = [
    "ExecutionError",
    "ExportError",
    "FormatVersionError",
    "ImportModelError",
    "JSONError",
    "RegistryError",
    "RuntimeNotFoundError",
    "SchemaError",
    "TensorDataError",
    "TramaError",
    "ValidationError",
    "WeightsFileError",
    "WriteError",
    "pointer_token",
]


class TramaError(Exception):
    """Base class of all trama errors.

    ``str(error)`` reads ``location: message`` so that command-line tools can print one line per
    problem; the parts stay available as attributes for programs.
    """

    def __init__(
        self,
        message: str,
        *,
        location: str | None = None,
        node_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.location = location
        self.node_id = node_id
        #: Every problem found by the check that raised this one (this one first). Validation
        #: collects them all so a command-line run can report everything in one pass.
        self.all_errors: list[TramaError] = [self]

    def __str__(self) -> str:
        where = self.location if self.location is not None else ""
        if self.node_id is not None:
            where = f"{where} (node {self.node_id!r})" if where else f"node {self.node_id!r}"
        return f"{where}: {self.message}" if where else self.message


class JSONError(TramaError):
    """The text is not well-formed JSON (or repeats a key in one object)."""

    def __init__(self, message: str, *, line: int, column: int) -> None:
        super().__init__(message, location=f"line {line} column {column}")
        self.line = line
        self.column = column


class SchemaError(TramaError):
    """The JSON is well-formed but does not have the shape of a trama document."""


class FormatVersionError(SchemaError):
    """The document's ``format_version`` is missing, malformed or newer than this reader."""


class TensorDataError(SchemaError):
    """A tensor value is inconsistent: unknown dtype, bad shape, or data of the wrong size."""


class ValidationError(TramaError):
    """The document breaks a structural rule: ids, scopes, references, bindings, parameters."""


class RegistryError(TramaError):
    """An op is unknown to the registry, or a node does not match its op's specification."""


class WeightsFileError(TramaError):
    """An external weights file is missing, malformed, or does not match the document."""


class ExportError(TramaError):
    """An object could not be turned into a trama node."""


class ImportModelError(TramaError):
    """A validated document could not be turned back into runtime objects."""


class RuntimeNotFoundError(TramaError):
    """No runtime of that name is registered, or it is not available on this machine."""


class ExecutionError(TramaError):
    """Running a prepared model failed: wrong inputs, or a node's computation raised."""


class WriteError(TramaError):
    """A document or a file beside it could not be written: a missing folder, a path that is a
    folder, a full disk, a file larger than the process may write. The previous file, if any, is
    left as it was."""


def pointer_token(key: str) -> str:
    """One JSON Pointer reference token (RFC 6901): ``~`` and ``/`` in a key are escaped."""
    return key.replace("~", "~0").replace("/", "~1")
