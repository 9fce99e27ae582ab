"""Tensor values between torch and trama, and the cache that ties torch parameters to table entries.

Export copies every torch tensor into numpy, because the document must not change when the model
trains on afterwards, and keeps its dtype: bfloat16 included, which numpy knows only through
``ml_dtypes`` and which torch cannot hand to numpy directly. Import does the opposite.

Two slots that share a table entry receive the very same :class:`trama.Parameter` on import
(that is how the format says "tied"), and they must become the very same torch tensor again: a
tied embedding and LM head are one ``nn.Parameter`` in torch, and an optimizer must see one. The
:class:`TieCache` maps each entry to the tensor made from it. It holds both sides weakly: an
entry's line disappears when the entry is garbage-collected (``weakref.finalize``), and the
tensor lives only as long as the modules that use it, so neither a long-lived document nor an
abandoned import keeps tensors alive.

Consequence worth knowing: importing the same :class:`trama.Model` object twice while the first
import's modules are alive gives modules that share their parameters (the same entries, the same
tensors). Where independent copies are wanted (two placements of one model), import inside
:func:`parameter_scope`, which gives the imports in it a cache of their own.
"""

from __future__ import annotations

import contextlib
import contextvars
import weakref
from collections.abc import Callable, Iterator

import ml_dtypes
import numpy as np
import torch
from torch import nn

from trama import ExportError, Param, Parameter, Tensor
from trama.format import DTYPE_NAMES

__all__ = [
    "TORCH_DTYPES",
    "TieCache",
    "export_tensor",
    "parameter_scope",
    "tied_buffer",
    "tied_parameter",
    "to_numpy",
    "to_torch",
]

_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)

#: The format's dtype names as torch dtypes (each is the name of torch's attribute). A name a
#: document gives is looked up here, never with ``getattr(torch, name)``: a setting that
#: passed no check could otherwise reach any attribute of torch.
TORCH_DTYPES: dict[str, torch.dtype] = {name: getattr(torch, name) for name in DTYPE_NAMES}


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A numpy copy of a torch tensor's values, on the CPU, with its dtype (bfloat16 as ml_dtypes').

    A copy, never a view: exporting must freeze the values, whatever happens to the module later.
    Raises :class:`trama.ExportError` for tensors that have no values to copy (meta device) or a
    dtype numpy cannot hold (float8); the format's own dtype check comes after, when the copy is
    stored.
    """
    if tensor.device.type == "meta":
        raise ExportError(f"a tensor of shape {list(tensor.shape)} is on the meta device and has no values to export")
    values = tensor.detach().cpu().resolve_conj().resolve_neg()
    array: np.ndarray
    if values.dtype == torch.bfloat16:
        array = values.view(torch.int16).numpy().view(_BFLOAT16).copy()
        return array
    try:
        array = values.numpy().copy()
    except TypeError as exc:
        raise ExportError(f"a tensor of dtype {tensor.dtype} cannot be exported: {exc}") from None
    return array


def to_torch(value: Tensor | np.ndarray) -> torch.Tensor:
    """A fresh, writable CPU torch tensor with a trama tensor's (or array's) values and dtype.

    Fresh because trama's arrays are read-only and shared by every holder of the entry, while a
    torch tensor may be trained in place."""
    array = np.asarray(value)
    if array.dtype == _BFLOAT16:
        return torch.from_numpy(array.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(np.array(array, copy=True))


def export_tensor(tensor: torch.Tensor) -> Param:
    """A torch tensor as a slot value: a numpy copy, learnable when it is an ``nn.Parameter`` that
    requires grad, and keyed by the tensor object so that every slot holding it shares one entry."""
    learnable = isinstance(tensor, nn.Parameter) and tensor.requires_grad
    return Param(to_numpy(tensor), learnable=learnable, key=tensor)


class TieCache:
    """Which torch tensor each table entry became, so that slots sharing an entry share a tensor.

    Keyed by ``id(entry)`` and by kind (parameter or buffer: one entry used as both cannot be one
    torch object). Both sides are weak, as the module docstring explains.
    """

    def __init__(self) -> None:
        self._tensors: dict[tuple[int, bool], weakref.ref[torch.Tensor]] = {}
        self._watched: set[int] = set()

    def __len__(self) -> int:
        """The number of tensors remembered and still alive."""
        return sum(1 for ref in self._tensors.values() if ref() is not None)

    def tensor(self, entry: Parameter, *, as_parameter: bool, make: Callable[[], torch.Tensor]) -> torch.Tensor:
        """The tensor made from ``entry`` earlier in this cache if it is still alive, else ``make()``'s."""
        key = (id(entry), as_parameter)
        ref = self._tensors.get(key)
        tensor = ref() if ref is not None else None
        if tensor is None:
            tensor = make()
            if id(entry) not in self._watched:
                self._watched.add(id(entry))
                weakref.finalize(entry, self._forget, id(entry))
            self._tensors[key] = weakref.ref(tensor)
        return tensor

    def _forget(self, entry_id: int) -> None:
        """Drop an entry's lines once it is collected, before its id can name another object."""
        self._watched.discard(entry_id)
        for as_parameter in (False, True):
            self._tensors.pop((entry_id, as_parameter), None)


#: The cache of imports outside any :func:`parameter_scope`.
_SHARED = TieCache()
_SCOPED: contextvars.ContextVar[TieCache | None] = contextvars.ContextVar("trama_torch_tie_cache", default=None)


def _cache() -> TieCache:
    scoped = _SCOPED.get()
    return scoped if scoped is not None else _SHARED  # not ``or``: an empty cache is falsy


@contextlib.contextmanager
def parameter_scope() -> Iterator[TieCache]:
    """Imports inside this block tie parameters among themselves only, never to earlier imports."""
    cache = TieCache()
    token = _SCOPED.set(cache)
    try:
        yield cache
    finally:
        _SCOPED.reset(token)


def _tensor_value(entry: Parameter, what: str) -> Tensor:
    value = entry.value
    if not isinstance(value, Tensor):
        raise TypeError(f"{what} must hold a tensor, got {type(value).__name__}")
    return value


def tied_parameter(entry: Parameter, *, what: str = "the entry") -> nn.Parameter:
    """The ``nn.Parameter`` of a table entry: ``requires_grad`` is the entry's ``learnable`` flag
    (torch cannot train integer tensors, so those never require grad), and every slot sharing the
    entry gets the same object."""
    value = _tensor_value(entry, what)

    def make() -> torch.Tensor:
        data = to_torch(value)
        return nn.Parameter(data, requires_grad=entry.learnable and (data.is_floating_point() or data.is_complex()))

    tensor = _cache().tensor(entry, as_parameter=True, make=make)
    assert isinstance(tensor, nn.Parameter)
    return tensor


def tied_buffer(entry: Parameter, *, what: str = "the entry") -> torch.Tensor:
    """The torch tensor of a table entry used as a buffer (running statistics, constants)."""
    value = _tensor_value(entry, what)
    return _cache().tensor(entry, as_parameter=False, make=lambda: to_torch(value))
