"""A zoo model and its capture, as the zoo's tests share them (see ``conftest.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import nn

import trama
from realworld.models import RealModel


@dataclass
class ZooCapture:
    """A zoo model, and what ``trama.export_model`` made of it (or the error it raised)."""

    entry: RealModel
    model: nn.Module
    #: the document written to JSON and read back (``None`` when the export failed)
    document: trama.Model | None
    error: str | None

    def inputs(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return self.entry.args_kwargs()


def export(entry: RealModel, model: nn.Module) -> trama.Model:
    """``trama.export_model`` of a zoo model with its example inputs, as a user calls it."""
    args, kwargs = entry.args_kwargs()
    return trama.export_model(
        model,
        inputs=list(entry.input_names),
        outputs=list(entry.output_names),
        example_inputs=kwargs if kwargs else args,
    )


def capture(entry: RealModel) -> ZooCapture:
    model = entry.build()
    try:
        document = export(entry, model)
    except trama.ExportError as exc:
        return ZooCapture(entry, model, None, str(exc))
    return ZooCapture(entry, model, trama.loads(trama.dumps(document)), None)
