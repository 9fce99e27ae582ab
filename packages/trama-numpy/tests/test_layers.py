"""trama-numpy's layer kernels against torch 2.x (``torch.nn`` modules in eval mode, float32).

Every case builds a one-node document and imports it with :func:`trama.import_model`, which
validates it against the catalog and calls the op's factory exactly as a runtime does; the kernel
it returns is then called with numpy inputs and compared with the torch module whose weights the
document carries. Tolerance: 1e-5 relative and absolute, except where torch's float32 result is
itself ill-conditioned (GroupNorm over one-element groups, see ``test_group_norm``). The largest
error seen per op is printed at the end of the module (``pytest -s``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any, Literal, TypeVar

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from torch import nn

import trama
from trama import INPUT, Model, Node, Parameter, Ref, RegistryError, Tensor
from trama.extension import Kernel
from trama_numpy import layers

RTOL = ATOL = 1e-5

M = TypeVar("M", bound=nn.Module)

#: This module's factories, by op name: what ``trama.registry("numpy")`` must serve.
FACTORIES = {
    "Linear": layers.linear,
    "Bilinear": layers.bilinear,
    "Conv1d": layers.conv1d,
    "Conv2d": layers.conv2d,
    "ConvTranspose2d": layers.conv_transpose2d,
    "MaxPool2d": layers.max_pool2d,
    "AvgPool2d": layers.avg_pool2d,
    "AdaptiveAvgPool2d": layers.adaptive_avg_pool2d,
    "BatchNorm1d": layers.batch_norm1d,
    "BatchNorm2d": layers.batch_norm2d,
    "LayerNorm": layers.layer_norm,
    "GroupNorm": layers.group_norm,
    "RMSNorm": layers.rms_norm,
    "Embedding": layers.embedding,
    "Dropout": layers.dropout,
    "Identity": layers.identity,
    "Flatten": layers.flatten,
}

#: The largest absolute error seen per op (see ``report_errors``).
ERRORS: dict[str, float] = {}

#: The registry a runtime uses (discovered through trama-numpy's plugin), bound once.
_REGISTRY = trama.registry("numpy")


@pytest.fixture(scope="module", autouse=True)
def report_errors() -> Iterator[None]:
    """Print the largest absolute error seen per op once the module's tests have run."""
    yield
    width = max(map(len, ERRORS), default=0)
    print("\nlargest absolute error against torch, per op:")
    for op, error in sorted(ERRORS.items()):
        print(f"  {op:<{width}}  {error:.3g}")


# --- Building and running one node ----------------------------------------------------------


def as_value(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        value = value.detach().numpy()
    if isinstance(value, np.ndarray):
        return Tensor.from_array(np.ascontiguousarray(value))
    return value


def one_node(op: str, slots: Mapping[str, Any]) -> Model:
    spec = _REGISTRY[op]
    table = {}
    for name, value in slots.items():
        schema = spec.slot(name)
        assert schema is not None, f"{op} has no slot {name!r}"
        table[f"n.{name}"] = Parameter(as_value(value), learnable=schema.learnable is not False)
    node = Node(
        "n",
        op,
        inputs={port: Ref(INPUT, port) for port in spec.inputs},
        outputs=list(spec.outputs),
        parameters={name: f"n.{name}" for name in slots},
    )
    return Model(list(spec.inputs), [Ref("n", output) for output in spec.outputs], [node], table)


def build(op: str, slots: Mapping[str, Any]) -> Kernel:
    """The kernel of a one-node document, through validation and import."""
    kernel = trama.import_model(one_node(op, slots), registry=_REGISTRY)
    assert isinstance(kernel, Kernel)
    return kernel


def run(op: str, slots: Mapping[str, Any], **inputs: Any) -> Any:
    return build(op, slots)({port: np.asarray(value) for port, value in inputs.items()})["y"]


def state(module: nn.Module) -> dict[str, np.ndarray]:
    """A module's parameters and buffers as slots (torch's state_dict names are the slot names)."""
    return {name: value.detach().numpy().copy() for name, value in module.state_dict().items()}


def torch_eval(module: nn.Module, *inputs: np.ndarray) -> np.ndarray:
    module.eval()
    with torch.no_grad():
        result: torch.Tensor = module(*(torch.from_numpy(np.array(x)) for x in inputs))  # a writable copy
    return result.numpy()


def check(op: str, actual: Any, expected: np.ndarray, *, rtol: float = RTOL, atol: float = ATOL) -> None:
    """Same dtype, shape and values (within tolerance) as torch; records the error."""
    assert isinstance(actual, np.ndarray)
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)
    finite = np.isfinite(expected)
    error = float(np.max(np.abs(actual[finite] - expected[finite]), initial=0.0))
    ERRORS[op] = max(ERRORS.get(op, 0.0), error)


def data(*shape: int, seed: int = 0, dtype: Any = np.float32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@pytest.fixture(autouse=True)
def seeded() -> None:
    torch.manual_seed(0)


def test_the_numpy_registry_serves_these_factories() -> None:
    for op, factory in FACTORIES.items():
        assert _REGISTRY[op].factory.resolve() is factory


# --- Dense maps -----------------------------------------------------------------------------


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("lead", [(), (3,), (2, 3)], ids=str)
def test_linear(lead: tuple[int, ...], bias: bool) -> None:
    module = nn.Linear(5, 4, bias=bias)
    x = data(*lead, 5)
    y = run("Linear", {"in_features": 5, "out_features": 4, **state(module)}, x=x)
    check("Linear", y, torch_eval(module, x))


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("lead", [(), (4,), (2, 3)], ids=str)
def test_bilinear(lead: tuple[int, ...], bias: bool) -> None:
    module = nn.Bilinear(3, 5, 2, bias=bias)
    x1, x2 = data(*lead, 3, seed=1), data(*lead, 5, seed=2)
    slots = {"in1_features": 3, "in2_features": 5, "out_features": 2, **state(module)}
    y = build("Bilinear", slots)({"input1": x1, "input2": x2})["y"]
    check("Bilinear", y, torch_eval(module, x1, x2))


# --- Convolutions ---------------------------------------------------------------------------


def conv_slots(module: nn.Conv1d | nn.Conv2d | nn.ConvTranspose2d) -> dict[str, Any]:
    slots: dict[str, Any] = {
        "in_channels": module.in_channels,
        "out_channels": module.out_channels,
        "kernel_size": list(module.kernel_size),
        "stride": list(module.stride),
        "padding": module.padding if isinstance(module.padding, str) else list(module.padding),
        "dilation": list(module.dilation),
        "groups": module.groups,
        "padding_mode": module.padding_mode,
        **state(module),
    }
    if isinstance(module, nn.ConvTranspose2d):
        slots["output_padding"] = list(module.output_padding)
    return slots


CONV1D_CASES = [
    # in, out, kernel, keyword arguments, input length
    (3, 4, 3, {}, 9),
    (3, 4, 3, {"bias": False}, 9),
    (4, 6, 3, {"stride": 2, "padding": 1}, 10),
    (4, 6, 3, {"dilation": 2, "groups": 2}, 11),
    (4, 4, 5, {"groups": 4, "padding": 2}, 8),
    (2, 3, 4, {"padding": "same", "dilation": 3}, 12),
    (2, 3, 3, {"padding": "valid", "stride": 3}, 10),
    (2, 3, 3, {"padding": 2, "padding_mode": "reflect"}, 7),
    (2, 3, 3, {"padding": 2, "padding_mode": "replicate", "stride": 2}, 7),
    (2, 3, 3, {"padding": 3, "padding_mode": "circular"}, 5),
    (2, 3, 4, {"padding": "same", "padding_mode": "reflect"}, 6),
]


#: torch warns that it copies the input for an even kernel with padding "same"; that is its business.
SAME_PADDING_COPIES = pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning")


@SAME_PADDING_COPIES
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize(("cin", "cout", "k", "kwargs", "length"), CONV1D_CASES)
def test_conv1d(cin: int, cout: int, k: int, kwargs: dict[str, Any], length: int, batched: bool) -> None:
    module = nn.Conv1d(cin, cout, k, **kwargs)
    x = data(*((2,) if batched else ()), cin, length)
    check("Conv1d", run("Conv1d", conv_slots(module), x=x), torch_eval(module, x))


CONV2D_CASES = [
    # in, out, kernel, keyword arguments, input size
    (3, 4, (3, 3), {}, (7, 8)),
    (3, 4, (2, 3), {"bias": False, "stride": (2, 1), "padding": (1, 2)}, (7, 8)),
    (4, 6, (3, 3), {"dilation": (2, 1), "groups": 2, "stride": 2}, (9, 9)),
    (6, 6, (3, 3), {"groups": 6, "padding": 1}, (5, 6)),
    (6, 3, (1, 1), {"groups": 3}, (4, 4)),
    (2, 4, (4, 3), {"padding": "same", "dilation": (1, 2)}, (8, 7)),
    (2, 4, (2, 2), {"padding": "same"}, (5, 5)),
    (2, 4, (3, 3), {"padding": "valid", "stride": (1, 3)}, (6, 10)),
    (2, 2, (3, 3), {"padding": (1, 2), "padding_mode": "reflect"}, (5, 6)),
    (2, 2, (3, 2), {"padding": (2, 1), "padding_mode": "replicate", "groups": 2}, (4, 5)),
    (2, 2, (3, 3), {"padding": (3, 1), "padding_mode": "circular", "stride": 2}, (4, 5)),
]


@SAME_PADDING_COPIES
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize(("cin", "cout", "k", "kwargs", "size"), CONV2D_CASES)
def test_conv2d(
    cin: int, cout: int, k: tuple[int, int], kwargs: dict[str, Any], size: tuple[int, int], batched: bool
) -> None:
    module = nn.Conv2d(cin, cout, k, **kwargs)
    x = data(*((2,) if batched else ()), cin, *size)
    check("Conv2d", run("Conv2d", conv_slots(module), x=x), torch_eval(module, x))


CONV_TRANSPOSE_CASES = [
    # in, out, kernel, keyword arguments, input size
    (3, 4, (3, 3), {}, (4, 5)),
    (3, 4, (3, 2), {"stride": 2, "bias": False}, (4, 5)),
    (4, 6, (3, 3), {"stride": (2, 3), "padding": (1, 2), "output_padding": (1, 2)}, (3, 4)),
    (4, 6, (3, 3), {"groups": 2, "stride": 2, "output_padding": 1}, (3, 3)),
    (4, 4, (2, 3), {"groups": 4, "dilation": (2, 3), "padding": 1}, (4, 4)),
    (2, 3, (3, 3), {"dilation": 3, "output_padding": (2, 1), "stride": 1}, (3, 3)),
    (2, 3, (2, 2), {"padding": (2, 1), "stride": 3}, (4, 3)),  # padding > dilation·(k − 1): cropped
    (2, 2, (1, 1), {"stride": 2, "output_padding": 1}, (3, 3)),
]


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize(("cin", "cout", "k", "kwargs", "size"), CONV_TRANSPOSE_CASES)
def test_conv_transpose2d(
    cin: int, cout: int, k: tuple[int, int], kwargs: dict[str, Any], size: tuple[int, int], batched: bool
) -> None:
    module = nn.ConvTranspose2d(cin, cout, k, **kwargs)
    x = data(*((2,) if batched else ()), cin, *size)
    check("ConvTranspose2d", run("ConvTranspose2d", conv_slots(module), x=x), torch_eval(module, x))


# --- Pooling --------------------------------------------------------------------------------


POOL_CASES = [
    # kernel, stride, padding, ceil_mode, input size
    ((2, 2), None, (0, 0), False, (6, 7)),
    ((3, 3), (2, 2), (1, 1), False, (7, 8)),
    ((3, 2), (2, 1), (1, 1), True, (6, 5)),
    ((3, 3), (2, 2), (0, 0), True, (6, 8)),  # the last window hangs past the input
    ((2, 2), (2, 2), (1, 1), True, (5, 5)),  # a last window starting in the padding is dropped
    ((4, 3), (3, 2), (2, 1), True, (9, 6)),
    ((1, 1), (2, 3), (0, 0), False, (5, 7)),
]


def pool_slots(kernel: Any, stride: Any, padding: Any, ceil_mode: bool) -> dict[str, Any]:
    return {
        "kernel_size": list(kernel),
        "stride": None if stride is None else list(stride),
        "padding": list(padding),
        "ceil_mode": ceil_mode,
    }


@pytest.mark.parametrize("dilation", [(1, 1), (2, 1)], ids=str)
@pytest.mark.parametrize(("kernel", "stride", "padding", "ceil_mode", "size"), POOL_CASES)
def test_max_pool2d(kernel: Any, stride: Any, padding: Any, ceil_mode: bool, size: Any, dilation: Any) -> None:
    module = nn.MaxPool2d(kernel, stride, padding, dilation, ceil_mode=ceil_mode)
    slots = {**pool_slots(kernel, stride, padding, ceil_mode), "dilation": list(dilation)}
    for x in (data(2, 3, *size), data(3, *size)):
        check("MaxPool2d", run("MaxPool2d", slots, x=x), torch_eval(module, x))


def test_max_pool2d_propagates_nan_and_ignores_padding() -> None:
    x = -np.abs(data(1, 1, 4, 4)) - 1.0  # all negative: zero padding would win, −∞ must not
    x[0, 0, 1, 1] = np.nan
    module = nn.MaxPool2d(2, padding=1)
    y = run("MaxPool2d", pool_slots((2, 2), None, (1, 1), False), x=x)
    check("MaxPool2d", y, torch_eval(module, x))
    assert np.isnan(y[0, 0, 1, 1])
    assert np.isnan(y).sum() == 1


def test_max_pool2d_window_entirely_in_padding_is_minus_infinity() -> None:
    # kernel 2, dilation 3, padding 1: on a 2 × 2 input the taps −1 and 2 both miss it.
    module = nn.MaxPool2d(2, stride=2, padding=1, dilation=3)
    x = data(1, 1, 2, 2)
    slots = {**pool_slots((2, 2), (2, 2), (1, 1), False), "dilation": [3, 3]}
    check("MaxPool2d", run("MaxPool2d", slots, x=x), torch_eval(module, x))


def test_max_pool2d_of_integers() -> None:
    x = np.random.default_rng(0).integers(-100, 100, (2, 3, 5, 5))
    module = nn.MaxPool2d(3, stride=2, padding=1)
    y = run("MaxPool2d", pool_slots((3, 3), (2, 2), (1, 1), False), x=x)
    np.testing.assert_array_equal(y, torch_eval(module, x))
    assert y.dtype == x.dtype


@pytest.mark.parametrize("divisor_override", [None, 3])
@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize(("kernel", "stride", "padding", "ceil_mode", "size"), POOL_CASES)
def test_avg_pool2d(
    kernel: Any, stride: Any, padding: Any, ceil_mode: bool, size: Any, count_include_pad: bool, divisor_override: Any
) -> None:
    module = nn.AvgPool2d(kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    slots = {
        **pool_slots(kernel, stride, padding, ceil_mode),
        "count_include_pad": count_include_pad,
        "divisor_override": divisor_override,
    }
    for x in (data(2, 3, *size), data(3, *size)):
        check("AvgPool2d", run("AvgPool2d", slots, x=x), torch_eval(module, x))


@pytest.mark.parametrize(
    ("size", "output_size"),
    [
        ((6, 8), [3, 4]),  # divisible: disjoint equal windows
        ((5, 7), [3, 4]),  # overlapping windows of different sizes
        ((3, 2), [5, 7]),  # more outputs than inputs
        ((7, 5), [1, 1]),  # global average
        ((5, 7), [None, 3]),
        ((5, 7), [2, None]),
    ],
    ids=str,
)
def test_adaptive_avg_pool2d(size: tuple[int, int], output_size: list[int | None]) -> None:
    module = nn.AdaptiveAvgPool2d(tuple(output_size))
    for x in (data(2, 3, *size), data(3, *size)):
        check("AdaptiveAvgPool2d", run("AdaptiveAvgPool2d", {"output_size": output_size}, x=x), torch_eval(module, x))


# --- Normalization --------------------------------------------------------------------------


def randomized(module: M) -> M:
    """Non-trivial weights and running statistics (torch starts them at 1, 0, 0 and 1)."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, value in module.state_dict().items():
            if value.is_floating_point():
                noise = torch.randn(value.shape, generator=generator)
                value.copy_(noise.abs() + 0.5 if name in ("running_var", "weight") else noise)
    return module


def batch_norm_slots(module: nn.BatchNorm1d | nn.BatchNorm2d) -> dict[str, Any]:
    return {
        "num_features": module.num_features,
        "eps": module.eps,
        "momentum": module.momentum,
        "affine": module.affine,
        "track_running_stats": module.track_running_stats,
        **state(module),
    }


BATCH_NORM_CONFIGS = [
    {},
    {"affine": False},
    {"track_running_stats": False},  # eval mode normalizes by the batch's statistics
    {"affine": False, "track_running_stats": False, "eps": 1e-3},
    {"momentum": None},
]


@pytest.mark.parametrize("shape", [(5, 4), (3, 4, 6)], ids=str)
@pytest.mark.parametrize("kwargs", BATCH_NORM_CONFIGS, ids=str)
def test_batch_norm1d(kwargs: dict[str, Any], shape: tuple[int, ...]) -> None:
    module = randomized(nn.BatchNorm1d(4, **kwargs))
    x = data(*shape) * 3 + 1
    check("BatchNorm1d", run("BatchNorm1d", batch_norm_slots(module), x=x), torch_eval(module, x))


@pytest.mark.parametrize("kwargs", BATCH_NORM_CONFIGS, ids=str)
def test_batch_norm2d(kwargs: dict[str, Any]) -> None:
    module = randomized(nn.BatchNorm2d(3, **kwargs))
    x = data(2, 3, 4, 5) * 3 + 1
    check("BatchNorm2d", run("BatchNorm2d", batch_norm_slots(module), x=x), torch_eval(module, x))


def test_batch_norm_uses_running_statistics_that_outlive_their_flag() -> None:
    # torch's eval-mode forward uses whichever buffers exist, whatever track_running_stats says.
    module = randomized(nn.BatchNorm2d(3))
    setattr(module, "track_running_stats", False)  # noqa: B010 (torch types module attributes as tensors)
    x = data(2, 3, 4, 5)
    check("BatchNorm2d", run("BatchNorm2d", batch_norm_slots(module), x=x), torch_eval(module, x))


@pytest.mark.parametrize(
    ("normalized_shape", "kwargs"),
    [
        ([6], {}),
        ([6], {"bias": False}),
        ([5, 6], {}),
        ([4, 5, 6], {"elementwise_affine": False}),
        ([5, 6], {"elementwise_affine": False, "eps": 1e-2}),
    ],
    ids=str,
)
def test_layer_norm(normalized_shape: list[int], kwargs: dict[str, Any]) -> None:
    module = randomized(nn.LayerNorm(normalized_shape, **kwargs))
    slots = {
        "normalized_shape": normalized_shape,
        "eps": module.eps,
        "elementwise_affine": module.elementwise_affine,
        **state(module),
    }
    for x in (data(2, 3, 4, 5, 6) * 2 + 3, data(*normalized_shape)):
        check("LayerNorm", run("LayerNorm", slots, x=x), torch_eval(module, x))


@pytest.mark.parametrize("shape", [(3, 6), (3, 6, 5), (2, 6, 4, 3)], ids=str)
@pytest.mark.parametrize(("groups", "affine"), [(1, True), (2, True), (3, False), (6, True)])
def test_group_norm(groups: int, affine: bool, shape: tuple[int, ...]) -> None:
    module = randomized(nn.GroupNorm(groups, 6, eps=1e-4, affine=affine))
    slots = {"num_groups": groups, "num_channels": 6, "eps": 1e-4, "affine": affine, **state(module)}
    x = data(*shape) * 2 - 1
    y = run("GroupNorm", slots, x=x)
    # Ill-conditioned: groups of one element ([3, 6] in 6 groups) have variance 0, which torch's
    # float32 kernel computes as E[x²] − E[x]², off by up to 2e-5 after the division by √eps;
    # this kernel's two-pass variance is exact there. So torch in float64 is the reference at
    # the usual tolerance, and torch in float32 is held to 1e-4 for those groups.
    np.testing.assert_allclose(y, torch_eval(module.double(), x.astype(np.float64)), rtol=RTOL, atol=ATOL)
    one_element = math.prod(shape[1:]) == groups
    check("GroupNorm", y, torch_eval(module.float(), x), atol=1e-4 if one_element else ATOL)


@pytest.mark.parametrize(
    ("normalized_shape", "eps", "affine"),
    [([6], None, True), ([6], 1e-6, True), ([5, 6], None, False), ([5, 6], 0.5, True)],
    ids=str,
)
def test_rms_norm(normalized_shape: list[int], eps: float | None, affine: bool) -> None:
    module = randomized(nn.RMSNorm(normalized_shape, eps=eps, elementwise_affine=affine))
    slots = {"normalized_shape": normalized_shape, "eps": eps, "elementwise_affine": affine, **state(module)}
    for x in (data(3, 4, 5, 6), data(*normalized_shape)):
        check("RMSNorm", run("RMSNorm", slots, x=x), torch_eval(module, x))


def test_rms_norm_default_eps_is_the_dtypes_epsilon() -> None:
    # Tiny inputs, where eps dominates the mean square: float32's 2⁻²³, not 1e-5 or 0.
    x = data(4, 6) * 1e-4
    module = nn.RMSNorm([6], elementwise_affine=False)
    y = run("RMSNorm", {"normalized_shape": [6], "elementwise_affine": False}, x=x)
    check("RMSNorm", y, torch_eval(module, x))
    expected = x / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=-1, keepdims=True) + 2.0**-23)
    np.testing.assert_allclose(y, expected, rtol=1e-5)


# --- Embedding, dropout and shape helpers ---------------------------------------------------


def embedding_slots(module: nn.Embedding) -> dict[str, Any]:
    return {
        "num_embeddings": module.num_embeddings,
        "embedding_dim": module.embedding_dim,
        "padding_idx": module.padding_idx,
        "max_norm": module.max_norm,
        "norm_type": module.norm_type,
        **state(module),
    }


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
@pytest.mark.parametrize("shape", [(), (5,), (2, 3)], ids=str)
@pytest.mark.parametrize("padding_idx", [None, 0, 6])
def test_embedding(padding_idx: int | None, shape: tuple[int, ...], dtype: Any) -> None:
    module = nn.Embedding(7, 4, padding_idx=padding_idx)
    with torch.no_grad():  # a padding row with values: the forward pass still returns them
        module.weight.copy_(torch.randn(7, 4))
    x = np.random.default_rng(0).integers(0, 7, shape).astype(dtype)
    x.reshape(-1)[:1] = 6  # the padding row, when there is one, is looked up
    check("Embedding", run("Embedding", embedding_slots(module), x=x), torch_eval(module, x))


@pytest.mark.parametrize(("max_norm", "norm_type"), [(1.0, 2.0), (2.5, 1.0), (0.5, 3.0)])
def test_embedding_max_norm(max_norm: float, norm_type: float) -> None:
    module = nn.Embedding(6, 5, max_norm=max_norm, norm_type=norm_type)
    slots = embedding_slots(module)  # before torch renormalizes its weight in place
    x = np.array([[0, 1, 2, 2], [5, 4, 3, 0]])
    y = run("Embedding", slots, x=x)
    check("Embedding", y, torch_eval(module, x))
    norms = np.linalg.norm(y, ord=norm_type, axis=-1)
    assert np.all(norms <= max_norm * (1 + 1e-6))


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0])
def test_dropout_is_the_identity_in_eval_mode(p: float) -> None:
    x = data(3, 4)
    y = run("Dropout", {"p": p}, x=x)
    check("Dropout", y, torch_eval(nn.Dropout(p), x))


def test_identity() -> None:
    x = data(2, 3)
    check("Identity", run("Identity", {}, x=x), torch_eval(nn.Identity(), x))
    check("Identity", run("Identity", {}, x=x.astype(np.int64)), x.astype(np.int64))


@pytest.mark.parametrize(
    ("start_dim", "end_dim", "shape"),
    [
        (1, -1, (2, 3, 4, 5)),
        (0, -1, (2, 3, 4)),
        (1, 2, (2, 3, 4, 5)),
        (-3, -2, (2, 3, 4, 5)),
        (2, 2, (2, 3, 4)),
        (0, 0, (7,)),
        (1, -1, (4, 0, 3)),
        (0, -1, ()),
    ],
    ids=str,
)
def test_flatten(start_dim: int, end_dim: int, shape: tuple[int, ...]) -> None:
    x = data(*shape)
    y = run("Flatten", {"start_dim": start_dim, "end_dim": end_dim}, x=x)
    check("Flatten", y, torch_eval(nn.Flatten(start_dim, end_dim), x))


def test_flatten_defaults_keep_the_batch_dimension() -> None:
    x = data(2, 3, 4)
    check("Flatten", run("Flatten", {}, x=x), torch_eval(nn.Flatten(), x))


# --- Dtypes ---------------------------------------------------------------------------------


DTYPE_CASES = [
    ("Linear", lambda: nn.Linear(4, 3), {"in_features": 4, "out_features": 3}, (2, 4)),
    ("Conv2d", lambda: nn.Conv2d(2, 4, 3, padding=1, groups=2), None, (2, 2, 5, 5)),
    ("ConvTranspose2d", lambda: nn.ConvTranspose2d(2, 4, 3, stride=2, groups=2), None, (2, 2, 3, 3)),
    ("BatchNorm2d", lambda: randomized(nn.BatchNorm2d(2)), None, (2, 2, 3, 3)),
    ("LayerNorm", lambda: randomized(nn.LayerNorm([3])), {"normalized_shape": [3]}, (2, 3)),
    ("AvgPool2d", lambda: nn.AvgPool2d(2, padding=1), {"kernel_size": [2, 2], "padding": [1, 1]}, (1, 2, 5, 5)),
]


@pytest.mark.parametrize(("op", "make", "hyper", "shape"), DTYPE_CASES, ids=[case[0] for case in DTYPE_CASES])
def test_float64_inputs_are_computed_in_float64(op: str, make: Any, hyper: Any, shape: tuple[int, ...]) -> None:
    module = make()
    if hyper is None:
        hyper = conv_slots(module) if op.startswith("Conv") else batch_norm_slots(module)
    slots = {**hyper, **state(module)}  # float32 weights, as exported
    x = data(*shape, dtype=np.float64)
    y = run(op, slots, x=x)
    check(op, y, torch_eval(module.double(), x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("op", ["Linear", "Conv2d", "LayerNorm", "AvgPool2d"])
def test_integer_inputs_are_refused(op: str) -> None:
    slots = {
        "Linear": {"in_features": 2, "out_features": 1, "weight": np.ones((1, 2), np.float32)},
        "Conv2d": conv_slots(nn.Conv2d(1, 1, 1)),
        "LayerNorm": {"normalized_shape": [2], "elementwise_affine": False},
        "AvgPool2d": {"kernel_size": [1, 1]},
    }[op]
    with pytest.raises(TypeError, match="floating-point"):
        run(op, slots, x=np.ones((1, 1, 2, 2), np.int64))


# --- What factories and kernels refuse ------------------------------------------------------


def linear_slots(**changes: Any) -> dict[str, Any]:
    return {"in_features": 2, "out_features": 3, "weight": np.zeros((3, 2), np.float32), **changes}


def conv2d_slots(**changes: Any) -> dict[str, Any]:
    return {**conv_slots(nn.Conv2d(4, 4, 3, groups=2)), **changes}


def norm_slots(**changes: Any) -> dict[str, Any]:
    return {**batch_norm_slots(nn.BatchNorm2d(3)), **changes}


BAD_NODES = [
    ("Linear", linear_slots(in_features=3), "weight has shape \\[3, 2\\]"),
    ("Linear", linear_slots(bias=np.zeros(2, np.float32)), "bias has shape"),
    ("Bilinear", {"in1_features": 2, "in2_features": 3, "out_features": 1, "weight": np.zeros((1, 3, 2))}, "weight"),
    ("Conv2d", conv2d_slots(groups=3), "groups = 3 must divide"),
    ("Conv2d", conv2d_slots(kernel_size=[3]), "kernel_size must be a list of 2 ints"),
    ("Conv2d", conv2d_slots(stride=[0, 1]), "stride must be a list of 2 ints ≥ 1"),
    ("Conv2d", conv2d_slots(padding="same", stride=[2, 1]), 'padding "same" needs every stride to be 1'),
    ("Conv2d", conv2d_slots(padding="full"), "padding must be"),
    ("Conv2d", conv2d_slots(padding_mode="mirror"), "padding_mode must be one of"),
    ("Conv2d", conv2d_slots(weight=np.zeros((4, 4, 3, 3), np.float32)), "weight has shape \\[4, 4, 3, 3\\]"),
    ("ConvTranspose2d", {**conv_slots(nn.ConvTranspose2d(2, 2, 3, stride=2)), "output_padding": [2, 0]}, "output_pad"),
    ("ConvTranspose2d", {**conv_slots(nn.ConvTranspose2d(2, 2, 3)), "padding_mode": "reflect"}, "padding_mode"),
    ("MaxPool2d", {"kernel_size": [3, 3], "padding": [2, 0]}, "padding\\[0\\] = 2 must be at most half"),
    ("AvgPool2d", {"kernel_size": [2, 2], "divisor_override": 0}, "divisor_override must be null or an int ≥ 1"),
    ("AdaptiveAvgPool2d", {"output_size": [3]}, "output_size must be a list of 2 entries"),
    ("BatchNorm2d", norm_slots(affine=False), "affine is false, yet the node has weight"),
    ("BatchNorm2d", {k: v for k, v in norm_slots().items() if k != "bias"}, "affine is true, yet the node has no bias"),
    (
        "BatchNorm2d",
        {k: v for k, v in norm_slots().items() if not k.startswith("running")},
        "track_running_stats is true, yet the node has no running_mean",
    ),
    ("BatchNorm2d", {k: v for k, v in norm_slots().items() if k != "running_var"}, "both present or both absent"),
    ("BatchNorm2d", norm_slots(running_mean=np.zeros(4, np.float32)), "running_mean has shape \\[4\\]"),
    ("LayerNorm", {"normalized_shape": [3], "weight": np.ones(4, np.float32)}, "weight has shape \\[4\\]"),
    ("LayerNorm", {"normalized_shape": [3]}, "elementwise_affine is true, yet the node has no weight"),
    ("LayerNorm", {"normalized_shape": []}, "normalized_shape must be a non-empty list"),
    ("GroupNorm", {"num_groups": 4, "num_channels": 6, "affine": False}, "num_groups = 4 must divide"),
    ("RMSNorm", {"normalized_shape": [3], "elementwise_affine": False, "weight": np.ones(3)}, "weight is present"),
    ("Embedding", {"num_embeddings": 3, "embedding_dim": 2, "weight": np.zeros((3, 2)), "padding_idx": 3}, "below"),
    ("Embedding", {"num_embeddings": 3, "embedding_dim": 2, "weight": np.zeros((2, 3))}, "weight has shape"),
    ("Dropout", {"p": 1.5}, "p must lie in \\[0, 1\\]"),
    ("Flatten", {"start_dim": 2, "end_dim": 1}, "start_dim = 2 comes after end_dim = 1"),
]


@pytest.mark.parametrize(
    ("op", "slots", "message"), BAD_NODES, ids=[f"{op}-{i}" for i, (op, *_) in enumerate(BAD_NODES)]
)
def test_inconsistent_nodes_are_refused_when_the_kernel_is_built(op: str, slots: dict[str, Any], message: str) -> None:
    with pytest.raises(RegistryError, match=message) as caught:
        build(op, slots)
    assert caught.value.node_id == "n"
    assert str(caught.value).startswith(f"node 'n': {op}: ")


BAD_INPUTS = [
    ("Linear", linear_slots(), np.zeros((4, 3), np.float32), "last dimension should be 2"),
    ("Conv2d", conv2d_slots(), np.zeros((1, 3, 5, 5), np.float32), "x has 3 channels"),
    ("Conv2d", conv2d_slots(), np.zeros((4, 5), np.float32), "3 or 4 dimensions"),
    ("Conv2d", conv2d_slots(), np.zeros((1, 4, 2, 5), np.float32), "smaller than the kernel"),
    (
        "Conv1d",
        {**conv_slots(nn.Conv1d(1, 1, 3, padding=3, padding_mode="reflect"))},
        np.zeros((1, 1, 3), np.float32),
        "reflect",
    ),
    ("MaxPool2d", {"kernel_size": [3, 3]}, np.zeros((1, 1, 2, 5), np.float32), "too small"),
    ("BatchNorm2d", norm_slots(), np.zeros((2, 3, 4), np.float32), "4 dimensions"),
    ("LayerNorm", {"normalized_shape": [3], "elementwise_affine": False}, np.zeros((3, 2), np.float32), "does not end"),
    (
        "GroupNorm",
        {"num_groups": 1, "num_channels": 2, "affine": False},
        np.zeros((2, 3), np.float32),
        "\\[N, 2, \\*\\]",
    ),
    (
        "Embedding",
        {"num_embeddings": 3, "embedding_dim": 2, "weight": np.zeros((3, 2))},
        np.array([0, 3]),
        "\\[0, 3\\)",
    ),
    ("Embedding", {"num_embeddings": 3, "embedding_dim": 2, "weight": np.zeros((3, 2))}, np.array([-1]), "\\[0, 3\\)"),
    ("Flatten", {"start_dim": 3}, np.zeros((2, 3)), "out of range"),
]


@pytest.mark.parametrize(
    ("op", "slots", "x", "message"), BAD_INPUTS, ids=[f"{op}-{i}" for i, (op, *_) in enumerate(BAD_INPUTS)]
)
def test_inputs_that_do_not_fit_are_refused_naming_the_node(op: str, slots: Any, x: np.ndarray, message: str) -> None:
    kernel = build(op, slots)
    with pytest.raises(ValueError, match=message) as caught:
        kernel({"x": x})
    assert f"{op} (node 'n')" in str(caught.value)


def test_a_kernel_is_reusable_and_never_writes_into_its_inputs_or_weights() -> None:
    module = nn.Conv2d(2, 2, 3, padding=1)
    kernel = build("Conv2d", conv_slots(module))
    x = data(1, 2, 4, 4)
    x.setflags(write=False)
    first, second = kernel({"x": x})["y"], kernel({"x": x})["y"]
    np.testing.assert_array_equal(first, second)
    check("Conv2d", first, torch_eval(module, x))
    assert math.isfinite(float(first.sum()))


# --- Random geometries ----------------------------------------------------------------------

#: Reproducible and quick: a fixed sequence of examples, no example database.
GEOMETRIES = settings(
    max_examples=75, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)


@GEOMETRIES
@given(
    groups=st.integers(1, 3),
    per_group=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    kernel=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    dilation=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    padding=st.one_of(st.tuples(st.integers(0, 3), st.integers(0, 3)), st.sampled_from(["same", "valid"])),
    mode=st.sampled_from(["zeros", "reflect", "replicate", "circular"]),
    size=st.tuples(st.integers(1, 9), st.integers(1, 9)),
    bias=st.booleans(),
)
@SAME_PADDING_COPIES
def test_conv2d_random_geometry(
    groups: int,
    per_group: tuple[int, int],
    kernel: tuple[int, int],
    stride: tuple[int, int],
    dilation: tuple[int, int],
    padding: Any,
    mode: Literal["zeros", "reflect", "replicate", "circular"],
    size: tuple[int, int],
    bias: bool,
) -> None:
    if padding == "same":
        stride = (1, 1)  # torch allows "same" only there
    ends: list[tuple[int, int]] = []  # the padding at each end of each dimension
    for d in range(2):
        total = dilation[d] * (kernel[d] - 1)
        ends.append({"same": (total // 2, total - total // 2), "valid": (0, 0)}.get(padding, (padding[d],) * 2))
        assume(size[d] + sum(ends[d]) >= total + 1)  # room for one window
        if mode == "reflect":  # torch's limits on reflected and wrapped padding
            assume(max(ends[d]) < size[d])
        elif mode == "circular":
            assume(max(ends[d]) <= size[d])
    module = nn.Conv2d(
        groups * per_group[0],
        groups * per_group[1],
        kernel,
        stride=stride,
        padding=padding,
        dilation=dilation,
        groups=groups,
        bias=bias,
        padding_mode=mode,
    )
    x = data(2, groups * per_group[0], *size)
    check("Conv2d", run("Conv2d", conv_slots(module), x=x), torch_eval(module, x))


@GEOMETRIES
@given(
    groups=st.integers(1, 3),
    per_group=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    kernel=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    dilation=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    padding=st.tuples(st.integers(0, 4), st.integers(0, 4)),
    extra=st.tuples(st.integers(0, 2), st.integers(0, 2)),
    size=st.tuples(st.integers(1, 5), st.integers(1, 5)),
    bias=st.booleans(),
)
def test_conv_transpose2d_random_geometry(
    groups: int,
    per_group: tuple[int, int],
    kernel: tuple[int, int],
    stride: tuple[int, int],
    dilation: tuple[int, int],
    padding: tuple[int, int],
    extra: tuple[int, int],
    size: tuple[int, int],
    bias: bool,
) -> None:
    assume(all(e < max(s, d) for e, s, d in zip(extra, stride, dilation, strict=True)))
    out = [
        (n - 1) * s - 2 * p + d * (k - 1) + e + 1
        for n, s, p, d, k, e in zip(size, stride, padding, dilation, kernel, extra, strict=True)
    ]
    assume(min(out) >= 1)
    module = nn.ConvTranspose2d(
        groups * per_group[0],
        groups * per_group[1],
        kernel,
        stride=stride,
        padding=padding,
        output_padding=extra,
        dilation=dilation,
        groups=groups,
        bias=bias,
    )
    x = data(2, groups * per_group[0], *size)
    check("ConvTranspose2d", run("ConvTranspose2d", conv_slots(module), x=x), torch_eval(module, x))


@GEOMETRIES
@given(
    kernel=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    stride=st.one_of(st.none(), st.tuples(st.integers(1, 3), st.integers(1, 3))),
    halves=st.tuples(st.integers(0, 2), st.integers(0, 2)),
    dilation=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    ceil_mode=st.booleans(),
    count_include_pad=st.booleans(),
    divisor_override=st.one_of(st.none(), st.integers(1, 5)),
    size=st.tuples(st.integers(1, 9), st.integers(1, 9)),
)
def test_pools_random_geometry(
    kernel: tuple[int, int],
    stride: tuple[int, int] | None,
    halves: tuple[int, int],
    dilation: tuple[int, int],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: int | None,
    size: tuple[int, int],
) -> None:
    padding = (min(halves[0], kernel[0] // 2), min(halves[1], kernel[1] // 2))
    x = data(2, 3, *size)
    steps = stride or kernel
    for name, spans in (("MaxPool2d", dilation), ("AvgPool2d", (1, 1))):
        room = [s + 2 * p - (d * (k - 1) + 1) for s, p, d, k in zip(size, padding, spans, kernel, strict=True)]
        if min(room) < 0:
            continue
        slots = pool_slots(kernel, stride, padding, ceil_mode)
        if name == "MaxPool2d":
            module: nn.Module = nn.MaxPool2d(kernel, steps, padding, dilation, ceil_mode=ceil_mode)
            slots["dilation"] = list(dilation)
        else:
            module = nn.AvgPool2d(kernel, steps, padding, ceil_mode, count_include_pad, divisor_override)
            slots.update(count_include_pad=count_include_pad, divisor_override=divisor_override)
        check(name, run(name, slots, x=x), torch_eval(module, x))
