"""Deprecated since trama 0.4.0, removed in 0.5.0: ``trama_torch.leaf_modules`` moved to ``trama_torch.leaves.modules``.

Importing this module warns once (:func:`trama._deprecated.moved_module`), naming the new
home; docs/plugins.md, "Migrating from 0.3 to 0.4", lists every move. Nothing in trama imports
this module.
"""

from __future__ import annotations

from trama._deprecated import moved_module
from trama_torch.leaves.modules import (
    LogSoftmax,
    MultiheadAttention,
    Softmax,
    TransformerEncoderLayer,
    implicit_softmax_dim,
    matched_masks,
)

__all__ = [
    "LogSoftmax",
    "MultiheadAttention",
    "Softmax",
    "TransformerEncoderLayer",
    "implicit_softmax_dim",
    "matched_masks",
]

moved_module(__name__)
