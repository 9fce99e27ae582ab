"""The torch runtimes: ``torch:cpu``, ``torch:cuda`` (``torch:cuda:N``) and ``torch:mps``.

Unlike the graph runtimes, which call one kernel per leaf, these run the document as one torch
module: :func:`trama_torch.importing.import_document` builds it once at prepare time, its
parameters move to the device once, and each run is a single call of it (see
:mod:`trama_torch.runnable`). So running a document costs what calling the torch model it came
from costs (``benchmarks/bench_torch_runtime.py`` measures the difference), and everything that
works on torch modules works here.

Discovery imports this module to list the runtimes, so it does not import torch: that happens
when a runtime is asked whether its GPU exists, or prepares a model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from trama.execution import Runtime, check_facts, framework_failures
from trama.format import Model
from trama_torch.devices import device_available, resolve_device

if TYPE_CHECKING:
    from trama_torch.runnable import TorchRunnable

__all__ = ["TorchRuntime", "runtimes"]


class TorchRuntime(Runtime):
    """torch on one device: ``"cpu"``, ``"cuda"`` (the first GPU), ``"cuda:N"`` or ``"mps"``."""

    framework = "torch"

    def __init__(self, device: str = "cpu") -> None:
        self.device = device

    def is_available(self) -> bool:
        return device_available(self.device)

    def for_name(self, name: str) -> Runtime | None:
        """Also answers ``"torch:cuda:N"`` (from the ``torch:cuda`` runtime) with a runtime bound
        to GPU N, whether or not it exists: ``is_available`` says."""
        found = super().for_name(name)
        prefix = f"{self.framework}:{self.device}:"
        if found is None and self.device == "cuda" and name.startswith(prefix) and name[len(prefix) :].isdigit():
            return TorchRuntime(f"cuda:{int(name[len(prefix) :])}")
        return found

    def prepare(self, model: Model, placement: Mapping[str, str] | None = None) -> TorchRunnable:
        """Validate ``model`` and build its module once (``import_document`` validates against
        the torch registry), move it to the device, apply ``placement``, put it in eval mode and
        flatten it into the program each run calls (:mod:`trama_torch.flat`).

        The facts are checked against trama's bounds first (:func:`trama.execution.check_facts`).
        Raises :class:`trama.ExecutionError` for a device or placement that cannot be honoured
        here, the validation and import errors of a bad model, and an ``ExecutionError`` for
        anything torch raises (a tensor too large for the device's memory)."""
        from trama_torch.flat import flat_program
        from trama_torch.importing import import_document
        from trama_torch.placement import place, resolve_placement
        from trama_torch.runnable import TorchRunnable
        from trama_torch.streaming import RecurrentStreaming
        from trama_torch.walk import evaluation_mode, move_to

        check_facts(model)
        device = resolve_device(self.device)
        devices = resolve_placement(model, placement or {})
        with framework_failures("preparing the model"):
            module = import_document(model)
            move_to(module, device)
            node_modules: dict[str, str] = dict(module.node_modules)
            place(module, node_modules, devices, device)
            evaluation_mode(module)
            streaming = RecurrentStreaming(module, model, node_modules)
            program = flat_program(module)
            return TorchRunnable(self.name(), model, module, node_modules, device, streaming, program)


def runtimes() -> list[TorchRuntime]:
    """The runtimes the plugin registers; numbered GPUs come through ``torch:cuda``'s
    :meth:`TorchRuntime.for_name`."""
    return [TorchRuntime("cpu"), TorchRuntime("cuda"), TorchRuntime("mps")]
