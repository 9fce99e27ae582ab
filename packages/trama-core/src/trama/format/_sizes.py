"""Sizes that depend on the inputs: expressions over the symbols of the input facts.

A model exported at batch 2 and length 16 must run at batch 1 and length 300. Where an op's
setting is a size read from the inputs (``torch.arange(x.shape[1])``, ``x.view(b, s, h, d)``),
the document writes it as a :class:`SizeExpr`, ``{"size": "seq + 1"}``: an expression over the
symbols the input facts name (``"shape": ["batch", "seq"]``). Before a node is built for a run,
the runtime binds every symbol from the inputs' shapes (:mod:`trama.execution._inputs`) and
replaces each expression by its number (:func:`resolve_sizes`), so kernels only ever see
numbers, and a JAX program is compiled once per distinct binding.

The language is small on purpose, parsed here without ``eval``: integers, decimal numbers,
symbols (identifiers), ``+ - * / // %``, unary ``-``, parentheses, and ``min(a, b, ...)``,
``max(a, b, ...)``. ``//`` and ``%`` are Python's floor division and modulo (the sign of the
divisor), as torch's size arithmetic is; ``/`` gives a float. Integers are unbounded while an
expression is evaluated and checked against a signed 64-bit integer at the end.

The :class:`SymbolRange` of a symbol (the top-level ``symbols`` member) says the sizes it may
take, as torch.export derived them (``seq <= 64`` from a position table).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias, cast

from trama.errors import SchemaError

__all__ = [
    "MAX_SIZE_TEXT",
    "SizeExpr",
    "SymbolRange",
    "has_sizes",
    "is_symbol_name",
    "is_symbolic_int",
    "resolve_sizes",
    "size_symbols",
]

#: The longest expression text read (characters): a size is a short formula, never a program.
MAX_SIZE_TEXT = 512
#: The deepest nesting of parentheses and calls an expression may have.
_MAX_NESTING = 32
_INT64_MAX = 2**63 - 1

_TOKEN = re.compile(r"\s*(?:(\d+\.\d*|\d*\.\d+|\d+)|([A-Za-z_][A-Za-z0-9_]*)|(//|[-+*/%(),]))", re.ASCII)
_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FUNCTIONS = frozenset({"min", "max"})

#: A parsed expression: a number, a symbol name (``("sym", name)``), or ``(operator, args...)``.
_Tree: TypeAlias = Any


def is_symbol_name(text: str) -> bool:
    """Whether ``text`` can be a symbol in an expression (an identifier, not ``min``/``max``)."""
    return bool(_SYMBOL.fullmatch(text)) and text not in _FUNCTIONS


@dataclass(frozen=True, slots=True)
class SizeExpr:
    """A size computed from the input symbols when the model runs: ``{"size": text}``.

    Two expressions are equal when their texts are: the exporter writes one canonical text for
    one expression, so equal settings stay equal blocks in the nested form."""

    text: str
    _tree: _Tree = field(default=None, compare=False, repr=False, hash=False)
    symbols: frozenset[str] = field(default=frozenset(), compare=False, repr=False, hash=False)

    @classmethod
    def parse(cls, text: Any, where: str = "") -> SizeExpr:
        """Read ``text``; a text that is no expression is a :class:`~trama.SchemaError` at ``where``."""
        tree, symbols = _parse(text, where)
        return cls(text, tree, frozenset(symbols))

    def evaluate(self, binding: Mapping[str, int]) -> int | float:
        """The number this expression is for ``binding`` (each symbol's size).

        Raises ``KeyError`` for a symbol ``binding`` lacks and ``ValueError`` for a division by
        zero or a result that does not fit a signed 64-bit integer."""
        result = _evaluate(self._tree, binding)
        if isinstance(result, int) and not -_INT64_MAX - 1 <= result <= _INT64_MAX:
            raise ValueError(f"size {self.text!r} is {result}, which does not fit a signed 64-bit integer")
        return result

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class SymbolRange:
    """The sizes a symbol may take, bounds included; ``None`` is no bound."""

    min: int | None = None
    max: int | None = None

    def admits(self, size: int) -> bool:
        return (self.min is None or size >= self.min) and (self.max is None or size <= self.max)

    def describe(self) -> str:
        low = "" if self.min is None else f"{self.min} <= "
        high = "" if self.max is None else f" <= {self.max}"
        return f"{low}size{high}"


def has_sizes(value: Any) -> bool:
    """Whether a setting value holds a :class:`SizeExpr`, at any depth of its lists."""
    if isinstance(value, SizeExpr):
        return True
    if isinstance(value, (list, tuple)):
        return any(has_sizes(item) for item in value)
    return False


def size_symbols(value: Any) -> Iterator[str]:
    """The symbols the expressions in a setting value read."""
    if isinstance(value, SizeExpr):
        yield from sorted(value.symbols)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from size_symbols(item)


def resolve_sizes(value: Any, binding: Mapping[str, int]) -> Any:
    """``value`` with each expression replaced by its number for ``binding`` (lists rebuilt,
    anything else returned as it is)."""
    if isinstance(value, SizeExpr):
        return value.evaluate(binding)
    if isinstance(value, list):
        return [resolve_sizes(item, binding) for item in value]
    if isinstance(value, tuple):
        return tuple(resolve_sizes(item, binding) for item in value)
    return value


# -- reading ----------------------------------------------------------------------------------


def _tokens(text: str, where: str) -> list[str]:
    tokens: list[str] = []
    position = 0
    end = len(text.rstrip())
    while position < end:
        match = _TOKEN.match(text, position)
        if match is None:
            raise SchemaError(f"size {text!r}: unexpected {text[position:].strip()[:20]!r}", location=where or None)
        tokens.append(match.group(match.lastindex or 0))
        position = match.end()
    return tokens


def _parse(text: Any, where: str) -> tuple[_Tree, set[str]]:
    if type(text) is not str:
        raise SchemaError(f'a size is {{"size": text}}, got {type(text).__name__}', location=where or None)
    if not text.isascii():
        raise SchemaError(f"size {text[:40]!r}: only ASCII characters are allowed", location=where or None)
    if not text.strip():
        raise SchemaError("a size expression is empty", location=where or None)
    if len(text) > MAX_SIZE_TEXT:
        raise SchemaError(f"a size expression is at most {MAX_SIZE_TEXT} characters", location=where or None)
    tokens = _tokens(text, where)
    symbols: set[str] = set()
    position = 0

    def fail(message: str) -> SchemaError:
        return SchemaError(f"size {text!r}: {message}", location=where or None)

    def peek() -> str | None:
        return tokens[position] if position < len(tokens) else None

    def take() -> str:
        nonlocal position
        token = peek()
        if token is None:
            raise fail("it ends too early")
        position += 1
        return token

    def expression(depth: int) -> _Tree:
        if depth > _MAX_NESTING:
            raise fail(f"it nests more than {_MAX_NESTING} levels deep")
        tree = term(depth)
        while peek() in ("+", "-"):
            tree = (take(), tree, term(depth))
        return tree

    def term(depth: int) -> _Tree:
        tree = factor(depth)
        while peek() in ("*", "/", "//", "%"):
            tree = (take(), tree, factor(depth))
        return tree

    def factor(depth: int) -> _Tree:
        token = take()
        if token == "-":
            if depth >= _MAX_NESTING:
                raise fail(f"it nests more than {_MAX_NESTING} levels deep")
            return ("neg", factor(depth + 1))
        if token == "(":
            tree = expression(depth + 1)
            if take() != ")":
                raise fail("a parenthesis is not closed")
            return tree
        if token[0].isdigit() or token[0] == ".":
            return float(token) if "." in token else int(token)
        if token in _FUNCTIONS:
            if take() != "(":
                raise fail(f"{token} takes its arguments in parentheses")
            arguments = [expression(depth + 1)]
            while peek() == ",":
                take()
                arguments.append(expression(depth + 1))
            if take() != ")":
                raise fail(f"{token}(...) is not closed")
            return (token, *arguments)
        if _SYMBOL.fullmatch(token):
            symbols.add(token)
            return ("sym", token)
        raise fail(f"unexpected {token!r}")

    tree = expression(0)
    if position != len(tokens):
        raise fail(f"unexpected {tokens[position]!r}")
    return tree, symbols


def is_symbolic_int(value: Any) -> bool:
    """Whether ``value`` is a tracing framework's symbolic integer (``torch.SymInt`` while
    ``torch.export`` traces), recognised by the ``__sym_max__`` method such integers have.

    A symbol may be bound to one: an expression then evaluates to another symbolic integer, which
    the framework records in its program, instead of a number fixed at the example's size."""
    return hasattr(type(value), "__sym_max__")


def _extreme(values: list[Any], method: str, builtin: Callable[..., Any]) -> int | float:
    """``min``/``max`` of ``values``, through the symbolic integers' own method where one is
    symbolic: Python's builtin would compare them, fixing which one is smaller in the program."""
    result = values[0]
    for value in values[1:]:
        if is_symbolic_int(result):
            result = getattr(result, method)(value)
        elif is_symbolic_int(value):
            result = getattr(value, method)(result)
        else:
            result = builtin(result, value)
    return cast("int | float", result)  # a symbolic integer stands for an int


def _evaluate(tree: _Tree, binding: Mapping[str, int]) -> int | float:
    if not isinstance(tree, tuple):
        return tree  # type: ignore[no-any-return]
    operator = tree[0]
    if operator == "sym":
        return binding[tree[1]]
    values = [_evaluate(each, binding) for each in tree[1:]]
    if operator == "neg":
        return -values[0]
    if operator == "min":
        return _extreme(values, "__sym_min__", min)
    if operator == "max":
        return _extreme(values, "__sym_max__", max)
    a, b = values
    if operator == "+":
        return a + b
    if operator == "-":
        return a - b
    if operator == "*":
        return a * b
    if not is_symbolic_int(b) and b == 0 and operator in ("/", "//", "%"):
        raise ValueError("a size divides by zero")
    if operator == "/":
        return a / b
    if operator == "//":
        return a // b
    return a % b
