"""The catalog's leaf ops that are ``torch.nn`` modules, as one table: op ↔ class, which slots are
constructor arguments, which state the module holds, how ``forward`` is called, what it returns.

The catalog was written to follow torch (slot names are constructor argument names and
``state_dict`` keys with ``.`` replaced by ``_``), so most of the mapping is mechanical and lives
in :mod:`trama_torch.leaves`; this table holds only what differs per op:

* ``hypers``: the op's hyper-parameter slots, read on export from the module attribute of the same
  name unless ``readers`` gives another way (``TransformerEncoderLayer`` keeps ``d_model`` as
  ``self_attn.embed_dim``), and passed back to the constructor as keyword arguments.
* ``flags``: constructor flags that the catalog folds into a state slot's presence
  (``Linear(bias=False)`` is a ``Linear`` without a ``bias`` slot).
* ``forward``: the arguments of ``forward`` and where each one goes: an input port, a slot (a
  call-site constant such as ``need_weights``), a hint torch does not need for the values
  (``is_causal``), or an argument opset 1 cannot record.
* ``result``: how the returned value maps to the node's outputs (``("y", ("h_n", "c_n"))`` for an
  LSTM's ``output, (h_n, c_n)``).
* ``check``: why a particular instance cannot be exported, where the class alone does not say.
* ``build``: the class import builds when it is not ``cls`` itself: a subclass from
  :mod:`trama_torch.leaves.modules` whose ``forward`` computes the catalog's result where torch's
  would not, or would warn.

State needs no column: on export it is the module's ``state_dict``, on import the ``state_dict``
of the module the constructor built, each key matched to its slot.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeAlias

import torch.nn.functional as F
from torch import nn

from trama.catalog import RNN_MAX_LAYERS
from trama_torch.leaves import modules as leaf_modules

__all__ = ["LEAF_KINDS", "Arg", "LeafKind", "Structure"]

#: How a call's result maps to outputs: an output name, or a tuple mirroring a returned tuple.
Structure: TypeAlias = "str | tuple[Structure, ...]"


@dataclass(frozen=True, slots=True)
class Arg:
    """One argument of a module's ``forward`` and where its value goes in the node.

    Exactly one of the four roles is set: ``port`` (an input port; a tuple of ports for an argument
    that is a tuple of tensors, LSTM's ``hx = (h0, c0)``), ``slot`` (a call-site constant recorded
    in that slot), ``hint_of`` (a hint about the argument of that name, which torch does not need
    to compute the same values: dropped), or ``refused`` (why opset 1 cannot record it when set).
    """

    name: str
    port: str | tuple[str, ...] | None = None
    slot: str | None = None
    hint_of: str | None = None
    refused: str | None = None
    default: Any = None


@dataclass(frozen=True, slots=True)
class LeafKind:
    """One catalog leaf op that is a ``torch.nn`` class (see the module docstring for the columns)."""

    op: str
    cls: type[nn.Module]
    hypers: tuple[str, ...] = ()
    readers: Mapping[str, Callable[[Any], Any]] = field(default_factory=lambda: MappingProxyType({}))
    flags: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    forward: tuple[Arg, ...] = ()
    result: Structure = "y"
    check: Callable[[Any], str | None] | None = None
    #: The class import builds, when not ``cls``: a subclass of it (see the module docstring).
    build: type[nn.Module] | None = None
    #: Whether the module holds state: then it is built on the meta device and every tensor comes
    #: from the slots, which skips torch's random initialisation and proves nothing was left out.
    stateful: bool = False
    #: ``forward``'s signature without ``self``, to bind calls with (filled in by the table).
    signature: inspect.Signature = field(default_factory=inspect.Signature, compare=False)

    @property
    def call_slots(self) -> tuple[str, ...]:
        """The hyper slots that are ``forward`` arguments, not constructor ones."""
        return tuple(arg.slot for arg in self.forward if arg.slot is not None)


def _single(cls: type[nn.Module]) -> tuple[Arg, ...]:
    """The forward of a one-input module: its first argument (``input``, or ``x`` for RMSNorm) is ``x``."""
    first = next(iter(list(inspect.signature(cls.forward).parameters)[1:]))
    return (Arg(first, port="x"),)


def _kind(op: str, cls: type[nn.Module], hypers: tuple[str, ...] = (), **columns: Any) -> LeafKind:
    """A table row; a one-input forward unless ``forward`` is given."""
    columns.setdefault("forward", _single(cls))
    forward = list(inspect.signature(cls.forward).parameters.values())[1:]
    return LeafKind(op, cls, hypers, signature=inspect.Signature(forward), **columns)


# --- Readers: slot values torch keeps elsewhere or in another form ------------------------------


def _pair(name: str) -> Callable[[Any], Any]:
    """A 2-d pooling argument that torch keeps as given (``3`` or ``(3, 2)``): always two entries."""

    def read(module: Any) -> Any:
        value = getattr(module, name)
        return list(value) if isinstance(value, (tuple, list)) else [value, value]

    return read


def _present(name: str) -> Callable[[Any], bool]:
    """A constructor flag torch does not store, read from the tensor it creates."""
    return lambda module: getattr(module, name) is not None


def _encoder_activation(layer: Any) -> str | None:
    """The catalog's name of an encoder layer's activation; ``None`` for anything else.

    torch accepts any callable; the catalog knows ReLU and the exact GELU. torch's own test
    (``activation_relu_or_gelu``) also counts a tanh-approximated ``nn.GELU`` as GELU, which the
    catalog's ``"gelu"`` is not, so the check is made here."""
    activation = layer.activation
    if activation is F.relu or type(activation) is nn.ReLU:
        return "relu"
    if activation is F.gelu or (type(activation) is nn.GELU and activation.approximate == "none"):
        return "gelu"
    return None


_ENCODER_READERS: Mapping[str, Callable[[Any], Any]] = MappingProxyType(
    {
        "d_model": lambda layer: layer.self_attn.embed_dim,
        "nhead": lambda layer: layer.self_attn.num_heads,
        "dim_feedforward": lambda layer: layer.linear1.out_features,
        "dropout": lambda layer: layer.dropout.p,
        "activation": _encoder_activation,
        "layer_norm_eps": lambda layer: layer.norm1.eps,
        "batch_first": lambda layer: layer.self_attn.batch_first,
        "bias": lambda layer: layer.linear1.bias is not None,
    }
)

#: The parts torch builds inside an encoder layer; anything else swapped in is not the catalog's op.
_ENCODER_PARTS: Mapping[str, type[nn.Module]] = MappingProxyType(
    {
        "self_attn": nn.MultiheadAttention,
        "linear1": nn.Linear,
        "dropout": nn.Dropout,
        "linear2": nn.Linear,
        "norm1": nn.LayerNorm,
        "norm2": nn.LayerNorm,
        "dropout1": nn.Dropout,
        "dropout2": nn.Dropout,
    }
)


def _check_encoder_layer(layer: Any) -> str | None:
    """Why an encoder layer does not fit the catalog's slots, if it does not."""
    if _encoder_activation(layer) is None:
        return (
            f"its activation {layer.activation!r} is neither ReLU nor the exact GELU, the two the catalog "
            "records (write the layer as a module of your own to export another one)"
        )
    for name, cls in _ENCODER_PARTS.items():
        part = getattr(layer, name, None)
        if type(part) is not cls:
            return f"its part {name!r} is a {type(part).__qualname__}, not the {cls.__qualname__} torch builds"
    if layer.norm1.eps != layer.norm2.eps:
        return f"its layer norms have different eps ({layer.norm1.eps} and {layer.norm2.eps}); the catalog has one"
    rates = {layer.dropout.p, layer.dropout1.p, layer.dropout2.p, layer.self_attn.dropout}
    if len(rates) != 1:
        return f"its dropouts have different probabilities {sorted(rates)}; the catalog has one"
    return None


def _check_rnn(module: Any) -> str | None:
    if module.num_layers > RNN_MAX_LAYERS:
        return f"it has {module.num_layers} layers; opset 1 records at most {RNN_MAX_LAYERS}"
    return None


def _check_max_pool(module: Any) -> str | None:
    if module.return_indices:
        return "return_indices=True has no form in opset 1 (the op has one output)"
    return None


# --- The table ----------------------------------------------------------------------------------

_CONV = ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups", "padding_mode")
_CONV_TRANSPOSE = (
    "in_channels",
    "out_channels",
    "kernel_size",
    "stride",
    "padding",
    "output_padding",
    "dilation",
    "groups",
    "padding_mode",
)
_BATCH_NORM = ("num_features", "eps", "momentum", "affine", "track_running_stats")
_RNN = ("input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout", "bidirectional")
_BIAS_FLAG = MappingProxyType({"bias": "bias"})
_POOL_READERS = MappingProxyType({name: _pair(name) for name in ("kernel_size", "stride", "padding", "dilation")})

_CAUSAL_HINT = Arg("is_causal", hint_of="attn_mask", default=False)

_OPSET_1_KINDS: tuple[LeafKind, ...] = (
    _kind("Linear", nn.Linear, ("in_features", "out_features"), flags=_BIAS_FLAG, stateful=True),
    _kind(
        "Bilinear",
        nn.Bilinear,
        ("in1_features", "in2_features", "out_features"),
        flags=_BIAS_FLAG,
        forward=(Arg("input1", port="input1"), Arg("input2", port="input2")),
        stateful=True,
    ),
    _kind("Conv1d", nn.Conv1d, _CONV, flags=_BIAS_FLAG, stateful=True),
    _kind("Conv2d", nn.Conv2d, _CONV, flags=_BIAS_FLAG, stateful=True),
    _kind(
        "ConvTranspose2d",
        nn.ConvTranspose2d,
        _CONV_TRANSPOSE,
        flags=_BIAS_FLAG,
        forward=(
            Arg("input", port="x"),
            Arg(
                "output_size",
                refused="output_size depends on the input's shape, which opset 1 cannot record; give the "
                "constructor the matching output_padding instead",
            ),
        ),
        stateful=True,
    ),
    _kind(
        "MaxPool2d",
        nn.MaxPool2d,
        ("kernel_size", "stride", "padding", "dilation", "ceil_mode"),
        readers=_POOL_READERS,
        check=_check_max_pool,
    ),
    _kind(
        "AvgPool2d",
        nn.AvgPool2d,
        ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"),
        readers=_POOL_READERS,
    ),
    _kind("AdaptiveAvgPool2d", nn.AdaptiveAvgPool2d, ("output_size",), readers={"output_size": _pair("output_size")}),
    _kind("BatchNorm1d", nn.BatchNorm1d, _BATCH_NORM, stateful=True),
    _kind("BatchNorm2d", nn.BatchNorm2d, _BATCH_NORM, stateful=True),
    _kind(
        "LayerNorm", nn.LayerNorm, ("normalized_shape", "eps", "elementwise_affine"), flags=_BIAS_FLAG, stateful=True
    ),
    _kind("GroupNorm", nn.GroupNorm, ("num_groups", "num_channels", "eps", "affine"), flags=_BIAS_FLAG, stateful=True),
    _kind("RMSNorm", nn.RMSNorm, ("normalized_shape", "eps", "elementwise_affine"), stateful=True),
    _kind(
        "Embedding",
        nn.Embedding,
        ("num_embeddings", "embedding_dim", "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse"),
        stateful=True,
    ),
    _kind("Dropout", nn.Dropout, ("p",)),
    _kind("Identity", nn.Identity),
    _kind("Flatten", nn.Flatten, ("start_dim", "end_dim")),
    _kind(
        "MultiheadAttention",
        nn.MultiheadAttention,
        (
            "embed_dim",
            "num_heads",
            "dropout",
            "bias",
            "add_bias_kv",
            "add_zero_attn",
            "kdim",
            "vdim",
            "batch_first",
            "need_weights",
            "average_attn_weights",
        ),
        readers={"bias": _present("in_proj_bias"), "add_bias_kv": _present("bias_k")},
        forward=(
            Arg("query", port="query"),
            Arg("key", port="key"),
            Arg("value", port="value"),
            Arg("key_padding_mask", port="key_padding_mask"),
            Arg("need_weights", slot="need_weights", default=True),
            Arg("attn_mask", port="attn_mask"),
            Arg("average_attn_weights", slot="average_attn_weights", default=True),
            _CAUSAL_HINT,
        ),
        result=("y", "attn_weights"),
        stateful=True,
        build=leaf_modules.MultiheadAttention,
    ),
    _kind(
        "TransformerEncoderLayer",
        nn.TransformerEncoderLayer,
        (
            "d_model",
            "nhead",
            "dim_feedforward",
            "dropout",
            "activation",
            "layer_norm_eps",
            "batch_first",
            "norm_first",
            "bias",
        ),
        readers=_ENCODER_READERS,
        forward=(
            Arg("src", port="src"),
            Arg("src_mask", port="src_mask"),
            Arg("src_key_padding_mask", port="src_key_padding_mask"),
            Arg("is_causal", hint_of="src_mask", default=False),
        ),
        check=_check_encoder_layer,
        stateful=True,
        build=leaf_modules.TransformerEncoderLayer,
    ),
    _kind(
        "GRU",
        nn.GRU,
        _RNN,
        forward=(Arg("input", port="x"), Arg("hx", port="h0")),
        result=("y", "h_n"),
        check=_check_rnn,
        stateful=True,
    ),
    _kind(
        "LSTM",
        nn.LSTM,
        (*_RNN, "proj_size"),
        forward=(Arg("input", port="x"), Arg("hx", port=("h0", "c0"))),
        result=("y", ("h_n", "c_n")),
        check=_check_rnn,
        stateful=True,
    ),
    _kind("ReLU", nn.ReLU),
    _kind("LeakyReLU", nn.LeakyReLU, ("negative_slope",)),
    _kind("GELU", nn.GELU, ("approximate",)),
    _kind("SiLU", nn.SiLU),
    _kind("Sigmoid", nn.Sigmoid),
    _kind("Tanh", nn.Tanh),
    _kind("Softmax", nn.Softmax, ("dim",), build=leaf_modules.Softmax),
    _kind("LogSoftmax", nn.LogSoftmax, ("dim",), build=leaf_modules.LogSoftmax),
    _kind("Softplus", nn.Softplus, ("beta", "threshold")),
    _kind("ELU", nn.ELU, ("alpha",)),
    _kind("Hardswish", nn.Hardswish),
)

# --- Opset 2's module ops, one section per op family --------------------------------------------

#: Activations (``ReLU6``, ``Hardsigmoid``, ``Mish``, ``PReLU``…): trama.catalog.activations.


class Softmin(nn.Softmin):
    """``nn.Softmin`` whose null ``dim`` is resolved here, without torch's deprecation warning (as
    :class:`trama_torch.leaves.modules.Softmax` does for ``Softmax``)."""

    def forward(self, input: Any) -> Any:
        return F.softmin(input, leaf_modules.implicit_softmax_dim(input.dim()) if self.dim is None else self.dim)


_ACTIVATION_KINDS_2: tuple[LeafKind, ...] = (
    _kind("ReLU6", nn.ReLU6),
    _kind("Hardtanh", nn.Hardtanh, ("min_val", "max_val")),
    _kind("Hardsigmoid", nn.Hardsigmoid),
    _kind("Mish", nn.Mish),
    _kind("PReLU", nn.PReLU, ("num_parameters",), stateful=True),
    _kind("SELU", nn.SELU),
    _kind("CELU", nn.CELU, ("alpha",)),
    _kind("GLU", nn.GLU, ("dim",)),
    _kind("LogSigmoid", nn.LogSigmoid),
    _kind("Softsign", nn.Softsign),
    _kind("Tanhshrink", nn.Tanhshrink),
    _kind("Hardshrink", nn.Hardshrink, ("lambd",)),
    _kind("Softshrink", nn.Softshrink, ("lambd",)),
    _kind("Threshold", nn.Threshold, ("threshold", "value")),
    _kind("Softmin", nn.Softmin, ("dim",), build=Softmin),
)

#: Layers whose function forms are trama.catalog.layer_functions (``Conv3d``, ``BatchNorm3d``…).
_LAYER_KINDS_2: tuple[LeafKind, ...] = (
    _kind("Conv3d", nn.Conv3d, _CONV, flags=_BIAS_FLAG, stateful=True, build=leaf_modules.Conv3d),
    _kind(
        "ConvTranspose1d",
        nn.ConvTranspose1d,
        _CONV_TRANSPOSE,
        flags=_BIAS_FLAG,
        forward=(
            Arg("input", port="x"),
            Arg(
                "output_size",
                refused="output_size depends on the input's shape, which the catalog cannot record; give the "
                "constructor the matching output_padding instead",
            ),
        ),
        stateful=True,
    ),
    _kind("BatchNorm3d", nn.BatchNorm3d, _BATCH_NORM, stateful=True),
)

#: Pooling and resampling modules (``MaxPool1d``, ``AdaptiveMaxPool2d``, ``Upsample``…): trama.catalog.pooling.


def _spread(name: str, dims: int) -> Callable[[Any], Any]:
    """A pooling argument that torch keeps as given (``3`` or ``(3,)``, ``None`` entries
    included): always ``dims`` entries, as the catalog's list slots hold it."""

    def read(module: Any) -> Any:
        value = getattr(module, name)
        return list(value) if isinstance(value, (tuple, list)) else [value] * dims

    return read


def _pool_readers(dims: int, *names: str) -> Mapping[str, Callable[[Any], Any]]:
    return MappingProxyType({name: _spread(name, dims) for name in names})


def _check_indices(module: Any) -> str | None:
    if module.return_indices:
        return "return_indices=True has no form in the catalog (the op has one output)"
    return None


def _max_pool_kind(op: str, cls: type[nn.Module], dims: int) -> LeafKind:
    """torch stores a ``None`` stride as the kernel size, so the stride is always read as a list."""
    return _kind(
        op,
        cls,
        ("kernel_size", "stride", "padding", "dilation", "ceil_mode"),
        readers=_pool_readers(dims, "kernel_size", "stride", "padding", "dilation"),
        check=_check_indices,
    )


_POOLING_KINDS_2: tuple[LeafKind, ...] = (
    _max_pool_kind("MaxPool1d", nn.MaxPool1d, 1),
    _max_pool_kind("MaxPool3d", nn.MaxPool3d, 3),
    _kind(
        "AvgPool1d",
        nn.AvgPool1d,
        ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad"),
        readers=_pool_readers(1, "kernel_size", "stride", "padding"),
    ),
    _kind(
        "AvgPool3d",
        nn.AvgPool3d,
        ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"),
        readers=_pool_readers(3, "kernel_size", "stride", "padding"),
        build=leaf_modules.AvgPool3d,
    ),
    _kind("AdaptiveAvgPool1d", nn.AdaptiveAvgPool1d, ("output_size",), readers=_pool_readers(1, "output_size")),
    _kind("AdaptiveAvgPool3d", nn.AdaptiveAvgPool3d, ("output_size",), readers=_pool_readers(3, "output_size")),
    _kind(
        "AdaptiveMaxPool1d",
        nn.AdaptiveMaxPool1d,
        ("output_size",),
        readers=_pool_readers(1, "output_size"),
        check=_check_indices,
    ),
    _kind(
        "AdaptiveMaxPool2d",
        nn.AdaptiveMaxPool2d,
        ("output_size",),
        readers=_pool_readers(2, "output_size"),
        check=_check_indices,
    ),
    _kind("Upsample", nn.Upsample, ("size", "scale_factor", "mode", "align_corners", "recompute_scale_factor")),
)

LEAF_KINDS: tuple[LeafKind, ...] = (*_OPSET_1_KINDS, *_ACTIVATION_KINDS_2, *_LAYER_KINDS_2, *_POOLING_KINDS_2)
