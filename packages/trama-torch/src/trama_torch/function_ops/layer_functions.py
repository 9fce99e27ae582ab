"""torch modules of the catalog's layer_functions function ops (:mod:`trama.catalog.layer_functions`).

Each op calls the very ``torch.nn.functional`` function (or ``torch.addmm``, ``torch._weight_norm``)
that a captured model called, with the arguments the capture recorded, so that a model exported and
imported back gives torch's own result bit for bit: ``linear`` is ``F.linear(x, weight, bias)``,
``conv2d`` is ``F.conv2d(x, weight, bias, stride, padding, dilation, groups)`` with the padding as
the document holds it (a list or ``"same"``), ``weight_norm`` is ``torch._weight_norm(v, g, dim)``.
An optional port left unconnected is ``None``, as torch's argument was. Settings come checked from
the core (the importer checks every catalog node before building it,
:func:`trama.catalog.check_settings`), so the builders read them in normal form.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F

from trama.catalog import check_settings
from trama.catalog._layer_functions_checks import matching_dtypes, weight_norm_axes
from trama.catalog._reader import Settings
from trama_torch.functions import Builder, Compute, _Slots
from trama_torch.leaves.modules import batch_norm, conv3d

__all__ = ["OPS"]


def _settings(slots: _Slots) -> Settings:
    """The node's checked settings (defaults applied), recorded for the module's ``repr``."""
    settings = check_settings(slots.node, slots.parameters)
    slots.read.update(settings)
    return settings


def _listed(value: Any) -> Any:
    """A checked list setting as torch takes it (a list), a string as it is."""
    return list(value) if isinstance(value, tuple) else value


def _linear(slots: _Slots) -> Compute:
    _settings(slots)
    return lambda values: F.linear(values["x"], values["weight"], values.get("bias"))


def _bilinear(slots: _Slots) -> Compute:
    _settings(slots)
    return lambda values: F.bilinear(values["input1"], values["input2"], values["weight"], values.get("bias"))


def _addmm(slots: _Slots) -> Compute:
    settings = _settings(slots)
    beta, alpha = settings["beta"], settings["alpha"]
    return lambda values: torch.addmm(values["input"], values["mat1"], values["mat2"], beta=beta, alpha=alpha)


def _conv(function: Callable[..., torch.Tensor]) -> Builder:
    """``F.conv1d``/``2d``/``3d`` with torch's positional arguments."""

    def build(slots: _Slots) -> Compute:
        settings = _settings(slots)
        stride, padding, dilation = (_listed(settings[name]) for name in ("stride", "padding", "dilation"))
        groups = settings.integer("groups")

        def compute(values: Mapping[str, Any]) -> Any:
            return function(values["x"], values["weight"], values.get("bias"), stride, padding, dilation, groups)

        return compute

    return build


def _conv_transpose(function: Callable[..., torch.Tensor]) -> Builder:
    """``F.conv_transpose1d``/``2d``: stride, padding, output_padding, groups, dilation (torch's order)."""

    def build(slots: _Slots) -> Compute:
        settings = _settings(slots)
        stride, padding, output_padding, dilation = (
            _listed(settings[name]) for name in ("stride", "padding", "output_padding", "dilation")
        )
        groups = settings.integer("groups")

        def compute(values: Mapping[str, Any]) -> Any:
            x, weight, bias = values["x"], values["weight"], values.get("bias")
            return function(x, weight, bias, stride, padding, output_padding, groups, dilation)

        return compute

    return build


def _batch_norm(slots: _Slots) -> Compute:
    settings = _settings(slots)
    training, momentum, eps = settings.flag("training"), settings.number("momentum"), settings.number("eps")

    def compute(values: Mapping[str, Any]) -> Any:
        mean, var, weight, bias = (values.get(port) for port in ("running_mean", "running_var", "weight", "bias"))
        if training and mean is None and var is None:  # the batch's statistics: float32 for 16-bit x
            return batch_norm(values["x"], weight, bias, eps)
        return F.batch_norm(values["x"], mean, var, weight, bias, training, momentum, eps)

    return compute


def _layer_norm(slots: _Slots) -> Compute:
    settings = _settings(slots)
    shape, eps = list(settings.integers("normalized_shape")), settings.number("eps")
    return lambda values: F.layer_norm(values["x"], shape, values.get("weight"), values.get("bias"), eps)


def _group_norm(slots: _Slots) -> Compute:
    settings = _settings(slots)
    groups, eps = settings.integer("num_groups"), settings.number("eps")
    return lambda values: F.group_norm(values["x"], groups, values.get("weight"), values.get("bias"), eps)


def _rms_norm(slots: _Slots) -> Compute:
    settings = _settings(slots)
    shape, eps = list(settings.integers("normalized_shape")), settings.optional_number("eps")
    return lambda values: F.rms_norm(values["x"], shape, values.get("weight"), eps)


def _embedding(slots: _Slots) -> Compute:
    """``F.embedding`` without ``max_norm`` (the check refuses it: torch would rescale the table in
    place)."""
    settings = _settings(slots)
    padding_idx = settings.optional_integer("padding_idx")
    norm_type, scale, sparse = (
        settings.number("norm_type"),
        settings.flag("scale_grad_by_freq"),
        settings.flag("sparse"),
    )

    def compute(values: Mapping[str, Any]) -> Any:
        return F.embedding(values["input"], values["weight"], padding_idx, None, norm_type, scale, sparse)

    return compute


def _dropout(slots: _Slots) -> Compute:
    """The catalog's value is the eval-mode one, the identity, whatever ``training`` says: torch's
    ``F.dropout`` with ``training=False`` returns ``x`` itself, which is what is returned here."""
    p = _settings(slots).number("p")
    return lambda values: F.dropout(values["x"], p, training=False)


def _weight_norm(slots: _Slots) -> Compute:
    """``torch._weight_norm(v, g, dim)``, the call of torch's weight-norm parametrization. The
    shapes and dtypes are checked first with the catalog's rules: for some shapes that do not fit,
    torch's kernel would stop the whole process (a floating-point exception on an empty ``dim``)
    or read ``g`` as a flat vector whatever its shape, and for some ``dim`` it would promote a mix
    of dtypes that it refuses for others; for what fits, the call and its result are torch's own."""
    dim = _settings(slots).integer("dim")
    where = f"{slots.node.op} (node {slots.node.id!r})"

    def compute(values: Mapping[str, Any]) -> Any:
        v, g = values["v"], values["g"]
        try:
            matching_dtypes(v, named="v", g=g)
            weight_norm_axes(v.shape, g.shape, dim)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        return torch._weight_norm(v, g, dim)

    return compute


#: Each function op: its builder, and the slots that may stand for an input port of the same name
#: (the shape of :data:`trama_torch.functions._OPS`).
OPS: Mapping[str, tuple[Any, tuple[str, ...]]] = {
    "linear": (_linear, ()),
    "bilinear": (_bilinear, ()),
    "addmm": (_addmm, ()),
    "conv1d": (_conv(F.conv1d), ()),
    "conv2d": (_conv(F.conv2d), ()),
    "conv3d": (_conv(conv3d), ()),  # F.conv3d, but bfloat16 on the CPU in float32 (a torch 2.13 bug)
    "conv_transpose1d": (_conv_transpose(F.conv_transpose1d), ()),
    "conv_transpose2d": (_conv_transpose(F.conv_transpose2d), ()),
    "batch_norm": (_batch_norm, ()),
    "layer_norm": (_layer_norm, ()),
    "group_norm": (_group_norm, ()),
    "rms_norm": (_rms_norm, ()),
    "embedding": (_embedding, ()),
    "dropout": (_dropout, ()),
    "weight_norm": (_weight_norm, ()),
}
