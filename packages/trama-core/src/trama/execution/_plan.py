"""Running a model from its wiring: the execution plan shared by graph-walking runtimes.

Preparing a model flattens its tree once. Every reference is resolved through composite
bindings and scope inputs down to the leaf output (or model input) that produces the value, and
each value gets a slot number. The leaves are then ordered by their data dependencies. Running
is a single loop over that list: read input slots, call the kernel, write output slots. No
composite is visited at run time, so a traced custom module needs no class of its own to run,
and the walk costs a few microseconds per leaf.

A calling node runs as a copy of what it calls (:func:`trama.format._calls.expand_calls`): its copied
leaves get steps of their own, ids under the caller's (``root.again.fc`` for the ``fc`` inside
the called ``root.block``), so each call has its own value slots and, for a stateful kernel, its
own state. They share the kernel object built for the original leaf: a kernel is its parameters
bound, and calls share parameters.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trama.conversion._importer import build_node
from trama.conversion._sized import SizedNode
from trama.errors import ExecutionError, TramaError
from trama.execution._bounds import describe_failure
from trama.extension._kernels import StatefulKernel, as_kernel
from trama.format._calls import expand_calls
from trama.format._model import INPUT, Model, Node, Ref
from trama.format._specs import OpRegistry

__all__ = ["ExecutionPlan", "Step", "build_plan"]


@dataclass(slots=True)
class Step:
    """One leaf node: its kernel, where its inputs come from and where its outputs go."""

    node: Node
    kernel: Any
    inputs: tuple[tuple[str, int], ...]
    outputs: tuple[tuple[str, int], ...]
    stateful: bool


@dataclass(slots=True)
class ExecutionPlan:
    """The flattened model: steps in dependency order over numbered value slots."""

    model: Model
    steps: list[Step]
    slot_count: int
    input_slots: list[int]
    output_slots: list[int]
    #: Which slot each leaf output and model input landed in, for profiling and debugging.
    slot_names: list[str] = field(default_factory=list)

    def initial_states(self) -> dict[str, Any]:
        """The state of every stateful kernel before any input."""
        return {step.node.id: step.kernel.initial_state() for step in self.steps if step.stateful}

    def run(
        self,
        inputs: Sequence[Any],
        states: dict[str, Any] | None = None,
        *,
        timer: Callable[[Step, float], None] | None = None,
    ) -> list[Any]:
        """Compute the outputs. Stateful kernels read and update ``states`` (by node id); with
        ``states=None`` they start from their initial state and the final one is dropped."""
        values: list[Any] = [None] * self.slot_count
        for slot, value in zip(self.input_slots, inputs, strict=True):
            values[slot] = value
        clock = time.perf_counter
        for step in self.steps:
            arguments = {port: values[slot] for port, slot in step.inputs}
            started = clock() if timer is not None else 0.0
            try:
                if step.stateful:
                    node_id = step.node.id
                    state = states[node_id] if states is not None and node_id in states else step.kernel.initial_state()
                    results, new_state = step.kernel.step(arguments, state)
                    if states is not None:
                        states[step.node.id] = new_state
                else:
                    results = step.kernel(arguments)
            except (TramaError, KeyboardInterrupt):
                raise
            except BaseException as exc:  # a kernel's sys.exit() or BaseException too: its failure
                raise ExecutionError(f"{step.node.op} failed: {describe_failure(exc)}", node_id=step.node.id) from exc
            if timer is not None:
                timer(step, clock() - started)
            for name, slot in step.outputs:
                try:
                    values[slot] = results[name]
                except (KeyError, TypeError):
                    raise ExecutionError(
                        f"the {step.node.op} kernel did not return output {name!r}", node_id=step.node.id
                    ) from None
        return [values[slot] for slot in self.output_slots]


class SizedKernel:
    """The kernel of a leaf whose settings depend on the input sizes: built for the sizes of
    each run (:class:`~trama.conversion.SizedNode`), then called as any kernel is."""

    def __init__(self, sized: SizedNode) -> None:
        self.sized = sized

    def __call__(self, arguments: Mapping[str, Any]) -> Any:
        return as_kernel(self.sized.current())(arguments)


def build_plan(model: Model, registry: OpRegistry) -> ExecutionPlan:
    """Resolve the wiring of a (validated) model and build every leaf's kernel with the factory
    ``registry`` holds for its op. Calls are expanded first; a step's ``node`` is then the copy
    that runs (its id says where: the caller's id, or a path under it)."""
    nodes, origin = expand_calls(model)
    by_id = {node.id: node for node in nodes}
    leaves = [node for node in nodes if node.output_bindings is None]
    slots: dict[tuple[str, str], int] = {}
    slot_names: list[str] = []

    def new_slot(key: tuple[str, str], name: str) -> int:
        slots[key] = len(slot_names)
        slot_names.append(name)
        return slots[key]

    input_slots = [new_slot((INPUT, name), f"%{name}") for name in model.inputs]
    for leaf in leaves:
        for output in leaf.outputs:
            new_slot((leaf.id, output), f"{leaf.id}.{output}")

    resolved: dict[tuple[str | None, str, str], int] = {}

    def resolve(ref: Ref, scope: str | None) -> int:
        """The slot of the value ``ref`` (seen from ``scope``) denotes, through bindings."""
        key = (scope, ref.node, ref.output)
        if key in resolved:
            return resolved[key]
        chain: list[tuple[str | None, str, str]] = []
        while True:
            chain.append((scope, ref.node, ref.output))
            if ref.node == INPUT:
                if scope is None:
                    slot = slots[(INPUT, ref.output)]
                    break
                composite = by_id[scope]
                ref, scope = composite.inputs[ref.output], composite.parent
            else:
                target = by_id[ref.node]
                if target.output_bindings is None:
                    slot = slots[(target.id, ref.output)]
                    break
                ref, scope = target.output_bindings[ref.output], target.id
            if (scope, ref.node, ref.output) in resolved:
                slot = resolved[(scope, ref.node, ref.output)]
                break
        for item in chain:
            resolved[item] = slot
        return slot

    table = model.parameters
    steps: list[Step] = []
    producer: dict[int, int] = {}
    kernels: dict[str, Any] = {}  # by the id of the original leaf, which copies share
    for leaf in leaves:
        source = by_id[origin.get(leaf.id, leaf.id)]
        kernel = kernels.get(source.id)
        if kernel is None:
            parameters = {slot: table[key] for slot, key in source.parameters.items()}
            built = build_node(source, registry, children={}, parameters=parameters, sized=SizedKernel)
            kernel = kernels[source.id] = as_kernel(built)
        step = Step(
            node=leaf,
            kernel=kernel,
            inputs=tuple((port, resolve(ref, leaf.parent)) for port, ref in leaf.inputs.items()),
            outputs=tuple((output, slots[(leaf.id, output)]) for output in leaf.outputs),
            stateful=isinstance(kernel, StatefulKernel),
        )
        for _, slot in step.outputs:
            producer[slot] = len(steps)
        steps.append(step)
    output_slots = [resolve(ref, None) for ref in model.outputs]
    return ExecutionPlan(
        model, _dependency_order(steps, producer), len(slot_names), input_slots, output_slots, slot_names
    )


def _dependency_order(steps: list[Step], producer: Mapping[int, int]) -> list[Step]:
    """Steps ordered so that each runs after the steps producing its inputs; among ready steps,
    document order. (Document order alone is not enough: a sibling's subtree may come later.)"""
    waiting = [0] * len(steps)
    consumers: list[list[int]] = [[] for _ in steps]
    for index, step in enumerate(steps):
        sources = {producer[slot] for _, slot in step.inputs if slot in producer}
        waiting[index] = len(sources)
        for source in sources:
            consumers[source].append(index)
    ready = [index for index, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    order: list[Step] = []
    while ready:
        index = heapq.heappop(ready)
        order.append(steps[index])
        for consumer in consumers[index]:
            waiting[consumer] -= 1
            if waiting[consumer] == 0:
                heapq.heappush(ready, consumer)
    if len(order) != len(steps):  # pragma: no cover - validation rules out cycles
        raise ExecutionError("the model's wiring has a cycle")
    return order
