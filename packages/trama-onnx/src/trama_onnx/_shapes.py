"""What the lowering knows about every leaf's inputs before it lowers anything: the shape pass.

An ONNX node needs to know the dtype and the rank of what it reads (a ``Softmax`` of a 0-d
tensor, a convolution of an unbatched input, torch's type promotion of ``int32 + 2.5``), and a
trama document records neither for its inner values. So the document is run once on the numpy
reference runtime, on inputs made from its input facts (each symbolic axis the size
``trama.tools`` uses, 2 moved into the symbol's range), and every leaf's inputs and outputs are
recorded as it runs: dtype, rank and shape. Ranks and dtypes do not change with the sizes.

Where the document has symbolic axes it is run a second time with other sizes, and the shapes of
the two runs are compared: an axis of the same size in both is that number, an axis that follows
one symbol in both is that symbol, anything else is unknown (``None``). Lowerings read static
sizes from there, and output facts the document leaves out get their symbols back.

A Python number on a port (a ``constant`` holding ``2.5``) is recorded with the dtype it is lowered
to (int64, float32 or bool, rank 0) and its Python type, which promotes more weakly than a tensor.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from trama.errors import TramaError
from trama.format import Model

__all__ = ["ShapeFacts", "ValueInfo", "example_sizes", "shape_pass"]


class ValueInfo(NamedTuple):
    """A value's dtype (a format dtype name), rank and shape (each axis an int, a symbol's name,
    or ``None`` where its size changes with the input sizes in some other way)."""

    dtype: str | None
    rank: int
    shape: tuple[int | str | None, ...]


#: A Python number's dtype once lowered (it becomes a 0-d tensor of that dtype).
_NUMBER_DTYPES: dict[type, str] = {bool: "bool", int: "int64", float: "float32"}


@dataclass
class ShapeFacts:
    """What the shape pass recorded, by leaf id (the ids of an expanded call's copies included)."""

    #: Each leaf's input ports, ``None`` for a value that is no tensor or number (a string, a tuple).
    inputs: dict[str, dict[str, ValueInfo | None]] = field(default_factory=dict)
    #: Each leaf's outputs.
    outputs: dict[str, dict[str, ValueInfo | None]] = field(default_factory=dict)
    #: The Python type of each (leaf id, port) that received a Python value (a number, a list...).
    python: dict[tuple[str, str], type] = field(default_factory=dict)
    #: The model's outputs in the first run (for the ones that are Python values).
    model_outputs: list[Any] = field(default_factory=list)
    #: The size each symbol had in the first run.
    binding: dict[str, int] = field(default_factory=dict)
    #: Why nothing was recorded (the document does not run on numpy), or ``None``.
    failure: str | None = None
    #: The trama error the run raised, when it raised one.
    error: TramaError | None = None

    def static_output(self, index: int) -> tuple[bool, Any]:
        """Whether model output ``index`` is a Python value (not a tensor), and that value."""
        if self.failure is not None or index >= len(self.model_outputs):
            return False, None
        value = self.model_outputs[index]
        return (not _is_array(value)), value


def _is_array(value: Any) -> bool:
    import numpy as np

    return isinstance(value, (np.ndarray, np.generic))


def example_sizes(model: Model) -> tuple[dict[str, int], dict[str, int]]:
    """Two bindings of the model's symbols for the two runs: the first as ``trama.tools`` picks
    (2, moved into the symbol's range), the second other sizes, distinct from each other where
    the ranges allow, so that the runs tell the symbols apart."""
    symbols: list[str] = []
    for fact in model.input_facts or ():
        for size in (fact.shape or ()) if fact is not None else ():
            if isinstance(size, str) and size not in symbols:
                symbols.append(size)
    ranges = model.symbols or {}
    first: dict[str, int] = {}
    second: dict[str, int] = {}
    for symbol in symbols:
        bounds = ranges.get(symbol)
        low = 1 if bounds is None or bounds.min is None else max(bounds.min, 0)
        high = None if bounds is None else bounds.max
        size = max(2, low)
        if high is not None:
            size = min(size, high)
        first[symbol] = size
        taken = set(second.values())
        candidates = [size + step for step in range(1, 12)] + [size - step for step in range(1, size)]
        chosen = size
        for candidate in candidates:
            if candidate >= low and (high is None or candidate <= high) and candidate not in taken:
                chosen = candidate
                break
        second[symbol] = chosen
    return first, second


def shape_pass(model: Model, inputs: Mapping[str, Any] | None = None) -> ShapeFacts:
    """Run ``model`` on numpy (once on ``inputs`` when given, else on example inputs from its facts,
    twice where it has symbols) and record every leaf's inputs and outputs. A document that does
    not run on numpy (an op numpy lacks, inputs the facts do not describe) gives facts with
    :attr:`ShapeFacts.failure` set: lowerings that ask for them then say why there are none."""
    facts = ShapeFacts()
    try:
        _record(model, inputs, facts)
    except TramaError as error:
        facts = ShapeFacts(failure=str(error), error=error)
    except Exception as error:  # a kernel's own exception: the document does not run here
        facts = ShapeFacts(failure=f"{type(error).__name__}: {error}")
    return facts


def _record(model: Model, inputs: Mapping[str, Any] | None, facts: ShapeFacts) -> None:
    from trama.execution import GraphRunnable, check_inputs, runtime_for_name
    from trama.tools._view import example_inputs

    runnable = runtime_for_name("numpy").prepare(model)
    if not isinstance(runnable, GraphRunnable):  # pragma: no cover - numpy's runnable walks the graph
        raise TramaError("the numpy runtime does not run the model leaf by leaf")
    if inputs is not None:
        values = [inputs[name] for name in model.inputs]
        facts.binding = check_inputs(model, values)
        _run(runnable, values, facts, keep=True)
        return
    first, second = example_sizes(model)
    example = example_inputs(model, first)
    values = [example[name] for name in model.inputs]
    facts.binding = dict(first)
    _run(runnable, values, facts, keep=True)
    if first != second:
        other = ShapeFacts()
        again = example_inputs(model, second)
        try:
            _run(runnable, [again[name] for name in model.inputs], other, keep=False)
        except Exception:  # sizes the document does not take: nothing is known of the symbolic axes
            _forget_sizes(facts)
        else:
            _merge(facts, other, first, second)


def _run(runnable: Any, values: list[Any], facts: ShapeFacts, *, keep: bool) -> None:
    import numpy as np

    steps = runnable.plan.steps
    kernels = [step.kernel for step in steps]
    try:
        for step in steps:
            step.kernel = _Recorder(step.kernel, step.node.id, facts)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            outputs = runnable.run(values)
    finally:
        for step, kernel in zip(steps, kernels, strict=True):
            step.kernel = kernel
    if keep:
        facts.model_outputs = list(outputs)


def info_of(value: Any) -> tuple[ValueInfo | None, type | None]:
    """A recorded value's info, and its Python type when it is no array."""
    import numpy as np

    from trama.execution import dtype_of

    if _is_array(value):
        array = np.asarray(value)
        return ValueInfo(dtype_of(array), array.ndim, tuple(int(d) for d in array.shape)), None
    kind = type(value)
    if kind in _NUMBER_DTYPES:
        return ValueInfo(_NUMBER_DTYPES[kind], 0, ()), kind
    if isinstance(value, list):
        try:
            array = np.asarray(value)
        except (TypeError, ValueError):
            return None, kind
        if array.dtype.kind in "biuf":
            dtype = "bool" if array.dtype.kind == "b" else ("float32" if array.dtype.kind == "f" else "int64")
            return ValueInfo(dtype, array.ndim, tuple(int(d) for d in array.shape)), kind
    return None, kind


class _Recorder:
    """Wraps one leaf's kernel for one run, noting what it reads and what it gives."""

    def __init__(self, kernel: Any, node_id: str, facts: ShapeFacts) -> None:
        self._kernel = kernel
        self._id = node_id
        self._facts = facts

    def __call__(self, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        self._note_inputs(inputs)
        outputs: Mapping[str, Any] = self._kernel(inputs)
        self._note_outputs(outputs)
        return outputs

    def initial_state(self) -> Any:
        return self._kernel.initial_state()

    def step(self, inputs: Mapping[str, Any], state: Any) -> tuple[Mapping[str, Any], Any]:
        self._note_inputs(inputs)
        outputs, new_state = self._kernel.step(inputs, state)
        self._note_outputs(outputs)
        return outputs, new_state

    def _note_inputs(self, inputs: Mapping[str, Any]) -> None:
        noted: dict[str, ValueInfo | None] = {}
        for port, value in inputs.items():
            info, python = info_of(value)
            noted[port] = info
            if python is not None:
                self._facts.python[(self._id, port)] = python
        self._facts.inputs[self._id] = noted

    def _note_outputs(self, outputs: Mapping[str, Any]) -> None:
        if isinstance(outputs, Mapping):
            self._facts.outputs[self._id] = {name: info_of(value)[0] for name, value in outputs.items()}


def _merged(
    one: ValueInfo | None, two: ValueInfo | None, symbols: Callable[[int, int], str | None]
) -> ValueInfo | None:
    if one is None or two is None or one.rank != two.rank:
        return one if one is None else ValueInfo(one.dtype, one.rank, (None,) * one.rank)
    shape: list[int | str | None] = []
    for a, b in zip(one.shape, two.shape, strict=True):
        if a == b:
            shape.append(a)
        else:
            shape.append(symbols(a, b) if isinstance(a, int) and isinstance(b, int) else None)
    return ValueInfo(one.dtype, one.rank, tuple(shape))


def _merge(facts: ShapeFacts, other: ShapeFacts, first: Mapping[str, int], second: Mapping[str, int]) -> None:
    """Keep in ``facts`` the axes both runs agree on; name the ones that follow a symbol."""
    by_pair: dict[tuple[int, int], list[str]] = {}
    for symbol in first:
        by_pair.setdefault((first[symbol], second[symbol]), []).append(symbol)

    def symbol_of(a: int, b: int) -> str | None:
        found = by_pair.get((a, b), [])
        return found[0] if len(found) == 1 else None

    for table, others in ((facts.inputs, other.inputs), (facts.outputs, other.outputs)):
        for node_id, ports in table.items():
            seen = others.get(node_id, {})
            for port, info in ports.items():
                ports[port] = _merged(info, seen.get(port), symbol_of)


def _forget_sizes(facts: ShapeFacts) -> None:
    """Every axis unknown (the second run failed, so no axis is known to be fixed)."""
    for table in (facts.inputs, facts.outputs):
        for ports in table.values():
            for port, info in ports.items():
                if info is not None:
                    ports[port] = ValueInfo(info.dtype, info.rank, (None,) * info.rank)
