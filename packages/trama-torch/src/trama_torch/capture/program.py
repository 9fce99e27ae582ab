"""Running ``torch.export`` on the model with the caller's example inputs, and its failures.

``trama.export_model(model, inputs=..., example_inputs=..., dynamic_shapes=...)`` hands the root
exporter the examples: a tuple goes to ``forward`` positionally, in the order of ``inputs``; a
dict as keyword arguments (transformers models take ``input_ids=``, ``attention_mask=``). trama's
``dynamic_shapes`` (``{input: {axis: symbol}}``) becomes one ``torch.export.Dim`` per symbol, so
that axes of one name are one size. When torch finds that a symbol needs a range (a position
table of 64 entries bounds the sequence length) it says so in a suggested fix, which is applied
once; a symbol that torch can only keep as a number is an error, since the document could not run
at another size.

The capture is non-strict (the real Python runs, on fake tensors), so a module's shape logic,
settings and dtype checks are resolved while capturing. What cannot be resolved (a branch on a
tensor's values) is an :class:`trama.ExportError` naming the module path, class and source line.
"""

from __future__ import annotations

import linecache
import os
import re
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from trama import ExportError
from trama_torch.capture.tree import Call, Recorder

__all__ = ["Captured", "attributes_assigned_in_forward", "run_export", "source_line"]

_TORCH_DIR = os.path.dirname(torch.__file__)
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_STDLIB_DIR = os.path.dirname(os.path.abspath(os.__file__))


@dataclass
class Captured:
    """The exported program, the calls recorded while capturing it, and how it was called."""

    program: torch.export.ExportedProgram
    recorder: Recorder
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    #: trama input name -> the example value it stands for
    examples: dict[str, Any]


def _examples(
    examples: tuple[Any, ...] | dict[str, Any], inputs: Sequence[str]
) -> tuple[tuple[Any, ...], dict[str, Any], dict[str, Any]]:
    if isinstance(examples, dict):
        return (), dict(examples), dict(examples)
    return tuple(examples), {}, dict(zip(inputs, examples, strict=True))


def _dims(
    dynamic: Mapping[str, Mapping[int, str]] | None,
    examples: tuple[Any, ...] | dict[str, Any],
    inputs: Sequence[str],
    where: str,
) -> Any:
    """trama's ``{input: {axis: symbol}}`` as torch.export's ``dynamic_shapes`` for the same call."""
    if not dynamic:
        return None
    dims: dict[str, Any] = {}

    def axes(name: str, value: Any) -> dict[int, Any] | None:
        wanted = dynamic.get(name)
        if not wanted:
            return None
        if not isinstance(value, torch.Tensor):
            raise ExportError(f"{where}: dynamic_shapes names {name!r}, whose example input is not a tensor")
        for axis in wanted:
            if axis >= value.dim():
                raise ExportError(
                    f"{where}: dynamic_shapes[{name!r}] names axis {axis}, but the example has {value.dim()} axes"
                )
        return {axis: dims.setdefault(symbol, torch.export.Dim(symbol)) for axis, symbol in wanted.items()}

    if isinstance(examples, dict):
        missing = sorted(set(dynamic) - set(examples))
        if missing:
            raise ExportError(f"{where}: dynamic_shapes names {missing}, for which example_inputs gives no value")
        return {name: axes(name, value) for name, value in examples.items()}
    return tuple(axes(name, value) for name, value in zip(inputs, examples, strict=True))


def run_export(
    model: nn.Module,
    examples: tuple[Any, ...] | dict[str, Any],
    dynamic: Mapping[str, Mapping[int, str]] | None,
    inputs: Sequence[str],
    where: str,
    claimed: Callable[[nn.Module], bool] | None = None,
) -> Captured:
    """Capture ``model`` with ``torch.export`` (non-strict), recording its module calls; a
    module ``claimed`` says an exporter handles is recorded whole, its inside not shown."""
    args, kwargs, by_name = _examples(examples, inputs)
    shapes = _dims(dynamic, examples, inputs, where)
    recorder = Recorder(model, claimed)
    recorder.install()
    try:
        program = None
        for _ in range(_REFINEMENTS):
            try:
                program = _export(model, args, kwargs, shapes)
                break
            except Exception as exc:
                refined = _refined(exc, shapes)
                if refined is None:
                    raise
                shapes = refined
                recorder.reset()
        if program is None:
            program = _export(model, args, kwargs, shapes)
    except ExportError:
        raise
    except Exception as exc:
        raise _capture_error(exc, recorder, where) from exc
    finally:
        recorder.remove()
    return Captured(program, recorder, args, kwargs, by_name)


#: How many times torch's suggested ranges are taken before its error is the capture's: a fix can
#: reveal the next guard (GPT-Neo's ``sequence <= 128``, then ``sequence != 128``).
_REFINEMENTS = 4


def _export(
    model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], shapes: Any
) -> torch.export.ExportedProgram:
    with attributes_assigned_in_forward():
        return torch.export.export(model, args, kwargs, dynamic_shapes=shapes, strict=False)


@contextmanager
def attributes_assigned_in_forward() -> Iterator[None]:
    """Silence torch's warning about tensors assigned to module attributes while it exports
    (pytorch/pytorch#163809): nn.LSTM/GRU rebuild their ``_flat_weights`` list from their
    registered parameters, timm's LeViT caches its attention bias in eval mode. It is harmless
    for trama: what is exported is computed from the registered state, which is read from the
    modules, never from such attributes."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r"The tensor attributes .* were assigned during export", category=UserWarning
        )
        yield


def _refined(exc: Exception, shapes: Any) -> Any:
    """torch's suggested fix for the dynamic shapes (a range for a symbol), if it gave one."""
    message = str(exc)
    if shapes is None:
        return None
    if "Suggested fixes:" not in message:
        return _below_excluded(message, shapes)
    head, _, tail = message.partition("Suggested fixes:")
    fixes = []
    for line in tail.splitlines()[1:]:
        if " = " not in line:
            break
        fixes.append(line)
    if not fixes:
        return None
    try:
        return torch.export.dynamic_shapes.refine_dynamic_shapes_from_suggested_fixes(
            "\n".join([f"{head}Suggested fixes:", *fixes]), shapes
        )
    except Exception:
        return None


_EXCLUDED = re.compile(
    r"values of (\w+) = .* in the specified range \1 <= (\d+) satisfy the generated guard .* != \2\."
)


def _below_excluded(message: str, shapes: Any) -> Any:
    """A symbol whose range torch bounded at ``n`` and whose guard then excludes ``n`` itself
    (GPT-Neo's local attention: ``sequence <= 128`` and ``sequence != 128``): its range ends at
    ``n - 1``, which torch does not suggest."""
    found = _EXCLUDED.search(message)
    if found is None:
        return None
    name, bound = found.group(1), int(found.group(2))

    def narrowed(dim: Any) -> Any:
        if getattr(dim, "__name__", None) != name:
            return dim
        return torch.export.Dim(name, min=getattr(dim, "min", 0), max=bound - 1)

    return {
        key: ({axis: narrowed(dim) for axis, dim in axes.items()} if isinstance(axes, dict) else axes)
        for key, axes in shapes.items()
    }


def source_line(trace: str | None) -> str | None:
    """``file.py:12: code`` for the innermost frame of a node's ``stack_trace``."""
    if not trace:
        return None
    lines = trace.strip().splitlines()
    for index in range(len(lines) - 1, -1, -1):
        line = lines[index].strip()
        if line.startswith("File "):
            parts = line.split('"')
            path = parts[1] if len(parts) > 2 else "?"
            number = line.rsplit("line ", 1)[-1].split(",")[0].strip()
            code = lines[index + 1].strip() if index + 1 < len(lines) else ""
            return f"{os.path.basename(path)}:{number}: {code}" if code else f"{os.path.basename(path)}:{number}"
    return None


def _user_frame(exc: BaseException) -> str | None:
    """``file.py:12: code`` of the innermost frame of the model's code: outside torch, trama_torch
    and Python's standard library."""
    found = None
    for frame, line in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename.startswith("<"):
            continue
        filename = os.path.abspath(frame.f_code.co_filename)
        if filename.startswith((_TORCH_DIR, _PACKAGE_DIR, _STDLIB_DIR)):
            continue
        code = linecache.getline(filename, line).strip()
        found = f"{os.path.basename(filename)}:{line}" + (f": {code}" if code else "")
    return found


def _data_dependent(exc: BaseException) -> bool:
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, GuardOnDataDependentSymNode) or "data-dependent" in str(current).split("\n")[0]:
            return True
        current = current.__cause__ or current.__context__
    return False


def _capture_error(exc: Exception, recorder: Recorder, where: str) -> ExportError:
    """One line: which module, which source line, why, and what to do."""
    call: Call | None = recorder.innermost()
    who = call.described() if call is not None else where
    line = _user_frame(exc)
    at = f" (at {line})" if line else ""
    if _data_dependent(exc):
        return ExportError(
            f"cannot export {who}: its forward branches on a tensor's values{at}, which one captured graph "
            "cannot hold; make the branch depend on shapes, dtypes or settings only (those are resolved at "
            "capture), or leave it out of the exported module"
        )
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    hint = ""
    if "cache_utils" in first or "Cache'>" in first:
        # transformers' generation cache (DynamicCache...) is returned by forward: no tensor tree
        hint = (
            "; a transformers model returns its generation cache unless told not to: set "
            "model.config.use_cache = False (or pass use_cache=False), then export"
        )
    return ExportError(
        f"cannot export {who}: torch.export could not capture it{at}: {type(exc).__name__}: {first}{hint}"
    )
