"""The model writer (``trama.format._writer``) writes exactly the layout of the encoded document.

This is the writer of the flat form, format 1.2 (``dumps(model, format_version="1.2")``); the
nested form of 1.3, which ``dump`` and ``dumps`` write by default, is tested in
``test_format_13.py``.

``dump`` writes a model's text straight from the model: nodes by joining their names with the
layout's own pieces, everything else through the layout. The definition of what it must write is
the layout of the data ``encode_document`` makes: ``format_json(encode_document(model, ...))``,
itself checked against the naive definition (``test_layout.reference_layout``). Every test here
compares bytes with both, on many varied models: the suite's and legacy fixtures, real exported
models, hand-built edge cases (names at the line width, 8 and 9 items, metadata of every kind,
parameters of every value kind, calling nodes short enough for one line) and seeded random valid
models; then through ``dump``/``dumps`` themselves, inline weights (whose text is laid out as if
each tensor's base64 stood in place of its placeholder) and external ones, in pieces of any size.
"""

from __future__ import annotations

import itertools
import json
import random
import string
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_calls import calls_model
from test_layout import FLOATS, STRINGS, _chain, _random_value, reference_layout

import trama
from trama import INPUT, Model, Node, Parameter, Ref, Tensor, ValueFact
from trama.format import _serialization, _writer, structural_errors
from trama.format._codec import encode_document, encode_node
from trama.format._layout import LINE_WIDTH, MAX_ONE_LINE_ITEMS, format_json
from trama.format._writer import MEMBERS, METADATA, REF_KEYS, SLOT_KEYS, model_pieces, model_text

LEGACY = Path(__file__).resolve().parent / "fixtures" / "legacy"
TensorEncoder = Callable[[str, Tensor], dict[str, Any]]


def inline(name: str, tensor: Tensor) -> dict[str, Any]:
    return _serialization._inline_tensor(name, tensor)


def assert_writes(model: Model, tensor: TensorEncoder = inline, *, reference: bool = True) -> str:
    """The writer's text is ``format_json``'s text of the encoded model (and, unless the model is
    too large for it, the naive layout's), and its pieces join into it."""
    assert structural_errors(model) == [], "the writer is for valid models"
    data = encode_document(model, tensor)
    expected = format_json(data)
    if reference:
        assert reference_layout(data) == expected
    actual = model_text(model, tensor)
    assert actual == expected
    assert "".join(model_pieces(model, tensor)) == expected
    return actual


# ----------------------------------------------------------------------------------------------
# The writer's assumptions
# ----------------------------------------------------------------------------------------------


def test_members_in_the_order_encode_node_writes_them() -> None:
    ref = Ref("root.a", "y")
    node = Node("root.b", "Op", {"x": ref}, ["y"], {"s": "k"}, {"y": ref}, {"m": 1})
    encoded = encode_node(node)
    assert tuple(encoded) == (*MEMBERS, METADATA)
    assert tuple(encoded["inputs"]["x"]) == REF_KEYS
    assert tuple(encoded["parameters"]["s"]) == SLOT_KEYS


def test_nodes_are_written_without_the_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    """A node that is not a call never fits on a line, so the writer writes plain nodes itself:
    neither their data nor the layout is made for them."""
    assert _writer._LAYOUT_KNOWN
    model = trama.loads(format_json(_chain(50)))

    def refused(*args: Any) -> Any:
        raise AssertionError("a plain node went through the layout")

    monkeypatch.setattr(_writer, "encode_node", refused)
    text = model_text(model, inline)
    monkeypatch.undo()
    assert text == format_json(encode_document(model, inline))


def test_a_100k_node_chain() -> None:
    model = trama.loads(format_json(_chain(100_000)))
    text = assert_writes(model, reference=False)
    assert text.count('"op": "ReLU"') == 100_000


# ----------------------------------------------------------------------------------------------
# The suite's models and real ones
# ----------------------------------------------------------------------------------------------


def _legacy_models() -> Iterator[Model]:
    for path in sorted(LEGACY.glob("v0_*/*.trama.json")):
        yield trama.load(path)


def test_legacy_fixtures_calls_and_toy_models(mlp_model: Model, toy_registry: trama.OpRegistry) -> None:
    import toylayers

    models = [*_legacy_models(), calls_model(), mlp_model]
    wide = toylayers.mlp([64, 48, 300, 2], seed=1)
    models.append(trama.export_model(wide, inputs=["x"], outputs=["y"], registry=toy_registry))
    assert len(models) >= 12
    for model in models:
        assert_writes(model)
    assert '"calls": "root.block"' in model_text(calls_model(), inline)


@pytest.mark.parametrize("name", ["torch_keyword_spotter", "tv_resnet18", "hf_bert", "hf_gpt2", "torch_lstm_lm"])
def test_real_models(name: str) -> None:
    pytest.importorskip("trama_torch")
    realworld = pytest.importorskip("realworld.models")
    try:
        model = realworld.exported(name)
    except ImportError as exc:  # the library that ships the model is not installed
        pytest.skip(str(exc))
    assert len(model.nodes) > 3
    assert_writes(model)
    with_metadata = [node for node in model.nodes if node.metadata]
    assert with_metadata, "real exports give composites metadata: that path is covered"


# ----------------------------------------------------------------------------------------------
# Edge cases
# ----------------------------------------------------------------------------------------------


def _name(size: int, seed: str = "n") -> str:
    """An identifier of ``size`` characters."""
    return (seed + "_" * size)[:size] if size > len(seed) else seed[:size]


def _leaf(node_id: str, inputs: dict[str, Ref], outputs: list[str], slots: dict[str, str] | None = None) -> Node:
    return Node(node_id, "Op", inputs, outputs, slots or {})


def _model(nodes: list[Node], parameters: dict[str, Parameter] | None = None, **extra: Any) -> Model:
    top = [node for node in nodes if "." not in node.id]
    return Model(
        inputs=["x"],
        outputs=[Ref(top[-1].id, top[-1].outputs[0])],
        nodes=nodes,
        parameters=parameters or {},
        **extra,
    )


#: How a member without items reads, as a line.
EMPTY = ("{},", "[],", "null,", "null", "{}", "[]")


def _one_line_width(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(", ", ": ")))


@pytest.mark.parametrize("member", ["inputs", "outputs", "parameters", "output_bindings"])
@pytest.mark.parametrize("columns", [LINE_WIDTH - 1, LINE_WIDTH, LINE_WIDTH + 1, LINE_WIDTH + 2])
def test_members_at_the_line_width(member: str, columns: int) -> None:
    """A member whose one-line text ends exactly at, just before or just after the last column
    (indentation 6), and an item of it (indentation 8) likewise."""
    room = columns - 6
    if member in ("inputs", "output_bindings"):
        source = "a" if member == "inputs" else "c.a"
        port = _name(room - _one_line_width({"": {"node": source, "output": "y"}}), "p")
        value: Any = {port: {"node": source, "output": "y"}}
        if member == "inputs":
            nodes = [_leaf("a", {}, ["y"]), _leaf("b", {port: Ref(source, "y")}, ["y"])]
        else:
            composite = Node("c", "Graph", {}, [port], output_bindings={port: Ref(source, "y")})
            nodes = [composite, _leaf(source, {}, ["y"])]
    elif member == "outputs":
        outputs = [_name(room - _one_line_width([""]), "o")]
        nodes = [_leaf("b", {}, outputs)]
        value = outputs
    else:
        slot = _name(room - _one_line_width({"": {"name": "k"}}), "s")
        nodes = [_leaf("b", {}, ["y"], {slot: "k"})]
        value = {slot: {"name": "k"}}
    assert _one_line_width(value) + 6 == columns
    parameters = {"k": Parameter(1)} if member == "parameters" else None
    model = _model(nodes, parameters)
    text = assert_writes(model)
    prefix = f'      "{member}": '
    [line] = [line for line in text.splitlines() if line.startswith(prefix) and line[len(prefix) :] not in EMPTY]
    assert line.endswith(("}", "]", "},", "],")) == (columns <= LINE_WIDTH)


@pytest.mark.parametrize("count", [0, 1, 2, MAX_ONE_LINE_ITEMS, MAX_ONE_LINE_ITEMS + 1, 30])
def test_members_of_many_items(count: int) -> None:
    """Short members of up to 8 items go on one line, of more one item a line; items that are
    too wide for their own line go through the layout."""
    ports = [f"p{k}" for k in range(count)]
    source = _leaf("a", {}, ["y", "z"])
    slots = {f"s{k}": f"k{k % 3}" for k in range(count)}
    parameters = {f"k{k}": Parameter(k) for k in range(min(count, 3))}
    nodes = [source, _leaf("b", {port: Ref("a", "yz"[k % 2]) for k, port in enumerate(ports)}, ports or ["y"], slots)]
    assert_writes(_model(nodes, parameters))
    # the same with names long enough that an item of the member is itself too wide for a line
    long_source = _leaf("a" * 60, {}, ["y" * 40])
    long_nodes = [long_source, _leaf("b", {port: Ref("a" * 60, "y" * 40) for port in ports}, ["y"])]
    assert_writes(_model(long_nodes))
    wide_slots = {f"s{k}": "k" * (90 if k == 0 else 5) for k in range(count)}
    entries = {name: Parameter(1) for name in set(wide_slots.values())}
    assert_writes(_model([_leaf("b", {}, ["y"], wide_slots)], entries))


def test_ids_parents_and_long_names() -> None:
    """Top-level and nested nodes, ids far wider than a line (strings are never broken)."""
    ids = ["root"]
    for level in range(1, 12):
        ids.append(f"{ids[-1]}.{_name(level * 9, 'segment')}")
    nodes = [
        Node(node_id, "lenses.Thin_Lens2", {"x": Ref(INPUT, "x")}, ["y"], output_bindings={"y": Ref(inner, "y")})
        for node_id, inner in itertools.pairwise(ids)
    ]
    nodes.append(_leaf(ids[-1], {"x": Ref(INPUT, "x")}, ["y"]))
    nodes.append(_leaf("other", {"x": Ref("root", "y")}, ["y"]))
    nodes.append(_leaf(_name(250, "top"), {"x" * 200: Ref("other", "y")}, [_name(200, "out")]))
    assert max(map(len, ids)) > 5 * LINE_WIDTH
    assert_writes(_model(nodes))


def test_calls_short_enough_for_one_line_and_long_ones() -> None:
    """A calling node may fit on a line: the layout decides; so may a document of calls only."""
    nodes = [
        _leaf("a", {}, ["y"]),
        Node("b", "Op", {}, ["y"], calls="a"),
        Node("c", "Op", {}, ["y"], calls="a", metadata={"k": 1}),
        Node("d" * 80, "Op", {}, ["y"], calls="a"),
    ]
    text = assert_writes(_model(nodes))
    assert '    {"id": "b", "parent": null, "op": "Op", "calls": "a", "inputs": {}, "outputs": ["y"]},' in text


def test_a_document_without_nodes_fits_on_a_line() -> None:
    text = assert_writes(Model(inputs=["x"], outputs=[], nodes=[], parameters={}))
    assert text.count("\n") == 1


def test_metadata_of_every_kind() -> None:
    """Node metadata goes through the layout: escapes, unicode, lone surrogates, numbers at
    their limits, deep and wide lists, empty containers."""
    deep: Any = "leaf"
    for level in range(60):
        deep = [deep, level] if level % 2 else {"k": deep}
    kinds: list[Any] = [
        {},
        {"class": "torch.nn.modules.container.Sequential"},
        {"strings": STRINGS, "keys": {text: text for text in STRINGS}},
        {"floats": FLOATS, "ints": [0, -1, 2**63, -(2**63), 10**40], "flags": [True, False, None]},
        {"deep": deep},
        {"wide": list(range(40)), "rows": [[k] * 9 for k in range(3)], "empty": [[], {}, [[]]]},
        {"k" * 95: "v"},
    ]
    nodes = [_leaf("a", {}, ["y"])]
    for k, metadata in enumerate(kinds):
        nodes.append(Node(f"n{k}", "Op", {"x": Ref("a", "y")}, ["y"], metadata=metadata))
    document_metadata = {"producer": {"name": "trama"}, "note": "é 日本 \u2028"}
    assert_writes(_model(nodes, metadata=document_metadata, opsets={"trama": 1, "lenses": 3}))


def test_parameters_of_every_value_kind() -> None:
    """The parameter table, with tensors inline and as placeholders, and every other value."""
    values: list[Any] = [
        Tensor.from_array(np.arange(12, dtype=np.float32).reshape(3, 4)),
        Tensor.from_array(np.zeros((0,), dtype=np.int64)),
        Tensor.from_array(np.array(1.5, dtype=np.float64)),
        Tensor.from_array(np.ones((200,), dtype=np.uint8)),
        True,
        False,
        0,
        -(2**70),
        -0.0,
        1e300,
        "text é",
        "",
        None,
        [1, 2, 3],
        [[1, 2], [3, [4.5, "x"]]],
        list(range(50)),
        [],
    ]
    slots = {f"s{k}": f"entry.v{k}" for k in range(len(values))}
    parameters = {f"entry.v{k}": Parameter(value, learnable=k % 2 == 0) for k, value in enumerate(values)}
    model = _model([_leaf("a", {}, ["y"], slots)], parameters)
    assert_writes(model)
    assert trama.dumps(model, format_version="1.2") == format_json(encode_document(model, inline))


def test_document_members_and_facts() -> None:
    nodes = [_leaf("a", {"x": Ref(INPUT, "x")}, ["y", "z"])]
    model = Model(
        inputs=["x"],
        outputs=[Ref("a", "y"), Ref("a", "z")],
        nodes=nodes,
        parameters={},
        metadata={"producer": {"name": "trama", "version": "9"}},
        opsets={"trama": 1},
        input_facts=[ValueFact("float32", (2, "batch", 3))],
        output_facts=[None, ValueFact(shape=tuple(range(30)))],
    )
    assert_writes(model)


# ----------------------------------------------------------------------------------------------
# Random valid models
# ----------------------------------------------------------------------------------------------


def _identifier(rng: random.Random, taken: set[str]) -> str:
    while True:
        size = rng.choice([1, 1, 2, 4, 8, 20, 40, 60, 85, 95, 120])
        name = "".join(rng.choice(string.ascii_letters + string.digits + "_") for _ in range(size))
        if name not in taken:
            taken.add(name)
            return name


def _value(rng: random.Random) -> Any:
    kind = rng.randrange(6)
    if kind == 0:
        shape = rng.choice([(), (0,), (3,), (2, 5), (60,)])
        dtype = rng.choice(["float32", "int64", "uint8", "float16", "bool"])
        return Tensor.from_array((np.arange(int(np.prod(shape))) % 3).astype(dtype).reshape(shape))
    if kind == 1:
        return rng.choice([True, False, None, 0, 7, -(2**65), 0.5, -0.0, 1e-7, "s", "é" * 30])
    if kind == 2:
        return [rng.choice([1, 2.5, "x", None, True]) for _ in range(rng.choice([0, 1, 3, 8, 9, 40]))]
    if kind == 3:
        return [[rng.randint(0, 9) for _ in range(rng.choice([1, 3]))] for _ in range(rng.choice([1, 2, 5]))]
    if kind == 4:
        return "".join(rng.choice('ab "\\\n\t\x00é日🎉') for _ in range(rng.choice([0, 5, 90, 150])))
    return rng.uniform(-1e9, 1e9)


def random_model(rng: random.Random) -> Model:
    """A valid model: nested composites whose children read earlier siblings and the scope's
    inputs, leaves with slots (some entries shared), calls of earlier leaves, metadata here and
    there, names of every length up to past the line width."""
    nodes: list[Node] = []
    parameters: dict[str, Parameter] = {}
    leaves: list[Node] = []

    def metadata() -> dict[str, Any] | None:
        if rng.random() < 0.7:
            return None
        data = _random_value(rng, 3, [30])
        return data if isinstance(data, dict) else {"value": data}

    def scope(parent: str | None, scope_inputs: list[str], depth: int) -> list[Ref]:
        available = [Ref(INPUT, name) for name in scope_inputs]
        produced: list[Ref] = []
        taken: set[str] = set()
        for _ in range(rng.choice([1, 1, 2, 3, 5])):
            segment = _identifier(rng, taken)
            node_id = segment if parent is None else f"{parent}.{segment}"
            ports: set[str] = set()
            port_count = rng.choice([0, 1, 1, 1, 2, 3, 8, 9]) if available else 0
            inputs = {_identifier(rng, ports): rng.choice(available) for _ in range(port_count)}
            names: set[str] = set()
            outputs = [_identifier(rng, names) for _ in range(rng.choice([1, 1, 1, 2, 8, 9]))]
            op = rng.choice(["ReLU", "Linear", "lenses.ThinLens", "A" * 90])
            callable_leaves = [leaf for leaf in leaves if not node_id.startswith(leaf.id + ".")]
            if callable_leaves and rng.random() < 0.15:
                target = rng.choice(callable_leaves)
                call_inputs = {port: rng.choice(available) for port in target.inputs} if available else {}
                if len(call_inputs) == len(target.inputs):
                    node = Node(node_id, target.op, call_inputs, list(target.outputs), calls=target.id)
                    node.metadata = metadata()
                    nodes.append(node)
                    produced += [Ref(node_id, name) for name in node.outputs]
                    available += [Ref(node_id, name) for name in node.outputs]
                    continue
            if depth < 3 and rng.random() < 0.3:
                node = Node(node_id, op, inputs, outputs, output_bindings={}, metadata=metadata())
                nodes.append(node)
                inner = scope(node_id, list(inputs), depth + 1) + [Ref(INPUT, port) for port in inputs]
                node.output_bindings = {name: rng.choice(inner) for name in outputs}
            else:
                slots: dict[str, str] = {}
                slot_names: set[str] = set()
                for slot in [_identifier(rng, slot_names) for _ in range(rng.choice([0, 0, 1, 2, 9, 12]))]:
                    if parameters and rng.random() < 0.2:
                        slots[slot] = rng.choice(list(parameters))
                    else:
                        entry = f"{node_id}.{slot}"
                        parameters.setdefault(entry, Parameter(_value(rng), learnable=rng.random() < 0.5))
                        slots[slot] = entry
                node = Node(node_id, op, inputs, outputs, slots, metadata=metadata())
                nodes.append(node)
                leaves.append(node)
            produced += [Ref(node_id, name) for name in outputs]
            available += [Ref(node_id, name) for name in outputs]
        return produced

    model_inputs = ["x", "input_" + "i" * rng.choice([1, 90])]
    top = scope(None, model_inputs, 0)
    return Model(
        inputs=model_inputs,
        outputs=rng.sample(top, min(len(top), rng.choice([1, 2, 9]))),
        nodes=nodes,
        parameters=parameters,
        metadata=metadata() or {},
    )


def test_random_models() -> None:
    """Seeded random valid models, for about three seconds (at least 150 of them)."""
    rng = random.Random(20261124)
    deadline = time.monotonic() + 3.0
    checked = 0
    calls = metadata = 0
    while time.monotonic() < deadline or checked < 150:
        model = random_model(rng)
        assert_writes(model)
        calls += sum(node.calls is not None for node in model.nodes)
        metadata += sum(node.metadata is not None for node in model.nodes)
        checked += 1
    assert calls > 20
    assert metadata > 20


# ----------------------------------------------------------------------------------------------
# Through dump and dumps, in pieces of any size
# ----------------------------------------------------------------------------------------------


def _dump_models() -> list[Model]:
    rng = random.Random(7)
    return [*_legacy_models(), calls_model(), *(random_model(rng) for _ in range(20))]


@pytest.mark.parametrize("per_piece", [1, 2, 3, _writer.NODES_PER_PIECE])
def test_dumps_in_pieces(monkeypatch: pytest.MonkeyPatch, per_piece: int) -> None:
    """``dumps`` (inline tensors, laid out as if each tensor's base64 stood in place of its
    placeholder, and placeholders split out of each piece) writes the layout of the encoded
    model, whatever the number of nodes a piece holds."""
    monkeypatch.setattr(_writer, "NODES_PER_PIECE", per_piece)
    for model in _dump_models():
        expected = format_json(encode_document(model, inline))
        assert trama.dumps(model, format_version="1.2") == expected
        pieces = list(model_pieces(model, inline))
        assert "".join(pieces) == expected
        if len(model.nodes) > per_piece and any(node.calls is None for node in model.nodes):
            assert len(pieces) > 1


@pytest.mark.parametrize("weights", ["inline", "external"])
def test_dump_writes_the_layout_of_the_encoded_model(tmp_path: Path, weights: str) -> None:
    """The file ``dump`` writes is the layout of the encoded model, byte for byte (an external
    tensor encoded as the reference the file holds for it), and reads back."""
    for k, model in enumerate(_dump_models()):
        path = tmp_path / f"m{k}.trama.json"
        trama.dump(model, path, weights=weights, format_version="1.2")  # type: ignore[arg-type]
        written = path.read_bytes()
        table = json.loads(written)["parameters"]

        def referenced(name: str, value: Tensor, table: dict[str, Any] = table) -> dict[str, Any]:
            assert "external" in table[name]["value"]
            return table[name]["value"]  # type: ignore[no-any-return]

        tensor = inline if weights == "inline" else referenced
        expected = format_json(encode_document(model, tensor))
        assert written == expected.encode("utf-8", "backslashreplace")
        flat = trama.load(path)
        assert [node.id for node in flat.nodes] == [node.id for node in model.nodes]
        # the default (1.3) form of the same model reads back as the same model
        nested = tmp_path / f"m{k}.nested.trama.json"
        trama.dump(model, nested, weights=weights)  # type: ignore[arg-type]
        assert json.loads(nested.read_bytes())["format_version"] == "1.3"
        back = trama.load(nested)
        assert (back.nodes, back.parameters, back.outputs) == (flat.nodes, flat.parameters, flat.outputs)
