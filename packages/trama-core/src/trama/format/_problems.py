"""Every problem in a document, as ``trama validate`` reports them: a library function, so that
an editor, a CI check or a web service can show the same list the command line does.

**Proof first, explanation on failure.** A flat document (format 1.0 to 1.2) is read first as
:func:`trama.load` reads it: the typed reader (:mod:`trama.format._typed`) checks every member's
JSON type and proves the structural rules while it builds the model, and :func:`proven_valid`
checks the one thing the JSON Schema asks beyond what that reading refuses. A document proven so,
whose tensors all decode, is valid: validating it costs what loading it costs, in time and
memory, and the JSON Schema pass never runs (nor is jsonschema imported). The schema stays the
contract: a document the proof does not accept is judged by the stages below, the schema among
them, and what it is refused for, and in which words, is theirs. ``tests/test_validate_proof.py``
holds both ways to the same report over the fixtures, the fuzz seeds and their mutations. A
nested document (1.3) is judged by the stages alone.

The stages run in order, and a stage that cannot proceed ends the list: JSON parsing, the format
version, the JSON Schema (1.x up to the current minor: the nested schema for 1.3, the flat one
for 1.0 to 1.2), decoding. Past decoding nothing blocks, so structural errors and every corrupt
tensor are reported together. Each problem carries its location (a JSON Pointer into the text
as written, into nested nodes and blocks too, or the line and column of a syntax error) and node
when known.

JSON Schema errors are ranked before they are reported: for an ``anyOf`` failure, the branch
the document evidently meant speaks (a tensor with a bad dtype reads "not one of the dtypes",
not "not a boolean"), and errors come in document order, not the validator's.
"""

from __future__ import annotations

import functools
import mmap
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trama.errors import TramaError
from trama.format._codec import FLAT_VERSION, decode_document, parse_format_version
from trama.format._external import make_resolver
from trama.format._jsontext import (
    BASE64_PATTERN,
    Blob,
    DecodedRun,
    DocumentFile,
    LiftedText,
    ParsedText,
    TextRun,
    gc_paused,
    lift_text,
    parse_json,
)
from trama.format._model import Model
from trama.format._names import DOTTED_ID, MAX_ENTRY_SEGMENTS, MAX_NODE_DEPTH, depth_of, shown_name
from trama.format._progress import progress_line
from trama.format._schema import ENTRY_NAME_PATTERN, NODE_ID_PATTERN, json_schema, nested_version
from trama.format._stack import in_nested_room
from trama.format._tensor import Tensor
from trama.format._typed import decode_typed
from trama.format._typed_nested import decode_nested
from trama.format._validation import collect_errors
from trama.version import FORMAT_MAJOR, FORMAT_MINOR, FORMAT_VERSION

if TYPE_CHECKING:
    import jsonschema

__all__ = ["Problem", "document_problems", "proven_valid", "schema_violations"]


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


@in_nested_room
def document_problems(
    data: bytes | mmap.mmap | DocumentFile,
    folder: Path,
    *,
    schema: bool = True,
    then: Callable[[Model], list[Problem]] | None = None,
) -> list[Problem]:
    """Every problem in the document whose text is ``data`` (external weights resolved in
    ``folder``); empty when it is valid. ``schema=False`` skips the JSON Schema stage.

    ``data`` may be a large document's open file (:class:`~trama.format._jsontext.DocumentFile`),
    read a block at a time. Every tensor is decoded and verified, one at a time, none kept: the
    memory is that of the structure and the largest tensor, whatever the weights add up to.

    A document is first read as :func:`trama.load` reads it: a flat one (1.0 to 1.2) by the
    typed reader (:mod:`trama.format._typed`), a nested one (1.3) without blocks by its own
    (:mod:`trama.format._typed_nested`), each proving the structure while it builds the model;
    :func:`proven_valid` adds what the JSON Schema asks beyond that. A document proven so is
    valid, and costs what loading it costs. Anything else (a problem found, a document the
    fast readers leave to the careful one, another format version, a document with blocks) is
    explained by the stages as they always ran (:func:`_explained_problems`), the JSON
    Schema's included: what a document is refused for, and in which words, is theirs.

    ``then`` is asked about the model of a document found valid, and its problems are the
    document's: ``trama validate`` checks there what import would refuse
    (:func:`trama.catalog.import_checks`), on the model already read.
    """
    try:
        lifted = _lifted(data)
    except TramaError as exc:
        return [Problem.of(exc)]
    resolver = make_resolver(folder)
    with gc_paused():
        typed = decode_typed(lifted, resolver)
        if typed is None:  # a nested document: its fast reader proves what it accepts
            nested = decode_nested(lifted, resolver)
            typed = None if nested is None else (nested, True)
    if typed is not None:
        model, sound = typed
        del typed
        if not schema:  # the careful reader would build the same model: its errors are these
            errors = [] if sound else _model_errors(model)
            found = [Problem.of(error) for error in errors] + _tensor_problems(model)
            return found or (_relocated(then(model), model) if then is not None else [])
        if sound and proven_valid(model):
            tensor_problems = _tensor_problems(model)
            if not tensor_problems:
                return _relocated(then(model), model) if then is not None else []
            # The structure is sound: the schema, which checks a tensor's text too, speaks first.
            del model
            violations = schema_violations(parse_json(lifted))
            return violations or tensor_problems
        del model
    return _explained_problems(lifted, folder, schema=schema, then=then)


def proven_valid(model: Model) -> bool:
    """Whether the JSON Schema accepts the document that the typed reader read to ``model``
    and proved sound (the second item of :func:`~trama.format._typed.decode_typed`), given
    that every tensor decodes (:func:`_tensor_problems` finds nothing).

    The typed reader checks every member's JSON type and every name, id and reference, and the
    careful decoder's checks that it reuses are those of every value form, fact, opset and
    entry; between them they refuse everything the schema refuses but one thing, which this
    checks: a checksum's hexadecimal digits, which the readers compare ignoring case, where the
    schema wants them in lowercase. A tensor's base64 text is proven when it decodes (the
    decoder is the stricter of the two). ``tests/test_validate_proof.py`` holds the two
    verdicts equal over the fuzzed documents and the fixtures.
    """
    for entry in model.parameters.values():
        value = entry.value
        if isinstance(value, Tensor):
            checksum = getattr(value.source, "checksum", None)
            if checksum is not None and _LOWERCASE_CHECKSUM.match(checksum) is None:
                return False
    return True


#: A checksum as the schema states it (``_CHECKSUM`` of :mod:`trama.format._schema`).
_LOWERCASE_CHECKSUM = re.compile(r"(?:xxh3-64:[0-9a-f]{16}|sha256:[0-9a-f]{64})\Z")


def _lifted(data: bytes | mmap.mmap | DocumentFile) -> LiftedText:
    """The document's text ready to parse, a large file's read a block at a time."""
    if isinstance(data, DocumentFile):
        with progress_line(None, f"reading {data.name}", data.size) as line:
            return lift_text(data, line if line.shown else None)
    return lift_text(data)


def _explained_problems(
    data: bytes | mmap.mmap | DocumentFile | LiftedText,
    folder: Path,
    *,
    schema: bool,
    then: Callable[[Model], list[Problem]] | None = None,
) -> list[Problem]:
    """Every problem, found by the stages in order: JSON parsing, the format version, the JSON
    Schema (format 1.x up to the current minor), decoding, the structural rules, the tensors.
    This is what :func:`document_problems` reports for a document it cannot prove valid; on
    its own, it is the reference the proof is tested against."""
    try:
        parsed = parse_json(data if isinstance(data, LiftedText) else _lifted(data))
        major, minor = parse_format_version(parsed.data)
    except TramaError as exc:
        return [Problem.of(exc)]
    # A newer minor may add fields this reader ignores but the schema would refuse, and older
    # majors have their own shape (upgraded on decoding), so the schema speaks for 1.0 to the
    # current minor only (the flat schema for 1.0 to 1.2, the nested one for 1.3).
    if schema and major == FORMAT_MAJOR and minor <= FORMAT_MINOR:
        violations = schema_violations(parsed)
        if violations:
            return violations
    try:
        with gc_paused():
            model = decode_document(parsed.data, resolve_external=make_resolver(folder), blobs=parsed.blobs)
    except TramaError as exc:
        return [Problem.of(exc)]
    del parsed
    found = [Problem.of(error) for error in _model_errors(model)] + _tensor_problems(model)
    return found or (_relocated(then(model), model) if then is not None else [])


def schema_violations(parsed: ParsedText) -> list[Problem]:
    """Every JSON Schema violation in a parsed document, with its JSON Pointer location, in
    document order (the validator's own order depends on set iteration, so it varies by run).

    The schema is that of the document's format: the nested one (:func:`json_schema`) for a
    document of format 1.3 (or a later minor, whose version it refuses), the flat one
    (``json_schema("1.2")``) for any other: 1.0 to 1.2, and a version it refuses.

    The document is checked a part at a time: the top level without the contents of its nodes,
    blocks and parameters, then each node against the node schema (a nested node without its
    children, each child being a part of its own), each block against the block schema and each
    entry against the entry schema, each part's errors turned into problems before the next part
    is checked. For every failure jsonschema builds a tree of errors (an ``anyOf`` keeps each
    branch's errors, each message quoting its value); kept for a whole document, those trees
    made a 1.6 MB file need 1.3 GB. Part by part, the memory is that of the largest part plus
    the problems, and a tree nested hundreds deep is walked without recursion. Nested lists are
    walked without recursion too, and an ``anyOf`` whose branches differ by type descends into
    the one branch that fits, so nothing builds an error for a branch that could never apply.
    What is reported, and where, is what one jsonschema run over the whole document reports
    (ranked by :func:`_specific_errors`).
    """
    data = parsed.data
    nested = type(data) is dict and nested_version(data.get("format_version"))
    schema = json_schema(FORMAT_VERSION if nested else FLAT_VERSION)
    defs = schema["$defs"]
    if nested:  # a node's children are parts of their own (below), not checked with it
        defs.update({name: {"type": "array"} for name in _NESTED_NODE_LISTS})
    validator_class = _schema_validator(parsed.blobs, defs)
    validators: dict[str, Any] = {}
    position = _document_order(data)
    found: list[tuple[list[int], Problem]] = []
    seen: set[Problem] = set()  # two keywords may say the same thing at one place

    def check(definition: str | None, instance: Any, prefix: list[Any]) -> None:
        validator = validators.get(definition or "")
        if validator is None:
            part = top if definition is None else {"$defs": defs, "$ref": f"#/$defs/{definition}"}
            validator = validators[definition or ""] = validator_class(part)
        for error in validator.iter_errors(instance):
            for leaf in _specific_errors(error):
                if _said_by_min_length(leaf):
                    continue
                path = [*prefix, *leaf.absolute_path]
                problem = Problem(_message(leaf), _pointer(path))
                if problem not in seen:
                    seen.add(problem)
                    found.append((position(path), problem))

    # The top level, without what the parts below check: the flat nodes, the nested blocks,
    # the entries (the nested nodes' lists are shallow already).
    parts = _NESTED_PARTS if nested else _FLAT_PARTS
    properties = dict(schema["properties"])
    for member, (keyword, _) in parts.items():
        if keyword is not None:
            properties[member] = {key: value for key, value in properties[member].items() if key != keyword}
    top = {**schema, "properties": properties}
    check(None, data, [])
    trees: list[tuple[Any, list[Any], str]] = []  # nested nodes to check, then their children
    for member, (_, definition) in parts.items() if type(data) is dict else ():
        value = data.get(member)
        if member == "nodes":  # an array of nodes (the schema checks nothing in another type)
            items: Any = enumerate(value) if type(value) is list else ()
        else:  # an object of blocks, or of entries
            items = value.items() if type(value) is dict else ()
        for key, item in items:
            if nested and member == "nodes":
                trees.append((item, [member, key], "node"))
                continue
            check(definition, item, [member, key])
            if member == "blocks" and type(item) is dict and type(item.get("nodes")) is list:
                trees.extend((node, [member, key, "nodes", k], "node_in_block") for k, node in enumerate(item["nodes"]))
    while trees:
        node, path, definition = trees.pop()
        check(definition, node, path)
        # The composite's schema, whose children are nodes of the same place, applies to a node
        # with a list of nodes, unless it is a block instance (which has no children to check).
        if type(node) is dict and "use" not in node and type(node.get("nodes")) is list:
            trees.extend((child, [*path, "nodes", k], definition) for k, child in enumerate(node["nodes"]))
    found.sort(key=lambda item: item[0])
    return [problem for _, problem in found]


#: The members of a flat document checked a part at a time: the keyword of the top-level schema
#: that would check their contents, and the definition each item is checked against.
_FLAT_PARTS: dict[str, tuple[str | None, str]] = {
    "nodes": ("items", "node"),
    "parameters": ("additionalProperties", "entry"),
}
#: The same for a nested document, whose lists of nodes are shallow in every check (a node's
#: children, and a block's, are checked after it, each against the definition of its place).
_NESTED_PARTS: dict[str, tuple[str | None, str]] = {
    "blocks": ("additionalProperties", "block"),
    "nodes": (None, "node"),
    "parameters": ("additionalProperties", "table_value"),
}
#: The nested schema's lists of nodes: at the top (and in composites there), in a block body.
_NESTED_NODE_LISTS = ("nodes", "nodes_in_block")


def _said_by_min_length(error: jsonschema.ValidationError) -> bool:
    """An empty string that ``minLength`` refuses is not also reported as not matching a pattern."""
    schema = error.schema
    return (
        error.validator == "pattern"
        and error.instance == ""
        and isinstance(schema, dict)
        and bool(schema.get("minLength"))
    )


def _message(error: jsonschema.ValidationError, limit: int = 200) -> str:
    """The error's message, with a long quoted value at its start cut short (jsonschema quotes
    the whole value, which may be a megabyte of the document)."""
    message = str(error.message)
    if len(message) <= limit:
        return message
    quoted = repr(error.instance)
    if len(quoted) > limit and message.startswith(quoted):
        return f"{quoted[: limit - 3]}...{message[len(quoted) :]}"
    return message


_SCALAR = frozenset({"boolean", "integer", "number", "string", "null"})


def _schema_validator(blobs: dict[str, Blob], defs: dict[str, Any]) -> Any:
    """The 2020-12 validator, changed in three ways that keep its verdicts and messages:

    * ``pattern`` knows that the parser's blob placeholders stand for their text
      (:func:`~trama.format._jsontext.parse_json` replaces long base64 ``data`` strings by
      placeholders to save memory), and checks the original bytes instead, with no copy (a run
      left in a large file answers the base64 pattern from what the scan saw); and
      its ``$`` means the end of the string, as in JSON Schema's regular expressions (Python's
      also matches before a final newline, which would let ``"Linear\\n"`` pass);
    * ``anyOf`` whose branches each state a type descends only into the branch that fits the
      value, the one whose errors :func:`_specific_errors` would report anyway;
    * a list value (``$defs/list``) is walked with a stack, not recursively.
    """
    import jsonschema  # only to explain a document that fails: the proof needs none of it

    base = jsonschema.Draft202012Validator
    plain_any_of = base.VALIDATORS["anyOf"]
    plain_ref = base.VALIDATORS["$ref"]

    def pattern(validator: Any, regex: str, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
        if not isinstance(instance, str):
            return
        blob = blobs.get(instance) if blobs else None
        if blob is None:
            if _compiled(regex).search(instance) is None:
                yield jsonschema.ValidationError(_pattern_message(regex, instance))
        elif not _blob_matches(blob, regex):
            yield jsonschema.ValidationError(f"the {len(blob)}-character string does not match {regex!r}")

    def branch_types(branch: Any) -> list[str] | None:
        if type(branch) is dict and "type" in branch:
            declared = branch["type"]
        elif type(branch) is dict and branch.keys() == {"$ref"} and branch["$ref"].startswith("#/$defs/"):
            declared = defs.get(branch["$ref"].removeprefix("#/$defs/"), {}).get("type")
        else:
            return None
        if declared is None:
            return None
        return [declared] if isinstance(declared, str) else list(declared)

    def any_of(validator: Any, branches: list[Any], instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
        types = [branch_types(branch) for branch in branches]
        if all(declared is not None for declared in types):
            fitting = [
                k for k, declared in enumerate(types) if any(validator.is_type(instance, t) for t in declared or ())
            ]
            if len(fitting) == 1:
                yield from validator.descend(instance, branches[fitting[0]], schema_path=fitting[0])
                return
            if not fitting:
                yield jsonschema.ValidationError(f"{instance!r} is not valid under any of the given schemas")
                return
        yield from plain_any_of(validator, branches, instance, schema)

    def ref(validator: Any, reference: str, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
        if reference == "#/$defs/list" and type(instance) is list:
            yield from _list_errors(validator, instance)
        else:
            yield from plain_ref(validator, reference, instance, schema)

    return jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        base, {"pattern": pattern, "anyOf": any_of, "$ref": ref}
    )


def _blob_matches(blob: Blob, regex: str) -> bool:
    """Whether a lifted run matches a schema pattern. A run left in a file is read only for a
    pattern other than base64's, which the scan answered already."""
    if isinstance(blob, (TextRun, DecodedRun)):
        if regex == BASE64_PATTERN:
            return blob.well_formed
        blob = bytes(blob)
    return re.search(regex.encode("ascii"), blob) is not None


def _pattern_message(regex: str, instance: str) -> str:
    """jsonschema's message for a string that does not match, unless the string is a well-formed
    dotted identifier with too many segments: then the limit it breaks is named (a tree nested
    400 deep would otherwise read as thousands of ids that "do not match" a long pattern)."""
    limit = _SEGMENT_LIMITS.get(regex)
    if limit is not None and DOTTED_ID.match(instance) and depth_of(instance) > limit:
        if limit == MAX_NODE_DEPTH:
            return (
                f"{shown_name(instance)} has {depth_of(instance)} segments: the tree nests deeper than "
                f"{MAX_NODE_DEPTH} levels, the most a document may"
            )
        return f"{shown_name(instance)} has {depth_of(instance)} segments; at most {limit} are allowed"
    return f"{instance!r} does not match {regex!r}"


_SEGMENT_LIMITS = {NODE_ID_PATTERN: MAX_NODE_DEPTH, ENTRY_NAME_PATTERN: MAX_ENTRY_SEGMENTS}


def _list_errors(validator: Any, value: list[Any]) -> Iterator[jsonschema.ValidationError]:
    """A list value's errors as ``$defs/list`` gives them (its items are scalars, sizes or
    lists), found with a stack: JSON lets a list nest as deep as the parser allows. An object
    with ``size`` is meant as a size and is checked against ``$defs/size``; any other object
    is no item a list may hold."""
    import jsonschema

    stack: list[tuple[list[Any], tuple[int, ...]]] = [(value, ())]
    while stack:
        items, path = stack.pop()
        for k, item in enumerate(items):
            kind = type(item)
            if kind is list:
                stack.append((item, (*path, k)))
            elif kind is dict:
                if "size" not in item:
                    yield jsonschema.ValidationError(
                        f"{item!r} is not valid under any of the given schemas", path=[*path, k], instance=item
                    )
                    continue
                for error in validator.descend(item, {"$ref": "#/$defs/size"}):
                    error.path.extendleft(reversed((*path, k)))
                    yield error


@functools.lru_cache(maxsize=64)
def _compiled(regex: str) -> re.Pattern[str]:
    """A schema pattern with its final ``$`` read as JSON Schema reads it: the end of the string."""
    if regex.endswith("$") and not regex.endswith("\\$"):
        regex = regex[:-1] + r"\Z"
    return re.compile(regex)


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
    """The branch cannot be the one meant: the value is not of its type, or not its one constant
    (a reference's node is ``"%input"`` or an id: a bad id is judged as an id)."""
    return error.validator in ("type", "const") and not error.relative_path


def _branch_rank(errors: list[jsonschema.ValidationError]) -> tuple[int, int]:
    return -max(len(error.relative_path) for error in errors), len(errors)


def _document_order(data: Any) -> Callable[[list[Any]], list[int]]:
    """A sort key: the position of a location (a path of keys and indexes) in the document, as
    one index per level (objects keep their text order, so a key's index in its object is its
    place in the file)."""
    key_indexes: dict[int, dict[str, int]] = {}

    def position(path: list[Any]) -> list[int]:
        place: list[int] = []
        value = data
        for token in path:
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


def _model_errors(model: Model) -> list[TramaError]:
    """The model's structural errors, located in the text it was read from (a nested document's
    in its nested text, :attr:`~trama.format.Model.source_places`)."""
    errors = collect_errors(model)
    if model.source_places is not None:
        for error in errors:
            model.source_places.locate(error)
    return errors


def _relocated(problems: list[Problem], model: Model) -> list[Problem]:
    """Problems found on the model (``then``'s), located as :func:`_model_errors` locates."""
    places = model.source_places
    if places is None:
        return problems
    located = []
    for problem in problems:
        error = TramaError(problem.message, location=problem.location, node_id=problem.node)
        located.append(Problem.of(places.locate(error)))
    return located


def _tensor_problems(model: Model) -> list[Problem]:
    """Decode every tensor once, so corrupt base64, bad bool bytes or a changed external file
    are found now rather than when the model is first run. Each is decoded and verified for
    the check alone and let go (:meth:`~trama.format.Tensor.read`): the model keeps none, so
    a model with many large tensors is checked holding one at a time."""
    problems = []
    tensors = [entry.value for entry in model.parameters.values() if isinstance(entry.value, Tensor)]
    with progress_line(None, "checking tensors", sum(tensor.nbytes for tensor in tensors)) as line:
        for tensor in tensors:
            try:
                tensor.read()
            except TramaError as exc:
                problems.append(Problem.of(exc))
            line.advance(tensor.nbytes)
    return problems
