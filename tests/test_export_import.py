"""Export (objects -> Model) and import (Model -> objects): the README quick start, errors,
sharing, and that an imported model computes what the original did."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import toylayers

import trama
from trama import ExportError, NodeFragment, OpRegistry, OpSpec, Param, ParameterSchema


def inputs(seed: int = 7, rows: int = 5, width: int = 4) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, width)).astype(np.float32)


# --------------------------------------------------------------------------------------------
# The quick start, verbatim
# --------------------------------------------------------------------------------------------


def test_readme_quick_start_runs_verbatim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    module = toylayers.mlp([4, 8, 3], seed=3)
    registry = toylayers.registry()
    original = module

    # -- from README.md --
    model = trama.export_model(module, inputs=["x"], outputs=["y"], registry=registry)
    trama.dump(model, "my_model.trama.json")
    model = trama.load("my_model.trama.json")
    instance = trama.import_model(model, registry=registry)
    # --

    assert (tmp_path / "my_model.trama.json").is_file()
    assert isinstance(instance, toylayers.Sequential)
    assert instance is not original
    x = inputs()
    assert np.array_equal(instance(x), original(x))


def test_imported_mlp_computes_the_same(mlp_module: Any, toy_registry: OpRegistry) -> None:
    model = trama.export_model(mlp_module, inputs=["x"], outputs=["y"], registry=toy_registry)
    for back in (model, trama.loads(trama.dumps(model))):
        instance = trama.import_model(back, registry=toy_registry)
        assert np.array_equal(instance(inputs()), mlp_module(inputs()))
        assert [type(layer) for layer in instance.layers] == [type(layer) for layer in mlp_module.layers]


def test_export_produces_the_expected_nodes(mlp_model: trama.Model) -> None:
    assert [(n.id, n.op, n.parent) for n in mlp_model.nodes] == [
        ("root", "Sequential", None),
        ("root.layers_0", "Linear", "root"),
        ("root.layers_1", "ReLU", "root"),
        ("root.layers_2", "Linear", "root"),
    ]
    assert mlp_model.inputs == ["x"]
    assert mlp_model.outputs == [trama.Ref("root", "y")]
    assert mlp_model.node("root.layers_1").inputs == {"x": trama.Ref("root.layers_0", "y")}
    assert mlp_model.parameters["root.layers_0.weight"].learnable is True
    assert mlp_model.parameters["root.layers_0.in_features"] == trama.Parameter(4, learnable=False)
    assert mlp_model.metadata["producer"] == {"name": "trama", "version": trama.__version__}
    assert mlp_model.source_format_version is None


def test_export_options(mlp_module: Any, toy_registry: OpRegistry) -> None:
    model = trama.export_model(
        mlp_module,
        inputs=["x"],
        outputs=["y"],
        registry=toy_registry,
        root="net",
        metadata={"framework": {"name": "toylayers", "version": "1"}},
        opsets={"trama": 1},
        input_facts=[trama.ValueFact("float32", ("batch", 4))],
    )
    assert model.nodes[0].id == "net"
    assert model.outputs == [trama.Ref("net", "y")]
    assert set(model.metadata) == {"producer", "framework"}
    back = trama.loads(trama.dumps(model))
    assert back.opsets == {"trama": 1}
    assert back.input_facts == [trama.ValueFact("float32", ("batch", 4))]
    assert back.metadata == model.metadata


# --------------------------------------------------------------------------------------------
# Export errors
# --------------------------------------------------------------------------------------------


class NoExport:
    """An object with neither to_node nor an exporter."""

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return x


class Bag:
    def __init__(self, slots: Mapping[str, Any], op: str = "Bag", outputs: list[str] | None = None) -> None:
        self.slots = dict(slots)
        self.op = op
        self.outputs = outputs

    def to_node(self, ctx: trama.ExportContext) -> NodeFragment:
        return NodeFragment(op=self.op, outputs=self.outputs or ["y"], parameters=self.slots)


def export(module: Any, registry: OpRegistry | None = None) -> trama.Model:
    return trama.export_model(module, inputs=["x"], outputs=["y"], registry=registry)


def test_object_without_to_node_names_its_path_and_class() -> None:
    module = toylayers.Sequential(toylayers.ReLU(), NoExport())
    with pytest.raises(ExportError) as info:
        export(module)
    message = info.value.message
    assert "root.layers_1" in message
    assert f"{NoExport.__module__}.NoExport" in message
    assert "to_node" in message
    assert info.value.node_id == "root.layers_1"


def test_a_registered_exporter_handles_objects_without_to_node() -> None:
    registry = OpRegistry()
    registry.add_exporter(lambda obj, ctx: None)  # declines
    registry.add_exporter(
        lambda obj, ctx: NodeFragment(op="Identity", outputs=["y"]) if isinstance(obj, NoExport) else None
    )
    with pytest.raises(ExportError):  # without the registry there is no exporter
        export(toylayers.Sequential(NoExport()))
    # the registry's specs also check the result, so give them the ops
    for spec in toylayers.registry():
        registry.register(spec)
    registry.register(OpSpec("Identity", inputs=("x",), outputs=("y",)))
    model = export(toylayers.Sequential(NoExport()), registry=registry)
    assert model.node("root.layers_0").op == "Identity"


def test_declining_exporters_still_give_the_clear_error() -> None:
    registry = OpRegistry()
    registry.add_exporter(lambda obj, ctx: None)
    with pytest.raises(ExportError, match="no registered exporter handles it"):
        export(NoExport(), registry=registry)


def broken_exporter(obj: Any, ctx: trama.ExportContext) -> Any:
    raise AttributeError("'NoExport' object has no attribute 'weight'")


def test_an_exporter_that_crashes_does_not_keep_the_next_one_from_being_asked() -> None:
    registry = OpRegistry()
    for spec in toylayers.registry():
        registry.register(spec)
    registry.register(OpSpec("Identity", inputs=("x",), outputs=("y",)))
    registry.add_exporter(broken_exporter)
    registry.add_exporter(
        lambda obj, ctx: NodeFragment(op="Identity", outputs=["y"]) if isinstance(obj, NoExport) else None
    )
    model = export(toylayers.Sequential(NoExport()), registry=registry)
    assert model.node("root.layers_0").op == "Identity"


def test_an_exporter_that_crashes_is_named_when_nothing_handles_the_object() -> None:
    registry = OpRegistry()
    registry.add_exporter(broken_exporter)
    with pytest.raises(ExportError, match="no registered exporter handles it") as info:
        export(NoExport(), registry=registry)
    assert "broken_exporter raised AttributeError: 'NoExport' object has no attribute 'weight'" in info.value.message


def test_an_exporter_that_refuses_with_a_trama_error_is_heard() -> None:
    def refusing(obj: Any, ctx: trama.ExportContext) -> Any:
        raise ExportError("this object holds a closure", node_id=ctx.node_id)

    registry = OpRegistry()
    registry.add_exporter(refusing)
    registry.add_exporter(lambda obj, ctx: NodeFragment(op="Identity", outputs=["y"]))
    with pytest.raises(ExportError, match="this object holds a closure"):
        export(NoExport(), registry=registry)


def test_to_node_returning_something_else() -> None:
    class Wrong:
        def to_node(self, ctx: trama.ExportContext) -> Any:
            return {"op": "Wrong"}

    with pytest.raises(ExportError, match=r"expected trama\.NodeFragment") as info:
        export(Wrong())
    assert info.value.node_id == "root"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), np.float64("nan"), [1.0, float("nan")]])
def test_non_finite_float_is_an_export_error(value: Any) -> None:
    with pytest.raises(ExportError, match="JSON has no such number") as info:
        export(Bag({"gain": value}))
    assert "'root.gain'" in info.value.message


def test_non_finite_values_inside_tensors_are_fine() -> None:
    model = export(Bag({"gain": np.array([np.nan, np.inf], dtype=np.float32)}))
    decoded = np.asarray(trama.loads(trama.dumps(model)).parameters["root.gain"].value)
    assert np.isnan(decoded[0])
    assert decoded[1] == np.inf


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (object(), "value of type object"),
        ({"a": 1}, "value of type dict"),
        (np.zeros(2, dtype=np.complex64), "cannot be stored"),
        (np.zeros(2, dtype=np.uint16), "cannot be stored"),
        (np.array(["a"]), "cannot be stored"),
        ([np.zeros(2, dtype=np.float32)], "lists only, not tensors"),
        ([1, [2, np.ones(1)]], "lists only, not tensors"),
    ],
)
def test_values_the_format_cannot_store(value: Any, message: str) -> None:
    with pytest.raises(ExportError, match=message):
        export(Bag({"p": value}))


def test_outputs_must_be_those_asked_for() -> None:
    with pytest.raises(ExportError, match=r"declares outputs \['out'\] but \['y'\] were asked for"):
        export(Bag({}, outputs=["out"]))


def test_ctx_input_must_exist() -> None:
    class Reader:
        def to_node(self, ctx: trama.ExportContext) -> NodeFragment:
            ctx.input("nope")
            raise AssertionError("unreachable")

    with pytest.raises(ExportError, match="has no input 'nope'"):
        export(Reader())


def test_a_buggy_exporter_is_caught_at_export() -> None:
    class Broken:
        def to_node(self, ctx: trama.ExportContext) -> NodeFragment:
            ctx.child("a", toylayers.ReLU(), inputs={"x": ctx.input("x")}, outputs=["y"])
            return NodeFragment(op="Broken", outputs=["y"], output_bindings={"y": trama.Ref("root.zzz", "y")})

    with pytest.raises(ExportError, match="the exported model is not valid") as info:
        export(Broken())
    assert isinstance(info.value.__cause__, trama.ValidationError)
    assert info.value.node_id == "root"


def test_export_is_checked_against_the_registry(toy_registry: OpRegistry) -> None:
    with pytest.raises(ExportError, match="unknown op 'Bag'") as info:
        export(Bag({}), registry=toy_registry)
    assert isinstance(info.value.__cause__, trama.RegistryError)


def test_same_explicit_name_for_two_different_values() -> None:
    module = toylayers.Sequential(Bag({"n": Param(3, name="dims.n")}), Bag({"n": Param(4, name="dims.n")}))
    with pytest.raises(ExportError, match=r"'dims\.n' is used for two different values"):
        export(module)


# --------------------------------------------------------------------------------------------
# Sharing
# --------------------------------------------------------------------------------------------


def test_sharing_by_identity(toy_registry: OpRegistry) -> None:
    weight = np.arange(16, dtype=np.float32).reshape(4, 4)
    first = toylayers.Linear(weight, np.zeros(4, dtype=np.float32))
    second = toylayers.Linear(weight, np.ones(4, dtype=np.float32))
    model = export(toylayers.Sequential(first, toylayers.ReLU(), second), registry=toy_registry)
    assert model.node("root.layers_0").parameters["weight"] == "root.layers_0.weight"
    assert model.node("root.layers_2").parameters["weight"] == "root.layers_0.weight"
    assert "root.layers_2.weight" not in model.parameters
    assert model.node("root.layers_2").parameters["bias"] == "root.layers_2.bias"  # different arrays
    instance = trama.import_model(trama.loads(trama.dumps(model)), registry=toy_registry)
    assert instance.layers[0].weight is instance.layers[2].weight
    assert instance.layers[0].bias is not instance.layers[2].bias


def test_scalars_never_share_by_identity() -> None:
    # Small ints are one object in Python; equal hyper-parameters must still stay apart.
    model = export(toylayers.Sequential(Bag({"n": 4, "flag": True}), Bag({"n": 4, "flag": True})))
    assert sorted(model.parameters) == [
        "root.layers_0.flag",
        "root.layers_0.n",
        "root.layers_1.flag",
        "root.layers_1.n",
    ]


def test_equal_but_distinct_arrays_are_not_shared() -> None:
    array = np.ones(3, dtype=np.float32)
    model = export(toylayers.Sequential(Bag({"w": array}), Bag({"w": array.copy()})))
    assert len(model.parameters) == 2


def test_sharing_by_key() -> None:
    # A framework that hands out fresh numpy copies passes its own parameter object as the key.
    class FrameworkParam:
        def __init__(self, data: np.ndarray) -> None:
            self.data = data

    shared = FrameworkParam(np.arange(3, dtype=np.float32))
    module = toylayers.Sequential(
        Bag({"w": Param(shared.data.copy(), learnable=True, key=shared)}),
        Bag({"w": Param(shared.data.copy(), learnable=True, key=shared)}),
    )
    model = export(module)
    assert list(model.parameters) == ["root.layers_0.w"]
    assert model.node("root.layers_1").parameters["w"] == "root.layers_0.w"


def test_sharing_by_name() -> None:
    module = toylayers.Sequential(
        Bag({"out_features": Param(3, name="dims.hidden")}),
        Bag({"in_features": Param(3, name="dims.hidden"), "other": 3}),
    )
    model = export(module)
    assert model.node("root.layers_0").parameters == {"out_features": "dims.hidden"}
    assert model.node("root.layers_1").parameters == {"in_features": "dims.hidden", "other": "root.layers_1.other"}
    assert model.parameters["dims.hidden"] == trama.Parameter(3, learnable=False)


def test_a_module_used_twice_is_one_node_and_a_call(toy_registry: OpRegistry) -> None:
    # Since format 1.1 the second use is a calling node, not a second copy sharing entries.
    rng = np.random.default_rng(5)
    layer = toylayers.Linear(rng.standard_normal((4, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32))
    module = toylayers.Sequential(layer, toylayers.ReLU(), layer)
    model = export(module, registry=toy_registry)
    first, second = model.node("root.layers_0"), model.node("root.layers_2")
    assert first.calls is None
    assert second.calls == "root.layers_0"
    assert (second.op, second.outputs, second.parameters) == ("Linear", ["y"], {})
    assert second.inputs == {"x": trama.Ref("root.layers_1", "y")}
    assert sorted(model.parameters) == sorted(f"root.layers_0.{slot}" for slot in first.parameters)

    back = trama.loads(trama.dumps(model))
    instance = trama.import_model(back, registry=toy_registry)
    assert instance.layers[0] is instance.layers[2]
    assert np.array_equal(instance(inputs()), module(inputs()))


def test_shared_entries_reach_the_factories_as_one_object() -> None:
    seen: dict[str, Mapping[str, trama.Parameter]] = {}

    def build(node: trama.Node, *, children: Mapping[str, Any], parameters: Mapping[str, trama.Parameter]) -> str:
        seen[node.id] = parameters
        return node.id

    registry = OpRegistry(
        [
            OpSpec(
                "Bag", inputs=("x",), outputs=("y",), parameters=(ParameterSchema("w", optional=True),), factory=build
            ),
            OpSpec("Sequential", inputs=("x",), outputs=("y",), composite=True, factory=build),
        ]
    )
    weight = np.zeros(2, dtype=np.float32)
    model = export(toylayers.Sequential(Bag({"w": weight}), Bag({"w": weight})), registry=registry)
    trama.import_model(trama.loads(trama.dumps(model)), registry=registry)
    assert seen["root.layers_0"]["w"] is seen["root.layers_1"]["w"]


def test_entry_names_never_equal_node_ids() -> None:
    # A composite slot "block" would be named "root.block", which is its child's id.
    class WithSlot:
        def to_node(self, ctx: trama.ExportContext) -> NodeFragment:
            y = ctx.child("block", Bag({}), inputs={"x": ctx.input("x")}, outputs=["y"])["y"]
            return NodeFragment(op="WithSlot", outputs=["y"], parameters={"block": 2}, output_bindings={"y": y})

    model = export(WithSlot())
    assert model.node("root").parameters == {"block": "root.block_param"}
    assert trama.collect_errors(model) == []


# --------------------------------------------------------------------------------------------
# Import
# --------------------------------------------------------------------------------------------


def test_import_without_a_registry_uses_the_discovered_one(mlp_model: trama.Model) -> None:
    from trama.extension import PluginHost, reset_plugins

    reset_plugins(PluginHost([]))  # only the core: the catalog's specs, no framework at all
    try:
        with pytest.raises(trama.RegistryError, match=r"no implementation for numpy.*\(e\.g\. trama-numpy\)"):
            trama.import_model(mlp_model)
    finally:
        reset_plugins()


def test_import_validates_against_the_registry(mlp_model: trama.Model) -> None:
    with pytest.raises(trama.RegistryError, match="unknown op"):
        trama.import_model(mlp_model, registry=OpRegistry())


def test_op_without_factory(mlp_model: trama.Model) -> None:
    registry = OpRegistry(
        [OpSpec(spec.name, spec.inputs, spec.outputs, spec.parameters, spec.composite) for spec in toylayers.registry()]
    )
    with pytest.raises(trama.RegistryError, match="has no implementation in this registry") as info:
        trama.import_model(mlp_model, registry=registry)
    assert info.value.node_id is not None


def test_failing_factory_is_an_import_error_naming_the_op(mlp_model: trama.Model) -> None:
    def explode(node: trama.Node, **_: Any) -> Any:
        raise ZeroDivisionError("bad weights")

    registry = toylayers.registry()
    specs = {spec.name: spec for spec in registry}
    broken = OpRegistry(
        [specs["Sequential"], specs["Linear"], OpSpec("ReLU", inputs=("x",), outputs=("y",), factory=explode)]
    )
    with pytest.raises(
        trama.ImportModelError, match="building op 'ReLU' failed: ZeroDivisionError: bad weights"
    ) as info:
        trama.import_model(mlp_model, registry=broken)
    assert info.value.node_id == "root.layers_1"
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_trama_errors_from_factories_pass_through(mlp_model: trama.Model) -> None:
    def refuse(node: trama.Node, **_: Any) -> Any:
        raise trama.ImportModelError("not today", node_id=node.id)

    specs = {spec.name: spec for spec in toylayers.registry()}
    registry = OpRegistry(
        [
            specs["Sequential"],
            specs["ReLU"],
            OpSpec("Linear", inputs=("x",), outputs=("y",), parameters=specs["Linear"].parameters, factory=refuse),
        ]
    )
    with pytest.raises(trama.ImportModelError) as info:
        trama.import_model(mlp_model, registry=registry)
    assert info.value.message == "not today"  # not wrapped again
    assert info.value.node_id == "root.layers_2"  # built last-first: children before parents


def test_children_arrive_in_document_order_and_roots_as_a_dict() -> None:
    calls: list[str] = []

    def build(node: trama.Node, *, children: Mapping[str, Any], parameters: Mapping[str, trama.Parameter]) -> Any:
        calls.append(node.id)
        return {"id": node.id, "children": list(children)}

    registry = OpRegistry(
        [
            OpSpec("Sequential", inputs=("x",), outputs=("y",), composite=True, factory=build),
            OpSpec("ReLU", inputs=("x",), outputs=("y",), factory=build),
        ]
    )
    three = toylayers.Sequential(toylayers.ReLU(), toylayers.ReLU(), toylayers.ReLU())
    model = export(three, registry=registry)
    # a second top-level node
    model.nodes.append(trama.Node("tail", "ReLU", {"x": trama.Ref("root", "y")}, ["y"]))
    built = trama.import_model(model, registry=registry)
    assert list(built) == ["root", "tail"]
    assert built["root"]["children"] == ["layers_0", "layers_1", "layers_2"]
    assert calls.index("root") > calls.index("root.layers_0")  # children are built first


@pytest.mark.parametrize(
    ("first", "second"),
    [(0.0, -0.0), (1, 1.0), (1, True), ([1], [True]), ([1, [2]], [1, [2.0]]), ([0.0], [-0.0]), ("1", 1)],
)
def test_one_explicit_name_cannot_merge_values_of_different_kinds(first: Any, second: Any) -> None:
    # The format tells 1 from 1.0 and true, and -0.0 from 0.0: these are different values.
    assert trama.Parameter(first) != trama.Parameter(second)
    module = toylayers.Sequential(Bag({"n": Param(first, name="dims.n")}), Bag({"n": Param(second, name="dims.n")}))
    with pytest.raises(ExportError, match="used for two different values"):
        export(module)


def test_one_explicit_name_for_equal_values_is_one_entry() -> None:
    module = toylayers.Sequential(
        Bag({"n": Param([1, [2.5, None]], name="dims.n")}), Bag({"n": Param((1, (2.5, None)), name="dims.n")})
    )
    model = export(module)
    assert list(model.parameters) == ["dims.n"]
    assert model.parameters["dims.n"] == trama.Parameter([1, [2.5, None]])


# --------------------------------------------------------------------------------------------
# The root replacing a model input by several (a dict of tensors, flattened)
# --------------------------------------------------------------------------------------------


class Flattening:
    """A root that stands for a framework whose input ``batch`` is a dict: it replaces ``batch``
    by one input per entry, records facts for the inputs it ends up with, and adds every input
    through a ``ReLU`` child, reading them through the refs it was given and ``ctx.input``."""

    def __init__(self, replacements: list[str]) -> None:
        self.replacements = replacements

    def to_node(self, ctx: trama.ExportContext) -> NodeFragment:
        refs = ctx.replace_input("batch", self.replacements)
        ports = list(ctx.inputs)
        ctx.record_facts(inputs=[trama.ValueFact("float32", (index + 1,)) for index in range(len(ports))])
        total = ctx.input("x")
        for index, ref in enumerate(refs):
            total = ctx.child(f"r{index}", toylayers.ReLU(), {"x": ref})["y"]
        return NodeFragment(op="Flat", outputs=["y"], output_bindings={"y": total})


def export_flattening(module: Any, **options: Any) -> trama.Model:
    return trama.export_model(module, inputs=["x", "batch", "z"], outputs=["y"], **options)


def test_the_root_replaces_a_model_input_by_its_parts_in_place() -> None:
    model = export_flattening(Flattening(["batch_ids", "batch_mask"]))
    assert model.inputs == ["x", "batch_ids", "batch_mask", "z"]
    root = next(node for node in model.nodes if node.id == "root")
    assert list(root.inputs) == ["x", "batch_ids", "batch_mask", "z"]
    assert root.inputs["batch_mask"] == trama.Ref(trama.INPUT, "batch_mask")
    children = {node.id: node for node in model.nodes}
    assert children["root.r0"].inputs == {"x": trama.Ref(trama.INPUT, "batch_ids")}
    assert children["root.r1"].inputs == {"x": trama.Ref(trama.INPUT, "batch_mask")}
    # The facts the exporter recorded are for the inputs it ended up with, in their order.
    assert model.input_facts is not None
    assert [fact.shape if fact else None for fact in model.input_facts] == [(1,), (2,), (3,), (4,)]
    # It survives the file format.
    again = trama.loads(trama.dumps(model))
    assert again.inputs == model.inputs


def test_the_caller_must_give_facts_for_the_replaced_inputs() -> None:
    facts = [trama.ValueFact("float32", None)] * 3
    with pytest.raises(ExportError, match=r"replaced 'batch' by \['b0', 'b1'\].*\['x', 'b0', 'b1', 'z'\]"):
        export_flattening(Flattening(["b0", "b1"]), input_facts=facts)
    model = export_flattening(Flattening(["b0", "b1"]), input_facts=[*facts, facts[0]])
    assert model.input_facts == [*facts, facts[0]]


@pytest.mark.parametrize(
    ("replacements", "message"),
    [
        (["batch.ids"], r"by 'batch\.ids': an input name is one or more of \[A-Za-z0-9_\]"),
        ([""], r"by '': an input name"),
        (["z"], r"'z' would name two model inputs"),
        (["a", "a"], r"'a' would name two model inputs"),
        ([], r"cannot replace the model input 'batch' by no inputs"),
        ("batch_ids", r"needs a list of names, got the string 'batch_ids'"),
    ],
)
def test_replacement_names_are_checked(replacements: Any, message: str) -> None:
    with pytest.raises(ExportError, match=message) as info:
        export_flattening(Flattening(replacements))
    assert info.value.node_id == "root"


def test_a_replacement_may_keep_the_name_it_replaces() -> None:
    assert export_flattening(Flattening(["batch"])).inputs == ["x", "batch", "z"]


def test_only_the_root_replaces_model_inputs_and_each_once() -> None:
    class Inner:
        def to_node(self, ctx: trama.ExportContext) -> NodeFragment:
            ctx.replace_input("batch", ["a"])
            raise AssertionError("unreachable")

    class Outer:
        def to_node(self, ctx: trama.ExportContext) -> NodeFragment:
            ctx.child("inner", Inner(), {"x": ctx.input("x")})
            raise AssertionError("unreachable")

    with pytest.raises(ExportError, match=r"'root\.inner' asks to replace .* only the root object \('root'\)"):
        export_flattening(Outer())

    class Twice:
        def to_node(self, ctx: trama.ExportContext) -> NodeFragment:
            ctx.replace_input("batch", ["a", "b"])
            ctx.replace_input("batch", ["c"])
            raise AssertionError("unreachable")

    with pytest.raises(ExportError, match=r"'batch': it is not one of the model inputs \(it was already replaced"):
        export_flattening(Twice())

    class Unknown:
        def to_node(self, ctx: trama.ExportContext) -> NodeFragment:
            ctx.replace_input("nope", ["a"])
            raise AssertionError("unreachable")

    with pytest.raises(ExportError, match=r"'nope': it is not one of the model inputs \(they are"):
        export_flattening(Unknown())
