"""Catalog opset 2: scaled dot-product attention as a function (``torch.nn.functional.scaled_dot_product_attention``).

The op is the attention that transformer code writes as one call (torchvision's and timm's ViT,
transformers models with ``attn_implementation="sdpa"``), after its own projections and head
split: ``softmax(q · kᵀ · scale + mask) · v``. Its prose fixes what torch leaves to the kernel it
picks (the math path or a fused one): which key positions a causal query sees when L ≠ S, what a
query whose every key is masked gets, how masks and batch dimensions broadcast, and that dropout,
which torch applies whenever ``dropout_p`` is positive whatever the module's mode, is refused.

(The settings checks live in ``trama.catalog._attention_checks``.)
"""

from __future__ import annotations

from trama.catalog._build import hyper, op
from trama.format._specs import OpSpec

__all__ = ["LAYERS", "SPECS"]

_SDPA = op(
    "scaled_dot_product_attention",
    (
        """
        Scaled dot-product attention, as `torch.nn.functional.scaled_dot_product_attention`:
        `y = softmax(query · keyᵀ · scale + mask) · value`, the softmax over the key positions.
        `query` is `[…, L, E]`, `key` `[…, S, E]` and `value` `[…, S, Ev]`, each with at least two
        dimensions; the dimensions before the last two are batch dimensions (heads among them),
        which broadcast by the numpy rule, so the three may have different ranks and sizes of 1.
        The three have one floating dtype (float16, bfloat16, float32 or float64; torch refuses
        a mix and integers), and `y`, `[…, L, Ev]`, has it too.
        """,
        """
        1. Grouped heads: with `enable_gqa`, `key` and `value` must have at least three
           dimensions, as must `query`, and their heads (dimension −3), `Hk` and `Hv`, must each
           divide the query's heads `Hq`. Each is first repeated along that dimension as torch's
           `repeat_interleave(Hq / Hk, −3)` does: key head h serves the query heads
           `h·(Hq/Hk) … h·(Hq/Hk) + Hq/Hk − 1` (likewise for `value`, even when `Hv ≠ Hk`).
           Without `enable_gqa` heads are ordinary batch dimensions (sizes equal or 1).
        2. Scores: `s = query · keyᵀ · scale`, shape `[*B, L, S]` where `B` is the broadcast of
           the batch dimensions of `query` and `key`; `scale` null means `1/√E`. With `E = 0`
           every score is 0 (an empty sum), whatever the scale.
        3. Masks. With `is_causal`, query position i sees the key positions j ≤ i: the mask is
           the lower triangle of an L × S matrix of ones (`tril(ones(L, S))`), aligned at the
           top-left corner whatever L and S are — torch's choice, not the bottom-right alignment
           of a decoder with a cache. `attn_mask` has at least two dimensions and broadcasts to
           `[*B, L, S]` without changing that shape (torch adds it in place: a mask cannot add
           batch dimensions or grow a size). A bool mask is true where the key takes part (the
           inverse of `MultiheadAttention`'s masks): false scores become −∞. A floating mask
           must have the dtype of `query` and is added to `s` as it is (−∞ excludes a key; +∞
           makes the row NaN). `is_causal` with an `attn_mask` is refused, as torch refuses it.
        4. Weights: `a = softmax(s)` over the last dimension, except that a row whose every score
           is −∞ (every key masked out, by `attn_mask` or by −∞ scores) gives weights of 0, so
           that row of `y` is 0, not NaN. This is torch's behaviour on the CPU (checked on torch
           2.13, whatever the mask's kind, dtype, rank or the kernel torch picks: its math path
           calls `_safe_softmax`, its fused kernel does the same); exporters and implementations
           hold to it. A NaN score, or a +∞ one, makes its row NaN, as softmax does.
        5. `y = a · value`, the batch dimensions of `[*B, L, S]` and of `value` broadcast.

        Empty sizes: when L = 0, S = 0 or `value` has no elements (Ev = 0, or a batch size of
        0), torch returns before computing anything: `y` is zeros of shape
        `[*query's batch dimensions, L, Ev]`. The batch dimensions of `key` and `value` then take
        no part (they are not broadcast, so `y` may have fewer dimensions than steps 1–5 would
        give), nor do the heads, the mask's shape and `is_causal`; the dtypes are still checked.
        `E = 0` is not such a case: the scores are 0 and step 4 averages the values.
        float16 and bfloat16 are computed in float32 and rounded to the input's dtype, as
        torch's CPU kernels do; the result agrees with torch's within that dtype's rounding.
        """,
    ),
    eval_mode="""
    As in training: `dropout_p` must be 0. torch's function applies dropout to the weights
    whenever `dropout_p` is positive, in training and evaluation alike (models pass
    `p if self.training else 0`), so a positive value has no deterministic meaning and a
    document cannot hold one; an exporter in evaluation mode sees 0.
    """,
    inputs=("query", "key", "value"),
    optional_inputs=("attn_mask",),
    parameters=(
        hyper(
            "dropout_p",
            "float",
            "torch's dropout probability on the weights: must be 0 (see *Eval mode*; anything else is refused).",
            0.0,
        ),
        hyper("is_causal", "bool", "Mask the keys after each query position (step 3, top-left aligned).", False),
        hyper("scale", "float", "The factor of the scores; `null` means `1/√E`.", None),
        hyper("enable_gqa", "bool", "Repeat the key and value heads to the query's (step 1).", False),
    ),
    since=2,
)

#: Function ops of this family (category ``attention``).
SPECS: tuple[OpSpec, ...] = (_SDPA,)

#: Module ops of this family, printed with the layers.
LAYERS: tuple[OpSpec, ...] = ()
