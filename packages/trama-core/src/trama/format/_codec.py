"""Between parsed JSON (dicts and lists) and :class:`~trama.Model`, in both directions.

Decoding checks the shape of every field as it goes and reports the first mismatch with its
JSON Pointer location; it never trusts a value's type. Older formats are first brought to the
current shape by :mod:`trama.format._legacy`. Structural rules that span nodes live in
:mod:`trama.format._validation`, not here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from trama.errors import FormatVersionError, SchemaError, TramaError, ValidationError, WriteError, pointer_token
from trama.format._compact import encode_fact, encode_symbols
from trama.format._expand import expand_document
from trama.format._jsontext import Blob
from trama.format._legacy import upgrade_legacy
from trama.format._model import Model, Node, Parameter, Ref, ValueFact, parent_of
from trama.format._names import MAX_NODE_DEPTH, depth_of, is_op_name, op_name_problem, shown_name
from trama.format._sizes import SizeExpr, SymbolRange, has_sizes
from trama.format._stack import in_nested_room
from trama.format._tensor import CHECKSUM, MAX_RANK, Tensor, TensorSource, check_shape, inline_checksum
from trama.version import FORMAT_MAJOR, FORMAT_MINOR, FORMAT_VERSION, LEGACY_FORMAT_VERSIONS

__all__ = [
    "MAX_FACT_DIM",
    "ExternalResolver",
    "check_flat_writable",
    "decode_document",
    "encode_document",
    "fact_shape_problem",
    "parse_format_version",
]

#: Turns an ``external`` tensor reference into a byte source: ``(reference, dtype, shape, location)``.
ExternalResolver = Callable[[Any, str, tuple[int, ...], str], TensorSource]

#: Lists and metadata nest at most this deep: reading and writing them recurse, and data nested
#: about a thousand levels deep would exhaust Python's stack (RecursionError) instead.
MAX_DEPTH = 100
#: The largest size a fact may give a dimension: what a signed 64-bit integer holds, the index
#: type of every framework (a larger one would surface as a raw error deep inside one).
MAX_FACT_DIM = 2**63 - 1
_VERSION = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\Z")
_TOP_KEYS = frozenset(
    {
        "format_version",
        "metadata",
        "opsets",
        "inputs",
        "input_facts",
        "symbols",
        "outputs",
        "output_facts",
        "nodes",
        "parameters",
    }
)
_NODE_KEYS = frozenset({"id", "parent", "op", "inputs", "outputs", "parameters", "output_bindings", "metadata"})
_REQUIRED_NODE_KEYS = ("id", "parent", "op", "inputs", "outputs", "parameters", "output_bindings")
#: A calling node (``docs/format.md``, "Calling nodes") has ``calls`` in place of the two members
#: that describe a node's own contents: those are its target's.
_CALL_KEYS = frozenset({"id", "parent", "op", "calls", "inputs", "outputs", "metadata"})
_REQUIRED_CALL_KEYS = ("id", "parent", "op", "calls", "inputs", "outputs")
_NOT_IN_CALLS = ("parameters", "output_bindings")
#: The first format version with calling nodes.
_CALLS_SINCE = (1, 1)
#: The first format version whose parameter entries may carry a ``checksum``.
_CHECKSUM_SINCE = (1, 2)
#: The first format version whose nodes are nested, with blocks (``trama.format._expand``).
NESTED_SINCE = (1, 3)
#: The last format version of the flat shape, which :func:`encode_document` writes.
FLAT_VERSION = "1.2"
_ENTRY_KEYS = frozenset({"value", "learnable", "checksum"})
#: The members of a symbol's range (``"symbols": {"seq": {"min": 1, "max": 64}}``).
_RANGE_KEYS = frozenset({"min", "max"})


def parse_format_version(raw: Any) -> tuple[int, int]:
    """Read ``format_version`` and refuse versions this reader cannot honour."""
    if type(raw) is not dict:
        raise SchemaError(f"a trama document is a JSON object, got {_json_type(raw)}", location="")
    version = raw.get("format_version")
    if type(version) is not str or not _VERSION.match(version):
        raise FormatVersionError(
            f"format_version must be a string like {FORMAT_VERSION!r}, got {version!r}",
            location="/format_version",
        )
    major, minor = (int(part) for part in version.split("."))
    if major > FORMAT_MAJOR:
        raise FormatVersionError(
            f"this file uses format {version}, but this trama reads formats up to "
            f"{FORMAT_MAJOR}.x (it writes {FORMAT_VERSION}); upgrade trama to read it",
            location="/format_version",
        )
    if major < FORMAT_MAJOR and version not in LEGACY_FORMAT_VERSIONS:
        raise FormatVersionError(
            f"unknown format version {version}; this trama reads {', '.join(LEGACY_FORMAT_VERSIONS)} "
            f"and {FORMAT_MAJOR}.x",
            location="/format_version",
        )
    return major, minor


@in_nested_room
def decode_document(
    raw: Any,
    *,
    resolve_external: ExternalResolver | None = None,
    blobs: Mapping[str, Blob] | None = None,
) -> Model:
    """Build a :class:`Model` from parsed JSON, checking every field's type and shape.

    ``blobs`` maps the placeholders :func:`trama.format._jsontext.parse_json` left in ``"data"``
    fields to the base64 text they stand for.
    """
    major, minor = parse_format_version(raw)
    source_version = f"{major}.{minor}"
    if (major, minor) >= NESTED_SINCE:
        raw, places = expand_document(raw, strict=minor <= FORMAT_MINOR)
        try:
            model = _decode_flat(raw, major, minor, source_version, resolve_external, blobs)
        except TramaError as error:
            raise places.locate(error) from None
        model.source_places = places
        places.relocate_tensors(model.parameters)
        return model
    if major < FORMAT_MAJOR:
        raw = upgrade_legacy(raw, source_version)
    return _decode_flat(raw, major, minor, source_version, resolve_external, blobs)


def _decode_flat(
    raw: Any,
    major: int,
    minor: int,
    source_version: str,
    resolve_external: ExternalResolver | None,
    blobs: Mapping[str, Blob] | None,
) -> Model:
    """Decode a document of the flat shape (format 1.2, or a 1.3 one expanded)."""
    # A newer minor may carry optional fields this reader does not know; they are ignored.
    strict = minor <= FORMAT_MINOR or major < FORMAT_MAJOR
    if strict:
        _no_unknown_keys(raw, _TOP_KEYS, "")
    calls = (major, minor) >= _CALLS_SINCE
    checksums = (major, minor) >= _CHECKSUM_SINCE
    decoder = _Decoder(
        resolve_external,
        strict,
        blobs or {},
        None if calls else source_version,
        None if checksums else source_version,
    )
    inputs = decoder.names(_field(raw, "inputs", ""), "/inputs")
    outputs = decoder.ref_list(_field(raw, "outputs", ""), "/outputs")
    nodes = decoder.nodes(_field(raw, "nodes", ""))
    parameters = decoder.parameters(_field(raw, "parameters", ""))
    return Model(
        inputs=inputs,
        outputs=outputs,
        nodes=nodes,
        parameters=parameters,
        metadata=decoder.metadata(raw.get("metadata", {}), "/metadata"),
        opsets=decoder.opsets(raw.get("opsets", {})),
        input_facts=decoder.facts(raw.get("input_facts"), len(inputs), "/input_facts"),
        output_facts=decoder.facts(raw.get("output_facts"), len(outputs), "/output_facts"),
        symbols=decoder.symbols(raw["symbols"]) if "symbols" in raw else None,
        source_format_version=source_version,
    )


def _plain_ref(value: Any) -> Ref | None:
    """A well-formed ``{"node": str, "output": str}`` as a Ref, else ``None``."""
    if type(value) is dict and len(value) == 2:
        node = value.get("node")
        output = value.get("output")
        if type(node) is str and type(output) is str:
            return Ref(node, output)
    return None


def _plain_refs(value: Any) -> dict[str, Ref] | None:
    if type(value) is not dict:
        return None
    refs = {}
    for port, item in value.items():
        ref = _plain_ref(item)
        if ref is None:
            return None
        refs[port] = ref
    return refs


def _plain_node(raw: Any, good_ops: set[str]) -> Node | None:
    """Decode the common node (seven fields, all well-typed) quickly, or return ``None``.

    Loading a large graph spends most of its time here. This accepts only what
    :meth:`_Decoder.node` accepts and leaves everything else (metadata, newer fields, any
    error) to it, so error messages and their locations come from one place. ``good_ops``
    holds the op names already found well-formed: a graph has few distinct ones.
    """
    if type(raw) is not dict or len(raw) != 7:
        return None
    try:
        node_id = raw["id"]
        parent = raw["parent"]
        op = raw["op"]
        outputs = raw["outputs"]
        slots = raw["parameters"]
        bindings = raw["output_bindings"]
        inputs = _plain_refs(raw["inputs"])
    except KeyError:
        return None
    if (
        inputs is None
        or type(node_id) is not str
        or type(op) is not str
        or not op
        or type(outputs) is not list
        or type(slots) is not dict
    ):
        return None
    if op not in good_ops:
        if not is_op_name(op):
            return None
        good_ops.add(op)
    if node_id.count(".") >= MAX_NODE_DEPTH:
        return None
    head, dot, _ = node_id.rpartition(".")
    if parent != (head if dot else None) or type(parent) not in (str, type(None)):
        return None
    for output in outputs:
        if type(output) is not str:
            return None
    parameters = {}
    for slot, ref in slots.items():
        if type(ref) is not dict or len(ref) != 1:
            return None
        name = ref.get("name")
        if type(name) is not str:
            return None
        parameters[slot] = name
    if bindings is None:
        return Node(node_id, op, inputs, outputs, parameters, None, None)
    output_bindings = _plain_refs(bindings)
    if output_bindings is None:
        return None
    return Node(node_id, op, inputs, outputs, parameters, output_bindings, None)


def _json_type(value: Any) -> str:
    return {
        dict: "an object",
        list: "an array",
        str: "a string",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def _field(obj: dict[str, Any], key: str, where: str) -> Any:
    try:
        return obj[key]
    except KeyError:
        raise SchemaError(f"missing required field {key!r}", location=where or "/") from None


def _no_unknown_keys(obj: dict[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = obj.keys() - allowed
    if unknown:
        raise SchemaError(f"unknown field(s) {sorted(unknown)} (allowed: {sorted(allowed)})", location=where or "/")


class _Decoder:
    """One decoding pass; methods take the raw value and its JSON Pointer location."""

    def __init__(
        self,
        resolve_external: ExternalResolver | None,
        strict: bool,
        blobs: Mapping[str, Blob],
        without_calls: str | None = None,
        without_checksums: str | None = None,
    ) -> None:
        self.resolve_external = resolve_external
        self.strict = strict
        self.blobs = blobs
        #: The document's version when it predates calling nodes (``None``: calls are allowed).
        self.without_calls = without_calls
        #: The document's version when it predates entry checksums (``None``: they are allowed).
        self.without_checksums = without_checksums
        self.good_ops: set[str] = set()

    def names(self, value: Any, where: str) -> list[str]:
        if type(value) is not list:
            raise SchemaError(f"must be an array of strings, got {_json_type(value)}", location=where)
        for k, item in enumerate(value):
            if type(item) is not str:
                raise SchemaError(f"must be a string, got {_json_type(item)}", location=f"{where}/{k}")
        return value

    def ref(self, value: Any, where: str) -> Ref:
        ref = _plain_ref(value)
        if ref is not None:
            return ref
        raise SchemaError(f'a reference is {{"node": string, "output": string}}, got {_short(value)}', location=where)

    def ref_list(self, value: Any, where: str) -> list[Ref]:
        if type(value) is not list:
            raise SchemaError(f"must be an array of references, got {_json_type(value)}", location=where)
        return [self.ref(item, f"{where}/{k}") for k, item in enumerate(value)]

    def ref_map(self, value: Any, where: str) -> dict[str, Ref]:
        if type(value) is not dict:
            raise SchemaError(f"must be an object of references, got {_json_type(value)}", location=where)
        ref = self.ref
        return {port: ref(item, f"{where}/{pointer_token(port)}") for port, item in value.items()}

    def nodes(self, value: Any) -> list[Node]:
        if type(value) is not list:
            raise SchemaError(f"must be an array of nodes, got {_json_type(value)}", location="/nodes")
        result: list[Node] = []
        append = result.append
        good_ops = self.good_ops
        for i, raw in enumerate(value):
            node = _plain_node(raw, good_ops)
            if node is None:  # anything unusual, valid or not, takes the careful path
                if type(raw) is not dict:
                    raise SchemaError(f"a node is an object, got {_json_type(raw)}", location=f"/nodes/{i}")
                node = self.node(raw, f"/nodes/{i}")
            append(node)
        return result

    def node(self, raw: dict[str, Any], here: str) -> Node:
        calling = "calls" in raw
        if calling:
            self.check_call_members(raw, here)
        elif len(raw) != 7 or "metadata" in raw:
            for key in _REQUIRED_NODE_KEYS:
                _field(raw, key, here)
            if self.strict:
                _no_unknown_keys(raw, _NODE_KEYS, here)
        try:
            node_id = raw["id"]
            parent = raw["parent"]
            op = raw["op"]
            outputs = raw["outputs"]
            slots = {} if calling else raw["parameters"]
            bindings = None if calling else raw["output_bindings"]
            inputs = self.ref_map(raw["inputs"], f"{here}/inputs")
        except KeyError as exc:
            raise SchemaError(f"missing required field {exc.args[0]!r}", location=here) from None
        if type(node_id) is not str:
            raise SchemaError(f"id must be a string, got {_json_type(node_id)}", location=f"{here}/id")
        if depth_of(node_id) > MAX_NODE_DEPTH:
            raise SchemaError(
                f"node id has {depth_of(node_id)} segments: the tree nests deeper than {MAX_NODE_DEPTH} levels, "
                "the most a document may",
                location=f"{here}/id",
            )
        if parent is not None and type(parent) is not str:
            raise SchemaError(f"parent must be a string or null, got {_json_type(parent)}", location=f"{here}/parent")
        if parent != parent_of(node_id):
            raise ValidationError(
                f"parent must be the dotted prefix of the id ({parent_of(node_id)!r}), got {parent!r}",
                location=f"{here}/parent",
                node_id=node_id,
            )
        if type(op) is not str or not op:
            raise SchemaError(f"op must be a non-empty string, got {_short(op)}", location=f"{here}/op")
        problem = op_name_problem(op)
        if problem is not None:
            raise SchemaError(f"op {shown_name(op)} {problem}", location=f"{here}/op")
        self.names(outputs, f"{here}/outputs")
        if type(slots) is not dict:
            raise SchemaError(f"parameters must be an object, got {_json_type(slots)}", location=f"{here}/parameters")
        parameters: dict[str, str] = {}
        for slot, ref in slots.items():
            name = ref.get("name") if type(ref) is dict and len(ref) == 1 else None
            if type(name) is not str:
                raise SchemaError(
                    f'a parameter slot is {{"name": string}}, got {_short(ref)}',
                    location=f"{here}/parameters/{pointer_token(slot)}",
                )
            parameters[slot] = name
        output_bindings = None if bindings is None else self.ref_map(bindings, f"{here}/output_bindings")
        metadata = raw.get("metadata")
        if metadata is not None:
            metadata = self.metadata(metadata, f"{here}/metadata")
        calls = raw["calls"] if calling else None
        if calling and type(calls) is not str:
            raise SchemaError(f"calls must be a node id (a string), got {_short(calls)}", location=f"{here}/calls")
        return Node(node_id, op, inputs, outputs, parameters, output_bindings, metadata, calls)

    def check_call_members(self, raw: dict[str, Any], here: str) -> None:
        """A calling node's members: those of a node minus its own contents, plus ``calls``.

        ``parameters`` and ``output_bindings`` are refused even in a newer minor (where unknown
        members are ignored): they are known members, and on a call they would be ambiguous.
        """
        if self.without_calls is not None:
            raise SchemaError(
                f"'calls' is new in format {_CALLS_SINCE[0]}.{_CALLS_SINCE[1]}; "
                f"this document declares format {self.without_calls}",
                location=f"{here}/calls",
            )
        for key in _REQUIRED_CALL_KEYS:
            _field(raw, key, here)
        for key in _NOT_IN_CALLS:
            if key in raw:
                raise SchemaError(
                    f"a calling node has no {key}: it computes with those of the node it calls",
                    location=f"{here}/{key}",
                )
        if self.strict:
            _no_unknown_keys(raw, _CALL_KEYS, here)

    def parameters(self, value: Any) -> dict[str, Parameter]:
        if type(value) is not dict:
            raise SchemaError(f"must be an object, got {_json_type(value)}", location="/parameters")
        table: dict[str, Parameter] = {}
        for name, entry in value.items():
            where = f"/parameters/{pointer_token(name)}"
            if type(entry) is not dict or "value" not in entry or type(entry.get("learnable")) is not bool:
                raise SchemaError(
                    f'a parameter entry is {{"value": ..., "learnable": boolean}}, got {_short(entry)}',
                    location=where,
                )
            checksum = None
            if len(entry) != 2:
                if "checksum" in entry:
                    checksum = self.checksum(entry, where)
                if self.strict:
                    _no_unknown_keys(entry, _ENTRY_KEYS, where)
            raw = entry["value"]
            if checksum is not None:
                parameter_value: Any = self.tensor(raw, f"{where}/value", checksum=checksum, entry=name)
            else:
                parameter_value = self.value(raw, f"{where}/value")
            table[name] = Parameter(parameter_value, entry["learnable"])
        return table

    def checksum(self, entry: dict[str, Any], where: str) -> str:
        """An entry's ``checksum`` (new in 1.2): well-formed, and beside an inline tensor."""
        here = f"{where}/checksum"
        if self.without_checksums is not None:
            raise SchemaError(
                f"'checksum' is new in format {_CHECKSUM_SINCE[0]}.{_CHECKSUM_SINCE[1]}; "
                f"this document declares format {self.without_checksums}",
                location=here,
            )
        checksum = entry["checksum"]
        if type(checksum) is not str or not CHECKSUM.match(checksum):
            raise SchemaError(
                f"a checksum is 'xxh3-64:' and 16 hexadecimal digits, or 'sha256:' and 64, got {_short(checksum)}",
                location=here,
            )
        value = entry["value"]
        if type(value) is not dict or "data" not in value:
            kind = "an external tensor, which has its own" if type(value) is dict and "external" in value else None
            raise SchemaError(
                "a checksum belongs beside an inline tensor (a value with 'data'); this entry's value is "
                f"{kind or 'not one'}",
                location=here,
            )
        return checksum

    def value(self, value: Any, where: str) -> Any:
        kind = type(value)
        if kind is dict:
            if "size" in value:
                return size_value(value, where)
            return self.tensor(value, where)
        if kind is list:
            return self.list_value(value, where)
        if kind is float and not math.isfinite(value):
            raise SchemaError(f"{value} is not a JSON number", location=where)
        if value is None or kind in (bool, int, float, str):
            return value
        raise SchemaError(f"unsupported value {_short(value)}", location=where)  # pragma: no cover

    def list_value(self, value: list[Any], where: str, depth: int = 1) -> list[Any]:
        """Lists (``kernel_size``, ``normalized_shape``...) hold scalars, sizes and lists, no
        tensors. A list is kept as it was read unless it holds a size: then it is a new list, each
        ``{"size": text}`` in it a :class:`SizeExpr` (the parsed data is never changed)."""
        if depth > MAX_DEPTH:
            raise SchemaError(f"a list value nests more than {MAX_DEPTH} levels deep", location=where)
        result = value
        for k, item in enumerate(value):
            kind = type(item)
            if kind is list:
                inner = self.list_value(item, f"{where}/{k}", depth + 1)
                if inner is not item:
                    if result is value:
                        result = list(value)
                    result[k] = inner
            elif kind is dict:
                if "size" not in item:
                    raise SchemaError(
                        'a list value may hold scalars, lists and sizes ({"size": text}), not other objects',
                        location=f"{where}/{k}",
                    )
                if result is value:
                    result = list(value)
                result[k] = size_value(item, f"{where}/{k}")
            elif kind is float and not math.isfinite(item):
                raise SchemaError(f"{item} is not a JSON number", location=f"{where}/{k}")
        return result

    def tensor(
        self, value: dict[str, Any], where: str, *, checksum: str | None = None, entry: str | None = None
    ) -> Tensor:
        keys = value.keys()
        if keys == {"dtype", "shape", "data"}:
            data = value["data"]
            if self.blobs and type(data) is str and data[:1] == "\x00":
                data = self.blobs.get(data, data)
            return Tensor.from_base64(
                value["dtype"], value["shape"], data, location=where, checksum=checksum, entry=entry
            )
        if keys == {"dtype", "shape", "external"}:
            from trama.format._dtypes import numpy_dtype

            numpy_dtype(value["dtype"], location=where)
            shape = check_shape(value["shape"], location=where)
            if self.resolve_external is None:
                from trama.format._external import UnresolvedExternal, check_reference

                check_reference(value["external"], f"{where}/external")
                source: TensorSource = UnresolvedExternal(where)
            else:
                source = self.resolve_external(value["external"], value["dtype"], shape, where)
            return Tensor(value["dtype"], shape, source=source, location=where)
        raise SchemaError(
            'a tensor is {"dtype", "shape", "data"} or {"dtype", "shape", "external"}, '
            f"got the fields {sorted(keys)}",
            location=where,
        )

    def metadata(self, value: Any, where: str) -> dict[str, Any]:
        if type(value) is not dict:
            raise SchemaError(f"metadata must be an object, got {_json_type(value)}", location=where)
        _check_depth(value, where)
        if self.blobs:
            restored = self.restore_blobs(value, where)
            assert isinstance(restored, dict)
            return restored
        return value

    def restore_blobs(self, value: Any, where: str) -> Any:
        """Put back long ``"data"`` strings the parser lifted out of free-form metadata (only
        runs of base64 characters are lifted, so each is plain ASCII text)."""
        if type(value) is dict:
            return {key: self.restore_blobs(item, where) for key, item in value.items()}
        if type(value) is list:
            return [self.restore_blobs(item, where) for item in value]
        if type(value) is str and value[:1] == "\x00" and value in self.blobs:
            return bytes(self.blobs[value]).decode("ascii")
        return value

    def opsets(self, value: Any) -> dict[str, int]:
        if type(value) is not dict:
            raise SchemaError(f"opsets must be an object, got {_json_type(value)}", location="/opsets")
        for name, version in value.items():
            problem = op_name_problem(name)
            if problem is not None:
                raise SchemaError(
                    f"opset namespace {shown_name(name)} {problem}", location=f"/opsets/{pointer_token(name)}"
                )
            if type(version) is not int or version < 1:
                raise SchemaError(
                    f"opset version must be a positive integer, got {_short(version)}",
                    location=f"/opsets/{pointer_token(name)}",
                )
        return value

    def symbols(self, value: Any) -> dict[str, SymbolRange]:
        """The top-level ``symbols``: each symbol's range, ``{"min"?: integer, "max"?: integer}``,
        each bound from 0 to 2**63 - 1. That each symbol is named by an input fact and that
        ``min <= max`` are structural rules (:mod:`trama.format._validation`)."""
        if type(value) is not dict:
            raise SchemaError(
                f'symbols must be an object: symbol -> {{"min"?, "max"?}}, got {_json_type(value)}', location="/symbols"
            )
        ranges: dict[str, SymbolRange] = {}
        for name, bounds in value.items():
            here = f"/symbols/{pointer_token(name)}"
            if type(bounds) is not dict or not bounds.keys() <= _RANGE_KEYS:
                raise SchemaError(
                    f'a symbol\'s range is {{"min"?: integer, "max"?: integer}}, got {_short(bounds)}', location=here
                )
            for key, bound in bounds.items():
                if type(bound) is not int or not 0 <= bound <= MAX_FACT_DIM:
                    raise SchemaError(
                        f"{key} must be an integer from 0 to 2**63 - 1, got {_short(bound)}", location=f"{here}/{key}"
                    )
            ranges[name] = SymbolRange(bounds.get("min"), bounds.get("max"))
        return ranges

    def facts(self, value: Any, count: int, where: str) -> list[ValueFact | None] | None:
        if value is None:
            return None
        if type(value) is not list or len(value) != count:
            raise SchemaError(f"must be an array of {count} facts (one per entry), got {_short(value)}", location=where)
        facts: list[ValueFact | None] = []
        for k, fact in enumerate(value):
            here = f"{where}/{k}"
            if fact is None:
                facts.append(None)
                continue
            if type(fact) is not dict or not fact.keys() <= {"dtype", "shape"}:
                raise SchemaError(f'a fact is {{"dtype"?, "shape"?}}, got {_short(fact)}', location=here)
            dtype = fact.get("dtype")
            if dtype is not None:
                from trama.format._dtypes import numpy_dtype

                numpy_dtype(dtype, location=f"{here}/dtype")
            shape = fact.get("shape")
            if shape is not None:
                found = fact_shape_problem(shape)
                if found is not None:
                    message, dim = found
                    raise SchemaError(message, location=f"{here}/shape" if dim is None else f"{here}/shape/{dim}")
                shape = tuple(shape)
            facts.append(ValueFact(dtype, shape))
        return facts


def fact_shape_problem(shape: Any) -> tuple[str, int | None] | None:
    """What is wrong with a fact's ``shape`` and at which dimension (``None``: the whole shape),
    or ``None`` when it is well-formed: a list of at most :data:`MAX_RANK` dimensions, each a
    non-negative integer that fits a signed 64-bit integer or a non-empty dimension name."""
    if type(shape) not in (list, tuple) or not all(
        (type(d) is int and d >= 0) or (type(d) is str and d) for d in shape
    ):
        return f"a fact's shape lists non-negative integers and dimension names, got {_short(shape)}", None
    if len(shape) > MAX_RANK:
        return f"a fact's shape has {len(shape)} dimensions; at most {MAX_RANK} are allowed", None
    for k, dim in enumerate(shape):
        if type(dim) is int and dim > MAX_FACT_DIM:
            return f"dimension {_short(dim)} does not fit a signed 64-bit integer (at most 2**63 - 1)", k
    return None


def size_value(value: dict[str, Any], where: str) -> SizeExpr:
    """A setting value ``{"size": text}`` (``docs/format.md``, section 5.6): exactly that one
    member, whose text parses; anything else is a :class:`~trama.SchemaError` at ``where``."""
    if len(value) != 1:
        raise SchemaError(
            f'a size is {{"size": text}} with no other member, got the fields {_short(sorted(value))}', location=where
        )
    return SizeExpr.parse(value["size"], where)


def _check_depth(value: Any, where: str) -> None:
    """Refuse free-form data nested deeper than :data:`MAX_DEPTH`, level by level (no recursion)."""
    level = [value]
    for _ in range(MAX_DEPTH):
        level = [
            item
            for container in level
            for item in (container.values() if type(container) is dict else container)
            if type(item) in (dict, list)
        ]
        if not level:
            return
    raise SchemaError(f"nests more than {MAX_DEPTH} levels deep", location=where)


def _short(value: Any, limit: int = 60) -> str:
    """A value for an error message, cut so that a huge value cannot flood the terminal."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def encode_document(
    model: Model,
    tensor: Callable[[str, Tensor], dict[str, Any]],
    checksum: Callable[[str, Tensor], str] | None = None,
    *,
    nodes: Any = None,
) -> dict[str, Any]:
    """The JSON data of a model in the current format; ``tensor(name, t)`` encodes each tensor.

    An entry whose tensor is written inline records its checksum, ``checksum(name, t)``: by
    default computed here, which decodes the tensor; a writer that produces each tensor's base64
    later, one at a time, passes a placeholder and fills in the checksum then. A writer that
    writes the nodes' text itself (:mod:`trama.format._writer`) passes what stands for them in
    ``nodes``, so that no data is built for them."""
    if checksum is None:
        checksum = _inline_checksum
    doc: dict[str, Any] = {"format_version": FLAT_VERSION}
    if model.metadata:
        doc["metadata"] = model.metadata
    if model.opsets:
        doc["opsets"] = model.opsets
    doc["inputs"] = list(model.inputs)
    if model.input_facts is not None:
        doc["input_facts"] = [encode_fact(f) for f in model.input_facts]
    if model.symbols is not None:
        doc["symbols"] = encode_symbols(model.symbols)
    doc["outputs"] = [_encode_ref(r) for r in model.outputs]
    if model.output_facts is not None:
        doc["output_facts"] = [encode_fact(f) for f in model.output_facts]
    doc["nodes"] = [encode_node(node) for node in model.nodes] if nodes is None else nodes
    doc["parameters"] = {name: _encode_entry(name, entry, tensor, checksum) for name, entry in model.parameters.items()}
    return doc


def check_flat_writable(model: Model) -> None:
    """Refuse to write ``model`` in the flat form of format 1.2 when it holds what 1.2 readers
    cannot read: a size (:class:`SizeExpr`) in a setting, or the ``symbols`` member (both new in
    1.3). :func:`encode_document` itself carries them, for the 1.3 reader's expansion and tests."""
    if model.symbols is not None:
        raise WriteError(
            f"format {FLAT_VERSION} has no 'symbols' (the ranges of the input symbols are new in "
            f"{NESTED_SINCE[0]}.{NESTED_SINCE[1]}); write this model in format {FORMAT_VERSION}",
            location="/symbols",
        )
    for name, entry in model.parameters.items():
        if has_sizes(entry.value):
            raise WriteError(
                f"format {FLAT_VERSION} has no sizes that depend on the inputs, and entry {name!r} holds one "
                f"({_short(entry.value)}); write this model in format {FORMAT_VERSION}",
                location=f"/parameters/{pointer_token(name)}/value",
            )


def _inline_checksum(name: str, tensor: Tensor) -> str:
    return inline_checksum(tensor)


def _encode_entry(
    name: str,
    entry: Parameter,
    tensor: Callable[[str, Tensor], dict[str, Any]],
    checksum: Callable[[str, Tensor], str],
) -> dict[str, Any]:
    """An entry; one holding a tensor written inline records the tensor's checksum (new in 1.2)."""
    value = entry.value
    encoded = {"value": _encode_value(name, value, tensor), "learnable": entry.learnable}
    if isinstance(value, Tensor) and "data" in encoded["value"]:
        encoded["checksum"] = checksum(name, value)
    return encoded


def _encode_ref(ref: Ref) -> dict[str, str]:
    return {"node": ref.node, "output": ref.output}


def encode_node(node: Node) -> dict[str, Any]:
    """A node's members in the order the format lists them; a calling node has ``calls`` after
    ``op`` and no ``parameters`` or ``output_bindings`` (validation has checked it has none)."""
    out: dict[str, Any] = {"id": node.id, "parent": node.parent, "op": node.op}
    if node.calls is not None:
        out["calls"] = node.calls
    out["inputs"] = {port: _encode_ref(ref) for port, ref in node.inputs.items()}
    out["outputs"] = list(node.outputs)
    if node.calls is None:
        out["parameters"] = {slot: {"name": key} for slot, key in node.parameters.items()}
        out["output_bindings"] = (
            None
            if node.output_bindings is None
            else {name: _encode_ref(ref) for name, ref in node.output_bindings.items()}
        )
    if node.metadata is not None:
        out["metadata"] = node.metadata
    return out


def _encode_value(name: str, value: Any, tensor: Callable[[str, Tensor], dict[str, Any]]) -> Any:
    if isinstance(value, Tensor):
        return tensor(name, value)
    if isinstance(value, (list, tuple)):
        return [_encode_value(name, item, tensor) for item in value]
    if isinstance(value, SizeExpr):
        return {"size": value.text}
    return value
