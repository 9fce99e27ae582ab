"""Leaves whose settings are sizes read from the inputs: built per binding, and the hook that
lets a framework run them.

A node with a ``SizeExpr`` setting is built for the sizes of each run
(:class:`trama.conversion.SizedNode`): its factory sees numbers only, what it built for one set
of sizes is kept, a symbol no input binds is a clear error, and so is asking for it outside a
run. A framework says how it runs such nodes with ``trama_sized_leaf``; one that does not cannot
import them, and says so.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from test_plugins import FakeEntryPoint, acme_plugin

import trama
from trama import INPUT, Model, Node, Parameter, Ref, SizeExpr, ValueFact
from trama.conversion import SizedNode, build_node
from trama.execution import bound_sizes
from trama.extension import PluginHost, PluginLoadWarning, hookimpl, reset_plugins


def positions(end: str = "seq + 1") -> Model:
    """``arange(seq + 1)`` beside an input ``[batch, seq]``, and the input doubled."""
    return Model(
        inputs=["x"],
        outputs=[Ref("r", "y"), Ref("twice", "y")],
        nodes=[
            Node("r", "arange", {}, ["y"], {"end": "r.end"}),
            Node("twice", "mul", {"x": Ref(INPUT, "x")}, ["y"], {"other": "twice.other"}),
        ],
        parameters={"r.end": Parameter(SizeExpr.parse(end)), "twice.other": Parameter(2.0)},
        input_facts=[ValueFact("float32", ("batch", "seq"))],
    )


@pytest.mark.parametrize("runtime", ["numpy", "torch:cpu", "jax:cpu"])
def test_a_sized_leaf_follows_each_runs_sizes(runtime: str) -> None:
    runnable = trama.runtime_for_name(runtime).prepare(positions())
    for seq in (1, 4, 9, 4):
        arange, twice = runnable.run([np.ones((2, seq), np.float32)])
        np.testing.assert_array_equal(np.asarray(arange), np.arange(seq + 1))
        np.testing.assert_array_equal(np.asarray(twice), np.full((2, seq), 2.0, np.float32))


def test_a_sized_node_builds_once_per_binding_with_numbers_only() -> None:
    seen: list[Any] = []
    registry = trama.registry("numpy")
    model = positions("max(seq, 2) * batch")
    node = model.nodes[0]
    parameters = {slot: model.parameters[key] for slot, key in node.parameters.items()}

    def build(
        node: Node, registry: trama.OpRegistry, parameters: dict[str, Parameter], example: dict[str, Parameter] | None
    ) -> Any:
        seen.append(parameters["end"].value)
        return object()

    sized = SizedNode(node, registry, parameters, build)
    assert sized.symbols == ("batch", "seq")
    first = sized.build({"batch": 3, "seq": 1})
    assert sized.build({"batch": 3, "seq": 1}) is first
    sized.build({"batch": 3, "seq": 5})
    assert seen == [6, 15]
    assert parameters["end"].value == SizeExpr.parse("max(seq, 2) * batch")  # the document is untouched


def test_a_sized_node_outside_a_run_or_missing_a_symbol_is_a_clear_error() -> None:
    model = positions("seq // batch")
    node = model.nodes[0]
    parameters = {slot: model.parameters[key] for slot, key in node.parameters.items()}
    sized = SizedNode(node, trama.registry("numpy"), parameters, lambda *_: object())
    with pytest.raises(trama.ExecutionError, match=r"depend on the input sizes \(batch, seq\).*known only in a run"):
        sized.current()
    with pytest.raises(trama.ExecutionError, match=r"read 'batch', which no input fact binds"):
        sized.build({"seq": 3})
    with bound_sizes({"seq": 3, "batch": 0}), pytest.raises(trama.ExecutionError, match="divides by zero"):
        SizedNode(node, trama.registry("numpy"), parameters, lambda *_: object()).current()


def test_the_catalog_checks_the_numbers_each_binding_gives() -> None:
    """``arange`` refuses a step of 0: a size that evaluates to 0 is refused when the node is
    built for that binding, by the catalog's own check, as a written 0 would be at import."""
    model = positions()
    model.nodes[0].parameters["step"] = "r.step"
    model.parameters["r.step"] = Parameter(SizeExpr.parse("seq - 3"))
    runnable = trama.runtime_for_name("numpy").prepare(model)
    np.testing.assert_array_equal(runnable.run([np.ones((1, 5), np.float32)])[0], [0, 2, 4])
    with pytest.raises(trama.RegistryError, match="step"):
        runnable.run([np.ones((1, 3), np.float32)])


def test_validation_checks_a_sized_node_at_a_sample_size_in_its_range() -> None:
    """``trama validate`` (``import_checks``) builds no node, so it checks a sized node's settings
    as a run would build them at one sample size within each symbol's range: an expression the
    catalog refuses there is reported, one it accepts passes."""
    from trama.catalog import import_checks

    good = positions()
    assert import_checks(good, trama.registry(None)).errors == []
    bad = positions()
    bad.nodes[0].parameters["step"] = "r.step"
    bad.parameters["r.step"] = Parameter(SizeExpr.parse("seq - seq"))
    (error,) = import_checks(bad, trama.registry(None)).errors
    assert error.node_id == "r"
    assert "step" in error.message


def test_a_framework_without_the_hook_cannot_import_sizes_and_says_so() -> None:
    registry = trama.OpRegistry(trama.registry("numpy"), framework="numpy")
    model = positions()
    node = model.nodes[0]
    parameters = {slot: model.parameters[key] for slot, key in node.parameters.items()}
    with pytest.raises(trama.ImportModelError, match=r"depend on the input sizes \(seq\).*builds no node per run"):
        build_node(node, registry, children={}, parameters=parameters)


def test_the_installed_frameworks_answer_the_hook() -> None:
    for framework in ("numpy", "torch", "jax"):
        assert callable(trama.registry(framework).sized), framework
    assert trama.registry(None).sized is None


class _Plugin:
    pass


def _sized_plugin(answer: Any) -> _Plugin:
    def trama_frameworks() -> Sequence[str]:
        return ["acme-fw"]

    def trama_sized_leaf(framework: str) -> Any:
        return answer if framework == "acme-fw" else None

    plugin = _Plugin()
    plugin.trama_frameworks = hookimpl(trama_frameworks)  # type: ignore[attr-defined]
    plugin.trama_sized_leaf = hookimpl(trama_sized_leaf)  # type: ignore[attr-defined]
    return plugin


def test_a_hook_answer_that_cannot_be_called_is_reported_and_not_used() -> None:
    host = PluginHost(
        [
            FakeEntryPoint("acme", "trama-acme", acme_plugin(frameworks=("acme-fw",))),
            FakeEntryPoint("fw", "trama-fw", _sized_plugin("not callable")),
        ],
        include_core=False,
    )
    with pytest.warns(PluginLoadWarning, match="trama_sized_leaf for 'acme-fw' gave str, which cannot be called"):
        registry = host.registry("acme-fw")
    assert registry.sized is None


def test_the_hooks_wrapper_is_what_a_sized_node_becomes() -> None:
    made: list[SizedNode] = []

    def wrap(sized: SizedNode) -> Mapping[str, Any]:
        made.append(sized)
        return {"wrapped": sized.node.id}

    host = PluginHost(
        [
            FakeEntryPoint("acme", "trama-acme", acme_plugin(frameworks=("acme-fw",))),
            FakeEntryPoint("fw", "trama-fw", _sized_plugin(wrap)),
        ],
        include_core=False,
    )
    registry = host.registry("acme-fw")
    assert registry.sized is wrap
    spec = trama.OpSpec("acme.Grow", outputs=("y",), parameters=(trama.ParameterSchema("n", ("int",)),))
    registry.register(spec)
    node = Node("g", "acme.Grow", {}, ["y"], {"n": "g.n"})
    built = build_node(node, registry, children={}, parameters={"n": Parameter(SizeExpr.parse("seq"))})
    assert built == {"wrapped": "g"}
    assert made[0].sized_slots == ("n",)


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    reset_plugins()
    yield
    reset_plugins()
