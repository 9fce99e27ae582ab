"""trama-jax's plugin: cheap to discover, and its deferred table is the real one."""

from __future__ import annotations

import json
import subprocess
import sys

from trama.catalog import standard_specs
from trama_jax._registry import implementations


def test_the_real_table_implements_exactly_the_catalog() -> None:
    assert set(implementations()) == {spec.name for spec in standard_specs()}


def test_listing_plugins_and_the_jax_table_does_not_import_jax() -> None:
    probe = (
        "import json, sys, trama\n"
        "from trama.extension._plugins import plugin_host\n"
        "plugin_host().plugins()\n"
        "names = trama.registry('jax').names()\n"
        "print(json.dumps({'ops': len(names), 'jax': 'jax' in sys.modules}))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    facts = json.loads(result.stdout)
    assert facts["jax"] is False
    assert facts["ops"] >= len(standard_specs())


# --- A pack's JAX factory takes the same path as trama-jax's own ------------------------------


def _pack_entry_point() -> object:
    """A third-party pack, as a fake entry point: ``pack.Scale`` (y = x * weight), whose JAX
    factory returns a public :class:`trama_jax.JaxKernel` and nothing else."""
    from collections.abc import Mapping, Sequence
    from types import SimpleNamespace
    from typing import Any

    from trama import OpSpec, ParameterSchema
    from trama.extension import hookimpl

    def build_scale(node: Any, *, children: Mapping[str, Any], parameters: Mapping[str, Any]) -> Any:
        from trama_jax import JaxKernel

        def apply(tensors: Mapping[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
            return {"y": inputs["x"] * tensors["weight"]}

        return JaxKernel(apply, tensor_slots=("weight",))

    @hookimpl
    def trama_op_specs() -> Sequence[OpSpec]:
        return [
            OpSpec("pack.Scale", inputs=("x",), outputs=("y",), parameters=(ParameterSchema("weight", ("tensor",)),))
        ]

    @hookimpl
    def trama_frameworks() -> Sequence[str]:
        return ["jax"]

    @hookimpl
    def trama_op_implementations(framework: str) -> Mapping[str, Any] | None:
        return {"pack.Scale": build_scale} if framework == "jax" else None

    module = SimpleNamespace(
        trama_op_specs=trama_op_specs,
        trama_frameworks=trama_frameworks,
        trama_op_implementations=trama_op_implementations,
    )
    return SimpleNamespace(name="pack", dist=SimpleNamespace(name="trama-pack", version="1.0"), load=lambda: module)


def test_a_packs_jax_kernel_imports_as_a_module_with_params_and_runs_on_jax_cpu() -> None:
    import importlib_metadata
    import jax
    import numpy as np

    import trama
    from trama import Model, Node, Parameter, Ref, Tensor
    from trama.extension import ENTRY_POINT_GROUP, PluginHost, reset_plugins
    from trama_jax import JaxModule

    installed = list(importlib_metadata.entry_points(group=ENTRY_POINT_GROUP))
    reset_plugins(PluginHost([*installed, _pack_entry_point()]))
    try:
        weight = np.array([1.0, -2.0, 0.5], dtype=np.float32)
        model = Model(
            inputs=["x"],
            outputs=[Ref("root", "y")],
            nodes=[Node("root", "pack.Scale", {"x": Ref("%input", "x")}, ["y"], {"weight": "w"})],
            parameters={"w": Parameter(Tensor.from_array(weight), learnable=True)},
        )
        module = trama.import_model(model, registry=trama.registry("jax"))
        assert isinstance(module, JaxModule)
        assert set(module.params) == {"w"}
        x = np.array([2.0, 3.0, 4.0], dtype=np.float32)
        y = module.apply(module.params, x)  # one output: one value
        np.testing.assert_array_equal(np.asarray(y), x * weight)
        # Differentiable in its params, as trama-jax's own ops are.
        grad = jax.grad(lambda params: module.apply(params, x).sum())(module.params)
        np.testing.assert_array_equal(np.asarray(grad["w"]), x)
        (z,) = trama.runtime_for_name("jax:cpu").prepare(model).run([x])
        np.testing.assert_array_equal(np.asarray(z), x * weight)
    finally:
        reset_plugins()


def test_a_leaf_factory_that_builds_no_kernel_is_a_clear_error() -> None:
    from trama import ImportModelError, Model, Node, OpSpec, Ref
    from trama.format import OpRegistry
    from trama_jax import build
    from trama_jax.plugin import as_jax_module

    registry = OpRegistry(
        [OpSpec("pack.Bad", inputs=("x",), outputs=("y",), factory=as_jax_module(lambda node, **_: object()))],
        framework="jax",
    )
    model = Model(
        inputs=["x"],
        outputs=[Ref("root", "y")],
        nodes=[Node("root", "pack.Bad", {"x": Ref("%input", "x")}, ["y"], {})],
        parameters={},
    )
    import pytest

    with pytest.raises(ImportModelError, match=r"built a object, not a trama_jax\.JaxKernel"):
        build(model, registry)


def test_a_packs_composite_op_imports_with_the_public_composite_factory() -> None:
    """``trama_jax.build_composite`` lets a pack's composite op import as a module that runs its
    children by its wiring (here two ``pack.Scale`` leaves in a row)."""
    from collections.abc import Mapping, Sequence
    from types import SimpleNamespace
    from typing import Any

    import importlib_metadata
    import numpy as np

    import trama
    from trama import Model, Node, OpSpec, Parameter, Ref, Tensor
    from trama.extension import ENTRY_POINT_GROUP, PluginHost, hookimpl, reset_plugins
    from trama_jax import JaxComposite, build_composite

    scale_pack = _pack_entry_point()

    @hookimpl
    def trama_op_specs() -> Sequence[OpSpec]:
        return [OpSpec("chain.Chain", inputs=("x",), outputs=("y",), composite=True)]

    @hookimpl
    def trama_op_implementations(framework: str) -> Mapping[str, Any] | None:
        return {"chain.Chain": build_composite} if framework == "jax" else None

    module = SimpleNamespace(trama_op_specs=trama_op_specs, trama_op_implementations=trama_op_implementations)
    chain_pack = SimpleNamespace(
        name="chain", dist=SimpleNamespace(name="trama-chain", version="1"), load=lambda: module
    )
    installed = list(importlib_metadata.entry_points(group=ENTRY_POINT_GROUP))
    reset_plugins(PluginHost([*installed, scale_pack, chain_pack]))
    try:
        w1, w2 = np.float32([2.0, 3.0]), np.float32([5.0, -1.0])
        model = Model(
            inputs=["x"],
            outputs=[Ref("root", "y")],
            nodes=[
                Node("root", "chain.Chain", {"x": Ref("%input", "x")}, ["y"], {}, {"y": Ref("root.b", "y")}),
                Node("root.a", "pack.Scale", {"x": Ref("%input", "x")}, ["y"], {"weight": "w1"}),
                Node("root.b", "pack.Scale", {"x": Ref("root.a", "y")}, ["y"], {"weight": "w2"}),
            ],
            parameters={
                "w1": Parameter(Tensor.from_array(w1), learnable=True),
                "w2": Parameter(Tensor.from_array(w2), learnable=True),
            },
        )
        imported = trama.import_model(model, registry=trama.registry("jax"))
        assert isinstance(imported, JaxComposite)
        assert set(imported.params) == {"w1", "w2"}
        x = np.float32([1.0, 1.0])
        np.testing.assert_array_equal(np.asarray(imported.apply(imported.params, x)), x * w1 * w2)
    finally:
        reset_plugins()
