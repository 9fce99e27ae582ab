"""Inputs checked before a run, and the sizes they bind.

Every runtime checks each input against the document's input facts before any kernel sees it
(:func:`check_inputs`): its rank, its dtype, each fixed size, and that a symbol names one size
wherever it appears (``input_ids`` and ``attention_mask`` share ``batch`` and ``seq``) within
the range the document gives it (``seq <= 64``). A mismatch is one :class:`~trama.ExecutionError`
naming the input, the axis, what the file expects and what came, where a framework would fail
later, deep inside a node, or not at all (a rank-3 ``input_ids`` ran silently).

What the check binds, each symbol's size, is what the sizes of the document
(:class:`~trama.format.SizeExpr`) are computed from: runtimes run a model inside
:func:`bound_sizes`, and a node whose settings depend on the sizes builds its kernel for the
binding it finds there (:mod:`trama.conversion._sized`).

Dtypes are strict for arrays (a float64 array is not a float32 input; cast it, as you would
for ONNX Runtime), and a Python list or number, which has no dtype of its own, is converted to
the declared one where its values fit it exactly (:func:`as_declared`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trama.conversion._sized import bound_sizes, current_sizes
from trama.errors import ExecutionError, TramaError
from trama.format._model import Model, Node, ValueFact
from trama.format._sizes import SymbolRange, has_sizes, is_symbolic_int

__all__ = ["as_declared", "bound_sizes", "check_inputs", "current_sizes", "dtype_of", "sizes_of_top_node"]


def dtype_of(value: Any) -> str | None:
    """The format's name of an array's dtype (numpy, torch, JAX...), ``None`` for a value without
    one or with a dtype the format cannot store."""
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return None
    text = str(dtype)
    if text.startswith("torch."):
        return text[len("torch.") :]
    from trama.format._dtypes import dtype_name

    try:
        return dtype_name(dtype)
    except (TramaError, TypeError):
        return None


def as_declared(value: Any, fact: ValueFact | None, name: str = "", index: int | None = None) -> Any:
    """A Python list or number as an array of the declared dtype (it has none of its own; with
    no declared dtype, numpy's choice); anything else as it is. A list that is no tensor (rows
    of uneven lengths), or whose numbers the dtype cannot hold exactly (``1.5`` or ``2**40`` for
    an int32 input), is an :class:`~trama.ExecutionError` naming the input."""
    if fact is None or (fact.dtype is None and fact.shape is None) or not isinstance(value, (list, int, float, bool)):
        return value
    import numpy as np

    from trama.format._dtypes import numpy_dtype

    where = f"input {name!r}" if name else "an input"
    location = None if index is None else f"/input_facts/{index}"
    try:
        natural = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise ExecutionError(f"{where}: the list is no tensor ({exc})", location=location) from None
    if natural.dtype == object:
        raise ExecutionError(f"{where}: the list is no tensor (it holds {natural.dtype} values)", location=location)
    if fact.dtype is None:
        return natural
    wanted = numpy_dtype(fact.dtype)
    with np.errstate(all="ignore"):
        converted = natural.astype(wanted)
        exact = natural.dtype == wanted or bool(
            np.array_equal(converted.astype(natural.dtype), natural, equal_nan=True)
        )
    if not exact and (natural.dtype.kind in "iub" or wanted.kind in "iub"):
        raise ExecutionError(
            f"{where}: the file expects dtype {fact.dtype}, which cannot hold the list's values exactly",
            location=None if location is None else f"{location}/dtype",
        )
    return converted


def check_inputs(model: Model, values: Sequence[Any], *, dtypes: bool = True) -> dict[str, int]:
    """Check ``values`` (the model's inputs, in order) against the input facts and return the
    size each symbol is bound to. Raises one :class:`~trama.ExecutionError` for the first
    mismatch, located at the input's fact. ``dtypes=False`` leaves dtypes unchecked (a module
    traced by ``jax.jit`` sees int32 where the file says int64, JAX's default)."""
    facts = model.input_facts
    binding: dict[str, int] = {}
    if not facts:
        return binding
    where: dict[str, tuple[str, int]] = {}
    for index, (name, fact) in enumerate(zip(model.inputs, facts, strict=False)):
        if fact is None or index >= len(values):
            continue
        _check_one(name, index, fact if dtypes else ValueFact(None, fact.shape), values[index], binding, where)
    ranges = model.symbols or {}
    for symbol, size in binding.items():
        allowed = ranges.get(symbol, _ANY)
        if not allowed.admits(size):
            name, axis = where[symbol]
            raise ExecutionError(
                f"input {name!r}: axis {axis} is {symbol!r}, which the file allows as "
                f"{allowed.describe().replace('size', symbol)}, but it is {size}",
                location=f"/symbols/{symbol}",
            )
    return binding


_ANY = SymbolRange()


def sizes_of_top_node(model: Model, node: Node, ports: Mapping[str, Any]) -> dict[str, int] | None:
    """The sizes a top-level node's inputs bind, when it is called on its own (an imported
    module called directly, not through a runtime): its ports that read model inputs are those
    inputs. ``None`` when no setting of the document depends on the sizes, or a model input is
    not among the ports; the inputs are checked as :func:`check_inputs` checks them, but for
    their dtypes (the module's framework may hold them in its own)."""
    if node.parent is not None or not any(has_sizes(entry.value) for entry in model.parameters.values()):
        return None
    by_input = {ref.output: port for port, ref in node.inputs.items() if ref.is_input}
    if any(name not in by_input or by_input[name] not in ports for name in model.inputs):
        return None
    return check_inputs(model, [ports[by_input[name]] for name in model.inputs], dtypes=False)


def _check_one(
    name: str, index: int, fact: ValueFact, value: Any, binding: dict[str, int], where: dict[str, tuple[str, int]]
) -> None:
    location = f"/input_facts/{index}"
    shape = getattr(value, "shape", None)
    if shape is None:
        if fact.shape is not None or fact.dtype is not None:
            raise ExecutionError(
                f"input {name!r}: the file expects a tensor, got {type(value).__name__}", location=location
            )
        return
    if fact.dtype is not None:
        got = dtype_of(value)
        if got != fact.dtype:
            raise ExecutionError(
                f"input {name!r}: the file expects dtype {fact.dtype}, got {got or getattr(value, 'dtype', '?')}",
                location=f"{location}/dtype",
            )
    if fact.shape is None:
        return
    # A symbolic size (torch.export tracing) stays symbolic: int() would fix it at the example's.
    sizes = tuple(size if is_symbolic_int(size) else int(size) for size in shape)
    expected = fact.shape
    if len(sizes) != len(expected):
        raise ExecutionError(
            f"input {name!r}: the file expects rank {len(expected)} (shape {_shown(expected)}), "
            f"got rank {len(sizes)} (shape {list(sizes)})",
            location=f"{location}/shape",
        )
    for axis, (want, got_size) in enumerate(zip(expected, sizes, strict=True)):
        if isinstance(want, int):
            if want != got_size:
                raise ExecutionError(
                    f"input {name!r}: axis {axis} must be {want} (shape {_shown(expected)}), got {got_size} "
                    f"(shape {list(sizes)})",
                    location=f"{location}/shape/{axis}",
                )
            continue
        bound = binding.get(want)
        if bound is None:
            binding[want] = got_size
            where[want] = (name, axis)
        elif bound != got_size:
            first, first_axis = where[want]
            raise ExecutionError(
                f"input {name!r}: axis {axis} is {want!r}, which is {bound} in input {first!r} (axis "
                f"{first_axis}), but it is {got_size} here",
                location=f"{location}/shape/{axis}",
            )


def _shown(shape: Sequence[int | str]) -> str:
    return "[" + ", ".join(str(size) for size in shape) + "]"
