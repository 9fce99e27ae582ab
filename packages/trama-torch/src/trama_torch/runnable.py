"""The runnable of the torch runtimes: a document prepared as one torch module on a device.

Every :meth:`TorchRunnable.run` is one call of that module under ``torch.inference_mode()``, so
running a document costs what calling the torch model it came from costs; around that call the
runnable

* takes inputs in the forms callers have (numpy arrays, shared without a copy where torch allows
  it; tensors on any device), checks them against the model's input names and moves them to the
  device, and returns the outputs as tensors on the runtime's device;
* streams: recurrent nodes carry their state from one :class:`trama.execution._runtime.State` call to the
  next (:mod:`trama_torch.streaming`);
* profiles (:mod:`trama_torch.probes`), and turns every failure into a
  :class:`trama.ExecutionError` naming the node that failed.

It is kept apart from :mod:`trama_torch.runtime` because listing runtimes imports that module,
and this one needs torch.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ml_dtypes
import numpy as np
import torch
from torch import nn

from trama.errors import ExecutionError, TramaError
from trama.execution import (
    Runnable,
    State,
    as_declared,
    bound_sizes,
    check_inputs,
    describe_failure,
    framework_failures,
    order_inputs,
    static_costs,
)
from trama.format import Model
from trama.format._sizes import has_sizes
from trama_torch.devices import move
from trama_torch.streaming import RecurrentStreaming

__all__ = ["TorchRunnable"]

_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


class TorchRunnable(Runnable):
    """A document prepared as one torch module on a device (see the module doc)."""

    def __init__(
        self,
        runtime_name: str,
        model: Model,
        module: nn.Module,
        node_modules: Mapping[str, str],
        device: torch.device,
        streaming: RecurrentStreaming,
        program: nn.Module | None = None,
    ) -> None:
        self._runtime_name = runtime_name
        self._model = model
        self._names = list(model.inputs)
        self._module = module
        #: What a run calls: the flattened program (:mod:`trama_torch.flat`), else the module.
        self._program = program if program is not None else module
        self._node_modules = node_modules
        self._device = device
        self._streaming = streaming if streaming.node_ids else None
        #: Whether some node's settings depend on the input sizes (bound around each run).
        self._sized = any(has_sizes(entry.value) for entry in model.parameters.values())

    @property
    def model(self) -> Model:
        return self._model

    @property
    def module(self) -> nn.Module:
        """The document's torch module (parameters on their devices, eval mode)."""
        return self._module

    @property
    def device(self) -> torch.device:
        return self._device

    @property
    def program(self) -> nn.Module:
        """What each run calls: the document module flattened into one program, its composites
        inlined (:mod:`trama_torch.flat`; ``print(runnable.program.code)`` shows it)."""
        return self._program

    def run(self, inputs: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
        """The outputs, as tensors on the runtime's device; recurrent nodes start from zeros."""
        return self._call(self._inputs(inputs), None)

    def run_with_state(self, inputs: Sequence[Any] | Mapping[str, Any], states: dict[str, Any]) -> list[Any]:
        return self._call(self._inputs(inputs), states)

    def spawn_state(self) -> State:
        """A state in which every recurrent node starts from zeros (no entry: the initial state)."""
        return State(self, {})

    def profile_json(self, inputs: Sequence[Any] | Mapping[str, Any]) -> dict[str, Any]:
        """One run timed leaf by leaf (waiting for the device around each), with the shapes
        that give multiply-adds; the document ``docs/runtime.md`` describes."""
        from trama_torch.probes import TimingProbe, attached

        values = self._inputs(inputs)
        sync = self._sync()
        with attached(TimingProbe(sync), self._module, self._model, self._node_modules) as probe:
            sync()
            started = time.perf_counter()
            self._call(values, None)
            sync()
            total = time.perf_counter() - started
        assert isinstance(probe, TimingProbe)
        return static_costs(self._model, probe.calls, probe.seconds, probe.shapes, total, runtime=self._runtime_name)

    # ----------------------------------------------------------------------------------------

    def _call(self, values: list[torch.Tensor], states: dict[str, Any] | None) -> list[Any]:
        """Run once; recurrent nodes read and update ``states`` (``None``: start from zeros).
        They update a copy, kept only if the whole call succeeds, so a failing call leaves a
        stream where it was."""
        working = None if states is None else dict(states)
        try:
            outputs = self._forward(values, working)
        except ExecutionError:
            raise
        except Exception as exc:
            raise self._failure(exc, values, states) from exc
        if states is not None and working is not None:
            states.update(working)
        device = self._device
        return [move(output, device) for output in outputs]

    def _forward(self, values: list[torch.Tensor], states: dict[str, Any] | None) -> Any:
        """One call of the document's flattened program (the document module's own wiring, its
        composites inlined: no recursion however deep the tree). Its ``forward`` is called
        directly: the program itself never carries hooks (those of placement, streaming and
        probes are on node modules, which run through ``__call__`` as usual), and skipping
        ``__call__`` at the top saves about 2 µs, a third of the runtime's overhead per run."""
        forward = self._program.forward
        binding = check_inputs(self._model, values)  # once per run: the inputs' check binds the sizes
        sizes = bound_sizes(binding) if self._sized else contextlib.nullcontext()
        with torch.inference_mode(), sizes:
            if self._streaming is None:
                return forward(*values)
            with self._streaming.active(states):
                return forward(*values)

    def _failure(self, exc: Exception, values: list[torch.Tensor], states: dict[str, Any] | None) -> ExecutionError:
        """An :class:`ExecutionError` for ``exc``, naming the node it came from: the error's own
        if it names one, else the one a second, instrumented run fails in (from a copy of the
        states the failing call started from)."""
        from trama_torch.probes import FailureProbe, attached

        node_id = exc.node_id if isinstance(exc, TramaError) else None
        if node_id is None:
            with attached(FailureProbe(), self._module, self._model, self._node_modules) as probe:
                try:
                    self._forward(values, None if states is None else dict(states))
                except Exception:  # the same failure, now located
                    assert isinstance(probe, FailureProbe)
                    node_id = probe.culprit
        message = exc.message if isinstance(exc, TramaError) else describe_failure(exc)
        if node_id is not None:
            op = next((node.op for node in self._model.nodes if node.id == node_id), "node")
            message = f"{op} failed: {message}"
        return ExecutionError(message, node_id=node_id)

    def _sync(self) -> Callable[[], None]:
        """What waits for this runtime's device to finish its queued work."""
        kind = self._device.type
        if kind == "cuda":
            device = self._device
            return lambda: torch.cuda.synchronize(device)
        if kind == "mps":
            return torch.mps.synchronize
        return lambda: None

    def _inputs(self, inputs: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
        """The inputs as tensors on the device (a list as the declared dtype)."""
        converted = []
        facts = self._model.input_facts or [None] * len(self._names)
        for index, (name, value, fact) in enumerate(
            zip(self._names, order_inputs(self._names, inputs), facts, strict=True)
        ):
            with framework_failures(f"converting input {name!r}"):
                converted.append(self._value(name, as_declared(value, fact, name, index)))
        return converted  # checked against the facts when they run (_forward)

    def _value(self, name: str, value: Any) -> Any:
        """Input ``name`` for the module: a tensor on the runtime's device, or, for a Python
        ``tuple`` (the catalog's tuples enter a graph as model inputs, read with ``tuple_get``),
        a tuple of such values. A list is array-like data, as numpy reads it."""
        if isinstance(value, tuple):
            return tuple(self._value(name, item) for item in value)
        return self._tensor(name, value)

    def _tensor(self, name: str, value: Any) -> torch.Tensor:
        """Input ``name`` as a tensor on the runtime's device."""
        tensor: torch.Tensor
        if isinstance(value, torch.Tensor):
            tensor = value
        else:
            try:
                tensor = _from_numpy(value)
            except (TypeError, ValueError, RuntimeError) as exc:
                raise ExecutionError(f"input {name!r} cannot be a torch tensor: {exc}") from None
        return tensor if tensor.device == self._device else tensor.to(self._device)


def _from_numpy(value: Any) -> torch.Tensor:
    """A tensor of an array-like input, sharing the numpy array's memory where torch can: a
    read-only array, one with negative strides or a non-native byte order is copied first
    (torch cannot share those), and ml_dtypes' bfloat16 is reinterpreted through ``uint16``.

    The common case, a writable native array, goes straight to ``torch.from_numpy``; the checks
    for the others cost more than the conversion (``dtype.name`` alone is slower), so they run
    only when that fails or would warn."""
    array: np.ndarray[Any, Any] = np.asarray(value)
    if array.flags.writeable and array.dtype.isnative and array.dtype != _BFLOAT16:
        try:
            return torch.from_numpy(array)
        except ValueError:  # negative strides
            pass
    if array.dtype == _BFLOAT16:
        return _from_numpy(array.view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(np.array(array, dtype=array.dtype.newbyteorder("="), order="C"))  # always a copy
