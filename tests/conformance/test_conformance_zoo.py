"""Model by model, a file exported from torch runs everywhere with torch's numbers.

Each model of the zoo is an ordinary ``torch.nn.Module``, built in torch with seeded weights (batch
norms with trained running statistics), exported with ``trama.export_model`` in eval mode, written
with ``trama.dump``, read back with ``trama.load``, and run from that same file on numpy, torch:cpu
and jax:cpu. Every runtime must match eager torch, and therefore each other: float32 within 1e-5
relative and absolute, unless the model's entry in :data:`ZOO` documents a looser tolerance (the
README lists them with the measured errors).

A unidirectional GRU model also streams: run chunk by chunk through ``runnable.spawn_state()``,
it gives on every runtime what the whole sequence gives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conformance_support import (
    DEFAULT_TOLERANCE,
    RUNTIMES,
    ErrorLog,
    Tolerance,
    assert_agree,
    normalize,
    prepare_everywhere,
)
from torch import nn
from torch.nn import functional as F

import trama

ERRORS = ErrorLog()


@pytest.fixture(scope="module", autouse=True)
def report_errors() -> Iterator[None]:
    """Print the largest difference from eager torch per model (``pytest -s``): README.md's figures."""
    yield
    print("\n" + ERRORS.report("largest absolute difference between runtimes and eager torch, per model"))


# --- The models -----------------------------------------------------------------------------


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 4))


class SmallCNN(nn.Module):
    """Convolutions with batch norm, max and average pooling, and a dense head."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1, bias=False),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.AvgPool2d(2),
        )
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.head = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.pool(self.features(x))
        return self.head(torch.flatten(h, 1))


class ResidualBlock(nn.Module):
    """A basic ResNet block: two 3×3 convolutions with batch norm, and a skip connection that
    is a strided 1×1 convolution when the shape changes."""

    def __init__(self, channels_in: int, channels_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels_in, channels_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels_out)
        self.conv2 = nn.Conv2d(channels_out, channels_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels_out)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or channels_in != channels_out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(channels_in, channels_out, 1, stride=stride, bias=False), nn.BatchNorm2d(channels_out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class ResNetish(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.blocks = nn.Sequential(ResidualBlock(8, 8, 1), ResidualBlock(8, 16, 2))
        self.head = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.blocks(self.stem(x))
        return self.head(h.mean(dim=(2, 3)))


class TransformerClassifier(nn.Module):
    """Token embeddings plus learned positions, a pre-norm GELU encoder stack with a final norm,
    a key padding mask, and a classifier reading the first position (never masked: values at
    masked positions are not meaningful, ``docs/ops.md``)."""

    def __init__(self, vocab: int = 50, length: int = 12, width: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.positions = nn.Parameter(torch.randn(1, length, width) * 0.1)
        layer = nn.TransformerEncoderLayer(
            width, nhead=4, dim_feedforward=64, batch_first=True, norm_first=True, activation="gelu"
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, norm=nn.LayerNorm(width), enable_nested_tensor=False)
        self.head = nn.Linear(width, 3)

    def forward(self, tokens: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        h = self.encoder(self.embed(tokens) + self.positions, src_key_padding_mask=padding)
        return self.head(h[:, 0])


class GRUTagger(nn.Module):
    """A tag per token: embeddings, a two-layer GRU, a dense layer per step."""

    def __init__(self, bidirectional: bool, vocab: int = 30, tags: int = 6) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, 16)
        self.gru = nn.GRU(16, 24, num_layers=2, batch_first=True, bidirectional=bidirectional)
        self.out = nn.Linear(48 if bidirectional else 24, tags)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h, _ = self.gru(self.embed(tokens))
        return self.out(h)


class EmbeddingClassifier(nn.Module):
    """A bag of embeddings: the mean over the tokens, a hidden layer, log-probabilities."""

    def __init__(self, vocab: int = 40, classes: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, 16)
        self.hidden = nn.Linear(16, 16)
        self.out = nn.Linear(16, classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.hidden(self.embed(tokens).mean(dim=1)))
        return F.log_softmax(self.out(h), dim=-1)


class TiedLM(nn.Module):
    """A language model whose output layer is its embedding table (tied weights): one LSTM."""

    def __init__(self, vocab: int = 30, width: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.lstm = nn.LSTM(width, width, batch_first=True)
        self.decoder = nn.Linear(width, vocab, bias=False)
        self.decoder.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h, _ = self.lstm(self.embed(tokens))
        return self.decoder(h)


# --- The zoo --------------------------------------------------------------------------------


def _images(rng: np.random.Generator) -> list[np.ndarray]:
    return [rng.standard_normal((2, 3, 16, 16)).astype(np.float32)]


def _tokens(vocab: int, length: int) -> Callable[[np.random.Generator], list[np.ndarray]]:
    return lambda rng: [rng.integers(0, vocab, size=(3, length)).astype(np.int64)]


def _tokens_and_padding(rng: np.random.Generator) -> list[np.ndarray]:
    padding = np.zeros((3, 12), dtype=bool)
    padding[1, 9:] = True  # sequences of lengths 12, 9 and 5
    padding[2, 5:] = True
    return [rng.integers(0, 50, size=(3, 12)).astype(np.int64), padding]


@dataclass(frozen=True)
class Entry:
    """A model of the zoo: how to build it, its input names and example inputs, and its
    tolerance against eager torch."""

    build: Callable[[], nn.Module]
    inputs: tuple[str, ...]
    example: Callable[[np.random.Generator], list[np.ndarray]]
    tolerance: Tolerance = DEFAULT_TOLERANCE


ZOO: dict[str, Entry] = {
    "mlp": Entry(mlp, ("x",), lambda rng: [rng.standard_normal((5, 8)).astype(np.float32)]),
    "cnn": Entry(SmallCNN, ("x",), _images),
    "resnet": Entry(ResNetish, ("x",), _images),
    "transformer": Entry(TransformerClassifier, ("tokens", "padding"), _tokens_and_padding),
    "gru_tagger": Entry(lambda: GRUTagger(bidirectional=True), ("tokens",), _tokens(30, 7)),
    "embedding_classifier": Entry(EmbeddingClassifier, ("tokens",), _tokens(40, 9)),
    "tied_lm": Entry(TiedLM, ("tokens",), _tokens(30, 8)),
}


def _trained_statistics(module: nn.Module, example: list[np.ndarray]) -> None:
    """A few training-mode passes, so that batch norms hold running statistics other than their
    initial 0 and 1 (which would hide a runtime that ignores them)."""
    if not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in module.modules()):
        return
    module.train()
    with torch.no_grad():
        for scale in (0.5, 1.5, 3.0):
            module(*(torch.from_numpy(x * scale + 0.3) for x in example))


def built(name: str, seed: int = 0) -> tuple[nn.Module, list[np.ndarray]]:
    """Zoo model ``name`` in eval mode, and example inputs for it."""
    entry = ZOO[name]
    torch.manual_seed(seed)
    module = entry.build()
    example = entry.example(np.random.default_rng(seed))
    _trained_statistics(module, example)
    return module.eval(), example


def eager(module: nn.Module, inputs: list[np.ndarray]) -> np.ndarray:
    with torch.no_grad():
        result = module(*(torch.from_numpy(np.array(x)) for x in inputs))
    output = normalize(result)
    assert isinstance(output, np.ndarray)
    return output


def exported_file(module: nn.Module, inputs: Sequence[str], path: Path) -> trama.Model:
    """``module`` exported, dumped to ``path`` and loaded back: what every runtime runs."""
    trama.dump(trama.export_model(module, inputs=list(inputs), outputs=["y"]), path)
    return trama.load(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("zoo")


@pytest.mark.parametrize("name", sorted(ZOO))
def test_an_exported_model_matches_eager_torch_on_every_runtime(name: str, files: Path) -> None:
    module, inputs = built(name)
    model = exported_file(module, ZOO[name].inputs, files / f"{name}.trama.json")
    results: dict[str, list[Any]] = {"eager torch": [eager(module, inputs)]}
    results.update({runtime: runnable.run(inputs) for runtime, runnable in prepare_everywhere(model).items()})
    assert_agree(results, ["y"], tolerance=ZOO[name].tolerance, log=ERRORS, key=name)


@pytest.mark.parametrize("name", sorted(ZOO))
def test_a_model_trained_in_jax_lowers_to_onnx_and_runs_as_in_jax(name: str, files: Path) -> None:
    """A document that comes out of JAX: the model imported into JAX, every learnable value
    moved by one step computed there (``p - 0.1 * tanh(p)``), the document given back by
    ``to_model`` and lowered to ONNX by trama-onnx (its composites as functions, full check);
    onnxruntime then computes what JAX computes from that document."""
    jax = pytest.importorskip("jax")
    onnx = pytest.importorskip("onnx")
    trama_onnx = pytest.importorskip("trama_onnx")
    module, inputs = built(name)
    model = exported_file(module, ZOO[name].inputs, files / f"{name}.trama.json")
    in_jax = trama.import_model(model, registry=trama.registry("jax"))
    stepped = jax.tree_util.tree_map(lambda p: p - 0.1 * jax.numpy.tanh(p), in_jax.params)
    document = trama.loads(trama.dumps(in_jax.to_model(stepped)))
    changed = [
        key
        for key in stepped
        if not np.array_equal(document.parameters[key].value.numpy(), model.parameters[key].value.numpy())
    ]
    assert changed, "the step changed no value"
    proto = trama_onnx.lower(document, inputs=dict(zip(document.inputs, inputs, strict=True)))  # no input facts
    onnx.checker.check_model(proto, full_check=True)
    (top,) = [node for node in document.nodes if node.parent is None]
    calls = {node.name: node.domain for node in proto.graph.node}
    assert calls[top.id] == trama_onnx.FUNCTION_DOMAIN  # the tree kept: the top module is a function call
    results = {
        runtime: trama.runtime_for_name(runtime).prepare(document).run(inputs) for runtime in ("jax:cpu", "onnxruntime")
    }
    assert_agree(results, ["y"], tolerance=ZOO[name].tolerance)


def test_tied_weights_stay_one_parameter_entry(files: Path) -> None:
    """The tied LM's embedding and output layer read one table entry, so that a runtime that
    trains or replaces it keeps them tied."""
    module, _ = built("tied_lm")
    model = exported_file(module, ZOO["tied_lm"].inputs, files / "tied_lm.trama.json")
    by_op = {node.op: node for node in model.nodes}
    assert by_op["Embedding"].parameters["weight"] == by_op["Linear"].parameters["weight"]


# --- Streaming ------------------------------------------------------------------------------

#: Chunk boundaries along the time axis: uneven, one of a single step.
CHUNKS = ((0, 4), (4, 5), (5, 11))


@pytest.mark.parametrize("runtime_name", RUNTIMES)
def test_a_gru_model_streamed_in_chunks_matches_the_whole_sequence(runtime_name: str, files: Path) -> None:
    torch.manual_seed(1)
    module = GRUTagger(bidirectional=False).eval()
    model = exported_file(module, ["tokens"], files / "gru_stream.trama.json")
    tokens = np.random.default_rng(1).integers(0, 30, size=(2, 11)).astype(np.int64)
    runnable = prepare_everywhere(model)[runtime_name]
    (whole,) = runnable.run([tokens])
    state = runnable.spawn_state()
    pieces = [normalize(state.run([tokens[:, start:stop]])[0]) for start, stop in CHUNKS]
    streamed = np.concatenate(pieces, axis=1)
    expected = eager(module, [tokens])
    assert_agree({"streamed": [streamed], "whole": [whole], "eager torch": [expected]}, ["y"])
