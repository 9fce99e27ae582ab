"""trama-torch's tensor functions, both ways.

The main check traces small functions with ``torch.fx``, maps every call with
:func:`export_function_call`, writes the nodes as a document (validated against the catalog, then
through JSON), imports them with the function factories and runs them: the result must be torch's
eager result, bit for bit and dtype for dtype. Direct tests pin the mappings (which side a
reversed scalar lands on, the index language) and the refusals.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest
import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn
from torch_op_support import torch_registry

import trama
from trama import INPUT, ExportError, ImportModelError, Model, Node, Param, Parameter, Ref, Tensor
from trama.catalog import standard_registry
from trama_torch.functions import FunctionCall, FunctionModule, export_function_call, function_factories
from trama_torch.leaves import call_leaf
from trama_torch.tensors import export_tensor

REGISTRY = torch_registry()


def _entry(value: Any) -> Parameter:
    """A FunctionCall's slot value as a table entry, as an exporter stores it."""
    if isinstance(value, Param):
        return Parameter(Tensor.from_array(value.value), value.learnable)
    if isinstance(value, (np.ndarray, torch.Tensor)):
        return Parameter(Tensor.from_array(np.asarray(value)))
    return Parameter(value)


def _is_node(value: Any) -> bool:
    return isinstance(value, fx.Node)


def _document(traced: fx.GraphModule) -> tuple[Model, list[FunctionCall]]:
    """One top-level node per traced call; constants and ``get_attr`` tensors become ``constant`` nodes."""
    inputs: list[str] = []
    nodes: list[Node] = []
    table: dict[str, Parameter] = {}
    refs: dict[fx.Node, Ref] = {}
    calls: list[FunctionCall] = []
    outputs: list[Ref] = []

    def constant(name: str, value: Any) -> Ref:
        table[f"{name}.value"] = _entry(value)
        nodes.append(Node(name, "constant", outputs=["y"], parameters={"value": f"{name}.value"}))
        return Ref(name, "y")

    for node in traced.graph.nodes:
        if node.op == "placeholder":
            inputs.append(node.name)
            refs[node] = Ref(INPUT, node.name)
        elif node.op == "get_attr":
            refs[node] = constant(node.name, export_tensor(getattr(traced, node.target)))
        elif node.op == "output":
            results = node.args[0] if isinstance(node.args[0], tuple) else (node.args[0],)
            outputs = [refs[result] for result in results]
        else:
            call = export_function_call(node.op, node.target, node.args, node.kwargs, is_tensor=_is_node)
            calls.append(call)
            wired = {
                port: refs[arg] if _is_node(arg) else constant(f"{node.name}_{port}", arg)
                for port, arg in call.ports.items()
            }
            slots = {}
            for slot, value in call.parameters.items():
                table[f"{node.name}.{slot}"] = _entry(value)
                slots[slot] = f"{node.name}.{slot}"
            nodes.append(Node(node.name, call.op, inputs=wired, outputs=list(call.outputs), parameters=slots))
            refs[node] = Ref(node.name, "y")
    model = Model(inputs=inputs, outputs=outputs, nodes=nodes, parameters=table, opsets={"trama": 1})
    trama.validate(model, standard_registry())
    return trama.loads(trama.dumps(model)), calls


def run_document(model: Model, values: Mapping[str, Any]) -> list[Any]:
    """Import every node and evaluate the graph in document order."""
    built = trama.import_model(model, registry=REGISTRY)
    if not isinstance(built, dict):
        built = {model.nodes[0].id: built}
    results: dict[str, Any] = {}

    def value(ref: Ref) -> Any:
        return values[ref.output] if ref.is_input else results[ref.node]

    for node in model.nodes:
        module = built[node.id]
        if isinstance(module, FunctionModule):
            assert module.ports == tuple(node.inputs)
            results[node.id] = module(*(value(ref) for ref in node.inputs.values()))
        else:
            results[node.id] = call_leaf(node, module, {port: value(ref) for port, ref in node.inputs.items()})["y"]
    return [value(ref) for ref in model.outputs]


def _inputs() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(3, 4, generator=generator)
    return {
        "x": x,
        "y": torch.randn(3, 4, generator=generator),
        "w": torch.randn(4, 2, generator=generator),
        "xi": torch.randint(-5, 6, (3, 4), generator=generator, dtype=torch.int32),
        "h": torch.randn(3, 4, generator=generator).half(),
        "b": torch.randn(3, 4, generator=generator).bfloat16(),
        "idx": torch.tensor([2, 0]),
        "mask": x > 0,
    }


CASES: list[tuple[str, Callable[..., Any]]] = [
    ("reversed-sub", lambda x: 1 - x),
    ("sub", lambda x: x - 1),
    ("reversed-mul", lambda x: 2 * x),
    ("reversed-add", lambda x: 1.5 + x),
    ("reversed-div", lambda x: 3 / x),
    ("div", lambda x: x / 3),
    ("floordiv", lambda x: x // 0.3),
    ("reversed-floordiv", lambda x: 2 // x),
    ("reversed-pow", lambda x: 2**x),
    ("pow", lambda x: x**2),
    ("add-alpha", lambda x, y: torch.add(x, y, alpha=2)),
    ("sub-alpha", lambda x, y: torch.sub(x, y, alpha=0.5)),
    ("rsub", lambda x: torch.rsub(x, 2)),
    ("method-add", lambda x, y: x.add(y)),
    ("method-mul", lambda x, y: x.mul(y)),
    ("method-div-floor", lambda x, y: x.div(y, rounding_mode="floor")),
    ("div-trunc", lambda x, y: torch.div(x, y, rounding_mode="trunc")),
    ("true-divide", lambda x, y: torch.true_divide(x, y)),
    ("matmul-operator", lambda x, w: x @ w),
    ("matmul", lambda x, w: torch.matmul(x, w)),
    ("mm", lambda x, w: torch.mm(x, w)),
    ("method-matmul", lambda x, w: x.matmul(w)),
    ("neg", lambda x: -x),
    ("torch-neg", lambda x: torch.neg(x)),
    ("int-times-float", lambda xi: xi * 2.5),
    ("int-true-division", lambda xi: xi / 2),
    ("int-floor-division", lambda xi: xi // 2),
    ("half-times-float", lambda h: h * 2.0),
    ("bfloat16-minus-int", lambda b: 3 - b),
    ("int-plus-bool", lambda xi: xi + True),
    ("tensor-constant", lambda x: x * torch.tensor([1.0, 2.0, 3.0, 4.0])),
    ("relu", lambda x: F.relu(x)),
    ("torch-relu", lambda x: torch.relu(x)),
    ("method-relu", lambda x: x.relu()),
    ("leaky-relu", lambda x: F.leaky_relu(x, 0.2)),
    ("gelu", lambda x: F.gelu(x, approximate="tanh")),
    ("silu", lambda x: F.silu(x)),
    ("sigmoid", lambda x: torch.sigmoid(x)),
    ("method-sigmoid", lambda x: x.sigmoid()),
    ("tanh", lambda x: torch.tanh(x)),
    ("method-tanh", lambda x: x.tanh()),
    ("softmax", lambda x: F.softmax(x, dim=1)),
    ("torch-softmax", lambda x: torch.softmax(x, -1)),
    ("method-softmax", lambda x: x.softmax(0)),
    ("log-softmax", lambda x: F.log_softmax(x, 1)),
    ("method-log-softmax", lambda x: x.log_softmax(-1)),
    ("softplus", lambda x: F.softplus(x, beta=2, threshold=1)),
    ("elu", lambda x: F.elu(x, alpha=0.3)),
    ("hardswish", lambda x: F.hardswish(x * 4)),
    ("cat", lambda x, y: torch.cat([x, y], 1)),
    ("concat", lambda x, y: torch.concat((x, y))),
    ("cat-promotes", lambda x, xi: torch.cat([xi, x], 0)),
    ("stack", lambda x, y: torch.stack((x, y), dim=-1)),
    ("view", lambda x: x.view(-1, 2)),
    ("reshape-tuple", lambda x: x.reshape((2, 6))),
    ("torch-reshape", lambda x: torch.reshape(x, [6, -1])),
    ("permute", lambda x: x.permute(1, 0)),
    ("permute-tuple", lambda x: x.permute((1, 0))),
    ("transpose", lambda x: x.transpose(0, 1)),
    ("swapaxes", lambda x: torch.swapaxes(x, 0, 1)),
    ("mT", lambda x: x.mT),
    ("flatten", lambda x: torch.flatten(x.unsqueeze(0), 1)),
    ("method-flatten", lambda x: x.flatten()),
    ("squeeze", lambda x: x.unsqueeze(0).squeeze()),
    ("squeeze-dim", lambda x: x.unsqueeze(1).squeeze(1)),
    ("squeeze-dims", lambda x: torch.squeeze(x.unsqueeze(0), (0, 1))),
    ("unsqueeze", lambda x: torch.unsqueeze(x, -1)),
    ("mean", lambda x: x.mean()),
    ("mean-dims", lambda x: x.mean(dim=(0, 1), keepdim=True)),
    ("sum", lambda x: torch.sum(x, 1)),
    ("int-sum", lambda xi: xi.sum()),
    ("amax", lambda x: torch.amax(x, dim=1)),
    ("max", lambda x: torch.max(x)),
    ("method-max", lambda x: x.max()),
    ("argmax", lambda x: x.argmax(1, keepdim=True)),
    ("argmax-all", lambda x: torch.argmax(x)),
    ("select", lambda x: x[:, 0]),
    ("new-axis", lambda x: x[..., None]),
    ("slice", lambda x: x[1:3]),
    ("negative-index", lambda x: x[-1]),
    ("steps", lambda x: x[::2, 1:]),
    ("constant-index-list", lambda x: x[:, [0, 2]]),
    ("tensor-index", lambda x, idx: x[idx]),
    ("mask", lambda x, mask: x[mask]),
    ("tensor-and-slice", lambda x, idx: x[idx, 1:]),
    ("contiguous", lambda x: x.transpose(0, 1).contiguous()),
    ("clone", lambda x: x.clone()),
    ("dropout-off", lambda x: F.dropout(x, 0.2, training=False)),
    ("chain", lambda x, y: torch.relu(x @ y.mT + 1).sum(-1)),
]


@pytest.mark.parametrize(("name", "function"), CASES, ids=[name for name, _ in CASES])
def test_traced_calls_give_torchs_eager_result(name: str, function: Callable[..., Any]) -> None:
    traced = fx.symbolic_trace(function)
    model, calls = _document(traced)
    assert calls, "the case must trace to at least one call"
    pool = _inputs()
    values = {port: pool[port] for port in model.inputs}
    expected = function(*values.values())
    (result,) = run_document(model, values)
    assert result.dtype == expected.dtype
    assert torch.equal(result, expected)


def test_every_opset_1_function_op_is_exercised() -> None:
    """The fx path (export without example inputs) maps torch calls to opset 1's function ops;
    opset 2's are written by the capture (test_torch_capture.py and the families' tests)."""
    ops = set()
    for _, function in CASES:
        model, _ = _document(fx.symbolic_trace(function))
        ops |= {node.op for node in model.nodes}
    opset_1 = {name for name in function_factories() if standard_registry()[name].since == 1}
    missing = opset_1 - ops - {"tuple_get"}  # no torch call makes a tuple value
    assert not missing


# --- Mappings --------------------------------------------------------------------------------------


class Traced:
    """A stand-in for a traced value (an fx node)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


X, Y, IX = Traced("x"), Traced("y"), Traced("i")


def _map(kind: str, target: Any, *args: Any, **kwargs: Any) -> FunctionCall:
    return export_function_call(kind, target, args, kwargs, is_tensor=lambda value: isinstance(value, Traced))


@pytest.mark.parametrize(
    ("kind", "target", "args", "kwargs", "op", "ports", "parameters"),
    [
        ("call_function", operator.sub, (2, X), {}, "sub", {"other": X}, {"x": 2, "alpha": 1}),
        ("call_function", operator.sub, (X, 2), {}, "sub", {"x": X}, {"other": 2, "alpha": 1}),
        ("call_function", operator.truediv, (1.5, X), {}, "div", {"other": X}, {"x": 1.5, "rounding_mode": None}),
        ("call_function", operator.floordiv, (X, Y), {}, "div", {"x": X, "other": Y}, {"rounding_mode": "floor"}),
        ("call_function", torch.rsub, (X, 2), {"alpha": 3}, "sub", {"other": X}, {"x": 2, "alpha": 3}),
        ("call_function", torch.add, (X, Y), {"alpha": 2}, "add", {"x": X, "other": Y}, {"alpha": 2}),
        ("call_method", "add", (X, True), {}, "add", {"x": X}, {"other": True, "alpha": 1}),
        ("call_function", torch.Tensor.mul, (X, 0.5), {}, "mul", {"x": X}, {"other": 0.5}),
        ("call_function", operator.mul, (np.float32(0.25), X), {}, "mul", {"other": X}, {"x": 0.25}),
        ("call_function", operator.pow, (2, X), {}, "pow", {"other": X}, {"x": 2}),
        ("call_function", torch.pow, (X,), {"exponent": 3}, "pow", {"x": X}, {"other": 3}),
        ("call_function", torch.bmm, (X, Y), {}, "matmul", {"x": X, "other": Y}, {}),
        ("call_method", "view", (X, -1, 4), {}, "reshape", {"x": X}, {"shape": [-1, 4]}),
        ("call_method", "reshape", (X, torch.Size([2, 3])), {}, "reshape", {"x": X}, {"shape": [2, 3]}),
        ("call_method", "permute", (X, 2, 0, 1), {}, "permute", {"x": X}, {"dims": [2, 0, 1]}),
        ("call_method", "squeeze", (X, (0, 2)), {}, "squeeze", {"x": X}, {"dim": [0, 2]}),
        ("call_function", torch.concatenate, ([X, Y],), {"axis": 1}, "concat", {"x0": X, "x1": Y}, {"dim": 1}),
        ("call_function", torch.amax, (X,), {}, "max", {"x": X}, {"dim": None, "keepdim": False}),
        ("call_function", torch.mean, (X, [0, 1], True), {}, "mean", {"x": X}, {"dim": [0, 1], "keepdim": True}),
        ("call_function", F.softmax, (X,), {"dim": 1, "_stacklevel": 5}, "softmax", {"x": X}, {"dim": 1}),
        ("call_function", F.gelu, (X,), {}, "gelu", {"x": X}, {"approximate": "none"}),
        ("call_function", F.dropout, (X, 0.1), {}, "Dropout", {"x": X}, {"p": 0.1}),
        ("call_method", "contiguous", (X,), {}, "Identity", {"x": X}, {}),
        ("call_function", getattr, (X, "mT"), {}, "transpose", {"x": X}, {"dim0": -2, "dim1": -1}),
        ("call_function", operator.getitem, (X, (slice(None), 0)), {}, "getitem", {"x": X}, {"index": [[None] * 3, 0]}),
        ("call_function", operator.getitem, (X, (..., None)), {}, "getitem", {"x": X}, {"index": ["...", None]}),
        ("call_function", operator.getitem, (X, slice(1, 3)), {}, "getitem", {"x": X}, {"index": [[1, 3, None]]}),
        ("call_function", operator.getitem, (X, -1), {}, "getitem", {"x": X}, {"index": [-1]}),
        ("call_function", operator.getitem, (X, (IX, 1)), {}, "getitem", {"x": X, "i0": IX}, {"index": ["i0", 1]}),
        ("call_function", operator.getitem, (X, [0, 2]), {}, "getitem", {"x": X, "i0": [0, 2]}, {"index": ["i0"]}),
    ],
)
def test_spellings_map_to_the_catalog(
    kind: str,
    target: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    op: str,
    ports: dict[str, Any],
    parameters: dict[str, Any],
) -> None:
    call = _map(kind, target, *args, **kwargs)
    assert (call.op, call.ports, call.parameters, call.outputs, call.inplace) == (op, ports, parameters, ("y",), None)


def test_a_tensor_constant_operand_becomes_a_slot_keyed_by_the_tensor() -> None:
    scale = nn.Parameter(torch.tensor([1.0, 2.0]))
    call = _map("call_function", operator.mul, X, scale)
    held = call.parameters["other"]
    assert isinstance(held, Param)
    assert held.key is scale
    assert held.learnable
    assert np.array_equal(held.value, [1.0, 2.0])


@pytest.mark.parametrize(
    ("kind", "target", "args", "kwargs"),
    [
        ("call_method", "add_", (X, Y), {}),
        ("call_function", operator.iadd, (X, 1), {}),
        ("call_function", F.relu, (X,), {"inplace": True}),
        ("call_method", "relu_", (X,), {}),
        ("call_function", F.dropout, (X,), {"inplace": True}),
    ],
)
def test_in_place_forms_say_which_port_they_modify(
    kind: str, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    assert _map(kind, target, *args, **kwargs).inplace == "x"


def test_optional_questions_resolve_what_a_rank_or_a_tuple_decides() -> None:
    def ask(target: Any, *args: Any, **kwargs: Any) -> FunctionCall:
        return export_function_call(
            "call_function",
            target,
            args,
            kwargs,
            is_tensor=lambda value: isinstance(value, Traced),
            is_sequence=lambda value: value is Y,
            ndim=lambda value: 3,
        )

    assert ask(operator.getitem, Y, -1) == FunctionCall("tuple_get", {"x": Y}, {"index": -1})
    assert ask(operator.getitem, X, -1).op == "getitem"
    assert ask(getattr, X, "T") == FunctionCall("permute", {"x": X}, {"dims": [2, 1, 0]})
    assert ask(F.softmax, X).parameters == {"dim": 0}  # torch's legacy choice for 3 dimensions
    with pytest.raises(ExportError, match="indexed by an int"):
        ask(operator.getitem, Y, slice(0, 1))


@pytest.mark.parametrize(
    ("kind", "target", "args", "kwargs", "message"),
    [
        ("call_method", "size", (X, 0), {}, "Tensor.size reads the shape at run time"),
        ("call_function", getattr, (X, "shape"), {}, "'shape' reads the shape at run time"),
        ("call_method", "view", (X, Y, -1), {}, "Tensor.view: shape is computed at run time"),
        ("call_method", "to", (X, torch.float16), {}, "Tensor.to casts the dtype"),
        ("call_method", "view", (X, torch.float16), {}, "reinterpreting the bytes"),
        (
            "call_function",
            F.linear,
            (X, Y),
            {},
            "torch.nn.functional.linear has no op.*torch.nn.Linear is a catalog op",
        ),
        ("call_function", torch.special.erf, (X,), {}, "special_erf has no op in the trama catalog.*to_node"),
        ("call_function", torch.max, (X, 1), {}, "write torch.amax"),
        ("call_function", torch.max, (X, Y), {}, "elementwise maximum"),
        ("call_function", F.softmax, (X,), {"dim": 1, "dtype": torch.float64}, "dtype= casts"),
        ("call_function", operator.getitem, (X, slice(0, Y)), {}, "slice bounds must be ints"),
        ("call_function", operator.getitem, (X, slice(None, None, -1)), {}, "step -1 must be positive"),
        ("call_function", operator.getitem, (X, True), {}, "bool index item"),
        ("call_function", torch.mean, (X, ()), {}, r"dim=\(\) is refused"),
        ("call_function", torch.add, (X, Y), {"scale": 2}, "got an unexpected keyword argument 'scale'"),
        ("call_function", torch.cat, (X,), {}, "must be a list or tuple written at the call"),
        ("call_function", torch.transpose, (X, Y, 1), {}, "dim0 is computed at run time"),
        ("call_function", getattr, (X, "T"), {}, "x.T depends on x's rank"),
        ("call_module", "fc", (X,), {}, "maps call_function and call_method nodes, not 'call_module'"),
    ],
)
def test_unsupported_calls_say_what_to_do(
    kind: str, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ExportError, match=message):
        _map(kind, target, *args, **kwargs)


# --- FunctionModule and the factories --------------------------------------------------------------


def _node(op: str, inputs: list[str], **slots: Any) -> tuple[Node, dict[str, Parameter]]:
    refs = {port: Ref(INPUT, port) for port in inputs}
    entries = {slot: value if isinstance(value, Parameter) else Parameter(value) for slot, value in slots.items()}
    return Node("root", op, inputs=refs, outputs=["y"], parameters={slot: slot for slot in slots}), entries


def _build(op: str, inputs: list[str], **slots: Any) -> FunctionModule:
    node, entries = _node(op, inputs, **slots)
    return function_factories()[op](node, children={}, parameters=entries)


def test_forward_takes_the_ports_in_the_order_of_the_nodes_inputs() -> None:
    module = _build("sub", ["other", "x"], alpha=1)
    assert module.ports == ("other", "x")
    assert torch.equal(module(torch.tensor(1.0), torch.tensor(5.0)), torch.tensor(4.0))
    with pytest.raises(TypeError, match=r"takes the ports \['other', 'x'\]"):
        module(torch.tensor(1.0))


def test_function_module_names_its_op_and_settings() -> None:
    module = _build("softmax", ["x"], dim=1)
    assert module.op == "softmax"
    assert repr(module) == "FunctionModule(op=softmax, dim=1)"
    assert not list(module.parameters())
    assert not list(module.buffers())


def test_tensor_constants_are_buffers_or_tied_parameters() -> None:
    torch.manual_seed(0)
    linear = nn.Linear(3, 2, bias=False)
    weight = Parameter(Tensor.from_array(linear.weight.detach().numpy()), learnable=True)
    table = {
        "w": weight,
        "in_features": Parameter(3),
        "out_features": Parameter(2),
        "offsets_value": Parameter(Tensor.from_array(np.arange(3.0))),
        "list_value": Parameter([1, 2]),
    }
    nodes = [
        Node(
            "linear",
            "Linear",
            inputs={"x": Ref(INPUT, "x")},
            outputs=["y"],
            parameters={"weight": "w", "in_features": "in_features", "out_features": "out_features"},
        ),
        Node("scale", "constant", outputs=["y"], parameters={"value": "w"}),
        Node("offsets", "constant", outputs=["y"], parameters={"value": "offsets_value"}),
        Node("list", "constant", outputs=["y"], parameters={"value": "list_value"}),
    ]
    model = Model(["x"], [Ref("linear", "y")], nodes, table, opsets={"trama": 1})
    built = trama.import_model(trama.loads(trama.dumps(model)), registry=REGISTRY)
    assert built["scale"]() is built["linear"].weight
    assert [name for name, _ in built["scale"].named_parameters()] == ["value"]
    offsets = built["offsets"]
    assert [name for name, _ in offsets.named_buffers()] == ["value"]
    assert not list(offsets.parameters())
    assert torch.equal(offsets(), torch.arange(3.0, dtype=torch.float64))
    assert built["list"]() == [1, 2]


def test_a_dropout_call_that_drops_in_training_is_the_dropout_module() -> None:
    model, _ = _document(fx.symbolic_trace(lambda x: F.dropout(x, 0.2, training=True)))
    assert [node.op for node in model.nodes] == ["Dropout"]
    built = trama.import_model(model, registry=REGISTRY)
    assert isinstance(built, nn.Dropout)
    assert built.p == 0.2
    assert not built.training


@pytest.mark.parametrize(
    ("op", "inputs", "slots", "message"),
    [
        ("add", ["x", "other"], {"other": 2}, "operand 'other' is both wired and held by a slot"),
        ("mul", ["x"], {}, "operand 'other' is neither wired nor held by a slot"),
        ("add", ["x", "other"], {"alpha": "2"}, "alpha must be a number"),
        ("div", ["x", "other"], {"rounding_mode": "round"}, "rounding_mode must be one of"),
        ("concat", ["x0", "x2"], {}, r"the inputs must be the ports x0 … x1"),
        ("reshape", ["x"], {"shape": [2, -1, -1]}, "at most one -1"),
        ("getitem", ["x", "i1"], {"index": ["i1"]}, "must be i0, i1, … in order"),
        ("getitem", ["x"], {"index": [[0, 4, 0]]}, "must have a positive step"),
        ("getitem", ["x"], {"index": ["...", 0, "..."]}, 'has "..." more than once'),
        ("getitem", ["x"], {"index": [1.5]}, "index item 1.5 is none of"),
        ("mean", ["x"], {"dim": []}, "non-empty list of ints"),
        ("transpose", ["x"], {"dim0": 0, "dim1": True}, "dim1 must be an int"),
    ],
)
def test_factories_refuse_bad_slots_naming_the_node(
    op: str, inputs: list[str], slots: dict[str, Any], message: str
) -> None:
    with pytest.raises(ImportModelError, match=message) as caught:
        _build(op, inputs, **slots)
    assert caught.value.node_id == "root"


def test_tuple_get_reads_a_tuple_value() -> None:
    module = _build("tuple_get", ["x"], index=-1)
    assert module((1, 2, 3)) == 3
    with pytest.raises(TypeError, match="x must be a tuple or a list"):
        module(torch.zeros(2))


def test_binary_ops_keep_python_numbers_as_numbers() -> None:
    """A number held by a slot promotes as a Python number: float16 · 2.0 stays float16."""
    module = _build("mul", ["x"], other=2.0)
    assert module(torch.ones(2, dtype=torch.float16)).dtype == torch.float16
    tensor_operand = _build("mul", ["x"], other=Parameter(Tensor.from_array(np.float32(2.0))))
    assert tensor_operand(torch.ones(2, dtype=torch.float16)).dtype == torch.float16


def test_function_call_is_a_plain_record() -> None:
    call = dataclasses.replace(_map("call_function", torch.relu, X), inplace="x")
    assert (call.op, call.result, call.outputs) == ("relu", "y", ("y",))
