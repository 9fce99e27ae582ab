"""The fast readers against the careful one.

Each format has a fast reader: :mod:`trama.format._typed` for the flat form (format 1.0 to 1.2)
and :mod:`trama.format._typed_nested` for the nested one (1.3). A fast reader may only ever
accept what the careful reader (``parse_json`` + ``decode_document``, which expands a nested
document into the flat shape first, + ``structural_errors``) accepts, and build the same model;
when it says a document's structure is sound, ``structural_errors`` must find nothing.
Everything else it hands to the careful reader. These tests read thousands of fuzzed documents
both ways, in each form, and place a repeated key in every object of real documents, since the
fast readers find repeated keys by counting colons rather than by watching each object.
"""

from __future__ import annotations

import base64
import copy
import json
import random
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trama
from trama.errors import JSONError, TramaError
from trama.format._codec import decode_document
from trama.format._jsontext import lift_text, parse_json
from trama.format._typed import decode_typed
from trama.format._typed_nested import decode_nested
from trama.format._validation import structural_errors

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from reliability import fuzz_documents  # noqa: E402
from reliability.fuzzing import (  # noqa: E402
    HOSTILE_STRINGS,
    Pairs,
    Raw,
    mutate_json,
    mutate_text,
    random_string,
    render,
)

#: Fuzzed documents read both ways (a few seconds), in each form.
CASES = 3_000


def flat_seeds(seeds: list[fuzz_documents.Seed]) -> list[fuzz_documents.Seed]:
    """The fuzz seeds in the flat form (format 1.2, 1.1 and the legacy ones): the input of the
    flat typed reader."""
    return [seed for seed in seeds if seed.tree.get("format_version") != trama.FORMAT_VERSION]


def nested_seeds(seeds: list[fuzz_documents.Seed]) -> list[fuzz_documents.Seed]:
    """The fuzz seeds as trama writes them now, nested (format 1.3)."""
    return [seed for seed in seeds if seed.tree.get("format_version") == trama.FORMAT_VERSION]


def careful(text: bytes) -> trama.Model | TramaError:
    """What the careful reader makes of ``text``: the model, or the error it raises."""
    try:
        parsed = parse_json(text)
        return decode_document(parsed.data, blobs=parsed.blobs)
    except TramaError as error:
        return error


def fast(text: bytes) -> tuple[trama.Model, bool] | None:
    return decode_typed(lift_text(text), None)


def agree(text: bytes) -> str:
    """Check the two readers agree on ``text``; say which way it went."""
    typed = fast(text)
    reference = careful(text)
    if typed is None:
        return "careful"
    assert isinstance(reference, trama.Model), f"the fast reader accepted what the careful one refuses: {reference}"
    model, sound = typed
    assert _comparable(model) == _comparable(reference)
    assert model.source_format_version == reference.source_format_version
    if sound:
        assert structural_errors(reference) == []
        return "fast, sound"
    return "fast, unproven"


def _tensor_outcome(tensor: trama.Tensor) -> tuple[Any, ...]:
    """A tensor as what using it gives: its bytes, or the error decoding it raises."""
    try:
        array = tensor.numpy()
    except TramaError as error:
        return (tensor.dtype, tensor.shape, type(error).__name__, str(error))
    return (tensor.dtype, tensor.shape, array.tobytes())


def _comparable(model: trama.Model) -> Any:
    """Everything a model holds, tensors as what using them gives (an external tensor read
    without its folder raises, and a corrupted one fails its checksum: both ways alike)."""
    parameters = {
        name: (entry.learnable, _tensor_outcome(entry.value) if isinstance(entry.value, trama.Tensor) else entry.value)
        for name, entry in model.parameters.items()
    }
    return (
        model.inputs,
        model.outputs,
        model.nodes,
        parameters,
        model.metadata,
        model.opsets,
        model.input_facts,
        model.output_facts,
        model.source_format_version,
    )


@pytest.fixture(scope="module")
def all_seeds(tmp_path_factory: pytest.TempPathFactory) -> list[fuzz_documents.Seed]:
    return fuzz_documents.build_seeds(tmp_path_factory.mktemp("seeds"))


@pytest.fixture(scope="module")
def seeds(all_seeds: list[fuzz_documents.Seed]) -> list[fuzz_documents.Seed]:
    seeds = flat_seeds(all_seeds)
    assert {seed.tree.get("format_version") for seed in seeds} == {"0.1", "0.2", "1.1", "1.2"}
    return seeds


def test_fuzzed_documents_read_the_same_both_ways(seeds: list[fuzz_documents.Seed]) -> None:
    rng = random.Random(15)
    outcomes: dict[str, int] = {}
    for _ in range(CASES):
        seed = rng.choice(seeds)
        text, _ = fuzz_documents.mutate(seed, rng)
        way = agree(text)
        outcomes[way] = outcomes.get(way, 0) + 1
    # The fast reader took a real share of them, sound and not: the test is not vacuous.
    assert outcomes.get("fast, sound", 0) > CASES // 20, outcomes
    assert outcomes.get("fast, unproven", 0) > CASES // 100, outcomes
    assert outcomes.get("careful", 0) > CASES // 4, outcomes


def test_every_seed_is_read_fast_and_proven_sound(seeds: list[fuzz_documents.Seed]) -> None:
    for seed in seeds:
        text = seed.path.read_bytes()
        if not seed.tree.get("format_version", "").startswith("1."):
            assert fast(text) is None, seed.name  # older formats are upgraded by the careful path
            continue
        assert agree(text) == "fast, sound", seed.name


# --- repeated keys ------------------------------------------------------------------------------


def _objects(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    if type(value) is dict:
        yield path, value
        for key, item in value.items():
            yield from _objects(item, (*path, key))
    elif type(value) is list:
        for k, item in enumerate(value):
            yield from _objects(item, (*path, k))


def _with_repeat(tree: Any, target: tuple[Any, ...], key: str, same: bool) -> Any:
    """``tree`` with the object at ``target`` holding ``key`` twice (same or another value)."""
    if not target:
        members = list(tree.items())
        value = tree[key]
        repeat = value if same else _other(value)
        members.insert(len(members) // 2 + 1, (key, repeat))
        return Pairs(members)
    head, rest = target[0], target[1:]
    if type(tree) is dict:
        return {k: (_with_repeat(v, rest, key, same) if k == head else v) for k, v in tree.items()}
    return [(_with_repeat(v, rest, key, same) if k == head else v) for k, v in enumerate(tree)]


def _other(value: Any) -> Any:
    if type(value) is str:
        return value + "_"
    if type(value) is bool:
        return not value
    if type(value) is int:
        return value + 1
    return value


def _documents(seeds: list[fuzz_documents.Seed]) -> dict[str, Any]:
    """Documents with an object of every kind: metadata nested deep, node metadata, facts,
    composites, calls, inline tensors with checksums, external tensors, settings."""
    from reliability.models import linear_model

    model = linear_model(np.ones((2, 3), np.float32))
    model.metadata["notes"] = {"deep": {"deeper": [{"k:ey": "a:b", "n": 1}]}, "colons": ":::"}
    model.nodes[-1].metadata = {"torch_name": "fc-1", "extra": {"x": [1, {"y": None}]}}
    model.input_facts = [trama.ValueFact("float32", ("batch", 3))]
    documents = {"linear": json.loads(trama.dumps(model, format_version="1.2"))}
    for seed in seeds:
        if seed.name in ("torch_mlp", "torch_cnn", "calls", "settings", "external"):
            documents[seed.name] = seed.tree
    return documents


@pytest.mark.parametrize("same", [True, False], ids=["same value", "other value"])
def test_a_repeated_key_is_refused_in_every_object(seeds: list[fuzz_documents.Seed], same: bool) -> None:
    placed = 0
    kinds: set[str] = set()
    for name, tree in _documents(seeds).items():
        assert fast(render(tree)) is not None, name  # each document is read fast as it is
        for path, obj in _objects(tree):
            for key in obj:
                text = render(_with_repeat(tree, path, key, same), ascii_only=False)
                assert fast(text) is None, (name, path, key)
                with pytest.raises(JSONError, match="appears twice"):
                    trama.loads(text)
                placed += 1
            kinds.add(str(path[0]) if path else "top level")
    assert placed > 200
    assert {"top level", "nodes", "parameters", "metadata", "input_facts", "outputs"} <= kinds


def test_an_escaped_colon_sends_the_document_to_the_careful_reader() -> None:
    from reliability.models import linear_model

    model = linear_model(np.ones((2, 3), np.float32))
    model.metadata["note"] = "a:b"
    tree = json.loads(trama.dumps(model, format_version="1.2"))
    assert fast(trama.dumps(model, format_version="1.2").encode()) is not None
    good = trama.dumps(model, format_version="1.2").replace("a:b", "a\\u003ab").encode()
    assert fast(good) is None
    assert trama.loads(good).metadata == model.metadata
    # An escaped colon must not hide a repeated key, which the counting alone would miss.
    tree["metadata"] = Pairs([("note", "a\\u003Ab"), ("note", "c")])
    text = render(tree).replace(b"\\\\u003Ab", b"\\u003Ab")
    assert b"\\u003Ab" in text
    assert fast(text) is None
    with pytest.raises(JSONError, match="appears twice"):
        trama.loads(text)


@pytest.mark.parametrize("where", ["port", "output", "op", "id"])
def test_a_colon_in_a_typed_name_sends_the_document_to_the_careful_reader(where: str) -> None:
    # The typed records' strings are not counted with the members: a colon in one makes the
    # counts differ, and the careful reader reports the name (no valid name holds a colon).
    from reliability.models import linear_model

    tree = json.loads(trama.dumps(linear_model(np.ones((2, 3), np.float32)), format_version="1.2"))
    node = tree["nodes"][0]
    if where == "port":
        node["inputs"] = {"x:y": node["inputs"]["x"]}
    elif where == "output":
        node["outputs"] = ["y:z"]
    elif where == "op":
        node["op"] = "Linear:2"
    else:
        node["id"] = "lin:1"
    text = json.dumps(tree, indent=1).encode()
    assert fast(text) is None
    with pytest.raises(TramaError):
        trama.loads(text)


def test_numbers_and_strings_decode_exactly_as_the_standard_library_does() -> None:
    from reliability.models import linear_model

    rng = random.Random(7)
    model = linear_model(np.ones((2, 3), np.float32))
    values: list[Any] = [0.1, -0.0, 5e-324, 1.7976931348623157e308, 2**63, -(2**63) - 1, 10**40]
    values += [float(np.float32(rng.uniform(-1e6, 1e6))) for _ in range(300)]
    values += [rng.uniform(-1, 1) * 10 ** rng.randint(-300, 300) for _ in range(300)]
    values += ["é", "\u2028", "a\\b", 'q"q', "\t", "\U0001f600", "\x7f", "\x00"]
    model.metadata["values"] = values
    model.metadata["raw"] = "MARK"
    # Spellings json.dumps never writes: exponents, tiny and huge literals, escapes.
    raw = b'[1e-400, 1E5, 1.0e+2, -0, 0e0, 123456789012345678901234567890, "\\u00e9\\n\\/", "\\ud83d\\ude00"]'
    for version in ("1.2", "1.3"):
        text = trama.dumps(model, format_version=version).encode().replace(b'"MARK"', raw)
        read = fast(text) if version == "1.2" else fast_nested(text)
        assert read is not None, version
        metadata = read[0].metadata if isinstance(read, tuple) else read.metadata
        expected = json.loads(text)["metadata"]
        for key in ("values", "raw"):
            got = metadata[key]
            assert [(type(v), repr(v)) for v in got] == [(type(v), repr(v)) for v in expected[key]], version


def test_all_dotted_agrees_with_the_id_rule_on_every_kind_of_id() -> None:
    from trama.format._names import MAX_NODE_DEPTH
    from trama.format._validation import _dotted_problem, all_dotted

    rng = random.Random(3)
    alphabet = ["a", "Z", "0", "_", ".", ".", "\n", "é", " ", "-", "\x00"]
    ids = ["a", "a.b", "a..b", ".a", "a.", "", "a\nb", "\n", "a." * 255 + "a", "a." * 256 + "a", "x" * 256, "x" * 257]
    ids += [".".join(["s" * 256] * 2), "y" * 300 + ".b", "é"]
    ids += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(3000)]
    for node_id in ids:
        expected = _dotted_problem(node_id, MAX_NODE_DEPTH) is None
        assert all_dotted([node_id]) is expected, repr(node_id)
        assert all_dotted(["ok", node_id, "ok.fine"]) is expected, repr(node_id)
    assert all_dotted([]) is True


# ================================================================================================
# Format 1.3: the fast nested reader against the careful one
# ================================================================================================


def fast_nested(text: bytes) -> trama.Model | None:
    return decode_nested(lift_text(text), None)


def compact(value: Any, *, ascii_only: bool = True) -> bytes:
    """``value`` as JSON text without spaces, as trama writes format 1.3 (the fast nested reader
    looks for ``"format_version":"1.3"`` at the start), with :func:`render`'s markers: a
    :class:`Raw` text as it is, a :class:`Pairs` object with its repeated keys."""

    def text(item: Any) -> str:
        if isinstance(item, Raw):
            return item.text
        if isinstance(item, (dict, Pairs)):
            members = item.items() if isinstance(item, dict) else item
            return "{" + ",".join(f"{json.dumps(str(k), ensure_ascii=ascii_only)}:{text(v)}" for k, v in members) + "}"
        if isinstance(item, list):
            return "[" + ",".join(text(v) for v in item) + "]"
        return render(item, ascii_only=ascii_only).decode("utf-8", "surrogatepass")

    return text(value).encode("utf-8", "surrogatepass")


def agree_nested(text: bytes) -> str:
    """Check the fast nested reader and the careful one agree on ``text``; say which way it went.
    What the fast reader accepts it proves sound, as ``trama.load`` takes it."""
    model = fast_nested(text)
    reference = careful(text)
    if model is None:
        return "careful"
    assert isinstance(reference, trama.Model), f"the fast reader accepted what the careful one refuses: {reference}"
    assert _comparable(model) == _comparable(reference)
    assert structural_errors(reference) == []
    # and the careful reader of the plain parsed data (no lifted runs) reads the same model
    assert _comparable(decode_document(json.loads(text))) == _comparable(model)
    return "fast"


def stack_model(layers: int) -> trama.Model:
    """Equal composite layers (written as a block in 1.3), a setting and a tied weight."""
    x = trama.Ref(trama.INPUT, "x")
    nodes = [trama.Node("body", "Graph", {"x": x}, ["y"], {}, {}, {"class": "demo.Stack"})]
    table: dict[str, trama.Parameter] = {"tied": trama.Parameter(trama.Tensor.from_array(np.ones(3, np.float32)))}
    previous = x
    for i in range(layers):
        layer = f"body.layer_{i}"
        nodes.append(trama.Node(layer, "Graph", {"x": previous}, ["y"], {}, {"y": trama.Ref(f"{layer}.act", "y")}))
        nodes[-1].metadata = {"class": "demo.Layer"}
        slots = {"weight": f"{layer}.fc.weight", "width": f"{layer}.fc.width"}
        nodes.append(trama.Node(f"{layer}.fc", "Linear", {"x": x}, ["y"], slots))
        nodes.append(trama.Node(f"{layer}.act", "relu", {"x": trama.Ref(f"{layer}.fc", "y")}, ["y"]))
        weight = np.random.default_rng(i).standard_normal((3, 3)).astype(np.float32)
        table[f"{layer}.fc.weight"] = trama.Parameter(trama.Tensor.from_array(weight))
        table[f"{layer}.fc.width"] = trama.Parameter(3, learnable=False)
        previous = trama.Ref(layer, "y")
    nodes[0].output_bindings = {"y": previous}
    nodes.append(trama.Node("head", "mul", {"x": trama.Ref("body", "y")}, ["y"], {"other": "tied", "also": "tied"}))
    return trama.Model(["x"], [trama.Ref("head", "y")], nodes, table)


def _linear_nested() -> trama.Model:
    from reliability.models import linear_model

    model = linear_model(np.ones((2, 3), np.float32))
    model.metadata["notes"] = {"deep": {"deeper": [{"k:ey": "a:b", "n": 1}]}, "colons": ":::"}
    model.nodes[-1].metadata = {"class": "demo.layers.Linear", "torch_name": "fc-1", "extra": {"x": [1, {"y": None}]}}
    model.input_facts = [trama.ValueFact("float32", ("batch", 3))]
    model.output_facts = [trama.ValueFact(shape=("batch", 2))]
    model.opsets = {"trama": 2}
    return model


@pytest.fixture(scope="module")
def nested_documents(
    tmp_path_factory: pytest.TempPathFactory, all_seeds: list[fuzz_documents.Seed]
) -> dict[str, bytes]:
    """Texts of format 1.3 as trama writes them: the fuzz seeds, a model with metadata and facts
    of every kind, one with blocks, external weights, and random valid models (from
    ``test_writer``: names of every length, metadata of every kind, settings of every form)."""
    from test_writer import random_model

    documents = {seed.name: seed.text for seed in nested_seeds(all_seeds)}
    documents["linear"] = trama.dumps(_linear_nested()).encode()
    documents["stack"] = trama.dumps(stack_model(3)).encode()
    folder = tmp_path_factory.mktemp("weights")
    trama.dump(stack_model(2), folder / "stack.trama.json", weights="external")
    documents["stack_external"] = (folder / "stack.trama.json").read_bytes()
    rng = random.Random(5)
    for k in range(12):
        model = random_model(rng)
        # as trama.dump writes a file (a lone surrogate in a string as its escape)
        documents[f"random_{k}"] = trama.dumps(model).encode("utf-8", "backslashreplace")
    assert all(json.loads(text)["format_version"] == "1.3" for text in documents.values())
    return documents


#: A lone surrogate's escape (msgspec refuses one: the fast readers leave such a text to the
#: careful reader, which reads it).
LONE_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def test_every_nested_document_is_read_the_same_both_ways(nested_documents: dict[str, bytes]) -> None:
    ways = {name: agree_nested(text) for name, text in nested_documents.items()}
    # Blocks and calling nodes are expanded by the careful reader; everything else is read fast.
    for name, text in nested_documents.items():
        declined = "blocks" in json.loads(text) or b'"calls":' in text or LONE_SURROGATE.search(text)
        assert ways[name] == ("careful" if declined else "fast"), name
    assert sum(way == "fast" for way in ways.values()) >= 6, ways
    assert ways["stack"] == "careful"
    assert ways["linear"] == "fast"


def test_a_nested_document_reads_as_the_flat_one_of_the_same_model(nested_documents: dict[str, bytes]) -> None:
    for name, text in nested_documents.items():
        if "weights" in json.loads(text):  # its tensors are in a file, which this reads without
            continue
        model = careful(text)
        assert isinstance(model, trama.Model), name
        flat = trama.dumps(model, format_version="1.2").encode("utf-8", "backslashreplace")
        again = careful(flat)
        assert isinstance(again, trama.Model), name
        assert _comparable(again)[:-1] == _comparable(model)[:-1], name  # all but the version read


# --- fuzzing the nested form --------------------------------------------------------------------


def _scopes(doc: dict[str, Any]) -> list[list[Any]]:
    """Every list of nodes: the top level's, each composite's, each block body's (and below)."""
    found: list[list[Any]] = []
    stack: list[Any] = [doc.get("nodes")]
    blocks = doc.get("blocks")
    if isinstance(blocks, dict):
        stack.extend(block.get("nodes") for block in blocks.values() if isinstance(block, dict))
    while stack:
        nodes = stack.pop()
        if not isinstance(nodes, list):
            continue
        found.append(nodes)
        stack.extend(node.get("nodes") for node in nodes if isinstance(node, dict))
    return found


def _node_objects(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [node for nodes in _scopes(doc) for node in nodes if isinstance(node, dict)]


def _names(nodes: list[Any]) -> list[str]:
    return [node["name"] for node in nodes if isinstance(node, dict) and isinstance(node.get("name"), str)]


def _references(scope: list[Any], rng: random.Random) -> list[Any]:
    """References a node of ``scope`` might hold: good, bad and odd."""
    names = _names(scope) or ["n"]
    name = rng.choice(names)
    return [
        name,
        f"{name}.y",
        f"{name}.{rng.choice(['out', 'h_n', 'zz', '', 'y.z'])}",
        "%x",
        "%" + rng.choice(["z", "input", "", "x.y"]),
        "nowhere",
        "",
        "%",
        ".",
        f"{name}.",
        rng.choice(HOSTILE_STRINGS),
        7,
        None,
        {"node": name, "output": "y"},
    ]


def _tensor_slots(doc: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """(holder, key) of every tensor written in a node's set or in the table."""
    found = []
    for node in _node_objects(doc):
        values = node.get("set")
        if isinstance(values, dict):
            found += [(values, slot) for slot, value in values.items() if isinstance(value, dict) and "shape" in value]
    table = doc.get("parameters")
    if isinstance(table, dict):
        found += [(table, name) for name, value in table.items() if isinstance(value, dict) and "shape" in value]
    return found


def _setting_slots(doc: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    found = []
    for node in _node_objects(doc):
        values = node.get("set")
        if isinstance(values, dict):
            found += [(values, slot) for slot, value in values.items() if not isinstance(value, dict)]
    return found


_DTYPES = ("float16", "float32", "float64", "bfloat16", "int8", "int32", "int64", "uint8", "bool")


def _coherent_tensor(rng: random.Random, old: dict[str, Any]) -> dict[str, Any]:
    """A tensor of a dtype and shape of its own, its data and checksum agreeing."""
    from trama.format._dtypes import numpy_dtype
    from trama.format._tensor import tensor_checksum

    shape = [rng.choice((0, 1, 2, 3)) for _ in range(rng.choice((0, 1, 2)))]
    dtype = rng.choice(_DTYPES)
    size = int(np.prod(shape)) * numpy_dtype(dtype).itemsize
    raw = bytes(rng.randrange(2) if dtype == "bool" else rng.randrange(256) for _ in range(size))
    tensor: dict[str, Any] = {} if dtype == "float32" and rng.random() < 0.8 else {"dtype": dtype}
    tensor["shape"] = shape
    if "learnable" in old:
        tensor["learnable"] = old["learnable"]
    tensor["data"] = base64.b64encode(raw).decode()
    if rng.random() < 0.8:
        tensor["checksum"] = tensor_checksum(dtype, shape, raw).removeprefix("xxh3-64:")
    return tensor


def _gentle_nested(doc: dict[str, Any], rng: random.Random) -> str:
    """A change that keeps the document valid: a setting, a tensor (coherent), a node's class or
    metadata, the document's metadata or facts."""
    kind = rng.choice(("setting", "tensor", "tensor", "class", "meta", "metadata", "facts"))
    nodes = _node_objects(doc)
    if kind == "setting":
        slots = _setting_slots(doc)
        if slots:
            holder, slot = rng.choice(slots)
            holder[slot] = rng.choice((0, 1, 7, -2, 0.5, 1e-7, True, None, "text é", [1, 2], [[1.5], ["a"]], []))
            return f"setting {slot} -> {holder[slot]!r}"
    if kind == "tensor":
        slots = _tensor_slots(doc)
        if slots:
            holder, slot = rng.choice(slots)
            if "data" in holder[slot]:
                holder[slot] = _coherent_tensor(rng, holder[slot])
                return f"coherent tensor at {slot}"
    if kind == "class" and nodes:
        node = rng.choice(nodes)
        if "use" not in node:
            node["class"] = rng.choice(("demo.A", "torch.nn.modules.linear.Linear", "Plain", "é.ü", "a b.c"))
            return f"class of {node.get('name')!r} -> {node['class']!r}"
    if kind == "meta" and nodes:
        node = rng.choice(nodes)
        if "use" not in node:
            node["meta"] = rng.choice(({}, {"k": 1}, {"torch_name": random_string(rng)}, {"deep": [[{"a": None}]]}))
            return f"meta of {node.get('name')!r}"
    if kind == "facts" and isinstance(doc.get("inputs"), list):
        doc["input_facts"] = [
            rng.choice(
                (None, {}, {"dtype": "float32"}, {"shape": ["batch", 3]}, {"dtype": "int64", "shape": [2, None]})
            )
            for _ in doc["inputs"]
        ]
        return "input facts"
    doc["metadata"] = {"note": random_string(rng), "n": rng.choice((0, 2**70, -1.5, None))}
    return "document metadata"


def _structural_nested(root: dict[str, Any], rng: random.Random) -> str:
    """One change that knows the nested form (a generic one where the document lost its shape)."""
    doc = root["doc"]
    if not isinstance(doc, dict):
        return mutate_json(root, rng)
    scopes = [scope for scope in _scopes(doc) if scope]
    nodes = _node_objects(doc)
    kind = rng.choice(
        (
            "ref",
            "ref",
            "bindings",
            "outputs",
            "name",
            "op",
            "out",
            "set",
            "set",
            "class",
            "order",
            "move",
            "copy",
            "children",
            "table",
            "weights",
            "blocks",
            "calls",
            "version",
            "inputs",
        )
    )
    if kind == "ref" and scopes:
        scope = rng.choice(scopes)
        node = rng.choice(scope)
        if isinstance(node, dict):
            pool = _references(scope, rng)
            wires = node.get("in")
            if isinstance(wires, dict) and wires and rng.random() < 0.8:
                port = rng.choice(list(wires))
                wires[port] = rng.choice(pool)
                return f"input {port!r} of {node.get('name')!r}"
            node["in"] = rng.choice([*pool, {"x": rng.choice(pool)}, {"a": "%x", "b": rng.choice(pool)}, {}, []])
            return f"in of {node.get('name')!r}"
    if kind == "bindings":
        composites = [node for node in nodes if isinstance(node.get("out"), dict) and node["out"]]
        if composites:
            node = rng.choice(composites)
            output = rng.choice(list(node["out"]))
            children = node.get("nodes") if isinstance(node.get("nodes"), list) else []
            node["out"][output] = rng.choice(_references(children, rng))
            return f"binding {output!r} of {node.get('name')!r}"
    if kind == "outputs" and isinstance(doc.get("outputs"), list) and doc["outputs"]:
        k = rng.randrange(len(doc["outputs"]))
        top = doc.get("nodes")
        doc["outputs"][k] = rng.choice(_references(top if isinstance(top, list) else [], rng))
        return "a model output"
    if kind == "name" and scopes:
        scope = rng.choice(scopes)
        node = rng.choice(scope)
        if isinstance(node, dict):
            names = _names(scope) or ["n"]
            node["name"] = rng.choice((rng.choice(names), "0", "a.b", "x" * 300, "", "%x", rng.choice(HOSTILE_STRINGS)))
            return f"name -> {str(node['name'])[:20]!r}"
    if kind == "op" and nodes:
        node = rng.choice(nodes)
        if rng.random() < 0.3:
            node.pop("op", None)
            return f"no op on {node.get('name')!r}"
        node["op"] = rng.choice(("Graph", "relu", "Linear", "a..b", "", "1x", "Linear:2", random_string(rng)))
        return f"op of {node.get('name')!r}"
    if kind == "out" and nodes:
        node = rng.choice(nodes)
        node["out"] = rng.choice(([], ["y", "y"], ["z"], ["a.b"], ["y", "z"], {}, {"y": "%x"}, "y", None))
        return f"out of {node.get('name')!r}"
    if kind == "set":
        holders = [node for node in nodes if isinstance(node.get("set"), dict)]
        if holders:
            values = rng.choice(holders)["set"]
            table = doc.get("parameters") if isinstance(doc.get("parameters"), dict) else {}
            slot = rng.choice([*values, "new_slot"])
            old = values.get(slot)
            choices: list[Any] = [
                None,
                0,
                "s",
                [1, [2]],
                {},
                {"ref": rng.choice([*table, "missing"])},
                {"ref": 3},
                {"value": 1, "learnable": True},
                {"value": {"shape": [1], "data": "AAAAAA=="}, "learnable": False},
                {"shape": [2]},
                {"shape": [1], "checksum": "0" * 16},
                {"shape": [1], "external": {"path": "w.safetensors", "key": "k", "checksum": "xxh3-64:" + "0" * 16}},
            ]
            if isinstance(old, dict) and "shape" in old:
                changed = dict(old)
                what = rng.choice(("shape", "dtype", "checksum", "data", "drop", "learnable"))
                if what == "shape":
                    changed["shape"] = rng.choice(([], [0], [1, 2], [-1], [2**40, 2**40], ["n"], None))
                elif what == "dtype":
                    changed["dtype"] = rng.choice(("float64", "int8", "float8", "", None, "Float32"))
                elif what == "checksum":
                    changed["checksum"] = rng.choice(("0" * 16, "xxh3-64:" + "0" * 16, "A" * 16, "", 7, "sha256:00"))
                elif what == "data":
                    changed["data"] = rng.choice(("", "AA==", "!!!!", str(old.get("data", ""))[1:], None))
                elif what == "drop":
                    changed.pop(rng.choice(list(changed)))
                else:
                    changed["learnable"] = rng.choice((False, True, 0, "yes"))
                choices.append(changed)
            if old is not None and rng.random() < 0.2:
                del values[slot]
                return f"slot {slot!r} deleted"
            values[slot] = rng.choice(choices)
            return f"slot {slot!r} -> {str(values[slot])[:40]}"
    if kind == "class" and nodes:
        node = rng.choice(nodes)
        if rng.random() < 0.6:
            node["class"] = rng.choice((".Rel", ".", "", "x:y", "a.b.C", 7, None, ".a.b"))
        else:
            node["meta"] = rng.choice(({}, None, [], "s", {"class": "inner"}, {"a:b": 1}))
        return f"class or meta of {node.get('name')!r}"
    if kind == "order" and scopes:
        scope = rng.choice(scopes)
        if len(scope) > 1:
            way = rng.choice(("shuffle", "reverse", "move"))
            if way == "shuffle":
                rng.shuffle(scope)
            elif way == "reverse":
                scope.reverse()
            else:
                scope.insert(rng.randrange(len(scope)), scope.pop(rng.randrange(len(scope))))
            return f"reorder a scope ({way})"
    if kind == "move" and len(scopes) > 1:
        source, target = rng.sample(scopes, 2)
        if source:
            target.insert(rng.randint(0, len(target)), source.pop(rng.randrange(len(source))))
            return "move a node to another scope"
    if kind == "copy" and scopes:
        scope = rng.choice(scopes)
        scope.insert(rng.randint(0, len(scope)), copy.deepcopy(rng.choice(scope)))
        return "copy a node"
    if kind == "children" and nodes:
        node = rng.choice(nodes)
        if "nodes" in node and rng.random() < 0.5:
            node["nodes"] = rng.choice(([], None, {}, [None], "x"))
        else:
            node["nodes"] = [{"name": "extra", "op": "relu", "in": "%x"}]
        return f"children of {node.get('name')!r}"
    if kind == "table":
        table = doc.setdefault("parameters", {})
        if isinstance(table, dict):
            way = rng.choice(("add", "delete", "rename", "value"))
            if way == "add" or not table:
                table[rng.choice(("spare", "a..b", "", "x" * 300))] = rng.choice((1, {"value": 2, "learnable": True}))
            elif way == "delete":
                del table[rng.choice(list(table))]
            elif way == "rename":
                name = rng.choice(list(table))
                table[name + "_"] = table.pop(name)
            else:
                table[rng.choice(list(table))] = rng.choice(({"ref": "x"}, [], {"shape": [1]}, {"value": 1}, None))
            return f"table ({way})"
    if kind == "weights":
        if "weights" in doc and rng.random() < 0.3:
            del doc["weights"]
            return "no weights file"
        doc["weights"] = rng.choice((*fuzz_documents.EXTERNAL_PATHS, 7, None))
        return f"weights -> {str(doc['weights'])[:30]!a}"
    if kind == "blocks":
        blocks = doc.get("blocks")
        instances = [node for node in nodes if "use" in node]
        if isinstance(blocks, dict) and blocks and instances:
            node = rng.choice(instances)
            way = rng.choice(("use", "tensors", "in", "body", "drop"))
            if way == "use":
                node["use"] = rng.choice((*blocks, "missing", 7))
            elif way == "tensors" and isinstance(node.get("tensors"), list):
                tensors = node["tensors"]
                if tensors and rng.random() < 0.5:
                    tensors.pop(rng.randrange(len(tensors)))
                else:
                    tensors.append(rng.choice(("0" * 16, {"data": "AAAAAA=="}, {"external": {}}, 3)))
            elif way == "in":
                node["in"] = rng.choice(({}, {"z": "%x"}, "%x", None))
            elif way == "body":
                block = blocks[rng.choice(list(blocks))]
                if isinstance(block, dict):
                    block["nodes"] = [{"name": "inner", "use": rng.choice(list(blocks)), "in": "%x"}]
            else:
                del blocks[rng.choice(list(blocks))]
            return f"block instance ({way})"
    if kind == "calls" and nodes:
        node = rng.choice(nodes)
        top = doc.get("nodes")
        ids = (_names(top) if isinstance(top, list) else []) or ["nowhere"]
        node["calls"] = rng.choice((*ids, "nowhere", node.get("name"), 5))
        if rng.random() < 0.6:
            node.pop("set", None)
            node.pop("nodes", None)
        return f"calls on {node.get('name')!r}"
    if kind == "version":
        doc["format_version"] = rng.choice(("1.2", "1.4", "1.9", "2.0", "1.3 ", "1.03"))
        return f"version -> {doc['format_version']!r}"
    if isinstance(doc.get("inputs"), list):
        doc["inputs"] = rng.choice(([], ["x", "x"], ["y"], [*doc["inputs"], "more"], ["a.b"], [7]))
        return "model inputs"
    return mutate_json(root, rng)


def mutate_nested(tree: Any, rng: random.Random) -> tuple[bytes, list[str]]:
    """One case: a nested document changed gently (it stays valid, mostly: the fast reader's
    share), or structurally and generically one to five times, written compactly, and one case
    in six then changed as bytes."""
    root = {"doc": copy.deepcopy(tree)}
    done = []
    if rng.random() < 0.4:
        for _ in range(rng.choice((1, 1, 2))):
            done.append(_gentle_nested(root["doc"], rng))
        return compact(root["doc"], ascii_only=rng.random() < 0.7), done
    for _ in range(rng.choice((1, 1, 1, 1, 2, 2, 3, 5))):
        if rng.random() < 0.7:
            done.append(_structural_nested(root, rng))
        else:
            done.append(mutate_json(root, rng))
            # mutate_json may place one of its shared VALUES in the tree: a copy, so that the
            # changes after it leave VALUES as they are
            root["doc"] = copy.deepcopy(root["doc"])
    text = compact(root["doc"], ascii_only=rng.random() < 0.7)
    if rng.random() < 1 / 6:
        text, what = mutate_text(text, rng)
        done.append(what)
    return text, done


def test_fuzzed_nested_documents_read_the_same_both_ways(nested_documents: dict[str, bytes]) -> None:
    rng = random.Random(16)
    trees = [json.loads(text) for text in nested_documents.values()]
    outcomes: dict[str, int] = {}
    for _ in range(CASES):
        text, done = mutate_nested(rng.choice(trees), rng)
        try:
            way = agree_nested(text)
        except AssertionError as error:
            raise AssertionError(f"{done}: {text[:3000]!r}") from error
        outcomes[way] = outcomes.get(way, 0) + 1
    # The fast reader took a real share of them: the test is not vacuous.
    assert outcomes.get("fast", 0) > CASES // 10, outcomes
    assert outcomes.get("careful", 0) > CASES // 4, outcomes


def _nested_documents_for_repeats(nested_documents: dict[str, bytes]) -> dict[str, Any]:
    """Nested documents the fast reader takes, with an object of every kind: metadata nested
    deep, node metadata and classes, facts, opsets, composites, settings, inline tensors with
    checksums, tensors of the weights file, the table."""
    names = ["linear", "torch_mlp_13", "torch_cnn_13", "settings_13", "external_13"]
    names += [name for name, text in nested_documents.items() if name.startswith("random_") and fast_nested(text)][:2]
    return {name: json.loads(nested_documents[name]) for name in names if name in nested_documents}


@pytest.mark.parametrize("same", [True, False], ids=["same value", "other value"])
def test_a_repeated_key_is_refused_in_every_object_of_a_nested_document(
    nested_documents: dict[str, bytes], same: bool
) -> None:
    placed = 0
    kinds: set[str] = set()
    for name, tree in _nested_documents_for_repeats(nested_documents).items():
        assert fast_nested(compact(tree)) is not None, name  # read fast as it is
        for path, obj in _objects(tree):
            for key in obj:
                text = compact(_with_repeat(tree, path, key, same))
                assert fast_nested(text) is None, (name, path, key)
                with pytest.raises(JSONError, match="appears twice"):
                    trama.loads(text)
                placed += 1
            kinds.add(str(path[0]) if path else "top level")
    assert placed > 200
    assert {"top level", "nodes", "metadata", "input_facts", "opsets"} <= kinds


def test_an_escaped_colon_sends_a_nested_document_to_the_careful_reader() -> None:
    model = _linear_nested()
    model.metadata["note"] = "a:b"
    text = trama.dumps(model)
    assert fast_nested(text.encode()) is not None
    good = text.replace("a:b", "a\\u003ab").encode()
    assert fast_nested(good) is None
    assert trama.loads(good).metadata == model.metadata
    # An escaped colon must not hide a repeated key, which the counting alone would miss.
    tree = json.loads(text)
    tree["metadata"] = Pairs([("note", "a\\u003Ab"), ("note", "c")])
    escaped = compact(tree).replace(b"\\\\u003Ab", b"\\u003Ab")
    assert b"\\u003Ab" in escaped
    assert fast_nested(escaped) is None
    with pytest.raises(JSONError, match="appears twice"):
        trama.loads(escaped)


@pytest.mark.parametrize("where", ["port", "output", "op", "name", "class", "reference"])
def test_a_colon_in_a_name_of_a_nested_document_sends_it_to_the_careful_reader(where: str) -> None:
    model = _linear_nested()
    model.nodes[0].outputs = ["y", "z"]
    model.outputs = [trama.Ref(model.nodes[0].id, "y")]
    model.output_facts = None
    tree = json.loads(trama.dumps(model))
    assert fast_nested(compact(tree)) is not None
    node = tree["nodes"][0]
    if where == "port":
        node["in"] = {"x:y": node["in"]}
    elif where == "output":
        node["out"] = ["y", "y:z"]
    elif where == "op":
        node["op"] = "Linear:2"
    elif where == "name":
        node["name"] = "lin:1"
    elif where == "class":
        node["class"] = "demo:Linear"
    else:
        tree["outputs"] = [f"{node['name']}.y:z"]
    text = compact(tree)
    assert fast_nested(text) is None
    if where == "class":  # a class is metadata, which may hold a colon
        assert trama.loads(text).nodes[0].metadata["class"] == "demo:Linear"
    else:
        with pytest.raises(TramaError):
            trama.loads(text)
