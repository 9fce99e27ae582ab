"""The numpy runtime: the reference, on the CPU, and the embedded ``"default"``."""

from __future__ import annotations

from typing import Any

import numpy as np

from trama.execution import GraphRuntime

__all__ = ["NumpyRuntime"]


class NumpyRuntime(GraphRuntime):
    """Runs every leaf with trama-numpy's kernels; inputs become numpy arrays (a framework's
    tensor is converted through ``numpy.asarray``, so a CPU torch tensor works as it is).

    A Python ``tuple`` input is a tuple value, the way tuples enter a catalog graph
    (``tuple_get`` takes them apart): it becomes a tuple of its converted elements, recursively,
    never one array stacked from them (which would fail on elements of different shapes, or hand
    ``tuple_get`` an array). A ``list`` is array-like data, as ``numpy.asarray`` reads it; every
    runtime draws the line there.
    """

    framework = "numpy"
    device = "cpu"
    aliases = ("default",)

    def name(self) -> str:
        return "numpy"  # one device, so no ":cpu"

    def convert_input(self, value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return value
        if isinstance(value, tuple):
            return tuple(self.convert_input(item) for item in value)
        detach = getattr(value, "detach", None)  # a torch tensor: leave autograd and the GPU
        if callable(detach):
            value = detach().cpu()
        return np.asarray(value)
