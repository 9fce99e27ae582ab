"""``dump`` and ``dumps`` prove a model valid while they write its text, and refuse exactly what
``validate`` refuses.

Instead of validating a model in a pass of its own and then writing it, ``dump`` and ``dumps``
prove the per-node structural rules in the writer's pass over the nodes
(``trama.format._validation.StructureProof``, proven by ``trama.format._writer``), and the
other sections of the rules once every node is declared. The proof only ever accepts: whatever
it does not prove, ``validate`` decides, so the error is validation's own. These tests hold
that to account. The proof is made by the flat writer of format 1.2 (``format_version="1.2"``);
the nested writer of 1.3, the default, reads the whole model before its first piece of text, so
it decides (validates) first. Both are held to what every dump must do:

* one invalid model per rule (ids, op names, parents, port and output names, references,
  bindings, calls, the parameter table, the model's own members), the broken node early in a
  model and deep in it (past the first pieces of text): ``dumps`` and ``dump`` (inline and
  external weights) raise what ``validate`` raises (type, message, location, node, every error
  of ``all_errors``), a previous file at the path is left as it was, with no temporary file
  beside it, and a name that is not an identifier never reaches the text written;
* valid models (every kind of node) are written in format 1.2 without ``validate`` ever
  running, byte for byte as the layout writes them, and in 1.3 as a text that reads back as the
  same model; a model the proof is unsure of is validated and written;
* an error of the write itself comes after the model's own, as when validation came first;
* fuzzing: random small models, most of them broken by one random change: ``dumps`` (both
  formats) raises exactly when ``structural_errors`` finds something, and raises its first error.
"""

from __future__ import annotations

import functools
import itertools
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_calls import calls_model
from test_writer import inline, random_model

import trama
from trama import INPUT, Model, Node, Parameter, Ref, Tensor
from trama.errors import TramaError, ValidationError, WriteError
from trama.format import _commit, _serialization, _validation, _writer, structural_errors
from trama.format._codec import FLAT_VERSION, encode_document
from trama.format._layout import format_json

#: Past the first piece of node text: the proof fails after text was made and written.
DEEP = _writer.NODES_PER_PIECE + 900
#: What a name that is not an identifier holds, so that the tests can look for it in the text.
BAD = 'bad"name'
#: The formats a dump writes: the flat one (whose writer proves the model as it writes it) and
#: the nested one (the default, whose writer decides before it writes).
FORMATS = [FLAT_VERSION, trama.FORMAT_VERSION]


# ----------------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------------


def mixed_model(count: int) -> Model:
    """Every kind of node, ``count`` children of one composite among them.

    A top-level leaf with metadata, then ``root`` (a composite) whose children are a chain:
    plain leaves, leaves with a slot each (every 7th), with metadata (every 11th), with two
    inputs (every 13th), nested composites of one child (every 17th), calls of ``root.c0``
    (every 19th); then a top-level leaf that reads ``root``."""
    x = Ref(INPUT, "x")
    last = f"root.c{count - 1}"
    nodes = [
        Node("prep", "ReLU", {"x": x}, ["y"], metadata={"note": 'a "quoted" text'}),
        Node("root", "Sequential", {"x": Ref("prep", "y")}, ["y"], output_bindings={"y": Ref(last, "y")}),
    ]
    parameters: dict[str, Parameter] = {}
    previous = x
    for k in range(count):
        node_id = f"root.c{k}"
        if k and k % 19 == 0:
            node = Node(node_id, "ReLU", {"x": previous}, ["y"], calls="root.c0")
        elif k and k % 17 == 0:
            inner = Ref(f"{node_id}.inner", "y")
            nodes.append(Node(node_id, "Block", {"x": previous}, ["y"], output_bindings={"y": inner}))
            nodes.append(Node(f"{node_id}.inner", "ReLU", {"x": x}, ["y"]))
            previous = Ref(node_id, "y")
            continue
        elif k and k % 13 == 0:
            node = Node(node_id, "Add", {"a": previous, "b": x}, ["y"])
        elif k and k % 7 == 0:
            node = Node(node_id, "Scale", {"x": previous}, ["y"], {"scale": f"{node_id}.scale"})
            parameters[f"{node_id}.scale"] = Parameter(Tensor.from_array(np.full(3, k, dtype=np.float32)))
        else:
            node = Node(node_id, "ReLU", {"x": previous}, ["y"])
        if k and k % 11 == 0:
            node.metadata = {"k": k}
        nodes.append(node)
        previous = Ref(node_id, "y")
    nodes.append(Node("post", "ReLU", {"x": Ref("root", "y")}, ["y"]))
    return Model(inputs=["x"], outputs=[Ref("post", "y")], nodes=nodes, parameters=parameters)


def plain_at(model: Model, at_least: int) -> int:
    """The first position from ``at_least`` of a plain child of ``root`` (a leaf of one input,
    the output of the plain child before it) followed by another plain child."""
    nodes = model.nodes

    def plain(node: Node) -> bool:
        return (
            node.id.startswith("root.c")
            and node.id.count(".") == 1
            and node.op == "ReLU"
            and node.calls is None
            and not node.parameters
            and node.metadata is None
            and node.output_bindings is None
        )

    for i in range(max(at_least, 3), len(nodes) - 2):
        before, here, after = nodes[i - 1], nodes[i], nodes[i + 1]
        if plain(before) and plain(here) and plain(after) and here.inputs == {"x": Ref(before.id, "y")}:
            return i
    raise AssertionError("no plain child there")


def first_index(model: Model, test: Callable[[Node], bool], at_least: int) -> int:
    return next(i for i, node in enumerate(model.nodes) if i >= at_least and test(node))


# ----------------------------------------------------------------------------------------------
# One broken rule each: (name, where the proof refuses it, change)
# ----------------------------------------------------------------------------------------------

Change = Callable[[Model, int], None]


def _set(**fields: Any) -> Change:
    def change(model: Model, i: int) -> None:
        for name, value in fields.items():
            setattr(model.nodes[i], name, value)

    return change


def _repeated_id(model: Model, i: int) -> None:
    model.nodes[i].id = model.nodes[i - 1].id


def _parent(make: Callable[[Model, int], str]) -> Change:
    """A node under another parent, reading only ``x``, an input of the model and of every node
    that might pass for that parent, and the node after it reading the node before it: only the
    parent rule refuses it."""

    def change(model: Model, i: int) -> None:
        model.nodes[i].id = make(model, i)
        model.nodes[i].inputs = {"x": Ref(INPUT, "x")}
        model.nodes[i + 1].inputs = {"x": Ref(model.nodes[i - 1].id, "y")}

    return change


def _call_parent(model: Model, i: int) -> None:
    caller = first_index(model, lambda node: node.calls is not None, 0)
    _parent(lambda model, i: f"{model.nodes[caller].id}.kid")(model, plain_at(model, max(i, caller + 1)))


def _ref(make: Callable[[Model, int], Ref]) -> Change:
    def change(model: Model, i: int) -> None:
        model.nodes[i].inputs = {"x": make(model, i)}

    return change


def _first_output(name: str) -> Change:
    def change(model: Model, i: int) -> None:
        model.nodes[i].outputs = [name]
        model.nodes[i + 1].inputs = {"x": Ref(model.nodes[i].id, name)}

    return change


def _composite(model: Model, i: int) -> int:
    return first_index(model, lambda node: node.output_bindings is not None and node.id != "root", i)


def _binding(make: Callable[[Model, int], Ref]) -> Change:
    def change(model: Model, i: int) -> None:
        j = _composite(model, i)
        model.nodes[j].output_bindings = {"y": make(model, j)}

    return change


def _reads_its_parent(model: Model, i: int) -> None:
    """The first child of a composite reads the node just before it: its parent."""
    j = _composite(model, i)
    model.nodes[j + 1].inputs = {"x": Ref(model.nodes[j].id, "y")}


def _reads_into_a_scope(model: Model, i: int) -> None:
    """The top-level node after ``root`` reads the node just before it: ``root``'s last child."""
    model.nodes[-1].inputs = {"x": Ref(model.nodes[-2].id, "y")}


def _bindings_keys(model: Model, i: int) -> None:
    j = _composite(model, i)
    model.nodes[j].output_bindings = {BAD: Ref(f"{model.nodes[j].id}.inner", "y")}


def _call(**fields: Any) -> Change:
    def change(model: Model, i: int) -> None:
        j = first_index(model, lambda node: node.calls is not None, i)
        for name, value in fields.items():
            setattr(model.nodes[j], name, value)

    return change


def _slotted(model: Model, i: int) -> int:
    return first_index(model, lambda node: bool(node.parameters), i)


def _slot_to(key: str) -> Change:
    def change(model: Model, i: int) -> None:
        node = model.nodes[_slotted(model, i)]
        old = node.parameters["scale"]
        node.parameters = {"scale": key}
        if key not in model.parameters:
            model.parameters[key] = model.parameters.pop(old)

    return change


def _missing_entry(model: Model, i: int) -> None:
    model.nodes[_slotted(model, i)].parameters = {"scale": "no.such.entry"}


def _missing_entry_not_plain(model: Model, i: int) -> None:
    model.nodes[_slotted(model, i)].parameters = {"scale": BAD}


def _unreferenced(model: Model, i: int) -> None:
    model.parameters["spare"] = Parameter(1)


def _unstorable(model: Model, i: int) -> None:
    key = model.nodes[_slotted(model, i)].parameters["scale"]
    model.parameters[key] = Parameter(object())  # type: ignore[arg-type]


def _bad_slot_name(model: Model, i: int) -> None:
    node = model.nodes[_slotted(model, i)]
    node.parameters = {BAD: node.parameters["scale"]}


def _model_output(model: Model, i: int) -> None:
    model.outputs = [Ref("nowhere", "y")]


def _model_inputs(model: Model, i: int) -> None:
    model.inputs = ["x", "x"]


def _model_input_name(model: Model, i: int) -> None:
    model.inputs = ["x", BAD]


#: Where the proof refuses: "start", before any node is written; "pass", in the writer's pass
#: over the nodes, before the broken node is written (deep in the model, after the first pieces
#: of text were made); "end", once every node is written and declared. A binding or a slot that
#: names something undeclared is refused in the pass, although its rule is checked at the end:
#: the writer writes those names unescaped, and proves them plain first.
RULES: list[tuple[str, str, Change]] = [
    ("repeated id", "start", _repeated_id),
    ("id not dotted", "start", _set(id=f"root.{BAD}")),
    ("op not an op name", "pass", _set(op="9op")),
    ("op not plain", "pass", _set(op=BAD)),
    ("op not a string", "pass", _set(op=7)),
    ("missing parent", "pass", _parent(lambda model, i: "ghost.child")),
    ("parent comes later", "pass", _parent(lambda model, i: f"{model.nodes[i + 1].id}.early")),
    ("parent is a leaf", "pass", _parent(lambda model, i: f"{model.nodes[i - 1].id}.kid")),
    ("parent is a call", "pass", _call_parent),
    ("port not a name", "pass", lambda model, i: setattr(model.nodes[i], "inputs", {BAD: model.nodes[i].inputs["x"]})),
    ("port too long", "pass", lambda model, i: setattr(model.nodes[i], "inputs", {"p" * 300: Ref(INPUT, "x")})),
    ("output not a name", "pass", _first_output(BAD)),
    ("output empty", "pass", _first_output("")),
    ("outputs repeat", "pass", _set(outputs=["y", "y"])),
    ("unknown node", "pass", _ref(lambda model, i: Ref("nowhere", "y"))),
    ("node not plain", "pass", _ref(lambda model, i: Ref(BAD, "y"))),
    ("node comes later", "pass", _ref(lambda model, i: Ref(model.nodes[i + 1].id, "y"))),
    ("node out of scope", "pass", _ref(lambda model, i: Ref("prep", "y"))),
    ("the parent's own output", "pass", _ref(lambda model, i: Ref("root", "y"))),
    ("the node before is the parent", "pass", _reads_its_parent),
    ("the node before is in another scope", "pass", _reads_into_a_scope),
    ("no such output", "pass", _ref(lambda model, i: Ref(model.nodes[i - 1].id, "zz"))),
    ("output not plain", "pass", _ref(lambda model, i: Ref(model.nodes[i - 1].id, BAD))),
    ("no such scope input", "pass", _ref(lambda model, i: Ref(INPUT, "nope"))),
    ("scope input not plain", "pass", _ref(lambda model, i: Ref(INPUT, BAD))),
    ("binding to no child", "end", _binding(lambda model, j: Ref("prep", "y"))),
    ("binding to no output", "end", _binding(lambda model, j: Ref(f"{model.nodes[j].id}.inner", "zz"))),
    ("binding to an unknown node", "pass", _binding(lambda model, j: Ref("nowhere", "y"))),
    ("binding to a node not plain", "pass", _binding(lambda model, j: Ref(BAD, "y"))),
    ("binding to an output not plain", "pass", _binding(lambda model, j: Ref(f"{model.nodes[j].id}.inner", BAD))),
    ("binding to no input", "end", _binding(lambda model, j: Ref(INPUT, "nope"))),
    ("bindings not the outputs", "end", _bindings_keys),
    ("call of an unknown node", "end", _call(calls="nowhere")),
    ("call of a call", "end", _call(calls="root.c38")),
    ("call with parameters", "end", _call(parameters={"scale": "root.c7.scale"})),
    ("call with other outputs", "pass", _call(outputs=["z"])),
    ("call not plain", "end", _call(calls=BAD)),
    ("slot to a missing entry", "pass", _missing_entry),
    ("slot to an entry not plain", "start", _slot_to(f"root.{BAD}")),
    ("slot to a missing entry not plain", "pass", _missing_entry_not_plain),
    ("slot name not plain", "end", _bad_slot_name),
    ("entry not referenced", "end", _unreferenced),
    ("entry not storable", "end", _unstorable),
    ("model output unknown", "end", _model_output),
    ("model inputs repeat", "start", _model_inputs),
    ("model input not plain", "start", _model_input_name),
]


def broken(change: Change, depth: str) -> Model:
    model = mixed_model(DEEP + 300 if depth == "deep" else 60)
    change(model, plain_at(model, DEEP if depth == "deep" else 0))
    return model


def raised(action: Callable[[], object]) -> BaseException:
    with pytest.raises(Exception) as caught:  # noqa: PT011 (compared in full by the caller)
        action()
    return caught.value


def described(error: BaseException) -> list[tuple[Any, ...]]:
    """The error and every error of its ``all_errors``: type, message, location and node."""
    if not isinstance(error, TramaError):
        return [(type(error), str(error))]
    return [(type(e), e.message, e.location, e.node_id) for e in (error, *error.all_errors)]


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every piece of text the writer makes, and every byte a dump writes, as text."""
    made: list[str] = []

    def recording(real: Callable[..., Iterator[str]]) -> Callable[..., Iterator[str]]:
        def pieces(*args: Any, **kwargs: Any) -> Iterator[str]:
            for piece in real(*args, **kwargs):
                made.append(piece)
                yield piece

        return pieces

    real_write = _commit.TempFile.write

    def write(self: _commit.TempFile, data: bytes | memoryview) -> None:
        made.append(bytes(data).decode("utf-8", "replace"))
        real_write(self, data)

    monkeypatch.setattr(_serialization, "model_pieces", recording(_serialization.model_pieces))
    monkeypatch.setattr(_serialization, "model_pieces_13", recording(_serialization.model_pieces_13))
    monkeypatch.setattr(_commit.TempFile, "write", write)
    return made


@pytest.mark.parametrize("version", FORMATS)
@pytest.mark.parametrize("depth", ["early", "deep"])
@pytest.mark.parametrize(("name", "where", "change"), RULES, ids=[rule[0] for rule in RULES])
def test_dump_refuses_what_validate_refuses(
    tmp_path: Path, recorded: list[str], name: str, where: str, change: Change, depth: str, version: str
) -> None:
    model = broken(change, depth)
    expected = described(raised(lambda: trama.validate(model)))
    assert described(raised(lambda: trama.dumps(model, format_version=version))) == expected
    made = "".join(recorded)
    if version != FLAT_VERSION:  # the nested writer decides before it makes any text
        assert made == ""
    elif where == "start":  # refused before any node was written
        assert '"id": "prep"' not in made
    elif where == "end":  # refused once every node was written
        assert '"id": "post"' in made
    else:  # in the pass; deep in the model, after text was made
        assert '"id": "post"' not in made
        assert ('"id": "root.c0"' in made) is (depth == "deep")
    assert '\n  "parameters": {' not in made, "the table is written once the model is proven"

    previous = tmp_path / "m.trama.json"
    trama.dump(mixed_model(3), previous, format_version=version)
    before = previous.read_bytes()
    for weights in ("inline", "external"):
        dump = functools.partial(trama.dump, model, previous, weights=weights, format_version=version)
        assert described(raised(dump)) == expected
        assert previous.read_bytes() == before
        assert [path.name for path in tmp_path.iterdir()] == ["m.trama.json"]
    assert not any(BAD in piece for piece in recorded), "a name that is not an identifier was written"


def test_the_rules_are_broken_where_meant() -> None:
    """Each broken model is refused for the rule it breaks (its first error names it), early
    and deep: the table above tests what it says."""
    words = {
        "repeated id": "used twice",
        "id not dotted": "not a dotted identifier",
        "op not an op name": "op '9op'",
        "missing parent": "does not exist",
        "parent comes later": "comes later",
        "parent is a leaf": "is a leaf",
        "parent is a call": "a calling node",
        "outputs repeat": "repeat",
        "unknown node": "unknown node",
        "node comes later": "comes later",
        "node out of scope": "same scope",
        "the parent's own output": "same scope",
        "the node before is the parent": "same scope",
        "the node before is in another scope": "same scope",
        "no such output": "no output",
        "no such scope input": "is not an input",
        "binding to no child": "not a child",
        "binding to no output": "no output",
        "call of an unknown node": "calls unknown",
        "call of a call": "itself a call",
        "call with parameters": "no parameters of its own",
        "slot to a missing entry": "missing parameter",
        "entry not referenced": "not referenced",
        "entry not storable": "cannot be stored",
        "model output unknown": "unknown node",
        "model inputs repeat": "repeat",
    }
    for name, _, change in RULES:
        for depth in ("early", "deep"):
            error = raised(functools.partial(trama.validate, broken(change, depth)))
            assert isinstance(error, (ValidationError, TypeError)), name
            if name in words:
                assert words[name] in str(error), (name, str(error))


# ----------------------------------------------------------------------------------------------
# Valid models: proven, never validated apart, written as the layout writes them
# ----------------------------------------------------------------------------------------------


def valid_models() -> Iterator[Model]:
    yield mixed_model(DEEP)
    yield calls_model()
    yield Model(inputs=["x"], outputs=[], nodes=[], parameters={})
    rng = random.Random(11)
    for _ in range(40):
        yield random_model(rng)


def test_valid_models_are_proven_in_the_pass(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``validate`` never runs for a valid model of any kind of node written in format 1.2: the
    writer's pass and the sections after it prove it; and the text is the layout's, byte for
    byte. (The nested writer of 1.3 validates first: its text reads back as the same model.)"""

    def refused(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("validated apart")

    models = list(valid_models())
    assert all(structural_errors(model) == [] for model in models)
    kinds = {"calls": 0, "metadata": 0, "bindings": 0, "slots": 0, "top": 0}
    monkeypatch.setattr(_validation, "validate", refused)
    monkeypatch.setattr(_serialization, "validate_model", refused)
    for k, model in enumerate(models):
        expected = format_json(encode_document(model, inline))
        assert trama.dumps(model, format_version="1.2") == expected
        trama.dump(model, tmp_path / f"m{k}.trama.json", format_version="1.2")
        assert (tmp_path / f"m{k}.trama.json").read_bytes() == expected.encode("utf-8", "backslashreplace")
        for node in model.nodes:
            kinds["calls"] += node.calls is not None
            kinds["metadata"] += node.metadata is not None
            kinds["bindings"] += node.output_bindings is not None
            kinds["slots"] += bool(node.parameters)
            kinds["top"] += "." not in node.id
    assert min(kinds.values()) > 20, kinds
    monkeypatch.undo()
    for k, model in enumerate(models):
        flat = trama.load(tmp_path / f"m{k}.trama.json")
        nested = trama.loads(trama.dumps(model))
        assert (nested.nodes, nested.parameters, nested.outputs, nested.metadata) == (
            flat.nodes,
            flat.parameters,
            flat.outputs,
            flat.metadata,
        )


def test_a_model_the_proof_is_unsure_of_is_validated_and_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry named after a node 512 levels deep has 513 segments, which an entry may have
    and an id may not: the proof, which checks entry names as ids, is unsure, so ``validate``
    decides, finds nothing, and the model is written."""
    ids = ["n"]
    while len(ids) < 512:
        ids.append(ids[-1] + ".n")
    x = Ref(INPUT, "x")
    nodes = [Node(a, "Block", {"x": x}, ["y"], output_bindings={"y": Ref(b, "y")}) for a, b in itertools.pairwise(ids)]
    nodes.append(Node(ids[-1], "Scale", {"x": x}, ["y"], {"s": f"{ids[-1]}.s"}))
    model = Model(inputs=["x"], outputs=[Ref("n", "y")], nodes=nodes, parameters={f"{ids[-1]}.s": Parameter(2)})
    assert structural_errors(model) == []
    validations: list[Model] = []
    real = _validation.validate

    def validate(model: Model) -> None:
        validations.append(model)
        real(model)

    monkeypatch.setattr(_validation, "validate", validate)
    assert trama.dumps(model, format_version="1.2") == format_json(encode_document(model, inline))
    assert validations == [model]
    assert trama.loads(trama.dumps(model)).nodes == model.nodes


# ----------------------------------------------------------------------------------------------
# Other errors come after the model's own, as when validation came first
# ----------------------------------------------------------------------------------------------


def test_a_write_error_comes_after_the_models_error(tmp_path: Path) -> None:
    folder = tmp_path / "a folder"
    folder.mkdir()
    invalid = broken(_ref(lambda model, i: Ref("nowhere", "y")), "early")
    expected = described(raised(lambda: trama.validate(invalid)))
    assert described(raised(lambda: trama.dump(invalid, folder))) == expected
    assert isinstance(raised(lambda: trama.dump(mixed_model(10), folder)), WriteError)


def test_a_bad_weights_argument_comes_after_the_models_error(tmp_path: Path) -> None:
    invalid = broken(_set(op="9op"), "early")
    expected = described(raised(lambda: trama.validate(invalid)))
    path = tmp_path / "m.trama.json"
    assert described(raised(lambda: trama.dump(invalid, path, weights="both"))) == expected  # type: ignore[arg-type]
    assert isinstance(raised(lambda: trama.dump(mixed_model(10), path, weights="both")), ValueError)  # type: ignore[arg-type]
    assert not path.exists()


def test_a_tensor_that_cannot_be_read_comes_after_the_models_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first tensor is read after the nodes, so an invalid model is refused before; and
    a failure anywhere before the model is proven gives way to the model's error."""
    invalid = broken(_ref(lambda model, i: Ref("nowhere", "y")), "early")
    expected = described(raised(lambda: trama.validate(invalid)))
    monkeypatch.setattr(_serialization, "encode_base64", lambda *args, **kwargs: 1 / 0)
    assert described(raised(lambda: trama.dumps(invalid))) == expected
    monkeypatch.setattr(_serialization, "model_pieces", lambda *args, **kwargs: 1 / 0)
    assert described(raised(lambda: trama.dumps(invalid))) == expected
    assert isinstance(raised(lambda: trama.dumps(mixed_model(10))), ZeroDivisionError)


# ----------------------------------------------------------------------------------------------
# Fuzzing: random models, broken at random
# ----------------------------------------------------------------------------------------------


def mutate(model: Model, rng: random.Random) -> None:
    """One random change: most break a rule, some leave the model valid."""
    nodes = model.nodes
    if not nodes:
        return
    node = rng.choice(nodes)
    other = rng.choice(nodes)
    kind = rng.randrange(17)
    if kind == 0:
        node.id = rng.choice([other.id, f"{other.id}.k", "ghost.k", f"{node.id}x", "a b"])
    elif kind == 1:
        node.op = rng.choice(["9", "a..b", "Op", other.op, ""])
    elif kind == 2:
        output = rng.choice([*other.outputs, "zz"])
        node.inputs = {
            **node.inputs,
            rng.choice(["x", "p", "q q"]): Ref(rng.choice([other.id, INPUT, "nowhere"]), output),
        }
    elif kind == 3 and node.inputs:
        port = rng.choice(list(node.inputs))
        node.inputs = {**node.inputs, port: Ref(INPUT, rng.choice(["x", *model.inputs, "nope"]))}
    elif kind == 4:
        node.outputs = rng.choice([[], ["y", "y"], [*node.outputs, "extra"], node.outputs[1:], ["w-w"]])
    elif kind == 5:
        node.output_bindings = None if node.output_bindings is not None else {}
    elif kind == 6 and node.output_bindings:
        name = rng.choice(list(node.output_bindings))
        node.output_bindings = {**node.output_bindings, name: Ref(other.id, rng.choice([*other.outputs, "zz"]))}
    elif kind == 7:
        node.calls = rng.choice([other.id, None, "nowhere"])
    elif kind == 8:
        node.parameters = {**node.parameters, rng.choice(["s", "t"]): rng.choice([*model.parameters, "missing"])}
    elif kind == 9:
        model.parameters[rng.choice(["spare", "a..b"])] = Parameter(1)
    elif kind == 10 and model.parameters:
        del model.parameters[rng.choice(list(model.parameters))]
    elif kind == 11:
        i, j = rng.randrange(len(nodes)), rng.randrange(len(nodes))
        nodes[i], nodes[j] = nodes[j], nodes[i]
    elif kind == 12:
        model.outputs = [Ref(other.id, rng.choice([*other.outputs, "zz"]))]
    elif kind == 13:
        model.inputs = rng.choice([["x", "x"], ["y"], [*model.inputs, "more"]])
    elif kind == 14:
        node.metadata = {"k": rng.random()}  # still valid
    elif kind == 15:
        k = rng.randrange(1, len(nodes)) if len(nodes) > 1 else 0
        before = nodes[k - 1]
        nodes[k].inputs = {"x": Ref(before.id, rng.choice([*before.outputs, "zz"]))}
    else:
        nodes.remove(node)


def test_fuzz_dumps_raises_exactly_what_validation_finds() -> None:
    """Random valid models, most broken by a random change or two, for about three seconds
    (at least 200): ``dumps`` raises when ``structural_errors`` finds something, its first
    error with all of them; else it writes the layout's text."""
    rng = random.Random(20260522)
    deadline = time.monotonic() + 3.0
    checked = refused = 0
    while time.monotonic() < deadline or checked < 200:
        model = random_model(rng)
        for _ in range(rng.choice([0, 1, 1, 1, 2])):
            mutate(model, rng)
        errors = structural_errors(model)
        if errors:
            for version in FORMATS:
                error = raised(functools.partial(trama.dumps, model, format_version=version))
                assert isinstance(error, TramaError)
                assert described(error)[:1] == described(errors[0])[:1]
                assert [described(e)[0] for e in error.all_errors] == [described(e)[0] for e in errors]
            refused += 1
        else:
            assert trama.dumps(model, format_version="1.2") == format_json(encode_document(model, inline))
            assert trama.loads(trama.dumps(model)).nodes == trama.loads(trama.dumps(model, format_version="1.2")).nodes
        checked += 1
    assert refused > checked // 3
    assert checked - refused > checked // 10
