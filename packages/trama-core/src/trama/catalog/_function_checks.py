"""The settings checks of the catalog's tensor functions (:mod:`trama.catalog.functions`) and of
its activations (:mod:`trama.catalog.activations`), module and function form alike.

Besides plain settings, two things are checked here that only a node shows. A binary op's
operands are each given exactly once, wired to the port of its name or held by the slot of that
name: the checked settings hold a number or bool operand under its name, and a tensor operand is
a tensor slot (a JAX kernel takes it at call time, like a weight: ``x * self.scale`` may be
trained). A ``getitem`` index is parsed once into Python index items: ints, slices, ``None``,
``...`` and the names of the index ports (``"i0"``), which must be ``i0``, ``i1``, … in order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import EllipsisType
from typing import Any, TypeAlias

from trama.catalog._limits import MAX_ELEMENTS, shown_limit, slice_problem
from trama.catalog._reader import (
    Checker,
    Choice,
    Dims,
    Flag,
    Integer,
    IntList,
    Number,
    Reader,
    Relation,
    RequiredList,
    Rule,
    is_int,
)
from trama.format._tensor import Tensor

__all__ = ["ACTIVATION_CHECKERS", "CHECKERS", "IndexItem"]

#: An item of a parsed ``getitem`` index: an int, a slice, ``None`` (a new dimension), ``...``,
#: or the name of the index port whose tensor goes there (``"i0"``).
IndexItem: TypeAlias = "int | slice | EllipsisType | str | None"

_INDEX_PORT = re.compile(r"i(0|[1-9][0-9]*)")


# --- Operands -----------------------------------------------------------------------------


def _operands(reader: Reader) -> None:
    """``x`` and ``other``: each wired or held, never both, never neither. A held tensor stays a
    tensor even when 0-d (it promotes as a tensor, not as a Python number)."""
    for name in ("x", "other"):
        entry = reader.parameters.get(name)
        wired = name in reader.node.inputs
        if entry is None:
            if not wired:
                raise reader.error(f"operand {name!r} is neither wired nor held by a slot")
            continue
        if wired:
            raise reader.error(f"operand {name!r} is both wired and held by a slot")
        if isinstance(entry.value, Tensor):
            reader.use(name)
        elif isinstance(entry.value, (bool, int, float)):
            reader.values[name] = entry.value
        else:
            raise reader.error(f"the constant {name!r} must be a tensor, a number or a bool, got {entry.value!r}")


def _binary(rules: Mapping[str, Rule] | None = None) -> Checker:
    return Checker(rules or {}, (_operands,))


# --- Shapes and indexing ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Shape(RequiredList):
    """``reshape``'s ``shape``: sizes ≥ 0, at most one of them −1 (inferred)."""

    def read(self, reader: Reader, slot: str) -> tuple[int, ...]:
        value = reader.raw(slot)
        if (
            not isinstance(value, (list, tuple))
            or not all(is_int(v) and v >= -1 for v in value)
            or list(value).count(-1) > 1
        ):
            raise reader.error(f"{slot} must be a list of sizes ≥ 0 with at most one −1, got {value!r}")
        return tuple(int(v) for v in value)


def _is_bound(value: Any) -> bool:
    return value is None or is_int(value)


@dataclass(frozen=True, slots=True)
class Index(RequiredList):
    """``getitem``'s ``index``, parsed into :data:`IndexItem` s (a tuple).

    Positions are bounded before any framework sees them (:mod:`trama.catalog._limits`): an int
    item at most 2**48 in magnitude (beyond, it is out of range of every dimension), a slice's
    step at most 2**48 (XLA aborts on a step of 2**63 − 1, torch returns nothing), its start
    and stop signed 64-bit integers."""

    def read(self, reader: Reader, slot: str) -> tuple[IndexItem, ...]:
        index = reader.raw(slot)
        if not isinstance(index, list):
            raise reader.error(f"{slot} must be a list, got {index!r}")
        items: list[IndexItem] = []
        for item in index:
            if _is_bound(item):
                if item is not None and abs(item) > MAX_ELEMENTS:
                    raise reader.error(
                        f"{slot} has the index {item}, beyond {shown_limit(MAX_ELEMENTS)}, the longest dimension "
                        "trama accepts: it is out of range of every dimension (docs/format.md, section 7)"
                    )
                items.append(None if item is None else int(item))
            elif item == "...":
                if Ellipsis in items:
                    raise reader.error(f'{slot} has "..." more than once')
                items.append(Ellipsis)
            elif isinstance(item, str) and _INDEX_PORT.fullmatch(item):
                items.append(item)
            elif isinstance(item, list) and len(item) == 3 and all(_is_bound(v) for v in item):
                if item[2] is not None and item[2] <= 0:
                    raise reader.error(
                        f"{slot} has the slice {item}, which must have a positive step, as torch requires"
                    )
                problem = slice_problem(*item)
                if problem is not None:
                    raise reader.error(f"{slot} has the slice {item}, whose {problem}")
                items.append(slice(*item))
            else:
                raise reader.error(f'{slot} item {item!r} is none of: an int, [start, stop, step], null, "...", "iN"')
        ports = [item for item in items if isinstance(item, str)]
        if ports != [f"i{k}" for k in range(len(ports))]:
            raise reader.error(f"the index ports must be i0, i1, … in order, each once; got {ports}")
        return tuple(items)


def _constant(reader: Reader) -> None:
    """``value``, any value: a tensor is a tensor slot (a traced module's own parameter, which
    training must reach), anything else the value itself (a number stays a number)."""
    if "value" not in reader.parameters:
        raise reader.error("the required slot 'value' is missing")
    value = reader.parameters["value"].value
    if isinstance(value, Tensor):
        reader.use("value")
    else:
        reader.values["value"] = value


_DIM = Integer(minimum=None)
_KEEPDIM = Flag(default=False)
_REDUCTION = Checker({"dim": Dims(), "keepdim": _KEEPDIM})
_JOIN = Checker({"dim": Integer(minimum=None, default=0)})
_ALPHA = {"alpha": Number(default=1, exact=True)}

CHECKERS: dict[str, Checker] = {
    "add": _binary(_ALPHA),
    "sub": _binary(_ALPHA),
    "mul": _binary(),
    "div": _binary({"rounding_mode": Choice((None, "trunc", "floor"), default=None)}),
    "pow": _binary(),
    "matmul": _binary(),
    "neg": Checker(),
    "concat": _JOIN,
    "stack": _JOIN,
    "reshape": Checker({"shape": Shape()}),
    "permute": Checker({"dims": IntList()}),
    "transpose": Checker({"dim0": _DIM, "dim1": _DIM}),
    "flatten": Checker({"start_dim": Integer(minimum=None, default=0), "end_dim": Integer(minimum=None, default=-1)}),
    "squeeze": Checker({"dim": Dims()}),
    "unsqueeze": Checker({"dim": _DIM}),
    "mean": _REDUCTION,
    "sum": _REDUCTION,
    "max": _REDUCTION,
    "argmax": Checker({"dim": Integer(minimum=None, nullable=True, default=None), "keepdim": _KEEPDIM}),
    "getitem": Checker({"index": Index()}),
    "tuple_get": Checker({"index": _DIM}),
    "constant": Checker(relations=(_constant,)),
}


# --- Activations --------------------------------------------------------------------------

_SOFTMAX = Checker({"dim": Integer(minimum=None, nullable=True, default=None)})

_HARDTANH: dict[str, Rule] = {"min_val": Number(default=-1.0), "max_val": Number(default=1.0)}


def _bounds(*, strict: bool) -> Relation:
    """``min_val`` ≤ ``max_val``, as ``F.hardtanh`` requires; ``strict``: <, as ``nn.Hardtanh``
    asserts in its constructor (torch's two forms disagree on equal bounds, and so do the ops)."""

    def check(reader: Reader) -> None:
        low, high = reader.values["min_val"], reader.values["max_val"]
        if low > high or (strict and low == high):
            relation = "less than" if strict else "at most"
            raise reader.error(f"min_val ({low}) must be {relation} max_val ({high}), as torch requires")

    return check


def _nonzero_alpha(reader: Reader) -> None:
    """CELU divides by ``alpha``: torch refuses 0."""
    if reader.values["alpha"] == 0:
        raise reader.error("alpha must not be 0 (CELU divides by it), as torch requires")


def _non_negative_lambd(reader: Reader) -> None:
    """Softshrink's ``lambd`` moves values towards 0: torch refuses a negative one."""
    if reader.values["lambd"] < 0:
        raise reader.error(f"lambd must be ≥ 0, got {reader.values['lambd']}, as torch requires")


def _prelu_weight(reader: Reader) -> None:
    """The module's weight: one slope per parameter, ``[num_parameters]``."""
    reader.tensor("weight", (reader.values["num_parameters"],), "[num_parameters]")


#: By module name; the function form (``relu`` for ``ReLU``) has the same checker.
_ACTIVATIONS: dict[tuple[str, str], Checker] = {
    ("ReLU", "relu"): Checker(),
    ("LeakyReLU", "leaky_relu"): Checker({"negative_slope": Number(default=0.01)}),
    ("GELU", "gelu"): Checker({"approximate": Choice(("none", "tanh"), default="none")}),
    ("SiLU", "silu"): Checker(),
    ("Sigmoid", "sigmoid"): Checker(),
    ("Tanh", "tanh"): Checker(),
    ("Softmax", "softmax"): _SOFTMAX,
    ("LogSoftmax", "log_softmax"): _SOFTMAX,
    ("Softplus", "softplus"): Checker({"beta": Number(default=1.0), "threshold": Number(default=20.0)}),
    ("ELU", "elu"): Checker({"alpha": Number(default=1.0)}),
    ("Hardswish", "hardswish"): Checker(),
    # Opset 2.
    ("ReLU6", "relu6"): Checker(),
    ("Hardsigmoid", "hardsigmoid"): Checker(),
    ("Mish", "mish"): Checker(),
    ("SELU", "selu"): Checker(),
    ("CELU", "celu"): Checker({"alpha": Number(default=1.0)}, (_nonzero_alpha,)),
    ("GLU", "glu"): Checker({"dim": Integer(minimum=None, default=-1)}),
    ("LogSigmoid", "logsigmoid"): Checker(),
    ("Softsign", "softsign"): Checker(),
    ("Tanhshrink", "tanhshrink"): Checker(),
    ("Hardshrink", "hardshrink"): Checker({"lambd": Number(default=0.5)}),
    ("Softshrink", "softshrink"): Checker({"lambd": Number(default=0.5)}, (_non_negative_lambd,)),
    ("Threshold", "threshold"): Checker({"threshold": Number(), "value": Number()}),
    ("Softmin", "softmin"): _SOFTMAX,
}

ACTIVATION_CHECKERS: dict[str, Checker] = {
    **{name: checker for names, checker in _ACTIVATIONS.items() for name in names},
    # The two forms of these check different things (torch's module asserts strictly ordered
    # bounds where its function accepts equal ones; the module holds PReLU's weight, the function
    # takes it on a port), so each form has its own checker.
    "Hardtanh": Checker(_HARDTANH, (_bounds(strict=True),)),
    "hardtanh": Checker(_HARDTANH, (_bounds(strict=False),)),
    "PReLU": Checker({"num_parameters": Integer(minimum=1, default=1)}, (_prelu_weight,)),
    "prelu": Checker(),
}
