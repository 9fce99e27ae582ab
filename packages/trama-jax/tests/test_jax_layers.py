"""trama-jax's layer kernels against torch 2.x (``torch.nn`` modules in eval mode) and trama-numpy.

Each case makes a torch module with non-default arguments, reads its node's slots from the module
(``kernel_harness.torch_slots``), builds the kernel with the registered factory, calls ``apply``
under ``jax.jit`` with the tensors as arguments and compares the result with torch's and with
trama-numpy's reference kernel: float32 within 1e-5 relative and absolute. Representative cases
(here a dense map and a convolution padded by value) also run eagerly, op by op; only a few,
because every primitive is then compiled on its own, several times the cost of one ``jit`` of the
whole kernel. ``jax.grad`` with respect to the tensors is compared with torch's autograd, and
float16 and bfloat16 inputs are held to torch within one unit in the last place of their dtype.
The largest errors seen per op are printed at the end (``pytest -s``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from kernel_harness import (
    ATOL,
    RTOL,
    SAME_PADDING_COPIES,
    Built,
    Errors,
    assert_gradients_match,
    build,
    kernel_factories,
    torch_slots,
)
from torch import nn

import trama
from trama_jax import layers
from trama_jax.kernel import JaxKernel

ERRORS = Errors()

M = TypeVar("M", bound=nn.Module)

#: The ops this module implements: the factories the jax registry serves for them live in it.
LAYER_OPS = (
    *("Linear", "Bilinear", "Conv1d", "Conv2d", "ConvTranspose2d", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d"),
    *("BatchNorm1d", "BatchNorm2d", "LayerNorm", "GroupNorm", "RMSNorm", "Embedding", "Dropout", "Identity"),
    "Flatten",
)

report_errors = ERRORS.fixture()


@pytest.fixture(autouse=True)
def seeded() -> None:
    torch.manual_seed(11)


def normal(*shape: int, seed: int = 1, scale: float = 1.0, shift: float = 0.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale + shift).astype(np.float32)


def in_torch(module: nn.Module, *inputs: np.ndarray) -> np.ndarray:
    """``module``'s eval-mode output, as numpy."""
    module.eval()
    with torch.no_grad():
        result: torch.Tensor = module(*(torch.from_numpy(np.array(x)) for x in inputs))
    return result.numpy()


def agree(built: Built, inputs: Mapping[str, Any], expected: np.ndarray, *, eager: bool = False) -> None:
    """The kernel's ``y`` under ``jax.jit`` (and, with ``eager``, op by op) matches torch's and
    trama-numpy's."""
    reference = built.reference(inputs)["y"]
    for jit in (True, False) if eager else (True,):
        actual = built.apply(inputs, jit=jit)["y"]
        ERRORS.check(built.node.op, actual, expected)
        np.testing.assert_allclose(actual, reference, rtol=RTOL, atol=ATOL)


def compare(op: str, module: nn.Module, *inputs: np.ndarray, eager: bool = False, **settings: Any) -> Built:
    """The kernel of ``module``'s node agrees with it on each of ``inputs`` (one-input ops; the
    first input also eagerly, with ``eager``); ``settings`` override slots read from the module."""
    built = build(op, torch_slots(op, module, **settings))
    for index, x in enumerate(inputs):
        agree(built, {"x": x}, in_torch(module, x), eager=eager and index == 0)
    return built


def test_the_registry_serves_these_factories() -> None:
    served = kernel_factories()
    registry = trama.registry("jax")
    for op in LAYER_OPS:
        assert served[op].__module__ == layers.__name__, op
        assert registry[op].factory is not None


def test_kernels_take_only_the_tensors_they_read() -> None:
    assert build("Identity", {}).kernel.tensor_slots == ()
    assert compare("Linear", nn.Linear(3, 2, bias=False)).kernel.tensor_slots == ("weight",)
    norm = compare("BatchNorm1d", nn.BatchNorm1d(3))  # num_batches_tracked: training only, never passed
    assert set(norm.kernel.tensor_slots) == {"weight", "bias", "running_mean", "running_var"}
    assert not norm.kernel.stateful
    assert isinstance(norm.kernel, JaxKernel)


# --- Dense maps -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("features", "bias", "lead"),
    [((6, 2), True, ()), ((6, 2), False, (4,)), ((3, 7), True, (2, 1, 3))],
    ids=str,
)
def test_linear(features: tuple[int, int], bias: bool, lead: tuple[int, ...]) -> None:
    module = nn.Linear(*features, bias=bias)
    compare("Linear", module, normal(*lead, features[0]), eager=lead == (4,))


@pytest.mark.parametrize(
    ("features", "bias", "lead"), [((4, 2, 3), True, (5,)), ((2, 3, 1), False, ()), ((3, 3, 2), True, (2, 2))], ids=str
)
def test_bilinear(features: tuple[int, int, int], bias: bool, lead: tuple[int, ...]) -> None:
    module = nn.Bilinear(*features, bias=bias)
    built = build("Bilinear", torch_slots("Bilinear", module))
    x1, x2 = normal(*lead, features[0], seed=2), normal(*lead, features[1], seed=3)
    agree(built, {"input1": x1, "input2": x2}, in_torch(module, x1, x2))


# --- Convolutions ---------------------------------------------------------------------------


def channels(cin: int, cout: int, kernel: Any, **arguments: Any) -> dict[str, Any]:
    """A convolution's constructor arguments (the tables below stay readable)."""
    return {"in_channels": cin, "out_channels": cout, "kernel_size": kernel, **arguments}


CONV1D = [
    # constructor arguments, input length
    (channels(2, 5, 4, stride=3), 13),
    (channels(6, 3, 2, groups=3, dilation=3, bias=False), 9),
    (channels(3, 3, 5, padding="same"), 7),
    (channels(2, 4, 2, padding="same", dilation=2), 6),
    (channels(1, 2, 3, padding="valid", stride=2), 8),
    (channels(3, 2, 3, padding=1, padding_mode="reflect", stride=2), 6),
    (channels(2, 2, 2, padding=4, padding_mode="circular"), 4),
    (channels(2, 3, 3, padding=3, padding_mode="replicate"), 5),
]


@SAME_PADDING_COPIES
@pytest.mark.parametrize(("arguments", "length"), CONV1D, ids=str)
def test_conv1d(arguments: dict[str, Any], length: int) -> None:
    module = nn.Conv1d(**arguments)
    cin = arguments["in_channels"]
    unbatched = [normal(cin, length, seed=4)] if arguments.get("padding_mode") else []
    compare("Conv1d", module, normal(3, cin, length), *unbatched)


CONV2D = [
    # constructor arguments, input size
    (channels(2, 3, (2, 4), stride=(1, 2), padding=(2, 0)), (6, 9)),
    (channels(4, 8, 3, groups=4, bias=False), (5, 5)),
    (channels(6, 4, (3, 2), groups=2, dilation=(1, 3), stride=2), (8, 10)),
    (channels(3, 2, (3, 4), padding="same", dilation=2), (7, 9)),
    (channels(3, 2, 3, padding="valid", stride=(2, 3)), (7, 7)),
    (channels(2, 3, 3, padding=(2, 1), padding_mode="reflect"), (4, 6)),
    (channels(3, 3, 2, padding=2, padding_mode="replicate", groups=3), (3, 4)),
    (channels(2, 2, (2, 3), padding=(1, 4), padding_mode="circular"), (5, 4)),
]


@SAME_PADDING_COPIES
@pytest.mark.parametrize(("arguments", "size"), CONV2D, ids=str)
def test_conv2d(arguments: dict[str, Any], size: tuple[int, int]) -> None:
    module = nn.Conv2d(**arguments)
    cin = arguments["in_channels"]
    by_value = arguments.get("padding_mode", "zeros") != "zeros"  # padded first, then convolved
    unbatched = [normal(cin, *size, seed=4)] if by_value else []
    compare("Conv2d", module, normal(2, cin, *size), *unbatched, eager=arguments.get("padding_mode") == "reflect")


CONV_TRANSPOSE2D = [
    # constructor arguments, input size
    (channels(2, 3, (2, 3), stride=(3, 2)), (3, 4)),
    (channels(4, 2, 3, stride=2, padding=1, output_padding=1), (4, 3)),
    (channels(6, 9, 2, groups=3, dilation=(2, 1), bias=False), (3, 3)),
    (channels(2, 4, 3, groups=2, stride=(1, 3), output_padding=(0, 2)), (4, 2)),
    (channels(3, 1, 2, stride=2, padding=(3, 2)), (5, 5)),  # cropped
    (channels(1, 2, 1, stride=3, output_padding=2), (2, 2)),
    # kernel longer than x with a stride: XLA swaps the operands of such a convolution, and with
    # its input dilation jaxlib 0.10.2 then aborts the process; the input is spread explicitly
    (channels(1, 1, 2, stride=(2, 1), padding=(1, 0), output_padding=(0, 1), dilation=(1, 2)), (3, 1)),
    (channels(2, 3, (4, 1), stride=(1, 3), padding=(1, 0)), (1, 5)),
    (channels(2, 4, 3, groups=2, stride=2, dilation=2), (2, 2)),
]


@pytest.mark.parametrize(("arguments", "size"), CONV_TRANSPOSE2D, ids=str)
def test_conv_transpose2d(arguments: dict[str, Any], size: tuple[int, int]) -> None:
    module = nn.ConvTranspose2d(**arguments)
    cin = arguments["in_channels"]
    unbatched = [normal(cin, *size, seed=4)] if arguments.get("groups") else []
    compare("ConvTranspose2d", module, normal(2, cin, *size), *unbatched)


# --- Pooling --------------------------------------------------------------------------------

POOLS = [
    # constructor arguments shared by both pools, input size
    ({"kernel_size": 3}, (7, 6)),
    ({"kernel_size": (2, 4), "stride": (1, 3), "padding": (1, 2)}, (5, 9)),
    ({"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}, (6, 7)),
    ({"kernel_size": (3, 2), "stride": (3, 2), "ceil_mode": True}, (7, 5)),  # the last window hangs past x
    ({"kernel_size": 2, "stride": 3, "padding": 1, "ceil_mode": True}, (6, 6)),  # one would start in the padding
]


@pytest.mark.parametrize("dilation", [1, (1, 2)], ids=str)
@pytest.mark.parametrize(("arguments", "size"), POOLS, ids=str)
def test_max_pool2d(arguments: dict[str, Any], size: tuple[int, int], dilation: Any) -> None:
    module = nn.MaxPool2d(**arguments, dilation=dilation)
    unbatched = [normal(2, *size, seed=4)] if arguments.get("ceil_mode") and dilation != 1 else []
    compare("MaxPool2d", module, normal(2, 2, *size), *unbatched)


def test_max_pool2d_null_stride_means_the_kernel_size() -> None:
    module = nn.MaxPool2d((2, 3))
    compare("MaxPool2d", module, normal(1, 2, 6, 7), stride=None)


def test_max_pool2d_lets_nan_win_and_padding_lose() -> None:
    x = -2.0 - np.abs(normal(1, 1, 5, 5))  # all negative: a zero padding would win, −∞ must not
    x[0, 0, 2, 3] = np.nan
    built = compare("MaxPool2d", nn.MaxPool2d(2, stride=1, padding=1), x)
    y = built.apply({"x": x})["y"]
    assert np.isnan(y).sum() == 4  # every window that covers the NaN, and only those
    assert (y[~np.isnan(y)] < 0).all()


def test_max_pool2d_of_integers_keeps_the_dtype() -> None:
    x = np.random.default_rng(5).integers(-50, 50, (1, 2, 6, 5)).astype(np.int32)
    module = nn.MaxPool2d(2, stride=2, padding=1, ceil_mode=True)
    y = build("MaxPool2d", torch_slots("MaxPool2d", module)).apply({"x": x})["y"]
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, in_torch(module, x))


@pytest.mark.parametrize(("count_include_pad", "divisor_override"), [(True, None), (False, None), (False, 5)])
@pytest.mark.parametrize(("arguments", "size"), POOLS, ids=str)
def test_avg_pool2d(
    arguments: dict[str, Any], size: tuple[int, int], count_include_pad: bool, divisor_override: Any
) -> None:
    module = nn.AvgPool2d(**arguments, count_include_pad=count_include_pad, divisor_override=divisor_override)
    unbatched = [normal(2, *size, seed=4)] if arguments.get("ceil_mode") and not count_include_pad else []
    compare("AvgPool2d", module, normal(2, 2, *size), *unbatched)


@pytest.mark.parametrize(
    ("size", "output_size"),
    [((9, 6), (3, 3)), ((7, 4), (2, 3)), ((2, 3), (4, 6)), ((5, 5), (1, None)), ((4, 6), 5)],
    ids=str,
)
def test_adaptive_avg_pool2d(size: tuple[int, int], output_size: Any) -> None:
    module = nn.AdaptiveAvgPool2d(output_size)
    unbatched = [normal(3, *size, seed=4)] if output_size == (2, 3) else []
    compare("AdaptiveAvgPool2d", module, normal(2, 3, *size), *unbatched)


# --- Normalization --------------------------------------------------------------------------


def perturbed(module: M) -> M:
    """Weights and statistics away from torch's initial 1, 0, 0, 1, so that each one counts."""
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name, value in module.state_dict().items():
            if value.is_floating_point():
                noise = torch.rand(value.shape, generator=generator)
                value.copy_(noise + 0.25 if name.endswith(("var", "weight")) else noise * 4 - 2)
    return module


@pytest.mark.parametrize(
    "arguments",
    [{}, {"affine": False, "eps": 1e-2}, {"track_running_stats": False}, {"momentum": None, "affine": False}],
    ids=str,
)
def test_batch_norm(arguments: dict[str, Any]) -> None:
    """Eval mode: the running statistics, or the batch's where the module keeps none."""
    compare("BatchNorm1d", perturbed(nn.BatchNorm1d(3, **arguments)), normal(4, 3, scale=2), normal(2, 3, 5, shift=1))
    compare("BatchNorm2d", perturbed(nn.BatchNorm2d(2, **arguments)), normal(3, 2, 3, 4, scale=2, shift=-1))


def test_batch_norm_running_statistics_win_over_a_false_flag() -> None:
    module = perturbed(nn.BatchNorm2d(2))
    setattr(module, "track_running_stats", False)  # noqa: B010 (torch types module attributes as tensors)
    compare("BatchNorm2d", module, normal(2, 2, 3, 3))


@pytest.mark.parametrize(
    ("shape", "arguments"),
    [((4,), {"eps": 1e-3}), ((3, 4), {"bias": False}), ((2, 3, 4), {"elementwise_affine": False})],
    ids=str,
)
def test_layer_norm(shape: tuple[int, ...], arguments: dict[str, Any]) -> None:
    module = perturbed(nn.LayerNorm(shape, **arguments))
    compare("LayerNorm", module, normal(5, 2, 3, 4, scale=3, shift=2), normal(*shape))


@pytest.mark.parametrize(
    ("groups", "affine", "shape"), [(1, True, (2, 4, 3)), (2, False, (3, 4, 2, 2)), (4, True, (2, 4, 5))]
)
def test_group_norm(groups: int, affine: bool, shape: tuple[int, ...]) -> None:
    module = perturbed(nn.GroupNorm(groups, 4, eps=1e-3, affine=affine))
    compare("GroupNorm", module, normal(*shape, scale=2, shift=1))


@pytest.mark.parametrize(("eps", "affine"), [(None, True), (1e-2, False), (None, False)])
def test_rms_norm(eps: float | None, affine: bool) -> None:
    module = perturbed(nn.RMSNorm((2, 5), eps=eps, elementwise_affine=affine))
    compare("RMSNorm", module, normal(3, 2, 5), normal(2, 5))


def test_rms_norm_null_eps_is_float32s_epsilon() -> None:
    x = normal(3, 4, scale=1e-4)  # so small that eps dominates the mean square
    built = compare("RMSNorm", nn.RMSNorm(4, elementwise_affine=False), x)
    wide = x.astype(np.float64)
    expected = wide / np.sqrt((wide**2).mean(axis=-1, keepdims=True) + 2.0**-23)
    np.testing.assert_allclose(built.apply({"x": x})["y"], expected, rtol=1e-5)


# --- Embedding, dropout and shape helpers ---------------------------------------------------


@pytest.mark.parametrize("padding_idx", [None, 2])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_embedding(dtype: Any, padding_idx: int | None) -> None:
    module = nn.Embedding(5, 3, padding_idx=padding_idx)
    with torch.no_grad():
        module.weight.normal_()  # the padding row too: looking it up still returns it
    built = build("Embedding", torch_slots("Embedding", module))
    for x in (np.array(2, dtype), np.array([[4, 2, 0], [1, 1, 3]], dtype)):
        agree(built, {"x": x}, in_torch(module, x))


@pytest.mark.parametrize(("max_norm", "norm_type"), [(0.8, 2.0), (1.5, 1.0), (0.3, 4.0)])
def test_embedding_max_norm(max_norm: float, norm_type: float) -> None:
    module = nn.Embedding(4, 6, max_norm=max_norm, norm_type=norm_type)
    built = build("Embedding", torch_slots("Embedding", module))  # before torch renormalizes in place
    x = np.array([3, 0, 3, 1])
    y = built.apply({"x": x})["y"]
    ERRORS.check("Embedding", y, in_torch(module, x))
    assert (np.linalg.norm(y, ord=norm_type, axis=-1) <= max_norm * (1 + 1e-6)).all()


def test_embedding_index_out_of_range_is_an_error_eagerly_and_nan_under_jit() -> None:
    table = normal(3, 2)
    built = build("Embedding", {"num_embeddings": 3, "embedding_dim": 2, "weight": table})
    for bad in (3, -1):
        x = np.array([0, bad, 1])
        with pytest.raises(trama.ExecutionError, match=r"indices must lie in \[0, 3\)") as caught:
            built.apply({"x": x}, jit=False)
        assert caught.value.node_id == "net.layer"
        y = built.apply({"x": x})["y"]  # no value check is possible while tracing
        assert np.isnan(y[1]).all()
        np.testing.assert_array_equal(y[[0, 2]], table[[0, 1]])


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_dropout_is_the_identity_in_eval_mode(p: float) -> None:
    compare("Dropout", nn.Dropout(p), normal(2, 5))


def test_identity_passes_any_dtype() -> None:
    compare("Identity", nn.Identity(), normal(3, 1))
    np.testing.assert_array_equal(build("Identity", {}).apply({"x": np.arange(5)})["y"], np.arange(5))


@pytest.mark.parametrize(
    ("start_dim", "end_dim", "shape"),
    [(1, -1, (2, 2, 3)), (0, 1, (3, 2, 2)), (-2, -1, (2, 3, 2, 1)), (1, 1, (2, 3)), (0, -1, ()), (1, 2, (3, 0, 2))],
    ids=str,
)
def test_flatten(start_dim: int, end_dim: int, shape: tuple[int, ...]) -> None:
    compare("Flatten", nn.Flatten(start_dim, end_dim), normal(*shape))


# --- Gradients ------------------------------------------------------------------------------

#: (a module to make, the input shape) per op whose gradient is checked.
GRADIENTS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "Linear": (lambda: nn.Linear(4, 3), (5, 4)),
    "Conv2d": (lambda: nn.Conv2d(2, 4, 3, stride=(2, 1), padding=1, groups=2, padding_mode="circular"), (2, 2, 5, 6)),
    "LayerNorm": (lambda: perturbed(nn.LayerNorm((2, 3))), (4, 2, 3)),
}


@pytest.mark.parametrize("op", GRADIENTS)
def test_gradients_with_respect_to_the_tensors_match_torch(op: str) -> None:
    make, shape = GRADIENTS[op]
    module = make()
    built = build(op, torch_slots(op, module))
    x = normal(*shape)
    weights = normal(*in_torch(module, x).shape, seed=6)  # a loss that weighs every output differently

    def loss(tensors: Mapping[str, jax.Array]) -> jax.Array:
        return jnp.sum(built.kernel.apply(tensors, {"x": jnp.asarray(x)})["y"] * weights)

    grads = jax.jit(jax.grad(loss))(built.tensors)
    assert_gradients_match(grads, module, (module(torch.from_numpy(x)) * torch.from_numpy(weights)).sum())


# --- 16-bit floats --------------------------------------------------------------------------

#: (a module to make, the input shape) per op checked in float16 and bfloat16.
HALF: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "Linear": (lambda: nn.Linear(24, 6), (3, 24)),
    "Conv2d": (lambda: nn.Conv2d(4, 2, 3, padding=1, groups=2), (2, 4, 5, 5)),
    "LayerNorm": (lambda: perturbed(nn.LayerNorm(10)), (4, 10)),
    "RMSNorm": (lambda: perturbed(nn.RMSNorm(10)), (4, 10)),  # eps null: float32's epsilon, as in torch
    "BatchNorm2d": (lambda: perturbed(nn.BatchNorm2d(2)), (2, 2, 3, 3)),
    "AvgPool2d": (lambda: nn.AvgPool2d(3, stride=2, padding=1), (1, 2, 6, 6)),
}

_HALF_DTYPES = {torch.float16: np.dtype(jnp.float16), torch.bfloat16: np.dtype(jnp.bfloat16)}


@pytest.mark.parametrize("dtype", list(_HALF_DTYPES), ids=str)
@pytest.mark.parametrize("op", HALF)
def test_16_bit_floats_keep_their_dtype_and_round_as_torch(op: str, dtype: torch.dtype) -> None:
    """torch's CPU kernels accumulate 16-bit inputs in float32 and round once; so do these. The
    results agree within one unit in the last place: torch's float32 sums, in another order than
    XLA's, may land on the other side of a rounding boundary (on these inputs they are identical)."""
    make, shape = HALF[op]
    module = make()
    half = _HALF_DTYPES[dtype]
    # The slots in the 16-bit dtype, rounded to nearest even as torch's .to(dtype) rounds.
    slots = {
        name: value.astype(half) if isinstance(value, np.ndarray) and value.dtype == np.float32 else value
        for name, value in torch_slots(op, module).items()
    }
    built = build(op, slots)
    x = normal(*shape)
    with torch.no_grad():
        expected = module.to(dtype).eval()(torch.from_numpy(x).to(dtype)).float().numpy()
    y = built.apply({"x": x.astype(half)})["y"]
    assert y.dtype == half
    ulp = {torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7}[dtype]
    np.testing.assert_allclose(y.astype(np.float32), expected, rtol=ulp, atol=ulp)


# --- What factories and kernels refuse ------------------------------------------------------


def conv2d(**changes: Any) -> dict[str, Any]:
    return torch_slots("Conv2d", nn.Conv2d(4, 2, 3, groups=2), **changes)


def transposed(**changes: Any) -> dict[str, Any]:
    return torch_slots("ConvTranspose2d", nn.ConvTranspose2d(1, 1, 2), **changes)


@pytest.mark.parametrize(
    ("op", "slots", "message"),
    [
        ("Conv2d", conv2d(padding_mode="mirror"), "padding_mode must be one of 'zeros', 'reflect'"),
        ("Conv2d", conv2d(groups=3), "groups = 3 must divide in_channels = 4"),
        ("Conv2d", conv2d(kernel_size=[3, 3, 3]), "kernel_size must be a list of 2 ints"),
        ("Conv2d", conv2d(padding="full"), 'padding must be a list of 2 ints, "valid" or "same"'),
        ("Conv2d", conv2d(padding="same", stride=[1, 2]), 'padding "same" needs every stride to be 1'),
        ("Conv2d", conv2d(weight=np.zeros((2, 4, 3, 3), np.float32)), r"weight has shape \[2, 4, 3, 3\]"),
        (
            "ConvTranspose2d",
            torch_slots("ConvTranspose2d", nn.ConvTranspose2d(1, 1, 2), padding_mode="circular"),
            "zeros",
        ),
        (
            "ConvTranspose2d",
            torch_slots("ConvTranspose2d", nn.ConvTranspose2d(1, 1, 2), output_padding=[0, 1]),
            "output_padding",
        ),
        ("Linear", {"in_features": 2, "out_features": 3}, "the required tensor 'weight' is missing"),
        ("MaxPool2d", {"kernel_size": [3, 3], "padding": [0, 2]}, "at most half of kernel_size"),
        ("LayerNorm", {"normalized_shape": [3]}, "elementwise_affine is true, yet the node has no weight"),
        ("GroupNorm", {"num_groups": 3, "num_channels": 4, "affine": False}, "must divide num_channels"),
        ("BatchNorm2d", {"num_features": 2, "affine": False}, "no running_mean"),
        ("Dropout", {"p": -0.1}, r"p must lie in \[0, 1\]"),
        (
            "Embedding",
            {"num_embeddings": 2, "embedding_dim": 2, "padding_idx": 2, "weight": normal(2, 2)},
            "padding_idx",
        ),
    ],
)
def test_bad_settings_are_refused_when_the_kernel_is_built(op: str, slots: Mapping[str, Any], message: str) -> None:
    with pytest.raises(trama.RegistryError, match=message) as caught:
        build(op, slots)
    assert caught.value.node_id == "net.layer"
    assert str(caught.value).startswith(f"node 'net.layer': {op}:")


def test_bad_inputs_are_execution_errors_naming_the_node() -> None:
    linear = build("Linear", torch_slots("Linear", nn.Linear(2, 1)))
    with pytest.raises(trama.ExecutionError, match="x must hold floating-point numbers") as caught:
        linear.apply({"x": np.ones((3, 2), np.int32)}, jit=False)
    assert caught.value.node_id == "net.layer"
    with pytest.raises(trama.ExecutionError, match="last dimension should be 2"):
        linear.apply({"x": np.ones((3, 4), np.float32)})  # found while tracing
    conv = build("Conv2d", conv2d())
    with pytest.raises(trama.ExecutionError, match="x has 3 channels"):
        conv.apply({"x": normal(1, 3, 5, 5)})
    with pytest.raises(trama.ExecutionError, match="smaller than the kernel"):
        conv.apply({"x": normal(1, 4, 2, 5)})
    reflect = build("Conv2d", conv2d(padding=[1, 3], padding_mode="reflect"))
    with pytest.raises(trama.ExecutionError, match="reflect padding of 3 needs more than that many elements, got 3"):
        reflect.apply({"x": normal(4, 4, 3)})
    pool = build("MaxPool2d", {"kernel_size": [4, 4]})
    with pytest.raises(trama.ExecutionError, match="too small for the window"):
        pool.apply({"x": normal(1, 1, 3, 8)})
