"""The JAX runtimes: names and availability, one compilation per input signature, profiles,
streaming through ``State``, placement on several devices, and the errors of each.

Placement needs several devices. JAX makes the host look like four when
``XLA_FLAGS=--xla_force_host_platform_device_count=4`` is set before it is imported, which this
process cannot do any more, so that test runs its case in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import jax
import numpy as np
import pytest
import torch
from torch import nn

import trama
from trama import Model, Node, Parameter, Ref, ValueFact
from trama.format import INPUT
from trama_jax.runnable import JaxRunnable
from trama_jax.runtime import JaxRuntime, resolve_device, runtimes

TOL = {"rtol": 1e-5, "atol": 1e-5}
KINDS = ["cpu", "gpu", "tpu", "metal"]


@pytest.fixture(autouse=True)
def seeded() -> None:
    torch.manual_seed(0)


def data(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def mlp() -> tuple[nn.Module, Model]:
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).eval()
    return net, trama.export_model(net, inputs=["x"], outputs=["y"])


def expected(net: nn.Module, x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        result: torch.Tensor = net(torch.from_numpy(x))
    return result.numpy()


def prepare(model: Model, **placement: str) -> JaxRunnable:
    runnable = trama.runtime_for_name("jax:cpu").prepare(model, placement=placement or None)
    assert isinstance(runnable, JaxRunnable)
    return runnable


# --- Names and availability -----------------------------------------------------------------


def test_one_runtime_per_backend_is_registered() -> None:
    listed = {info.name: info for info in trama.runtimes() if info.framework == "jax"}
    assert sorted(listed) == sorted(f"jax:{kind}" for kind in KINDS)
    assert listed["jax:gpu"].aliases == ("jax:cuda",)
    assert listed["jax:cpu"].available


@pytest.mark.parametrize("kind", KINDS)
def test_availability_is_what_jax_reports_and_an_unavailable_runtime_is_a_trama_error(kind: str) -> None:
    runtime = next(r for r in runtimes() if r.device == kind)
    try:
        devices = jax.devices({"metal": "METAL"}.get(kind, kind))
    except RuntimeError:
        devices = []
    assert runtime.is_available() == bool(devices)
    if runtime.is_available():
        assert trama.runtime_for_name(f"jax:{kind}").name() == f"jax:{kind}"
    else:
        with pytest.raises(trama.RuntimeNotFoundError, match=f"jax:{kind}"):
            trama.runtime_for_name(f"jax:{kind}")
        with pytest.raises(trama.RuntimeNotFoundError, match="not available"):
            runtime.prepare(mlp()[1])


def test_numbered_and_aliased_names() -> None:
    gpu = JaxRuntime("gpu", aliases=("jax:cuda",))
    assert gpu.for_name("jax:cuda") is gpu
    numbered = gpu.for_name("jax:cuda:1")
    assert numbered is not None
    assert numbered.name() == "jax:gpu:1"
    assert trama.runtime_for_name("jax:cpu:0").name() == "jax:cpu:0"
    assert gpu.for_name("jax:gpu:x") is None
    assert gpu.for_name("torch:cuda:1") is None
    with pytest.raises(trama.RuntimeNotFoundError):
        trama.runtime_for_name(f"jax:cpu:{len(jax.devices('cpu'))}")


def test_device_names() -> None:
    assert resolve_device("cpu") == resolve_device("cpu:0") == jax.devices("cpu")[0]
    for name, match in [("warp:0", "not a JAX device name"), ("cpu:x", "not a JAX device name"), ("cpu:99", "cpu:0")]:
        with pytest.raises(trama.ExecutionError, match=match):
            resolve_device(name)


# --- Running --------------------------------------------------------------------------------


def test_run_gives_jax_arrays_equal_to_torch() -> None:
    net, model = mlp()
    runnable = prepare(model)
    x = data(5, 4)
    (y,) = runnable.run([x])
    assert isinstance(y, jax.Array)
    np.testing.assert_allclose(y, expected(net, x), **TOL)
    np.testing.assert_array_equal(runnable.run({"x": jax.numpy.asarray(x)})[0], y)
    assert runnable.parameter_devices() == dict.fromkeys(
        ["root.0.weight", "root.0.bias", "root.2.weight", "root.2.bias"], "cpu:0"
    )


def constants_model(values: dict[str, Any]) -> Model:
    """A model of ``neg(x)`` and one ``constant`` node per entry of ``values``, each an output."""
    nodes = [Node("neg", "neg", {"x": Ref(INPUT, "x")}, ["y"])]
    nodes += [Node(name, "constant", {}, ["y"], {"value": f"{name}.value"}) for name in values]
    table = {f"{name}.value": Parameter(value, learnable=False) for name, value in values.items()}
    outputs = [Ref(node.id, "y") for node in nodes]
    return Model(inputs=["x"], outputs=outputs, nodes=nodes, parameters=table)


def test_python_values_come_out_as_python_values_beside_arrays() -> None:
    values: dict[str, Any] = {"count": 3, "scale": 0.5, "flag": True, "name": "relu", "sizes": [1, 2.5, False]}
    runnable = prepare(constants_model(values))
    x = data(2, 3)
    for _ in range(2):  # compiled on the first run, and the Python values kept for the next
        y, *rest = runnable.run([x])
        assert isinstance(y, jax.Array)
        np.testing.assert_array_equal(y, -x)
        assert rest == list(values.values())
        assert [type(value) for value in rest] == [type(value) for value in values.values()]
        assert [type(item) for item in rest[-1]] == [int, float, bool]
    assert runnable.segments[""].compilations == 1


def test_a_python_value_from_a_placed_segment_stays_a_python_value() -> None:
    runnable = prepare(constants_model({"name": "gelu", "count": 2}), neg="cpu:0")
    assert runnable.run([data(2)])[1:] == ["gelu", 2]


def test_wrong_inputs_are_trama_errors() -> None:
    runnable = prepare(mlp()[1])
    with pytest.raises(trama.ExecutionError, match="takes 1 input"):
        runnable.run([data(1, 4), data(1, 4)])
    with pytest.raises(trama.ExecutionError, match="missing \\['x'\\]"):
        runnable.run({"z": data(1, 4)})
    with pytest.raises(trama.ExecutionError, match="Linear") as caught:
        runnable.run([data(1, 5)])
    assert caught.value.node_id == "root.0"


def test_each_input_signature_is_compiled_once() -> None:
    runnable = prepare(mlp()[1])
    whole = runnable.segments[""]
    assert whole.compilations == 0
    for _ in range(3):
        runnable.run([data(2, 4)])
    assert whole.compilations == 1
    runnable.run([data(7, 4)])
    assert whole.compilations == 2
    assert runnable.compile_seconds > 0


def test_complete_input_facts_compile_at_prepare_time() -> None:
    _, model = mlp()
    model.input_facts = [ValueFact("float32", (2, 4))]
    runnable = prepare(model)
    assert runnable.segments[""].compilations == 1
    runnable.run([data(2, 4)])
    assert runnable.segments[""].compilations == 1  # the program compiled for the facts runs it
    model.input_facts = [ValueFact("float32", ("batch", 4))]
    assert prepare(model).segments[""].compilations == 0


def test_profile_reports_nodes_and_compilation() -> None:
    runnable = prepare(mlp()[1])
    profile = runnable.profile_json([data(3, 4)])
    assert profile["runtime"] == "jax:cpu"
    rows = {row["id"]: row for row in profile["nodes"]}
    assert sorted(rows) == ["root", "root.0", "root.1", "root.2"]
    assert all(rows[leaf]["calls"] == 1 and rows[leaf]["seconds"] > 0 for leaf in ("root.0", "root.1", "root.2"))
    assert rows["root.0"]["macs"] == 3 * 8 * 4
    assert profile["total"]["parameters"] == 4 * 8 + 8 + 8 * 3 + 3
    assert profile["compile"]["programs"] == 1
    assert profile["compile"]["seconds"] > 0


# --- Streaming ------------------------------------------------------------------------------


def gru_model() -> tuple[nn.GRU, Model]:
    gru = nn.GRU(3, 4, num_layers=2, batch_first=True).eval()
    return gru, trama.export_model(gru, inputs=["x"], outputs=["y", "h_n"])


def test_a_state_streams_a_sequence_in_chunks() -> None:
    gru, model = gru_model()
    runnable = prepare(model)
    x = data(2, 9, 3)
    with torch.no_grad():
        whole_y, whole_h = gru(torch.from_numpy(x))
    state = runnable.spawn_state()
    chunks = [state.run([x[:, start : start + 3]]) for start in (0, 3, 6)]
    np.testing.assert_allclose(np.concatenate([y for y, _ in chunks], axis=1), whole_y.numpy(), **TOL)
    np.testing.assert_allclose(chunks[-1][1], whole_h.numpy(), **TOL)
    np.testing.assert_allclose(runnable.run([x[:, :3]])[0], chunks[0][0], **TOL)  # run: a fresh state each time


def test_frozen_states_thaw_into_independent_states() -> None:
    _, model = gru_model()
    runnable = prepare(model)
    x = data(1, 4, 3)
    state = runnable.spawn_state()
    state.run([x])
    frozen = state.freeze()
    state.run([x])  # moves on; the snapshot must not
    first, second = frozen.unfreeze(), frozen.unfreeze()
    (a, _), (b, _) = first.run([x]), second.run([x])
    np.testing.assert_array_equal(a, b)
    (c, _) = state.run([x])
    assert not np.allclose(a, c)


# --- Placement ------------------------------------------------------------------------------


def test_placement_errors_name_the_node_and_the_device() -> None:
    _, model = mlp()
    with pytest.raises(trama.ExecutionError, match="does not have"):
        prepare(model, **{"root.9": "cpu"})
    with pytest.raises(trama.ExecutionError, match="'gpu:3' is not available here") as caught:
        prepare(model, **{"root.0": "gpu:3"})
    assert caught.value.node_id == "root.0"


PLACED = textwrap.dedent(
    """
    import json
    import numpy as np, torch, trama, jax
    from torch import nn
    from trama_jax.runtime import device_name

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Sequential(nn.Linear(4, 4), nn.ReLU()), nn.Linear(4, 2))
    net[2][0].weight = net[0].weight  # one entry, read on two devices
    model = trama.export_model(net.eval(), inputs=["x"], outputs=["y"])
    runtime = trama.runtime_for_name("jax:cpu")
    placed = runtime.prepare(model, placement={"root.2": "cpu:1", "root.3": "cpu:2"})
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    (y,) = placed.run([x])
    (plain,) = runtime.prepare(model).run([x])
    with torch.no_grad():
        reference = net(torch.from_numpy(x)).numpy()

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(3, 3)
            self.gru = nn.GRU(3, 4, batch_first=True)

        def forward(self, x):
            y, _ = self.gru(self.proj(x))
            return y

    sequence = trama.export_model(Encoder().eval(), inputs=["x"], outputs=["y"])
    streamed = runtime.prepare(sequence, placement={"root.gru": "cpu:3"})
    state = streamed.spawn_state()
    xs = np.random.default_rng(1).standard_normal((2, 6, 3)).astype(np.float32)
    chunks = [np.asarray(state.run([xs[:, k : k + 2]])[0]) for k in (0, 2, 4)]
    whole = np.asarray(streamed.run([xs])[0])

    print(json.dumps({
        "devices": [str(d) for d in jax.devices()],
        "parameter_devices": placed.parameter_devices(),
        "segments": sorted(placed.segments),
        "output_device": device_name(next(iter(y.devices()))),
        "placed_vs_plain": float(np.max(np.abs(np.asarray(y) - np.asarray(plain)))),
        "placed_vs_torch": float(np.max(np.abs(np.asarray(y) - reference))),
        "gru_devices": streamed.parameter_devices(),
        "chunks_vs_whole": float(np.max(np.abs(np.concatenate(chunks, axis=1) - whole))),
    }))
    """
)


def test_placement_puts_subtrees_and_their_parameters_on_other_devices() -> None:
    environment = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4", "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", PLACED], env=environment, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert len(result["devices"]) == 4
    assert result["parameter_devices"] == {
        "root.0.weight": "cpu:0",  # its first use is on cpu:0; root.2 reads a copy on cpu:1
        "root.0.bias": "cpu:0",
        "root.2.0.bias": "cpu:1",
        "root.3.weight": "cpu:2",
        "root.3.bias": "cpu:2",
    }
    assert result["segments"] == ["root.0", "root.1", "root.2", "root.3"]
    assert result["output_device"] == "cpu:2"
    assert result["placed_vs_plain"] < 1e-6
    assert result["placed_vs_torch"] < 1e-5
    assert set(result["gru_devices"].values()) == {"cpu:0", "cpu:3"}
    assert all(device == "cpu:3" for name, device in result["gru_devices"].items() if name.startswith("root.gru."))
    assert result["chunks_vs_whole"] < 1e-5


# --- A GPU, where there is one --------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not JaxRuntime("gpu").is_available(), reason="JAX has no GPU here")
def test_the_gpu_runtime_agrees_with_the_cpu() -> None:  # pragma: no cover - needs a GPU
    net, model = mlp()
    x = data(4, 4)
    (y,) = trama.runtime_for_name("jax:gpu").prepare(model).run([x])
    assert next(iter(y.devices())).platform == "gpu"
    np.testing.assert_allclose(y, expected(net, x), **TOL)


# ------------------------------------------------------------------------------------------
# Values beyond trama's bound never reach XLA; failures are trama errors (issue 14)
# ------------------------------------------------------------------------------------------


def test_a_traced_program_making_a_value_beyond_the_bound_is_refused() -> None:
    """XLA aborts the process on a shape whose byte size overflows 64 bits: the program's every
    value is checked once traced, inner programs included, before anything is compiled."""
    import jax.numpy as jnp

    from trama_jax.runnable import check_values

    def inner(x: Any) -> Any:
        return jnp.broadcast_to(x, (2**40, 2**30)).sum()

    fine = jax.jit(lambda x: x * 2).trace(jnp.ones(3)).jaxpr
    check_values(fine)
    huge = jax.jit(lambda x: jax.jit(inner)(x) + 1).trace(jnp.ones(1)).jaxpr  # the value is inside
    with pytest.raises(
        trama.ExecutionError, match=r"\(broadcast_in_dim\) with a shape of \[1099511627776, 1073741824\]"
    ):
        check_values(huge)


def test_a_leaf_whose_output_is_beyond_the_bound_is_named() -> None:
    """Traced, not compiled: the leaf's output shape is refused as it is made."""
    model = Model(
        inputs=["x"],
        outputs=[Ref("big", "y")],
        nodes=[Node("big", "expand", {"x": Ref(INPUT, "x")}, ["y"], {"size": "big.size"})],
        parameters={"big.size": Parameter([2**24, 2**24])},
        input_facts=[ValueFact("float32", (1,))],
    )
    runnable = JaxRuntime("cpu").prepare(model)  # compiling for the facts meets it and leaves it to a run
    with pytest.raises(trama.ExecutionError, match=r"expand would make its output 'y' with a shape of") as info:
        runnable.run([np.ones(1, np.float32)])
    assert info.value.node_id == "big"


def test_what_xla_raises_while_running_is_an_execution_error_naming_the_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compiled program does not say where it failed: the runnable runs the inputs again op by
    op, where the failing leaf names itself."""
    import dataclasses

    from trama_jax import runnable as module

    model = trama.export_model(nn.Sequential(nn.Linear(3, 2), nn.ReLU()), inputs=["x"], outputs=["y"])
    prepared = JaxRuntime("cpu").prepare(model)
    prepared.run([data(2, 3)])  # compiled, with the kernels as they are
    relu = next(leaf for leaf in prepared.program.leaves() if leaf.node.op == "ReLU")

    def out_of_memory(*args: Any) -> Any:
        raise MemoryError("could not allocate")

    monkeypatch.setattr(module._Program, "__call__", out_of_memory)  # XLA failing, as it does
    monkeypatch.setattr(relu, "kernel", dataclasses.replace(relu.kernel, apply=out_of_memory))
    with pytest.raises(trama.ExecutionError, match="ReLU failed: MemoryError: could not allocate") as info:
        prepared.run([data(2, 3)])
    assert info.value.node_id == next(node.id for node in model.nodes if node.op == "ReLU")
