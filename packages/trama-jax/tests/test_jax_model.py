"""Imported documents as pure JAX functions: parameters as a pytree, ``jit`` and ``grad`` of
``apply``, tied weights as one leaf, calling nodes, and the way back to a document and to torch.

Documents come from torch modules through trama-torch's exporter, and results are held to the
torch modules themselves (float32 within 1e-5)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from torch import nn

import trama
from trama import INPUT, Model, Node, Parameter, Ref, Tensor
from trama_jax.model import JaxComposite, JaxLeaf, JaxModule, JaxProgram, Member, build

TOL = {"rtol": 1e-5, "atol": 1e-5}


@pytest.fixture(autouse=True)
def seeded() -> None:
    torch.manual_seed(0)


def data(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def export(module: nn.Module, outputs: tuple[str, ...] = ("y",)) -> Model:
    return trama.export_model(module.eval(), inputs=["x"], outputs=list(outputs))


def to_jax(model: Model) -> Any:
    return trama.import_model(model, registry=trama.registry("jax"))


def run_torch(module: nn.Module, x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        result: torch.Tensor = module(torch.from_numpy(x))
    return result.numpy()


def torch_grads(module: nn.Module, x: np.ndarray, prefix: str = "root.") -> dict[str, np.ndarray]:
    """The gradient of ``sum(module(x)²)`` by parameter, named as the exported entries are."""
    loss = (module(torch.from_numpy(x)) ** 2).sum()
    named = dict(module.named_parameters())  # a tied parameter appears once, under its first name
    grads = torch.autograd.grad(loss, list(named.values()))
    return {prefix + name: grad.numpy() for name, grad in zip(named, grads, strict=True)}


def call(module: JaxModule, *inputs: Any) -> Any:
    """``module(*inputs)`` compiled: one compilation instead of one per primitive, op by op."""
    return jax.jit(module.apply)(module.params, *inputs)


def squared(module: JaxModule) -> Any:
    return lambda params, x: jnp.sum(module.apply(params, x) ** 2)


class Twice(nn.Module):
    """A module used twice: exported as a node and a calling node to it, inside a Graph."""

    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(self.block(x)) * 2.0)  # type: ignore[no-any-return]


# --- A pure function ------------------------------------------------------------------------


def test_import_gives_params_as_a_pytree_and_an_apply_that_jit_and_grad_accept() -> None:
    net = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 3))
    document = export(net)
    module = to_jax(document)
    assert isinstance(module, JaxComposite)
    assert set(module.params) == {"root.0.weight", "root.0.bias", "root.2.weight", "root.2.bias"}
    for name, value in module.params.items():
        np.testing.assert_array_equal(value, np.asarray(document.parameters[name].value))
    assert module.buffers == {}
    x = data(5, 4)
    np.testing.assert_allclose(module(x), run_torch(net, x), **TOL)
    np.testing.assert_allclose(jax.jit(module.apply)(module.params, x), run_torch(net, x), **TOL)
    grads = jax.jit(jax.grad(squared(module)))(module.params, x)
    for name, expected in torch_grads(net, x).items():
        np.testing.assert_allclose(grads[name], expected, **TOL)


def test_non_learnable_tensors_are_buffers_and_are_not_differentiated() -> None:
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    net[1].running_mean.uniform_(-1, 1)
    net[1].running_var.uniform_(0.5, 2)
    module = to_jax(export(net))
    assert "root.1.running_mean" in module.buffers
    assert "root.1.running_var" in module.buffers
    assert not set(module.buffers) & set(module.params)
    x = data(6, 3)
    np.testing.assert_allclose(call(module, x), run_torch(net, x), **TOL)
    grads = jax.jit(jax.grad(squared(module)))(module.params, x)
    assert set(grads) == set(module.params)


def test_tied_weights_are_one_leaf_whose_gradient_sums_both_uses() -> None:
    net = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4))
    net[2].weight = net[0].weight
    document = export(net)
    assert document.nodes[3].parameters["weight"] == "root.0.weight"  # one entry, two slots
    module = to_jax(document)
    assert sorted(module.params) == ["root.0.bias", "root.0.weight", "root.2.bias"]
    assert len(jax.tree.leaves(module.params)) == 3
    x = data(3, 4)
    np.testing.assert_allclose(call(module, x), run_torch(net, x), **TOL)
    grads = jax.jit(jax.grad(squared(module)))(module.params, x)
    expected = torch_grads(net, x)
    np.testing.assert_allclose(grads["root.0.weight"], expected["root.0.weight"], **TOL)
    # Untied (a second entry with the same values), each use has a gradient of its own: the
    # tied gradient is their sum.
    untied = copy.deepcopy(document)
    untied.parameters["root.2.weight"] = Parameter(untied.parameters["root.0.weight"].value, True)
    untied.nodes[3].parameters["weight"] = "root.2.weight"
    separate = to_jax(untied)
    apart = jax.jit(jax.grad(squared(separate)))(separate.params, x)
    assert np.abs(np.asarray(apart["root.2.weight"])).max() > 1e-3
    np.testing.assert_allclose(grads["root.0.weight"], apart["root.0.weight"] + apart["root.2.weight"], **TOL)


# --- Calling nodes --------------------------------------------------------------------------


def chain_with_a_call() -> tuple[Model, nn.Module]:
    """``Sequential(l, tanh, l)`` with ``root.2`` calling ``root.0``, built by hand, and the
    torch module it stands for."""
    linear = nn.Linear(3, 3)
    weight = Parameter(Tensor.from_array(linear.weight.detach().numpy()), True)
    bias = Parameter(Tensor.from_array(linear.bias.detach().numpy()), True)
    slots = {"in_features": "n", "out_features": "n", "weight": "w", "bias": "b"}
    nodes = [
        Node("root", "Sequential", {"x": Ref(INPUT, "x")}, ["y"], {}, {"y": Ref("root.2", "y")}),
        Node("root.0", "Linear", {"x": Ref(INPUT, "x")}, ["y"], slots),
        Node("root.1", "Tanh", {"x": Ref("root.0", "y")}, ["y"]),
        Node("root.2", "Linear", {"x": Ref("root.1", "y")}, ["y"], calls="root.0"),
    ]
    model = Model(["x"], [Ref("root", "y")], nodes, {"n": Parameter(3), "w": weight, "b": bias})
    return model, nn.Sequential(linear, nn.Tanh(), linear)


def test_a_calling_node_is_the_same_module_called_again() -> None:
    document, net = chain_with_a_call()
    module = to_jax(document)
    assert module.children["0"] is module.children["2"]
    assert sorted(module.params) == ["b", "w"]
    x = data(2, 3)
    np.testing.assert_allclose(call(module, x), run_torch(net, x), **TOL)
    grads = jax.jit(jax.grad(squared(module)))(module.params, x)
    expected = torch_grads(net, x, prefix="")
    np.testing.assert_allclose(grads["w"], expected["0.weight"], **TOL)
    np.testing.assert_allclose(grads["b"], expected["0.bias"], **TOL)


def test_a_document_with_a_call_inside_a_graph_runs_when_built_whole() -> None:
    net = Twice()
    document = export(net)
    assert any(node.calls == "root.block" for node in document.nodes)
    program = build(document)
    x = data(3, 4)
    (y,) = call(program, x)
    np.testing.assert_allclose(y, run_torch(net, x), **TOL)
    grads = jax.jit(jax.grad(lambda p: jnp.sum(program.apply(p, x)[0] ** 2)))(program.params)
    for name, expected in torch_grads(net, x).items():
        np.testing.assert_allclose(grads[name], expected, **TOL)


def test_the_graph_factory_wires_a_calling_child_by_the_node_it_is_given() -> None:
    net = Twice()
    document = export(net)
    program = build(document)
    (root,) = program.members
    assert isinstance(root.module, JaxComposite)
    children = trama.Children(root.module.children, {member.name: member.node for member in root.module.members})
    factory = trama.registry("jax")["Graph"].factory
    rebuilt = factory(root.node, children=children, parameters={})
    x = data(3, 4)
    np.testing.assert_allclose(call(rebuilt, x), run_torch(net, x), **TOL)


def test_a_graph_factory_called_without_the_children_nodes_says_what_it_needs() -> None:
    program = build(export(Twice()))
    (root,) = program.members
    factory = trama.registry("jax")["Graph"].factory
    with pytest.raises(trama.ImportModelError, match=r"children\.nodes"):
        factory(root.node, children=dict(root.module.children), parameters={})


def test_a_graph_with_a_call_imports() -> None:
    net = Twice()
    module = to_jax(export(net))
    x = data(3, 4)
    np.testing.assert_allclose(call(module, x), run_torch(net, x), **TOL)


def test_an_imported_document_exports_back_with_its_metadata() -> None:
    document = export(Twice())
    document.metadata["note"] = "kept"
    module = to_jax(document)
    again = module.to_model()
    assert again.metadata == document.metadata
    assert again.inputs == document.inputs


# --- Back to a document ---------------------------------------------------------------------


def _structure(model: Model) -> list[tuple[Any, ...]]:
    return [(n.id, n.op, n.inputs, n.outputs, n.parameters, n.output_bindings, n.calls) for n in model.nodes]


def test_updated_params_export_to_the_same_document_with_new_values() -> None:
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    document = export(net)
    module = to_jax(document)
    module.params = {name: value + 1.0 for name, value in module.params.items()}
    for again in (module.to_model(), trama.export_model(module, inputs=["x"], outputs=["y"])):
        assert _structure(again) == _structure(document)
        assert list(again.parameters) == list(document.parameters)
        for name, entry in document.parameters.items():
            new = again.parameters[name]
            assert new.learnable == entry.learnable
            if name in module.params:
                assert new.value.dtype == entry.value.dtype  # type: ignore[union-attr]
                np.testing.assert_array_equal(np.asarray(new.value), np.asarray(entry.value) + 1.0)
            else:
                assert new == entry
    assert trama.loads(trama.dumps(module.to_model())) is not None


def test_to_model_takes_other_params_and_keeps_each_entrys_dtype() -> None:
    net = nn.Linear(3, 2).double()
    document = export(net)
    module = to_jax(document)
    assert module.params["root.weight"].dtype == jnp.float32  # JAX outside x64 mode
    zeros = {name: jnp.zeros_like(value) for name, value in module.params.items()}
    again = module.to_model(zeros)
    assert again.parameters["root.weight"].value.dtype == "float64"  # type: ignore[union-attr]
    assert not np.asarray(again.parameters["root.weight"].value).any()
    assert np.asarray(module.to_model().parameters["root.weight"].value).any()  # its own are untouched


def test_a_program_gives_its_document_back_with_metadata_and_calls() -> None:
    document = export(Twice())
    document.metadata["note"] = {"kept": True}
    program = build(document)
    again = program.to_model({name: value * 0 for name, value in program.params.items()})
    assert again.metadata == document.metadata
    assert _structure(again) == _structure(document)
    assert (again.inputs, again.outputs) == (document.inputs, document.outputs)
    assert not np.asarray(again.parameters["root.head.weight"].value).any()
    (root,) = program.members  # the single top-level module gives the whole document too
    assert root.module.to_model().metadata == document.metadata


def test_one_sgd_step_in_jax_then_back_in_torch() -> None:
    """The issue's acceptance test: torch -> trama -> JAX, a training step, -> trama -> torch."""
    net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    x, target = data(16, 4), data(16, 2, seed=1)
    module = to_jax(export(net))

    def loss(params: Mapping[str, Any]) -> Any:
        return jnp.mean((module.apply(params, x) - target) ** 2)

    grads = jax.jit(jax.grad(loss))(module.params)
    module.params = {name: value - 0.1 * grads[name] for name, value in module.params.items()}
    back = trama.import_model(trama.export_model(module, inputs=["x"], outputs=["y"]), registry=trama.registry("torch"))
    state = back.state_dict()
    assert {f"root.{name}" for name in state} == set(module.params)
    for name, tensor in state.items():
        np.testing.assert_array_equal(tensor.numpy(), np.asarray(module.params[f"root.{name}"]))
    # and the step is the one torch takes
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    torch.nn.functional.mse_loss(net(torch.from_numpy(x)), torch.from_numpy(target)).backward()
    optimizer.step()
    for name, tensor in net.state_dict().items():
        np.testing.assert_allclose(state[name].numpy(), tensor.numpy(), **TOL)


# --- Shapes of results, inputs and errors ---------------------------------------------------


def test_a_leaf_root_with_several_outputs_returns_a_tuple_and_streams() -> None:
    gru = nn.GRU(3, 5, batch_first=True)
    module = to_jax(export(gru, outputs=("y", "h_n")))
    assert isinstance(module, JaxLeaf)
    x = data(2, 6, 3)
    y, h_n = call(module, x)
    with torch.no_grad():
        ty, th = gru(torch.from_numpy(x))
    np.testing.assert_allclose(y, ty.numpy(), **TOL)
    np.testing.assert_allclose(h_n, th.numpy(), **TOL)
    states = module.initial_states()
    assert list(states) == ["root"]
    step = jax.jit(module.apply_with_state)
    (y1, _), states = step(module.params, states, x[:, :4])
    (y2, h2), states = step(module.params, states, x[:, 4:])
    np.testing.assert_allclose(np.concatenate([y1, y2], axis=1), ty.numpy(), **TOL)
    np.testing.assert_allclose(h2, th.numpy(), **TOL)


def test_inputs_by_name_and_errors_naming_what_is_wrong() -> None:
    module = to_jax(export(nn.Sequential(nn.Linear(2, 2))))
    x = data(1, 2)
    np.testing.assert_array_equal(jax.jit(module.apply)(module.params, x=x), call(module, x))
    with pytest.raises(trama.ExecutionError, match="takes 1 input"):
        module(x, x)
    with pytest.raises(trama.ExecutionError, match="unknown \\['z'\\]"):
        module(z=x)
    with pytest.raises(trama.ExecutionError, match=r"missing \[.root\.0\.bias.\]"):
        module.params = {"root.0.weight": module.params["root.0.weight"]}
    with pytest.raises(trama.ExecutionError, match="Linear") as caught:
        call(module, data(1, 3))
    assert caught.value.node_id == "root.0"


def test_several_top_level_nodes_import_as_a_dict_and_build_as_one_program() -> None:
    first, second = nn.Linear(2, 3), nn.Linear(3, 1)
    weights = {
        f"{name}.{slot}": Parameter(Tensor.from_array(getattr(layer, slot).detach().numpy()), True)
        for name, layer in (("a", first), ("b", second))
        for slot in ("weight", "bias")
    }
    sizes = {"two": Parameter(2), "three": Parameter(3), "one": Parameter(1)}
    nodes = [
        Node(
            "a",
            "Linear",
            {"x": Ref(INPUT, "x")},
            ["y"],
            {"in_features": "two", "out_features": "three", "weight": "a.weight", "bias": "a.bias"},
        ),
        Node(
            "b",
            "Linear",
            {"x": Ref("a", "y")},
            ["y"],
            {"in_features": "three", "out_features": "one", "weight": "b.weight", "bias": "b.bias"},
        ),
    ]
    document = Model(["x"], [Ref("b", "y"), Ref("a", "y")], nodes, {**weights, **sizes})
    modules = to_jax(document)
    assert sorted(modules) == ["a", "b"]
    program = build(document)
    assert isinstance(program, JaxProgram)
    assert [member.name for member in program.members] == ["a", "b"]
    x = data(4, 2)
    y, hidden = jax.jit(program.apply)(program.params, x)
    with torch.no_grad():
        expected_hidden = first(torch.from_numpy(x))
        expected = second(expected_hidden)
    np.testing.assert_allclose(hidden, expected_hidden.numpy(), **TOL)
    np.testing.assert_allclose(y, expected.numpy(), **TOL)
    assert isinstance(program.members[0], Member)
