"""The torch runtimes on the CPU: discovery, running, inputs, errors, streaming, profiles and
placement (placement on other devices is in ``test_runtime_gpu.py``)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import torch
from torch import nn

import trama
from trama_torch.runnable import TorchRunnable
from trama_torch.runtime import TorchRuntime, runtimes


def prepare(module: nn.Module, inputs: list[str], outputs: list[str], **kwargs: Any) -> TorchRunnable:
    model = trama.export_model(module, inputs=inputs, outputs=outputs)
    runnable = trama.runtime_for_name("torch:cpu").prepare(model, **kwargs)
    assert isinstance(runnable, TorchRunnable)
    return runnable


def node_of(runnable: TorchRunnable, op: str, index: int = 0) -> str:
    """The id of the ``index``-th node of ``op`` in the exported document."""
    return [node.id for node in runnable.model.nodes if node.op == op][index]


def mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3)).eval()


class Tagger(nn.Module):
    """A recurrent layer and a per-step linear head; returns the head's output and the final
    states, so that tests see both what streams and what is carried."""

    def __init__(self, kind: str = "GRU", bidirectional: bool = False) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.kind = kind
        layer = nn.GRU if kind == "GRU" else nn.LSTM
        self.rnn = layer(5, 8, num_layers=2, batch_first=True, bidirectional=bidirectional)
        self.head = nn.Linear(16 if bidirectional else 8, 3)

    def forward(self, x: torch.Tensor) -> Any:
        if self.kind == "GRU":
            y, h = self.rnn(x)
            return self.head(y), h
        y, (h, c) = self.rnn(x)
        return self.head(y), h, c


class TaggerWithH0(Tagger):
    def forward(self, x: torch.Tensor, h0: torch.Tensor) -> Any:  # type: ignore[override]
        y, h = self.rnn(x, h0)
        return self.head(y), h


class TaggerPlus(Tagger):
    def forward(self, x: torch.Tensor, z: torch.Tensor) -> Any:  # type: ignore[override]
        y, h = self.rnn(x)
        return self.head(y) + z, h


class Twice(nn.Module):
    """One GRU run on two sequences: in the document, a node and a node calling it."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.rnn = nn.GRU(5, 8, batch_first=True)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> Any:
        return self.rnn(a)[0], self.rnn(b)[0]


def sequence(length: int = 12, batch: int = 2) -> torch.Tensor:
    return torch.randn(batch, length, 5, generator=torch.Generator().manual_seed(2))


# ------------------------------------------------------------------------------------------
# Discovery
# ------------------------------------------------------------------------------------------


def test_runtimes_report_their_availability_from_torch() -> None:
    found = {runtime.name(): runtime.is_available() for runtime in runtimes()}
    assert found == {
        "torch:cpu": True,
        "torch:cuda": torch.cuda.is_available(),
        "torch:mps": torch.backends.mps.is_available(),
    }
    listed = {info.name for info in trama.runtimes()}
    assert {"torch:cpu", "torch:cuda", "torch:mps"} <= listed


def test_listing_runtimes_and_asking_for_the_cpu_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "from trama_torch.runtime import runtimes\n"
        "names = [r.name() for r in runtimes()]\n"
        "cpu = [r for r in runtimes() if r.device == 'cpu'][0]\n"
        "assert cpu.is_available()\n"
        "print(names, 'torch' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "['torch:cpu', 'torch:cuda', 'torch:mps'] False"


def test_the_cuda_runtime_answers_numbered_gpus() -> None:
    (cuda,) = [runtime for runtime in runtimes() if runtime.device == "cuda"]
    third = cuda.for_name("torch:cuda:3")
    assert isinstance(third, TorchRuntime)
    assert (third.name(), third.device) == ("torch:cuda:3", "cuda:3")
    assert third.is_available() == (torch.cuda.is_available() and torch.cuda.device_count() > 3)
    assert cuda.for_name("torch:cuda") is cuda
    assert cuda.for_name("torch:cuda:x") is None
    assert cuda.for_name("torch:cpu") is None
    assert TorchRuntime("cpu").for_name("torch:cpu:1") is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal where there is no GPU")
def test_a_missing_gpu_is_refused_clearly() -> None:
    with pytest.raises(trama.RuntimeNotFoundError, match="torch:cuda:1"):
        trama.runtime_for_name("torch:cuda:1")
    with pytest.raises(trama.ExecutionError, match="'cuda' is not available here"):
        TorchRuntime("cuda").prepare(trama.export_model(mlp(), inputs=["x"], outputs=["y"]))


def test_prepare_refuses_an_invalid_model() -> None:
    model = trama.export_model(mlp(), inputs=["x"], outputs=["y"])
    model.nodes[-1].op = "NoSuchOp"
    with pytest.raises(trama.TramaError, match="NoSuchOp"):
        trama.runtime_for_name("torch:cpu").prepare(model)


# ------------------------------------------------------------------------------------------
# Running
# ------------------------------------------------------------------------------------------


def test_run_gives_the_modules_outputs_for_numpy_and_tensor_inputs() -> None:
    module = mlp()
    runnable = prepare(module, ["x"], ["y"])
    x = torch.randn(4, 6)
    with torch.no_grad():
        expected = module(x)
    for given in (x, x.numpy(), {"x": x}):
        outputs = runnable.run(given if isinstance(given, dict) else [given])
        assert len(outputs) == 1
        assert isinstance(outputs[0], torch.Tensor)
        assert outputs[0].device == torch.device("cpu")
        torch.testing.assert_close(outputs[0], expected)


def test_numpy_inputs_are_shared_not_copied() -> None:
    runnable = prepare(nn.Identity(), ["x"], ["y"])
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (y,) = runnable.run([x])
    assert np.shares_memory(y.numpy(), x)


def test_arrays_torch_cannot_share_are_copied() -> None:
    runnable = prepare(nn.Identity(), ["x"], ["y"])
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    read_only = base.copy()
    read_only.flags.writeable = False
    for x in (read_only, base[::-1], base.astype(">f4"), [[1.0, 2.0], [3.0, 4.0]]):
        (y,) = runnable.run([x])  # filterwarnings=error: torch's read-only warning would fail this
        np.testing.assert_array_equal(y.numpy(), np.asarray(x))
        assert not np.shares_memory(y.numpy(), np.asarray(x))


def test_bfloat16_arrays_become_bfloat16_tensors() -> None:
    runnable = prepare(nn.Identity(), ["x"], ["y"])
    x = np.array([1.5, -2.25, 3.0], dtype=ml_dtypes.bfloat16)
    (y,) = runnable.run([x])
    assert y.dtype == torch.bfloat16
    assert y.float().tolist() == [1.5, -2.25, 3.0]


def test_the_module_runs_in_eval_mode() -> None:
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(6, 6), nn.Dropout(0.5)).eval()
    runnable = prepare(module, ["x"], ["y"])
    assert not runnable.module.training
    x = torch.ones(3, 6)
    with torch.no_grad():
        torch.testing.assert_close(runnable.run([x])[0], module(x))


def test_wrong_inputs_are_execution_errors() -> None:
    runnable = prepare(mlp(), ["x"], ["y"])
    x = np.ones((2, 6), np.float32)
    with pytest.raises(trama.ExecutionError, match=r"takes 1 input\(s\) \['x'\], got 2"):
        runnable.run([x, x])
    with pytest.raises(trama.ExecutionError, match=r"missing \['x'\]; unknown \['z'\]"):
        runnable.run({"z": x})
    with pytest.raises(trama.ExecutionError, match="input 'x' cannot be a torch tensor"):
        runnable.run([np.array([object()])])


def test_a_failing_node_is_named() -> None:
    runnable = prepare(mlp(), ["x"], ["y"])
    with pytest.raises(trama.ExecutionError) as caught:
        runnable.run([np.ones((2, 5), np.float32)])  # the first Linear takes 6 features
    assert caught.value.node_id == node_of(runnable, "Linear", 0)
    assert "Linear failed" in caught.value.message


# ------------------------------------------------------------------------------------------
# Streaming
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["GRU", "LSTM"])
def test_streaming_in_chunks_equals_the_whole_sequence(kind: str) -> None:
    module = Tagger(kind).eval()
    outputs = ["y", "h_n"] if kind == "GRU" else ["y", "h_n", "c_n"]
    runnable = prepare(module, ["x"], outputs)
    x = sequence()
    whole = runnable.run([x])
    with torch.no_grad():
        torch.testing.assert_close(whole[0], module(x)[0])
    state = runnable.spawn_state()
    chunks = [state.run([x[:, start : start + 5]]) for start in (0, 5, 10)]  # 5 + 5 + 2 steps
    torch.testing.assert_close(torch.cat([chunk[0] for chunk in chunks], dim=1), whole[0])
    for carried, expected in zip(chunks[-1][1:], whole[1:], strict=True):  # the final states
        torch.testing.assert_close(carried, expected)


def test_each_call_of_a_called_recurrent_module_streams_on_its_own() -> None:
    runnable = prepare(Twice().eval(), ["a", "b"], ["ya", "yb"])
    assert any(node.calls is not None for node in runnable.model.nodes)  # the premise: one module, two nodes
    a, b = sequence(), 2 * sequence()
    whole = runnable.run([a, b])
    state = runnable.spawn_state()
    chunks = [state.run([a[:, start : start + 6], b[:, start : start + 6]]) for start in (0, 6)]
    for k in range(2):
        torch.testing.assert_close(torch.cat([chunk[k] for chunk in chunks], dim=1), whole[k])


def test_plain_runs_start_fresh_and_states_are_independent() -> None:
    runnable = prepare(Tagger().eval(), ["x"], ["y", "h_n"])
    x = sequence()
    first, second = x[:, :6], x[:, 6:]
    state = runnable.spawn_state()
    state.run([first])
    continued = state.run([second])[0]
    fresh = runnable.run([second])[0]
    assert not torch.allclose(continued, fresh)  # the carried state matters...
    torch.testing.assert_close(runnable.spawn_state().run([second])[0], fresh)  # ...and starts at zeros

    state = runnable.spawn_state()
    state.run([first])
    frozen = state.freeze()
    state.run([second])  # the original goes on...
    state.run([second])
    for thawed in (frozen.unfreeze(), frozen.unfreeze()):  # ...without touching the snapshot
        torch.testing.assert_close(thawed.run([second])[0], continued)


def test_a_connected_h0_wins_over_the_carried_state() -> None:
    runnable = prepare(TaggerWithH0().eval(), ["x", "h0"], ["y", "h_n"])
    x = sequence()
    h0 = torch.randn(2, 2, 8, generator=torch.Generator().manual_seed(3))
    state = runnable.spawn_state()
    state.run([x[:, :6], torch.zeros(2, 2, 8)])
    torch.testing.assert_close(state.run([x[:, 6:], h0])[0], runnable.run([x[:, 6:], h0])[0])


def test_a_failing_call_leaves_the_state_where_it_was() -> None:
    runnable = prepare(TaggerPlus().eval(), ["x", "z"], ["y", "h_n"])
    x = sequence()
    first, second = x[:, :6], x[:, 6:]
    state = runnable.spawn_state()
    state.run([first, torch.zeros(3)])
    expected = state.freeze()
    with pytest.raises(trama.ExecutionError) as caught:
        state.run([second, torch.zeros(4)])  # the GRU runs, then adding z fails
    assert caught.value.node_id == node_of(runnable, "add")
    torch.testing.assert_close(
        state.run([second, torch.zeros(3)])[0], expected.unfreeze().run([second, torch.zeros(3)])[0]
    )


def test_a_bidirectional_layer_cannot_continue_from_a_carried_state() -> None:
    runnable = prepare(Tagger(bidirectional=True).eval(), ["x"], ["y", "h_n"])
    x = sequence()
    state = runnable.spawn_state()
    torch.testing.assert_close(state.run([x])[0], runnable.run([x])[0])  # a whole sequence is fine
    with pytest.raises(trama.ExecutionError, match="bidirectional GRU cannot continue") as caught:
        state.run([x])
    assert caught.value.node_id == node_of(runnable, "GRU")


# ------------------------------------------------------------------------------------------
# Profiles
# ------------------------------------------------------------------------------------------


def test_profile_times_every_leaf_and_counts_multiply_adds() -> None:
    module = mlp()
    runnable = prepare(module, ["x"], ["y"])
    profile = runnable.profile_json([np.ones((4, 6), np.float32)])
    assert profile["runtime"] == "torch:cpu"
    rows = {row["id"]: row for row in profile["nodes"]}
    assert list(rows) == [node.id for node in runnable.model.nodes]
    leaves = [row for row in rows.values() if row["kind"] == "leaf"]
    assert all(row["calls"] == 1 and row["seconds"] > 0 for row in leaves)
    first, second = node_of(runnable, "Linear", 0), node_of(runnable, "Linear", 1)
    assert (rows[first]["macs"], rows[second]["macs"]) == (4 * 6 * 16, 4 * 16 * 3)
    total = profile["total"]
    assert total["parameters"] == sum(p.numel() for p in module.parameters())
    assert total["node_seconds"] == pytest.approx(sum(row["seconds"] for row in leaves))
    assert total["seconds"] >= total["node_seconds"]


def test_profiling_leaves_no_hooks_behind() -> None:
    runnable = prepare(mlp(), ["x"], ["y"])
    runnable.profile_json([np.ones((4, 6), np.float32)])
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in runnable.module.modules())


# ------------------------------------------------------------------------------------------
# Placement (on this machine's CPU; other devices in test_runtime_gpu.py)
# ------------------------------------------------------------------------------------------


def test_placing_a_subtree_on_the_cpu_changes_nothing() -> None:
    module = Tagger().eval()
    plain = prepare(module, ["x"], ["y", "h_n"])
    placed = prepare(
        module, ["x"], ["y", "h_n"], placement={node_of(plain, "GRU"): "cpu", node_of(plain, "Linear"): "cpu"}
    )
    x = sequence()
    for ours, expected in zip(placed.run([x]), plain.run([x]), strict=True):
        torch.testing.assert_close(ours, expected, rtol=0, atol=0)
    assert all(p.device == torch.device("cpu") for p in placed.module.parameters())


def test_placement_is_checked_at_prepare_time() -> None:
    model = trama.export_model(mlp(), inputs=["x"], outputs=["y"])
    linear = next(node.id for node in model.nodes if node.op == "Linear")
    runtime = trama.runtime_for_name("torch:cpu")
    with pytest.raises(trama.ExecutionError, match="placement names node 'nowhere', which the model does not have"):
        runtime.prepare(model, placement={"nowhere": "cpu"})
    with pytest.raises(trama.ExecutionError, match="'tpu' is not a torch device") as caught:
        runtime.prepare(model, placement={linear: "tpu"})
    assert caught.value.node_id == linear
    missing = f"cuda:{torch.cuda.device_count()}"  # one past the last GPU, whatever the machine
    with pytest.raises(trama.ExecutionError, match=f"'{missing}' is not available here"):
        runtime.prepare(model, placement={linear: missing})


# ------------------------------------------------------------------------------------------
# The flattened program, and bounds (issue 14)
# ------------------------------------------------------------------------------------------


class Residual(nn.Module):
    """A module of its own: a ``Graph`` in the document."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x) + x


def nested() -> nn.Module:
    """Graphs and Sequentials inside each other, and one module used twice (a calling node)."""
    torch.manual_seed(3)
    shared = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
    return nn.Sequential(Residual(nn.Sequential(shared, Residual(nn.Sequential(nn.ReLU(), shared)))), nn.Linear(4, 2))


def called_modules(program: nn.Module) -> list[nn.Module]:
    assert isinstance(program, torch.fx.GraphModule)
    return [program.get_submodule(str(node.target)) for node in program.graph.nodes if node.op == "call_module"]


def test_a_run_calls_the_leaves_from_one_flat_program() -> None:
    """Graphs and Sequentials are inlined: the program calls leaf modules only, each call of a
    called module once, and computes exactly what the document module computes."""
    from trama_torch.flat import FlatProgram
    from trama_torch.wiring import ScopeModule

    module = nested().eval()
    runnable = prepare(module, ["x"], ["y"])
    assert isinstance(runnable.program, FlatProgram)
    calls = called_modules(runnable.program)
    assert not any(isinstance(called, (ScopeModule, nn.Sequential)) for called in calls)
    kinds = [type(called).__name__ for called in calls]  # each Residual's "+ x" is a function op's module
    assert kinds == ["Linear", "Tanh", "ReLU", "Linear", "Tanh", "FunctionModule", "FunctionModule", "Linear"]
    assert calls[0] is calls[3]  # the shared Linear, called twice
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(4))
    (ours,) = runnable.run([x])
    torch.testing.assert_close(ours, module(x), rtol=0, atol=0)
    torch.testing.assert_close(ours, runnable.module(x)[0], rtol=0, atol=0)


def test_a_composite_with_hooks_is_called_as_a_unit() -> None:
    """A placed subtree's module carries the hooks that move values between devices: the program
    calls it (so they run) rather than inlining it."""
    module = nested().eval()
    plain = prepare(module, ["x"], ["y"])
    inner = node_of(plain, "Graph", 1)
    placed = prepare(module, ["x"], ["y"], placement={inner: "cpu"})
    target = placed.module.get_submodule(placed._node_modules[inner])
    assert any(called is target for called in called_modules(placed.program))
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(4))
    torch.testing.assert_close(placed.run([x])[0], plain.run([x])[0], rtol=0, atol=0)


def test_hooks_on_leaves_still_see_every_call() -> None:
    module = nested().eval()
    runnable = prepare(module, ["x"], ["y"])
    shared = runnable.module.get_submodule(runnable._node_modules[node_of(runnable, "Linear", 0)])
    seen: list[tuple[int, ...]] = []
    handle = shared.register_forward_hook(lambda m, args, out: seen.append(tuple(out.shape)))
    try:
        runnable.run([np.ones((2, 4), np.float32)])
    finally:
        handle.remove()
    assert seen == [(2, 4), (2, 4)]


def test_a_fact_beyond_the_bound_is_refused_before_import() -> None:
    model = trama.export_model(mlp(), inputs=["x"], outputs=["y"], input_facts=[trama.ValueFact("float32", (2**62,))])
    with pytest.raises(trama.ExecutionError, match="input 'x' is declared with a shape of") as info:
        trama.runtime_for_name("torch:cpu").prepare(model)
    assert info.value.location == "/input_facts/0"
