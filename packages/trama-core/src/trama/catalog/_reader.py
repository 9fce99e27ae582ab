"""Reading a catalog node's settings: the rules one setting obeys, the reader that applies them,
and the :class:`Settings` a kernel is built from.

A catalog op's settings mean the same in every framework, so they are checked in one place,
before any framework builds anything: a :class:`Checker` is the op's rules as data (a setting's
slot → a :class:`Rule`: its kind, its default, its bounds) plus small functions for what relates
settings to each other and to tensor shapes (``groups`` divides the channel counts, a weight is
``[out, in / groups, *kernel]``). Every problem is a :class:`trama.RegistryError` that names the
op and the node, with one message whichever framework asked.

What a check returns, :class:`Settings`, holds every setting with the catalog's default applied
and in normal form (lists as tuples, ``"same"`` padding as per-side amounts), and the tensor
slots the op reads, so that kernels read settings instead of checking them again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import numpy as np

from trama.catalog._build import REQUIRED
from trama.catalog._limits import MAX_ELEMENTS, MAX_WINDOW, shown_limit
from trama.errors import RegistryError
from trama.extension._factorytable import setting
from trama.format._model import Node, Parameter
from trama.format._sizes import is_symbolic_int
from trama.format._tensor import Tensor

__all__ = [
    "REQUIRED",
    "Checker",
    "Choice",
    "Dims",
    "Flag",
    "IntList",
    "Integer",
    "Number",
    "Reader",
    "Relation",
    "RequiredList",
    "Rule",
    "Settings",
    "is_int",
    "is_number",
]


def is_int(value: Any) -> bool:
    """An int that is not a bool (JSON ``true`` is no size and no dimension)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_number(value: Any) -> bool:
    """An int or a float that is not a bool (JSON writes ``1`` for ``1.0``)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Settings(Mapping[str, Any]):
    """A catalog node's settings, checked and in normal form: what a kernel is built from.

    It maps every setting slot of the op to its value, the catalog's default where the slot is
    absent, lists as tuples; a checker may add values it derives, which its op's kernels share
    (``pads`` for a convolution: the ``(before, after)`` amounts per spatial dimension, whatever
    form ``padding`` took). ``tensors`` names the tensor slots the op reads, present in the
    node, in the order they were checked: a JAX kernel's ``tensor_slots``. A tensor's presence
    and shape have been checked against the settings, so a kernel fetches it without asking.

    The typed accessors (:meth:`integer`, :meth:`integers`, …) return what the checker stored;
    they exist for type checkers and raise ``TypeError`` only on a name used with the wrong kind,
    a kernel's bug.
    """

    __slots__ = ("_values", "node_id", "op", "tensors")

    def __init__(self, op: str, node_id: str, values: Mapping[str, Any], tensors: Sequence[str]) -> None:
        self.op = op
        self.node_id = node_id
        self._values = dict(values)
        self.tensors: tuple[str, ...] = tuple(tensors)

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def with_values(self, values: Mapping[str, Any]) -> Settings:
        """These settings with some values replaced (symbolic sizes while ``torch.export``
        traces a sized node: see :func:`trama.catalog._checkers.checking`)."""
        return Settings(self.op, self.node_id, {**self._values, **values}, self.tensors)

    def _typed(self, name: str, kind: type | tuple[type, ...]) -> Any:
        value = self._values[name]
        if is_symbolic_int(value):  # a size traced by torch.export: an int or a float to the kernel
            return value
        if not isinstance(value, kind):
            raise TypeError(f"{self.op} setting {name!r} is {value!r}, not of the kind asked for")
        return value

    def integer(self, name: str) -> int:
        """An int setting (or an int the checker derived)."""
        return cast(int, self._typed(name, int))

    def optional_integer(self, name: str) -> int | None:
        """An int setting that may be null."""
        return cast(int | None, self._typed(name, (int, type(None))))

    def integers(self, name: str) -> tuple[int, ...]:
        """A list of ints, as a tuple."""
        return cast(tuple[int, ...], self._typed(name, tuple))

    def number(self, name: str) -> float:
        """A float setting (an int in the document becomes a float)."""
        return cast(float, self._typed(name, float))

    def optional_number(self, name: str) -> float | None:
        """A float setting that may be null."""
        return cast(float | None, self._typed(name, (float, type(None))))

    def flag(self, name: str) -> bool:
        """A bool setting."""
        return cast(bool, self._typed(name, bool))

    def text(self, name: str) -> str:
        """A string setting (one of its op's choices)."""
        return cast(str, self._typed(name, str))

    def __repr__(self) -> str:
        values = ", ".join(f"{name}={value!r}" for name, value in self._values.items())
        return f"Settings({self.op} node {self.node_id!r}: {values}; tensors {list(self.tensors)})"


class Reader:
    """One node's slots while its checker runs: settings read with defaults, tensors checked.

    ``values`` collects what the :class:`Settings` will hold; the tensor slots handed out are
    recorded in the order they were asked for. Every problem is raised as :meth:`error`.
    """

    __slots__ = ("_tensors", "node", "parameters", "values")

    def __init__(self, node: Node, parameters: Mapping[str, Parameter]) -> None:
        self.node = node
        self.parameters = parameters
        self.values: dict[str, Any] = {}
        self._tensors: list[str] = []

    def error(self, message: str) -> RegistryError:
        """The error for this node: ``"{op}: {message}"``, naming the node."""
        return RegistryError(f"{self.node.op}: {message}", node_id=self.node.id)

    def raw(self, slot: str, default: Any = REQUIRED) -> Any:
        """The slot's value as stored (a tensor as nested lists, a 0-d one as a number), or
        ``default`` when the slot is absent; a missing slot without default is an error."""
        if default is REQUIRED and slot not in self.parameters:
            raise self.error(f"the required slot {slot!r} is missing")
        value = setting(self.parameters, slot, None if default is REQUIRED else default)
        return value.tolist() if isinstance(value, np.ndarray) else value

    # --- Tensors ------------------------------------------------------------------------------

    def _present(self, slot: str) -> Tensor | None:
        entry = self.parameters.get(slot)
        if entry is None or entry.value is None:
            return None
        if not isinstance(entry.value, Tensor):
            raise self.error(f"{slot} must be a tensor, got {entry.value!r}")
        return entry.value

    def _shaped(self, slot: str, value: Tensor, shape: Sequence[int] | None, what: str, *, read: bool = True) -> str:
        if shape is not None and tuple(value.shape) != tuple(shape):
            raise self.error(f"{slot} has shape {list(value.shape)}, but {what} is {list(shape)}")
        if read:
            self._tensors.append(slot)
        return slot

    def tensor(self, slot: str, shape: Sequence[int] | None = None, what: str = "its shape") -> str:
        """A tensor every node of the op has, checked against ``shape`` (``what`` spells that
        shape in slot names, for the message); recorded as read."""
        value = self._present(slot)
        if value is None:
            raise self.error(f"the required tensor {slot!r} is missing")
        return self._shaped(slot, value, shape, what)

    def optional_tensor(self, slot: str, shape: Sequence[int] | None = None, what: str = "its shape") -> str | None:
        """A tensor that may be absent (``null`` means absent); recorded as read when present."""
        value = self._present(slot)
        return None if value is None else self._shaped(slot, value, shape, what)

    def flagged_tensor(
        self, slot: str, present: bool, shape: Sequence[int] | None, what: str = "its shape", *, read: bool = True
    ) -> str | None:
        """A tensor whose existence the settings decide (``bias``, ``add_bias_kv``, a second layer).

        Both disagreements are refused: a missing tensor would silently become zero and an extra
        one would silently be ignored, hiding an exporter's bug either way. ``read=False``: the
        op's value does not depend on it (state for training only), so no kernel takes it.
        """
        value = self._present(slot)
        if present and value is None:
            raise self.error(f"needs the tensor {slot!r} with these settings")
        if not present and value is not None:
            raise self.error(f"has the tensor {slot!r}, but its settings say it is absent")
        return None if value is None else self._shaped(slot, value, shape, what, read=read)

    def has_tensor(self, slot: str) -> bool:
        """Whether the node holds a tensor in ``slot`` (not recorded as read)."""
        return self._present(slot) is not None

    def use(self, slot: str) -> None:
        """Record a tensor slot as read without a shape to check (a constant operand)."""
        self._tensors.append(slot)

    def settings(self) -> Settings:
        return Settings(self.node.op, self.node.id, self.values, self._tensors)


# --- Rules: how one setting is read --------------------------------------------------------


def _largest(values: Sequence[Any]) -> int:
    """The entry of largest magnitude (for a message about a bound)."""
    return int(max(values, key=lambda v: abs(int(v))))


def _literal(value: Any) -> str:
    """A choice as messages show it: strings quoted as Python does, ``None`` as ``null``."""
    return "null" if value is None else repr(value)


class Rule(Protocol):
    """How one setting slot is read: ``read`` returns its normal form or raises the reader's
    error. ``default`` is the catalog's (:data:`REQUIRED`: the slot must be present) and
    ``nullable`` whether ``null`` is a value of its own: data that tests hold against the op's
    spec, which documents both."""

    @property
    def default(self) -> Any: ...

    @property
    def nullable(self) -> bool: ...

    def read(self, reader: Reader, slot: str) -> Any:
        """The setting's normal form, or the reader's error."""
        ...

    def types(self) -> tuple[str, ...]:
        """The document types this rule accepts (as :class:`~trama.ParameterSchema` names them)."""
        ...


@dataclass(frozen=True, slots=True)
class Integer:
    """An int, at least ``minimum`` (``None``: any, a dimension counted from the end)."""

    default: Any = REQUIRED
    minimum: int | None = 0
    nullable: bool = False

    def read(self, reader: Reader, slot: str) -> int | None:
        value = reader.raw(slot, self.default)
        if value is None and self.nullable:
            return None
        if not is_int(value) or (self.minimum is not None and value < self.minimum):
            bound = "" if self.minimum is None else f" ≥ {self.minimum}"
            kind = f"null or an int{bound}" if self.nullable else f"an int{bound}"
            raise reader.error(f"{slot} must be {kind}, got {value!r}")
        return int(value)

    def types(self) -> tuple[str, ...]:
        return ("int", "null") if self.nullable else ("int",)


@dataclass(frozen=True, slots=True)
class Number:
    """A number, as a float; ``exact`` keeps an int an int (``alpha``, which may scale integers)."""

    default: Any = REQUIRED
    nullable: bool = False
    exact: bool = False

    def read(self, reader: Reader, slot: str) -> float | int | None:
        value = reader.raw(slot, self.default)
        if value is None and self.nullable:
            return None
        if not is_number(value):
            raise reader.error(f"{slot} must be {'null or a number' if self.nullable else 'a number'}, got {value!r}")
        return value if self.exact else float(value)

    def types(self) -> tuple[str, ...]:
        return ("float", "null") if self.nullable else ("float",)


@dataclass(frozen=True, slots=True)
class Flag:
    """A bool."""

    default: Any = REQUIRED
    nullable: bool = False

    def read(self, reader: Reader, slot: str) -> bool:
        value = reader.raw(slot, self.default)
        if not isinstance(value, bool):
            raise reader.error(f"{slot} must be a bool, got {value!r}")
        return value

    def types(self) -> tuple[str, ...]:
        return ("bool",)


@dataclass(frozen=True, slots=True)
class Choice:
    """One of a few values (strings, and ``None`` where ``null`` is one of them)."""

    choices: tuple[str | None, ...] = ()
    default: Any = REQUIRED

    @property
    def nullable(self) -> bool:
        return None in self.choices

    def read(self, reader: Reader, slot: str) -> str | None:
        value = reader.raw(slot, self.default)
        if value not in self.choices:
            raise reader.error(f"{slot} must be one of {', '.join(map(_literal, self.choices))}, got {value!r}")
        return value  # type: ignore[no-any-return]

    def types(self) -> tuple[str, ...]:
        return ("string", "null") if self.nullable else ("string",)


@dataclass(frozen=True, slots=True)
class IntList:
    """A list of ints, as a tuple: ``count`` of them (``None``: any number, ``non_empty`` or
    not), each at least ``minimum`` (``None``: any).

    Every entry is also at most :data:`~trama.catalog._limits.MAX_ELEMENTS` (2**48) in
    magnitude, whatever the op: the catalog's int lists are sizes, counts, paddings, strides and
    dimension indices, and none of them can exceed that in a tensor of at most 2**48 bytes, so a
    larger one could only make a framework ask for more (or overflow its 64-bit arithmetic).
    ``window``: the list is a convolution's or a pool's window setting, each entry at most
    :data:`~trama.catalog._limits.MAX_WINDOW` (2**31 − 1), the range torch computes them in."""

    count: int | None = None
    minimum: int | None = None
    default: Any = REQUIRED
    nullable: bool = False
    non_empty: bool = False
    window: bool = False

    def read(self, reader: Reader, slot: str) -> tuple[int, ...] | None:
        value = reader.raw(slot, self.default)
        if value is None and self.nullable:
            return None
        if (
            not isinstance(value, (list, tuple))
            or (self.count is not None and len(value) != self.count)
            or (self.non_empty and not value)
            or not all(is_int(v) and (self.minimum is None or v >= self.minimum) for v in value)
        ):
            raise reader.error(f"{slot} must be {self.describe()}, got {value!r}")
        if any(abs(v) > MAX_ELEMENTS for v in value):
            raise reader.error(
                f"{slot} holds {_largest(value)}, beyond {shown_limit(MAX_ELEMENTS)}, the largest size, count or "
                "index trama accepts (docs/format.md, section 7)"
            )
        if self.window and any(v > MAX_WINDOW for v in value):
            raise reader.error(
                f"{slot} holds {max(value)}, beyond 2**31 - 1, the largest kernel size, stride, padding or "
                "dilation trama accepts: torch computes them in 32-bit ints (docs/format.md, section 7)"
            )
        return tuple(int(v) for v in value)

    def describe(self) -> str:
        """What the list must be, in words."""
        if self.count is not None:
            text = f"a list of {self.count} ints"
        else:
            text = "a non-empty list of ints" if self.non_empty else "a list of ints"
        if self.minimum is not None:
            text += f" ≥ {self.minimum}"
        return f"null or {text}" if self.nullable else text

    def types(self) -> tuple[str, ...]:
        return ("list", "null") if self.nullable else ("list",)


@dataclass(frozen=True, slots=True)
class Dims:
    """Dimensions to reduce or squeeze: ``null`` (all of them), an int, or a non-empty list of
    ints, as a tuple (an empty list is refused: torch reads it as every dimension, numpy as
    none)."""

    default: Any = None

    @property
    def nullable(self) -> bool:
        return True

    def read(self, reader: Reader, slot: str) -> tuple[int, ...] | None:
        value = reader.raw(slot, self.default)
        if value is None:
            return None
        if is_int(value):
            return (int(value),)
        if isinstance(value, (list, tuple)) and value and all(is_int(v) for v in value):
            return tuple(int(v) for v in value)
        raise reader.error(f"{slot} must be null, an int or a non-empty list of ints, got {value!r}")

    def types(self) -> tuple[str, ...]:
        return ("int", "list", "null")


@dataclass(frozen=True, slots=True)
class RequiredList:
    """Base of the rules of a required list slot with a form of its own (a subclass reads it)."""

    default: Any = REQUIRED
    nullable: bool = False

    def types(self) -> tuple[str, ...]:
        return ("list",)


#: A check of what relates settings to each other and to tensors: reads ``reader.values`` (every
#: rule has run), checks tensors through the reader, may add derived values; raises its error.
Relation = Callable[[Reader], None]


@dataclass(frozen=True, slots=True)
class Checker:
    """The settings checks of one catalog op: ``rules`` by setting slot, then ``relations``.

    Every slot of the op that can hold a setting has a rule (a test holds the rules against the
    spec: slots, defaults, types); tensor slots are the relations' business, because their
    shapes follow from the settings.
    """

    rules: Mapping[str, Rule] = field(default_factory=dict)
    relations: tuple[Relation, ...] = ()

    def check(self, node: Node, parameters: Mapping[str, Parameter]) -> Settings:
        """The node's settings, or the :class:`~trama.RegistryError` of the first problem."""
        reader = Reader(node, parameters)
        for slot, rule in self.rules.items():
            reader.values[slot] = rule.read(reader, slot)
        for relation in self.relations:
            relation(reader)
        return reader.settings()
