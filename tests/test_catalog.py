"""The standard op catalog: its specs follow the conventions ``docs/ops.md`` states, documents
built from them validate, and ``docs/ops.md`` is the current render of the specs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import toylayers

import trama
from trama import INPUT, Model, Node, OpSpec, Parameter, ParameterSchema, Ref, Tensor
from trama.catalog import (
    CATALOG_CATEGORIES,
    CATALOG_NAMESPACE,
    CATALOG_OPSET,
    RNN_MAX_LAYERS,
    category_of,
    standard_registry,
    standard_specs,
)
from trama.catalog.docs import _installed_coverage, main, render_ops_markdown
from trama.format import NAME, PARAMETER_TYPES, registry_errors, structural_errors

REPO = Path(__file__).resolve().parents[1]
SPECS = {spec.name: spec for spec in standard_specs()}

#: Every op the catalog promised, by category.
REQUIRED_OPS = (
    *("Sequential", "Graph"),
    *("Linear", "Bilinear", "Conv1d", "Conv2d", "ConvTranspose2d", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d"),
    *("BatchNorm1d", "BatchNorm2d", "LayerNorm", "GroupNorm", "RMSNorm", "Embedding", "Dropout", "Identity"),
    *("Flatten", "MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder", "GRU", "LSTM"),
    *("ReLU", "LeakyReLU", "GELU", "SiLU", "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "Softplus", "ELU"),
    *("Hardswish", "relu", "leaky_relu", "gelu", "silu", "sigmoid", "tanh", "softmax", "log_softmax", "softplus"),
    *("elu", "hardswish", "add", "sub", "mul", "div", "neg", "pow", "matmul", "concat", "stack", "reshape"),
    *("permute", "transpose", "flatten", "squeeze", "unsqueeze", "mean", "sum", "max", "getitem", "tuple_get"),
)

#: Opset 1, frozen: these ops came with the catalog's first opset and say so (``since`` 1), and
#: every later op says it came after. A document that uses only these reads as opset 1.
OPSET_1 = frozenset({*REQUIRED_OPS, "argmax", "constant"})

COMPOSITES = {"Sequential", "Graph", "TransformerEncoder"}
#: Slots that hold a constant operand, whose learnable flag is free (see docs/ops.md, "learnable").
OPERAND_SLOTS = {"x", "other", "value"}


def spec_of(name: str) -> OpSpec:
    return SPECS[name]


def slot_of(op: str, slot: str) -> ParameterSchema:
    schema = SPECS[op].slot(slot)
    assert schema is not None, f"{op} has no slot {slot!r}"
    return schema


# --------------------------------------------------------------------------------------------
# The specs themselves
# --------------------------------------------------------------------------------------------


def test_catalog_identity() -> None:
    assert CATALOG_NAMESPACE == "trama"
    assert CATALOG_OPSET == 2
    assert standard_specs() is standard_specs()  # cached
    assert standard_registry() is not standard_registry()  # registries are mutable: a fresh one each time
    assert standard_registry().names() == sorted(SPECS)


def test_opset_1_is_frozen_and_every_later_op_says_when_it_came() -> None:
    assert len(OPSET_1) == 68
    assert set(SPECS) >= OPSET_1, sorted(OPSET_1 - set(SPECS))
    for spec in standard_specs():
        if spec.name in OPSET_1:
            assert spec.since == 1, spec.name
        else:
            assert spec.since is not None, spec.name
            assert 1 < spec.since <= CATALOG_OPSET, (spec.name, spec.since)


class _Op:
    """An object that exports as one catalog node of ``op``."""

    def __init__(self, op: str) -> None:
        self.op = op

    def to_node(self, ctx: Any) -> trama.NodeFragment:
        return trama.NodeFragment(self.op, outputs=["y"])


class _Chain:
    """A ``Graph`` of one-input catalog ops in a chain."""

    def __init__(self, ops: tuple[str, ...]) -> None:
        self.ops = ops

    def to_node(self, ctx: Any) -> trama.NodeFragment:
        previous = ctx.input("x")
        for index, op in enumerate(self.ops):
            previous = ctx.child(f"n{index}", _Op(op), {"x": previous}, ["y"])["y"]
        return trama.NodeFragment("Graph", outputs=["y"], output_bindings={"y": previous})


def _exported_opsets(*ops: str) -> dict[str, int]:
    """The opsets trama's exporter records for a chain of these one-input catalog ops."""
    return trama.export_model(_Chain(ops), inputs=["x"], outputs=["y"], registry=standard_registry()).opsets


def test_a_document_of_opset_1_ops_still_records_opset_1() -> None:
    assert spec_of("triu").since == 2
    assert _exported_opsets("relu", "neg") == {"trama": 1}
    assert _exported_opsets("relu", "triu") == {"trama": 2}


@pytest.mark.parametrize("spec", standard_specs(), ids=lambda spec: spec.name)
def test_every_spec_is_well_formed(spec: OpSpec) -> None:
    assert isinstance(spec, OpSpec)
    assert spec.factory is None, "the catalog is framework-neutral: factories come from framework packages"
    assert spec.doc.strip()
    assert "**Eval mode.**" in spec.doc
    ports = [*spec.inputs, *spec.optional_inputs, *spec.outputs]
    assert all(NAME.match(port) for port in ports)
    assert not set(spec.inputs) & set(spec.optional_inputs)
    for slot in spec.parameters:
        assert isinstance(slot, ParameterSchema)
        assert NAME.match(slot.name), slot.name
        assert set(slot.types) <= PARAMETER_TYPES
        assert slot.doc.strip(), f"{spec.name}.{slot.name} has no meaning"


def test_names_are_unique_unnamespaced_and_complete() -> None:
    names = [spec.name for spec in standard_specs()]
    assert len(names) == len(set(names))
    assert not [name for name in names if "." in name]
    assert not set(REQUIRED_OPS) - set(names)
    assert sorted(names) == sorted(name for category in CATALOG_CATEGORIES for name in category.names)
    assert all(category_of(name) is not None for name in names)
    assert category_of("lenses.ThinLens") is None


def test_module_ops_are_camel_case_and_function_ops_lowercase() -> None:
    for category in CATALOG_CATEGORIES:
        for name in category.names:
            if category.key in ("composites", "layers", "sequence"):
                assert name[0].isupper(), name
            elif category.key in ("functions", "elementwise", "arrays", "layer_functions", "pooling", "attention"):
                assert name == name.lower(), name
    activations = next(category for category in CATALOG_CATEGORIES if category.key == "activations")
    modules = [name for name in activations.names if name[0].isupper()]
    functions = [name for name in activations.names if name[0].islower()]
    assert len(modules) == len(functions)
    for module, function in zip(modules, functions, strict=True):  # each module next to its function form
        assert module.lower() == function.replace("_", "")
        assert spec_of(module).outputs == ("y",)
        if module == "PReLU":  # the module holds its learned weight; the function takes it on a port
            assert [slot.name for slot in spec_of(module).parameters] == ["num_parameters", "weight"]
            assert (spec_of(function).inputs, spec_of(function).parameters) == (("x", "weight"), ())
            continue
        assert spec_of(module).parameters == spec_of(function).parameters
        assert (spec_of(module).inputs, spec_of(module).outputs) == (spec_of(function).inputs, ("y",))


def test_composite_flags_are_as_documented() -> None:
    assert {spec.name for spec in standard_specs() if spec.composite} == COMPOSITES
    graph = spec_of("Graph")
    assert graph.variadic_inputs
    assert graph.variadic_outputs
    assert not graph.parameters
    sequential = spec_of("Sequential")
    assert (sequential.inputs, sequential.outputs) == (("x",), ("y",))


def test_learnable_rule() -> None:
    """Weights free (a frozen weight is still a weight), buffers false, hyper-parameters false."""
    for spec in standard_specs():
        for slot in spec.parameters:
            where = f"{spec.name}.{slot.name}"
            if "tensor" not in slot.types:
                assert slot.learnable is False or slot.name in OPERAND_SLOTS, where
    assert slot_of("Linear", "weight").learnable is None
    assert not slot_of("Linear", "weight").optional
    for buffer in ("running_mean", "running_var", "num_batches_tracked"):
        assert slot_of("BatchNorm2d", buffer).learnable is False
        assert slot_of("BatchNorm2d", buffer).optional


def test_optional_hyper_parameters_state_their_default() -> None:
    for spec in standard_specs():
        for slot in spec.parameters:
            if slot.optional and slot.learnable is False and slot.types != ("tensor",):
                assert "Default `" in slot.doc, f"{spec.name}.{slot.name}"


def test_port_conventions() -> None:
    single = ["Linear", "Conv2d", "LayerNorm", "Dropout", "ReLU", "relu", "reshape", "getitem", "mean"]
    for name in single:
        assert (spec_of(name).inputs, spec_of(name).outputs) == (("x",), ("y",)), name
    for name in ("add", "sub", "mul", "div", "pow", "matmul"):
        spec = spec_of(name)
        assert spec.optional_inputs == ("x", "other")
        assert slot_of(name, "x").learnable is None
        assert slot_of(name, "other").learnable is None
    for name in ("concat", "stack"):
        assert spec_of(name).inputs == ("x0",)
        assert spec_of(name).variadic_inputs
    attention = spec_of("MultiheadAttention")
    assert attention.inputs == ("query", "key", "value")
    assert set(attention.optional_inputs) == {"key_padding_mask", "attn_mask"}
    assert attention.outputs == ("y", "attn_weights")
    assert (spec_of("GRU").optional_inputs, spec_of("GRU").outputs) == (("h0",), ("y", "h_n"))
    assert (spec_of("LSTM").optional_inputs, spec_of("LSTM").outputs) == (("h0", "c0"), ("y", "h_n", "c_n"))


def test_tuple_valued_arguments_are_lists_and_gelu_has_both_approximations() -> None:
    for name in ("kernel_size", "stride", "dilation"):
        assert slot_of("Conv2d", name).types == ("list",)
    assert slot_of("Conv2d", "padding").types == ("list", "string")
    assert slot_of("ConvTranspose2d", "output_padding").types == ("list",)
    approximate = slot_of("GELU", "approximate").doc
    assert '"none"' in approximate
    assert '"tanh"' in approximate


def test_nested_state_slots_name_their_torch_key() -> None:
    """``self_attn.out_proj.weight`` is the slot ``self_attn_out_proj_weight``, and says so."""
    keys = set()
    for name in ("TransformerEncoderLayer", "MultiheadAttention"):
        for slot in spec_of(name).parameters:
            key = re.search(r"torch key `([\w.]+)`", slot.doc)
            if key:
                assert key[1].replace(".", "_") == slot.name
                keys.add(key[1])
    assert {"self_attn.in_proj_weight", "linear1.weight", "norm2.bias", "out_proj.weight"} <= keys


def test_recurrent_layers_use_torch_state_names() -> None:
    lstm = spec_of("LSTM")
    for k in range(RNN_MAX_LAYERS):
        for suffix in ("", "_reverse"):
            for stem in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr"):
                assert lstm.slot(f"{stem}_l{k}{suffix}") is not None
    assert spec_of("GRU").slot("weight_hr_l0") is None
    required = [slot.name for slot in spec_of("GRU").parameters if not slot.optional]
    assert required == ["input_size", "hidden_size", "weight_ih_l0", "weight_hh_l0"]


# --------------------------------------------------------------------------------------------
# Documents validate against the catalog
# --------------------------------------------------------------------------------------------

_SAMPLE = {
    "tensor": Tensor.from_array(np.zeros(2, np.float32)),
    "int": 1,
    "float": 1.0,
    "bool": True,
    "string": "none",
    "list": [1, 1],
    "null": None,
    "any": 1.0,
}


def one_node_model(spec: OpSpec, slots: dict[str, Any] | None = None) -> Model:
    """A model of one node of ``spec``: required ports wired to model inputs, and ``slots`` (by
    default every required slot, with a value of its first type and the learnable flag it wants)."""
    if slots is None:
        slots = {s.name: _SAMPLE[s.types[0]] for s in spec.parameters if not s.optional}
    table = {}
    for name, value in slots.items():
        schema = spec.slot(name)
        learnable = bool(schema.learnable) if schema is not None else False
        table[f"n.{name}"] = Parameter(value, learnable=learnable)
    bindings = None
    if spec.composite:  # bind every output to an input: a composite with no children
        bindings = {output: Ref(INPUT, spec.inputs[0]) for output in spec.outputs}
    node = Node(
        "n",
        spec.name,
        inputs={port: Ref(INPUT, port) for port in spec.inputs},
        outputs=list(spec.outputs),
        parameters={name: f"n.{name}" for name in slots},
        output_bindings=bindings,
    )
    return Model(list(spec.inputs), [Ref("n", output) for output in spec.outputs], [node], table)


@pytest.mark.parametrize("spec", standard_specs(), ids=lambda spec: spec.name)
def test_a_minimal_node_of_every_op_validates(spec: OpSpec) -> None:
    model = one_node_model(spec)
    assert structural_errors(model) == []
    assert registry_errors(model, standard_registry()) == []


def linear_slots(**changes: Any) -> dict[str, Any]:
    slots: dict[str, Any] = {
        "in_features": 2,
        "out_features": 3,
        "weight": Tensor.from_array(np.ones((3, 2), np.float32)),
        "bias": Tensor.from_array(np.zeros(3, np.float32)),
    }
    slots.update(changes)
    return {name: value for name, value in slots.items() if value is not None}


def test_linear_without_bias_is_valid() -> None:
    model = one_node_model(spec_of("Linear"), linear_slots(bias=None))
    assert registry_errors(model, standard_registry()) == []


def test_linear_without_weight_is_rejected() -> None:
    errors = registry_errors(one_node_model(spec_of("Linear"), linear_slots(weight=None)), standard_registry())
    assert len(errors) == 1
    assert "needs parameter 'weight'" in str(errors[0])


def test_linear_with_a_frozen_weight_is_valid_but_a_learnable_size_is_rejected() -> None:
    model = one_node_model(spec_of("Linear"), linear_slots())
    model.parameters["n.weight"].learnable = False  # requires_grad=False: still the weight
    assert registry_errors(model, standard_registry()) == []
    model.parameters["n.in_features"].learnable = True
    messages = [str(error) for error in registry_errors(model, standard_registry())]
    assert len(messages) == 1
    assert "'in_features'" in messages[0]
    assert "learnable=false" in messages[0]


def test_binary_op_takes_a_constant_operand_on_either_side() -> None:
    mul = spec_of("mul")
    scale = one_node_model(mul, {"other": 0.5})
    scale.inputs, scale.nodes[0].inputs = ["x"], {"x": Ref(INPUT, "x")}
    assert registry_errors(scale, standard_registry()) == []
    learned = one_node_model(mul, {"x": Tensor.from_array(np.ones(3, np.float32))})
    learned.parameters["n.x"].learnable = True  # x * self.scale, with a trained scale: either flag is fine
    learned.inputs, learned.nodes[0].inputs = ["other"], {"other": Ref(INPUT, "other")}
    assert registry_errors(learned, standard_registry()) == []


def test_toy_layers_export_and_validate_against_the_catalog(mlp_model: Model) -> None:
    """demo/toylayers.py names Sequential children ``layers_0``…, not torch's ``0``…: fine,
    child names are a documented convention that validation does not enforce."""
    assert [node.op for node in mlp_model.nodes] == ["Sequential", "Linear", "ReLU", "Linear"]
    assert mlp_model.nodes[1].name == "layers_0"
    assert registry_errors(mlp_model, standard_registry()) == []
    trama.validate(mlp_model, standard_registry())
    bare = toylayers.Sequential(toylayers.Linear(np.ones((2, 2), np.float32)))  # no bias
    model = trama.export_model(bare, inputs=["x"], outputs=["y"], registry=toylayers.registry())
    assert registry_errors(model, standard_registry()) == []


# --------------------------------------------------------------------------------------------
# docs/ops.md
# --------------------------------------------------------------------------------------------


def test_docs_render_deterministically_and_contain_every_op() -> None:
    coverage = {"torch": frozenset({"Linear", "relu"}), "numpy": {"Linear"}}
    text = render_ops_markdown(standard_specs(), coverage)
    assert text == render_ops_markdown(list(standard_specs()), dict(reversed(coverage.items())))
    for spec in standard_specs():
        assert f'<a id="op-{spec.name}"></a>\n\n### `{spec.name}`\n' in text
        assert spec.doc in text
    assert text.endswith("\n")
    assert not text.endswith("\n\n")
    assert f'"opsets": {{"{CATALOG_NAMESPACE}": 1}}' in text  # a document of opset-1 ops
    assert f"this is opset **{CATALOG_OPSET}**" in text


def test_docs_coverage_matrix() -> None:
    coverage = {"torch": frozenset({"Linear", "relu"}), "numpy": {"Linear"}, "optics": {"lenses.ThinLens"}}
    text = render_ops_markdown(standard_specs(), coverage)
    assert "| op | numpy | torch |" in text  # sorted, and "optics" implements no catalog op: no column
    assert "| [`Linear`](#op-Linear) | ✓ | ✓ |" in text
    assert "| [`relu`](#op-relu) |  | ✓ |" in text
    assert "| [`Graph`](#op-Graph) |  |  |" in text
    assert f"numpy 1 of {len(SPECS)}, torch 2 of {len(SPECS)}" in text
    empty = render_ops_markdown(standard_specs(), {})
    assert "| op |" not in empty
    assert "No framework package that implements these ops was installed" in empty
    assert render_ops_markdown(standard_specs(), {"optics": {"lenses.ThinLens"}}) == empty


def test_docs_sections_show_signature_slots_and_kind() -> None:
    text = render_ops_markdown(standard_specs(), {})
    assert "`GRU(x, [h0]) → (y, h_n)` · leaf" in text
    assert "`Sequential(x) → y` · composite" in text
    assert "`concat(x0, …) → y` · leaf" in text
    assert "| `bias` | tensor or null | yes | either | `[out_features]`. Absent: no bias. |" in text
    assert "| `bias_ih_l{k}` | tensor or null | yes | either | k = 0 … 7:" in text  # per-layer slots collapsed
    assert "`weight_ih_l3`" not in text
    for category in CATALOG_CATEGORIES:
        assert f"## {category.title}\n" in text


def test_docs_put_unknown_specs_last() -> None:
    extra = OpSpec("lenses.ThinLens", inputs=("rays",), outputs=("rays",), doc="A thin lens.")
    text = render_ops_markdown([*standard_specs(), extra], {})
    assert text.index("## Other ops") > text.index("### `constant`")
    assert "`lenses.ThinLens(rays) → rays` · leaf\n\nNo parameter slots.\n\nA thin lens.\n" in text


def test_docs_ops_md_is_current() -> None:
    """Regenerate with ``python -m trama.catalog.docs`` when this fails."""
    committed = (REPO / "docs" / "ops.md").read_text(encoding="utf-8")
    assert committed == render_ops_markdown(standard_specs(), _installed_coverage())


def test_main_writes_and_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "docs" / "ops.md"
    assert main(["--check", "--output", str(output)]) == 1
    assert main(["--output", str(output)]) == 0
    assert main(["--check", "--output", str(output)]) == 0
    output.write_text(output.read_text(encoding="utf-8") + "edited\n", encoding="utf-8")
    assert main(["--check", "--output", str(output)]) == 1
    assert "stale" in capsys.readouterr().err
