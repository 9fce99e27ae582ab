"""Symbolic sizes of the captured program as the document's size expressions.

torch.export keeps a dynamic axis as a sympy symbol (``s70``) and every size computed from it as
a sympy expression over such symbols (``s70 + 1``, ``FloorDiv(s72, 2)``, ``Max(1, s70)``). The
document writes the same expression over the names the caller gave the axes in
``dynamic_shapes`` (``{"size": "seq + 1"}``, :class:`trama.SizeExpr`), so that the file runs at
any size the symbols allow. An expression outside the document's language (a size that depends
on a tensor's values, a truncation, a power with a symbolic exponent) has no text: the capture
then reports the size read as the op it lacks, as before.

The names are the capture's: :func:`naming` sets them, from torch's symbols to the caller's,
for the length of one capture.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import sympy

from trama import SizeExpr

__all__ = ["naming", "size_expr"]

_NAMES: ContextVar[Mapping[str, str] | None] = ContextVar("trama_torch_size_names", default=None)

_ADD, _MUL, _UNARY, _ATOM = 1, 2, 3, 4


@contextmanager
def naming(names: Mapping[str, str]) -> Iterator[None]:
    """Name torch's symbols (``"s70"``) as the caller did (``"seq"``) while capturing."""
    token = _NAMES.set(names)
    try:
        yield
    finally:
        _NAMES.reset(token)


def size_expr(value: Any) -> SizeExpr | None:
    """The document's expression for a symbolic size (a ``torch.SymInt``/``SymFloat``), or
    ``None`` where it has none."""
    names = _NAMES.get()
    node = getattr(value, "node", None)
    expr = getattr(node, "expr", None)
    if names is None or expr is None:
        return None
    try:
        text, _ = _text(sympy.sympify(expr), names)
    except _NoText:
        return None
    return SizeExpr.parse(text)


class _NoText(Exception):
    """An expression the document's language cannot write."""


def _text(expr: Any, names: Mapping[str, str]) -> tuple[str, int]:
    """``expr`` written in the document's language, with its precedence."""
    if expr.is_Integer:
        value = int(expr)
        return (str(value), _ATOM) if value >= 0 else (f"-{-value}", _UNARY)
    if expr.is_Float:
        text = repr(float(expr))
        if "e" in text or "n" in text:  # an exponent, inf or nan: not in the language
            raise _NoText
        return (text, _ATOM) if not text.startswith("-") else (text, _UNARY)
    if expr.is_Rational:
        return f"{expr.p} / {expr.q}", _MUL
    if expr.is_Symbol:
        name = names.get(str(expr))
        if name is None:
            raise _NoText
        return name, _ATOM
    kind = type(expr).__name__
    if expr.is_Add:
        terms = sorted(
            expr.args, key=lambda term: (term.could_extract_minus_sign(), term.is_number, sympy.default_sort_key(term))
        )
        text = _operand(terms[0], names, _ADD)
        for term in terms[1:]:
            negated = -term
            if term.could_extract_minus_sign():
                text += " - " + _operand(negated, names, _MUL)
            else:
                text += " + " + _operand(term, names, _ADD)
        return text, _ADD
    if expr.is_Mul:
        coefficient, rest = expr.as_coeff_Mul()
        if coefficient == -1:
            return "-" + _operand(rest, names, _UNARY), _UNARY
        if coefficient.is_Rational and not coefficient.is_Integer:
            numerator = _text(coefficient.p * rest, names)
            return f"{_wrap(numerator, _MUL)} / {coefficient.q}", _MUL
        factors = sorted(expr.args, key=lambda factor: (not factor.is_number, sympy.default_sort_key(factor)))
        return " * ".join(_operand(factor, names, _MUL + 1) for factor in factors), _MUL
    if expr.is_Pow:
        base, exponent = expr.args
        if exponent.is_Integer and 1 <= int(exponent) <= 8:
            return " * ".join([_operand(base, names, _MUL + 1)] * int(exponent)), _MUL
        raise _NoText
    if kind in ("FloorDiv", "CleanDiv"):
        a, b = expr.args
        return f"{_operand(a, names, _MUL)} // {_operand(b, names, _MUL + 1)}", _MUL
    if kind in ("Mod", "PythonMod"):
        a, b = expr.args
        return f"{_operand(a, names, _MUL)} % {_operand(b, names, _MUL + 1)}", _MUL
    if kind in ("IntTrueDiv", "FloatTrueDiv"):
        a, b = expr.args
        return f"{_operand(a, names, _MUL)} / {_operand(b, names, _MUL + 1)}", _MUL
    if kind == "CeilDiv":
        a, b = expr.args
        return f"-(-{_operand(a, names, _UNARY)} // {_operand(b, names, _MUL + 1)})", _UNARY
    if kind in ("Max", "Min"):
        arguments = sorted(expr.args, key=sympy.default_sort_key)
        return f"{kind.lower()}({', '.join(_text(argument, names)[0] for argument in arguments)})", _ATOM
    if kind == "ToFloat":
        return _text(expr.args[0], names)
    raise _NoText


def _operand(expr: Any, names: Mapping[str, str], needed: int) -> str:
    return _wrap(_text(expr, names), needed)


def _wrap(written: tuple[str, int], needed: int) -> str:
    text, precedence = written
    return text if precedence >= needed else f"({text})"
