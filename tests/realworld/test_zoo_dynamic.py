"""Export once, run at any batch and length: every zoo model with its sizes symbolic.

Each zoo entry is exported once with its dynamic axes symbolic (``dynamic_shapes``): the text
models, speech encoders and torch's transformers and taggers with the axes their
``dynamic_axes`` name (batch and sequence), every other model (the vision models) with a
symbolic batch. The document, written to JSON and read back, runs at two other sizes, one below
the example's and one above it (:data:`realworld.dynamic.SMALLER`, :data:`~realworld.dynamic.LARGER`),
on numpy, torch:cpu and jax:cpu: each output equals the model's own eager output at that size
within 1e-4 of its largest magnitude, as the zoo's capture test asks at the example's size; and,
imported into torch and called directly, it computes exactly the model's outputs there.

The document holds the sizes the model reads as expressions over the symbols (``{"size":
"sequence"}``), and its input facts name the symbols: :func:`test_sizes_are_written_over_the_symbols`
checks that every expression reads only declared symbols, and that the model's inputs carry them.

:data:`REFUSED` lists the models whose dynamic export fails on purpose, with the reason the
error must give (strict: a model that starts exporting fails until it is removed there).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np
import pytest
import torch

import trama
from realworld.dynamic import LARGER, SMALLER, export_dynamic, inputs_at
from realworld.models import ZOO, RealModel
from realworld.onnx_status import NOT_LOWERED
from trama.catalog import import_checks
from trama.format._sizes import size_symbols

RUNTIMES = ("numpy", "torch:cpu", "jax:cpu", "onnxruntime")

#: Models whose dynamic export is refused, with the reason its error must give. Both ops have a
#: torch decomposition, which the capture traces for static shapes only.
REFUSED: dict[str, str] = {
    "hf_bloom": r"aten\.baddbmm\.default has no catalog op",
    "torch_unet": r"aten\.pixel_shuffle\.default has no catalog op",
}


def _symbolic(entry: RealModel) -> RealModel:
    """The entry with its dynamic axes, or, for a model that names none, a symbolic batch."""
    if entry.dynamic_axes:
        return entry
    return dataclasses.replace(entry, dynamic_axes={name: {0: "batch"} for name in entry.input_names})


DYNAMIC = [_symbolic(entry) for entry in ZOO]


class Exported:
    """A zoo model and its dynamic export (or the error the export raised)."""

    def __init__(self, entry: RealModel) -> None:
        self.entry = entry
        self.model = entry.build()
        self.error: str | None = None
        self.document: trama.Model | None = None
        try:
            self.document = export_dynamic(entry, self.model)
        except trama.TramaError as exc:
            self.error = str(exc)


@pytest.fixture(scope="module", params=DYNAMIC, ids=lambda entry: entry.name)
def exported(request: pytest.FixtureRequest) -> Exported:
    return Exported(request.param)


def _outputs(model: torch.nn.Module, entry: RealModel, inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    _, kwargs = entry.args_kwargs()
    with torch.no_grad():
        result = model(**inputs) if kwargs else model(*(inputs[name] for name in entry.input_names))
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)):
        return list(result)
    return [result[name] for name in entry.output_names]


def _exported_or_refused(exported: Exported) -> bool:
    """Whether the model exported; a refused one must fail with its reason, in one line."""
    refused = REFUSED.get(exported.entry.name)
    if refused is None:
        assert exported.document is not None, exported.error
        return True
    assert exported.error is not None, f"{exported.entry.name} exports now: remove it from REFUSED"
    assert re.search(refused, exported.error), exported.error
    return False


def test_sizes_are_written_over_the_symbols(exported: Exported) -> None:
    if not _exported_or_refused(exported):
        return
    assert exported.document is not None
    document, entry = exported.document, exported.entry
    declared = {size for fact in document.input_facts or () if fact and fact.shape for size in fact.shape}
    wanted = {symbol for axes in (entry.dynamic_axes or {}).values() for symbol in axes.values()}
    assert wanted <= declared
    used = {symbol for entry_ in document.parameters.values() for symbol in size_symbols(entry_.value)}
    assert used <= wanted, f"sizes read undeclared symbols {sorted(used - wanted)}"
    checks = import_checks(document, trama.registry(None))  # trama validate's last stage
    assert checks.errors == []


def test_imports_into_torch_and_computes_exactly_at_other_sizes(exported: Exported) -> None:
    """``trama.import_model(document)`` called directly (no runtime) binds the sizes from the
    inputs it is given: the same torch ops on the same weights, so ``torch.equal``."""
    if exported.entry.name in REFUSED:
        pytest.skip("its dynamic export is refused (test_sizes_are_written_over_the_symbols checks why)")
    assert exported.document is not None, exported.error
    back = trama.import_model(exported.document, registry=trama.registry("torch"))
    _computes_at_other_sizes(exported, back, exact=True)


#: Models whose torch.export program computes some module with other torch kernels than eager
#: torch does (the fused transformer fast path, the fused recurrent kernels, which a traced
#: program replaces by their decompositions): equal within 1e-4 of the output's largest
#: magnitude, as on the runtimes, instead of bit for bit.
OTHER_KERNELS_IN_TORCH_EXPORT = frozenset(
    {"torch_transformer", "torch_transformer_encoder", "torch_transformer_decoder", "torch_lstm_lm", "torch_gru_tagger"}
)


def test_lowers_to_torch_export_and_computes_exactly_at_other_sizes(exported: Exported) -> None:
    """``trama lower --to torch-export``'s program (``trama_torch.program.export_program``),
    traced once at the example sizes from the input facts, computes the model's outputs at the
    other sizes: the sizes it reads are computed from its inputs, not fixed at the example's."""
    if exported.entry.name in REFUSED:
        pytest.skip("its dynamic export is refused (test_sizes_are_written_over_the_symbols checks why)")
    assert exported.document is not None, exported.error
    from trama_torch.program import export_program

    program = export_program(exported.document).module()
    _computes_at_other_sizes(exported, program, exact=exported.entry.name not in OTHER_KERNELS_IN_TORCH_EXPORT)


def _computes_at_other_sizes(exported: Exported, module: Any, *, exact: bool) -> None:
    """``module`` called on the model's inputs at :data:`SMALLER` and :data:`LARGER` gives the
    model's own outputs: ``torch.equal``, or within 1e-4 of their largest magnitude."""
    entry = exported.entry
    for sizes in (SMALLER, LARGER):
        inputs = inputs_at(entry, sizes)
        expected = _outputs(exported.model, entry, inputs)
        with torch.no_grad():
            got = module(*(inputs[name] for name in entry.input_names))
        got_list = list(got) if isinstance(got, (tuple, list)) else [got]
        assert len(got_list) == len(expected)
        for have, want in zip(got_list, expected, strict=True):
            assert have.dtype == want.dtype
            if exact:
                assert torch.equal(have, want), sizes
            else:
                assert have.shape == want.shape
                scale = max(1.0, float(want.abs().max()))
                assert float((have - want).abs().max()) <= 1e-4 * scale, sizes


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("sizes", [SMALLER, LARGER], ids=["smaller", "larger"])
def test_runs_at_other_sizes_equal_to_eager(exported: Exported, runtime: str, sizes: dict[str, int]) -> None:
    if exported.entry.name in REFUSED:
        pytest.skip("its dynamic export is refused (test_sizes_are_written_over_the_symbols checks why)")
    if runtime == "onnxruntime" and exported.entry.name in NOT_LOWERED:
        pytest.skip("trama-onnx does not lower it yet (test_zoo_onnx.py checks why)")
    assert exported.document is not None, exported.error
    entry = exported.entry
    inputs = inputs_at(entry, sizes)
    expected = _outputs(exported.model, entry, inputs)
    runnable = trama.runtime_for_name(runtime).prepare(exported.document)
    got = runnable.run([inputs[name].numpy() for name in entry.input_names])
    assert len(got) == len(expected)
    for have, want in zip(got, expected, strict=True):
        have_array = np.asarray(have, dtype=np.float64)
        assert have_array.shape == tuple(want.shape)
        scale = max(1.0, float(want.abs().max()))
        difference = float(np.max(np.abs(have_array - want.double().numpy()))) if want.numel() else 0.0
        assert difference <= 1e-4 * scale, f"{runtime}: {difference:.3g} (scale {scale:.3g})"
