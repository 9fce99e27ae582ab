"""Every problem in a document, as ``trama validate`` reports them: a library function, so that
an editor, a CI check or a web service can show the same list the command line does.

The stages run in order, and a stage that cannot proceed ends the list: JSON parsing, the format
version, the JSON Schema (current format only), decoding. Past decoding nothing blocks, so
structural errors and every corrupt tensor are reported together. Each problem carries its
location (a JSON Pointer, or the line and column of a syntax error) and node when known.

JSON Schema errors are ranked before they are reported: for an ``anyOf`` failure, the branch
the document evidently meant speaks (a tensor with a bad dtype reads "not one of the dtypes",
not "not a boolean"), and errors come in document order, not the validator's.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np

from trama.errors import TramaError
from trama.format._codec import decode_document, parse_format_version
from trama.format._external import make_resolver
from trama.format._jsontext import ParsedText, gc_paused, parse_json
from trama.format._model import Model
from trama.format._schema import json_schema
from trama.format._tensor import Tensor
from trama.format._validation import collect_errors
from trama.version import FORMAT_MAJOR, FORMAT_MINOR

__all__ = ["Problem", "document_problems", "schema_violations"]


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem in a document: what, and where when known (a JSON Pointer, or the line and
    column of a syntax error), and in which node. ``str()`` is ``location (node 'id'): message``."""

    message: str
    location: str | None = None
    node: str | None = None

    @classmethod
    def of(cls, error: TramaError) -> Problem:
        return cls(error.message, error.location, error.node_id)

    def __str__(self) -> str:
        where = self.location or ""
        if self.node is not None:
            where = f"{where} (node {self.node!r})" if where else f"node {self.node!r}"
        return f"{where}: {self.message}" if where else self.message


def document_problems(data: bytes | mmap.mmap, folder: Path, *, schema: bool = True) -> list[Problem]:
    """Every problem in the document whose text is ``data`` (external weights resolved in
    ``folder``); empty when it is valid. ``schema=False`` skips the JSON Schema stage."""
    try:
        parsed = parse_json(data)
        major, minor = parse_format_version(parsed.data)
    except TramaError as exc:
        return [Problem.of(exc)]
    # A newer minor may add fields this reader ignores but this schema would refuse, and older
    # majors have their own shape (upgraded on decoding), so the schema speaks for exact 1.x only.
    if schema and major == FORMAT_MAJOR and minor <= FORMAT_MINOR:
        violations = schema_violations(parsed)
        if violations:
            return violations
    try:
        with gc_paused():
            model = decode_document(parsed.data, resolve_external=make_resolver(folder), blobs=parsed.blobs)
    except TramaError as exc:
        return [Problem.of(exc)]
    return [Problem.of(error) for error in collect_errors(model)] + _tensor_problems(model)


def schema_violations(parsed: ParsedText) -> list[Problem]:
    """Every JSON Schema violation in a parsed document, with its JSON Pointer location, in
    document order (the validator's own order depends on set iteration, so it varies by run)."""
    validator = _schema_validator(parsed.blobs)(json_schema())
    errors = [leaf for error in validator.iter_errors(parsed.data) for leaf in _specific_errors(error)]
    errors.sort(key=_document_order(parsed.data))
    return [Problem(error.message, _pointer(error.absolute_path)) for error in errors]


def _schema_validator(blobs: dict[str, memoryview]) -> Any:
    """The 2020-12 validator, taught that the parser's blob placeholders stand for their text.

    :func:`~trama.format._jsontext.parse_json` replaces long base64 ``data`` strings by placeholders to
    save memory; the ``pattern`` keyword checks the original bytes instead, with no copy.
    """
    base = jsonschema.Draft202012Validator
    if not blobs:
        return base
    plain_pattern = base.VALIDATORS["pattern"]

    def pattern(validator: Any, regex: str, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
        blob = blobs.get(instance) if isinstance(instance, str) else None
        if blob is None:
            yield from plain_pattern(validator, regex, instance, schema)
        elif re.search(regex.encode("ascii"), blob) is None:
            yield jsonschema.ValidationError(f"the {len(blob)}-character string does not match {regex!r}")

    return jsonschema.validators.extend(base, {"pattern": pattern})  # type: ignore[no-untyped-call]


def _specific_errors(error: jsonschema.ValidationError) -> list[jsonschema.ValidationError]:
    """For an ``anyOf`` failure, the errors of the branch the document evidently meant.

    "is not valid under any of the given schemas" does not say what to fix. A branch whose type
    does not fit the value is out; of the rest, the one that got furthest into the value, then
    the one with the fewest errors, is the intended one (a tensor with a bad dtype reads "not
    one of the dtypes", not "not a boolean"). When two branches tie, none is singled out.
    """
    if not error.context:
        return [error]
    branches: dict[Any, list[jsonschema.ValidationError]] = {}
    for sub in error.context:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    ranked = sorted(
        (_branch_rank(subs), key) for key, subs in branches.items() if not any(_wrong_type(sub) for sub in subs)
    )
    if not ranked or (len(ranked) > 1 and ranked[0][0] == ranked[1][0]):
        return [error]
    return [leaf for sub in branches[ranked[0][1]] for leaf in _specific_errors(sub)]


def _wrong_type(error: jsonschema.ValidationError) -> bool:
    return error.validator == "type" and not error.relative_path


def _branch_rank(errors: list[jsonschema.ValidationError]) -> tuple[int, int]:
    return -max(len(error.relative_path) for error in errors), len(errors)


def _document_order(data: Any) -> Callable[[jsonschema.ValidationError], list[int]]:
    """A sort key: the position of an error's location in the document, as one index per level
    (objects keep their text order, so a key's index in its object is its place in the file)."""
    key_indexes: dict[int, dict[str, int]] = {}

    def position(error: jsonschema.ValidationError) -> list[int]:
        place: list[int] = []
        value = data
        for token in error.absolute_path:
            if isinstance(value, dict):
                index = key_indexes.get(id(value))
                if index is None:
                    index = key_indexes[id(value)] = {key: k for k, key in enumerate(value)}
                place.append(index.get(str(token), -1))
                value = value.get(str(token))
            elif isinstance(value, list) and isinstance(token, int) and 0 <= token < len(value):
                place.append(token)
                value = value[token]
            else:
                break
        return place

    return position


def _pointer(path: Any) -> str:
    """A JSON Pointer (RFC 6901); the document root reads ``/`` as elsewhere in trama."""
    tokens = [str(token).replace("~", "~0").replace("/", "~1") for token in path]
    return "/" + "/".join(tokens)


def _tensor_problems(model: Model) -> list[Problem]:
    """Decode every tensor once, so corrupt base64, bad bool bytes or a changed external file
    are found now rather than when the model is first run."""
    problems = []
    for entry in model.parameters.values():
        if isinstance(entry.value, Tensor):
            try:
                np.asarray(entry.value)
            except TramaError as exc:
                problems.append(Problem.of(exc))
    return problems
