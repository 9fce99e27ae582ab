"""trama's capture on the zoo: every real model exports with its example inputs and comes back, or
fails only for want of a catalog op, named in the error.

For each zoo entry, ``trama.export_model(model, ..., example_inputs=...)`` either

* succeeds, and then the document, written to JSON and read back, imports into torch with the
  original's ``state_dict`` keys and exactly its outputs (``torch.equal``: the same torch ops on
  the same weights), and runs on numpy, torch:cpu and jax:cpu within 1e-5 of them (relative to
  the output's largest magnitude); or
* raises one ``trama.ExportError`` line that names the aten op the catalog lacks ("... has no
  catalog op for it yet"). Issue 13 adds those ops; this test then holds the model to the first
  branch without a change here.

The table of which model needs which op is ``benchmarks/realworld_report.py``'s.
"""

from __future__ import annotations

import importlib.util
import re
from typing import Any

import numpy as np
import pytest
import torch

import trama
from realworld.models import ZOO, RealModel

#: The error of a capture blocked by the catalog: the op it lacks, then why.
MISSING_OP = re.compile(r"(aten\.[\w.]+|operator\.\w+|torch\.autocast)[^:]*? has no catalog op for it yet")

RUNTIMES = ("numpy", "torch:cpu", "jax:cpu")

#: Runtime failures that are another package's bugs, known and reported: strict, so that a fix
#: makes the entry fail until it is removed here.
KNOWN: dict[tuple[str, str], str] = {}


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, (tuple, list)):
        return [item for part in value for item in _tensors(part)]
    if isinstance(value, dict):
        return [item for part in value.values() for item in _tensors(part)]
    return [value]


def _captured(entry: RealModel) -> tuple[Any, trama.Model | None, str | None]:
    model = entry.build()
    args, kwargs = entry.args_kwargs()
    try:
        document = trama.export_model(
            model,
            inputs=list(entry.input_names),
            outputs=list(entry.output_names),
            example_inputs=kwargs if kwargs else args,
        )
    except trama.ExportError as exc:
        return model, None, str(exc)
    return model, trama.loads(trama.dumps(document)), None


@pytest.mark.parametrize("entry", ZOO, ids=lambda entry: entry.name)
def test_capture_round_trips_or_names_the_missing_op(entry: RealModel) -> None:
    model, document, error = _captured(entry)
    if document is None:
        assert error is not None
        assert len(error.splitlines()) == 1, error
        assert MISSING_OP.search(error), f"the capture failed for another reason than a missing op: {error}"
        return
    args, kwargs = entry.args_kwargs()
    inputs = [kwargs[name] for name in entry.input_names] if kwargs else list(args)
    with torch.no_grad():
        expected = _tensors(model(*args, **kwargs))
    back = trama.import_model(document, registry=trama.registry("torch"))
    assert set(back.state_dict()) == set(model.state_dict())
    with torch.no_grad():
        got = _tensors(back(*inputs))
    assert len(got) == len(expected)
    for have, want in zip(got, expected, strict=True):
        assert have.dtype == want.dtype
        assert torch.equal(have, want)
    for name in RUNTIMES:
        package = {"numpy": "trama_numpy", "torch:cpu": "trama_torch", "jax:cpu": "trama_jax"}[name]
        assert importlib.util.find_spec(package) is not None, f"{package} must be installed to run the zoo"
        known = KNOWN.get((entry.name, name))
        try:
            outputs = trama.runtime_for_name(name).prepare(document).run([value.numpy() for value in inputs])
        except trama.ExecutionError:
            if known is not None:
                continue
            raise
        assert known is None, f"{entry.name} on {name} runs now: remove it from KNOWN"
        for have, want in zip(outputs, expected, strict=True):
            scale = max(1.0, float(want.abs().max()))
            assert float(np.max(np.abs(np.asarray(have) - want.numpy()))) <= 1e-5 * scale, name
