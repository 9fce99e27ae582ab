"""trama's capture on the zoo: every real model exports with its example inputs and comes back.

For each zoo entry, ``trama.export_model(model, ..., example_inputs=...)`` succeeds, and the
document, written to JSON and read back, imports into torch with the original's ``state_dict``
keys and exactly its outputs (``torch.equal``: the same torch ops on the same weights), and runs
on numpy, torch:cpu and jax:cpu within 1e-4 of them, relative to the output's largest magnitude
(float32 through a whole network: the catalog's ops agree within 1e-5 one by one, and a deep
model adds up such differences).

:data:`REFUSED` lists the models the capture refuses on purpose, each with the one-line reason
it must give; it is strict, so a model that starts exporting fails until it is removed there.
The table of every model's figures is ``benchmarks/realworld_report.py``'s.
"""

from __future__ import annotations

import importlib.util
import re
from typing import Any

import numpy as np
import torch

import trama
from realworld.captures import ZooCapture

#: Models whose capture is refused on purpose, with the reason the error must give.
REFUSED: dict[str, str] = {}

#: Models whose import comes back with some ``state_dict`` keys renamed, by the original keys
#: that do not survive (outputs are still exact). Strict, as REFUSED.
RENAMED_KEYS: dict[str, set[str]] = {}

RUNTIMES = ("numpy", "torch:cpu", "jax:cpu")


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, (tuple, list)):
        return [item for part in value for item in _tensors(part)]
    if isinstance(value, dict):
        return [item for part in value.values() for item in _tensors(part)]
    return [value]


def test_capture_exports_imports_exactly_and_runs_everywhere(zoo_capture: ZooCapture) -> None:
    entry, model, document, error = zoo_capture.entry, zoo_capture.model, zoo_capture.document, zoo_capture.error
    refused = REFUSED.get(entry.name)
    if refused is not None:
        assert error is not None, f"{entry.name} exports now: remove it from REFUSED"
        assert len(error.splitlines()) == 1, error
        assert re.search(refused, error), error
        return
    assert document is not None, error
    args, kwargs = entry.args_kwargs()
    inputs = [kwargs[name] for name in entry.input_names] if kwargs else list(args)
    with torch.no_grad():
        expected = _tensors(model(*args, **kwargs))
    back = trama.import_model(document, registry=trama.registry("torch"))
    lost = set(model.state_dict()) - set(back.state_dict())
    assert lost == RENAMED_KEYS.get(entry.name, set()), f"keys lost on import: {sorted(lost)}"
    assert len(back.state_dict()) == len(model.state_dict()) - len(lost)
    with torch.no_grad():
        got = _tensors(back(*inputs))
    assert len(got) == len(expected)
    for have, want in zip(got, expected, strict=True):
        assert have.dtype == want.dtype
        assert torch.equal(have, want)
    for name in RUNTIMES:
        package = {"numpy": "trama_numpy", "torch:cpu": "trama_torch", "jax:cpu": "trama_jax"}[name]
        assert importlib.util.find_spec(package) is not None, f"{package} must be installed to run the zoo"
        outputs = trama.runtime_for_name(name).prepare(document).run([value.numpy() for value in inputs])
        assert len(outputs) == len(expected), name
        for have, want in zip(outputs, expected, strict=True):
            scale = max(1.0, float(want.abs().max()))
            difference = float(np.max(np.abs(np.asarray(have, dtype=np.float64) - want.double().numpy())))
            assert difference <= 1e-4 * scale, f"{name}: {difference:.3g} (scale {scale:.3g})"
