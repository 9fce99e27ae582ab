"""A Model Explorer adapter for trama documents.

`Model Explorer <https://github.com/google-ai-edge/model-explorer>`_ draws a ``.trama.json``
document as a graph of its leaves, nested in collapsible layers that are its composites::

    model-explorer model.trama.json --extensions=trama_model_explorer

:class:`TramaAdapter` is the extension Model Explorer loads (from :mod:`trama_model_explorer.main`,
the module it imports); :func:`convert_model` builds the same graph from a :class:`trama.Model`
in memory, for ``model_explorer.visualize_from_config`` or a test.
"""

from __future__ import annotations

from trama_model_explorer.convert import convert_model
from trama_model_explorer.main import TramaAdapter

__all__ = ["TramaAdapter", "convert_model"]
