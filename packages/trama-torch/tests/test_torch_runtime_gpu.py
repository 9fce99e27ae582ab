"""The torch runtimes on a GPU: CUDA runs, streaming and cross-device placement, and Metal.

Every test here is marked ``gpu`` and skipped where its device does not exist. Results are
compared with the CPU run of the same document. The tolerance allows for the GPU's arithmetic:
cuDNN's recurrent kernels use TF32 for float32 by default (10-bit mantissas, relative errors
around 1e-3 here), and cuBLAS sums in another order than the CPU. A wrong state, a lost device
transfer or a wrong weight gives differences of order 0.1 to 1, far outside it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import trama
from trama_torch.runnable import TorchRunnable

pytestmark = pytest.mark.gpu

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
needs_mps = pytest.mark.skipif(not torch.backends.mps.is_available(), reason="needs Apple's Metal (MPS)")
CUDA0 = torch.device("cuda", 0)


class Tagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.rnn = nn.GRU(5, 8, batch_first=True)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> Any:
        y, h = self.rnn(x)
        return self.head(y), h


def assert_near(ours: torch.Tensor, expected: torch.Tensor) -> None:
    """Equal within the GPU's arithmetic (see the module doc)."""
    torch.testing.assert_close(ours, expected, rtol=1e-2, atol=1e-2)


def prepare(runtime: str, placement: dict[str, str] | None = None) -> TorchRunnable:
    model = trama.export_model(Tagger().eval(), inputs=["x"], outputs=["y", "h_n"])
    runnable = trama.runtime_for_name(runtime).prepare(model, placement=placement)
    assert isinstance(runnable, TorchRunnable)
    return runnable


def node_of(runnable: TorchRunnable, op: str) -> str:
    return next(node.id for node in runnable.model.nodes if node.op == op)


def sequence() -> np.ndarray[Any, Any]:
    return np.random.default_rng(2).standard_normal((2, 12, 5)).astype(np.float32)


def on_cpu() -> list[torch.Tensor]:
    return prepare("torch:cpu").run([sequence()])


@needs_cuda
@pytest.mark.parametrize("name", ["torch:cuda", "torch:cuda:0"])
def test_cuda_runs_match_the_cpu(name: str) -> None:
    runnable = prepare(name)
    assert all(p.device == CUDA0 for p in runnable.module.parameters())
    outputs = runnable.run([torch.from_numpy(sequence())])  # a CPU tensor goes to the GPU
    assert all(output.device == CUDA0 for output in outputs)
    for ours, expected in zip(outputs, on_cpu(), strict=True):
        assert_near(ours.cpu(), expected)


@needs_cuda
def test_cuda_streaming_in_chunks_equals_the_whole_sequence() -> None:
    runnable = prepare("torch:cuda")
    x = torch.from_numpy(sequence()).to(CUDA0)
    whole = runnable.run([x])
    state = runnable.spawn_state()
    chunks = [state.run([x[:, start : start + 5]]) for start in (0, 5, 10)]
    assert_near(torch.cat([chunk[0] for chunk in chunks], dim=1), whole[0])
    assert_near(chunks[-1][1], whole[1])


@needs_cuda
def test_a_subtree_placed_on_the_gpu_from_the_cpu_runtime() -> None:
    plain = prepare("torch:cpu")
    gru = node_of(plain, "GRU")
    runnable = prepare("torch:cpu", placement={gru: "cuda:0"})
    placed = runnable.module.get_submodule(runnable_modules(runnable)[gru])
    assert all(p.device == CUDA0 for p in placed.parameters())
    head = runnable.module.get_submodule(runnable_modules(runnable)[node_of(runnable, "Linear")])
    assert all(p.device == torch.device("cpu") for p in head.parameters())
    outputs = runnable.run([sequence()])
    assert all(output.device == torch.device("cpu") for output in outputs)  # the GRU's outputs came back
    for ours, expected in zip(outputs, on_cpu(), strict=True):
        assert_near(ours, expected)


@needs_cuda
def test_a_subtree_placed_on_the_cpu_from_the_cuda_runtime_streams() -> None:
    plain = prepare("torch:cpu")
    runnable = prepare("torch:cuda", placement={node_of(plain, "GRU"): "cpu"})
    x = sequence()
    whole = runnable.run([x])
    assert all(output.device == CUDA0 for output in whole)
    for ours, expected in zip(whole, on_cpu(), strict=True):
        assert_near(ours.cpu(), expected)
    state = runnable.spawn_state()
    chunks = [state.run([x[:, start : start + 6]])[0] for start in (0, 6)]
    assert_near(torch.cat(chunks, dim=1), whole[0])


class Tied(nn.Module):
    """Two layers sharing one weight (as an embedding and an output layer do)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(4)
        self.first = nn.Linear(6, 6)
        self.second = nn.Linear(6, 6)
        self.second.weight = self.first.weight

    def forward(self, x: torch.Tensor) -> Any:
        return self.second(torch.relu(self.first(x)))


@needs_cuda
def test_a_weight_tied_across_devices_is_copied_to_each() -> None:
    model = trama.export_model(Tied().eval(), inputs=["x"], outputs=["y"])
    second = next(node.id for node in model.nodes if node.id.endswith("second"))
    plain = trama.runtime_for_name("torch:cpu").prepare(model)
    runnable = trama.runtime_for_name("torch:cpu").prepare(model, placement={second: "cuda:0"})
    assert isinstance(runnable, TorchRunnable)
    modules = runnable_modules(runnable)
    first_module = runnable.module.get_submodule(modules[second.replace("second", "first")])
    second_module = runnable.module.get_submodule(modules[second])
    assert first_module.weight.device == torch.device("cpu")
    assert second_module.weight.device == CUDA0
    x = np.random.default_rng(5).standard_normal((3, 6)).astype(np.float32)
    assert_near(runnable.run([x])[0], plain.run([x])[0])


@needs_cuda
def test_cuda_profiles_time_every_leaf() -> None:
    runnable = prepare("torch:cuda")
    profile = runnable.profile_json([sequence()])
    assert profile["runtime"] == "torch:cuda"
    leaves = [row for row in profile["nodes"] if row["kind"] == "leaf"]
    assert leaves
    assert all(row["calls"] == 1 and row["seconds"] > 0 for row in leaves)


def runnable_modules(runnable: TorchRunnable) -> dict[str, str]:
    modules: dict[str, str] = runnable.module.node_modules  # type: ignore[assignment]
    return modules


@needs_mps
def test_mps_runs_match_the_cpu() -> None:
    runnable = prepare("torch:mps")
    outputs = runnable.run([sequence()])
    assert all(output.device.type == "mps" for output in outputs)
    for ours, expected in zip(outputs, on_cpu(), strict=True):
        assert_near(ours.cpu(), expected)
