"""Catalog leaf ops as real ``torch.nn`` modules, in both directions.

Export reads a module's constructor arguments and its ``state_dict`` into slots; import calls the
same class with the same arguments and puts the slots' tensors back, so that what comes back is
an ``nn.Linear`` a user recognises, not a look-alike: same class, same ``repr``, same
``state_dict``, same ``requires_grad`` flags, same dtypes (float16 and bfloat16 included), and
bit-identical outputs in eval mode. The per-op facts live in :mod:`trama_torch.leaves.table`; this
module is the machinery that applies them.

Rules decided here, and why:

* **Which modules are leaves** (:func:`leaf_op`): the catalog class itself, or a subclass that
  overrides none of its methods other than ``__init__``, ``reset_parameters``,
  ``_reset_parameters``, ``extra_repr``, ``__repr__`` and ``__str__`` (those shape construction
  and printing, never the values ``forward`` computes; what ``__init__`` sets is read back from
  the instance anyway). A subclass with its own ``forward`` (or ``_conv_forward``, or
  ``_sa_block``…) computes something else, so it is not the catalog's op and is traced instead.
  A subclass that qualifies comes back as the catalog class (or as the subclass import builds
  for a few ops, :mod:`trama_torch.leaves.modules`, which counts as the op too). Parametrized modules
  (``torch.nn.utils.parametrize``) are not leaves: their weight is computed.
* **Training mode**: documents record eval-mode semantics. A module exported in training mode is
  exported as it is (its state is what it is); it comes back in eval mode.
* **What cannot be recorded is refused**, never dropped: forward hooks, ``MaxPool2d(return_indices
  =True)``, an encoder layer with another activation, ``ConvTranspose2d``'s ``output_size``.
  torch's ``inplace`` flags are dropped, as the catalog says (values in a graph are immutable).
* **Call-site constants** (``MultiheadAttention``'s ``need_weights`` and ``average_attn_weights``)
  are slots; the factory keeps them on the module it builds (:func:`leaf_call_constants`) so that
  :func:`call_leaf` can pass them again.
* **Ties**: slots sharing an entry become one torch tensor (:mod:`trama_torch.tensors`).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn.utils import parametrize
from torch.overrides import TorchFunctionMode

from trama import ExecutionError, ExportContext, ExportError, ImportModelError, Node, NodeFragment, Parameter, Tensor
from trama.catalog import check_settings, standard_specs
from trama.format import OpSpec
from trama_torch.binding import bind_arguments
from trama_torch.leaves.table import LEAF_KINDS, LeafKind, Structure
from trama_torch.tensors import export_tensor, tied_buffer, tied_parameter

__all__ = [
    "LeafFactory",
    "LeafRefusal",
    "bind_leaf_call",
    "call_leaf",
    "export_leaf",
    "leaf_call_arguments",
    "leaf_call_constants",
    "leaf_factories",
    "leaf_op",
    "leaf_result_structure",
]


class LeafRefusal(ExportError):
    """A catalog leaf cannot export this module as its op (a setting the catalog cannot hold, a
    call-site argument it does not record). Capturing with example inputs would not help:
    capture exports leaves the same way, so the exporter's errors give no such hint."""


_KINDS: Mapping[str, LeafKind] = {kind.op: kind for kind in LEAF_KINDS}
#: The torch class of each op, and the subclass import builds where it is another one (a subclass
#: that computes the catalog's result, so it is its base's op despite its own ``forward``).
_BY_CLASS: Mapping[type[nn.Module], LeafKind] = {
    cls: kind for kind in LEAF_KINDS for cls in (kind.cls, kind.build) if cls is not None
}

#: Methods a subclass may override and still be its base's op (see the module docstring).
_HARMLESS_OVERRIDES = frozenset(
    {"__init__", "reset_parameters", "_reset_parameters", "extra_repr", "__repr__", "__str__"}
)

#: The start of torch's warning that a one-layer RNN's dropout is never applied.
_RNN_DROPOUT_ADVICE = "dropout option adds dropout after all but last recurrent layer"

#: Where a built module keeps its call-site constants (a plain attribute: survives copy and pickle).
_CALL_CONSTANTS = "_trama_call_constants"


@functools.cache
def _spec(op: str) -> OpSpec:
    return next(spec for spec in standard_specs() if spec.name == op)


def _kind(op: str) -> LeafKind:
    kind = _KINDS.get(op)
    if kind is None:
        raise LeafRefusal(f"{op!r} is not a catalog op implemented by a torch.nn module (known: {sorted(_KINDS)})")
    return kind


# --- Which modules are leaves -------------------------------------------------------------------


def _overrides_behaviour(cls: type[nn.Module], base: type[nn.Module]) -> bool:
    """Whether a class between ``cls`` and ``base`` redefines a method of ``base`` that can change
    what ``forward`` computes (anything but the harmless ones)."""
    for klass in cls.__mro__[: cls.__mro__.index(base)]:
        for name, value in vars(klass).items():
            if name in _HARMLESS_OVERRIDES or not hasattr(base, name):
                continue
            if callable(value) or isinstance(value, (property, staticmethod, classmethod)):
                return True
    return False


def _leaf_kind(module: nn.Module) -> LeafKind | None:
    cls = type(module)
    kind = _BY_CLASS.get(cls)
    if kind is None:
        base = next((base for base in cls.__mro__[1:] if base in _BY_CLASS), None)
        if base is None or _overrides_behaviour(cls, base):
            return None
        kind = _BY_CLASS[base]
    if parametrize.is_parametrized(module):
        return None
    return kind


def leaf_op(module: nn.Module) -> str | None:
    """The catalog op of a module handled as a leaf, or ``None`` (see the module docstring's rule)."""
    kind = _leaf_kind(module)
    return kind.op if kind is not None else None


def leaf_result_structure(op: str) -> Structure:
    """How the module's forward result maps to outputs: ``"y"``, or a tuple mirroring the returned
    tuple (``("y", ("h_n", "c_n"))`` for an LSTM)."""
    return _kind(op).result


# --- Export -------------------------------------------------------------------------------------


def _plain(value: Any, where: str, slot: str) -> Any:
    """A hyper-parameter as the format stores it: tuples and sizes become lists, numpy scalars
    Python ones."""
    if isinstance(value, (tuple, list, torch.Size)):
        return [_plain(item, where, slot) for item in value]
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise LeafRefusal(f"{where}: {slot} is a {type(value).__name__}, which the catalog's slot cannot hold")


def _refusal(module: nn.Module, kind: LeafKind) -> str | None:
    """Why this instance cannot be exported as its op, if it cannot."""
    if module._forward_hooks or module._forward_pre_hooks:
        return "it has forward hooks, which a document cannot record (remove them, or wrap the module)"
    return kind.check(module) if kind.check is not None else None


def _call_slot_values(kind: LeafKind, constants: Mapping[str, Any] | None, where: str) -> dict[str, Any]:
    """The slots of the call-site constants: given ones, torch's defaults for the rest."""
    given = dict(constants or {})
    values = {arg.slot: given.pop(arg.name, arg.default) for arg in kind.forward if arg.slot is not None}
    if given:
        recorded = ", ".join(arg.name for arg in kind.forward if arg.slot is not None) or "none"
        raise LeafRefusal(f"{where}: {kind.op} records no call-site argument {sorted(given)} (it records: {recorded})")
    return values


def export_leaf(module: nn.Module, ctx: ExportContext, constants: Mapping[str, Any] | None = None) -> NodeFragment:
    """The node of a leaf module: its op, constructor arguments and state as slots.

    State tensors are :class:`trama.Param` keyed by the torch tensor, so a tensor that two modules
    hold becomes one entry. ``constants`` are the call-site arguments the op records as slots
    (``{"need_weights": False}``); torch's defaults stand for the others. Anything the catalog
    cannot record raises :class:`trama.ExportError` naming the module and the node.
    """
    where = f"{type(module).__qualname__} at {ctx.node_id!r}"
    kind = _leaf_kind(module)
    if kind is None:
        raise LeafRefusal(f"{where} is not a catalog leaf module (see trama_torch.leaves.leaf_op)", node_id=ctx.node_id)
    refusal = _refusal(module, kind)
    if refusal is not None:
        raise LeafRefusal(f"{where} cannot be exported as {kind.op}: {refusal}", node_id=ctx.node_id)
    spec = _spec(kind.op)
    call_values = _call_slot_values(kind, constants, where)
    parameters: dict[str, Any] = {}
    for slot in kind.hypers:
        reader = kind.readers.get(slot)
        raw = call_values[slot] if slot in call_values else reader(module) if reader else getattr(module, slot)
        value = _plain(raw, where, slot)
        schema = spec.slot(slot)
        if schema is None or not schema.accepts(value):
            raise LeafRefusal(f"{where}: {slot}={value!r} does not fit the catalog's {kind.op}", node_id=ctx.node_id)
        parameters[slot] = value
    for key, tensor in module.state_dict(keep_vars=True).items():
        slot = key.replace(".", "_")
        if spec.slot(slot) is None:
            raise LeafRefusal(
                f"{where}: its state {key!r} has no slot in the catalog's {kind.op}, so it cannot be recorded",
                node_id=ctx.node_id,
            )
        parameters[slot] = export_tensor(tensor)
    return NodeFragment(kind.op, outputs=list(spec.outputs), parameters=parameters)


# --- Calls: from a traced call to ports, and from port values to a call --------------------------


def bind_leaf_call(op: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Map a ``forward`` call's arguments to ``(ports, constants)``.

    ``ports`` holds the connected input ports (an argument that is ``None`` leaves its port
    unconnected); ``constants`` the call-site arguments that the call gives and the op records as
    slots, by forward argument name (:func:`export_leaf` fills in torch's defaults for the others).
    Values are passed through as they are (fx nodes or constants). Arguments the op cannot record
    raise :class:`trama.ExportError`.
    """
    kind = _kind(op)
    what = f"{op}.forward"
    bound = bind_arguments(kind.signature, args, kwargs, what=what, defaults=False)
    ports: dict[str, Any] = {}
    constants: dict[str, Any] = {}
    for arg in kind.forward:
        value = bound.get(arg.name, arg.default)
        if isinstance(arg.port, str):
            if value is not None:
                ports[arg.port] = value
        elif isinstance(arg.port, tuple):
            if value is None:
                continue
            if not isinstance(value, (tuple, list)) or len(value) != len(arg.port):
                names = ", ".join(arg.port)
                raise LeafRefusal(f"{what}: {arg.name} must be written at the call as a tuple ({names})")
            ports.update({port: item for port, item in zip(arg.port, value, strict=True) if item is not None})
        elif arg.slot is not None:
            if arg.name not in bound:
                continue
            schema = _spec(op).slot(arg.slot)
            if schema is None or not schema.accepts(value):
                raise LeafRefusal(
                    f"{what}: {arg.name} must be a constant {schema.types if schema else ''}, got {value!r}"
                )
            constants[arg.name] = value
        elif arg.hint_of is not None:
            if value is not arg.default and bound.get(arg.hint_of) is None:
                raise LeafRefusal(f"{what}: {arg.name}={value!r} is a hint about {arg.hint_of}, which the call omits")
        elif arg.refused is not None and value is not None:
            raise LeafRefusal(f"{what}: {arg.refused}")
    return ports, constants


def leaf_call_constants(module: nn.Module) -> dict[str, Any]:
    """The call-site constants a factory-built module is called with (``{}`` for most ops)."""
    return dict(getattr(module, _CALL_CONSTANTS, {}))


def leaf_call_arguments(
    node: Node, values: Mapping[str, Any], constants: Mapping[str, Any] | None = None
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The ``(args, kwargs)`` that call a leaf module on its port values.

    Ports are passed positionally up to the first one left out, keywords after it; call-site
    constants (``leaf_call_constants(module)``, torch's defaults when ``None``) are passed when they
    differ from torch's defaults. Ports the op does not have, or half of LSTM's ``(h0, c0)``, raise
    :class:`trama.ExecutionError`.
    """
    kind = _kind(node.op)
    where = f"{node.op} (node {node.id!r})"
    known = {port for arg in kind.forward for port in ((arg.port,) if isinstance(arg.port, str) else arg.port or ())}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ExecutionError(f"{where} has no input ports {unknown} (it has {sorted(known)})", node_id=node.id)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    positional = True
    for arg in kind.forward:
        value: Any = None
        if isinstance(arg.port, str):
            value = values.get(arg.port)
        elif isinstance(arg.port, tuple):
            items = [values.get(port) for port in arg.port]
            if any(item is not None for item in items):
                if any(item is None for item in items):
                    raise ExecutionError(f"{where}: the ports {list(arg.port)} are given together or not at all")
                value = tuple(items)
        elif arg.slot is not None and constants is not None:
            given = constants.get(arg.name, arg.default)
            value = given if given != arg.default else None
        if value is None:
            positional = False
        elif positional:
            args.append(value)
        else:
            kwargs[arg.name] = value
    return tuple(args), kwargs


def _outputs(structure: Structure, result: Any, where: str) -> dict[str, Any]:
    """A forward result spread over output names along the structure."""
    if isinstance(structure, str):
        return {structure: result}
    if not isinstance(result, (tuple, list)) or len(result) != len(structure):
        raise ExecutionError(f"{where}: forward returned {type(result).__name__}, expected a tuple like {structure}")
    outputs: dict[str, Any] = {}
    for part, item in zip(structure, result, strict=True):
        outputs.update(_outputs(part, item, where))
    return outputs


def call_leaf(node: Node, module: nn.Module, values: Mapping[str, Any]) -> dict[str, Any]:
    """Run a built leaf module on port values and return its outputs by name (``attn_weights`` is
    ``None`` when the node's ``need_weights`` is false, as torch returns it)."""
    args, kwargs = leaf_call_arguments(node, values, leaf_call_constants(module))
    return _outputs(_kind(node.op).result, module(*args, **kwargs), f"{node.op} (node {node.id!r})")


# --- Import -------------------------------------------------------------------------------------


class _SparedInitialisation(TorchFunctionMode):
    """Skips the in-place initialisation of meta tensors while a stateful module is constructed.

    The module is built on the meta device and every tensor is then replaced by a slot's, so its
    random initialisation computes nothing that is kept; but some initialisers (``normal_``, used
    by ``Embedding`` and ``MultiheadAttention(add_bias_kv=True)``) go through torch's Python
    reference kernels on meta tensors, whose first use in a process imports the compiler stack
    and costs seconds. An in-place call on a meta tensor has no effect worth keeping here, so it
    returns its tensor untouched; every other call runs as usual."""

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        target = args[0] if args else kwargs.get("tensor")
        if name.endswith("_") and not name.endswith("__") and isinstance(target, torch.Tensor) and target.is_meta:
            return target
        return func(*args, **kwargs)


def _constructor_value(value: Any) -> Any:
    """A slot value as torch's constructors take it: lists become tuples (``kernel_size``)."""
    return tuple(_constructor_value(item) for item in value) if isinstance(value, list) else value


@dataclass(frozen=True, slots=True)
class LeafFactory:
    """Builds the torch module of one leaf op from a node (the importer's factory protocol)."""

    kind: LeafKind

    def __call__(self, node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> nn.Module:
        kind = self.kind
        # The catalog's checks come first, whoever calls: a torch constructor loops and allocates
        # on its settings (a GRU of 10**9 layers spins), and the checks tie every one of them to
        # what the document holds. Under trama.import_model they ran already and cost nothing.
        check_settings(node, parameters)
        where = f"{kind.op} (node {node.id!r})"
        kwargs: dict[str, Any] = {
            slot: _constructor_value(parameters[slot].value)
            for slot in kind.hypers
            if slot in parameters and slot not in kind.call_slots
        }
        for flag, slot in kind.flags.items():
            entry = parameters.get(slot)
            kwargs[flag] = entry is not None and entry.value is not None
        shown = ", ".join(f"{name}={value!r}" for name, value in kwargs.items())
        cls = kind.build or kind.cls
        try:
            with warnings.catch_warnings():
                # GRU/LSTM(num_layers=1, dropout>0) is valid (and eval mode never drops): torch's
                # advice to use more layers is no error in the document.
                warnings.filterwarnings("ignore", _RNN_DROPOUT_ADVICE, UserWarning)
                if kind.stateful:
                    with _SparedInitialisation():
                        module = cls(**kwargs, device="meta")
                else:
                    module = cls(**kwargs)
        except (TypeError, ValueError, AssertionError, RuntimeError) as exc:
            raise ImportModelError(
                f"{where}: torch.nn.{kind.cls.__name__}({shown}) failed: {exc}", node_id=node.id
            ) from None
        if kind.stateful:
            _load_state(module, kind, node, parameters, f"{where}, built as {kind.cls.__name__}({shown})")
        if kind.call_slots:
            call = {arg.name: parameters[arg.slot].value for arg in kind.forward if arg.slot and arg.slot in parameters}
            setattr(module, _CALL_CONSTANTS, call)
        return module.eval()


def _load_state(module: nn.Module, kind: LeafKind, node: Node, parameters: Mapping[str, Parameter], where: str) -> None:
    """Put the slots' tensors in place of the meta tensors the constructor made: parameters as
    (tied) ``nn.Parameter``, buffers as buffers. Every tensor the module holds must come from a
    slot of its shape, and every state slot must have a place in the module."""
    learned = {name for name, _ in module.named_parameters()}
    used: set[str] = set()
    for key, placeholder in module.state_dict(keep_vars=True).items():
        slot = key.replace(".", "_")
        entry = parameters.get(slot)
        value = entry.value if entry is not None else None
        if entry is None or value is None:
            raise ImportModelError(f"{where}: the slot {slot!r} (torch's {key!r}) is missing", node_id=node.id)
        if not isinstance(value, Tensor):
            raise ImportModelError(f"{where}: the slot {slot!r} must hold a tensor", node_id=node.id)
        if tuple(value.shape) != tuple(placeholder.shape):
            raise ImportModelError(
                f"{where}: the slot {slot!r} has shape {list(value.shape)}, torch's {key!r} needs "
                f"{list(placeholder.shape)}",
                node_id=node.id,
            )
        what = f"slot {slot!r}"
        tensor = tied_parameter(entry, what=what) if key in learned else tied_buffer(entry, what=what)
        owner, _, name = key.rpartition(".")
        setattr(module.get_submodule(owner), name, tensor)
        used.add(slot)
    stray = sorted(
        slot
        for slot, entry in parameters.items()
        if slot not in used and slot not in kind.hypers and entry.value is not None
    )
    if stray:
        raise ImportModelError(f"{where}: the slots {stray} have no place in the module", node_id=node.id)


def leaf_factories() -> Mapping[str, LeafFactory]:
    """The factory of every catalog leaf op that is a ``torch.nn`` module, by op name."""
    return {kind.op: LeafFactory(kind) for kind in LEAF_KINDS}
