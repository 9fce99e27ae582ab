"""The execution layer: running a document. :class:`Runtime` and :class:`Runnable` are the API
every framework's runtime implements; :class:`GraphRuntime` runs the flattened wiring with one
kernel per leaf (:func:`build_plan`), and :func:`static_costs` counts what a run will do.
"""

from __future__ import annotations

from trama.execution._costs import MACS, static_costs
from trama.execution._plan import ExecutionPlan, Step, build_plan
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
    "ExecutionPlan",
    "FrozenState",
    "GraphRunnable",
    "GraphRuntime",
    "Runnable",
    "Runtime",
    "RuntimeInfo",
    "State",
    "Step",
    "build_plan",
    "order_inputs",
    "resolve_placement",
    "runtime_for_name",
    "runtimes",
    "static_costs",
]
