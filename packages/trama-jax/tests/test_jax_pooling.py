"""trama-jax's pooling kernels (:mod:`trama_jax.pooling`): exact semantics on hand-computed values
through the ``jax:cpu`` runtime (which compiles them), dtypes, and errors naming the node.

The index arithmetic and the windows are the core's (shared with the numpy reference), so these
cases check what the JAX side adds: ``reduce_window`` in one to three dimensions, the gathers and
weighted sums of resampling, ``lax.pad``'s negative amounts, and the accumulation dtype.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
import pytest

import trama
from trama import INPUT, ExecutionError, Model, Node, Parameter, Ref, RegistryError


def run(op: str, x: Any, **slots: Any) -> np.ndarray:
    """``op`` with these slots applied to ``x`` by the ``jax:cpu`` runtime."""
    table = {f"n.{slot}": Parameter(value, learnable=False) for slot, value in slots.items()}
    node = Node("n", op, {"x": Ref(INPUT, "x")}, ["y"], {slot: f"n.{slot}" for slot in slots})
    model = Model(["x"], [Ref("n", "y")], [node], table)
    (y,) = trama.runtime_for_name("jax:cpu").prepare(model).run({"x": x})
    return np.asarray(y)


def f32(values: Any) -> np.ndarray:
    return np.asarray(values, np.float32)


def test_max_pools_in_one_and_three_dimensions() -> None:
    x = f32([[-3.0, -1.0, -2.0, -5.0, -4.0]])
    assert run("max_pool1d", x, kernel_size=[2], padding=[1], ceil_mode=True).tolist() == [[-3.0, -1.0, -4.0]]
    cube = np.arange(27, dtype=np.int32).reshape(1, 3, 3, 3)
    y = run("MaxPool3d", cube, kernel_size=[2, 2, 2], dilation=[2, 2, 2])
    assert y.dtype == np.int32
    assert y.tolist() == [[[[26]]]]


def test_avg_pool_divisors_and_the_override() -> None:
    x = f32([[2.0, 4.0, 6.0]])
    assert run("avg_pool1d", x, kernel_size=[2], stride=[2], padding=[1]).tolist() == [[1.0, 5.0]]
    y = run("AvgPool1d", x, kernel_size=[2], stride=[2], padding=[1], count_include_pad=False)
    assert y.tolist() == [[2.0, 5.0]]
    cube = np.ones((1, 2, 2, 2), np.float32)
    assert run("avg_pool3d", cube, kernel_size=[2, 2, 2], divisor_override=4).tolist() == [[[[2.0]]]]


def test_adaptive_pools() -> None:
    x = f32([[1.0, 2.0, 3.0, 4.0, 5.0]])
    assert run("adaptive_avg_pool1d", x, output_size=[2]).tolist() == [[2.0, 4.0]]
    assert run("AdaptiveMaxPool1d", x, output_size=[2]).tolist() == [[3.0, 5.0]]
    grid = np.arange(12, dtype=np.float32).reshape(1, 3, 4)
    assert run("adaptive_max_pool2d", grid, output_size=[1, None]).tolist() == [[[8.0, 9.0, 10.0, 11.0]]]


def test_resampling_modes() -> None:
    x = f32([[[10.0, 20.0, 30.0]]])
    assert run("interpolate", x, scale_factor=1.2).tolist() == [[[10.0, 20.0, 30.0]]]
    assert run("interpolate", x, size=[4], mode="nearest-exact").tolist() == [[[10.0, 20.0, 20.0, 30.0]]]
    assert run("interpolate", f32([[[0.0, 4.0]]]), size=[4], mode="linear").tolist() == [[[0.0, 1.0, 3.0, 4.0]]]
    square = f32([[[[0.0, 2.0], [4.0, 6.0]]]])
    y = run("Upsample", square, size=3, mode="bilinear", align_corners=True)
    np.testing.assert_allclose(y[0, 0], [[0.0, 1.0, 2.0], [2.0, 3.0, 4.0], [4.0, 5.0, 6.0]], atol=1e-6)
    ramp = np.tile(np.arange(4, dtype=np.float32), (4, 1))[np.newaxis, np.newaxis]
    cubic = run("interpolate", ramp, size=[4, 7], mode="bicubic", align_corners=True)[0, 0, 0]
    assert cubic[1] == pytest.approx(0.40625, abs=1e-6)  # Keys' weights with clamped taps
    assert run("interpolate", f32([[[1.0, 3.0, 5.0, 7.0]]]), scale_factor=0.5, mode="area").tolist() == [[[2.0, 6.0]]]


def test_resampling_keeps_a_half_precision_dtype() -> None:
    x = jnp.asarray(np.arange(8, dtype=np.float32).reshape(1, 1, 2, 4), jnp.bfloat16)
    y = run("interpolate", x, scale_factor=2.0, mode="bilinear")
    assert y.dtype == jnp.bfloat16
    assert y.shape == (1, 1, 4, 8)


def test_pad_crops_with_negative_amounts_and_wraps() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert run("pad", x, pad=[1, -1], value=9.0).tolist() == [[9.0, 0.0, 1.0], [9.0, 3.0, 4.0]]
    row = f32([[1.0, 2.0, 3.0]])
    assert run("pad", row, pad=[2, 1], mode="reflect").tolist() == [[3.0, 2.0, 1.0, 2.0, 3.0, 2.0]]
    assert run("pad", row, pad=[2, 1], mode="circular").tolist() == [[2.0, 3.0, 1.0, 2.0, 3.0, 1.0]]


def test_bad_settings_and_inputs() -> None:
    with pytest.raises(RegistryError, match="exactly one of size and scale_factor"):
        run("interpolate", np.zeros((1, 1, 4), np.float32))
    with pytest.raises(ExecutionError, match=r"interpolate: mode \"bicubic\" needs 2 spatial dimensions"):
        run("interpolate", np.zeros((1, 1, 4), np.float32), size=2, mode="bicubic")
    with pytest.raises(ExecutionError, match="is too small for the window"):
        run("max_pool2d", np.zeros((1, 1, 2, 2), np.float32), kernel_size=[3, 3])
    with pytest.raises(ExecutionError, match="circular padding of 4"):
        run("pad", np.zeros((1, 3), np.float32), pad=[4, 0], mode="circular")
