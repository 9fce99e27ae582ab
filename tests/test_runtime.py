"""The runtime API on a test runtime whose kernels are defined here: wiring, inputs, state,
profiles, placement, and finding runtimes by name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from trama import INPUT, Model, Node, OpRegistry, OpSpec, Parameter, ParameterSchema, Ref, Tensor, ValueFact
from trama.errors import ExecutionError
from trama.execution import GraphRuntime


class Scale:
    def __init__(self, factor: float) -> None:
        self.factor = factor

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        return {"y": inputs["x"] * self.factor}


class Add:
    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        return {"y": inputs["x"] + inputs["other"]}


class Accumulate:
    """A stateful kernel: y = x + the sum of every earlier x (the state)."""

    def initial_state(self) -> Any:
        return 0.0

    def step(self, inputs: Mapping[str, Any], state: Any) -> tuple[dict[str, Any], Any]:
        total = state + inputs["x"].sum()
        return {"y": inputs["x"] + state}, total


class Dense:
    def __init__(self, weight: np.ndarray) -> None:
        self.weight = weight

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        return {"y": inputs["x"] @ self.weight.T}


def registry() -> OpRegistry:
    return OpRegistry(
        [
            OpSpec(
                "t.Scale",
                ("x",),
                ("y",),
                (ParameterSchema("factor", ("float",)),),
                factory=lambda node, *, children, parameters: Scale(parameters["factor"].value),
            ),
            OpSpec("t.Add", ("x", "other"), ("y",), factory=lambda node, **_: Add()),
            OpSpec("t.Accumulate", ("x",), ("y",), factory=lambda node, **_: Accumulate()),
            OpSpec(
                "Linear",
                ("x",),
                ("y",),
                (
                    ParameterSchema("in_features", ("int",)),
                    ParameterSchema("out_features", ("int",)),
                    ParameterSchema("weight", ("tensor",)),
                ),
                factory=lambda node, *, children, parameters: Dense(np.asarray(parameters["weight"].value)),
            ),
            OpSpec("t.Block", ("x",), ("y", "skip"), composite=True),
        ]
    )


class FakeRuntime(GraphRuntime):
    framework = "test"
    devices = ("cpu",)

    def registry(self) -> OpRegistry:
        return registry()

    def convert_input(self, value: Any) -> Any:
        return np.asarray(value, dtype=np.float64)


def leaf(node_id: str, op: str, inputs: dict[str, Ref], parameters: dict[str, str] | None = None) -> Node:
    return Node(node_id, op, inputs, ["y"], parameters or {})


def block_model() -> Model:
    """Out-of-order siblings on purpose: ``root.a``'s subtree comes after ``root.b``, which uses
    it, so document order is not an execution order."""
    nodes = [
        Node(
            "root",
            "t.Block",
            {"x": Ref(INPUT, "x")},
            ["y", "skip"],
            {},
            {"y": Ref("root.b", "y"), "skip": Ref(INPUT, "x")},
        ),
        Node(
            "root.a",
            "t.Block",
            {"x": Ref(INPUT, "x")},
            ["y", "skip"],
            {},
            {"y": Ref("root.a.s", "y"), "skip": Ref(INPUT, "x")},
        ),
        leaf("root.b", "t.Add", {"x": Ref("root.a", "y"), "other": Ref("root.a", "skip")}),
        leaf("root.a.s", "t.Scale", {"x": Ref(INPUT, "x")}, {"factor": "three"}),
    ]
    return Model(
        inputs=["x"],
        outputs=[Ref("root", "y"), Ref("root", "skip")],
        nodes=nodes,
        parameters={"three": Parameter(3.0)},
        metadata={"producer": {"name": "test"}, "note": "hello"},
        input_facts=[ValueFact("float64", ("n",))],
    )


def test_composites_run_from_their_wiring_in_dependency_order() -> None:
    runnable = FakeRuntime().prepare(block_model())
    y, skip = runnable.run([np.array([1.0, 2.0])])
    np.testing.assert_array_equal(y, [4.0, 8.0])  # 3x + x
    np.testing.assert_array_equal(skip, [1.0, 2.0])
    assert [step.node.id for step in runnable.plan.steps] == ["root.a.s", "root.b"]


def test_inputs_by_name_or_position_and_clear_errors() -> None:
    runnable = FakeRuntime().prepare(block_model())
    by_name = runnable.run({"x": [1.0]})
    np.testing.assert_array_equal(by_name[0], [4.0])
    with pytest.raises(ExecutionError, match=r"takes 1 input\(s\) \['x'\], got 2"):
        runnable.run([[1.0], [2.0]])
    with pytest.raises(ExecutionError, match=r"missing \['x'\]; unknown \['z'\]"):
        runnable.run({"z": [1.0]})


def test_facts_and_properties() -> None:
    runnable = FakeRuntime().prepare(block_model())
    assert (runnable.input_count(), runnable.output_count()) == (1, 2)
    assert runnable.input_fact(0) == ValueFact("float64", ("n",))
    assert runnable.output_facts() == [ValueFact(), ValueFact()]
    assert runnable.property_keys() == ["producer", "note"]
    assert runnable.property("note") == "hello"
    with pytest.raises(KeyError, match="not a property"):
        runnable.property("nope")
    with pytest.raises(IndexError):
        runnable.input_fact(1)


def accumulating_model() -> Model:
    return Model(
        inputs=["x"],
        outputs=[Ref("acc", "y")],
        nodes=[leaf("acc", "t.Accumulate", {"x": Ref(INPUT, "x")})],
        parameters={},
    )


def test_state_carries_over_and_run_starts_fresh() -> None:
    runnable = FakeRuntime().prepare(accumulating_model())
    state = runnable.spawn_state()
    np.testing.assert_array_equal(state.run([[1.0, 2.0]])[0], [1.0, 2.0])
    np.testing.assert_array_equal(state.run([[1.0, 1.0]])[0], [4.0, 4.0])  # + 3 carried over
    np.testing.assert_array_equal(runnable.run([[1.0, 1.0]])[0], [1.0, 1.0])  # run() is stateless


def test_frozen_states_thaw_into_independent_states() -> None:
    runnable = FakeRuntime().prepare(accumulating_model())
    state = runnable.spawn_state()
    state.run([[5.0]])
    frozen = state.freeze()
    state.run([[100.0]])  # the original moves on; the snapshot does not
    first, second = frozen.unfreeze(), frozen.unfreeze()
    np.testing.assert_array_equal(first.run([[0.0]])[0], [5.0])
    first.run([[1.0]])
    np.testing.assert_array_equal(second.run([[0.0]])[0], [5.0])  # untouched by `first`
    np.testing.assert_array_equal(frozen.unfreeze().run([[0.0]])[0], [5.0])


def mlp_model() -> Model:
    weight = Tensor.from_array(np.ones((4, 3)))
    return Model(
        inputs=["x"],
        outputs=[Ref("fc", "y")],
        nodes=[leaf("fc", "Linear", {"x": Ref(INPUT, "x")}, {"in_features": "i", "out_features": "o", "weight": "w"})],
        parameters={"i": Parameter(3), "o": Parameter(4), "w": Parameter(weight, learnable=True)},
    )


def test_profile_reports_calls_time_parameters_and_multiply_adds() -> None:
    profile = FakeRuntime().prepare(mlp_model()).profile_json([np.ones((5, 3))])
    (row,) = profile["nodes"]
    assert row["id"] == "fc"
    assert row["calls"] == 1
    assert row["seconds"] >= 0.0
    assert row["parameters"] == 12
    assert row["parameter_bytes"] == 96
    assert row["macs"] == 5 * 4 * 3
    assert profile["total"]["macs"] == 60
    assert profile["total"]["macs_complete"] is True


def test_profile_of_a_composite_sums_its_subtree() -> None:
    profile = FakeRuntime().prepare(block_model()).profile_json([np.ones(2)])
    rows = {row["id"]: row for row in profile["nodes"]}
    assert rows["root"]["kind"] == "composite"
    assert rows["root"]["seconds"] == pytest.approx(rows["root.a.s"]["seconds"] + rows["root.b"]["seconds"])
    assert rows["root"]["macs"] is None  # Scale and Add have no multiply-add rule
    assert profile["total"]["macs_complete"] is False


def test_a_kernel_failure_names_the_node() -> None:
    model = mlp_model()
    with pytest.raises(ExecutionError, match="Linear failed: ValueError") as caught:
        FakeRuntime().prepare(model).run([np.ones((5, 7))])
    assert caught.value.node_id == "fc"


def test_placement_this_runtime_cannot_honour_is_refused() -> None:
    runtime = FakeRuntime()
    runtime.prepare(mlp_model(), placement={"fc": "cpu"})
    with pytest.raises(ExecutionError, match="cannot place 'fc' on 'cuda:0': it runs on cpu only"):
        runtime.prepare(mlp_model(), placement={"fc": "cuda:0"})
    with pytest.raises(ExecutionError, match="does not have"):
        runtime.prepare(mlp_model(), placement={"ghost": "cpu"})


# ------------------------------------------------------------------------------------------
# Bounds before anything is built, and every failure a trama error (issue 14)
# ------------------------------------------------------------------------------------------


class Fail:
    """A kernel that raises what a framework might: ``MemoryError`` (without a message),
    ``RecursionError``, anything."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        raise self.error


class FailingRuntime(FakeRuntime):
    """The test runtime with a ``t.Fail`` op whose kernel raises ``error``."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def registry(self) -> OpRegistry:
        ops = registry()
        ops.register(OpSpec("t.Fail", ("x",), ("y",), factory=lambda node, **_: Fail(self.error)))
        return ops


class NothingBuilt(FakeRuntime):
    """Fails the test if the model gets as far as the registry (where building starts)."""

    def registry(self) -> OpRegistry:
        raise AssertionError("the runtime started building a model it should have refused")


def test_a_fact_beyond_the_bound_is_refused_before_anything_is_built() -> None:
    model = block_model()
    model.input_facts = [ValueFact("float32", ("batch", 10**12, 10**12))]
    with pytest.raises(
        ExecutionError, match=r"input 'x' is declared with a shape of .* more than 2\*\*48 bytes"
    ) as info:
        NothingBuilt().prepare(model)
    assert info.value.location == "/input_facts/0"
    model.input_facts = [ValueFact("float32", ("batch", 2**46))]  # 2**48 bytes: the bound itself
    FakeRuntime().prepare(model)


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (MemoryError(), "t.Fail failed: MemoryError"),
        (MemoryError("Unable to allocate 8.00 TiB"), "t.Fail failed: MemoryError: Unable to allocate 8.00 TiB"),
        (RecursionError("maximum recursion depth exceeded"), "t.Fail failed: RecursionError: maximum recursion"),
        (OverflowError("Python int too large"), "t.Fail failed: OverflowError: Python int too large"),
    ],
)
def test_what_a_kernel_raises_is_an_execution_error_naming_the_node_and_op(error: BaseException, message: str) -> None:
    model = Model(["x"], [Ref("f", "y")], [leaf("f", "t.Fail", {"x": Ref(INPUT, "x")})], {})
    runnable = FailingRuntime(error).prepare(model)
    with pytest.raises(ExecutionError, match=message) as info:
        runnable.run([np.ones(2)])
    assert info.value.node_id == "f"
    assert info.value.__cause__ is error


def test_an_input_the_runtime_cannot_convert_is_an_execution_error_naming_it() -> None:
    runnable = FakeRuntime().prepare(block_model())
    with pytest.raises(ExecutionError, match=r"converting input 'x' failed: ValueError") as info:
        runnable.run({"x": "not a number"})
    assert info.value.node_id is None


def test_what_preparing_raises_outside_a_factory_is_an_execution_error() -> None:
    class BrokenRegistry(FakeRuntime):
        def registry(self) -> OpRegistry:
            raise MemoryError

    with pytest.raises(ExecutionError, match="preparing the model failed: MemoryError"):
        BrokenRegistry().prepare(block_model())


def test_a_trama_error_passes_through_unchanged() -> None:
    original = ExecutionError("as it was", node_id="somewhere")
    model = Model(["x"], [Ref("f", "y")], [leaf("f", "t.Fail", {"x": Ref(INPUT, "x")})], {})
    with pytest.raises(ExecutionError) as info:
        FailingRuntime(original).prepare(model).run([np.ones(2)])
    assert info.value is original
