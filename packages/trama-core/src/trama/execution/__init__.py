"""The execution layer: running a document. :class:`Runtime` and :class:`Runnable` are the API
every framework's runtime implements; :class:`GraphRuntime` runs the flattened wiring with one
kernel per leaf (:func:`build_plan`), and :func:`static_costs` counts what a run will do.
Every runtime checks a document's facts against trama's bounds before building anything
(:func:`check_facts`) and reports every failure as a trama error (:func:`framework_failures`).
"""

from __future__ import annotations

from trama.execution._bounds import MAX_TENSOR_BYTES, check_facts, describe_failure, framework_failures
from trama.execution._costs import MACS, static_costs
from trama.execution._inputs import (
    as_declared,
    bound_sizes,
    check_inputs,
    current_sizes,
    dtype_of,
    sizes_of_top_node,
)
from trama.execution._plan import ExecutionPlan, SizedKernel, Step, build_plan
from trama.execution._runtime import (
    FrozenState,
    GraphRunnable,
    GraphRuntime,
    Runnable,
    Runtime,
    RuntimeInfo,
    State,
    order_inputs,
    resolve_placement,
    runtime_for_name,
    runtimes,
)

__all__ = [
    "MACS",
    "MAX_TENSOR_BYTES",
    "ExecutionPlan",
    "FrozenState",
    "GraphRunnable",
    "GraphRuntime",
    "Runnable",
    "Runtime",
    "RuntimeInfo",
    "SizedKernel",
    "State",
    "Step",
    "as_declared",
    "bound_sizes",
    "build_plan",
    "check_facts",
    "check_inputs",
    "current_sizes",
    "describe_failure",
    "dtype_of",
    "framework_failures",
    "order_inputs",
    "resolve_placement",
    "runtime_for_name",
    "runtimes",
    "sizes_of_top_node",
    "static_costs",
]
