"""A document as a ``torch.export`` program: what ExecuTorch and AOTInductor take.

:func:`export_program` imports the document into torch (``trama.import_model``), makes example
inputs from its input facts, and traces the module with ``torch.export.export``, each symbol of
the facts a ``torch.export.Dim`` with the range the document gives it (``symbols``). A node whose
settings are sizes (``{"size": "seq + 1"}``) is built during the trace with those sizes symbolic
(:meth:`trama.conversion.SizedNode.build`), so the program computes them from its inputs' shapes
instead of fixing them at the example's: one ``.pt2`` file serves every size the document allows.

The program takes the document's inputs positionally, in the order of ``model.inputs``, and
returns its outputs (one tensor, or a tuple in the order of ``model.outputs``).
"""

from __future__ import annotations

import inspect
import keyword
import types
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

import trama
from trama.errors import ExportError, TramaError
from trama.execution import bound_sizes, check_inputs
from trama.format import Model, SymbolRange
from trama.format._validation import input_symbols
from trama_torch.tensors import TORCH_DTYPES, to_torch

__all__ = ["EXAMPLE_SIZE", "example_inputs", "export_program"]

#: The size each symbol takes in the example inputs unless its range or the caller says otherwise:
#: neither 0 nor 1, which torch.export would fix (it specializes sizes 0 and 1), and small.
EXAMPLE_SIZE = 7


class _Program(nn.Module):
    """The document's top module, its sizes bound from its inputs around each call.

    ``trama.import_model``'s top module binds them in a forward hook, which ``torch.export``
    does not call; here they are bound in ``forward`` itself, symbolic while it traces."""

    def __init__(self, module: nn.Module, model: Model) -> None:
        super().__init__()
        self.module = module
        self._model = model

    def forward(self, *inputs: Any) -> Any:
        with bound_sizes(check_inputs(self._model, inputs, dtypes=False)):
            return self.module(*inputs)


def _named(program: _Program, model: Model) -> _Program:
    """``program`` with a ``forward`` whose signature names the document's inputs, so that the
    exported program's inputs are ``input_ids``, ``attention_mask``, not ``inputs_0``, … (names
    that are no Python identifiers keep the positional ones)."""
    if not all(name.isidentifier() and not keyword.iskeyword(name) for name in model.inputs):
        return program
    if len(set(model.inputs)) != len(model.inputs) or "self" in model.inputs:
        return program

    def forward(self: _Program, *inputs: Any) -> Any:
        return _Program.forward(self, *inputs)

    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    parameters += [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in model.inputs]
    forward.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    program.forward = types.MethodType(forward, program)  # type: ignore[method-assign]
    return program


def export_program(
    model: Model,
    *,
    sizes: Mapping[str, int] | None = None,
    inputs: Sequence[Any] | None = None,
) -> torch.export.ExportedProgram:
    """``model`` traced by ``torch.export.export``, its symbolic sizes dynamic.

    ``sizes`` sets a symbol's size in the example inputs (default :data:`EXAMPLE_SIZE`, kept within
    the symbol's range); ``inputs`` gives the example inputs themselves (arrays or tensors, in the
    order of ``model.inputs``), where the input facts do not say enough to make them. Raises
    :class:`trama.ExportError` for a document with several top-level nodes, an input without a
    dtype and shape (and no ``inputs``), or a trace torch refuses (its message kept)."""
    from trama.conversion import import_model

    tops = [node for node in model.nodes if node.parent is None]
    if len(tops) != 1:
        raise ExportError(
            f"torch.export traces one module, and this document has {len(tops)} top-level nodes "
            f"({', '.join(node.id for node in tops[:4])}{', …' if len(tops) > 4 else ''})"
        )
    module = import_model(model, registry=trama.registry("torch"))
    if not isinstance(module, nn.Module):
        raise ExportError(f"the document's top node imports as {type(module).__name__}, not a torch module")
    module.eval()
    examples = example_inputs(model, sizes) if inputs is None else [_as_tensor(value) for value in inputs]
    dynamic = _dynamic_shapes(model)
    from trama_torch.capture.program import attributes_assigned_in_forward

    try:
        with attributes_assigned_in_forward():
            return torch.export.export(
                _named(_Program(module, model), model), tuple(examples), dynamic_shapes=tuple(dynamic)
            )
    except TramaError:
        raise
    except Exception as exc:  # a size the program would fix, an op torch cannot trace: torch's first line
        lines = str(exc).strip().splitlines() or [""]
        raise ExportError(f"torch.export could not trace the document: {type(exc).__name__}: {lines[0]}") from exc


def example_inputs(model: Model, sizes: Mapping[str, int] | None = None) -> list[torch.Tensor]:
    """Example inputs from the input facts: each symbol at its example size, floats drawn from a
    seeded normal distribution, integers and booleans all ones (a valid token id, an attention
    mask that masks nothing)."""
    facts = model.input_facts or [None] * len(model.inputs)
    chosen = _example_sizes(model, sizes or {})
    generator = torch.Generator().manual_seed(0)
    made: list[torch.Tensor] = []
    for name, fact in zip(model.inputs, facts, strict=True):
        if fact is None or fact.dtype is None or fact.shape is None:
            raise ExportError(
                f"input {name!r} has no dtype and shape in the document's input_facts, so no example input can be "
                "made for torch.export: give the example inputs"
            )
        shape = [size if isinstance(size, int) else chosen[size] for size in fact.shape]
        dtype = TORCH_DTYPES[fact.dtype]
        if dtype.is_floating_point:
            made.append(torch.randn(shape, generator=generator).to(dtype))
        else:
            made.append(torch.ones(shape, dtype=dtype))
    return made


def _example_sizes(model: Model, sizes: Mapping[str, int]) -> dict[str, int]:
    named = sorted(input_symbols(model))
    unknown = sorted(set(sizes) - set(named))
    if unknown:
        raise ExportError(f"no input fact has the symbol {unknown[0]!r}; the document's symbols: {', '.join(named)}")
    ranges = model.symbols or {}
    chosen: dict[str, int] = {}
    for symbol in named:
        allowed = ranges.get(symbol, SymbolRange())
        size = sizes.get(symbol)
        if size is None:
            low = 2 if allowed.min is None else max(allowed.min, 2)
            size = max(low, EXAMPLE_SIZE if allowed.max is None else min(EXAMPLE_SIZE, allowed.max))
        elif not allowed.admits(size):
            raise ExportError(f"size {size} for {symbol!r} is outside its range in the document ({allowed.describe()})")
        chosen[symbol] = size
    return chosen


def _dynamic_shapes(model: Model) -> list[dict[int, Any]]:
    """One ``Dim`` per symbol, shared by every axis that has it, within the document's range."""
    ranges = model.symbols or {}
    dims: dict[str, Any] = {}
    shapes: list[dict[int, Any]] = []
    for fact in model.input_facts or [None] * len(model.inputs):
        axes: dict[int, Any] = {}
        for axis, size in enumerate(fact.shape if fact is not None and fact.shape is not None else ()):
            if isinstance(size, str):
                if size not in dims:
                    allowed = ranges.get(size, SymbolRange())
                    bounds = {"min": allowed.min if allowed.min is not None else 1}
                    if allowed.max is not None:
                        bounds["max"] = allowed.max
                    dims[size] = torch.export.Dim(_dim_name(size), **bounds)
                axes[axis] = dims[size]
        shapes.append(axes)
    return shapes


def _dim_name(symbol: str) -> str:
    # torch.export names its Dims after Python identifiers; a document's symbol is one already
    # (docs/format.md §5.6), but a few names are taken by torch's own code generation.
    return symbol if symbol not in {"s", "L"} else f"{symbol}_"


def _as_tensor(value: Any) -> torch.Tensor:
    return value if isinstance(value, torch.Tensor) else to_torch(np.asarray(value))
