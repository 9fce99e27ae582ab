"""The settings checks of :mod:`trama.catalog.pooling`.

A module op and its function form (``MaxPool1d`` and ``max_pool1d``) share one checker. The
pools' checks are opset 1's 2-d ones (:mod:`trama.catalog._layer_checks`) for any number of
spatial dimensions: a ``null`` stride becomes the kernel size, and padding is at most half the
kernel. ``interpolate`` and ``Upsample`` normalise ``size`` and ``scale_factor`` (an int or number
for every dimension, or a tuple) and refuse what torch refuses before computing anything: both
or neither set, ``align_corners`` with a nearest mode, ``recompute_scale_factor`` with a size.
``pad`` holds torch's rules that do not depend on the input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trama.catalog._layer_checks import bounded_output_size, pool_rules, pool_windows
from trama.catalog._limits import MAX_ELEMENTS, extent_problem, shown_limit
from trama.catalog._pooling_geometry import RESAMPLING_RANKS
from trama.catalog._reader import (
    REQUIRED,
    Checker,
    Choice,
    Flag,
    Integer,
    IntList,
    Number,
    Reader,
    is_int,
    is_number,
)

__all__ = ["CHECKERS"]


# --- Pools with fixed windows -----------------------------------------------------------------


def _max_pool(dims: int) -> Checker:
    return Checker(pool_rules(dims, dilation=True), (pool_windows,))


def _avg_pool(dims: int) -> Checker:
    rules = {**pool_rules(dims, dilation=False), "count_include_pad": Flag(default=True)}
    if dims > 1:
        rules["divisor_override"] = Integer(minimum=1, nullable=True, default=None)
    return Checker(rules, (pool_windows,))


# --- Adaptive pools ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OutputSize:
    """An adaptive pool's ``output_size``: ``dims`` entries, each an int ≥ 1 or, where
    ``nullable_entries``, ``null`` (that dimension keeps its input size)."""

    dims: int
    nullable_entries: bool
    default: Any = REQUIRED
    nullable: bool = False

    def read(self, reader: Reader, slot: str) -> tuple[int | None, ...]:
        value = reader.raw(slot)
        if (
            not isinstance(value, (list, tuple))
            or len(value) != self.dims
            or not all((v is None and self.nullable_entries) or (is_int(v) and v >= 1) for v in value)
        ):
            each = "an int ≥ 1 or null" if self.nullable_entries else "an int ≥ 1"
            raise reader.error(f"{slot} must be a list of {self.dims} entries, each {each}, got {value!r}")
        return tuple(None if v is None else int(v) for v in value)

    def types(self) -> tuple[str, ...]:
        return ("list",)


def _adaptive(dims: int) -> Checker:
    return Checker({"output_size": OutputSize(dims, nullable_entries=dims > 1)}, (bounded_output_size,))


# --- Resampling -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sizes:
    """``size``: ``null``, an int ≥ 1 (every spatial dimension) or 1 to 3 of them (a tuple)."""

    default: Any = None
    nullable: bool = True

    def read(self, reader: Reader, slot: str) -> int | tuple[int, ...] | None:
        value = reader.raw(slot, self.default)
        if value is None:
            return None
        if is_int(value) and value >= 1:
            return int(value)
        if isinstance(value, (list, tuple)) and 1 <= len(value) <= 3 and all(is_int(v) and v >= 1 for v in value):
            return tuple(int(v) for v in value)
        raise reader.error(f"{slot} must be null, an int ≥ 1 or a list of 1 to 3 ints ≥ 1, got {value!r}")

    def types(self) -> tuple[str, ...]:
        return ("int", "list", "null")


@dataclass(frozen=True, slots=True)
class Scales:
    """``scale_factor``: ``null``, a number > 0 (every spatial dimension) or 1 to 3 of them (a
    tuple), as floats."""

    default: Any = None
    nullable: bool = True

    def read(self, reader: Reader, slot: str) -> float | tuple[float, ...] | None:
        value = reader.raw(slot, self.default)
        if value is None:
            return None
        if is_number(value) and value > 0:
            return float(value)
        if isinstance(value, (list, tuple)) and 1 <= len(value) <= 3 and all(is_number(v) and v > 0 for v in value):
            return tuple(float(v) for v in value)
        raise reader.error(f"{slot} must be null, a number > 0 or a list of 1 to 3 numbers > 0, got {value!r}")

    def types(self) -> tuple[str, ...]:
        return ("float", "list", "null")


@dataclass(frozen=True, slots=True)
class OptionalFlag:
    """A bool that may be ``null`` (torch's ``None``, which the op gives a meaning)."""

    default: Any = None
    nullable: bool = True

    def read(self, reader: Reader, slot: str) -> bool | None:
        value = reader.raw(slot, self.default)
        if value is not None and not isinstance(value, bool):
            raise reader.error(f"{slot} must be null or a bool, got {value!r}")
        return value

    def types(self) -> tuple[str, ...]:
        return ("bool", "null")


_NEAREST_MODES = ("nearest", "nearest-exact", "area")


def _resampling(reader: Reader) -> None:
    """torch's refusals that need no input: exactly one of ``size`` and ``scale_factor``,
    ``align_corners`` only with an interpolating mode, ``recompute_scale_factor`` only with a
    scale; ``align_corners`` null means false for the modes that take it."""
    values = reader.values
    if (values["size"] is None) == (values["scale_factor"] is None):
        raise reader.error("exactly one of size and scale_factor must be set")
    mode = values["mode"]
    if mode in _NEAREST_MODES:
        if values["align_corners"] is not None:
            raise reader.error(f'align_corners can only be set with the interpolating modes, not with mode "{mode}"')
    elif values["align_corners"] is None:
        values["align_corners"] = False
    if values["recompute_scale_factor"] and values["size"] is not None:
        raise reader.error("recompute_scale_factor is not meaningful with an explicit size")
    _resampled_extent(reader)


def _resampled_extent(reader: Reader) -> None:
    """The output's spatial extent that ``size`` gives, or the factor ``scale_factor`` multiplies
    the input's by, is at most 2**48 (elements): beyond it no output fits trama's limit."""
    size, scale = reader.values["size"], reader.values["scale_factor"]
    if size is not None:
        problem = extent_problem(size if isinstance(size, tuple) else (size,), limit=MAX_ELEMENTS)
        if problem is not None:
            raise reader.error(f"size: {problem}")
    if scale is not None:
        product = 1.0
        for factor in scale if isinstance(scale, tuple) else (scale,):
            product *= max(factor, 1.0)
        if product > MAX_ELEMENTS:
            raise reader.error(
                f"scale_factor {scale!r} multiplies the input's size by more than {shown_limit(MAX_ELEMENTS)}, "
                "trama's limit (docs/format.md, section 7)"
            )


_RESAMPLE = Checker(
    {
        "size": Sizes(),
        "scale_factor": Scales(),
        "mode": Choice(tuple(RESAMPLING_RANKS), default="nearest"),
        "align_corners": OptionalFlag(),
        "recompute_scale_factor": OptionalFlag(),
    },
    (_resampling,),
)


# --- Padding ----------------------------------------------------------------------------------


def _pad(reader: Reader) -> None:
    """An even number of amounts; the non-constant modes pad 1 to 3 dimensions by amounts ≥ 0
    and take no value but 0 (torch's checks, those that need no input)."""
    values = reader.values
    pad, mode = values["pad"], values["mode"]
    if len(pad) % 2:
        raise reader.error(f"pad must hold an even number of ints (before and after), got {list(pad)}")
    if mode == "constant":
        return
    if len(pad) not in (2, 4, 6):
        raise reader.error(f"{mode} padding pads 1 to 3 dimensions (2, 4 or 6 ints), got {list(pad)}")
    if min(pad) < 0:
        raise reader.error(f"{mode} padding takes amounts ≥ 0, got {list(pad)}")
    if values["value"] not in (None, 0.0):
        raise reader.error(f'padding mode "{mode}" takes no value (null or 0), got {values["value"]!r}')


_PAD = Checker(
    {
        "pad": IntList(),
        "mode": Choice(("constant", "reflect", "replicate", "circular"), default="constant"),
        "value": Number(nullable=True, default=None),
    },
    (_pad,),
)

#: Every op of the family's checker, by op name (the module and the function form share one).
CHECKERS: dict[str, Checker] = {
    **{name: _max_pool(dims) for name, dims in (("MaxPool1d", 1), ("MaxPool3d", 3))},
    **{f"max_pool{dims}d": _max_pool(dims) for dims in (1, 2, 3)},
    **{name: _avg_pool(dims) for name, dims in (("AvgPool1d", 1), ("AvgPool3d", 3))},
    **{f"avg_pool{dims}d": _avg_pool(dims) for dims in (1, 2, 3)},
    **{name: _adaptive(dims) for name, dims in (("AdaptiveAvgPool1d", 1), ("AdaptiveAvgPool3d", 3))},
    **{f"adaptive_avg_pool{dims}d": _adaptive(dims) for dims in (1, 2, 3)},
    **{name: _adaptive(dims) for name, dims in (("AdaptiveMaxPool1d", 1), ("AdaptiveMaxPool2d", 2))},
    **{f"adaptive_max_pool{dims}d": _adaptive(dims) for dims in (1, 2)},
    "interpolate": _RESAMPLE,
    "Upsample": _RESAMPLE,
    "pad": _PAD,
}
