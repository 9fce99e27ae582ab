"""Captured aten ops → the catalog's layer_functions ops (see :mod:`trama_torch.capture.aten`).

A model that calls ``F.linear``, ``F.conv2d``, ``F.batch_norm``, ``F.layer_norm``… itself (timm's
norm layers and ``Linear`` subclasses, ConvNeXt's channels-first layer norm, Whisper's
convolutions) leaves these aten ops in the captured program, with its parameters as arguments:
each tensor argument becomes a port (a parameter or buffer is a :class:`StateTensor`, which the
capture holds in a ``constant`` node), each constant a slot with torch's name. An optional tensor
that is ``None`` leaves its port unconnected. ``aten.addmm`` is the ``addmm`` op as it is (GPT-2's
``Conv1D`` computes ``addmm(bias, x, weight)`` with an ``[in, out]`` weight, which is not
``linear``'s layout). ``aten.convolution``, the form torch's module ``forward``\\ s reach under some
tracers, is mapped by its ``transposed`` flag and its weight's rank. ``aten._weight_norm`` is the
``weight_norm`` op, the weight a weight-norm parametrization rebuilds (Wav2Vec2's positional
convolution).
"""

from __future__ import annotations

from typing import Any

from trama_torch.capture.aten import Emit, Mapped, Register, _Node, aten
from trama_torch.capture.values import Sym, is_runtime

__all__ = ["register"]


def _ports(call: _Node, **names: str) -> dict[str, Any]:
    """Ports from tensor arguments (``port=argument``); an argument that is ``None`` is left out
    (an unconnected optional port), anything else that is no tensor is a missing form."""
    ports: dict[str, Any] = {}
    for port, argument in names.items():
        value = call.arguments.get(argument)
        if value is None:
            continue
        if not is_runtime(value):
            raise call.missing(f"takes {argument}={value!r}, which is not a tensor")
        ports[port] = value
    return ports


def _ints(call: _Node, argument: str, count: int | None = None) -> list[int]:
    """A list of ints (``stride``, ``normalized_shape``…); a one-element list stands for every
    dimension, as torch expands it; a symbolic size needs a size read the catalog lacks."""
    value = call.constant(argument)
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or any(isinstance(item, Sym) or is_runtime(item) for item in value):
        raise call.missing(f"takes {argument}={value!r}, which is not a list of ints known at capture")
    if count is not None and len(value) == 1 and count > 1:
        value = value * count
    return [int(item) for item in value]


def _number(call: _Node, argument: str) -> Any:
    value = call.constant(argument)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise call.missing(f"takes {argument}={value!r}, which is not a number known at capture")
    return value


def _weight_dims(call: _Node) -> int:
    """The spatial dimensions of a convolution, from its weight's rank."""
    return call.rank("weight") - 2


def _linear(call: _Node) -> Mapped:
    return Emit("linear", _ports(call, x="input", weight="weight", bias="bias"))


def _bilinear(call: _Node) -> Mapped:
    ports = _ports(call, input1="input1", input2="input2", weight="weight", bias="bias")
    return Emit("bilinear", ports)


def _addmm(call: _Node) -> Mapped:
    ports = _ports(call, input="self", mat1="mat1", mat2="mat2")
    return Emit("addmm", ports, {"beta": _number(call, "beta"), "alpha": _number(call, "alpha")})


def _conv(call: _Node) -> Mapped:
    """``aten.conv{1,2,3}d`` (``default``: padding ints; ``padding``: ``"valid"``/``"same"``)."""
    dims = _weight_dims(call)
    padding = call.constant("padding")
    parameters: dict[str, Any] = {
        "stride": _ints(call, "stride", dims),
        "padding": padding if isinstance(padding, str) else _ints(call, "padding", dims),
        "dilation": _ints(call, "dilation", dims),
        "groups": _number(call, "groups"),
    }
    return Emit(f"conv{dims}d", _ports(call, x="input", weight="weight", bias="bias"), parameters)


def _conv_transpose(call: _Node) -> Mapped:
    dims = _weight_dims(call)
    if dims not in (1, 2):
        raise call.missing(f"over {dims} spatial dimensions has no catalog op for it yet")
    parameters: dict[str, Any] = {
        "stride": _ints(call, "stride", dims),
        "padding": _ints(call, "padding", dims),
        "output_padding": _ints(call, "output_padding", dims),
        "groups": _number(call, "groups"),
        "dilation": _ints(call, "dilation", dims),
    }
    return Emit(f"conv_transpose{dims}d", _ports(call, x="input", weight="weight", bias="bias"), parameters)


def _convolution(call: _Node) -> Mapped:
    """``aten.convolution``: transposed or not, by its flag; the catalog's forms by the weight's rank."""
    dims = _weight_dims(call)
    if call.constant("transposed"):
        return _conv_transpose(call)
    if dims not in (1, 2, 3):
        raise call.missing(f"over {dims} spatial dimensions has no catalog op for it yet")
    if any(_ints(call, "output_padding", dims)):
        raise call.missing("with an output padding and transposed false has no catalog op for it")
    parameters: dict[str, Any] = {
        "stride": _ints(call, "stride", dims),
        "padding": _ints(call, "padding", dims),
        "dilation": _ints(call, "dilation", dims),
        "groups": _number(call, "groups"),
    }
    return Emit(f"conv{dims}d", _ports(call, x="input", weight="weight", bias="bias"), parameters)


def _batch_norm(call: _Node) -> Mapped:
    ports = _ports(
        call, x="input", running_mean="running_mean", running_var="running_var", weight="weight", bias="bias"
    )
    training = call.constant("training")
    if training and ("running_mean" in ports or "running_var" in ports):
        raise call.missing(
            "with training true updates the running statistics in place, which a document cannot record "
            "(export the model in evaluation mode)"
        )
    parameters = {"training": bool(training), "momentum": _number(call, "momentum"), "eps": _number(call, "eps")}
    return Emit("batch_norm", ports, parameters)


def _layer_norm(call: _Node) -> Mapped:
    parameters = {"normalized_shape": _ints(call, "normalized_shape"), "eps": _number(call, "eps")}
    return Emit("layer_norm", _ports(call, x="input", weight="weight", bias="bias"), parameters)


def _group_norm(call: _Node) -> Mapped:
    parameters = {"num_groups": _number(call, "num_groups"), "eps": _number(call, "eps")}
    return Emit("group_norm", _ports(call, x="input", weight="weight", bias="bias"), parameters)


def _rms_norm(call: _Node) -> Mapped:
    eps = call.arguments.get("eps")
    parameters = {
        "normalized_shape": _ints(call, "normalized_shape"),
        "eps": None if eps is None else _number(call, "eps"),
    }
    return Emit("rms_norm", _ports(call, x="input", weight="weight"), parameters)


def _embedding(call: _Node) -> Mapped:
    """``aten.embedding(weight, indices, padding_idx, …)``: aten writes "no padding row" as −1, and
    ``F.embedding`` has already made a negative ``padding_idx`` positive, so −1 is null."""
    padding_idx = _number(call, "padding_idx")
    parameters = {
        "padding_idx": None if padding_idx == -1 else padding_idx,
        "scale_grad_by_freq": bool(call.constant("scale_grad_by_freq")),
        "sparse": bool(call.constant("sparse")),
    }
    return Emit("embedding", _ports(call, input="indices", weight="weight"), parameters)


def _weight_norm(call: _Node) -> Mapped:
    """``aten._weight_norm(v, g, dim)``, what a weight-norm parametrization (``_WeightNorm``, the
    module ``parametrizations.weight.0``) runs: ``v`` is ``original1``, ``g`` ``original0``. Its
    fused kernel ``_weight_norm_interface`` lies below it and never reaches a captured program."""
    dim = call.constant("dim")
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise call.missing(f"takes dim={dim!r}, which is not an int known at capture")
    return Emit("weight_norm", {"v": call.tensor("v"), "g": call.tensor("g")}, {"dim": dim})


def register(each: Register) -> None:
    """Add this family's handlers: ``each(aten.packet, handler, *overloads)``."""
    each(aten.linear, _linear, "default")
    each(aten.bilinear, _bilinear, "default")
    each(aten.addmm, _addmm, "default")
    for packet in (aten.conv1d, aten.conv2d, aten.conv3d):
        each(packet, _conv, "default", "padding")
    each(aten.convolution, _convolution, "default")
    each(aten.conv_transpose1d, _conv_transpose, "default")
    each(aten.conv_transpose2d, _conv_transpose, "input")
    each(aten.batch_norm, _batch_norm, "default")
    each(aten.layer_norm, _layer_norm, "default")
    each(aten.group_norm, _group_norm, "default")
    each(aten.rms_norm, _rms_norm, "default")
    each(aten.embedding, _embedding, "default")
    each(aten._weight_norm, _weight_norm, "default")
