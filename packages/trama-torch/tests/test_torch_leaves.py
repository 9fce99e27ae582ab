"""trama-torch's leaf modules, both ways: every catalog op that is a ``torch.nn`` module is built
with non-default arguments, exported with :func:`export_leaf`, written to JSON and read back, and
imported with its factory. What comes back must be the same module: same class (or, for the few
ops of :mod:`trama_torch.leaves.modules`, the subclass that import builds), same ``repr``
(constructor arguments), same ``state_dict`` (keys, values, dtypes), same parameter/buffer split
and ``requires_grad`` flags, and bit-identical outputs in eval mode (``torch.equal``).
"""

from __future__ import annotations

import gc
import inspect
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch_op_support import Leaf, round_trip, torch_registry

import trama
from trama import ExecutionError, ExportError, ImportModelError, Model, NodeFragment, Parameter, Tensor
from trama.catalog import standard_specs
from trama_torch.functions import function_factories
from trama_torch.leaves import (
    bind_leaf_call,
    call_leaf,
    leaf_call_arguments,
    leaf_call_constants,
    leaf_factories,
    leaf_op,
    leaf_result_structure,
)
from trama_torch.leaves.table import LEAF_KINDS
from trama_torch.tensors import parameter_scope

REGISTRY = torch_registry()

#: torch says so when it runs an LSTM with projections on the CPU; the values are its usual ones.
pytestmark = pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN:UserWarning")


def _seeded(make: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        torch.manual_seed(0)
        return make()

    return build


@dataclass
class Case:
    """One module, its inputs by port, and how a user calls it."""

    id: str
    make: Callable[[], nn.Module]
    inputs: Callable[[], dict[str, Any]]
    call: Callable[[nn.Module, dict[str, Any]], Any] = lambda module, values: module(values["x"])
    constants: dict[str, Any] | None = None
    setup: Callable[[nn.Module], None] | None = None

    def module(self) -> nn.Module:
        torch.manual_seed(0)
        module = self.make()
        if self.setup is not None:
            with torch.no_grad():
                self.setup(module)
        return module.eval()


def _x(*shape: int) -> Callable[[], dict[str, Any]]:
    return lambda: {"x": torch.randn(*shape, generator=torch.Generator().manual_seed(1))}


def _randn(*shape: int, seed: int = 1) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _running_stats(module: nn.Module) -> None:
    module.running_mean.copy_(torch.randn(module.num_features))
    module.running_var.copy_(torch.rand(module.num_features) + 0.5)
    module.num_batches_tracked.fill_(7)
    if module.affine:
        module.weight.copy_(torch.randn(module.num_features))
        module.bias.copy_(torch.randn(module.num_features))


def _mha_inputs() -> dict[str, Any]:
    mask = torch.zeros(2, 5, dtype=torch.bool)
    mask[0, 4] = True
    return {
        "query": _randn(2, 3, 8, seed=1),
        "key": _randn(2, 5, 6, seed=2),
        "value": _randn(2, 5, 5, seed=3),
        "key_padding_mask": mask,
        "attn_mask": _randn(3, 5, seed=4) > 1.0,
    }


def _causal(size: int) -> torch.Tensor:
    return torch.triu(torch.full((size, size), float("-inf")), diagonal=1)


CASES = [
    Case("Linear", lambda: nn.Linear(4, 3, bias=False), _x(2, 4)),
    Case("Linear-frozen", lambda: nn.Linear(4, 3), _x(5, 2, 4), setup=lambda m: m.weight.requires_grad_(False)),
    Case(
        "Bilinear",
        lambda: nn.Bilinear(3, 4, 2),
        lambda: {"input1": _randn(2, 3), "input2": _randn(2, 4, seed=2)},
        call=lambda m, v: m(v["input1"], v["input2"]),
    ),
    Case("Conv1d", lambda: nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2, padding_mode="reflect"), _x(2, 4, 9)),
    Case(
        "Conv2d",
        lambda: nn.Conv2d(4, 4, 3, padding="same", dilation=2, groups=4, bias=False, padding_mode="circular"),
        _x(1, 4, 7, 7),
    ),
    Case("Conv2d-tuples", lambda: nn.Conv2d(3, 5, (3, 2), stride=(2, 1), padding=(1, 0)), _x(2, 3, 6, 5)),
    Case(
        "ConvTranspose2d",
        lambda: nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, dilation=1),
        _x(1, 4, 4, 5),
    ),
    Case(
        "MaxPool2d",
        lambda: nn.MaxPool2d((3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), ceil_mode=True),
        _x(2, 3, 7, 8),
    ),
    Case(
        "AvgPool2d",
        lambda: nn.AvgPool2d((3, 3), stride=(2, 2), padding=(1, 1), ceil_mode=True, count_include_pad=False),
        _x(2, 3, 7, 8),
    ),
    Case("AvgPool2d-divisor", lambda: nn.AvgPool2d((2, 2), padding=(0, 0), divisor_override=3), _x(1, 2, 4, 4)),
    Case("AdaptiveAvgPool2d", lambda: nn.AdaptiveAvgPool2d((3, None)), _x(2, 3, 7, 5)),
    Case("BatchNorm1d", lambda: nn.BatchNorm1d(4, eps=1e-3, momentum=0.2), _x(3, 4, 5), setup=_running_stats),
    Case(
        "BatchNorm2d",
        lambda: nn.BatchNorm2d(3, affine=False, momentum=None),
        _x(2, 3, 4, 4),
        setup=_running_stats,
    ),
    Case("BatchNorm2d-batch-stats", lambda: nn.BatchNorm2d(3, track_running_stats=False), _x(2, 3, 4, 4)),
    Case("LayerNorm", lambda: nn.LayerNorm((3, 4), eps=1e-6, bias=False), _x(2, 3, 4)),
    Case("LayerNorm-plain", lambda: nn.LayerNorm(4, elementwise_affine=False), _x(2, 4)),
    Case("GroupNorm", lambda: nn.GroupNorm(2, 4, eps=1e-4), _x(2, 4, 3)),
    Case("GroupNorm-no-bias", lambda: nn.GroupNorm(2, 4, bias=False), _x(2, 4, 3)),
    Case("RMSNorm", lambda: nn.RMSNorm([3, 4]), _x(2, 3, 4), setup=lambda m: m.weight.copy_(torch.randn(3, 4))),
    Case("RMSNorm-no-affine", lambda: nn.RMSNorm(4, eps=1e-3, elementwise_affine=False), _x(2, 4)),
    Case(
        "Embedding",
        lambda: nn.Embedding(10, 3, padding_idx=-2, norm_type=1.0, scale_grad_by_freq=True),
        lambda: {"x": torch.tensor([[0, 8, 9], [3, 3, 1]])},
    ),
    Case("Embedding-max-norm", lambda: nn.Embedding(10, 3, max_norm=1.0), lambda: {"x": torch.tensor([1, 2, 2])}),
    Case("Dropout", lambda: nn.Dropout(0.3), _x(2, 3)),
    Case("Identity", lambda: nn.Identity(), _x(2, 3)),
    Case("Flatten", lambda: nn.Flatten(0, 1), _x(2, 3, 4)),
    Case(
        "MultiheadAttention",
        lambda: nn.MultiheadAttention(
            8, 2, dropout=0.1, add_bias_kv=True, add_zero_attn=True, kdim=6, vdim=5, batch_first=True
        ),
        _mha_inputs,
        call=lambda m, v: m(
            v["query"],
            v["key"],
            v["value"],
            key_padding_mask=v["key_padding_mask"],
            attn_mask=v["attn_mask"],
            average_attn_weights=False,
        ),
        constants={"average_attn_weights": False},
    ),
    Case(
        "MultiheadAttention-no-weights",
        lambda: nn.MultiheadAttention(8, 2, bias=False),
        lambda: {"query": _randn(3, 2, 8), "key": _randn(4, 2, 8, seed=2), "value": _randn(4, 2, 8, seed=3)},
        call=lambda m, v: m(v["query"], v["key"], v["value"], need_weights=False),
        constants={"need_weights": False},
    ),
    Case(
        "TransformerEncoderLayer",
        lambda: nn.TransformerEncoderLayer(
            8, 2, 16, dropout=0.0, activation="gelu", layer_norm_eps=1e-6, batch_first=True, norm_first=True, bias=False
        ),
        lambda: {"src": _randn(2, 5, 8), "src_mask": _causal(5)},
        call=lambda m, v: m(v["src"], src_mask=v["src_mask"]),
    ),
    Case(
        "TransformerEncoderLayer-post-norm",
        lambda: nn.TransformerEncoderLayer(8, 2, 12, activation=F.relu),
        lambda: {"src": _randn(5, 2, 8), "src_key_padding_mask": torch.tensor([[False] * 5, [False] * 4 + [True]])},
        call=lambda m, v: m(v["src"], src_key_padding_mask=v["src_key_padding_mask"]),
    ),
    Case(
        "GRU",
        lambda: nn.GRU(3, 4, num_layers=2, bias=False, batch_first=True, bidirectional=True),
        lambda: {"x": _randn(2, 5, 3), "h0": _randn(4, 2, 4, seed=2)},
        call=lambda m, v: m(v["x"], v["h0"]),
    ),
    Case(
        "LSTM",
        lambda: nn.LSTM(3, 5, num_layers=2, proj_size=2, bidirectional=True, dropout=0.25),
        lambda: {"x": _randn(6, 2, 3), "h0": _randn(4, 2, 2, seed=2), "c0": _randn(4, 2, 5, seed=3)},
        call=lambda m, v: m(v["x"], (v["h0"], v["c0"])),
    ),
    Case("LSTM-no-state", lambda: nn.LSTM(3, 4), lambda: {"x": _randn(4, 3)}),
    Case("ReLU", lambda: nn.ReLU(), _x(2, 3)),
    Case("LeakyReLU", lambda: nn.LeakyReLU(0.2), _x(2, 3)),
    Case("GELU", lambda: nn.GELU("tanh"), _x(2, 3)),
    Case("SiLU", lambda: nn.SiLU(), _x(2, 3)),
    Case("Sigmoid", lambda: nn.Sigmoid(), _x(2, 3)),
    Case("Tanh", lambda: nn.Tanh(), _x(2, 3)),
    Case("Softmax", lambda: nn.Softmax(dim=1), _x(2, 3, 4)),
    Case("LogSoftmax", lambda: nn.LogSoftmax(dim=-1), _x(2, 3)),
    Case("Softplus", lambda: nn.Softplus(beta=2.0, threshold=1.0), _x(2, 3)),
    Case("ELU", lambda: nn.ELU(alpha=0.5), _x(2, 3)),
    Case("Hardswish", lambda: nn.Hardswish(), lambda: {"x": torch.linspace(-4, 4, 17)}),
    # Opset 2: activations
    Case("ReLU6", lambda: nn.ReLU6(), lambda: {"x": torch.linspace(-8, 8, 17)}),
    Case("Hardtanh", lambda: nn.Hardtanh(-2.0, 0.5), lambda: {"x": torch.linspace(-4, 4, 17)}),
    Case("Hardsigmoid", lambda: nn.Hardsigmoid(), lambda: {"x": torch.linspace(-4, 4, 17)}),
    Case("Mish", lambda: nn.Mish(), _x(2, 3)),
    Case("PReLU", lambda: nn.PReLU(3, init=0.1), _x(2, 3, 4), setup=lambda m: m.weight.copy_(torch.randn(3))),
    Case("SELU", lambda: nn.SELU(), _x(2, 3)),
    Case("CELU", lambda: nn.CELU(alpha=0.7), _x(2, 3)),
    Case("GLU", lambda: nn.GLU(dim=1), _x(2, 4, 3)),
    Case("LogSigmoid", lambda: nn.LogSigmoid(), _x(2, 3)),
    Case("Softsign", lambda: nn.Softsign(), _x(2, 3)),
    Case("Tanhshrink", lambda: nn.Tanhshrink(), _x(2, 3)),
    Case("Hardshrink", lambda: nn.Hardshrink(0.3), _x(2, 3)),
    Case("Softshrink", lambda: nn.Softshrink(0.3), _x(2, 3)),
    Case("Threshold", lambda: nn.Threshold(0.1, -2.0), _x(2, 3)),
    Case("Softmin", lambda: nn.Softmin(dim=1), _x(2, 3)),
    # Opset 2: layers
    Case("Conv3d", lambda: nn.Conv3d(4, 6, (3, 2, 2), stride=(1, 2, 1), padding=1, groups=2), _x(1, 4, 5, 6, 4)),
    Case(
        "ConvTranspose1d",
        lambda: nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
        _x(2, 4, 5),
    ),
    Case("BatchNorm3d", lambda: nn.BatchNorm3d(3, eps=1e-4), _x(2, 3, 2, 3, 2), setup=_running_stats),
    # Opset 2: pooling and resampling modules (window sizes as the tuples an import builds)
    Case(
        "MaxPool1d", lambda: nn.MaxPool1d((3,), stride=(2,), padding=(1,), dilation=(1,), ceil_mode=True), _x(2, 3, 9)
    ),
    Case(
        "MaxPool3d",
        lambda: nn.MaxPool3d((2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0), dilation=(1, 1, 1)),
        _x(1, 2, 4, 6, 5),
    ),
    Case("AvgPool1d", lambda: nn.AvgPool1d((3,), stride=(2,), padding=(1,), count_include_pad=False), _x(2, 3, 8)),
    Case(
        "AvgPool3d",
        lambda: nn.AvgPool3d((2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0), ceil_mode=True, divisor_override=3),
        _x(1, 2, 5, 4, 4),
    ),
    Case("AdaptiveAvgPool1d", lambda: nn.AdaptiveAvgPool1d((3,)), _x(2, 3, 7)),
    Case("AdaptiveAvgPool3d", lambda: nn.AdaptiveAvgPool3d((2, None, 3)), _x(1, 2, 5, 4, 7)),
    Case("AdaptiveMaxPool1d", lambda: nn.AdaptiveMaxPool1d((4,)), _x(2, 3, 9)),
    Case("AdaptiveMaxPool2d", lambda: nn.AdaptiveMaxPool2d((2, 3)), _x(2, 3, 5, 7)),
    Case("Upsample", lambda: nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False), _x(1, 2, 3, 4)),
    Case("Upsample-nearest-size", lambda: nn.Upsample(size=(5, 7), mode="nearest"), _x(1, 2, 3, 4)),
]


def _op(case: Case) -> str:
    return case.id.split("-")[0]


def _spec(op: str) -> trama.OpSpec:
    return next(spec for spec in standard_specs() if spec.name == op)


def _export(module: nn.Module, ports: list[str], constants: dict[str, Any] | None = None) -> Model:
    op = leaf_op(module)
    assert op is not None
    return round_trip(Leaf(module, constants), ports, list(_spec(op).outputs))


def _import(model: Model) -> Any:
    return trama.import_model(model, registry=REGISTRY)


def _flat(value: Any) -> Iterator[Any]:
    if isinstance(value, (tuple, list)):
        for item in value:
            yield from _flat(item)
    else:
        yield value


def assert_same_values(expected: Any, actual: Any) -> None:
    """Bit-identical tensors (and ``None`` where ``None``), element by element of nested tuples."""
    expected_items, actual_items = list(_flat(expected)), list(_flat(actual))
    assert len(expected_items) == len(actual_items)
    for want, got in zip(expected_items, actual_items, strict=True):
        if want is None:
            assert got is None
        else:
            assert got.dtype == want.dtype
            assert torch.equal(got, want)


#: The subclass import builds in place of a torch class (see trama_torch.leaves.modules).
_BUILT: dict[type[nn.Module], type[nn.Module]] = {kind.cls: kind.build for kind in LEAF_KINDS if kind.build}


def assert_same_module(original: nn.Module, back: nn.Module) -> None:
    """Same class (or the subclass import builds for it), constructor arguments, state (values,
    dtypes, kinds) and grad flags."""
    assert type(back) is _BUILT.get(type(original), type(original))
    assert isinstance(back, type(original))
    assert repr(back) == repr(original)
    want, got = original.state_dict(), back.state_dict()
    assert list(got) == list(want)
    for key, tensor in want.items():
        assert got[key].dtype == tensor.dtype, key
        assert torch.equal(got[key], tensor), key
    assert [name for name, _ in back.named_buffers()] == [name for name, _ in original.named_buffers()]
    flags = {name: (type(p), p.requires_grad) for name, p in original.named_parameters()}
    assert {name: (type(p), p.requires_grad) for name, p in back.named_parameters()} == flags
    assert not back.training


def _through_a_document(case: Case) -> tuple[nn.Module, dict[str, Any], Model, Any]:
    """The case's module, its inputs, its document (through JSON) and the module imported from it."""
    original = case.module()
    inputs = case.inputs()
    model = _export(original, list(inputs), case.constants)
    return original, inputs, model, _import(model)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_round_trip(case: Case) -> None:
    original, inputs, _, back = _through_a_document(case)
    assert_same_module(original, back)
    assert_same_values(case.call(original, inputs), case.call(back, inputs))


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_call_leaf_gives_the_outputs_by_name(case: Case) -> None:
    """call_leaf passes the ports (and the node's call-site constants) as the user did."""
    original, inputs, model, back = _through_a_document(case)
    outputs = call_leaf(model.nodes[0], back, inputs)
    assert list(outputs) == list(_spec(_op(case)).outputs)
    assert_same_values(case.call(original, inputs), tuple(outputs.values()))


def test_every_leaf_op_of_the_catalog_is_covered() -> None:
    """Each catalog op that is not a composite is a leaf module or a function, never both, and the
    cases above exercise every leaf."""
    catalog = {spec.name for spec in standard_specs() if not spec.composite}
    leaves, functions = set(leaf_factories()), set(function_factories())
    assert not leaves & functions
    assert leaves | functions == catalog
    assert {_op(case) for case in CASES} == leaves


@pytest.mark.parametrize("kind", LEAF_KINDS, ids=[kind.op for kind in LEAF_KINDS])
def test_forward_table_names_torchs_arguments(kind: Any) -> None:
    """The table's forward arguments are torch's, in torch's order: a torch upgrade that renames
    one fails here instead of silently unbinding calls."""
    names = list(inspect.signature(kind.cls.forward).parameters)[1:]
    assert [arg.name for arg in kind.forward] == names


@pytest.mark.parametrize(
    ("make", "dtype"),
    [
        (lambda: nn.Linear(4, 3), torch.float16),
        (lambda: nn.Linear(4, 3), torch.bfloat16),
        (lambda: nn.Conv2d(2, 3, 3), torch.bfloat16),
        (lambda: nn.BatchNorm2d(2), torch.float16),
        (lambda: nn.LayerNorm(4), torch.bfloat16),
        (lambda: nn.GRU(4, 3), torch.bfloat16),
    ],
    ids=["Linear-f16", "Linear-bf16", "Conv2d-bf16", "BatchNorm2d-f16", "LayerNorm-bf16", "GRU-bf16"],
)
def test_half_precision_modules_survive(make: Callable[[], nn.Module], dtype: torch.dtype) -> None:
    original = _seeded(make)().to(dtype).eval()
    shape = {nn.Conv2d: (1, 2, 5, 5), nn.BatchNorm2d: (2, 2, 3, 3), nn.GRU: (3, 4)}.get(type(original), (2, 4))
    x = _randn(*shape).to(dtype)
    model = _export(original, ["x"])
    assert {entry.value.dtype for entry in model.parameters.values() if isinstance(entry.value, Tensor)} >= {
        str(dtype).removeprefix("torch.")
    }
    back = _import(model)
    assert_same_module(original, back)
    assert_same_values(original(x), back(x))


# --- Ties ------------------------------------------------------------------------------------------


class _Tied:
    """An embedding and an LM head sharing one weight, exported as a Graph of two leaves."""

    def __init__(self) -> None:
        torch.manual_seed(0)
        self.embedding = nn.Embedding(10, 4)
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.embedding.weight

    def to_node(self, ctx: trama.ExportContext) -> NodeFragment:
        hidden = ctx.child("embedding", Leaf(self.embedding), {"x": ctx.input("x")})
        logits = ctx.child("head", Leaf(self.head), {"x": hidden["y"]})
        return NodeFragment("Graph", output_bindings={"y": logits["y"]})


def test_tied_weights_become_one_parameter() -> None:
    model = round_trip(_Tied(), ["x"], ["y"])
    assert len([entry for entry in model.parameters.values() if isinstance(entry.value, Tensor)]) == 1
    built = _import(model)
    assert built["head"].weight is built["embedding"].weight
    assert isinstance(built["head"].weight, nn.Parameter)
    assert built["head"].weight.requires_grad


def test_tie_cache_holds_nothing_alive() -> None:
    """The cache neither keeps the tensors alive once the modules are gone, nor keeps lines for
    entries once the document is gone."""
    with parameter_scope() as cache:
        model = round_trip(_Tied(), ["x"], ["y"])
        built = _import(model)
        weight = weakref.ref(built["head"].weight)
        assert len(cache) == 1
        del built
        gc.collect()
        assert weight() is None
        assert len(cache) == 0
        _import(model)
        del model
        gc.collect()
        assert not cache._tensors
        assert not cache._watched


def test_parameter_scope_gives_independent_imports() -> None:
    model = round_trip(_Tied(), ["x"], ["y"])
    first = _import(model)
    again = _import(model)
    assert again["head"].weight is first["head"].weight  # same entries, same tensors
    with parameter_scope():
        separate = _import(model)
    assert separate["head"].weight is not first["head"].weight
    assert separate["head"].weight is separate["embedding"].weight


# --- Which modules are leaves ----------------------------------------------------------------------


class _Initialised(nn.Linear):
    def reset_parameters(self) -> None:
        nn.init.zeros_(self.weight)


class _Doubled(nn.Linear):
    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return 2 * super().forward(input)


class _OwnConvolution(nn.Conv2d):
    def _conv_forward(self, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        return super()._conv_forward(input, weight.abs(), bias)


def test_leaf_op_rule() -> None:
    assert leaf_op(nn.Linear(2, 2)) == "Linear"
    assert leaf_op(nn.modules.linear.NonDynamicallyQuantizableLinear(2, 2)) == "Linear"
    assert leaf_op(_Initialised(2, 2)) == "Linear"
    assert leaf_op(_Doubled(2, 2)) is None
    assert leaf_op(_OwnConvolution(1, 1, 1)) is None
    assert leaf_op(nn.Sequential()) is None
    assert leaf_op(nn.RReLU()) is None
    parametrized = nn.Linear(2, 2)
    nn.utils.parametrizations.orthogonal(parametrized)
    assert leaf_op(parametrized) is None


def test_a_qualifying_subclass_comes_back_as_the_catalog_class() -> None:
    original = _seeded(lambda: _Initialised(3, 2))().eval()
    back = _import(_export(original, ["x"]))
    assert type(back) is nn.Linear
    x = _randn(2, 3)
    assert torch.equal(back(x), original(x))


def test_result_structures() -> None:
    assert leaf_result_structure("Linear") == "y"
    assert leaf_result_structure("GRU") == ("y", "h_n")
    assert leaf_result_structure("LSTM") == ("y", ("h_n", "c_n"))
    assert leaf_result_structure("MultiheadAttention") == ("y", "attn_weights")


def test_pool_arguments_come_back_as_pairs() -> None:
    """torch keeps a pool's ``3`` as given; the catalog's list has two entries, so the module comes
    back with ``(3, 3)``, which computes the same."""
    original = nn.MaxPool2d(3, padding=1).eval()
    back = _import(_export(original, ["x"]))
    assert (back.kernel_size, back.stride, back.padding, back.dilation) == ((3, 3), (3, 3), (1, 1), (1, 1))
    x = _randn(1, 2, 7, 7)
    assert torch.equal(back(x), original(x))


def test_a_module_in_training_mode_exports_its_eval_semantics() -> None:
    original = _seeded(lambda: nn.BatchNorm1d(3))()
    original(_randn(4, 3))  # moves the running statistics
    assert original.training
    back = _import(_export(original, ["x"]))
    assert not back.training
    x = _randn(2, 3, seed=5)
    assert torch.equal(back(x), original.eval()(x))


def test_inplace_flags_are_not_recorded() -> None:
    back = _import(_export(nn.ReLU(inplace=True), ["x"]))
    assert back.inplace is False


# --- Refusals --------------------------------------------------------------------------------------


def _export_error(module: nn.Module, ports: list[str], constants: dict[str, Any] | None = None) -> str:
    with pytest.raises(ExportError) as caught:
        round_trip(Leaf(module, constants), ports, ["y"])
    return str(caught.value)


def test_refusals_name_the_module_and_the_reason() -> None:
    assert "return_indices" in _export_error(nn.MaxPool2d(2, return_indices=True), ["x"])
    tanh_gelu = nn.TransformerEncoderLayer(4, 2, 8, activation=nn.GELU("tanh"))
    assert "neither ReLU nor the exact GELU" in _export_error(tanh_gelu, ["src"])
    assert "at most 8" in _export_error(nn.GRU(2, 2, num_layers=9), ["x"])
    hooked = nn.Linear(2, 2)
    hooked.register_forward_hook(lambda module, args, result: result * 2)
    message = _export_error(hooked, ["x"])
    assert "forward hooks" in message
    assert "Linear at 'root'" in message
    assert "not a catalog leaf" in _export_error(nn.RReLU(), ["x"])
    assert "no call-site argument ['need_weights']" in _export_error(nn.Linear(2, 2), ["x"], {"need_weights": False})
    swapped = nn.TransformerEncoderLayer(4, 2, 8)
    swapped.linear1 = _Initialised(4, 8)
    assert "part 'linear1'" in _export_error(swapped, ["src"])


# --- Import errors ---------------------------------------------------------------------------------


def _linear_model() -> Model:
    return _export(_seeded(lambda: nn.Linear(3, 2))(), ["x"])


def test_import_refuses_missing_misshapen_and_stray_state() -> None:
    model = _linear_model()
    node = model.nodes[0]
    model.parameters[node.parameters["weight"]] = Parameter(Tensor.from_array(torch.zeros(2, 4).numpy()), True)
    # The core's settings check refuses the document before torch's factory runs (the same error
    # as numpy's and JAX's). A factory called on its own runs that check first too, then its own
    # (which catches what the catalog's settings do not speak of: a slot with no place).
    with pytest.raises(trama.RegistryError, match=r"weight has shape \[2, 4\], but \[out_features, in_features\] is"):
        _import(model)
    factory = leaf_factories()["Linear"]
    entries = {slot: Parameter(value) for slot, value in (("in_features", 3), ("out_features", 2))}
    with pytest.raises(trama.RegistryError, match="the required tensor 'weight' is missing"):
        factory(node, children={}, parameters=entries)
    weight = Parameter(Tensor.from_array(torch.zeros(2, 3).numpy()), learnable=True)
    stray = Parameter(Tensor.from_array(torch.zeros(3).numpy()))
    with pytest.raises(ImportModelError, match=r"the slots \['running_mean'\] have no place"):
        factory(node, children={}, parameters={**entries, "weight": weight, "running_mean": stray})
    with pytest.raises(trama.RegistryError, match=r"out_features must be an int ≥ 0, got -2"):
        factory(node, children={}, parameters={**entries, "weight": weight, "out_features": Parameter(-2)})


# --- Binding calls ---------------------------------------------------------------------------------


def test_bind_leaf_call_maps_arguments_to_ports_and_constants() -> None:
    q, k, v, mask = object(), object(), object(), object()
    assert bind_leaf_call("MultiheadAttention", (q, k, v), {"need_weights": False}) == (
        {"query": q, "key": k, "value": v},
        {"need_weights": False},
    )
    assert bind_leaf_call("MultiheadAttention", (q, k, v, None, True, None, False), {}) == (
        {"query": q, "key": k, "value": v},
        {"need_weights": True, "average_attn_weights": False},
    )
    ports, _ = bind_leaf_call("MultiheadAttention", (q, k, v, mask), {"attn_mask": mask, "is_causal": True})
    assert ports == {"query": q, "key": k, "value": v, "key_padding_mask": mask, "attn_mask": mask}
    assert bind_leaf_call("LSTM", (q, (k, v)), {}) == ({"x": q, "h0": k, "c0": v}, {})
    assert bind_leaf_call("LSTM", (q,), {"hx": None}) == ({"x": q}, {})
    assert bind_leaf_call("GRU", (q, k), {}) == ({"x": q, "h0": k}, {})
    assert bind_leaf_call("RMSNorm", (q,), {}) == ({"x": q}, {})
    assert bind_leaf_call("Bilinear", (q, k), {}) == ({"input1": q, "input2": k}, {})


@pytest.mark.parametrize(
    ("op", "args", "kwargs", "message"),
    [
        ("Linear", (1,), {"scale": 2}, "Linear.forward: got an unexpected keyword argument 'scale'"),
        ("Linear", (1, 2), {}, "Linear.forward: too many positional arguments"),
        ("LSTM", (1, 2), {}, r"hx must be written at the call as a tuple \(h0, c0\)"),
        ("MultiheadAttention", (1, 2, 3), {"need_weights": object()}, "need_weights must be a constant"),
        ("MultiheadAttention", (1, 2, 3), {"is_causal": True}, "is_causal=True is a hint about attn_mask"),
        ("TransformerEncoderLayer", (1,), {"is_causal": True}, "hint about src_mask"),
        ("ConvTranspose2d", (1,), {"output_size": [4, 4]}, "give the constructor the matching output_padding"),
        ("ConvTranspose3d", (1,), {}, "'ConvTranspose3d' is not a catalog op implemented by a torch.nn module"),
    ],
)
def test_bind_leaf_call_refuses_what_it_cannot_record(
    op: str, args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ExportError, match=message):
        bind_leaf_call(op, args, kwargs)


def test_leaf_call_arguments_lays_out_the_call() -> None:
    node = trama.Node("root", "MultiheadAttention", outputs=["y", "attn_weights"])
    values = {"query": 1, "key": 2, "value": 3, "attn_mask": 4}
    assert leaf_call_arguments(node, values) == ((1, 2, 3), {"attn_mask": 4})
    constants = {"need_weights": False, "average_attn_weights": True}
    assert leaf_call_arguments(node, values, constants) == ((1, 2, 3), {"need_weights": False, "attn_mask": 4})
    lstm = trama.Node("root", "LSTM", outputs=["y", "h_n", "c_n"])
    assert leaf_call_arguments(lstm, {"x": 1, "h0": 2, "c0": 3}) == ((1, (2, 3)), {})
    with pytest.raises(ExecutionError, match="given together or not at all"):
        leaf_call_arguments(lstm, {"x": 1, "h0": 2})
    with pytest.raises(ExecutionError, match=r"has no input ports \['mask'\]"):
        leaf_call_arguments(lstm, {"x": 1, "mask": 2})


def test_call_site_constants_are_kept_on_the_built_module() -> None:
    original = nn.MultiheadAttention(4, 2).eval()
    back = _import(_export(original, ["query", "key", "value"], {"need_weights": False}))
    assert leaf_call_constants(back) == {"need_weights": False, "average_attn_weights": True}
    assert leaf_call_constants(nn.Linear(2, 2)) == {}


def test_bind_leaf_call_agrees_with_export_leaf_on_constants() -> None:
    """What bind_leaf_call finds is what export_leaf records: a real call's constants reach the slots."""
    module = nn.MultiheadAttention(4, 2).eval()
    _, constants = bind_leaf_call("MultiheadAttention", (1, 2, 3), {"average_attn_weights": False})
    model = _export(module, ["query", "key", "value"], constants)
    table = {slot: model.parameters[key].value for slot, key in model.nodes[0].parameters.items()}
    assert (table["need_weights"], table["average_attn_weights"]) == (True, False)


def test_exported_slots_are_the_catalogs_and_torchs() -> None:
    """Slot values are plain JSON values in the catalog's forms; state keeps torch's key names."""
    module = nn.TransformerEncoderLayer(8, 2, 16, activation="gelu", batch_first=True)
    model = _export(module, ["src"])
    node = model.nodes[0]
    table = {slot: model.parameters[key] for slot, key in node.parameters.items()}
    assert table["activation"].value == "gelu"
    assert table["d_model"].value == 8
    assert table["self_attn_out_proj_weight"].learnable
    assert {key.replace(".", "_") for key in module.state_dict()} <= set(table)
    pool = _export(nn.AdaptiveAvgPool2d(4), ["x"])
    assert [entry.value for entry in pool.parameters.values()] == [[4, 4]]


# --- Where torch's own forward would not compute the catalog's result, or would warn ------------


def _encoder_layer(*, norm_first: bool = False) -> nn.TransformerEncoderLayer:
    torch.manual_seed(0)
    return nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=norm_first).eval()


def _slow_path(layer: nn.Module, *args: Any, **kwargs: Any) -> Any:
    """What ``layer`` computes on torch's slow path, which adds float masks: training mode takes it,
    and with every dropout probability 0 training computes what eval does."""
    layer.train()
    try:
        return layer(*args, **kwargs)
    finally:
        layer.eval()


@pytest.mark.parametrize("norm_first", [False, True])
def test_an_imported_encoder_layer_adds_float_masks(norm_first: bool) -> None:
    """torch 2.13's eval fast path reads a float padding mask (and a float ``src_mask`` merged with
    it) as bool, which gives NaN rows; the imported layer adds them, as the catalog says."""
    original = _encoder_layer(norm_first=norm_first)
    back = _import(_export(original, ["src", "src_mask", "src_key_padding_mask"]))
    assert isinstance(back, nn.TransformerEncoderLayer)
    src, padding, attention = _randn(2, 3, 8), _randn(2, 3, seed=2), _randn(3, 3, seed=3)
    boolean_padding = torch.zeros(2, 3).masked_fill_(torch.tensor([[False, True, False], [False] * 3]), -torch.inf)
    with torch.no_grad():
        for kwargs in (
            {"src_key_padding_mask": padding},
            {"src_mask": attention, "src_key_padding_mask": padding},
            {"src_mask": attention, "src_key_padding_mask": boolean_padding},
        ):
            got = back(src, **kwargs)
            assert not got.isnan().any()
            torch.testing.assert_close(got, _slow_path(original, src, **kwargs), rtol=1e-6, atol=1e-6)


def test_an_imported_encoder_layer_keeps_torchs_fast_path_for_bool_masks() -> None:
    original = _encoder_layer()
    back = _import(_export(original, ["src", "src_key_padding_mask"]))
    src, padding = _randn(2, 3, 8), torch.tensor([[False, True, False], [False, False, True]])
    with torch.no_grad():
        assert torch.equal(back(src, src_key_padding_mask=padding), original(src, src_key_padding_mask=padding))


def _additive(mask: torch.Tensor) -> torch.Tensor:
    """A mask in its float form: a bool one is ``-inf`` where true, else 0 (what torch converts it to)."""
    return mask if mask.is_floating_point() else torch.zeros(mask.shape).masked_fill_(mask, -torch.inf)


def test_one_bool_and_one_float_mask_give_torchs_values_without_its_warning() -> None:
    """torch warns that mixing the kinds is deprecated (an error here: warnings fail tests); the
    imported modules convert the bool mask to its float form first, so the values are those of
    both masks given as floats."""
    x = _randn(2, 3, 8)
    torch.manual_seed(0)
    attention = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    back_attention = _import(_export(attention, ["query", "key", "value", "key_padding_mask", "attn_mask"]))
    layer = _encoder_layer()
    back_layer = _import(_export(layer, ["src", "src_mask", "src_key_padding_mask"]))
    bool_padding, float_padding = torch.tensor([[False, True, False], [False] * 3]), _randn(2, 3, seed=2)
    bool_attention, float_attention = _randn(3, 3, seed=3) > 1.0, _randn(3, 3, seed=4)
    with torch.no_grad():
        for padding, mask in ((bool_padding, float_attention), (float_padding, bool_attention)):
            want = attention(x, x, x, key_padding_mask=_additive(padding), attn_mask=_additive(mask))
            assert_same_values(want, back_attention(x, x, x, key_padding_mask=padding, attn_mask=mask))
            torch.testing.assert_close(
                back_layer(x, src_mask=mask, src_key_padding_mask=padding),
                _slow_path(layer, x, src_mask=_additive(mask), src_key_padding_mask=_additive(padding)),
                rtol=1e-6,
                atol=1e-6,
            )


@pytest.mark.parametrize("make", [nn.Softmax, nn.LogSoftmax], ids=["Softmax", "LogSoftmax"])
@pytest.mark.parametrize(("rank", "dim"), [(1, 0), (2, 1), (3, 0), (4, 1)])
def test_a_null_softmax_dim_is_the_catalogs_implicit_dimension_without_a_warning(
    make: Callable[..., nn.Module], rank: int, dim: int
) -> None:
    back = _import(_export(make(dim=None), ["x"]))
    assert back.dim is None  # the document's null, not a dimension chosen at import
    x = _randn(*(2, 3, 4, 5)[:rank])
    explicit = F.softmax if make is nn.Softmax else F.log_softmax
    assert torch.equal(back(x), explicit(x, dim=dim))
    assert leaf_op(back) == make.__name__  # and it exports as the catalog op again
    assert repr(back) == repr(make(dim=None))


@pytest.mark.parametrize("cls", [nn.GRU, nn.LSTM])
def test_a_one_layer_rnn_with_dropout_imports_without_torchs_advice(cls: type[nn.Module]) -> None:
    """A one-layer RNN never applies its dropout, and torch says so when it is built; the document
    is valid, so import builds it quietly (warnings fail tests here)."""
    torch.manual_seed(0)
    with pytest.warns(UserWarning, match="dropout option adds dropout"):
        original = cls(3, 4, dropout=0.5).eval()
    back = _import(_export(original, ["x"]))
    assert back.dropout == 0.5
    x = _randn(5, 3)
    assert_same_values(original(x), back(x))
