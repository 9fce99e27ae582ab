"""The tools layer: what people use from a terminal or a review — the ``trama`` command line,
the SSA text view, the summary, and the op-pack template. Nothing below depends on it.
"""

from __future__ import annotations

from trama.tools._diff import Change, ModelDiff, diff, render_diff
from trama.tools._ssa import SHORT_DTYPES, describe_metadata_value, format_ref, format_value, format_value_type, to_ssa
from trama.tools._summary import ModelSummary, OpCount, ParameterTotals, ValueSummary, render_summary, summarize
from trama.tools._view import NodeShapes, ShapeRun, example_inputs, render_html, run_shapes
from trama.tools.cli import (
    COMMANDS,
    DEFAULT_WIDTH,
    STDIN_LIMIT,
    Command,
    build_parser,
    find_problems,
    main,
    register,
    schema_main,
    schema_problems,
    ssa_main,
)
from trama.tools.packtemplate import PackError, add_arguments, new_pack, render_pack, run, validate_name

__all__ = [
    "COMMANDS",
    "DEFAULT_WIDTH",
    "SHORT_DTYPES",
    "STDIN_LIMIT",
    "Change",
    "Command",
    "ModelDiff",
    "ModelSummary",
    "NodeShapes",
    "OpCount",
    "PackError",
    "ParameterTotals",
    "ShapeRun",
    "ValueSummary",
    "add_arguments",
    "build_parser",
    "describe_metadata_value",
    "diff",
    "example_inputs",
    "find_problems",
    "format_ref",
    "format_value",
    "format_value_type",
    "main",
    "new_pack",
    "register",
    "render_diff",
    "render_html",
    "render_pack",
    "render_summary",
    "run",
    "run_shapes",
    "schema_main",
    "schema_problems",
    "ssa_main",
    "summarize",
    "to_ssa",
    "validate_name",
]
