"""What every conformance test shares: the runtimes compared, one-node models, running a model
everywhere, and the comparison with its tolerances.

The suite talks to frameworks only through the generic runtime API
(``trama.runtime_for_name(name).prepare(model).run(inputs)``), so it has no knowledge of any
framework package: the same code checks numpy, torch and JAX, and a fourth framework joins by
adding its runtime's name to :data:`RUNTIMES`.

A runtime that is missing is a failure, never a skip: the promise is that a model runs the same
everywhere, and a suite that silently compared two runtimes out of three would report a broken
installation as conforming.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import trama
from trama import INPUT, Model, Node, Parameter, Ref, Tensor
from trama.catalog import HALF_PRECISION, standard_specs
from trama.format import OpSpec, numpy_dtype

__all__ = [
    "DEFAULT_TOLERANCE",
    "DTYPE_EXCEPTIONS",
    "HALF_DTYPES",
    "RUNTIMES",
    "TOLERANCES",
    "Case",
    "DtypeException",
    "ErrorLog",
    "Tolerance",
    "assert_agree",
    "assert_within_half_tolerance",
    "catalog_leaves",
    "in_float32",
    "in_half",
    "normalize",
    "one_node_model",
    "prepare_everywhere",
    "runtime",
    "spec_of",
]

#: The runtimes that must agree: the reference numpy one and the two framework runtimes.
RUNTIMES: tuple[str, ...] = ("numpy", "torch:cpu", "jax:cpu")


@dataclass(frozen=True, slots=True)
class Tolerance:
    """How close two float32 results must be (``numpy.testing.assert_allclose``'s rtol and atol),
    and why, when looser than the default."""

    rtol: float = 1e-5
    atol: float = 1e-5
    reason: str = ""


#: float32 results agree to 1e-5, relative and absolute; integer and bool results exactly.
DEFAULT_TOLERANCE = Tolerance()

#: The documented exceptions, by op (README.md repeats this table with the measured errors).
#: Every entry must say why the op is ill-conditioned at the inputs the suite generates.
TOLERANCES: dict[str, Tolerance] = {}


@dataclass(frozen=True, slots=True)
class DtypeException:
    """A runtime that gives ``given`` where the catalog says ``catalog`` (values must still be
    equal), and why. Only integer dtypes: a float result narrowed would change its values."""

    runtime: str
    catalog: np.dtype[Any]
    given: np.dtype[Any]
    reason: str


#: The documented dtype exceptions (README.md, "Documented exceptions").
DTYPE_EXCEPTIONS: tuple[DtypeException, ...] = (
    DtypeException(
        "jax:cpu",
        np.dtype(np.int64),
        np.dtype(np.int32),
        "JAX has no 64-bit types outside its x64 mode, a process-wide switch that trama-jax leaves to the user "
        "(packages/trama-jax/src/trama_jax/functions.py): int64 results (argmax, integer sums, int64 inputs) are "
        "int32. The values are compared exactly, and the suite's integers all fit in 32 bits.",
    ),
)


@functools.cache
def _leaf_specs() -> dict[str, OpSpec]:
    return {spec.name: spec for spec in standard_specs() if not spec.composite}


def catalog_leaves() -> frozenset[str]:
    """The names of the standard catalog's leaf ops (composites run as their wiring)."""
    return frozenset(_leaf_specs())


def spec_of(op: str) -> OpSpec:
    return _leaf_specs()[op]


def runtime(name: str) -> trama.Runtime:
    """The runtime ``name``; a missing one fails the calling test with what is installed."""
    try:
        return trama.runtime_for_name(name)
    except trama.RuntimeNotFoundError as error:
        pytest.fail(
            f"the conformance suite compares {', '.join(RUNTIMES)}, but runtime {name!r} is not available "
            f"({error}). Install the framework package that provides it (make setup).",
            pytrace=False,
        )


@dataclass(frozen=True)
class Case:
    """One op applied once: its settings and tensors (``slots``), the values on its input ports
    (``inputs``, which become model inputs of the same names), the values on ports fed by a
    ``constant`` node instead (``constants``: what a tracer writes for a value fixed in the
    source, such as ``x[:, [0, 2]]``'s index list), and which outputs to compare (``None``:
    every output of the op's spec)."""

    op: str
    inputs: Mapping[str, Any]
    slots: Mapping[str, Any] = field(default_factory=dict)
    outputs: tuple[str, ...] | None = None
    constants: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # numpy arithmetic on 0-d arrays gives numpy scalars; a case holds them as 0-d arrays
        for name in ("inputs", "slots", "constants"):
            object.__setattr__(self, name, {k: _as_array(v) for k, v in getattr(self, name).items()})

    def output_names(self) -> tuple[str, ...]:
        return self.outputs if self.outputs is not None else tuple(spec_of(self.op).outputs)


def _as_array(value: Any) -> Any:
    """A numpy scalar as a 0-d array, a tuple element by element; anything else as it is."""
    if isinstance(value, np.generic):
        return np.asarray(value)
    if isinstance(value, tuple):
        return tuple(_as_array(item) for item in value)
    return value


def _entry(schema_learnable: bool | None, value: Any) -> Parameter:
    """A table entry: arrays become tensors. A slot whose flag is free ("either") is learnable
    exactly when it holds a tensor, as an exporter writes a weight or a frozen number."""
    if isinstance(value, np.ndarray):
        value = Tensor.from_array(value)
    learnable = isinstance(value, Tensor) if schema_learnable is None else schema_learnable
    return Parameter(value, learnable=learnable)


def one_node_model(case: Case) -> Model:
    """A model of the node ``"op"``: each input port wired from the model input of the same name
    (or from a ``constant`` node ``const_<port>`` for the ports of ``case.constants``), each slot
    from its own table entry ``op.<slot>``, the compared outputs exposed."""
    spec = spec_of(case.op)
    table: dict[str, Parameter] = {}
    nodes: list[Node] = []
    wiring = {port: Ref(INPUT, port) for port in case.inputs}
    for port, value in case.constants.items():
        nodes.append(Node(f"const_{port}", "constant", {}, ["y"], {"value": f"const_{port}.value"}))
        table[f"const_{port}.value"] = _entry(None, value)
        wiring[port] = Ref(f"const_{port}", "y")
    for slot, value in case.slots.items():
        schema = spec.slot(slot)
        assert schema is not None, f"{case.op} has no slot {slot!r}"
        table[f"op.{slot}"] = _entry(schema.learnable, value)
    parameters = {slot: f"op.{slot}" for slot in case.slots}
    nodes.append(Node("op", case.op, inputs=wiring, outputs=list(spec.outputs), parameters=parameters))
    outputs = [Ref("op", output) for output in case.output_names()]
    return Model(inputs=list(case.inputs), outputs=outputs, nodes=nodes, parameters=table)


def prepare_everywhere(model: Model) -> dict[str, trama.Runnable]:
    """``model`` prepared on every runtime of :data:`RUNTIMES`, by name."""
    return {name: runtime(name).prepare(model) for name in RUNTIMES}


def normalize(value: Any) -> Any:
    """A runtime's output as plain data to compare: a tensor of any framework as a numpy array
    (a torch tensor through ``detach().cpu()``), a tuple or list element by element; Python
    numbers, strings and ``None`` stay what they are (the catalog keeps them as Python values)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, list)):
        return type(value)(normalize(item) for item in value)
    detach = getattr(value, "detach", None)
    if callable(detach):
        tensor = detach().cpu()
        if str(tensor.dtype) == "torch.bfloat16":  # torch's numpy() has no bfloat16: exact through float32
            return tensor.float().numpy().astype(numpy_dtype("bfloat16"))
        value = tensor.numpy()
    return np.asarray(value)


class ErrorLog:
    """The largest absolute difference seen per op between two runtimes, over all examples: the
    figures README.md reports, printed by the test modules at the end (``pytest -s``)."""

    def __init__(self) -> None:
        self.largest: dict[str, float] = {}

    def note(self, key: str, error: float) -> None:
        self.largest[key] = max(self.largest.get(key, 0.0), error)

    def report(self, title: str) -> str:
        width = max(map(len, self.largest), default=0)
        lines = [f"{title}:"]
        lines += [f"  {key:<{width}}  {error:.3g}" for key, error in sorted(self.largest.items())]
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class _Comparison:
    """Compares the outputs of two runtimes (``pair``) for one op or model (``key``)."""

    pair: tuple[str, str]
    tolerance: Tolerance
    log: ErrorLog | None
    key: str

    def same(self, a: Any, b: Any, where: str) -> None:
        """``a`` and ``b`` are the same value: same kind, dtype (up to a documented exception)
        and shape, floats within the tolerance (NaN where the other has NaN), the rest exactly."""
        if a is None or b is None or isinstance(a, (bool, int, float, str)):
            self._same_python(a, b, where)
        elif isinstance(a, (tuple, list)):
            assert type(a) is type(b), f"{where}: {a!r} vs {b!r}"
            assert len(a) == len(b), f"{where}: {a!r} vs {b!r}"
            for k, (x, y) in enumerate(zip(a, b, strict=True)):
                self.same(x, y, f"{where}[{k}]")
        else:
            assert isinstance(b, np.ndarray), f"{where}: an array vs {b!r} ({type(b).__name__})"
            self._same_array(a, b, where)

    def _same_python(self, a: Any, b: Any, where: str) -> None:
        assert type(a) is type(b), f"{where}: {a!r} ({type(a).__name__}) vs {b!r} ({type(b).__name__})"
        if isinstance(a, float) and not (math.isnan(a) and math.isnan(b)):
            close = math.isclose(a, b, rel_tol=self.tolerance.rtol, abs_tol=self.tolerance.atol)
            assert close, f"{where}: {a!r} vs {b!r}"
        elif not isinstance(a, float):
            assert a == b, f"{where}: {a!r} vs {b!r}"

    def _same_array(self, a: np.ndarray, b: np.ndarray, where: str) -> None:
        if a.dtype != b.dtype:
            assert self._excused(a.dtype, b.dtype), f"{where}: dtype {a.dtype} vs {b.dtype}"
            a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        assert a.shape == b.shape, f"{where}: shape {list(a.shape)} vs {list(b.shape)}"
        if a.dtype.kind != "f":
            np.testing.assert_array_equal(a, b, err_msg=where)
            return
        both = np.isfinite(a) & np.isfinite(b)
        error = float(np.max(np.abs(a[both].astype(np.float64) - b[both]), initial=0.0))
        if self.log is not None:
            self.log.note(self.key, error)
        message = f"{where} (max abs error {error:.3g})"
        rtol, atol = self.tolerance.rtol, self.tolerance.atol
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True, err_msg=message)

    def _excused(self, first: np.dtype[Any], second: np.dtype[Any]) -> bool:
        """Whether a documented exception (:data:`DTYPE_EXCEPTIONS`) covers this dtype pair."""
        sides = ((self.pair[0], first), (self.pair[1], second))
        return any(
            runtime_b == exception.runtime
            and runtime_a != exception.runtime
            and (dtype_a, dtype_b) == (exception.catalog, exception.given)
            for exception in DTYPE_EXCEPTIONS
            for (runtime_a, dtype_a), (runtime_b, dtype_b) in (sides, sides[::-1])
        )


def assert_agree(
    results: Mapping[str, Sequence[Any]],
    names: Sequence[str],
    *,
    tolerance: Tolerance = DEFAULT_TOLERANCE,
    log: ErrorLog | None = None,
    key: str = "",
) -> None:
    """Every pair of runtimes gave the same outputs (``results``: outputs by runtime name, in the
    order ``names`` names them). Pairs, not each against a reference: a disagreement then names
    the two runtimes involved, whichever they are."""
    normalized = {runtime: [normalize(value) for value in values] for runtime, values in results.items()}
    for (first, a), (second, b) in itertools.combinations(normalized.items(), 2):
        assert len(a) == len(b) == len(names), f"{first} gave {len(a)} outputs, {second} {len(b)}, expected {names}"
        comparison = _Comparison((first, second), tolerance, log, key)
        for name, x, y in zip(names, a, b, strict=True):
            comparison.same(x, y, f"output {name!r}: {first} vs {second}")


# --- Half precision ---------------------------------------------------------------------------

#: The 16-bit float dtypes, which the catalog computes in float32 (``docs/ops.md``, "Half precision").
HALF_DTYPES: tuple[str, ...] = tuple(HALF_PRECISION)

_FLOAT32 = np.dtype(np.float32)


def _recast(value: Any, source: np.dtype[Any], target: np.dtype[Any]) -> Any:
    """``value`` with every array of dtype ``source`` (in tuples and lists too) cast to ``target``."""
    if isinstance(value, np.ndarray):
        return value.astype(target) if value.dtype == source else value
    if isinstance(value, (tuple, list)):
        return type(value)(_recast(item, source, target) for item in value)
    return value


def _recast_case(case: Case, source: np.dtype[Any], target: np.dtype[Any]) -> Case:
    def each(values: Mapping[str, Any]) -> dict[str, Any]:
        return {name: _recast(value, source, target) for name, value in values.items()}

    return Case(case.op, each(case.inputs), each(case.slots), case.outputs, each(case.constants))


def _holds(value: Any, dtype: np.dtype[Any]) -> bool:
    """Whether ``value`` is, or holds in a tuple or list, an array of ``dtype``."""
    if isinstance(value, np.ndarray):
        return value.dtype == dtype
    return isinstance(value, (tuple, list)) and any(_holds(item, dtype) for item in value)


def _fits(value: Any, dtype: np.dtype[Any]) -> bool:
    """Whether every finite float32 value in ``value`` stays finite in ``dtype``."""
    if isinstance(value, np.ndarray):
        if value.dtype != _FLOAT32:
            return True
        with np.errstate(over="ignore"):
            return not np.any(np.isfinite(value) & np.isinf(value.astype(dtype)))
    return not isinstance(value, (tuple, list)) or all(_fits(item, dtype) for item in value)


def in_half(case: Case, dtype: str) -> Case | None:
    """``case`` with every float32 tensor (inputs, slots, constants) rounded to the 16-bit
    ``dtype``; ``None`` when it has none, and so nothing to compute in half precision, or when
    one of its values lies beyond the dtype's range (``-1e9`` in float16)."""
    values = (*case.inputs.values(), *case.slots.values(), *case.constants.values())
    if not any(_holds(value, _FLOAT32) for value in values):
        return None
    if not all(_fits(value, numpy_dtype(dtype)) for value in values):
        return None
    return _recast_case(case, _FLOAT32, numpy_dtype(dtype))


def in_float32(case: Case, dtype: str) -> Case:
    """A case of :func:`in_half` with its 16-bit tensors back in float32, exactly: the values whose
    float32 computation the half-precision results are compared with."""
    return _recast_case(case, numpy_dtype(dtype), _FLOAT32)


def assert_within_half_tolerance(
    results: Mapping[str, Sequence[Any]],
    reference: Sequence[Any],
    names: Sequence[str],
    dtype: str,
    t: float,
    *,
    log: ErrorLog | None = None,
    key: str = "",
) -> None:
    """Every runtime's outputs for 16-bit inputs (``results``) are within the catalog's tolerance
    of the float32 computation of the same values (``reference``): a float32 reference value gives
    a value of ``dtype`` with ``|y − y₃₂| ≤ t · (1 + |y₃₂|)`` (``assert_allclose`` with ``rtol =
    atol = t``; NaN where the reference has NaN, ±inf where its value lies beyond ``dtype``'s range),
    anything else the same value exactly (a documented dtype exception allowed)."""
    expected = [normalize(value) for value in reference]
    for name, values in results.items():
        outputs = [normalize(value) for value in values]
        assert len(outputs) == len(expected) == len(names), f"{name} gave {len(outputs)} outputs, expected {names}"
        for port, y, y32 in zip(names, outputs, expected, strict=True):
            where = f"output {port!r} of {name} in {dtype}"
            if not isinstance(y32, np.ndarray) or y32.dtype != _FLOAT32:
                _Comparison(("numpy", name), DEFAULT_TOLERANCE, None, key).same(y32, y, where)
                continue
            assert isinstance(y, np.ndarray), f"{where}: {y!r} ({type(y).__name__}), expected an array"
            assert y.dtype == numpy_dtype(dtype), f"{where}: dtype {y.dtype}, expected {dtype}"
            assert y.shape == y32.shape, f"{where}: shape {list(y.shape)} vs {list(y32.shape)}"
            with np.errstate(over="ignore"):
                beyond = np.isfinite(y32) & np.isinf(y32.astype(y.dtype).astype(_FLOAT32))
            target = np.where(beyond, np.copysign(np.inf, y32), y32)
            wide = y.astype(np.float64)
            both = np.isfinite(wide) & np.isfinite(target)
            error = float(np.max(np.abs(wide[both] - target[both]) / (1 + np.abs(target[both])), initial=0.0))
            if log is not None:
                log.note(f"{key} {dtype} {name}", error)
            message = f"{where} (largest |y − y₃₂| / (1 + |y₃₂|): {error:.3g}, allowed {t:.3g})"
            np.testing.assert_allclose(wide, target, rtol=t, atol=t, equal_nan=True, err_msg=message)
