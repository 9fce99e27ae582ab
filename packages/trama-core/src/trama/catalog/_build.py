"""The few shapes every catalog spec is made of: slot kinds that carry the catalog's
``learnable`` rule, and an op constructor that ends every doc with its eval-mode behaviour.

People implementing these ops in another framework read the specs side by side, so the same
thing must always be said the same way: a hyper-parameter is never learnable and states its
torch default, a learned weight is always learnable, and every op says what it does in
evaluation mode. Saying it once here keeps the category modules down to what is particular
to each op, and keeps the specs from drifting apart as the catalog grows.

Docs are Markdown: ``docs/ops.md`` prints them as they are.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Sequence
from typing import Final

from trama.format._specs import OpSpec, ParameterSchema

__all__ = [
    "REQUIRED",
    "SAME_IN_EVAL",
    "buffer",
    "hyper",
    "literal",
    "op",
    "operand",
    "prose",
    "weight",
]


class _Required:
    """The type of :data:`REQUIRED` (a sentinel, because ``None`` is a real torch default)."""

    def __repr__(self) -> str:
        return "REQUIRED"


#: ``default=REQUIRED``: the torch argument has no default, so the slot must be present.
REQUIRED: Final = _Required()

#: The eval-mode sentence of an op that behaves the same way in training and evaluation.
SAME_IN_EVAL: Final = "As in training: the op has no mode-dependent behaviour."


def prose(text: str) -> str:
    """Dedent a triple-quoted block, so that docs can be written at the indentation of the code.

    A line without tabs is what ``inspect.cleandoc`` makes of it, its leading blanks stripped,
    without the general case's work: three docs in four are one line, and discovery builds them
    all."""
    if "\n" not in text and "\t" not in text:
        return text.lstrip()
    return inspect.cleandoc(text)


def literal(value: object) -> str:
    """A value as it is written in a document (``true``, ``null``, ``[1, 1]``, ``"zeros"``)."""
    return json.dumps(value)


def hyper(name: str, types: str | Sequence[str], doc: str, default: object = REQUIRED) -> ParameterSchema:
    """A hyper-parameter: configuration written by the author, never trained (``learnable=False``).

    The slot is optional exactly when torch's argument has a default, and the doc then ends with
    that default, so an implementer never has to look it up in torch. A ``None`` default also
    admits an explicit ``null`` in the document, as torch admits an explicit ``None``.
    """
    kinds = (types,) if isinstance(types, str) else tuple(types)
    text = prose(doc)
    if isinstance(default, _Required):
        return ParameterSchema(name, kinds, optional=False, learnable=False, doc=text)
    if default is None and "null" not in kinds:
        kinds += ("null",)
    return ParameterSchema(
        name,
        kinds,
        optional=True,
        learnable=False,
        doc=f"{text} Default `{literal(default)}`.",
        default=json.loads(literal(default)),  # as a document holds it: a tuple is a list
    )


def weight(name: str, doc: str, *, optional: bool = False) -> ParameterSchema:
    """Learned state (a torch ``Parameter``): a tensor entry, normally ``learnable=True``.

    The flag is not enforced: a frozen weight (``requires_grad=False``) is exported as
    ``learnable=False`` and is still that op's weight. An optional weight may also be present
    with the value ``null``, meaning absent, as trama 0.2 exporters wrote ``bias=None``."""
    types = ("tensor", "null") if optional else ("tensor",)
    return ParameterSchema(name, types, optional=optional, learnable=None, doc=prose(doc))


def buffer(name: str, doc: str, *, optional: bool = True) -> ParameterSchema:
    """Non-learned state (a torch buffer, such as running statistics): ``learnable=False``."""
    return ParameterSchema(name, ("tensor",), optional=optional, learnable=False, doc=prose(doc))


def operand(name: str, doc: str) -> ParameterSchema:
    """A constant operand given in place of an input port of the same name.

    Its ``learnable`` flag is left free: the constant may be a frozen number (``x * 0.5``) or a
    parameter the module trains (``x * self.scale``), and both are legitimate.
    """
    return ParameterSchema(name, ("tensor", "int", "float", "bool"), optional=True, learnable=None, doc=prose(doc))


def op(
    name: str,
    semantics: str | Sequence[str],
    *,
    eval_mode: str = SAME_IN_EVAL,
    inputs: Sequence[str] = ("x",),
    outputs: Sequence[str] = ("y",),
    optional_inputs: Sequence[str] = (),
    parameters: Sequence[ParameterSchema] = (),
    composite: bool = False,
    variadic_inputs: bool = False,
    variadic_outputs: bool = False,
    since: int = 1,
) -> OpSpec:
    """An :class:`OpSpec` whose doc is ``semantics`` followed by its eval-mode paragraph.

    ``semantics`` may be a sequence of blocks, each dedented on its own and joined by blank lines:
    that is how text shared by several ops (a family's window rules) is spliced in. Ports default
    to the catalog's single-input convention (``x`` in, ``y`` out). ``since`` is the catalog
    opset that added the op (:data:`trama.catalog.CATALOG_OPSET` when it is new).
    """
    blocks = (semantics,) if isinstance(semantics, str) else tuple(semantics)
    text = "\n\n".join(prose(block) for block in blocks)
    return OpSpec(
        name,
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        parameters=tuple(parameters),
        composite=composite,
        optional_inputs=tuple(optional_inputs),
        variadic_inputs=variadic_inputs,
        variadic_outputs=variadic_outputs,
        doc=f"{text}\n\n**Eval mode.** {prose(eval_mode)}",
        since=since,
    )
