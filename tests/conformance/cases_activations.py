"""Conformance cases of the catalog's opset-2 activations (merged into ``conformance_cases.CASES``).

Every op has its module form and its function form, and both get the same strategy (they mean
the same). Values are float32, normal or quantized to multiples of 0.5 (ties at a clamp's bounds,
at ``lambd`` and at ``threshold``), and one case in four also holds NaN, ``±inf`` and signed
zeros, because the specs say what each op gives there (Mish and Hardswish-like products give
NaN at ``−inf``, Softsign at ``±inf``). Where a setting is compared with ``x`` (a bound,
``lambd``, ``threshold``), some elements of ``x`` are set to that setting rounded to float32, the
value torch compares with, so that a runtime comparing with the unrounded float64 would fail.

The small value helpers are written here rather than imported from ``conformance_cases``, which
imports this module.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import numpy as np
from conformance_support import Case, Tolerance
from hypothesis import strategies as st
from hypothesis.strategies import DrawFn

__all__ = ["CASES", "TOLERANCES"]

Draw: TypeAlias = DrawFn
Shape: TypeAlias = tuple[int, ...]

#: The values a case may hold besides normal numbers: the special values the specs speak of.
_SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], dtype=np.float32)


def _rng(draw: Draw) -> np.random.Generator:
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1)))


def _shape(draw: Draw, min_rank: int = 0, max_rank: int = 4) -> Shape:
    """A shape of sizes 1 to 4; one in eight may have empty dimensions."""
    low = 0 if draw(st.integers(0, 7)) == 0 else 1
    return tuple(draw(st.lists(st.integers(low, 4), min_size=min_rank, max_size=max_rank)))


def _values(draw: Draw, gen: np.random.Generator, shape: Shape, *, special: bool = True) -> np.ndarray:
    """float32 values: normal times 3, or multiples of 0.5 in [−4, 4] (ties); with ``special``,
    one case in four has some of them replaced by NaN, ``±inf`` or a signed zero."""
    if draw(st.booleans()):
        array = np.asarray(gen.integers(-8, 9, size=shape) / 2, dtype=np.float32)
    else:
        array = np.asarray(gen.standard_normal(shape) * 3.0, dtype=np.float32)
    if special and array.size and draw(st.integers(0, 3)) == 0:
        chosen = gen.random(shape) < 0.3
        array[chosen] = gen.choice(_SPECIAL, size=int(chosen.sum()))
    return array


def _plant(gen: np.random.Generator, x: np.ndarray, *points: float) -> np.ndarray:
    """``x`` with some elements set to ``points`` rounded to float32 (what torch compares with)."""
    if x.size:
        chosen = gen.random(x.shape) < 0.3
        x[chosen] = gen.choice(np.asarray(points, dtype=np.float32), size=int(chosen.sum()))
    return x


def _setting(draw: Draw, low: float, high: float) -> float:
    """A setting: a multiple of 0.5 (a tie with quantized values), or any float64 in the range
    (not a float32, so that rounding it to ``x``'s dtype matters)."""
    if draw(st.booleans()):
        return float(draw(st.integers(int(low * 2), int(high * 2)))) / 2
    return draw(st.floats(low, high, allow_nan=False))


def _optional(draw: Draw, slots: dict[str, Any], name: str, value: Any) -> None:
    """Set slot ``name`` to ``value``, or leave it absent (the catalog default)."""
    if draw(st.booleans()):
        slots[name] = value


def _dim(draw: Draw, rank: int) -> int:
    size = max(rank, 1)
    return draw(st.integers(-size, size - 1))


# --- The strategies -----------------------------------------------------------------------------


def _plain(op: str) -> st.SearchStrategy[Case]:
    """An activation without settings: any shape (0-d and empty included), special values too."""

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = _rng(draw)
        return Case(op, {"x": _values(draw, gen, _shape(draw))})

    return strategy()


def _hardtanh(op: str) -> st.SearchStrategy[Case]:
    """Bounds in order; the function form may have equal bounds (the module refuses them)."""

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = _rng(draw)
        low = _setting(draw, -3.0, 1.0)
        high = low if op == "hardtanh" and draw(st.integers(0, 5)) == 0 else low + _setting(draw, 0.5, 4.0)
        slots: dict[str, Any] = {}
        if (low, high) != (-1.0, 1.0) or draw(st.booleans()):
            slots = {"min_val": low, "max_val": high}
        x = _plant(gen, _values(draw, gen, _shape(draw)), low, high)
        return Case(op, {"x": x}, slots)

    return strategy()


def _celu(op: str) -> st.SearchStrategy[Case]:
    """``alpha`` of either sign, never 0 (refused)."""

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = _rng(draw)
        slots: dict[str, Any] = {}
        alpha = draw(st.floats(0.2, 3.0)) * draw(st.sampled_from([1.0, -1.0]))
        _optional(draw, slots, "alpha", alpha)
        return Case(op, {"x": _values(draw, gen, _shape(draw))}, slots)

    return strategy()


def _shrink(op: str) -> st.SearchStrategy[Case]:
    """``lambd`` ≥ 0 (Hardshrink also negative, which leaves ``x`` as it is), with ``x`` holding
    ``±lambd`` rounded to float32."""
    negative = op.lower() == "hardshrink"

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = _rng(draw)
        lambd = _setting(draw, -1.0 if negative else 0.0, 2.0)
        slots: dict[str, Any] = {}
        _optional(draw, slots, "lambd", lambd)
        bound = slots.get("lambd", 0.5)
        x = _plant(gen, _values(draw, gen, _shape(draw)), bound, -bound)
        return Case(op, {"x": x}, slots)

    return strategy()


def _threshold(op: str) -> st.SearchStrategy[Case]:
    """``threshold`` and ``value`` (both required), ``x`` holding the threshold rounded to float32."""

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = _rng(draw)
        limit, value = _setting(draw, -2.0, 2.0), _setting(draw, -3.0, 3.0)
        x = _plant(gen, _values(draw, gen, _shape(draw)), limit)
        return Case(op, {"x": x}, {"threshold": limit, "value": value})

    return strategy()


def _glu(op: str) -> st.SearchStrategy[Case]:
    """A shape of rank ≥ 1 whose size along ``dim`` is even (0 included)."""

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = _rng(draw)
        shape = list(_shape(draw, min_rank=1))
        dim = _dim(draw, len(shape))
        shape[dim] = 2 * draw(st.integers(0 if 0 in shape else 1, 2))
        slots: dict[str, Any] = {}
        if dim != -1 or draw(st.booleans()):
            slots["dim"] = dim
        return Case(op, {"x": _values(draw, gen, tuple(shape))}, slots)

    return strategy()


def _softmin(op: str) -> st.SearchStrategy[Case]:
    """``dim`` or null (torch's legacy dimension); finite values, as for the softmaxes."""

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = _rng(draw)
        shape = _shape(draw)
        dim = _dim(draw, len(shape)) if draw(st.booleans()) else None
        return Case(op, {"x": _values(draw, gen, shape, special=False)}, {"dim": dim})

    return strategy()


def _channels(draw: Draw, shape: Shape) -> int:
    """How many weights a PReLU may have for ``x`` of ``shape``: 1, or one per channel."""
    channels = shape[1] if len(shape) >= 2 else 1
    return draw(st.sampled_from(sorted({1, channels})))


@st.composite
def _prelu_module(draw: Draw) -> Case:
    """``num_parameters`` 1 or the channel count, and the weight slot of that many slopes (of
    either sign, so ``w · 0`` gives both signed zeros)."""
    gen = _rng(draw)
    shape = _shape(draw)
    count = _channels(draw, shape)
    slots: dict[str, Any] = {"weight": np.asarray(gen.standard_normal(count), dtype=np.float32)}
    if count != 1 or draw(st.booleans()):
        slots["num_parameters"] = count
    return Case("PReLU", {"x": _values(draw, gen, shape)}, slots)


@st.composite
def _prelu_function(draw: Draw) -> Case:
    """The weight on its port, 0-d or 1-d, from a model input or from a ``constant`` node (as
    an exported ``F.prelu(x, self.weight)`` has it)."""
    gen = _rng(draw)
    shape = _shape(draw)
    count = _channels(draw, shape)
    weight = np.asarray(gen.standard_normal(count), dtype=np.float32)
    if count == 1 and draw(st.booleans()):
        weight = weight.reshape(())
    x = _values(draw, gen, shape)
    if draw(st.booleans()):
        return Case("prelu", {"x": x}, constants={"weight": weight})
    return Case("prelu", {"x": x, "weight": weight})


_PLAIN = ("ReLU6", "Hardsigmoid", "Mish", "SELU", "LogSigmoid", "Softsign", "Tanhshrink")

#: A strategy for every op of the family, by name.
CASES: dict[str, st.SearchStrategy[Case]] = {
    **{name: _plain(name) for module in _PLAIN for name in (module, module.lower())},
    **{op: _hardtanh(op) for op in ("Hardtanh", "hardtanh")},
    **{op: _celu(op) for op in ("CELU", "celu")},
    **{op: _shrink(op) for op in ("Hardshrink", "hardshrink", "Softshrink", "softshrink")},
    **{op: _threshold(op) for op in ("Threshold", "threshold")},
    **{op: _glu(op) for op in ("GLU", "glu")},
    **{op: _softmin(op) for op in ("Softmin", "softmin")},
    "PReLU": _prelu_module(),
    "prelu": _prelu_function(),
}

#: Documented tolerance exceptions of the family's ops (each says why).
TOLERANCES: dict[str, Tolerance] = {}
