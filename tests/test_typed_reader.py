"""The fast reader (:mod:`trama.format._typed`) against the careful one.

The fast reader may only ever accept what the careful reader (``parse_json`` +
``decode_document`` + ``structural_errors``) accepts, and build the same model; when it says a
document's structure is sound, ``structural_errors`` must find nothing. Everything else it hands
to the careful reader. These tests read thousands of fuzzed documents both ways, and place a
repeated key in every object of real documents, since the fast reader finds repeated keys by
counting colons rather than by watching each object.
"""

from __future__ import annotations

import json
import random
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
from trama.format._validation import structural_errors

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from reliability import fuzz_documents  # noqa: E402
from reliability.fuzzing import Pairs, render  # noqa: E402

#: Fuzzed documents read both ways (a few seconds).
CASES = 3_000


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
def seeds(tmp_path_factory: pytest.TempPathFactory) -> list[fuzz_documents.Seed]:
    return fuzz_documents.build_seeds(tmp_path_factory.mktemp("seeds"))


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
    documents = {"linear": json.loads(trama.dumps(model))}
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
    tree = json.loads(trama.dumps(model))
    good = trama.dumps(model).replace("a:b", "a\\u003ab").encode()
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

    tree = json.loads(trama.dumps(linear_model(np.ones((2, 3), np.float32))))
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
    text = trama.dumps(model).encode().replace(b'"MARK"', raw)
    typed = fast(text)
    assert typed is not None
    expected = json.loads(text)["metadata"]
    for key in ("values", "raw"):
        got = typed[0].metadata[key]
        assert [(type(v), repr(v)) for v in got] == [(type(v), repr(v)) for v in expected[key]]


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
