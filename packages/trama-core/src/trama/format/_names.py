"""What a name in a document may be: the identifier patterns and their size limits.

Every name a document gives (node ids, entry names, ports, outputs, slots, op names, opset
namespaces) is printed by listings (``trama ssa``, ``trama info``) and error messages. Each is
therefore plain ASCII from a small alphabet and of bounded size, so that a file can neither
forge a line of what a reviewer reads (a newline or an ANSI escape in an op name) nor flood a
terminal. The patterns live here so that decoding, validation and the JSON Schema
(``docs/format.md``, sections 4.1 and 7) say the same thing.
"""

from __future__ import annotations

import re

__all__ = [
    "DOTTED_ID",
    "MAX_ENTRY_SEGMENTS",
    "MAX_NAME_LENGTH",
    "MAX_NODE_DEPTH",
    "NAME",
    "OP_NAME",
    "SEGMENT",
    "depth_of",
    "is_op_name",
    "op_name_problem",
    "shown_name",
]

#: The most characters of a single-segment name (a model input, port, output or slot name, and
#: each segment of a dotted identifier), and of an op name or an opset namespace.
MAX_NAME_LENGTH = 256
#: The most segments of a node id: how deep the tree may nest. Walkers of the tree are
#: iterative or recurse a small constant per level, well inside Python's default stack. 512
#: covers every tree trama 0.2.0 writes (its recursion stops before 500 levels; format 1.2
#: as first released said 256, which refused 0.2.0's files of 257 to 499 levels).
MAX_NODE_DEPTH = 512
#: The most segments of a parameter entry name: a node id and a slot, which is how trama names
#: an entry (``<node id>.<slot>``), fits at any depth.
MAX_ENTRY_SEGMENTS = MAX_NODE_DEPTH + 1

#: One segment, as regular-expression text (for patterns built from it).
SEGMENT = f"[A-Za-z0-9_]{{1,{MAX_NAME_LENGTH}}}"

#: A model input, port, output or slot name: one segment.
NAME = re.compile(rf"{SEGMENT}\Z")
#: A node id or a parameter entry name: dot-separated segments. The segment count is checked
#: apart (:data:`MAX_NODE_DEPTH`, :data:`MAX_ENTRY_SEGMENTS`), so that a too-deep id gets a
#: message that says so.
DOTTED_ID = re.compile(rf"{SEGMENT}(?:\.{SEGMENT})*\Z")
#: An op name or an opset namespace: dotted identifiers whose segments start with a letter or
#: an underscore (``Linear``, ``conv1d``, ``lenses.ThinLens``), at most
#: :data:`MAX_NAME_LENGTH` characters in all.
OP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\Z")


def is_op_name(name: object) -> bool:
    """Whether ``name`` is a well-formed op name (or opset namespace)."""
    return type(name) is str and len(name) <= MAX_NAME_LENGTH and OP_NAME.match(name) is not None


def depth_of(node_id: str) -> int:
    """How many segments a node id has: 1 for a top-level node."""
    return node_id.count(".") + 1


def op_name_problem(name: object) -> str | None:
    """Why ``name`` is not an op name (or opset namespace), to follow the name in a message;
    ``None`` when it is one."""
    if type(name) is not str:
        return "is not a string"
    if len(name) > MAX_NAME_LENGTH:
        return f"is too long: it has {len(name)} characters, at most {MAX_NAME_LENGTH} are allowed"
    if OP_NAME.match(name) is None:
        return (
            "is not a dotted identifier (segments of ASCII letters, digits and '_', not starting "
            "with a digit, joined by single dots)"
        )
    return None


def shown_name(name: object, limit: int = 80) -> str:
    """A name for an error message: its ``repr``, so that a newline or an escape sequence reads
    as ``\\n`` or ``\\x1b`` and never acts, cut so that a huge name cannot flood a terminal."""
    text = repr(name)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."
