"""The settings checks of the catalog's sequence layers (:mod:`trama.catalog.sequence`) and of its
composites, whose only settings are flags.

The sequence layers hold torch's full state under its ``state_dict`` names, and most of those
slots exist only for some settings, so validation cannot tell that a two-layer GRU lacks
``weight_ih_l1`` or that a bias-free attention carries ``in_proj_bias``: these relations can.
Their checked settings add what the kernels derive alike: an attention's ``kdim`` and ``vdim``
resolved (``null`` is ``embed_dim``), ``packed`` (whether the projections are the one
``in_proj_weight``) and ``extra_keys`` (the key positions ``bias_k`` and ``add_zero_attn`` append,
for which the masks gain "not masked" columns); a recurrent layer's ``h_out`` (``proj_size`` or ``hidden_size``) and
``directions`` (2 when bidirectional).

A recurrent layer's depth is bounded by the slots the catalog has (:data:`RNN_MAX_LAYERS`) and
every layer's weights must be in the document, so a document justifies the size of what is built
for it: ``num_layers = 10**9`` is refused at once, before any framework allocates a layer.
"""

from __future__ import annotations

from trama.catalog._reader import Checker, Choice, Flag, Integer, Number, Reader, Relation, Rule
from trama.catalog.sequence import RNN_MAX_LAYERS

__all__ = ["CHECKERS"]


def _attention(prefix: str, embed: str, heads: str, *, options: bool) -> Relation:
    """The weights of one multi-head attention, under ``prefix`` (``self_attn_`` in an encoder
    layer, whose attention has none of ``MultiheadAttention``'s options: its projections are
    packed, it has no ``bias_k``/``bias_v`` and ``kdim = vdim = d_model``)."""

    def check(reader: Reader) -> None:
        values = reader.values
        e, h = values[embed], values[heads]
        if e % h:
            raise reader.error(f"{heads} = {h} does not divide {embed} = {e}")
        packed_what = f"[3·{embed}, {embed}]"
        square = f"[{embed}, {embed}]"
        if options:
            kdim = values["kdim"] = e if values["kdim"] is None else values["kdim"]
            vdim = values["vdim"] = e if values["vdim"] is None else values["vdim"]
            separate = [f"{prefix}{x}_proj_weight" for x in "qkv"]
            packed = reader.optional_tensor(f"{prefix}in_proj_weight", (3 * e, e), packed_what) is not None
            if packed:
                if any(reader.has_tensor(slot) for slot in separate):
                    raise reader.error("has both in_proj_weight and q/k/v_proj_weight; which one applies is ambiguous")
                if kdim != e or vdim != e:
                    raise reader.error(f"in_proj_weight needs kdim = vdim = {embed} = {e}")
            else:
                reader.tensor(separate[0], (e, e), square)
                reader.tensor(separate[1], (e, kdim), f"[{embed}, kdim]")
                reader.tensor(separate[2], (e, vdim), f"[{embed}, vdim]")
            values["packed"] = packed
        else:
            reader.tensor(f"{prefix}in_proj_weight", (3 * e, e), packed_what)
        bias = values["bias"]
        reader.flagged_tensor(f"{prefix}in_proj_bias", bias, (3 * e,), f"[3·{embed}]")
        reader.tensor(f"{prefix}out_proj_weight", (e, e), square)
        reader.flagged_tensor(f"{prefix}out_proj_bias", bias, (e,), f"[{embed}]")
        if options:
            for slot in ("bias_k", "bias_v"):
                reader.flagged_tensor(f"{prefix}{slot}", values["add_bias_kv"], (1, 1, e), f"[1, 1, {embed}]")
        values["extra_keys"] = int(values["add_bias_kv"]) + int(values["add_zero_attn"]) if options else 0

    return check


def _feed_forward(reader: Reader) -> None:
    """The encoder layer's two linear maps and two layer norms, biases as ``bias`` says."""
    e, f, bias = reader.values["d_model"], reader.values["dim_feedforward"], reader.values["bias"]
    shapes = {
        "linear1": ((f, e), "[dim_feedforward, d_model]", (f,), "[dim_feedforward]"),
        "linear2": ((e, f), "[d_model, dim_feedforward]", (e,), "[d_model]"),
        "norm1": ((e,), "[d_model]", (e,), "[d_model]"),
        "norm2": ((e,), "[d_model]", (e,), "[d_model]"),
    }
    for module, (weight, weight_what, vector, vector_what) in shapes.items():
        reader.tensor(f"{module}_weight", weight, weight_what)
        reader.flagged_tensor(f"{module}_bias", bias, vector, vector_what)


def _recurrent(gates: int, *, projection: bool) -> Relation:
    """Every layer's weights, for ``num_layers`` layers in each direction, shaped by the
    settings (``gates`` row blocks of ``hidden_size``); the depth within the catalog's slots."""

    def check(reader: Reader) -> None:
        values = reader.values
        num_layers, hidden = values["num_layers"], values["hidden_size"]
        if num_layers > RNN_MAX_LAYERS:
            raise reader.error(f"num_layers must be 1 … {RNN_MAX_LAYERS} in opset 1, got {num_layers}")
        proj_size = values["proj_size"] if projection else 0
        if proj_size >= hidden:
            raise reader.error(f"proj_size must be 0 or below hidden_size = {hidden}, got {proj_size}")
        h_out = proj_size or hidden
        directions = 2 if values["bidirectional"] else 1
        values["h_out"], values["directions"] = h_out, directions
        rows, rows_what = gates * hidden, f"{gates}·hidden_size"
        h_out_what = "proj_size" if proj_size else "hidden_size"
        for k in range(num_layers):
            width = values["input_size"] if k == 0 else directions * h_out
            width_what = "input_size" if k == 0 else f"{directions}·{h_out_what}"
            for suffix in ("", "_reverse")[:directions]:
                first = k == 0 and not suffix
                weight_ih, weight_hh = f"weight_ih_l{k}{suffix}", f"weight_hh_l{k}{suffix}"
                if first:
                    reader.tensor(weight_ih, (rows, width), f"[{rows_what}, {width_what}]")
                    reader.tensor(weight_hh, (rows, h_out), f"[{rows_what}, {h_out_what}]")
                else:
                    reader.flagged_tensor(weight_ih, True, (rows, width), f"[{rows_what}, {width_what}]")
                    reader.flagged_tensor(weight_hh, True, (rows, h_out), f"[{rows_what}, {h_out_what}]")
                for name in ("bias_ih", "bias_hh"):
                    reader.flagged_tensor(f"{name}_l{k}{suffix}", values["bias"], (rows,), f"[{rows_what}]")
                if projection:
                    shape = (proj_size, hidden)
                    reader.flagged_tensor(f"weight_hr_l{k}{suffix}", proj_size > 0, shape, "[proj_size, hidden_size]")

    return check


def _states_together(reader: Reader) -> None:
    """torch takes an LSTM's initial states as one tuple: both wired, or neither."""
    if ("h0" in reader.node.inputs) != ("c0" in reader.node.inputs):
        raise reader.error("connects only one of h0 and c0; torch takes both or neither")


def _recurrent_rules(*, projection: bool) -> dict[str, Rule]:
    rules: dict[str, Rule] = {
        "input_size": Integer(minimum=1),
        "hidden_size": Integer(minimum=1),
        "num_layers": Integer(minimum=1, default=1),
        "bias": Flag(default=True),
        "batch_first": Flag(default=False),
        "dropout": Number(default=0.0),
        "bidirectional": Flag(default=False),
    }
    if projection:
        rules["proj_size"] = Integer(default=0)
    return rules


CHECKERS: dict[str, Checker] = {
    "MultiheadAttention": Checker(
        {
            "embed_dim": Integer(minimum=1),
            "num_heads": Integer(minimum=1),
            "dropout": Number(default=0.0),
            "bias": Flag(default=True),
            "add_bias_kv": Flag(default=False),
            "add_zero_attn": Flag(default=False),
            "kdim": Integer(minimum=1, nullable=True, default=None),
            "vdim": Integer(minimum=1, nullable=True, default=None),
            "batch_first": Flag(default=False),
            "need_weights": Flag(default=True),
            "average_attn_weights": Flag(default=True),
        },
        (_attention("", "embed_dim", "num_heads", options=True),),
    ),
    "TransformerEncoderLayer": Checker(
        {
            "d_model": Integer(minimum=1),
            "nhead": Integer(minimum=1),
            "dim_feedforward": Integer(minimum=1, default=2048),
            "dropout": Number(default=0.1),
            "activation": Choice(("relu", "gelu"), default="relu"),
            "layer_norm_eps": Number(default=1e-5),
            "batch_first": Flag(default=False),
            "norm_first": Flag(default=False),
            "bias": Flag(default=True),
        },
        (_attention("self_attn_", "d_model", "nhead", options=False), _feed_forward),
    ),
    "TransformerEncoder": Checker({"enable_nested_tensor": Flag(default=True), "mask_check": Flag(default=True)}),
    "GRU": Checker(_recurrent_rules(projection=False), (_recurrent(3, projection=False),)),
    "LSTM": Checker(_recurrent_rules(projection=True), (_states_together, _recurrent(4, projection=True))),
    "Sequential": Checker(),
    "Graph": Checker(),
}
