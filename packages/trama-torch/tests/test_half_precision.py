"""Transformers in half precision: a BERT, a Llama and a DeiT from transformers, cast to bfloat16
and to float16, exported with ``trama.export_model``, written and read back, run on numpy,
torch:cpu and jax:cpu within the catalog's half-precision tolerance of their float32 computation
(``docs/ops.md``, "Half precision": ``|y − y₃₂| ≤ t · (1 + |y₃₂|)``, ``t`` = 8ε for a graph of a
few layers, :func:`trama.catalog.half_tolerance`).

The reference is the float32 computation of the 16-bit model: the same module with its 16-bit
weights widened to float32 (exactly), on the same (16-bit) inputs. torch's own eager run of the
16-bit model is held to the same bound, so the tolerance is one torch itself meets.

The DeiT keeps transformers' ``layer_norm_eps`` of 1e-12, which is 0 in float16: a runtime that
added it in float16 divides a constant row by √0 (NaN), where the catalog adds it in float32.

The models are tiny (two layers of width 32, random seeded weights, nothing downloaded), with
``attn_implementation="sdpa"`` and, for Llama and DeiT, also transformers' "eager" attention,
which computes its softmax in float32 and casts back (``softmax(..., dtype=float32).to(dtype)``):
the capture writes that as a ``to`` before the ``softmax``.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import trama
from trama.catalog import HALF_PRECISION, half_tolerance
from trama.format import numpy_dtype

RUNTIMES = ("numpy", "torch:cpu", "jax:cpu")
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}
SEED = 0


def _transformers() -> Any:
    """transformers, after the zoo's fix that lets torchvision import next to the CPU torch
    (tests/realworld/models.py, loaded by path: the zoo is not a package of this repository)."""
    path = Path(__file__).resolve().parents[3] / "tests" / "realworld" / "models.py"
    spec = importlib.util.spec_from_file_location("_trama_zoo_models", path)
    assert spec is not None
    assert spec.loader is not None
    zoo = sys.modules.get(spec.name)
    if zoo is None:
        zoo = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = zoo  # before running it: its dataclasses look their module up
        spec.loader.exec_module(zoo)
    zoo.ensure_torchvision_importable()
    return pytest.importorskip("transformers")


_SIZE = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}


def _bert(hf: Any) -> nn.Module:
    config = hf.BertConfig(vocab_size=128, max_position_embeddings=64, attn_implementation="sdpa", **_SIZE)
    return hf.BertModel(config, add_pooling_layer=False)


def _llama(hf: Any, attention: str = "sdpa") -> nn.Module:
    config = hf.LlamaConfig(
        vocab_size=128,
        max_position_embeddings=64,
        num_key_value_heads=1,
        use_cache=False,
        attn_implementation=attention,
        **_SIZE,
    )
    return hf.LlamaModel(config)


def _deit(hf: Any, attention: str = "sdpa") -> nn.Module:
    config = hf.DeiTConfig(image_size=32, patch_size=8, attn_implementation=attention, **_SIZE)
    assert config.layer_norm_eps == 1e-12  # transformers' default: the value float16 loses
    return hf.DeiTModel(config, add_pooling_layer=False)


def _tokens() -> dict[str, torch.Tensor]:
    return {"input_ids": torch.randint(3, 128, (2, 8), generator=torch.Generator().manual_seed(SEED))}


def _pixels() -> dict[str, torch.Tensor]:
    return {"pixel_values": torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(SEED))}


MODELS: dict[str, tuple[Callable[[Any], nn.Module], Callable[[], dict[str, torch.Tensor]]]] = {
    "bert": (_bert, _tokens),
    "llama": (_llama, _tokens),
    "deit": (_deit, _pixels),
    "llama-eager": (lambda hf: _llama(hf, "eager"), _tokens),
    "deit-eager": (lambda hf: _deit(hf, "eager"), _pixels),
}


def _built(name: str) -> nn.Module:
    build, _ = MODELS[name]
    hf = _transformers()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        return build(hf).eval()


def _as_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A tensor as numpy sees it: bfloat16 as ml_dtypes' type (exact, through float32)."""
    if tensor.dtype == torch.bfloat16:
        return tensor.float().numpy().astype(numpy_dtype("bfloat16"))
    return tensor.numpy()


def _within(y: Any, y32: np.ndarray, dtype: str, who: str) -> float:
    """``y`` is of ``dtype``, finite, and within the graph tolerance of ``y32``; returns the
    largest ``|y − y₃₂| / (1 + |y₃₂|)``."""
    if isinstance(y, torch.Tensor):
        assert y.dtype == DTYPES[dtype], f"{who}: dtype {y.dtype}, expected {dtype}"
        y = _as_numpy(y.detach())
    y = np.asarray(y)
    assert y.dtype == numpy_dtype(dtype), f"{who}: dtype {y.dtype}, expected {dtype}"
    wide = y.astype(np.float64)
    assert np.isfinite(wide).all(), f"{who}: {int((~np.isfinite(wide)).sum())} values are not finite"
    t = half_tolerance(dtype)
    error = float(np.max(np.abs(wide - y32) / (1 + np.abs(y32))))
    np.testing.assert_allclose(wide, y32, rtol=t, atol=t, err_msg=f"{who}: largest error {error:.3g}, allowed {t:.3g}")
    return error


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", MODELS)
def test_a_half_precision_transformer_runs_everywhere_within_the_catalog_tolerance(name: str, dtype: str) -> None:
    half = DTYPES[dtype]
    model = _built(name).to(half)
    example = {key: value.to(half) if value.is_floating_point() else value for key, value in MODELS[name][1]().items()}
    float32 = _built(name)
    float32.load_state_dict({key: value.float() for key, value in model.state_dict().items()})
    with torch.no_grad():
        eager = model(**example).last_hidden_state
        y32 = float32(**{k: v.float() if v.is_floating_point() else v for k, v in example.items()}).last_hidden_state
    reference = y32.double().numpy()

    document = trama.export_model(model, inputs=list(example), outputs=["last_hidden_state"], example_inputs=example)
    document = trama.loads(trama.dumps(document))
    weights = [entry.value for entry in document.parameters.values() if entry.learnable]
    assert {weight.dtype for weight in weights} == {dtype}, "the weights stay 16-bit"

    errors = {"torch eager": _within(eager, reference, dtype, f"eager torch's {dtype} {name}")}
    inputs = [_as_numpy(value) for value in example.values()]
    for runtime in RUNTIMES:
        (y,) = trama.runtime_for_name(runtime).prepare(document).run(inputs)
        errors[runtime] = _within(y, reference, dtype, f"{runtime}'s {dtype} {name}")
    print(f"\n{name} {dtype}: " + ", ".join(f"{who} {error:.3g}" for who, error in errors.items()))


def test_a_float16_layer_norm_adds_a_tiny_eps_in_float32_on_every_runtime() -> None:
    """DeiT's ``LayerNorm(eps=1e-12)`` on a constant row: the variance is 0, and ``1e-12`` is 0 in
    float16, so a float16 ``√(var + eps)`` divides 0 by 0. In float32 the row normalizes to 0 (then
    the bias), as torch gives."""
    norm = nn.LayerNorm(4, eps=1e-12).half().eval()
    with torch.no_grad():
        norm.bias.copy_(torch.tensor([0.5, -0.25, 0.0, 1.0]))
    x = torch.tensor([[1.5, 1.5, 1.5, 1.5], [0.0, 1.0, 2.0, 3.0]], dtype=torch.float16)
    with torch.no_grad():
        expected = norm(x)
    document = trama.export_model(norm, inputs=["x"], outputs=["y"], example_inputs=(x,))
    for runtime in RUNTIMES:
        (y,) = trama.runtime_for_name(runtime).prepare(document).run([x.numpy()])
        y = y.detach().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
        assert y.dtype == np.float16, runtime
        np.testing.assert_array_equal(y[0], [0.5, -0.25, 0.0, 1.0], err_msg=runtime)
        t = HALF_PRECISION["float16"].op
        np.testing.assert_allclose(y, expected.numpy(), rtol=t, atol=t, err_msg=runtime)
