"""What the export, import and round-trip tests share: the trip itself, done the way a user does
it (discovered exporter, JSON text, the discovered torch registry), and the comparisons."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

import trama


@dataclass
class Trip:
    """A model's way out and back: the document as read back from its JSON, and the module."""

    document: trama.Model
    module: Any

    def node(self, node_id: str) -> trama.Node:
        return next(node for node in self.document.nodes if node.id == node_id)

    def ids(self) -> list[str]:
        return [node.id for node in self.document.nodes]


def round_trip(module: nn.Module, inputs: list[str], outputs: list[str]) -> Trip:
    """Export with no registry (discovery), write and read the JSON, import with torch's."""
    exported = trama.export_model(module, inputs=inputs, outputs=outputs)
    document = trama.loads(trama.dumps(exported))
    return Trip(document, trama.import_model(document, registry=trama.registry("torch")))


def as_tuple(value: Any) -> tuple[Any, ...]:
    return value if isinstance(value, tuple) else (value,)


def assert_same_outputs(original: nn.Module, back: nn.Module, *args: Any) -> None:
    """Exactly the same values (``torch.equal``) and dtypes, output by output."""
    with torch.no_grad():
        expected, got = as_tuple(original(*args)), as_tuple(back(*args))
    assert len(got) == len(expected)
    for want, have in zip(expected, got, strict=True):
        assert have.dtype == want.dtype
        assert torch.equal(have, want)


def assert_same_state_keys(original: nn.Module, back: nn.Module, *, except_keys: Sequence[str] = ()) -> None:
    """The imported module's ``state_dict`` keys are the original's (apart from ``except_keys``,
    which the test names because the tree differs there on purpose)."""
    expected = set(original.state_dict()) - set(except_keys)
    assert set(back.state_dict()) - set(except_keys) == expected


#: The CPU runtimes a captured document must run on.
RUNTIMES = ("numpy", "torch:cpu", "jax:cpu")


def run_everywhere(document: trama.Model, *args: torch.Tensor) -> dict[str, list[np.ndarray]]:
    """Each runtime's outputs, as numpy arrays."""
    found = {}
    for name in RUNTIMES:
        results = trama.runtime_for_name(name).prepare(document).run([arg.numpy() for arg in args])
        found[name] = [np.asarray(result) for result in results]
    return found


def assert_exact_and_runtimes_agree(model: nn.Module, document: trama.Model, *args: torch.Tensor) -> None:
    """Imported back: ``torch.equal`` outputs of the same dtypes; every runtime within 1e-5."""
    back = trama.import_model(document, registry=trama.registry("torch"))
    assert_same_outputs(model, back, *args)
    with torch.no_grad():
        expected = as_tuple(model(*args))
    for name, results in run_everywhere(document, *args).items():
        assert len(results) == len(expected), name
        for want, have in zip(expected, results, strict=True):
            assert have.shape == tuple(want.shape), name
            np.testing.assert_allclose(
                have.astype(np.float64), want.numpy().astype(np.float64), rtol=1e-5, atol=1e-5, err_msg=name
            )
