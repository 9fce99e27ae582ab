"""The numpy runtime end to end: files run on "default" with no registry named, recurrent state
streams, states freeze and thaw independently, and every catalog leaf has a kernel."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import trama
from trama import INPUT, Model, Node, Parameter, Ref, Tensor
from trama.catalog import standard_specs
from trama_numpy._registry import implementations

REPO = Path(__file__).resolve().parents[3]
LEGACY = REPO / "tests" / "fixtures" / "legacy"


def test_a_file_written_by_trama_0_2_runs_on_default() -> None:
    model = trama.load(LEGACY / "v0_2" / "tiny.trama.json")  # Sequential of a standard Linear
    runnable = trama.runtime_for_name("default").prepare(model)
    linear = next(node for node in model.nodes if node.op == "Linear")
    weight = np.asarray(model.parameter(linear, "weight").value)
    bias_entry = linear.parameters.get("bias")
    bias = np.asarray(model.parameters[bias_entry].value) if bias_entry else 0.0
    x = np.random.default_rng(0).standard_normal((3, weight.shape[1])).astype(np.float32)
    (y,) = runnable.run([x])
    np.testing.assert_allclose(y, x @ weight.T + bias, rtol=1e-6, atol=1e-6)


def test_an_exported_model_runs_on_default_and_matches_the_original() -> None:
    sys.path.insert(0, str(REPO / "demo"))
    import toylayers

    module = toylayers.mlp([4, 16, 3], seed=2)
    model = trama.loads(trama.dumps(trama.export_model(module, inputs=["x"], outputs=["y"])))
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    (y,) = trama.runtime_for_name("default").prepare(model).run({"x": x})
    np.testing.assert_allclose(y, module(x), rtol=1e-6, atol=1e-6)


def test_every_catalog_leaf_has_a_numpy_kernel() -> None:
    leaves = {spec.name for spec in standard_specs() if not spec.composite}
    assert leaves - set(implementations()) == set()


def gru_model(batch_first: bool = True) -> tuple[Model, torch.nn.GRU]:
    torch.manual_seed(0)
    gru = torch.nn.GRU(input_size=3, hidden_size=4, num_layers=2, batch_first=batch_first).eval()
    spec = next(spec for spec in standard_specs() if spec.name == "GRU")
    hyper: dict[str, Any] = {"input_size": 3, "hidden_size": 4, "num_layers": 2, "batch_first": batch_first}
    state = {name: value.detach().numpy() for name, value in gru.state_dict().items()}
    parameters: dict[str, Parameter] = {}
    slots: dict[str, str] = {}
    for slot in spec.parameters:
        if slot.name in hyper:
            value: Any = hyper[slot.name]
        elif slot.name in state:
            value = Tensor.from_array(state[slot.name])
        else:
            continue
        parameters[f"rnn.{slot.name}"] = Parameter(value, learnable=isinstance(value, Tensor))
        slots[slot.name] = f"rnn.{slot.name}"
    node = Node("rnn", "GRU", {"x": Ref(INPUT, "x")}, ["y", "h_n"], slots)
    model = Model(inputs=["x"], outputs=[Ref("rnn", "y"), Ref("rnn", "h_n")], nodes=[node], parameters=parameters)
    trama.validate(model, trama.registry("numpy"))
    return model, gru


def test_streaming_a_gru_in_chunks_equals_the_whole_sequence() -> None:
    model, gru = gru_model()
    runnable = trama.runtime_for_name("numpy").prepare(model)
    x = np.random.default_rng(3).standard_normal((2, 11, 3)).astype(np.float32)
    whole_y, whole_h = runnable.run([x])
    state = runnable.spawn_state()
    pieces = [state.run([x[:, start:stop]]) for start, stop in ((0, 4), (4, 5), (5, 11))]
    np.testing.assert_allclose(np.concatenate([y for y, _ in pieces], axis=1), whole_y, rtol=0, atol=1e-6)
    np.testing.assert_allclose(pieces[-1][1], whole_h, rtol=0, atol=1e-6)
    with torch.no_grad():
        expected_y, expected_h = gru(torch.from_numpy(x))
    np.testing.assert_allclose(whole_y, expected_y.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(whole_h, expected_h.numpy(), rtol=1e-5, atol=1e-5)


def test_frozen_gru_states_thaw_into_independent_states() -> None:
    model, _ = gru_model()
    runnable = trama.runtime_for_name("numpy").prepare(model)
    rng = np.random.default_rng(4)
    prefix, a, b = (rng.standard_normal((2, 3, 3)).astype(np.float32) for _ in range(3))
    state = runnable.spawn_state()
    state.run([prefix])
    frozen = state.freeze()
    state.run([a])  # moves the original on; the snapshot stays put
    first, second = frozen.unfreeze(), frozen.unfreeze()
    first_y, _ = first.run([b])
    second.run([a])
    second.run([a])
    again_y, _ = frozen.unfreeze().run([b])
    np.testing.assert_array_equal(first_y, again_y)
    (whole_y, _) = runnable.run([np.concatenate([prefix, b], axis=1)])
    np.testing.assert_allclose(first_y, whole_y[:, 3:], rtol=0, atol=1e-6)


def test_profile_of_an_mlp_counts_its_multiply_adds() -> None:
    sys.path.insert(0, str(REPO / "demo"))
    import toylayers

    model = trama.export_model(toylayers.mlp([8, 16, 4], seed=0), inputs=["x"], outputs=["y"])
    profile = trama.runtime_for_name("numpy").prepare(model).profile_json([np.ones((10, 8), np.float32)])
    assert profile["total"]["macs"] == 10 * (8 * 16 + 16 * 4)
    assert profile["total"]["parameters"] == 8 * 16 + 16 + 16 * 4 + 4
    assert profile["runtime"] == "numpy"


def test_torch_tensors_are_accepted_as_inputs() -> None:
    model, gru = gru_model()
    x = torch.randn(1, 5, 3)
    (y, _) = trama.runtime_for_name("numpy").prepare(model).run([x])
    with torch.no_grad():
        np.testing.assert_allclose(y, gru(x)[0].numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["default", "numpy"])
def test_the_numpy_runtime_answers_to_its_names(name: str) -> None:
    runtime = trama.runtime_for_name(name)
    assert runtime.name() == "numpy"
    assert runtime.framework == "numpy"
    assert any(info.name == "numpy" and info.available for info in trama.runtimes())


def _tuple_get_model(index: int) -> Model:
    """One ``tuple_get`` node reading element ``index`` of the model input ``x``."""
    node = Node("get", "tuple_get", {"x": Ref(INPUT, "x")}, ["y"], {"index": "get.index"})
    return Model(["x"], [Ref("get", "y")], [node], {"get.index": Parameter(index, learnable=False)})


def test_a_tuple_input_stays_a_tuple_of_its_converted_elements() -> None:
    """Elements of different shapes (which numpy could not stack) come out one by one; a torch
    tensor element is converted like any input, and a nested tuple stays nested."""
    first = np.arange(6, dtype=np.float32).reshape(2, 3)
    second = torch.tensor([1, 2, 3, 4], dtype=torch.int64)
    nested = (np.float32(1.5), np.zeros((1,), np.bool_))
    x = (first, second, nested)
    runnable = trama.runtime_for_name("numpy").prepare(_tuple_get_model(-2))
    (y,) = runnable.run([x])
    assert isinstance(y, np.ndarray)
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, [1, 2, 3, 4])
    (z,) = trama.runtime_for_name("numpy").prepare(_tuple_get_model(2)).run({"x": x})
    assert isinstance(z, tuple)
    assert len(z) == 2
    assert z[1].dtype == np.bool_
    assert z[1].shape == (1,)
    (w,) = trama.runtime_for_name("numpy").prepare(_tuple_get_model(0)).run([x])
    assert w is first  # an array input is passed through as it is


def test_a_list_input_is_array_like_data() -> None:
    model = Model(["x"], [Ref("id", "y")], [Node("id", "Identity", {"x": Ref(INPUT, "x")}, ["y"])], {})
    (y,) = trama.runtime_for_name("numpy").prepare(model).run([[[1.0, 2.0], [3.0, 4.0]]])
    np.testing.assert_array_equal(y, np.array([[1.0, 2.0], [3.0, 4.0]]))
