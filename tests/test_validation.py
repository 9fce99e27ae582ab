"""The structural rules, one by one, on in-memory models; and the checks against a registry.

``collect_errors`` returns every problem; ``validate`` raises the first one, carrying all of them
in ``all_errors``. Registry checks run only once the structure holds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import trama
from trama import INPUT, Model, Node, OpRegistry, OpSpec, Parameter, ParameterSchema, Ref, Tensor


def base_model() -> Model:
    """root (Sequential) -> root.linear (Linear, in/out features sharing "dims.n") -> root.relu."""
    return Model(
        inputs=["x"],
        outputs=[Ref("root", "y")],
        nodes=[
            Node("root", "Sequential", {"x": Ref(INPUT, "x")}, ["y"], {}, {"y": Ref("root.relu", "y")}),
            Node(
                "root.linear",
                "Linear",
                {"x": Ref(INPUT, "x")},
                ["y"],
                {
                    "in_features": "dims.n",
                    "out_features": "dims.n",
                    "weight": "root.linear.weight",
                    "bias": "root.linear.bias",
                },
            ),
            Node("root.relu", "ReLU", {"x": Ref("root.linear", "y")}, ["y"]),
        ],
        parameters={
            "dims.n": Parameter(2),
            "root.linear.weight": Parameter(Tensor.from_array(np.eye(2, dtype=np.float32)), learnable=True),
            "root.linear.bias": Parameter(Tensor.from_array(np.zeros(2, dtype=np.float32)), learnable=True),
        },
    )


def test_the_base_model_is_valid(toy_registry: OpRegistry) -> None:
    model = base_model()
    assert trama.collect_errors(model) == []
    assert trama.collect_errors(model, toy_registry) == []
    trama.validate(model, toy_registry)


def node(model: Model, node_id: str) -> Node:
    return model.node(node_id)


def extra_leaf(node_id: str, inputs: dict[str, Ref] | None = None) -> Node:
    return Node(node_id, "ReLU", inputs or {}, ["y"])


def rename_entry(model: Model, old: str, new: str) -> None:
    model.parameters[new] = model.parameters.pop(old)
    for n in model.nodes:
        n.parameters = {slot: new if key == old else key for slot, key in n.parameters.items()}


Edit = Callable[[Model], Any]

RULES: list[tuple[str, Edit, str, str, str | None]] = [
    # (name, edit, message fragment, location, node id)
    ("inputs-repeat", lambda m: m.inputs.append("x"), "model inputs repeat", "/inputs", None),
    ("input-name", lambda m: m.inputs.append("a.b"), "input name 'a.b' is not an identifier", "/inputs/1", None),
    ("input-name-empty", lambda m: m.inputs.append(""), "is not an identifier", "/inputs/1", None),
    (
        "id-not-dotted",
        lambda m: m.nodes.append(extra_leaf("root.re lu", {"x": Ref("root.linear", "y")})),
        "not a dotted identifier",
        "/nodes/3/id",
        "root.re lu",
    ),
    (
        "id-trailing-newline",
        lambda m: m.nodes.append(extra_leaf("root.z\n", {"x": Ref("root.linear", "y")})),
        "not a dotted identifier",
        "/nodes/3/id",
        "root.z\n",
    ),
    (
        "id-twice",
        lambda m: m.nodes.append(extra_leaf("root.relu", {"x": Ref("root.linear", "y")})),
        "used twice",
        "/nodes/3/id",
        "root.relu",
    ),
    (
        "parent-missing",
        lambda m: m.nodes.append(extra_leaf("ghost.a")),
        "'ghost' does not exist",
        "/nodes/3/parent",
        "ghost.a",
    ),
    (
        "parent-later",
        lambda m: m.nodes.reverse(),
        "'root' does not exist or comes later",
        "/nodes/0/parent",
        "root.relu",
    ),
    (
        "parent-leaf",
        lambda m: m.nodes.append(extra_leaf("root.relu.in")),
        "'root.relu' is a leaf",
        "/nodes/3/parent",
        "root.relu.in",
    ),
    (
        "ref-unknown",
        lambda m: node(m, "root.relu").inputs.update(x=Ref("root.nope", "y")),
        "unknown node 'root.nope'",
        "/nodes/2/inputs/x",
        "root.relu",
    ),
    (
        "ref-later",
        lambda m: node(m, "root.linear").inputs.update(x=Ref("root.relu", "y")),
        "comes later",
        "/nodes/1/inputs/x",
        "root.linear",
    ),
    (
        "ref-self",
        lambda m: node(m, "root.relu").inputs.update(x=Ref("root.relu", "y")),
        "comes later",
        "/nodes/2/inputs/x",
        "root.relu",
    ),
    (
        "ref-parent",
        lambda m: node(m, "root.relu").inputs.update(x=Ref("root", "y")),
        "not in the same scope",
        "/nodes/2/inputs/x",
        "root.relu",
    ),
    (
        "ref-into-composite",
        lambda m: m.nodes.append(extra_leaf("after", {"x": Ref("root.linear", "y")})),
        "not in the same scope",
        "/nodes/3/inputs/x",
        "after",
    ),
    (
        "ref-undeclared-output",
        lambda m: node(m, "root.relu").inputs.update(x=Ref("root.linear", "z")),
        "no output 'z'",
        "/nodes/2/inputs/x",
        "root.relu",
    ),
    (
        "ref-unknown-port-of-parent",
        lambda m: node(m, "root.linear").inputs.update(x=Ref(INPUT, "w")),
        "'w' is not an input of composite 'root'",
        "/nodes/1/inputs/x",
        "root.linear",
    ),
    (
        "ref-unknown-model-input",
        lambda m: node(m, "root").inputs.update(x=Ref(INPUT, "w")),
        "'w' is not an input of the model",
        "/nodes/0/inputs/x",
        "root",
    ),
    (
        "port-name",
        lambda m: node(m, "root.relu").inputs.update({"a-b": Ref("root.linear", "y")}),
        "input port name 'a-b'",
        "/nodes/2/inputs",
        "root.relu",
    ),
    (
        "output-name",
        lambda m: node(m, "root.relu").outputs.append("y.2"),
        "output name 'y.2'",
        "/nodes/2/outputs/1",
        "root.relu",
    ),
    (
        "outputs-repeat",
        lambda m: node(m, "root.relu").outputs.append("y"),
        "outputs repeat",
        "/nodes/2/outputs",
        "root.relu",
    ),
    (
        "bindings-missing",
        lambda m: setattr(node(m, "root"), "output_bindings", {}),
        "missing ['y']",
        "/nodes/0/output_bindings",
        "root",
    ),
    (
        "bindings-extra",
        lambda m: node(m, "root").output_bindings.update(z=Ref("root.relu", "y")),  # type: ignore[union-attr]
        "not declared ['z']",
        "/nodes/0/output_bindings",
        "root",
    ),
    (
        "binding-not-a-child",
        lambda m: node(m, "root").output_bindings.update(y=Ref("root", "y")),  # type: ignore[union-attr]
        "not a child of this composite",
        "/nodes/0/output_bindings/y",
        "root",
    ),
    (
        "binding-grandchild",
        lambda m: (
            setattr(node(m, "root.relu"), "output_bindings", {"y": Ref(INPUT, "x")}),
            m.nodes.append(extra_leaf("root.relu.inner", {"x": Ref(INPUT, "x")})),
            node(m, "root").output_bindings.update(y=Ref("root.relu.inner", "y")),  # type: ignore[union-attr]
        ),
        "not a child of this composite",
        "/nodes/0/output_bindings/y",
        "root",
    ),
    (
        "binding-unknown",
        lambda m: node(m, "root").output_bindings.update(y=Ref("root.nope", "y")),  # type: ignore[union-attr]
        "unknown node 'root.nope'",
        "/nodes/0/output_bindings/y",
        "root",
    ),
    (
        "binding-undeclared-output",
        lambda m: node(m, "root").output_bindings.update(y=Ref("root.relu", "q")),  # type: ignore[union-attr]
        "no output 'q'",
        "/nodes/0/output_bindings/y",
        "root",
    ),
    (
        "binding-unknown-input",
        lambda m: node(m, "root").output_bindings.update(y=Ref(INPUT, "w")),  # type: ignore[union-attr]
        "'w' is not an input of this composite",
        "/nodes/0/output_bindings/y",
        "root",
    ),
    ("model-output-unknown", lambda m: m.outputs.append(Ref("nope", "y")), "unknown node 'nope'", "/outputs/1", None),
    (
        "model-output-nested",
        lambda m: m.outputs.append(Ref("root.relu", "y")),
        "not in the same scope",
        "/outputs/1",
        None,
    ),
    ("model-output-undeclared", lambda m: m.outputs.append(Ref("root", "q")), "no output 'q'", "/outputs/1", None),
    ("model-output-input", lambda m: m.outputs.append(Ref(INPUT, "x")), "not %input", "/outputs/1", None),
    (
        "slot-name-not-identifier",
        lambda m: node(m, "root.linear").parameters.update({"a/b": node(m, "root.linear").parameters["weight"]}),
        "slot name 'a/b' is not an identifier",
        "/nodes/1/parameters",
        "root.linear",
    ),
    (
        "slot-missing-entry",
        lambda m: node(m, "root.linear").parameters.update(weight="nope"),
        "missing parameter 'nope'",
        "/nodes/1/parameters/weight",
        "root.linear",
    ),
    (
        "entry-unreferenced",
        lambda m: m.parameters.update(extra=Parameter(1)),
        "not referenced",
        "/parameters/extra",
        None,
    ),
    (
        "entry-name-node-id",
        lambda m: rename_entry(m, "root.linear.bias", "root.relu"),
        "also a node id",
        "/parameters/root.relu",
        None,
    ),
    (
        "entry-name-not-dotted",
        lambda m: rename_entry(m, "root.linear.bias", "bias/1"),
        "not a dotted identifier",
        "/parameters/bias~11",
        None,
    ),
    (
        "entry-name-trailing-newline",
        lambda m: rename_entry(m, "root.linear.bias", "bias\n"),
        "not a dotted identifier",
        "/parameters/bias\n",
        None,
    ),
    (
        "value-nan",
        lambda m: m.parameters.update({"dims.n": Parameter(float("nan"))}),
        "nan is not a JSON number",
        "/parameters/dims.n/value",
        None,
    ),
    (
        "value-inf-in-list",
        lambda m: m.parameters.update({"dims.n": Parameter([1, [float("-inf")]])}),
        "-inf is not a JSON number",
        "/parameters/dims.n/value",
        None,
    ),
    (
        "value-tensor-in-list",
        lambda m: m.parameters.update({"dims.n": Parameter([Tensor.from_array(np.zeros(2))])}),
        "not tensors",
        "/parameters/dims.n/value",
        None,
    ),
    (
        "value-object",
        lambda m: m.parameters.update({"dims.n": Parameter(object())}),  # type: ignore[arg-type]
        "a value of type object",
        "/parameters/dims.n/value",
        None,
    ),
    (
        "value-ndarray",
        lambda m: m.parameters.update({"dims.n": Parameter(np.zeros(2))}),  # type: ignore[arg-type]
        "a value of type ndarray",
        "/parameters/dims.n/value",
        None,
    ),
    # op names, opset namespaces, name sizes and tree depth (docs/format.md, sections 4.1 and 7)
    *[
        (f"op-{name}", lambda m, op=op: setattr(node(m, "root.relu"), "op", op), "op ", "/nodes/2/op", "root.relu")
        for name, op in {
            "newline": "ReLU\nroot.evil = Evil()",
            "escape": "\x1b[31mReLU",
            "empty": "",
            "leading-digit": "2d",
            "digit-segment": "acme.2d",
            "doubled-dot": "acme..ReLU",
            "non-ascii": "ReLÜ",
            "too-long": "R" * 257,
        }.items()
    ],
    (
        "opset-namespace",
        lambda m: m.opsets.update({"trama": 1, "ac me": 1}),
        "opset namespace 'ac me' is not a dotted identifier",
        "/opsets/ac me",
        None,
    ),
    (
        "input-name-too-long",
        lambda m: m.inputs.append("x" * 257),
        "it has 257 characters, at most 256",
        "/inputs/1",
        None,
    ),
    (
        "output-name-too-long",
        lambda m: node(m, "root.relu").outputs.append("y" * 257),
        "it has 257 characters",
        "/nodes/2/outputs/1",
        "root.relu",
    ),
    (
        "id-segment-too-long",
        lambda m: m.nodes.append(extra_leaf("root." + "r" * 257, {"x": Ref("root.linear", "y")})),
        "a segment has more than 256 characters",
        "/nodes/3/id",
        "root." + "r" * 257,
    ),
    (
        "entry-name-too-many-segments",
        lambda m: rename_entry(m, "root.linear.bias", ".".join(["b"] * 514)),
        "has 514 segments; at most 513",
        "/parameters/" + ".".join(["b"] * 514),
        None,
    ),
    (
        "fact-beyond-int64",
        lambda m: setattr(m, "input_facts", [trama.ValueFact("float32", ("batch", 2**63))]),
        "does not fit a signed 64-bit integer",
        "/input_facts/0/shape/1",
        None,
    ),
    (
        "fact-65-dims",
        lambda m: setattr(m, "output_facts", [trama.ValueFact(shape=(1,) * 65)]),
        "65 dimensions; at most 64",
        "/output_facts/0/shape",
        None,
    ),
    (
        "fact-negative",
        lambda m: setattr(m, "input_facts", [trama.ValueFact(shape=(-1,))]),
        "non-negative integers",
        "/input_facts/0/shape",
        None,
    ),
]


@pytest.mark.parametrize(("edit", "message", "location", "node_id"), [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_structural_rule(edit: Edit, message: str, location: str, node_id: str | None) -> None:
    model = base_model()
    edit(model)
    errors = trama.collect_errors(model)
    assert errors, "the broken model passed"
    matching = [e for e in errors if message in e.message]
    assert matching, [str(e) for e in errors]
    error = matching[0]
    assert isinstance(error, trama.ValidationError)
    assert error.location == location
    assert error.node_id == node_id
    with pytest.raises(trama.ValidationError) as info:
        trama.validate(model)
    assert info.value.message == errors[0].message
    # Nothing invalid can be written either.
    with pytest.raises(trama.ValidationError):
        trama.dumps(model)


def test_valid_variations() -> None:
    """Things the rules allow: several top-level nodes, none at all, unused inputs, a composite
    without children, pass-through bindings, sharing one entry from any depth."""
    model = base_model()
    model.inputs.append("unused")
    node(model, "root").outputs.append("skip")
    node(model, "root").output_bindings["skip"] = Ref(INPUT, "x")  # type: ignore[index]
    model.outputs.append(Ref("root", "skip"))
    second = Node("second", "Identity", {"x": Ref("root", "y")}, ["y"], {"k": "dims.n"}, {"y": Ref(INPUT, "x")})
    model.nodes.append(second)
    model.parameters["tuple"] = Parameter((1, 2.5, [None, "s"]))
    node(model, "root.relu").parameters["t"] = "tuple"
    assert trama.collect_errors(model) == []
    empty = Model(inputs=[], outputs=[], nodes=[], parameters={})
    assert trama.collect_errors(empty) == []
    assert trama.loads(trama.dumps(empty)).nodes == []


def test_collect_errors_returns_every_problem_and_validate_raises_the_first() -> None:
    model = base_model()
    node(model, "root.relu").inputs["x"] = Ref("root.nope", "y")
    model.outputs.append(Ref(INPUT, "x"))
    model.parameters["extra"] = Parameter(1)
    errors = trama.collect_errors(model)
    assert [(e.location, e.node_id) for e in errors] == [
        ("/nodes/2/inputs/x", "root.relu"),
        ("/outputs/1", None),
        ("/parameters/extra", None),
    ]
    with pytest.raises(trama.ValidationError) as info:
        trama.validate(model)
    assert info.value.location == "/nodes/2/inputs/x"
    assert [str(e) for e in info.value.all_errors] == [str(e) for e in errors]
    assert info.value.all_errors[0] is info.value
    assert str(info.value) == "/nodes/2/inputs/x (node 'root.relu'): refers to unknown node 'root.nope'"


# --------------------------------------------------------------------------------------------
# Registry checks
# --------------------------------------------------------------------------------------------


def registry_errors(model: Model, registry: OpRegistry) -> list[trama.TramaError]:
    assert trama.collect_errors(model) == [], "the structure must hold for registry checks to run"
    errors = trama.collect_errors(model, registry)
    assert all(isinstance(e, trama.RegistryError) for e in errors)
    return errors


def test_unknown_op_suggests_close_names(toy_registry: OpRegistry) -> None:
    model = base_model()
    node(model, "root.linear").op = "Linaer"
    (error,) = registry_errors(model, toy_registry)
    assert "unknown op 'Linaer'" in error.message
    assert "did you mean 'Linear'" in error.message
    assert error.location == "/nodes/1/op"
    assert error.node_id == "root.linear"


def test_unknown_op_without_close_names(toy_registry: OpRegistry) -> None:
    model = base_model()
    node(model, "root.relu").op = "os.system"
    (error,) = registry_errors(model, toy_registry)
    assert "unknown op 'os.system' (3 ops registered)" in error.message
    assert "did you mean" not in error.message


def test_composite_mismatch(toy_registry: OpRegistry) -> None:
    model = base_model()
    node(model, "root.relu").output_bindings = {"y": Ref(INPUT, "x")}  # a composite with no children
    (error,) = registry_errors(model, toy_registry)
    assert "op 'ReLU' is a leaf, but this node is" in error.message
    assert error.node_id == "root.relu"
    leaf_sequential = Model(["x"], [Ref("s", "y")], [Node("s", "Sequential", {"x": Ref(INPUT, "x")}, ["y"])], {})
    (error,) = registry_errors(leaf_sequential, toy_registry)
    assert "op 'Sequential' is a composite, but this node is not" in error.message


def test_missing_and_unknown_ports(toy_registry: OpRegistry) -> None:
    model = base_model()
    node(model, "root.relu").inputs = {"z": Ref("root.linear", "y")}
    messages = [e.message for e in registry_errors(model, toy_registry)]
    assert "op 'ReLU' needs input(s) ['x']" in messages
    assert "op 'ReLU' has no input(s) ['z']" in messages


def test_outputs_must_match_the_spec(toy_registry: OpRegistry) -> None:
    model = base_model()
    node(model, "root.relu").outputs = ["y", "mask"]
    (error,) = registry_errors(model, toy_registry)
    assert "declares outputs ['y']" in error.message
    assert error.location == "/nodes/2/outputs"


def test_missing_required_slot(toy_registry: OpRegistry) -> None:
    model = base_model()
    del node(model, "root.linear").parameters["weight"]
    del model.parameters["root.linear.weight"]
    (error,) = registry_errors(model, toy_registry)
    assert error.message == "op 'Linear' needs parameter 'weight'"
    assert error.location == "/nodes/1/parameters"


def test_optional_slot_may_be_absent(toy_registry: OpRegistry) -> None:
    model = base_model()
    del node(model, "root.linear").parameters["bias"]
    del model.parameters["root.linear.bias"]
    assert registry_errors(model, toy_registry) == []


def test_unknown_slot(toy_registry: OpRegistry) -> None:
    model = base_model()
    node(model, "root.relu").parameters["gain"] = "dims.n"
    (error,) = registry_errors(model, toy_registry)
    assert "has no parameter slot 'gain'" in error.message
    assert error.location == "/nodes/2/parameters/gain"


@pytest.mark.parametrize(
    ("value", "kind"), [("2", "string"), (2.0, "float"), (True, "bool"), (None, "null"), ([2], "list")]
)
def test_wrong_value_type(toy_registry: OpRegistry, value: Any, kind: str) -> None:
    model = base_model()
    model.parameters["dims.n"] = Parameter(value)
    errors = registry_errors(model, toy_registry)
    assert len(errors) == 2  # in_features and out_features both name the entry
    assert all(f"must be int, got {kind} (entry 'dims.n')" in e.message for e in errors)
    assert [e.location for e in errors] == ["/nodes/1/parameters/in_features", "/nodes/1/parameters/out_features"]


def test_tensor_slot_refuses_a_scalar(toy_registry: OpRegistry) -> None:
    model = base_model()
    model.parameters["root.linear.weight"] = Parameter(1.0, learnable=True)
    (error,) = registry_errors(model, toy_registry)
    assert "parameter 'weight' of op 'Linear' must be tensor, got float" in error.message


def test_learnable_constraint(toy_registry: OpRegistry) -> None:
    model = base_model()
    model.parameters["root.linear.weight"].learnable = False
    (error,) = registry_errors(model, toy_registry)
    assert "must have learnable=true" in error.message
    assert error.location == "/nodes/1/parameters/weight"


def custom_registry() -> OpRegistry:
    return OpRegistry(
        [
            OpSpec("Sequential", inputs=("x",), outputs=("y",), composite=True),
            OpSpec("ReLU", inputs=("x",), outputs=("y",)),
            OpSpec(
                "Linear",
                inputs=("x",),
                optional_inputs=("residual",),
                outputs=("y",),
                parameters=(
                    ParameterSchema("in_features", ("int",)),
                    ParameterSchema("out_features"),  # any type
                    ParameterSchema("weight", ("tensor",), learnable=True),
                    ParameterSchema("bias", ("tensor", "null"), optional=True),
                    ParameterSchema("gain", ("float",), optional=True, learnable=False),
                ),
            ),
            OpSpec("Concat", variadic_inputs=True, variadic_outputs=True),
        ]
    )


def test_int_is_accepted_where_float_is_and_any_accepts_all() -> None:
    model = base_model()
    model.parameters["g"] = Parameter(3)
    node(model, "root.linear").parameters["gain"] = "g"
    model.parameters["root.linear.bias"] = Parameter(None, learnable=True)
    assert registry_errors(model, custom_registry()) == []
    model.parameters["g"] = Parameter(True)
    (error,) = registry_errors(model, custom_registry())
    assert "must be float, got bool" in error.message
    model.parameters["g"] = Parameter(0.5, learnable=True)
    (error,) = registry_errors(model, custom_registry())
    assert "learnable=false" in error.message


def test_optional_and_variadic_ports() -> None:
    model = base_model()
    node(model, "root.linear").inputs["residual"] = Ref(INPUT, "x")
    model.nodes.append(Node("root.cat", "Concat", {"a": Ref("root.relu", "y"), "b": Ref(INPUT, "x")}, ["p", "q"]))
    assert registry_errors(model, custom_registry()) == []


def test_registry_checks_wait_for_a_sound_structure(toy_registry: OpRegistry) -> None:
    model = base_model()
    node(model, "root.linear").op = "Nope"
    model.parameters["extra"] = Parameter(1)
    errors = trama.collect_errors(model, toy_registry)
    assert [type(e) for e in errors] == [trama.ValidationError]
    del model.parameters["extra"]
    assert [type(e) for e in trama.collect_errors(model, toy_registry)] == [trama.RegistryError]


def test_registry_errors_are_all_collected(toy_registry: OpRegistry) -> None:
    model = base_model()
    node(model, "root.linear").op = "Lin"
    node(model, "root.relu").outputs = ["z"]
    node(model, "root").output_bindings = {"y": Ref("root.relu", "z")}
    errors = registry_errors(model, toy_registry)
    assert [e.node_id for e in errors] == ["root.linear", "root.relu"]
    with pytest.raises(trama.RegistryError) as info:
        trama.validate(model, toy_registry)
    assert len(info.value.all_errors) == 2


def test_loads_with_a_registry_checks_it(toy_registry: OpRegistry) -> None:
    model = base_model()
    node(model, "root.relu").op = "ReLUU"
    text = trama.dumps(model)  # structure only: fine
    with pytest.raises(trama.RegistryError, match="did you mean 'ReLU'"):
        trama.loads(text, registry=toy_registry)
    assert trama.loads(text).node("root.relu").op == "ReLUU"


# --------------------------------------------------------------------------------------------
# The registry itself
# --------------------------------------------------------------------------------------------


def test_registering_a_different_spec_under_a_taken_name(toy_registry: OpRegistry) -> None:
    toy_registry.register(OpSpec("ReLU", inputs=("x",), outputs=("y",)))  # equal spec: fine
    with pytest.raises(trama.RegistryError, match="already registered"):
        toy_registry.register(OpSpec("ReLU", inputs=("x", "y"), outputs=("y",)))


def test_registry_lookup(toy_registry: OpRegistry) -> None:
    assert "Linear" in toy_registry
    assert toy_registry.names() == ["Linear", "ReLU", "Sequential"]
    assert len(toy_registry) == 3
    assert toy_registry.get("Nope") is None
    with pytest.raises(trama.RegistryError, match="did you mean 'Sequential'"):
        toy_registry["Sequental"]


def test_spec_definitions_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown parameter types"):
        ParameterSchema("w", ("tensor", "matrix"))
    with pytest.raises(ValueError, match="declares a parameter slot twice"):
        OpSpec("Op", parameters=(ParameterSchema("w"), ParameterSchema("w")))
    assert ParameterSchema("w", "int").types == ("int",)


def test_the_deepest_tree_allowed_is_512_levels() -> None:
    def chain(depth: int) -> Model:
        ids = [".".join(["n"] * k) for k in range(1, depth + 1)]
        nodes = [
            Node(node_id, "Graph", {"x": Ref(INPUT, "x")}, ["y"], {}, {"y": Ref(ids[k + 1], "y")})
            for k, node_id in enumerate(ids[:-1])
        ]
        nodes.append(Node(ids[-1], "ReLU", {"x": Ref(INPUT, "x")}, ["y"]))
        return Model(inputs=["x"], outputs=[Ref("n", "y")], nodes=nodes, parameters={})

    assert trama.collect_errors(chain(512)) == []
    errors = trama.collect_errors(chain(514))
    assert [(e.location, e.message[-41:]) for e in errors] == [
        ("/nodes/512/id", "has 513 segments; at most 512 are allowed"),
        ("/nodes/513/id", "has 514 segments; at most 512 are allowed"),
    ]


def test_names_in_messages_are_escaped_and_cut() -> None:
    model = base_model()
    node(model, "root.relu").op = "\x1b[2J" + "R" * 5000 + "\n"
    (error,) = trama.collect_errors(model)
    assert "\x1b" not in str(error)
    assert "\\x1b[2J" in error.message  # shown as its repr
    assert len(error.message) < 300
    assert error.message.endswith("... is too long: it has 5005 characters, at most 256 are allowed")


def test_allowed_op_names() -> None:
    model = base_model()
    for op in ("Linear", "conv1d", "_private", "lenses.ThinLens", "acme.optics.Prism", "a" * 256, "A.b_1.C2"):
        node(model, "root.relu").op = op
        assert trama.collect_errors(model) == [], op
    model.opsets = {"trama": 1, "lenses": 2, "acme.optics": 1}
    assert trama.collect_errors(model) == []
