"""Discovery: what installed plugins contribute, and how their mistakes are reported.

Plugins are given to :class:`trama.extension._plugins.PluginHost` as fake entry points (objects with the
``name``, ``dist`` and ``load()`` of ``importlib.metadata`` entry points), so each test controls
exactly what is "installed".
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import trama
from trama import NodeFragment, OpSpec, ParameterSchema, RegistryError
from trama.extension import PluginHost, PluginLoadWarning, hookimpl, reset_plugins
from trama.tools import main


class FakeEntryPoint:
    def __init__(self, name: str, distribution: str, plugin: Any, version: str = "1.2.3") -> None:
        self.name = name
        self.dist = SimpleNamespace(name=distribution, version=version)
        self._plugin = plugin

    def load(self) -> Any:
        if isinstance(self._plugin, BaseException):
            raise self._plugin
        return self._plugin


def scale_spec(name: str = "acme.Scale", factor_type: str = "float") -> OpSpec:
    return OpSpec(name, inputs=("x",), outputs=("y",), parameters=(ParameterSchema("factor", (factor_type,)),))


class Scale:
    """A module of the fake 'acme' framework, exported by the plugin's exporter."""

    def __init__(self, factor: float) -> None:
        self.factor = factor

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return x * self.factor


def scale_factory(node: trama.Node, *, children: Mapping[str, Any], parameters: Mapping[str, trama.Parameter]) -> Scale:
    value = parameters["factor"].value
    assert isinstance(value, float)
    return Scale(value)


def export_scale(obj: Any, ctx: trama.ExportContext) -> NodeFragment | None:
    if not isinstance(obj, Scale):
        return None
    return NodeFragment(op="acme.Scale", outputs=["y"], parameters={"factor": obj.factor})


def acme_plugin(spec: OpSpec | None = None, frameworks: Sequence[str] = ("numpy",), *, owner: bool = True) -> Any:
    """A plugin module with every hook, for the 'acme' namespace (declared only if ``owner``)."""

    @hookimpl
    def trama_op_specs() -> Sequence[OpSpec]:
        return [spec or scale_spec()]

    @hookimpl
    def trama_opsets() -> Mapping[str, int]:
        return {"acme": 3} if owner else {}

    @hookimpl
    def trama_frameworks() -> Sequence[str]:
        return list(frameworks)

    @hookimpl
    def trama_op_implementations(framework: str) -> Mapping[str, Any] | None:
        return {"acme.Scale": scale_factory} if framework in frameworks else None

    @hookimpl
    def trama_exporters(framework: str) -> Sequence[Any] | None:
        return [export_scale] if framework in frameworks else None

    return SimpleNamespace(
        trama_op_specs=trama_op_specs,
        trama_opsets=trama_opsets,
        trama_frameworks=trama_frameworks,
        trama_op_implementations=trama_op_implementations,
        trama_exporters=trama_exporters,
    )


@pytest.fixture
def install() -> Iterator[Any]:
    """Make a host of the given entry points the process-wide one for the test."""

    def use(*entry_points: FakeEntryPoint, include_core: bool = True) -> PluginHost:
        host = PluginHost(list(entry_points), include_core=include_core)
        reset_plugins(host)
        return host

    yield use
    reset_plugins()


def test_a_plugin_contributes_specs_factories_and_exporters() -> None:
    host = PluginHost([FakeEntryPoint("acme", "trama-acme", acme_plugin())], include_core=False)
    numpy_registry = host.registry("numpy")
    spec = numpy_registry.get("acme.Scale")
    assert spec is not None
    assert spec.factory is scale_factory
    assert export_scale in numpy_registry.exporters
    neutral = host.registry(None).get("acme.Scale")
    assert neutral is not None
    assert neutral.factory is None
    assert host.frameworks() == ["numpy"]
    assert host.opsets() == {"acme": 3}
    assert host.coverage() == {"numpy": frozenset({"acme.Scale"})}


def test_registries_are_built_once_per_framework() -> None:
    host = PluginHost([FakeEntryPoint("acme", "trama-acme", acme_plugin())], include_core=False)
    assert host.registry("numpy") is host.registry("numpy")


def test_a_plugin_that_fails_to_import_is_reported_and_the_others_still_load() -> None:
    broken = FakeEntryPoint("broken", "trama-broken", ImportError("No module named 'scipy'"), version="0.9")
    with pytest.warns(PluginLoadWarning, match=r"trama-broken 0\.9: import failed: ImportError: No module named"):
        host = PluginHost([broken, FakeEntryPoint("acme", "trama-acme", acme_plugin())], include_core=False)
    assert "acme.Scale" in host.registry("numpy")
    infos = {info.distribution: info for info in host.plugins()}
    assert infos["trama-broken"].errors == ("import failed: ImportError: No module named 'scipy'",)
    assert infos["trama-broken"].hooks == ()
    assert infos["trama-acme"].errors == ()
    assert "trama_op_specs" in infos["trama-acme"].hooks


def test_two_distributions_specifying_one_op_differently_leave_that_op_out_and_nothing_else() -> None:
    host = PluginHost(
        [
            FakeEntryPoint("acme", "trama-acme", acme_plugin(owner=False)),  # nobody owns 'acme'
            FakeEntryPoint("other", "trama-other", acme_plugin(scale_spec(factor_type="int"), owner=False)),
        ]
    )
    conflict = r"op 'acme.Scale' is specified differently by 'trama-acme' and 'trama-other'"
    with pytest.warns(PluginLoadWarning, match=conflict):
        neutral = host.registry(None)
    assert "acme.Scale" not in neutral  # neither spec is guessed to be the right one
    assert "Linear" in neutral  # everything else is there
    with pytest.raises(RegistryError, match=conflict):
        neutral["acme.Scale"]  # the registry says why the op is missing, and so does validation
    document = trama.Model(
        ["x"], [trama.Ref("s", "y")], [trama.Node("s", "acme.Scale", {"x": trama.Ref(trama.INPUT, "x")}, ["y"])], {}
    )
    assert any(re.search(conflict, error.message) for error in trama.collect_errors(document, neutral))
    numpy_registry = host.registry("numpy")  # their implementations of the op are dropped silently
    assert "acme.Scale" not in numpy_registry
    infos = {info.distribution: info for info in host.plugins()}
    for distribution in ("trama-acme", "trama-other"):
        assert any(re.search(conflict, error) for error in infos[distribution].errors)


def test_two_distributions_implementing_one_op_for_a_framework_make_only_that_op_unbuildable() -> None:
    host = PluginHost(
        [
            FakeEntryPoint("acme", "trama-acme", acme_plugin(owner=False)),
            FakeEntryPoint("again", "trama-again", acme_plugin(owner=False)),
        ],
        include_core=False,
    )
    assert "acme.Scale" in host.registry(None)  # the specs agree
    both = "implemented for numpy by both 'trama-acme' and 'trama-again'"
    with pytest.warns(PluginLoadWarning, match=both):
        numpy_registry = host.registry("numpy")  # two factories for one op is ambiguous...
    model = trama.export_model(Scale(2.0), inputs=["x"], outputs=["y"], registry=numpy_registry)
    with pytest.raises(RegistryError, match=both) as caught:
        trama.import_model(model, registry=numpy_registry)  # ...so building that op says so
    assert caught.value.node_id == "root"
    assert host.coverage() == {"numpy": frozenset()}  # and no framework claims it


def test_third_party_names_must_be_namespaced() -> None:
    plugin = acme_plugin(scale_spec(name="Scale"))
    host = PluginHost([FakeEntryPoint("acme", "trama-acme", plugin)], include_core=False)
    with pytest.warns(PluginLoadWarning, match="op 'Scale' refused: names without a namespace belong to"):
        assert "Scale" not in host.registry(None)
    with pytest.warns(PluginLoadWarning, match="numpy': implements 'acme.Scale', but no plugin specifies that op"):
        (info,) = host.plugins()
    assert any("'Scale' refused" in error for error in info.errors)


def test_an_implementation_without_a_spec_is_reported() -> None:
    @hookimpl
    def trama_frameworks() -> Sequence[str]:
        return ["numpy"]

    @hookimpl
    def trama_op_implementations(framework: str) -> Mapping[str, Any]:
        return {"ghost.Op": scale_factory}

    plugin = SimpleNamespace(trama_frameworks=trama_frameworks, trama_op_implementations=trama_op_implementations)
    host = PluginHost([FakeEntryPoint("ghost", "trama-ghost", plugin)], include_core=False)
    with pytest.warns(
        PluginLoadWarning,
        match="trama_op_implementations for 'numpy': implements 'ghost.Op', but no plugin specifies that op",
    ):
        assert "ghost.Op" not in host.registry("numpy")


def test_a_hook_that_raises_is_reported_not_propagated() -> None:
    @hookimpl
    def trama_op_specs() -> Sequence[OpSpec]:
        raise RuntimeError("boom")

    host = PluginHost(
        [
            FakeEntryPoint("bad", "trama-bad", SimpleNamespace(trama_op_specs=trama_op_specs)),
            FakeEntryPoint("acme", "trama-acme", acme_plugin()),
        ],
        include_core=False,
    )
    with pytest.warns(PluginLoadWarning, match="trama_op_specs failed: RuntimeError: boom"):
        assert "acme.Scale" in host.registry(None)


def test_an_unknown_framework_lists_the_known_ones() -> None:
    host = PluginHost([FakeEntryPoint("acme", "trama-acme", acme_plugin())], include_core=False)
    with pytest.raises(
        RegistryError, match=r"no installed plugin implements ops for framework 'mxnet' \(known: numpy\)"
    ):
        host.registry("mxnet")


def test_standard_frameworks_always_have_a_registry() -> None:
    host = PluginHost([])
    torch_registry = host.registry("torch")
    assert torch_registry.framework == "torch"
    linear = torch_registry.get("Linear")
    assert linear is not None
    assert linear.factory is None


def test_export_and_import_use_the_discovered_registry_when_none_is_passed(install: Any) -> None:
    install(FakeEntryPoint("acme", "trama-acme", acme_plugin()))
    model = trama.export_model(Scale(2.5), inputs=["x"], outputs=["y"])
    assert model.nodes[0].op == "acme.Scale"
    assert model.opsets == {"acme": 3}
    rebuilt = trama.import_model(trama.loads(trama.dumps(model)))
    assert isinstance(rebuilt, Scale)
    assert rebuilt.factor == 2.5


def test_an_explicit_registry_still_wins(install: Any) -> None:
    install(FakeEntryPoint("acme", "trama-acme", acme_plugin()))
    model = trama.export_model(Scale(2.0), inputs=["x"], outputs=["y"])

    def other_factory(node: trama.Node, **_: Any) -> str:
        return "built by hand"

    explicit = trama.OpRegistry(
        [OpSpec("acme.Scale", ("x",), ("y",), (ParameterSchema("factor", ("float",)),), factory=other_factory)]
    )
    assert trama.import_model(model, registry=explicit) == "built by hand"


def test_import_uses_the_framework_named_in_the_metadata(install: Any) -> None:
    install(FakeEntryPoint("acme", "trama-acme", acme_plugin(frameworks=("acme",))))
    model = trama.export_model(Scale(1.5), inputs=["x"], outputs=["y"], metadata={"framework": {"name": "acme"}})
    assert isinstance(trama.import_model(model), Scale)
    model.metadata["framework"] = {"name": "numpy"}  # a standard framework nobody implements here
    with pytest.raises(RegistryError, match=r"'acme\.Scale' has no implementation for numpy"):
        trama.import_model(model)
    model.metadata["framework"] = {"name": "mxnet"}
    with pytest.raises(RegistryError, match="framework 'mxnet'"):
        trama.import_model(model)


def test_trama_plugins_lists_distributions_hooks_and_errors(install: Any, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.warns(PluginLoadWarning):
        install(
            FakeEntryPoint("acme", "trama-acme", acme_plugin()),
            FakeEntryPoint("broken", "trama-broken", ImportError("nope")),
        )
    assert main(["plugins"]) == 1
    out = capsys.readouterr().out
    assert "trama-acme 1.2.3  (entry point 'acme')" in out
    assert "trama_exporters, trama_frameworks, trama_op_implementations, trama_op_specs, trama_opsets" in out
    assert "trama-broken 1.2.3" in out
    assert "error: import failed: ImportError: nope" in out


def test_trama_ops_shows_signatures_and_coverage(install: Any, capsys: pytest.CaptureFixture[str]) -> None:
    install(FakeEntryPoint("acme", "trama-acme", acme_plugin()), include_core=False)
    assert main(["ops"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["op", "numpy", "signature"]
    assert lines[1].split()[:2] == ["acme.Scale", "yes"]
    assert "(x) -> (y) {factor: float}" in lines[1]


def test_discovery_imports_no_framework() -> None:
    code = (
        "import sys, trama\n"
        "trama.registry(None)\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'jax', 'jaxlib', 'tensorflow'}))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_a_misspelled_hook_is_reported() -> None:
    @hookimpl
    def trama_opset() -> Mapping[str, int]:  # missing 's'
        return {"acme": 1}

    with pytest.warns(PluginLoadWarning, match=r"implements unknown hook\(s\) \['trama_opset'\]"):
        host = PluginHost([FakeEntryPoint("typo", "trama-typo", SimpleNamespace(trama_opset=trama_opset))])
    info = next(info for info in host.plugins() if info.distribution == "trama-typo")
    assert info.hooks == ()
    assert "unknown hook" in info.errors[0]


def test_a_namespace_belongs_to_one_distribution() -> None:
    @hookimpl
    def trama_opsets() -> Mapping[str, int]:
        return {"trama": 99, "acme": 2}

    host = PluginHost(
        [
            FakeEntryPoint("acme", "trama-acme", acme_plugin()),
            FakeEntryPoint("squat", "trama-squat", SimpleNamespace(trama_opsets=trama_opsets)),
        ]
    )
    with pytest.warns(PluginLoadWarning) as caught:
        opsets = host.opsets()
    assert opsets["acme"] == 3
    assert opsets["trama"] != 99
    messages = [str(w.message) for w in caught]
    assert any("opset 'trama' refused: it belongs to 'trama'" in m for m in messages)
    assert any("opset 'acme' refused: it belongs to 'trama-acme'" in m for m in messages)


def test_trama_plugins_reports_conflicting_specs_instead_of_crashing(
    install: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    install(
        FakeEntryPoint("acme", "trama-acme", acme_plugin(owner=False)),  # nobody owns 'acme'
        FakeEntryPoint("other", "trama-other", acme_plugin(scale_spec(factor_type="int"), owner=False)),
        include_core=False,
    )
    assert main(["plugins"]) == 1
    out = capsys.readouterr().out
    conflict = "error: trama_op_specs: op 'acme.Scale' is specified differently by 'trama-acme' and 'trama-other'"
    assert out.count(conflict) == 2  # under each of the two


def test_ops_in_a_namespace_belong_to_its_owner() -> None:
    host = PluginHost(
        [
            FakeEntryPoint("acme", "trama-acme", acme_plugin()),
            FakeEntryPoint("squat", "trama-squat", acme_plugin(scale_spec(factor_type="int"), frameworks=())),
        ],
        include_core=False,
    )
    with pytest.warns(PluginLoadWarning) as caught:
        spec = host.registry(None).get("acme.Scale")
    assert spec is not None
    assert spec.parameters[0].types == ("float",)  # the owner's, not the squatter's
    assert any(
        "op 'acme.Scale' refused: the namespace 'acme' belongs to 'trama-acme'" in str(w.message) for w in caught
    )


def test_trama_plugins_reports_errors_of_every_hook(install: Any, capsys: pytest.CaptureFixture[str]) -> None:
    install(
        FakeEntryPoint("acme", "trama-acme", acme_plugin(owner=False)),
        FakeEntryPoint("again", "trama-again", acme_plugin(owner=False)),
        include_core=False,
    )
    assert main(["plugins"]) == 1
    out = capsys.readouterr().out
    assert out.count("implemented for numpy by both 'trama-acme' and 'trama-again'") == 2  # under each of the two
