"""The catalog's settings checks (:func:`trama.catalog.check_settings`): one check per catalog op,
held against its spec, run by ``trama.conversion._importer.build_node`` before any framework's factory, so a
bad document gets the same error class and message from numpy, torch and JAX, at import and when
a runtime prepares it.

The cross-framework cases are generated from the checkers' own rules where a rule can be broken
by a value of the right JSON type (a value validation lets through), and written by hand for the
relations (``groups`` divides the channels, weight shapes, affine flags, recurrent depth).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trama
from trama import INPUT, Model, Node, OpRegistry, OpSpec, Parameter, ParameterSchema, Ref, RegistryError, Tensor
from trama.catalog import RNN_MAX_LAYERS, Settings, check_settings, standard_specs
from trama.catalog._arrays_checks import Counts
from trama.catalog._checkers import CHECKERS
from trama.catalog._function_checks import Index, Shape
from trama.catalog._layer_checks import ConvPadding, OutputSize
from trama.catalog._reader import REQUIRED, Checker, Choice, Dims, Integer, IntList, Rule

pytest.importorskip("torch")
pytest.importorskip("jax")

REPO = Path(__file__).resolve().parents[1]
SPECS = {spec.name: spec for spec in standard_specs()}
FRAMEWORKS = ("numpy", "torch", "jax")
RUNTIMES = ("numpy", "torch:cpu", "jax:cpu")


def tensor(*shape: int) -> Tensor:
    return Tensor.from_array(np.zeros(shape, np.float32))


# --------------------------------------------------------------------------------------------
# Documents
# --------------------------------------------------------------------------------------------

#: A valid node of every leaf op that has settings to break: its slots and wired ports.
BASELINES: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "Linear": ({"in_features": 3, "out_features": 2, "weight": tensor(2, 3), "bias": tensor(2)}, ("x",)),
    "Bilinear": (
        {"in1_features": 2, "in2_features": 3, "out_features": 2, "weight": tensor(2, 2, 3)},
        ("input1", "input2"),
    ),
    "Conv1d": ({"in_channels": 2, "out_channels": 2, "kernel_size": [3], "weight": tensor(2, 2, 3)}, ("x",)),
    "Conv2d": (
        {"in_channels": 4, "out_channels": 4, "kernel_size": [3, 3], "groups": 2, "weight": tensor(4, 2, 3, 3)},
        ("x",),
    ),
    "ConvTranspose2d": (
        {"in_channels": 2, "out_channels": 2, "kernel_size": [2, 2], "stride": [2, 2], "weight": tensor(2, 2, 2, 2)},
        ("x",),
    ),
    "MaxPool2d": ({"kernel_size": [2, 2]}, ("x",)),
    "AvgPool2d": ({"kernel_size": [2, 2]}, ("x",)),
    "AdaptiveAvgPool2d": ({"output_size": [2, None]}, ("x",)),
    "BatchNorm2d": (
        {
            "num_features": 3,
            **{slot: tensor(3) for slot in ("weight", "bias", "running_mean", "running_var")},
            "num_batches_tracked": Tensor.from_array(np.array(0, np.int64)),
        },
        ("x",),
    ),
    "LayerNorm": ({"normalized_shape": [3], "weight": tensor(3), "bias": tensor(3)}, ("x",)),
    "GroupNorm": ({"num_groups": 2, "num_channels": 4, "weight": tensor(4), "bias": tensor(4)}, ("x",)),
    "RMSNorm": ({"normalized_shape": [3], "weight": tensor(3)}, ("x",)),
    "Embedding": ({"num_embeddings": 4, "embedding_dim": 2, "weight": tensor(4, 2)}, ("x",)),
    "Dropout": ({"p": 0.5}, ("x",)),
    "Flatten": ({}, ("x",)),
    "MultiheadAttention": (
        {
            "embed_dim": 4,
            "num_heads": 2,
            "in_proj_weight": tensor(12, 4),
            "in_proj_bias": tensor(12),
            "out_proj_weight": tensor(4, 4),
            "out_proj_bias": tensor(4),
        },
        ("query", "key", "value"),
    ),
    "TransformerEncoderLayer": (
        {
            "d_model": 4,
            "nhead": 2,
            "dim_feedforward": 8,
            "self_attn_in_proj_weight": tensor(12, 4),
            "self_attn_in_proj_bias": tensor(12),
            "self_attn_out_proj_weight": tensor(4, 4),
            "self_attn_out_proj_bias": tensor(4),
            "linear1_weight": tensor(8, 4),
            "linear1_bias": tensor(8),
            "linear2_weight": tensor(4, 8),
            "linear2_bias": tensor(4),
            **{f"norm{k}_{part}": tensor(4) for k in (1, 2) for part in ("weight", "bias")},
        },
        ("src",),
    ),
    "GRU": (
        {"input_size": 3, "hidden_size": 2, "weight_ih_l0": tensor(6, 3), "weight_hh_l0": tensor(6, 2)}
        | {"bias_ih_l0": tensor(6), "bias_hh_l0": tensor(6)},
        ("x",),
    ),
    "LSTM": (
        {"input_size": 3, "hidden_size": 2, "weight_ih_l0": tensor(8, 3), "weight_hh_l0": tensor(8, 2)}
        | {"bias_ih_l0": tensor(8), "bias_hh_l0": tensor(8)},
        ("x",),
    ),
    "GELU": ({}, ("x",)),
    "softmax": ({"dim": -1}, ("x",)),
    "add": ({"alpha": 2}, ("x", "other")),
    "div": ({}, ("x", "other")),
    "concat": ({}, ("x0",)),
    "reshape": ({"shape": [-1]}, ("x",)),
    "permute": ({"dims": [0]}, ("x",)),
    "squeeze": ({}, ("x",)),
    "sum": ({"dim": 0}, ("x",)),
    "argmax": ({}, ("x",)),
    "getitem": ({"index": [0]}, ("x",)),
    "repeat_interleave": ({"repeats": [1, 2]}, ("x",)),
    "topk": ({"k": 1}, ("x",)),
}


def document(op: str, slots: Mapping[str, Any], ports: tuple[str, ...]) -> Model:
    """A one-node document: ``op`` with these slots (``None`` for a slot value is a null entry),
    its ports wired to model inputs of the same names."""
    spec = SPECS[op]
    parameters: dict[str, Parameter] = {}
    for slot, value in slots.items():
        schema = spec.slot(slot)
        assert schema is not None, f"{op} has no slot {slot!r}"
        learnable = isinstance(value, Tensor) and schema.learnable is not False
        parameters[f"layer.{slot}"] = Parameter(value, learnable=learnable)
    node = Node(
        id="layer",
        op=op,
        inputs={port: Ref(INPUT, port) for port in ports},
        outputs=list(spec.outputs),
        parameters={slot: f"layer.{slot}" for slot in slots},
    )
    return Model(inputs=list(ports), outputs=[Ref("layer", spec.outputs[0])], nodes=[node], parameters=parameters)


def outcomes(model: Model) -> Iterator[tuple[str, type[BaseException] | None, str]]:
    """What importing ``model`` with every framework's registry, and preparing it with every
    framework's runtime, gives: ``(who, error class or None, message)``."""
    for framework in FRAMEWORKS:
        yield framework, *_attempt(lambda f=framework: trama.import_model(model, registry=trama.registry(f)))
    for name in RUNTIMES:
        yield name, *_attempt(lambda n=name: trama.runtime_for_name(n).prepare(model))


def _attempt(call: Any) -> tuple[type[BaseException] | None, str]:
    try:
        call()
    except Exception as error:
        return type(error), str(error)
    return None, ""


def assert_refused_alike(model: Model, *, contains: str) -> str:
    """Every framework and runtime refuses ``model`` with one RegistryError, one message, which
    names the node and contains ``contains``; returns the message."""
    seen = set()
    for who, kind, message in outcomes(model):
        assert kind is RegistryError, f"{who}: {kind.__name__ if kind else 'accepted'}: {message}"
        seen.add(message)
    assert len(seen) == 1, f"the messages differ: {sorted(seen)}"
    (message,) = seen
    assert message.startswith("node 'layer': ")
    assert contains in message, message
    return message


# --------------------------------------------------------------------------------------------
# Every catalog op has a check, and the checks agree with the specs
# --------------------------------------------------------------------------------------------


def test_every_catalog_spec_has_a_checker() -> None:
    assert set(CHECKERS) == set(SPECS)


def _setting_slots(spec: OpSpec) -> list[ParameterSchema]:
    """The slots that hold settings: those no tensor may fill (tensors and operands are the
    relations' business)."""
    return [slot for slot in spec.parameters if "tensor" not in slot.types and "any" not in slot.types]


@pytest.mark.parametrize("op", sorted(SPECS))
def test_every_setting_slot_has_a_rule_that_matches_its_spec(op: str) -> None:
    spec, checker = SPECS[op], CHECKERS[op]
    settings = {slot.name: slot for slot in _setting_slots(spec)}
    assert set(checker.rules) == set(settings), op
    for name, rule in checker.rules.items():
        schema = settings[name]
        where = f"{op}.{name}"
        assert set(rule.types()) == set(schema.types), where
        assert rule.nullable == ("null" in schema.types), where
        if rule.default is REQUIRED:
            assert not schema.optional, where
        else:
            assert schema.optional, where
            default = list(rule.default) if isinstance(rule.default, tuple) else rule.default
            assert f"Default `{json.dumps(default)}`." in schema.doc, where


@pytest.mark.parametrize("op", sorted(BASELINES))
def test_absent_settings_take_the_catalog_default(op: str) -> None:
    slots, ports = BASELINES[op]
    settings = _settings(op, slots, ports)
    assert set(CHECKERS[op].rules) <= set(settings)
    for name, rule in CHECKERS[op].rules.items():
        if name not in slots and rule.default is not None:
            default = tuple(rule.default) if isinstance(rule.default, list) else rule.default
            assert settings[name] == default, f"{op}.{name}"


# --------------------------------------------------------------------------------------------
# The same error everywhere
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", sorted(BASELINES))
def test_baselines_build_everywhere(op: str) -> None:
    """The baseline nodes are valid, so each case below fails for its one bad setting only."""
    slots, ports = BASELINES[op]
    for who, kind, message in outcomes(document(op, slots, ports)):
        assert kind is None, f"{who}: {message}"


def _broken(rule: Rule) -> list[Any]:
    """Values of the slot's own JSON type (so validation lets them through) that ``rule``
    refuses, read from its data; none for rules of a type alone (flags, numbers, signed ints),
    which validation already enforces."""
    if isinstance(rule, Integer) and rule.minimum is not None:
        return [rule.minimum - 1]
    if isinstance(rule, IntList):
        bad: list[Any] = [[True] * (rule.count or 1)]
        if rule.minimum is not None:
            bad.append([rule.minimum - 1] * (rule.count or 1))
        if rule.count is not None:
            bad.append([1] * (rule.count + 1))
        if rule.non_empty:
            bad.append([])
        return bad
    if isinstance(rule, Choice):
        return ["bogus"]
    if isinstance(rule, Dims):
        return [[]]
    if isinstance(rule, ConvPadding):
        return ["full", [-3] * rule.dims]
    if isinstance(rule, OutputSize):
        return [[0, None], [2]]
    if isinstance(rule, Shape):
        return [[-2], [-1, -1]]
    if isinstance(rule, Index):
        return [[[None, None, 0]], ["i1"], ["...", "..."]]
    if isinstance(rule, Counts):
        return [-1, [2, -1], [True], [2**48, 1], 2**48 + 1]
    return []


RULE_CASES = [
    pytest.param(op, slot, value, id=f"{op}.{slot}={value!r}")
    for op in sorted(BASELINES)
    for slot, rule in CHECKERS[op].rules.items()
    for value in _broken(rule)
]


@pytest.mark.parametrize(("op", "slot", "value"), RULE_CASES)
def test_a_broken_rule_is_refused_alike_by_every_framework(op: str, slot: str, value: Any) -> None:
    slots, ports = BASELINES[op]
    assert_refused_alike(document(op, {**slots, slot: value}, ports), contains=slot)


def _conv2d(**changes: Any) -> dict[str, Any]:
    return {**BASELINES["Conv2d"][0], **changes}


def _gru(**changes: Any) -> dict[str, Any]:
    return {**BASELINES["GRU"][0], **changes}


def _lstm(**changes: Any) -> dict[str, Any]:
    return {**BASELINES["LSTM"][0], **changes}


def _without(op: str, *slots: str) -> dict[str, Any]:
    return {name: value for name, value in BASELINES[op][0].items() if name not in slots}


#: ``(op, slots, ports or None for the baseline's, what the message says)``: the issue's Conv2d
#: cases first, then one case per relation.
RELATION_CASES: list[tuple[str, dict[str, Any], tuple[str, ...] | None, str]] = [
    ("Conv2d", _conv2d(stride=[0, 1]), None, "stride must be a list of 2 ints ≥ 1, got [0, 1]"),
    ("Conv2d", _conv2d(dilation=[0, 1]), None, "dilation must be a list of 2 ints ≥ 1, got [0, 1]"),
    ("Conv2d", _conv2d(padding=[-3, 0]), None, "padding must be a list of 2 ints ≥ 0, got [-3, 0]"),
    ("Conv2d", _conv2d(kernel_size=[True, True]), None, "kernel_size must be a list of 2 ints ≥ 1"),
    ("Conv2d", _conv2d(groups=0), None, "groups must be an int ≥ 1, got 0"),
    ("Conv2d", _conv2d(out_channels=5), None, "groups = 2 must divide in_channels = 4 and out_channels = 5"),
    ("Conv2d", _conv2d(padding="same", stride=[2, 1]), None, 'padding "same" needs every stride to be 1'),
    ("Conv2d", _conv2d(weight=tensor(4, 4, 3, 3)), None, "weight has shape [4, 4, 3, 3], but [out_channels"),
    ("Conv2d", _conv2d(bias=tensor(3)), None, "bias has shape [3]"),
    ("ConvTranspose2d", {**BASELINES["ConvTranspose2d"][0], "output_padding": [2, 0]}, None, "output_padding[0] = 2"),
    ("Linear", {**BASELINES["Linear"][0], "in_features": 4}, None, "[out_features, in_features] is [2, 4]"),
    ("Bilinear", {**BASELINES["Bilinear"][0], "weight": tensor(2, 3, 2)}, None, "weight has shape [2, 3, 2]"),
    ("MaxPool2d", {"kernel_size": [3, 3], "padding": [2, 0]}, None, "padding[0] = 2 must be at most half"),
    ("BatchNorm2d", {**BASELINES["BatchNorm2d"][0], "affine": False}, None, "affine is false, yet the node has"),
    ("BatchNorm2d", _without("BatchNorm2d", "bias"), None, "affine is true, yet the node has no bias"),
    ("BatchNorm2d", _without("BatchNorm2d", "running_var"), None, "both present or both absent"),
    ("BatchNorm2d", _without("BatchNorm2d", "running_mean", "running_var"), None, "track_running_stats is true"),
    ("BatchNorm2d", _without("BatchNorm2d", "num_batches_tracked"), None, "needs the tensor 'num_batches_tracked'"),
    (
        "BatchNorm2d",
        {**_without("BatchNorm2d", "running_mean", "running_var"), "track_running_stats": False},
        None,
        "has the tensor 'num_batches_tracked', but its settings say it is absent",
    ),
    ("LayerNorm", _without("LayerNorm", "weight", "bias"), None, "elementwise_affine is true, yet the node has no"),
    ("GroupNorm", {**BASELINES["GroupNorm"][0], "num_groups": 3}, None, "num_groups = 3 must divide num_channels"),
    ("RMSNorm", {**BASELINES["RMSNorm"][0], "elementwise_affine": False}, None, "weight is present"),
    ("Embedding", {**BASELINES["Embedding"][0], "padding_idx": 4}, None, "padding_idx = 4 must be below"),
    ("Embedding", {**BASELINES["Embedding"][0], "weight": tensor(2, 4)}, None, "weight has shape [2, 4]"),
    ("Dropout", {"p": 1.5}, None, "p must lie in [0, 1], got 1.5"),
    ("Flatten", {"start_dim": 2, "end_dim": 1}, None, "start_dim = 2 comes after end_dim = 1"),
    ("MultiheadAttention", {**BASELINES["MultiheadAttention"][0], "num_heads": 3}, None, "num_heads = 3 does not"),
    ("MultiheadAttention", _without("MultiheadAttention", "in_proj_bias"), None, "needs the tensor 'in_proj_bias'"),
    (
        "MultiheadAttention",
        {**BASELINES["MultiheadAttention"][0], "q_proj_weight": tensor(4, 4)},
        None,
        "has both in_proj_weight and q/k/v_proj_weight",
    ),
    ("MultiheadAttention", {**BASELINES["MultiheadAttention"][0], "kdim": 3}, None, "in_proj_weight needs kdim"),
    (
        "TransformerEncoderLayer",
        {**BASELINES["TransformerEncoderLayer"][0], "bias": False},
        None,
        "has the tensor 'self_attn_in_proj_bias', but its settings say it is absent",
    ),
    ("TransformerEncoderLayer", {**BASELINES["TransformerEncoderLayer"][0], "dim_feedforward": 6}, None, "linear1"),
    ("GRU", _gru(num_layers=10**9), None, f"num_layers must be 1 … {RNN_MAX_LAYERS} in opset 1, got 1000000000"),
    ("GRU", _gru(num_layers=RNN_MAX_LAYERS + 1), None, "num_layers must be 1 …"),
    ("GRU", _gru(num_layers=2), None, "needs the tensor 'weight_ih_l1' with these settings"),
    ("GRU", _gru(bidirectional=True), None, "needs the tensor 'weight_ih_l0_reverse'"),
    ("GRU", _gru(bias=False), None, "has the tensor 'bias_ih_l0', but its settings say it is absent"),
    ("GRU", _gru(weight_hh_l0=tensor(6, 3)), None, "weight_hh_l0 has shape [6, 3], but [3·hidden_size, hidden_size]"),
    ("LSTM", _lstm(proj_size=2), None, "proj_size must be 0 or below hidden_size = 2, got 2"),
    ("LSTM", _lstm(), ("x", "h0"), "connects only one of h0 and c0"),
    ("add", {}, ("x",), "operand 'other' is neither wired nor held by a slot"),
    ("add", {"other": 1.0}, ("x", "other"), "operand 'other' is both wired and held by a slot"),
]


@pytest.mark.parametrize(
    ("op", "slots", "ports", "message"), RELATION_CASES, ids=[f"{case[0]}-{i}" for i, case in enumerate(RELATION_CASES)]
)
def test_a_broken_relation_is_refused_alike_by_every_framework(
    op: str, slots: dict[str, Any], ports: tuple[str, ...] | None, message: str
) -> None:
    model = document(op, slots, BASELINES[op][1] if ports is None else ports)
    assert assert_refused_alike(model, contains=message).startswith(f"node 'layer': {op}: ")


def test_a_huge_recurrent_layer_is_refused_before_anything_is_allocated() -> None:
    """torch would try to build 10⁹ layers; the check stops it at once, the same way everywhere."""
    assert_refused_alike(document("GRU", _gru(num_layers=10**9), ("x",)), contains="num_layers")


# --------------------------------------------------------------------------------------------
# What the check returns, and when it runs
# --------------------------------------------------------------------------------------------


def _settings(op: str, slots: Mapping[str, Any], ports: tuple[str, ...] = ("x",)) -> Settings:
    model = document(op, slots, ports)
    node = model.nodes[0]
    return check_settings(node, {slot: model.parameters[key] for slot, key in node.parameters.items()})


def test_settings_are_normalized_for_kernels() -> None:
    conv = _settings("Conv2d", _conv2d(padding="same", dilation=[2, 1]))
    assert conv.integers("stride") == (1, 1)  # the default, as a tuple
    assert conv["pads"] == ((2, 2), (1, 1))  # "same": dilation·(kernel − 1), split
    assert conv.text("padding_mode") == "zeros"
    assert conv.tensors == ("weight",)
    assert _settings("Conv2d", _conv2d(padding="valid"))["pads"] == ((0, 0), (0, 0))
    assert _settings("Conv1d", {**BASELINES["Conv1d"][0], "padding": [2]})["pads"] == ((2, 2),)
    pool = _settings("MaxPool2d", {"kernel_size": [3, 2], "stride": None})
    assert pool.integers("stride") == (3, 2)  # null: the kernel size
    attention = _settings("MultiheadAttention", BASELINES["MultiheadAttention"][0], ("query", "key", "value"))
    assert (attention["kdim"], attention["vdim"], attention["packed"]) == (4, 4, True)
    lstm = _settings("LSTM", {**_lstm(hidden_size=3, proj_size=2, bidirectional=True)} | _lstm_layers(), ("x",))
    assert (lstm["h_out"], lstm["directions"]) == (2, 2)
    assert _settings("add", {"alpha": 2, "other": 3}, ("x",))["other"] == 3
    assert _settings("add", {"other": Tensor.from_array(np.float32(3))}, ("x",)).tensors == ("other",)


def _lstm_layers() -> dict[str, Any]:
    """The slots of a bidirectional LSTM with hidden_size 3 and proj_size 2 on 3 features."""
    slots: dict[str, Any] = {}
    for suffix in ("", "_reverse"):
        slots |= {
            f"weight_ih_l0{suffix}": tensor(12, 3),
            f"weight_hh_l0{suffix}": tensor(12, 2),
            f"bias_ih_l0{suffix}": tensor(12),
            f"bias_hh_l0{suffix}": tensor(12),
            f"weight_hr_l0{suffix}": tensor(2, 3),
        }
    return slots


def test_a_node_is_checked_once_when_a_framework_builds_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """build_node checks; the factory inside reads what it checked instead of checking again."""
    calls: list[str] = []
    original = Checker.check

    def counting(self: Checker, node: Node, parameters: Mapping[str, Parameter]) -> Settings:
        calls.append(node.op)
        return original(self, node, parameters)

    monkeypatch.setattr(Checker, "check", counting)
    model = document("Conv2d", _conv2d(), ("x",))
    for framework in FRAMEWORKS:
        calls.clear()
        trama.import_model(model, registry=trama.registry(framework))
        assert calls == ["Conv2d"], framework


def test_a_factory_called_on_its_own_still_checks() -> None:
    """Kernel tests call factories directly: the check runs there too."""
    from trama_numpy._registry import implementations

    model = document("Conv2d", _conv2d(groups=3), ("x",))
    node = model.nodes[0]
    parameters = {slot: model.parameters[key] for slot, key in node.parameters.items()}
    with pytest.raises(RegistryError, match="groups = 3 must divide"):
        implementations()["Conv2d"](node, children={}, parameters=parameters)


def test_a_toy_op_under_a_catalog_name_is_not_held_to_the_catalog() -> None:
    """A hand-made registry may name its own op ``Dropout``: the catalog's rules are not its."""
    built: list[float] = []

    def factory(node: Node, *, children: Any, parameters: Mapping[str, Parameter]) -> Any:
        built.append(parameters["p"].value)  # type: ignore[arg-type]
        return object()

    registry = OpRegistry([OpSpec("Dropout", ("x",), ("y",), (ParameterSchema("p", ("float",)),), factory=factory)])
    node = Node(id="layer", op="Dropout", inputs={"x": Ref(INPUT, "x")}, outputs=["y"], parameters={"p": "p"})
    model = Model(inputs=["x"], outputs=[Ref("layer", "y")], nodes=[node], parameters={"p": Parameter(5.0)})
    trama.import_model(model, registry=registry)
    assert built == [5.0]


def test_check_settings_names_an_op_outside_the_catalog() -> None:
    node = Node(id="n", op="mypkg.Scale", inputs={}, outputs=["y"])
    with pytest.raises(RegistryError, match="not in the standard catalog"):
        check_settings(node, {})


# --------------------------------------------------------------------------------------------
# trama-jax stands on the core alone
# --------------------------------------------------------------------------------------------


def test_trama_jax_does_not_depend_on_trama_numpy() -> None:
    package = REPO / "packages" / "trama-jax"
    assert "trama-numpy" not in (package / "pyproject.toml").read_text(encoding="utf-8")
    for path in sorted((package / "src" / "trama_jax").glob("*.py")):
        assert "trama_numpy" not in path.read_text(encoding="utf-8"), path.name
