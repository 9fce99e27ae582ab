"""The table of ONNX lowering factories, filled by the ``@lowers`` decorator.

Each op module (``ops_layers``, ``ops_activations``, ...: the keys of
:data:`trama_onnx.plugin.LOWERED`) registers its factories when imported; :func:`implementations`
imports them all, which the plugin does only when the first node is lowered, so that discovery
stays cheap.
"""

from __future__ import annotations

from collections.abc import Mapping

from trama.extension import Factory, FactoryTable
from trama_onnx.plugin import LOWERED

__all__ = ["implementations", "lowers"]

_TABLE = FactoryTable("onnx", (f"trama_onnx.{module}" for module in LOWERED))

#: Register a lowering factory ``(node, *, children, parameters) -> Lowering`` for these op names.
lowers = _TABLE.implements


def implementations() -> Mapping[str, Factory]:
    """Every lowering factory of this package, by op name."""
    return _TABLE.load()
