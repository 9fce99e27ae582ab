"""Discovery is cheap: ``import trama; trama.registry("numpy")`` imports neither numpy nor
ml_dtypes, jsonschema, a framework or a kernel module, and the registry it gives is the one an
eager process gets. The first tensor, document read or kernel loads what it needs.

What a process imports can only be seen in a fresh one: each case runs its own interpreter
(this one has imported everything long ago), without ``TRAMA_PLUGINS``, so that every installed
plugin is discovered as a user's program would discover it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

import trama
from trama.extension import DeferredFactory

#: What discovery must not import: the array stack, the schema checker, every framework.
HEAVY = ("numpy", "ml_dtypes", "jsonschema", "torch", "jax", "jaxlib")
#: trama-numpy's kernel modules, which import numpy at the top.
KERNEL_MODULES = ("trama_numpy._registry", "trama_numpy.layers", "trama_numpy.functions", "trama_numpy.runtime")


def run_fresh(code: str) -> Any:
    """Run ``code`` in a fresh interpreter and return the JSON it prints on its last line."""
    env = {key: value for key, value in os.environ.items() if key != "TRAMA_PLUGINS"}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


#: Prints what the numpy registry holds and which modules the process has imported by then.
#: ``PRELUDE`` runs first: nothing (a lazy process) or an eager load of numpy and the kernels.
REGISTRY_PROBE = """
    import json, sys
    {prelude}
    import trama
    registry = trama.registry("numpy")
    factories = {{spec.name: spec.factory for spec in registry if spec.factory is not None}}
    imported = sorted(name for name in {watched!r} if name in sys.modules)
    real = {{}}
    if "trama_numpy._registry" in sys.modules:  # the eager process: which factory each op gets
        table = sys.modules["trama_numpy._registry"].implementations()
        for name, factory in factories.items():
            resolved = factory.resolve() if hasattr(factory, "resolve") else factory
            real[name] = resolved is table[name] if name in table else None
    print(json.dumps({{
        "ops": sorted(spec.name for spec in registry),
        "implemented": sorted(factories),
        "imported": imported,
        "real": real,
    }}))
"""


def probe_registry(prelude: str = "") -> dict[str, Any]:
    result: dict[str, Any] = run_fresh(
        REGISTRY_PROBE.format(prelude=prelude, watched=(*HEAVY, *KERNEL_MODULES, "trama_numpy.plugin"))
    )
    return result


def test_discovering_the_numpy_registry_imports_no_numpy_no_schema_checker_no_framework() -> None:
    lazy = probe_registry()
    assert lazy["imported"] == ["trama_numpy.plugin"]  # the plugin was found, nothing it serves loaded
    assert "Linear" in lazy["implemented"]


def test_the_lazy_registry_holds_what_an_eager_process_gets() -> None:
    """The same op names and the same implemented ops as a process that imported numpy and
    trama-numpy's whole kernel table before asking; there, every numpy op's factory stands for
    the very function of the kernel table."""
    lazy = probe_registry()
    eager = probe_registry("import numpy, trama_numpy._registry; trama_numpy._registry.implementations()")
    assert "numpy" in eager["imported"]  # the comparison is with a process that did load everything
    assert lazy["ops"] == eager["ops"]
    assert lazy["implemented"] == eager["implemented"]
    assert len(lazy["implemented"]) == len(eager["implemented"]) > 200
    numpy_ops = {name: same for name, same in eager["real"].items() if same is not None}
    assert len(numpy_ops) > 200
    assert all(numpy_ops.values()), sorted(name for name, same in numpy_ops.items() if not same)


def test_the_numpy_plugin_lists_exactly_the_ops_its_table_implements() -> None:
    """The plugin names its ops without importing the kernels; the real table must agree, or a
    listed op would fail when built and an implemented one would be missing from the registry."""
    from trama_numpy._registry import implementations
    from trama_numpy.plugin import leaf_op_names

    assert sorted(leaf_op_names()) == sorted(implementations())


def test_a_numpy_registry_factory_resolves_to_the_kernel_tables_own() -> None:
    from trama_numpy import layers

    factory = trama.registry("numpy")["Linear"].factory
    assert isinstance(factory, DeferredFactory)
    assert factory.resolve() is layers.linear


def test_touching_a_tensor_loads_numpy_and_running_a_model_loads_the_kernels() -> None:
    weight = np.arange(6, dtype=np.float32).reshape(2, 3)
    node = trama.Node(
        "lin",
        "Linear",
        {"x": trama.Ref(trama.INPUT, "x")},
        ["y"],
        {"weight": "lin.weight", "in_features": "lin.in", "out_features": "lin.out"},
    )
    model = trama.Model(
        ["x"],
        [trama.Ref("lin", "y")],
        [node],
        {
            "lin.weight": trama.Parameter(trama.Tensor.from_array(weight), learnable=True),
            "lin.in": trama.Parameter(3),
            "lin.out": trama.Parameter(2),
        },
    )
    text = trama.dumps(model)
    x = [[1.0, -2.0, 0.5]]
    result = run_fresh(
        f"""
        import json, sys
        import trama
        trama.registry("numpy")
        watched = {(*HEAVY, *KERNEL_MODULES)!r}
        before = sorted(name for name in watched if name in sys.modules)
        model = trama.loads({text!r})
        import numpy as np
        weight = np.asarray(model.parameters["lin.weight"].value)
        after_tensor = sorted(name for name in watched if name in sys.modules)
        (y,) = trama.runtime_for_name("numpy").prepare(model).run([np.asarray({x!r}, dtype=np.float32)])
        after_run = sorted(name for name in watched if name in sys.modules)
        print(json.dumps({{
            "before": before, "after_tensor": after_tensor, "after_run": after_run,
            "weight": weight.tolist(), "dtype": str(weight.dtype), "y": np.asarray(y).tolist(),
        }}))
        """
    )
    assert result["before"] == []
    assert {"numpy", "ml_dtypes"} <= set(result["after_tensor"])
    assert not set(result["after_tensor"]) & {"torch", "jax", "jaxlib", *KERNEL_MODULES}
    assert (result["weight"], result["dtype"]) == (weight.tolist(), "float32")
    assert {"trama_numpy._registry", "trama_numpy.layers", "trama_numpy.runtime"} <= set(result["after_run"])
    np.testing.assert_allclose(result["y"], np.asarray(x, dtype=np.float32) @ weight.T, rtol=1e-6)


def test_every_public_name_resolves_in_a_fresh_process_to_its_defining_object() -> None:
    """``trama.X`` (and ``trama.format.X``, ...) imported on first use is the very object its
    module defines, for every name in ``__all__``; subpackages are there as attributes after a
    bare ``import trama``; ``__version__`` is the installed distribution's."""
    result = run_fresh(
        """
        import importlib, json
        import trama
        faces = ("trama", "trama.format", "trama.catalog", "trama.conversion")
        format_ok = trama.format.__name__ == "trama.format"  # a subpackage, read before any import of it
        missing = []
        for face in faces:
            module = importlib.import_module(face)
            for name in module.__all__:
                try:
                    getattr(module, name)
                except AttributeError:
                    missing.append(f"{face}.{name}")
                    continue
                if name not in dir(module):
                    missing.append(f"dir({face}) lacks {name}")
        print(json.dumps({"missing": missing, "format_ok": format_ok, "version": trama.__version__}))
        """
    )
    assert result["missing"] == []
    assert result["format_ok"]
    assert result["version"] == importlib.metadata.version("trama")
    # In this process, where everything is imported: the names are the defining modules' objects.
    from trama.format import _serialization, _tensor

    assert trama.Tensor is _tensor.Tensor
    assert trama.load is trama.format.load is _serialization.load
    assert trama.registry is trama.extension.registry


@pytest.mark.parametrize("face", ["trama", "trama.format", "trama.catalog", "trama.conversion", "trama.version"])
def test_an_unknown_name_is_still_an_attribute_error(face: str) -> None:
    module = importlib.import_module(face)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        module.no_such_name  # noqa: B018
    assert not hasattr(module, "Tensr")


def test_the_catalog_specs_taken_as_they_are_are_what_the_contract_check_would_return() -> None:
    """Discovery uses trama's own catalog specs without copying them through ``checked_spec``:
    that is only sound while each is a plain spec the check would return unchanged."""
    from trama.catalog import standard_specs
    from trama.extension._contracts import ContractError, checked_spec
    from trama.extension._plugins import _own_spec

    for spec in standard_specs():
        assert (type(spec), spec.factory) == (trama.OpSpec, None), spec.name
        checked = checked_spec(spec)
        assert (checked, checked.doc) == (spec, spec.doc), spec.name
        assert _own_spec(spec) is spec
    with pytest.raises(ContractError, match="not an OpSpec"):
        _own_spec(42)  # anything else is still checked


def test_names_and_versions_read_from_metadata_headers_agree_with_importlib_metadata() -> None:
    """Discovery reads a distribution's name from its folder and its ``Name:`` header instead of
    parsing its metadata: for every installed distribution that gives what parsing gives."""
    import importlib_metadata

    from trama.extension._plugins import _metadata_field, _name_key, _normalized

    distributions = list(importlib_metadata.distributions())
    assert len(distributions) > 10
    for dist in distributions:
        assert _metadata_field(dist, "Name") == dist.name
        assert _metadata_field(dist, "Version") == dist.version
        assert _name_key(dist) == _normalized(dist.name)


@pytest.mark.parametrize(
    ("default", "kept"),
    [
        (None, None),
        ([1, 2.5, "same", None, [True]], [1, 2.5, "same", None, [True]]),
        ((1, 1), [1, 1]),  # as a document holds it
    ],
)
def test_a_plugin_slot_default_is_kept_as_a_plain_json_value(default: object, kept: object) -> None:
    from trama.extension._contracts import checked_spec

    spec = trama.OpSpec("acme.Op", parameters=(trama.ParameterSchema("k", ("any",), optional=True, default=default),))
    assert checked_spec(spec).parameters[0].default == kept


@pytest.mark.parametrize(
    "default",
    [object(), float("nan"), {"a": 1}, [[[[[[[[[[1]]]]]]]]]], list(range(10_000))],
    ids=["object", "nan", "dict", "deep", "long"],
)
def test_a_plugin_slot_default_that_is_no_small_json_value_is_refused(default: object) -> None:
    from trama.extension._contracts import ContractError, checked_spec

    spec = trama.OpSpec("acme.Op", parameters=(trama.ParameterSchema("k", ("any",), optional=True, default=default),))
    with pytest.raises(ContractError, match="slot 'k' default"):
        checked_spec(spec)
