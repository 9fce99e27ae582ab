"""Binding a call's arguments to a torch signature, with Python's own rules.

A traced call arrives as ``(args, kwargs)`` exactly as the source wrote it: ``torch.add(x, y,
alpha=2)``, ``x.add(y)``, ``F.softmax(x, dim=1)``, ``attn(q, k, v, need_weights=False)``. Before
anything can be mapped to ports and slots, each value must be known by its torch argument name,
with torch's defaults for what the call left out. :class:`inspect.Signature` does exactly that,
so signatures are written once, in Python syntax (``"input, other, *, alpha=1"``), and a call that
torch itself would refuse (an unknown keyword, a missing argument) becomes a
:class:`trama.ExportError` naming the function instead of a ``TypeError`` from deep inside.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Mapping
from typing import Any

from trama import ExportError

__all__ = ["bind_arguments", "signature"]


def signature(parameters: str) -> inspect.Signature:
    """The signature of ``def f(<parameters>)``; defaults must be literals (``None``, ``0.01``, ``()``)."""
    tree = ast.parse(f"def f({parameters}): pass")
    function = tree.body[0]
    assert isinstance(function, ast.FunctionDef)
    arguments = function.args
    result: list[inspect.Parameter] = []
    positional = arguments.args
    defaults = [inspect.Parameter.empty] * (len(positional) - len(arguments.defaults)) + [
        ast.literal_eval(node) for node in arguments.defaults
    ]
    for arg, default in zip(positional, defaults, strict=True):
        result.append(inspect.Parameter(arg.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default))
    if arguments.vararg is not None:
        result.append(inspect.Parameter(arguments.vararg.arg, inspect.Parameter.VAR_POSITIONAL))
    for arg, default_node in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True):
        default = inspect.Parameter.empty if default_node is None else ast.literal_eval(default_node)
        result.append(inspect.Parameter(arg.arg, inspect.Parameter.KEYWORD_ONLY, default=default))
    return inspect.Signature(result)


def bind_arguments(
    sig: inspect.Signature, args: tuple[Any, ...], kwargs: Mapping[str, Any], *, what: str, defaults: bool = True
) -> dict[str, Any]:
    """The call's arguments by name, with the defaults of those it leaves out unless ``defaults``
    is false; ``what`` names the callee in errors."""
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as exc:
        raise ExportError(f"{what}: {exc} (the call does not match {what}{sig})") from None
    if defaults:
        bound.apply_defaults()
    return dict(bound.arguments)
