"""trama-numpy's pooling kernels (:mod:`trama_numpy.pooling`): exact semantics on hand-computed
values, the same refusals as every framework for bad settings, and errors naming the node for
inputs that do not fit.

Each case is a one-node document run by the numpy runtime, so a kernel is reached exactly as a
user reaches it (the core checks the node's settings first).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import trama
from trama import INPUT, ExecutionError, Model, Node, Parameter, Ref, RegistryError


def run(op: str, x: Any, **slots: Any) -> np.ndarray:
    """``op`` with these slots applied to ``x`` by the numpy runtime."""
    table = {f"n.{slot}": Parameter(value, learnable=False) for slot, value in slots.items()}
    node = Node("n", op, {"x": Ref(INPUT, "x")}, ["y"], {slot: f"n.{slot}" for slot in slots})
    model = Model(["x"], [Ref("n", "y")], [node], table)
    (y,) = trama.runtime_for_name("numpy").prepare(model).run({"x": np.asarray(x)})
    return np.asarray(y)


def f32(values: Any) -> np.ndarray:
    return np.asarray(values, np.float32)


# --- Pools ------------------------------------------------------------------------------------


def test_max_pool1d_takes_window_maxima_and_padding_never_wins() -> None:
    x = f32([[-3.0, -1.0, -2.0, -5.0, -4.0]])
    assert run("max_pool1d", x, kernel_size=[2]).tolist() == [[-1.0, -2.0]]
    # padding 1 at both ends: windows [pad, −3], [−1, −2], [−5, −4]; ceil mode would add a fourth
    # window, which starts in the end padding (3·2 ≥ 5 + 1) and is dropped
    y = run("max_pool1d", x, kernel_size=[2], padding=[1], ceil_mode=True)
    assert y.tolist() == [[-3.0, -1.0, -4.0]]


def test_max_pool3d_dilated_and_integer_inputs_keep_their_dtype() -> None:
    x = np.arange(27, dtype=np.int32).reshape(1, 3, 3, 3)
    y = run("max_pool3d", x, kernel_size=[2, 2, 2], dilation=[2, 2, 2])
    assert y.dtype == np.int32
    assert y.tolist() == [[[[26]]]]


def test_avg_pool_divisors_with_and_without_the_padding() -> None:
    x = f32([[2.0, 4.0, 6.0]])
    # windows [pad, 2], [4, 6]: the padding counts (divisor 2) or not (divisor 1)
    assert run("avg_pool1d", x, kernel_size=[2], stride=[2], padding=[1]).tolist() == [[1.0, 5.0]]
    y = run("avg_pool1d", x, kernel_size=[2], stride=[2], padding=[1], count_include_pad=False)
    assert y.tolist() == [[2.0, 5.0]]
    cube = np.ones((1, 2, 2, 2), np.float32)
    assert run("avg_pool3d", cube, kernel_size=[2, 2, 2], divisor_override=4).tolist() == [[[[2.0]]]]


def test_avg_pool3d_needs_the_whole_kernel_inside_x_as_torch_does() -> None:
    x = np.ones((1, 1, 1, 1), np.float32)
    with pytest.raises(ExecutionError, match="smaller than the kernel"):
        run("avg_pool3d", x, kernel_size=[2, 1, 1], padding=[1, 0, 0])


def test_adaptive_pools_use_overlapping_windows() -> None:
    x = f32([[1.0, 2.0, 3.0, 4.0, 5.0]])
    # S = 5, O = 2: windows 0…2 and 2…4
    assert run("adaptive_avg_pool1d", x, output_size=[2]).tolist() == [[2.0, 4.0]]
    assert run("adaptive_max_pool1d", x, output_size=[2]).tolist() == [[3.0, 5.0]]
    grid = np.arange(12, dtype=np.float32).reshape(1, 3, 4)
    y = run("adaptive_max_pool2d", grid, output_size=[1, None])
    assert y.tolist() == [[[8.0, 9.0, 10.0, 11.0]]]
    volume = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2)
    assert run("AdaptiveAvgPool3d", volume, output_size=[1, 1, 1]).tolist() == [[[[3.5]]]]


# --- Resampling -------------------------------------------------------------------------------


def test_nearest_follows_torchs_index_rules() -> None:
    x = f32([[[10.0, 20.0, 30.0]]])
    assert run("interpolate", x, size=6).tolist() == [[[10.0, 10.0, 20.0, 20.0, 30.0, 30.0]]]
    # S′ = S copies even when the scale (1.2) would read other elements: ⌊2 / 1.2⌋ = 1
    assert run("interpolate", x, scale_factor=1.2).tolist() == [[[10.0, 20.0, 30.0]]]
    # S′ = 4: ⌊o · 0.75⌋ = 0, 0, 1, 2; nearest-exact: ⌊(o + 0.5) · 0.75⌋ = 0, 1, 1, 2
    assert run("interpolate", x, size=[4]).tolist() == [[[10.0, 10.0, 20.0, 30.0]]]
    assert run("interpolate", x, size=[4], mode="nearest-exact").tolist() == [[[10.0, 20.0, 20.0, 30.0]]]


def test_linear_modes_use_half_pixel_or_corner_aligned_positions() -> None:
    x = f32([[[0.0, 4.0]]])
    # half-pixel: p = 0.5·(o + 0.5) − 0.5 = −0.25 → 0, 0.25, 0.75, 1.25 → the last element
    assert run("interpolate", x, size=[4], mode="linear").tolist() == [[[0.0, 1.0, 3.0, 4.0]]]
    y = run("interpolate", x, size=[5], mode="linear", align_corners=True)
    assert y.tolist() == [[[0.0, 1.0, 2.0, 3.0, 4.0]]]
    square = f32([[[[0.0, 2.0], [4.0, 6.0]]]])
    y = run("Upsample", square, scale_factor=[1.5, 1.5], mode="bilinear", align_corners=True)
    np.testing.assert_allclose(y[0, 0], [[0.0, 1.0, 2.0], [2.0, 3.0, 4.0], [4.0, 5.0, 6.0]], atol=1e-6)


def test_bicubic_weights_are_keys_convolution_with_clamped_taps() -> None:
    ramp = np.tile(np.arange(4, dtype=np.float32), (4, 1))[np.newaxis, np.newaxis]
    y = run("interpolate", ramp, size=[4, 7], mode="bicubic", align_corners=True)[0, 0, 0]
    # o = 3: p = 1.5, taps x[0…3] all inside: the cubic reproduces the ramp
    assert y[3] == pytest.approx(1.5, abs=1e-6)
    # o = 1: p = 0.5, taps x[−1→0], x[0], x[1], x[2] with weights −0.09375, 0.59375, 0.59375,
    # −0.09375 (A = −0.75, t = 0.5): 0.59375 − 2·0.09375, not the ramp's 0.5
    assert y[1] == pytest.approx(0.40625, abs=1e-6)
    assert y[0] == 0.0


def test_area_is_an_adaptive_average() -> None:
    x = f32([[[1.0, 3.0, 5.0, 7.0]]])
    assert run("interpolate", x, scale_factor=0.5, mode="area").tolist() == [[[2.0, 6.0]]]


# --- Padding ------------------------------------------------------------------------------------


def test_pad_lists_the_last_dimension_first_and_crops_with_negative_amounts() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = run("pad", x, pad=[1, 0, 0, 1], value=9.0)
    assert y.tolist() == [[9.0, 0.0, 1.0, 2.0], [9.0, 3.0, 4.0, 5.0], [9.0, 9.0, 9.0, 9.0]]
    assert run("pad", x, pad=[-1, 0]).tolist() == [[1.0, 2.0], [4.0, 5.0]]


def test_pad_modes_reflect_replicate_and_wrap() -> None:
    x = f32([[1.0, 2.0, 3.0]])
    assert run("pad", x, pad=[2, 1], mode="reflect").tolist() == [[3.0, 2.0, 1.0, 2.0, 3.0, 2.0]]
    assert run("pad", x, pad=[2, 1], mode="replicate").tolist() == [[1.0, 1.0, 1.0, 2.0, 3.0, 3.0]]
    assert run("pad", x, pad=[2, 1], mode="circular").tolist() == [[2.0, 3.0, 1.0, 2.0, 3.0, 1.0]]


def test_pad_refuses_a_reflection_as_wide_as_the_dimension() -> None:
    with pytest.raises(ExecutionError, match=r"pad \(node 'n'\): reflect padding of 3"):
        run("pad", f32([[1.0, 2.0, 3.0]]), pad=[3, 0], mode="reflect")


# --- Refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "slots", "message"),
    [
        ("max_pool1d", {"kernel_size": [2], "padding": [2]}, "padding[0] = 2 must be at most half"),
        ("avg_pool2d", {"kernel_size": [2]}, "kernel_size must be a list of 2 ints"),
        ("adaptive_avg_pool1d", {"output_size": [None]}, "output_size must be a list of 1 entries"),
        ("interpolate", {"size": 2, "scale_factor": 2.0}, "exactly one of size and scale_factor"),
        ("interpolate", {"size": 2, "align_corners": True}, "align_corners can only be set"),
        ("interpolate", {"size": 2, "recompute_scale_factor": True}, "recompute_scale_factor is not meaningful"),
        ("interpolate", {"scale_factor": 2.0, "mode": "lanczos"}, "mode must be one of"),
        ("pad", {"pad": [1]}, "pad must hold an even number"),
        ("pad", {"pad": [-1, 1], "mode": "reflect"}, "reflect padding takes amounts ≥ 0"),
        ("pad", {"pad": [1, 1], "mode": "circular", "value": 1.0}, 'padding mode "circular" takes no value'),
    ],
)
def test_bad_settings_are_registry_errors_naming_op_and_node(op: str, slots: dict[str, Any], message: str) -> None:
    with pytest.raises(RegistryError, match=f"{op}: .*{re.escape(message)}") as error:
        run(op, np.zeros((1, 2, 4, 4), np.float32), **slots)
    assert error.value.node_id == "n"


def test_inputs_that_do_not_fit_name_the_node() -> None:
    with pytest.raises(ExecutionError, match=r'mode "bilinear" needs 2 spatial dimensions'):
        run("interpolate", np.zeros((1, 1, 4), np.float32), size=2, mode="bilinear")
    with pytest.raises(ExecutionError, match="x must be a floating-point array"):
        run("avg_pool1d", np.zeros((1, 4), np.int32), kernel_size=[2])
    with pytest.raises(ExecutionError, match="x should have 3 or 4 dimensions"):
        run("max_pool2d", np.zeros((4, 4), np.float32), kernel_size=[2, 2])
