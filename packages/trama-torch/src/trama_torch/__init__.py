"""trama-torch: export torch.nn models to trama documents, import them back, run them.

Most users never import this package: ``trama.export_model(module, ...)`` finds its exporter and
``trama.import_model(doc)`` its factories through plugin discovery. What it offers by name:

* :func:`tied_parameter` / :func:`tied_buffer`: the torch tensor of a document's table entry, the
  same object for every slot (in any node) that shares the entry. An op pack's torch factory uses
  them so that a weight its module shares with another node stays one ``nn.Parameter``.
* :func:`to_torch` / :func:`to_numpy`: a trama tensor (or numpy array) as a torch tensor and back,
  every dtype trama stores included (bfloat16 too).
* :class:`TorchRuntime`: the ``torch:cpu``, ``torch:cuda[:N]`` and ``torch:mps`` runtimes
  (``trama.runtime_for_name("torch:cpu")`` is the usual way in).

Plugin discovery imports :mod:`trama_torch.plugin`, and so this package, whether or not anybody
uses torch: the names below are imported on first use, so that ``import trama_torch`` alone does
not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trama.extension import lazy_exports

if TYPE_CHECKING:
    from trama_torch.runtime import TorchRuntime
    from trama_torch.tensors import tied_buffer, tied_parameter, to_numpy, to_torch

__all__ = ["TorchRuntime", "tied_buffer", "tied_parameter", "to_numpy", "to_torch"]

#: Where each public name lives.
_HOMES = {
    "TorchRuntime": "runtime",
    "tied_buffer": "tensors",
    "tied_parameter": "tensors",
    "to_numpy": "tensors",
    "to_torch": "tensors",
}


__getattr__ = lazy_exports(__name__, _HOMES)
