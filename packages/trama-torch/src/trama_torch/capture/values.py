"""What a graph node of the captured program is, seen from one scope of the document.

Each node of ``torch.export``'s graph becomes, in the scope that reads it, one of these: a wire
(a value some node of the scope, or the scope's input, produces at run time), a tensor known at
capture (a constant the program built, or the state of a module, held by a ``constant`` node when
an op reads it), a symbolic size, a Python constant, or several values (a multi-output op).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from trama import Ref

__all__ = ["ConstTensor", "Several", "StateTensor", "Sym", "Wire", "is_runtime"]


@dataclass(frozen=True)
class Wire:
    """A value computed at run time: a reference valid in the current scope."""

    ref: Ref


@dataclass(frozen=True, eq=False)
class ConstTensor:
    """A tensor the program computed from constants alone (folded at capture)."""

    tensor: torch.Tensor
    name: str


@dataclass(frozen=True, eq=False)
class StateTensor:
    """A parameter or buffer of the model, read by the scope: a ``constant`` node whose entry is
    keyed by the tensor itself, so that every use of it shares one entry. ``name`` is the
    attribute path below the scope's module (``fc.weight``), or the model's when it is not below."""

    tensor: torch.Tensor
    name: str
    #: Whether ``name`` is a path below the scope's module (else it is the model's).
    below: bool = True


@dataclass(frozen=True)
class Sym:
    """A size torch.export kept symbolic: known only at run time, and not a tensor."""

    node: Any


@dataclass(frozen=True)
class Several:
    """The values of an op that gives a tuple (``split``), each mapped on its own."""

    items: tuple[Any, ...]


def is_runtime(value: Any) -> bool:
    """Whether ``value`` needs a port (is a wire or a tensor the document holds)."""
    return isinstance(value, (Wire, ConstTensor, StateTensor))
