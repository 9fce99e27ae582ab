"""What trama checks in the values that plugin hooks return, before anything else sees them.

A hook's return value is untrusted input: a plugin may return an ``int`` where a list of specs
goes, a list where a mapping goes, a generator that raises or never ends, factories that are
not callable, or names that would forge a line of ``trama ops``. Nothing a plugin returns
reaches a registry, a runtime or a listing without passing the checks here, so that one broken
plugin is reported and left out while every other one keeps working.

The functions below only *read and check*; the plugin host (:mod:`trama.extension._plugins`)
decides what a failed check costs the plugin and reports it. Every check raises
:class:`ContractError` with the reason, worded to follow the thing refused in a message.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from trama.format._names import NAME, op_name_problem, shown_name
from trama.format._specs import NO_DEFAULT, PARAMETER_TYPES, OpSpec, ParameterSchema

__all__ = [
    "FRAMEWORK_NAME",
    "MAX_HOOK_ITEMS",
    "MAX_MESSAGE_LENGTH",
    "MAX_OPSET_VERSION",
    "RUNTIME_CLASS",
    "ContractError",
    "checked_callable",
    "checked_factory",
    "checked_framework",
    "checked_op_name",
    "checked_opset_version",
    "checked_runtime",
    "checked_spec",
    "clean_message",
    "describe_exception",
    "mapping_pairs",
    "sequence_items",
    "type_name",
]

#: The most items one hook call may return (specs, factories, exporters...), and the most ports
#: or slots one spec may declare. The standard catalog has a few hundred ops; a return value
#: beyond this is a bug (or an endless generator), refused whole before it is read to its end.
MAX_HOOK_ITEMS = 10_000
#: The highest opset version a plugin may declare (documents store it as a JSON integer).
MAX_OPSET_VERSION = 2**31 - 1
#: The most characters of one reported problem: an exception message may be huge.
MAX_MESSAGE_LENGTH = 1_000
#: A framework name: what ``trama_frameworks`` lists and ``trama.registry(...)`` takes
#: (``numpy``, ``torch``, ``acme-fw``): printable, one word, short.
FRAMEWORK_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\Z")
#: Where :class:`trama.Runtime` is defined. The runtime API is a layer above this one, so a
#: runtime is recognised by its class's ancestry by name rather than by importing the class
#: (a test checks that this still names ``trama.Runtime``).
RUNTIME_CLASS = ("trama.execution._runtime", "Runtime")


@functools.cache
def _unprintable() -> re.Pattern[str]:
    """The characters that must not reach a terminal from a plugin's message: C0/C1 controls (a
    newline would forge a line, ESC starts a terminal sequence), lone surrogates (cannot be
    printed), and the line separators and bidirectional controls that make text read other than
    it is. Compiled for the first message, not at discovery, which has none when all is well."""
    return re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


class ContractError(Exception):
    """A hook's return value (or one item of it) breaks the hook's contract; the message says how."""


def type_name(value: object) -> str:
    """What ``value`` is, for a message: ``None``, ``int``, ``generator``, ``acme.Thing``."""
    if value is None:
        return "None"
    kind = type(value)
    module = getattr(kind, "__module__", "")
    name = getattr(kind, "__qualname__", "?")
    text = name if module in ("builtins", None, "") else f"{module}.{name}"
    return text if isinstance(text, str) else "?"


def clean_message(text: str) -> str:
    """``text`` as one printable line of bounded length: what a plugin says (an exception
    message, a name) can neither break the listing's lines nor drive the terminal."""
    flat = _unprintable().sub(_escaped, text)
    if len(flat) > MAX_MESSAGE_LENGTH:
        flat = f"{flat[: MAX_MESSAGE_LENGTH - 3]}..."
    return flat


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def describe_exception(exc: BaseException) -> str:
    """``ValueError: reason`` for an exception a plugin raised, whatever its ``__str__`` does."""
    try:
        text = str(exc)
    except KeyboardInterrupt:
        raise
    except BaseException:  # a plugin's exception may fail to print itself
        text = "<the exception's message could not be printed>"
    return f"{type_name(exc).rpartition('.')[2]}: {text}" if text else type_name(exc).rpartition(".")[2]


def sequence_items(value: object, expected: str) -> list[Any]:
    """The items of a sequence a hook returned, read once and at most :data:`MAX_HOOK_ITEMS` of
    them. Any iterable is read (a generator too); a string, a mapping or a non-iterable is not a
    sequence of items, and is refused."""
    if isinstance(value, (str, bytes, bytearray, memoryview, Mapping)) or not isinstance(value, Iterable):
        raise ContractError(f"returned {type_name(value)}, not {expected}")
    if type(value) in (list, tuple) and len(value) > MAX_HOOK_ITEMS:  # type: ignore[arg-type]
        raise ContractError(f"returned {len(value)} items, more than the {MAX_HOOK_ITEMS} allowed")  # type: ignore[arg-type]
    items = list(itertools.islice(iter(value), MAX_HOOK_ITEMS + 1))
    if len(items) > MAX_HOOK_ITEMS:
        raise ContractError(f"returned more than the {MAX_HOOK_ITEMS} items allowed")
    return items


def mapping_pairs(value: object, expected: str) -> list[tuple[Any, Any]]:
    """The ``(key, value)`` pairs of a mapping a hook returned, read once and at most
    :data:`MAX_HOOK_ITEMS` of them; anything but a mapping is refused."""
    if not isinstance(value, Mapping):
        raise ContractError(f"returned {type_name(value)}, not {expected}")
    if type(value) is dict and len(value) > MAX_HOOK_ITEMS:
        raise ContractError(f"returned {len(value)} entries, more than the {MAX_HOOK_ITEMS} allowed")
    pairs = list(itertools.islice(iter(value.items()), MAX_HOOK_ITEMS + 1))
    if len(pairs) > MAX_HOOK_ITEMS:
        raise ContractError(f"returned more than the {MAX_HOOK_ITEMS} entries allowed")
    if any(type(pair) is not tuple or len(pair) != 2 for pair in pairs):
        raise ContractError(f"returned {type_name(value)} whose items() are not (key, value) pairs")
    return pairs


def _plain_str(value: object) -> object:
    """A ``str`` subclass (a ``StrEnum`` member) as the plain string it holds, so that no
    method of the plugin's class runs when the name is hashed or compared later."""
    return str.__str__(value) if isinstance(value, str) else value


def checked_op_name(value: object, what: str = "op name") -> str:
    """An op name or opset namespace (a dotted identifier, as documents require)."""
    name = _plain_str(value)
    problem = op_name_problem(name)
    if problem is not None:
        raise ContractError(f"the {what} {shown_name(name)} {problem}")
    assert isinstance(name, str)
    return name


def checked_framework(value: object) -> str:
    """A framework name from ``trama_frameworks``."""
    name = _plain_str(value)
    if not isinstance(name, str):
        raise ContractError(f"it is {type_name(name)}, not a framework name (a string)")
    if FRAMEWORK_NAME.match(name) is None:
        raise ContractError(
            f"{shown_name(name)} is not a framework name (1 to 64 ASCII letters, digits, '_', '-' or '.', like 'numpy')"
        )
    return name


def checked_opset_version(value: object) -> int:
    """An opset version: an ``int`` (not a ``bool``) from 1 to :data:`MAX_OPSET_VERSION`."""
    if type(value) is not int or not 1 <= value <= MAX_OPSET_VERSION:
        shown = shown_name(value) if type(value) is not int else str(value) if value.bit_length() < 64 else "a huge int"
        raise ContractError(f"version {shown} is not an int from 1 to {MAX_OPSET_VERSION}")
    return value


def checked_callable(value: object, what: str) -> Any:
    """``value`` if it can be called (an exporter, a factory adapter)."""
    if not callable(value):
        raise ContractError(f"the {what} is {type_name(value)}, which is not callable")
    return value


def checked_factory(value: object) -> Any:
    """A factory: a callable, or a class whose ``from_node`` is one (how import calls it)."""
    build = getattr(value, "from_node", value)
    if not callable(build):
        where = "factory" if build is value else "factory's from_node"
        raise ContractError(f"its {where} is {type_name(build)}, which is not callable")
    return value


def _names(values: object, what: str, op: str) -> tuple[str, ...]:
    if type(values) is not tuple:
        raise ContractError(f"op {op!r}: {what} is {type_name(values)}, not a tuple of names")
    if len(values) > MAX_HOOK_ITEMS:
        raise ContractError(f"op {op!r}: {what} has {len(values)} names, more than the {MAX_HOOK_ITEMS} allowed")
    names: dict[str, None] = {}  # ordered, and quick to look up
    for value in values:
        name = _plain_str(value)
        if not isinstance(name, str) or NAME.match(name) is None:
            raise ContractError(
                f"op {op!r}: {what} name {shown_name(name)} is not a name (ASCII letters, digits and '_')"
            )
        if name in names:
            raise ContractError(f"op {op!r}: {what} name {name!r} is given twice")
        names[name] = None
    return tuple(names)


def _flag(value: object, what: str, op: str, *, none: bool = False) -> Any:
    if type(value) is bool or (none and value is None):
        return value
    raise ContractError(f"op {op!r}: {what} is {type_name(value)}, not a bool{' or None' if none else ''}")


def _text(value: object, what: str, op: str) -> str:
    text = _plain_str(value)
    if not isinstance(text, str):
        raise ContractError(f"op {op!r}: {what} is {type_name(text)}, not a string")
    return text


#: The fields of a slot and of a spec, read once rather than for every spec a plugin gives.
_SLOT_FIELDS = tuple(field.name for field in dataclasses.fields(ParameterSchema))
_SPEC_FIELDS = tuple(field.name for field in dataclasses.fields(OpSpec))


def _slot(value: object, op: str) -> ParameterSchema:
    if not isinstance(value, ParameterSchema):
        raise ContractError(f"op {op!r}: a parameter is {type_name(value)}, not a ParameterSchema")
    fields = {name: getattr(value, name) for name in _SLOT_FIELDS}
    (name,) = _names((fields["name"],), "slot", op)
    types = fields["types"]
    if type(types) is not tuple or not types or len(types) > len(PARAMETER_TYPES):
        raise ContractError(f"op {op!r}: slot {name!r} types are {type_name(types)}, not a tuple of type names")
    plain = tuple(_plain_str(kind) for kind in types)
    if not all(isinstance(kind, str) and kind in PARAMETER_TYPES for kind in plain):
        raise ContractError(f"op {op!r}: slot {name!r} has types other than {sorted(PARAMETER_TYPES)}")
    return ParameterSchema(
        name,
        plain,  # type: ignore[arg-type]
        optional=_flag(fields["optional"], f"slot {name!r} optional", op),
        learnable=_flag(fields["learnable"], f"slot {name!r} learnable", op, none=True),
        doc=_text(fields["doc"], f"slot {name!r} doc", op),
        default=_default(fields["default"], name, op),
    )


#: A slot's default is a small JSON value: this many items at most, nested this deep at most.
_DEFAULT_ITEMS = 4096
_DEFAULT_DEPTH = 8


def _default(value: object, slot: str, op: str) -> Any:
    """A slot's ``default``: :data:`NO_DEFAULT`, or a plain JSON value (``None``, a bool, an int,
    a finite float, a string, a list of these), copied as plain built-in objects, so that no
    plugin object is compared or printed later (``trama ssa`` compares settings with it)."""
    if value is NO_DEFAULT:
        return value
    budget = [_DEFAULT_ITEMS]

    def plain(item: object, depth: int) -> Any:
        budget[0] -= 1
        if budget[0] < 0 or depth > _DEFAULT_DEPTH:
            raise ContractError(f"op {op!r}: slot {slot!r} default is larger than a setting's default may be")
        if item is None or type(item) is bool or type(item) is int:
            return item
        if type(item) is float and math.isfinite(item):
            return item
        text = _plain_str(item)
        if isinstance(text, str):
            return text
        if type(item) in (list, tuple):
            return [plain(part, depth + 1) for part in item]  # type: ignore[attr-defined]
        raise ContractError(f"op {op!r}: slot {slot!r} default is {type_name(item)}, not a JSON value")

    return plain(value, 0)


def checked_spec(value: object) -> OpSpec:
    """A copy of the :class:`OpSpec` a plugin gave, every field checked: names as documents
    require them, flags as ``bool``, counts bounded. The copy is a plain ``OpSpec`` without a
    factory, so that no method of a subclass runs when specs are compared or hashed later."""
    if not isinstance(value, OpSpec):
        raise ContractError(f"it is {type_name(value)}, not an OpSpec")
    fields = {name: getattr(value, name) for name in _SPEC_FIELDS}
    name = checked_op_name(fields["name"])
    inputs = _names(fields["inputs"], "input", name)
    optional_inputs = _names(fields["optional_inputs"], "optional input", name)
    both = sorted(set(inputs) & set(optional_inputs))
    if both:
        raise ContractError(f"op {name!r}: {both[0]!r} is both an input and an optional input")
    outputs = _names(fields["outputs"], "output", name)
    parameters = fields["parameters"]
    if type(parameters) is not tuple or len(parameters) > MAX_HOOK_ITEMS:
        raise ContractError(f"op {name!r}: parameters are {type_name(parameters)}, not a tuple of ParameterSchema")
    slots = tuple(_slot(slot, name) for slot in parameters)
    _names(tuple(slot.name for slot in slots), "slot", name)  # no slot twice
    since = fields["since"]
    if since is not None:
        try:
            since = checked_opset_version(since)
        except ContractError as exc:
            raise ContractError(f"op {name!r}: since {exc}") from None
    return OpSpec(
        name,
        inputs=inputs,
        outputs=outputs,
        parameters=slots,
        composite=_flag(fields["composite"], "composite", name),
        optional_inputs=optional_inputs,
        variadic_inputs=_flag(fields["variadic_inputs"], "variadic_inputs", name),
        variadic_outputs=_flag(fields["variadic_outputs"], "variadic_outputs", name),
        doc=_text(fields["doc"], "doc", name),
        since=since,
        check=_check(fields["check"], name),
    )


def _check(value: object, op: str) -> Any:
    """A spec's settings check: ``None`` or a callable (called later, isolated like a hook)."""
    if value is not None and not callable(value):
        raise ContractError(f"op {op!r}: check is {type_name(value)}, not a callable or None")
    return value


def _is_runtime(value: object) -> bool:
    module, name = RUNTIME_CLASS
    return any(
        getattr(kind, "__module__", None) == module and getattr(kind, "__qualname__", None) == name
        for kind in type(value).__mro__
    )


def checked_runtime(value: object) -> tuple[str, ...]:
    """The names a runtime answers to (its ``name()`` and its aliases), once it is checked to be
    a :class:`trama.Runtime` whose names are strings."""
    if not _is_runtime(value):
        raise ContractError(f"it is {type_name(value)}, not a trama.Runtime")
    name = value.name()  # type: ignore[attr-defined]
    if type(name) is not str or not name:
        raise ContractError(f"its name() is {type_name(name)}, not a non-empty string")
    aliases = value.aliases  # type: ignore[attr-defined]
    if type(aliases) is not tuple or len(aliases) > MAX_HOOK_ITEMS or not all(type(a) is str for a in aliases):
        raise ContractError(f"runtime {shown_name(name)}: its aliases are {type_name(aliases)}, not a tuple of strings")
    return (name, *aliases)
