"""Calling nodes (format 1.1): a module used twice is one node called from the second place.

Export makes calls (automatically for an object exported twice, or with ``ctx.call``), the codec
reads and writes them, validation enforces their rules at the right location, the JSON Schema
describes them, the SSA view and the summary show them, ``expand_calls`` turns them into
copies for the execution plan, and import hands out the very same object twice.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest
import toylayers
from jsonschema import Draft202012Validator

import trama
from trama import (
    INPUT,
    ExportError,
    Model,
    Node,
    NodeFragment,
    OpRegistry,
    OpSpec,
    Parameter,
    Ref,
    SchemaError,
    Tensor,
    ValidationError,
)
from trama.execution import build_plan
from trama.format._calls import call_cycle, expand_calls
from trama.tools import OpCount, render_summary, summarize, to_ssa

Doc = dict[str, Any]


def x_input() -> np.ndarray:
    return np.random.default_rng(3).standard_normal((2, 4)).astype(np.float32)


def linear(seed: int) -> toylayers.Linear:
    rng = np.random.default_rng(seed)
    return toylayers.Linear(rng.standard_normal((4, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32))


def export(module: Any, registry: OpRegistry | None = None) -> Model:
    return trama.export_model(module, inputs=["x"], outputs=["y"], registry=registry)


def reread(model: Model) -> Model:
    """Through the text and back, with the version the file was read from forgotten."""
    back = trama.loads(trama.dumps(model))
    back.source_format_version = None
    return back


# --------------------------------------------------------------------------------------------
# A hand-built model with every kind of call
# --------------------------------------------------------------------------------------------

WEIGHT = np.array([[1.0, -0.5], [0.25, 2.0]], dtype=np.float32)
BIAS = np.array([0.5, -1.0], dtype=np.float32)
LINEAR_SLOTS = {"in_features": "n", "out_features": "n", "weight": "w", "bias": "b"}


def calls_model() -> Model:
    """``root`` (Graph) holds:

    * ``block``: Sequential of ``fc`` (Linear 2→2) and ``act`` (ReLU), the called composite;
    * ``again``: a call of ``root.block`` on ``block``'s output (a composite target);
    * ``other``: a Graph whose ``inner`` calls ``root.block`` and whose ``head`` calls
      ``root.block.fc`` (calls from another scope, of a composite and of a leaf);
    * ``pair``: a Graph containing ``a`` (a Linear sharing ``fc``'s entries) and ``b``, a call
      of ``root.pair.a``;
    * ``pair2``: a call of ``root.pair``, a composite target that contains a call.

    ``y = pair2(pair(other(again(block(x)))))``.
    """
    x = Ref(INPUT, "x")
    nodes = [
        Node("root", "Graph", {"x": x}, ["y"], output_bindings={"y": Ref("root.pair2", "y")}),
        Node("root.block", "Sequential", {"x": x}, ["y"], output_bindings={"y": Ref("root.block.act", "y")}),
        Node("root.block.fc", "Linear", {"x": x}, ["y"], dict(LINEAR_SLOTS)),
        Node("root.block.act", "ReLU", {"x": Ref("root.block.fc", "y")}, ["y"]),
        Node("root.again", "Sequential", {"x": Ref("root.block", "y")}, ["y"], calls="root.block"),
        Node(
            "root.other",
            "Graph",
            {"x": Ref("root.again", "y")},
            ["y"],
            output_bindings={"y": Ref("root.other.head", "y")},
        ),
        Node("root.other.inner", "Sequential", {"x": x}, ["y"], calls="root.block"),
        Node("root.other.head", "Linear", {"x": Ref("root.other.inner", "y")}, ["y"], calls="root.block.fc"),
        Node(
            "root.pair", "Graph", {"x": Ref("root.other", "y")}, ["y"], output_bindings={"y": Ref("root.pair.b", "y")}
        ),
        Node("root.pair.a", "Linear", {"x": x}, ["y"], dict(LINEAR_SLOTS)),
        Node("root.pair.b", "Linear", {"x": Ref("root.pair.a", "y")}, ["y"], calls="root.pair.a"),
        Node("root.pair2", "Graph", {"x": Ref("root.pair", "y")}, ["y"], calls="root.pair"),
    ]
    parameters = {
        "n": Parameter(2),
        "w": Parameter(Tensor.from_array(WEIGHT), learnable=True),
        "b": Parameter(Tensor.from_array(BIAS), learnable=True),
    }
    return Model(["x"], [Ref("root", "y")], nodes, parameters)


def expected_output(x: np.ndarray) -> np.ndarray:
    def fc(v: np.ndarray) -> np.ndarray:
        return v @ WEIGHT.T + BIAS

    def block(v: np.ndarray) -> np.ndarray:
        return np.maximum(fc(v), 0)

    head = fc(block(block(block(x))))  # block, again, other.inner, other.head
    return fc(fc(fc(fc(head))))  # pair.a, pair.b, pair2.a, pair2.b


def node_index(model: Model, node_id: str) -> int:
    return next(i for i, node in enumerate(model.nodes) if node.id == node_id)


def test_the_hand_built_model_is_valid_for_the_catalog() -> None:
    model = calls_model()
    assert trama.collect_errors(model) == []
    assert trama.collect_errors(model, trama.registry("numpy")) == []  # no slots needed on calls
    assert reread(model) == model


def test_it_runs_on_numpy_as_computed_by_hand() -> None:
    x = np.array([[1.0, 2.0], [-3.0, 0.5]], dtype=np.float32)
    (y,) = trama.runtime_for_name("numpy").prepare(calls_model()).run([x])
    np.testing.assert_allclose(y, expected_output(x), rtol=1e-6)


# --------------------------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------------------------


def test_an_object_exported_twice_becomes_a_call_and_round_trips(toy_registry: OpRegistry) -> None:
    layer, relu = linear(1), toylayers.ReLU()
    module = toylayers.Sequential(layer, relu, layer, relu)
    model = export(module, registry=toy_registry)
    assert [(node.id, node.calls) for node in model.nodes] == [
        ("root", None),
        ("root.layers_0", None),
        ("root.layers_1", None),
        ("root.layers_2", "root.layers_0"),
        ("root.layers_3", "root.layers_1"),
    ]
    call = model.node("root.layers_2")
    assert call == Node(
        "root.layers_2", "Linear", {"x": Ref("root.layers_1", "y")}, ["y"], {}, None, None, "root.layers_0"
    )
    back = reread(model)
    assert back == model
    trama.validate(back, toy_registry)
    instance = trama.import_model(back, registry=toy_registry)
    assert instance.layers[0] is instance.layers[2]
    assert instance.layers[1] is instance.layers[3]
    np.testing.assert_array_equal(instance(x_input()), module(x_input()))


def test_a_module_shared_by_two_parents_is_called_from_the_other_scope(toy_registry: OpRegistry) -> None:
    block = toylayers.Sequential(linear(2), toylayers.ReLU())
    module = toylayers.Sequential(block, toylayers.Sequential(block, linear(3)))
    model = export(module, registry=toy_registry)
    call = model.node("root.layers_1.layers_0")
    assert (call.calls, call.op, call.inputs) == ("root.layers_0", "Sequential", {"x": Ref(INPUT, "x")})
    assert not any(node.id.startswith("root.layers_1.layers_0.") for node in model.nodes)  # no copy
    instance = trama.import_model(reread(model), registry=toy_registry)
    assert instance.layers[1].layers[0] is instance.layers[0]
    np.testing.assert_allclose(instance(x_input()), module(x_input()), rtol=1e-6)


class Twice:
    """``y = inner(inner(x))`` through ``ctx.call``; ``target`` picks what the second use calls."""

    def __init__(self, inner: Any, target: str | None = None, outputs: list[str] | None = None) -> None:
        self.inner = inner
        self.target = target
        self.outputs = outputs

    def to_node(self, ctx: trama.ExportContext) -> NodeFragment:
        first = ctx.child("first", self.inner, inputs={"x": ctx.input("x")}, outputs=["y"])["y"]
        target = self.target if self.target is not None else f"{ctx.node_id}.first"
        second = ctx.call("second", target, inputs={"x": first}, outputs=self.outputs)["y"]
        return NodeFragment(op="Graph", outputs=["y"], output_bindings={"y": second})


def test_ctx_call_adds_a_calling_node() -> None:
    model = export(Twice(linear(4)))
    second = model.node("root.second")
    assert (second.calls, second.op, second.outputs, second.parameters) == ("root.first", "Linear", ["y"], {})
    assert second.inputs == {"x": Ref("root.first", "y")}
    layer = linear(4)
    (y,) = trama.runtime_for_name("numpy").prepare(export(Twice(layer))).run([x_input()])
    np.testing.assert_allclose(y, layer(layer(x_input())), rtol=1e-5)


def test_ctx_call_of_a_call_calls_its_target() -> None:
    class Thrice:
        def to_node(self, ctx: trama.ExportContext) -> NodeFragment:
            layer = linear(5)
            a = ctx.child("a", layer, inputs={"x": ctx.input("x")})["y"]
            b = ctx.child("b", layer, inputs={"x": a})["y"]  # automatic: calls root.a
            c = ctx.call("c", "root.b", inputs={"x": b})["y"]  # root.b is a call: root.a is called
            return NodeFragment(op="Graph", outputs=["y"], output_bindings={"y": c})

    model = export(Thrice())
    assert [model.node(name).calls for name in ("root.a", "root.b", "root.c")] == [None, "root.a", "root.a"]


def test_exported_names_where_an_object_went() -> None:
    seen: dict[str, str | None] = {}
    layer = linear(6)

    class Probe:
        def to_node(self, ctx: trama.ExportContext) -> NodeFragment:
            seen["before"] = ctx.exported(layer)
            seen["self"] = ctx.exported(self)  # being exported: not yet
            y = ctx.child("fc", layer, inputs={"x": ctx.input("x")})["y"]
            seen["after"] = ctx.exported(layer)
            return NodeFragment(op="Graph", outputs=["y"], output_bindings={"y": y})

    export(Probe())
    assert seen == {"before": None, "self": None, "after": "root.fc"}


@pytest.mark.parametrize(
    ("target", "outputs", "message"),
    [
        ("root.nowhere", None, r"'root\.second' calls 'root\.nowhere', which has not been exported"),
        ("root", None, r"'root\.second' cannot call 'root': that node is being exported .*cannot recurse"),
        ("root.first", ["z"], r"asks for outputs \['z'\], but 'root\.first', which it calls, has \['y'\]"),
    ],
    ids=["not-exported", "ancestor", "outputs"],
)
def test_ctx_call_errors(target: str, outputs: list[str] | None, message: str) -> None:
    with pytest.raises(ExportError, match=message) as info:
        export(Twice(linear(7), target, outputs))
    assert info.value.node_id == "root.second"


def test_ctx_call_needs_the_targets_ports() -> None:
    class WrongPorts:
        def to_node(self, ctx: trama.ExportContext) -> NodeFragment:
            y = ctx.child("first", linear(8), inputs={"x": ctx.input("x")})["y"]
            ctx.call("second", "root.first", inputs={"input": y})
            return NodeFragment(op="Graph", outputs=["y"], output_bindings={"y": y})

    with pytest.raises(ExportError, match=r"connects ports \['input'\], but 'root\.first', .* connects \['x'\]"):
        export(WrongPorts())


def test_a_later_target_cannot_be_called_yet() -> None:
    class Forward:
        def to_node(self, ctx: trama.ExportContext) -> NodeFragment:
            ctx.call("early", "root.late", inputs={"x": ctx.input("x")})
            return NodeFragment(op="Graph", outputs=["y"], output_bindings={"y": ctx.input("x")})

    with pytest.raises(ExportError, match=r"'root\.late', which has not been exported"):
        export(Forward())


def test_a_module_containing_itself_is_an_export_error() -> None:
    loop = toylayers.Sequential(toylayers.ReLU())
    loop.layers.append(loop)
    with pytest.raises(ExportError, match=r"at 'root\.layers_1' is the object being exported at 'root'") as info:
        export(loop)
    assert info.value.node_id == "root.layers_1"


def test_a_reuse_with_other_ports_is_exported_again() -> None:
    # A call needs the same connected ports; a second use wired differently stays a node of its
    # own (sharing its parameter entries), as before calls existed.
    class Flexible:
        def to_node(self, ctx: trama.ExportContext) -> NodeFragment:
            return NodeFragment(op="Flexible", outputs=["y"], parameters={"w": self.w})

        w = np.zeros(2, dtype=np.float32)

    shared = Flexible()

    class Parent:
        def to_node(self, ctx: trama.ExportContext) -> NodeFragment:
            a = ctx.child("a", shared, inputs={"x": ctx.input("x")})["y"]
            b = ctx.child("b", shared, inputs={"x": a, "extra": a})["y"]
            return NodeFragment(op="Graph", outputs=["y"], output_bindings={"y": b})

    model = export(Parent())
    a, b = model.node("root.a"), model.node("root.b")
    assert b.calls is None
    assert a.parameters == b.parameters == {"w": "root.a.w"}


def test_lenses_system_with_one_lens_twice(tmp_path: Any) -> None:
    from trama_lenses import FreeSpace, System, ThinLens

    lens = ThinLens(2.0)
    system = System(lens, FreeSpace(1.0), lens)
    model = trama.export_model(system, inputs=["rays"], outputs=["rays"])
    assert model.nodes[3].calls == model.nodes[1].id
    trama.dump(model, tmp_path / "lens.trama.json")
    back = trama.import_model(trama.load(tmp_path / "lens.trama.json"))
    assert isinstance(back, System)
    assert back.elements[0] is back.elements[2]
    np.testing.assert_allclose(back.matrix, system.matrix)
    rays = np.array([[1.0, 0.0], [0.5, -0.25]])
    np.testing.assert_allclose(back(rays), system(rays))


# --------------------------------------------------------------------------------------------
# Reading: the JSON form
# --------------------------------------------------------------------------------------------


def calls_doc() -> Doc:
    return json.loads(trama.dumps(calls_model(), format_version="1.2"))


def load_error(doc: Doc, error: type[Exception] = SchemaError) -> Any:
    with pytest.raises(error) as info:
        trama.loads(json.dumps(doc))
    return info.value


def nested_calls_doc() -> Doc:
    """The calls model as ``dumps`` writes it now (format 1.3): ``root``'s children nested in it."""
    return json.loads(trama.dumps(calls_model()))


def nested_child(doc: Doc, name: str) -> tuple[int, Doc]:
    """The position and object of ``root``'s child ``name`` in a nested document."""
    children = doc["nodes"][0]["nodes"]
    k = [child["name"] for child in children].index(name)
    return k, children[k]


def test_a_calling_node_is_written_without_parameters_or_bindings() -> None:
    doc = calls_doc()
    assert doc["format_version"] == "1.2"  # calls exist since 1.1
    assert tuple(int(part) for part in trama.FORMAT_VERSION.split(".")) >= (1, 1)
    again = doc["nodes"][node_index(calls_model(), "root.again")]
    assert list(again) == ["id", "parent", "op", "calls", "inputs", "outputs"]
    assert again["calls"] == "root.block"
    # nested (1.3): no set, nodes or out object either; the target is its full id
    nested = nested_calls_doc()
    assert nested["format_version"] == trama.FORMAT_VERSION
    _, again = nested_child(nested, "again")
    assert again == {"name": "again", "op": "Sequential", "calls": "root.block", "in": "block"}
    _, other = nested_child(nested, "other")
    assert [child.get("calls") for child in other["nodes"]] == ["root.block", "root.block.fc"]


def test_documents_of_format_1_0_still_load() -> None:
    doc = json.loads(trama.dumps(export(linear(9)), format_version="1.2"))
    doc["format_version"] = "1.0"
    for entry in doc["parameters"].values():
        entry.pop("checksum", None)  # newer than 1.0, as calls are
    assert trama.loads(json.dumps(doc)).source_format_version == "1.0"


@pytest.mark.parametrize("version", ["1.0", "0.2"])
def test_calls_in_a_document_older_than_1_1_are_refused(version: str) -> None:
    doc = calls_doc()
    doc["format_version"] = version
    error = load_error(doc)
    where = node_index(calls_model(), "root.again")
    assert error.location == f"/nodes/{where}/calls"
    assert f"'calls' is new in format 1.1; this document declares format {version}" in error.message


@pytest.mark.parametrize(
    ("mutate", "field", "message"),
    [
        (lambda n: n.update(parameters={}), "parameters", "a calling node has no parameters"),
        (lambda n: n.update(output_bindings=None), "output_bindings", "a calling node has no output_bindings"),
        (lambda n: n.update(calls=3), "calls", "calls must be a node id (a string), got 3"),
        (lambda n: n.update(extra=1), "", r"unknown field(s) ['extra']"),
        (lambda n: n.pop("outputs"), "", "missing required field 'outputs'"),
    ],
    ids=["parameters", "output_bindings", "calls-type", "unknown", "missing"],
)
def test_malformed_calling_nodes(mutate: Callable[[Doc], Any], field: str, message: str) -> None:
    doc = calls_doc()
    where = node_index(calls_model(), "root.again")
    mutate(doc["nodes"][where])
    error = load_error(doc)
    assert error.location == f"/nodes/{where}" + (f"/{field}" if field else "")
    assert message in error.message


def test_a_newer_minor_ignores_unknown_members_of_a_call_but_not_parameters() -> None:
    # a newer minor is of the current (nested) shape: a call's settings would be its "set"
    doc = nested_calls_doc()
    k, again = nested_child(doc, "again")
    doc["format_version"] = "1.7"
    again["added_in_1_7"] = True
    assert trama.loads(json.dumps(doc)).node("root.again").calls == "root.block"
    again["set"] = {}
    error = load_error(doc)
    assert error.location == f"/nodes/0/nodes/{k}"
    assert "a calling node has no set" in error.message


# --------------------------------------------------------------------------------------------
# Validation rules
# --------------------------------------------------------------------------------------------


def with_node(model: Model, node_id: str, **changes: Any) -> Model:
    node = model.node(node_id)
    for name, value in changes.items():
        setattr(node, name, value)
    return model


def problems(model: Model) -> list[tuple[str, str | None, str]]:
    return [(error.location or "", error.node_id, error.message) for error in trama.collect_errors(model)]


def only_problem(model: Model) -> tuple[str, str | None, str]:
    found = problems(model)
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize(
    ("node_id", "changes", "field", "message"),
    [
        ("root.again", {"op": "Graph"}, "op", "op 'Graph' differs from 'Sequential', the op of 'root.block'"),
        (
            "root.other.head",
            {"outputs": ["y", "z"]},
            "outputs",
            "outputs ['y', 'z'] differ from ['y'], those of 'root.block.fc', which it calls",
        ),
        ("root.again", {"inputs": {}}, "inputs", "connects ports [], but 'root.block', which it calls, connects ['x']"),
        ("root.again", {"calls": "root.ghost"}, "calls", "calls unknown node 'root.ghost'"),
        ("root.again", {"calls": "root.other.inner"}, "calls", "calls 'root.other.inner', which is itself a call"),
        ("root.again", {"calls": "root.again"}, "calls", "calls itself"),
        ("root.again", {"parameters": {"weight": "w"}}, "parameters", "a calling node has no parameters of its own"),
        ("root.again", {"output_bindings": {"y": Ref(INPUT, "x")}}, "output_bindings", "has no output_bindings"),
    ],
    ids=["op", "outputs", "ports", "missing", "call-of-call", "itself", "parameters", "bindings"],
)
def test_each_rule_is_reported_at_its_place(node_id: str, changes: dict[str, Any], field: str, message: str) -> None:
    model = with_node(calls_model(), node_id, **changes)
    location, where, text = only_problem(model)
    assert (location, where) == (f"/nodes/{node_index(model, node_id)}/{field}", node_id)
    assert message in text


def test_outputs_must_keep_the_targets_order() -> None:
    model = calls_model()
    model.nodes.insert(1, Node("root.split", "Split", {"x": Ref(INPUT, "x")}, ["lo", "hi"]))
    model.nodes.insert(2, Node("root.split2", "Split", {"x": Ref(INPUT, "x")}, ["hi", "lo"], calls="root.split"))
    assert only_problem(model) == (
        "/nodes/2/outputs",
        "root.split2",
        "outputs ['hi', 'lo'] differ from ['lo', 'hi'], those of 'root.split', which it calls "
        "(the same names in the same order)",
    )


def test_a_call_of_its_own_ancestor_is_recursion() -> None:
    model = with_node(calls_model(), "root.other.inner", calls="root.other", op="Graph")
    location, where, text = only_problem(model)
    assert (location, where) == (f"/nodes/{node_index(model, 'root.other.inner')}/calls", "root.other.inner")
    assert text == "calls 'root.other', one of its own ancestors: a call cannot recurse"


def test_calls_that_expand_into_each_other_are_a_cycle() -> None:
    x = Ref(INPUT, "x")
    nodes = [
        Node("a", "Graph", {"x": x}, ["y"], output_bindings={"y": Ref("a.p", "y")}),
        Node("a.p", "Graph", {"x": x}, ["y"], calls="b"),
        Node("b", "Graph", {"x": Ref("a", "y")}, ["y"], output_bindings={"y": Ref("b.q", "y")}),
        Node("b.q", "Graph", {"x": x}, ["y"], calls="a"),
    ]
    model = Model(["x"], [Ref("b", "y")], nodes, {})
    location, where, text = only_problem(model)
    assert location.endswith("/calls")
    assert where in ("a.p", "b.q")
    assert "the calls form a cycle" in text
    assert "'a.p' calls 'b'" in text
    assert "'b.q' calls 'a'" in text
    assert {node.id for node in call_cycle(nodes) or []} == {"a.p", "b.q"}
    with pytest.raises(ValidationError, match="cycle"):
        expand_calls(model)


def test_no_children_under_a_calling_node() -> None:
    model = calls_model()
    model.nodes.insert(5, Node("root.again.extra", "ReLU", {"x": Ref(INPUT, "x")}, ["y"]))
    location, where, text = only_problem(model)
    assert (location, where) == ("/nodes/5/parent", "root.again.extra")
    assert text.startswith("parent 'root.again' is a calling node, which has no children")


def test_a_target_may_come_later_in_the_document() -> None:
    model = calls_model()  # root.pair.a comes last but one, in another scope
    model.nodes.insert(1, Node("root.early", "Linear", {"x": Ref(INPUT, "x")}, ["y"], calls="root.pair.a"))
    assert problems(model) == []
    assert reread(model) == model


def test_registry_checks_a_calls_ports_but_not_its_slots() -> None:
    # calls_model passes the registry although its calls have no slots (first test); ports are
    # checked on a call as on any node.
    model = calls_model()
    for node_id in ("root.block.fc", "root.other.head"):
        node = model.node(node_id)
        node.inputs = {"input": node.inputs["x"]}
    errors = trama.collect_errors(model, trama.registry("numpy"))
    assert {(error.node_id, error.location) for error in errors} == {
        ("root.block.fc", f"/nodes/{node_index(model, 'root.block.fc')}/inputs"),
        ("root.other.head", f"/nodes/{node_index(model, 'root.other.head')}/inputs"),
    }


# --------------------------------------------------------------------------------------------
# The JSON Schema
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    return Draft202012Validator(trama.json_schema(format_version="1.2"))


def schema_errors(validator: Draft202012Validator, doc: Doc) -> list[tuple[str, str]]:
    return [("/" + "/".join(map(str, e.absolute_path)), e.message) for e in validator.iter_errors(doc)]


def test_the_schema_accepts_calls_and_1_0_documents(validator: Draft202012Validator) -> None:
    doc = calls_doc()
    assert schema_errors(validator, doc) == []
    doc["format_version"] = "1.0"
    assert schema_errors(validator, doc) == []  # the shape is the same; the decoder refuses the calls


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda n: n.update(parameters={}), ("/nodes/4", "Additional properties are not allowed ('parameters' was")),
        (lambda n: n.update(calls="not an id!"), ("/nodes/4/calls", "'not an id!' does not match")),
        (lambda n: n.pop("op"), ("/nodes/4", "'op' is a required property")),
    ],
    ids=["parameters", "calls-pattern", "missing-op"],
)
def test_the_schema_rejects_malformed_calls(
    validator: Draft202012Validator, mutate: Callable[[Doc], Any], expected: tuple[str, str]
) -> None:
    doc = calls_doc()
    assert node_index(calls_model(), "root.again") == 4
    mutate(doc["nodes"][4])
    found = schema_errors(validator, doc)
    assert len(found) == 1, found
    assert found[0][0] == expected[0]
    assert found[0][1].startswith(expected[1]), found


def test_the_schema_still_rejects_an_ordinary_node_without_parameters(validator: Draft202012Validator) -> None:
    doc = calls_doc()
    del doc["nodes"][0]["parameters"]
    assert schema_errors(validator, doc) == [("/nodes/0", "'parameters' is a required property")]


# --------------------------------------------------------------------------------------------
# Views: SSA text and summary
# --------------------------------------------------------------------------------------------


def test_ssa_shows_calls() -> None:
    text = to_ssa(calls_model())
    assert "\n  %again = call root.block(x=%block)  # Sequential\n" in text
    assert "\n    %head = call root.block.fc(x=%inner)  # Linear\n" in text
    assert "\n  %pair2 = call root.pair(x=%pair)  # Graph\n" in text
    assert not any(line.startswith("  %again") and line.endswith(":") for line in text.splitlines())  # no body


def test_summary_counts_calls() -> None:
    summary = summarize(calls_model())
    assert (summary.node_count, summary.leaf_count, summary.composite_count, summary.call_count) == (12, 3, 4, 5)
    assert OpCount("Sequential", True, 3) in summary.ops  # block and two calls of it
    assert OpCount("Linear", False, 4) in summary.ops  # fc, pair.a and their calls head, pair.b
    assert "nodes       12 (3 leaves, 4 composites, 5 calls, depth 3)\n" in render_summary(summary)
    assert summary.to_dict()["call_count"] == 5


# --------------------------------------------------------------------------------------------
# Expansion for execution
# --------------------------------------------------------------------------------------------


def test_expand_calls_copies_targets() -> None:
    model = calls_model()
    nodes, origin = expand_calls(model)
    by_id = {node.id: node for node in nodes}
    assert [node.id for node in nodes] == [
        "root",
        "root.block",
        "root.block.fc",
        "root.block.act",
        "root.again",
        "root.again.fc",
        "root.again.act",
        "root.other",
        "root.other.inner",
        "root.other.inner.fc",
        "root.other.inner.act",
        "root.other.head",
        "root.pair",
        "root.pair.a",
        "root.pair.b",
        "root.pair2",
        "root.pair2.a",
        "root.pair2.b",
    ]
    assert origin == {
        "root.again": "root.block",
        "root.again.fc": "root.block.fc",
        "root.again.act": "root.block.act",
        "root.other.inner": "root.block",
        "root.other.inner.fc": "root.block.fc",
        "root.other.inner.act": "root.block.act",
        "root.other.head": "root.block.fc",
        "root.pair.b": "root.pair.a",
        "root.pair2": "root.pair",
        "root.pair2.a": "root.pair.a",
        "root.pair2.b": "root.pair.a",  # a call inside the target, expanded in turn
    }
    assert by_id["root.again"] == Node(
        "root.again", "Sequential", {"x": Ref("root.block", "y")}, ["y"], {}, {"y": Ref("root.again.act", "y")}
    )
    assert by_id["root.again.act"].inputs == {"x": Ref("root.again.fc", "y")}
    assert by_id["root.other.head"].parameters == model.node("root.block.fc").parameters
    assert by_id["root.pair2.b"] == Node("root.pair2.b", "Linear", {"x": Ref("root.pair2.a", "y")}, ["y"], LINEAR_SLOTS)
    assert all(node.calls is None for node in nodes)
    assert by_id["root.block"] is model.node("root.block")  # the model's own nodes, not copies
    expanded = Model(model.inputs, model.outputs, nodes, model.parameters)
    assert trama.collect_errors(expanded) == []


def test_expand_calls_without_calls_is_the_node_list() -> None:
    model = export(toylayers.mlp([4, 3, 2]))
    nodes, origin = expand_calls(model)
    assert nodes == model.nodes
    assert nodes is not model.nodes
    assert origin == {}


class Counter:
    """A stateful kernel: adds its input to a running total, kept in the runtime's state."""

    def initial_state(self) -> np.ndarray:
        return np.zeros(2)

    def step(self, inputs: Mapping[str, Any], state: np.ndarray) -> tuple[dict[str, Any], np.ndarray]:
        total = state + inputs["x"]
        return {"y": total}, total


def counting_registry(built: list[str]) -> OpRegistry:
    def build(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Counter:
        built.append(node.id)
        return Counter()

    return OpRegistry(
        [
            OpSpec("Acc", inputs=("x",), outputs=("y",), factory=build),
            OpSpec("Graph", composite=True, variadic_inputs=True, variadic_outputs=True),
        ]
    )


def test_plan_shares_kernels_but_keeps_one_state_per_call() -> None:
    x = Ref(INPUT, "x")
    nodes = [
        Node("net", "Graph", {"x": x}, ["y"], output_bindings={"y": Ref("net.twice", "y")}),
        Node("net.acc", "Acc", {"x": x}, ["y"]),
        Node("net.twice", "Acc", {"x": Ref("net.acc", "y")}, ["y"], calls="net.acc"),
    ]
    model = Model(["x"], [Ref("net", "y")], nodes, {})
    built: list[str] = []
    plan = build_plan(model, counting_registry(built))
    assert built == ["net.acc"]
    assert [step.node.id for step in plan.steps] == ["net.acc", "net.twice"]
    assert plan.steps[0].kernel is plan.steps[1].kernel
    states = plan.initial_states()
    assert set(states) == {"net.acc", "net.twice"}
    one = np.ones(2)
    assert plan.run([one], states)[0].tolist() == [1.0, 1.0]  # acc: 0 + 1, twice: 0 + 1
    assert plan.run([one], states)[0].tolist() == [3.0, 3.0]  # acc: 1 + 1, twice: 1 + 2
    assert states["net.acc"].tolist() == [2.0, 2.0]
    assert states["net.twice"].tolist() == [3.0, 3.0]


# --------------------------------------------------------------------------------------------
# Import
# --------------------------------------------------------------------------------------------


def recording_registry(calls: list[tuple[str, dict[str, Any]]]) -> OpRegistry:
    def build(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> object:
        calls.append((node.id, dict(children)))
        return object()

    return OpRegistry(
        [
            OpSpec("ReLU", inputs=("x",), outputs=("y",), factory=build),
            OpSpec("Graph", composite=True, variadic_inputs=True, variadic_outputs=True, factory=build),
        ]
    )


def test_import_builds_a_later_target_first_and_hands_out_one_object() -> None:
    x = Ref(INPUT, "x")
    nodes = [
        Node("root", "Graph", {"x": x}, ["y"], output_bindings={"y": Ref("root.second", "y")}),
        Node("root.first", "ReLU", {"x": x}, ["y"], calls="root.second"),
        Node("root.second", "ReLU", {"x": Ref("root.first", "y")}, ["y"]),
        Node("side", "Graph", {"x": x}, ["y"], output_bindings={"y": Ref("side.reuse", "y")}),
        Node("side.reuse", "ReLU", {"x": x}, ["y"], calls="root.second"),
    ]
    model = Model(["x"], [Ref("root", "y"), Ref("side", "y")], nodes, {})
    seen: list[tuple[str, dict[str, Any]]] = []
    built = trama.import_model(model, registry=recording_registry(seen))
    assert [node_id for node_id, _ in seen] == ["root.second", "side", "root"]  # one ReLU built, once
    children = dict(seen)
    assert list(children["root"]) == ["first", "second"]  # document order
    assert children["root"]["first"] is children["root"]["second"]
    assert children["side"]["reuse"] is children["root"]["second"]
    assert list(built) == ["root", "side"]


def test_import_of_calls_model_gives_shared_objects() -> None:
    model = calls_model()
    seen: list[tuple[str, dict[str, Any]]] = []
    factory = recording_registry(seen)["ReLU"].factory
    catalog = trama.registry("numpy")
    registry = OpRegistry(
        dataclasses.replace(catalog[op], factory=factory) for op in ("Graph", "Sequential", "Linear", "ReLU")
    )
    trama.import_model(model, registry=registry)
    children = dict(seen)
    block = children["root"]["block"]
    assert children["root"]["again"] is block
    assert children["root.other"]["inner"] is block
    assert children["root.other"]["head"] is children["root.block"]["fc"]
    assert children["root"]["pair2"] is children["root"]["pair"]
    assert len(seen) == len([node for node in model.nodes if node.calls is None])


def test_the_command_line_validates_and_describes_calls(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from trama.tools import main

    path = tmp_path / "calls.trama.json"
    for version in ("1.2", "1.3"):
        trama.dump(calls_model(), path, format_version=version)
        assert main(["validate", str(path)]) == 0
        assert capsys.readouterr().out == f"{path}: ok\n"
        assert main(["info", str(path)]) == 0
        assert "12 (3 leaves, 4 composites, 5 calls, depth 3)" in capsys.readouterr().out
    # a call of an unknown node, in the flat form (whose nodes are listed by id)
    trama.dump(calls_model(), path, format_version="1.2")
    doc = json.loads(path.read_text())
    doc["nodes"][node_index(calls_model(), "root.again")]["calls"] = "root.ghost"
    path.write_text(json.dumps(doc))
    assert main(["validate", str(path)]) == 1
    where = node_index(calls_model(), "root.again")
    assert capsys.readouterr().out == (
        f"{path}: /nodes/{where}/calls (node 'root.again'): calls unknown node 'root.ghost'\n"
    )
    # and in the nested form, located where it is written
    nested = nested_calls_doc()
    k, again = nested_child(nested, "again")
    again["calls"] = "root.ghost"
    error = load_error(nested, trama.ValidationError)
    assert (error.location, error.message) == (f"/nodes/0/nodes/{k}/calls", "calls unknown node 'root.ghost'")


# --- Expansion bombs ---------------------------------------------------------------------------


def _doubling(levels: int) -> Model:
    """Block k calls block k − 1 twice: 2 nodes per level, 2^levels leaves once expanded."""
    x = Ref(INPUT, "x")
    nodes = [
        Node("b0", "Graph", {"x": x}, ["y"], output_bindings={"y": Ref("b0.r", "y")}),
        Node("b0.r", "relu", {"x": x}, ["y"]),
    ]
    for k in range(1, levels + 1):
        block = f"b{k}"
        nodes.append(Node(block, "Graph", {"x": x}, ["y"], output_bindings={"y": Ref(f"{block}.c1", "y")}))
        nodes.append(Node(f"{block}.c0", "Graph", {"x": x}, ["y"], calls=f"b{k - 1}"))
        nodes.append(Node(f"{block}.c1", "Graph", {"x": Ref(f"{block}.c0", "y")}, ["y"], calls=f"b{k - 1}"))
    return Model(["x"], [Ref(f"b{levels}", "y")], nodes, {})


def test_the_expansion_is_counted_without_expanding() -> None:
    from trama.format._calls import expand_calls, expanded_size

    for levels in range(5):
        model = _doubling(levels)
        assert expanded_size(model.nodes) == len(expand_calls(model)[0])
    # a composite and a call of it side by side in one scope: no false cycle
    x = Ref(INPUT, "x")
    side = [
        Node("p", "Graph", {"x": x}, ["y"], output_bindings={"y": Ref("p.again", "y")}),
        Node("p.inner", "Graph", {"x": x}, ["y"], output_bindings={"y": Ref("p.inner.r", "y")}),
        Node("p.inner.r", "relu", {"x": x}, ["y"]),
        Node("p.again", "Graph", {"x": Ref("p.inner", "y")}, ["y"], calls="p.inner"),
    ]
    model = Model(["x"], [Ref("p", "y")], side, {})
    assert expanded_size(model.nodes) == len(expand_calls(model)[0]) == 5
    # b_k expands to 3 * 2^k - 1 nodes, and every block is a top-level node: counted, never built
    assert expanded_size(_doubling(40).nodes) == sum(3 * 2**k - 1 for k in range(41))


@pytest.mark.parametrize("runtime", ["numpy", "torch:cpu", "jax:cpu"])
def test_a_model_whose_calls_expand_past_the_limit_is_refused_before_anything_is_built(runtime: str) -> None:
    bomb = _doubling(40)  # a few KB; 2^40 leaves
    trama.validate(bomb)  # valid: the format does not bound it
    with pytest.raises(trama.ValidationError, match=r"expanding its calls would make \d+ nodes, more than"):
        trama.runtime_for_name(runtime).prepare(bomb)
    assert trama.runtime_for_name(runtime).prepare(_doubling(3)) is not None  # the same shape, small, runs
