"""Plugin contracts that must not depend on discovery order or on what happens to be installed:
exporter priority, ``TRAMA_PLUGINS`` selection, and factory adapters.

Plugins are fake entry points (see ``test_plugins.py``), so each test controls exactly what is
"installed" and in which order discovery finds it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
from test_plugins import FakeEntryPoint, Scale, acme_plugin, scale_spec

import trama
from trama import NodeFragment, OpSpec, RuntimeNotFoundError
from trama.extension import SELECTION_VARIABLE, PluginHost, PluginLoadWarning, hookimpl, reset_plugins


class Plugin:
    """A plugin module whose hooks are set as attributes (pluggy reads the markers)."""


def claiming_plugin(label: str, *, tryfirst: bool = False, trylast: bool = False) -> Plugin:
    """A plugin whose exporter claims every :class:`Scale`, answering with an op named after it."""

    def exporter(obj: Any, ctx: Any) -> NodeFragment | None:
        if not isinstance(obj, Scale):
            return None
        return NodeFragment(op=f"{label}.Scale", outputs=["y"], parameters={"factor": obj.factor})

    exporter.__name__ = f"export_{label}"

    def trama_exporters(framework: str) -> Sequence[Any] | None:
        return [exporter] if framework == "numpy" else None

    def trama_op_specs() -> Sequence[OpSpec]:
        return [scale_spec(f"{label}.Scale")]

    def trama_frameworks() -> Sequence[str]:
        return ["numpy"]

    plugin = Plugin()
    plugin.trama_exporters = hookimpl(tryfirst=tryfirst, trylast=trylast)(trama_exporters)  # type: ignore[attr-defined]
    plugin.trama_op_specs = hookimpl(trama_op_specs)  # type: ignore[attr-defined]
    plugin.trama_frameworks = hookimpl(trama_frameworks)  # type: ignore[attr-defined]
    return plugin


def exporter_labels(host: PluginHost) -> list[str]:
    return [exporter.__name__.removeprefix("export_") for exporter in host.registry(None).exporters]


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 2, 0), (2, 0, 1)])
def test_exporters_are_asked_tryfirst_then_plain_then_trylast_in_any_discovery_order(
    order: tuple[int, int, int],
) -> None:
    plugins = [
        FakeEntryPoint("first", "trama-first", claiming_plugin("first", tryfirst=True)),
        FakeEntryPoint("plain", "trama-plain", claiming_plugin("plain")),
        FakeEntryPoint("catchall", "trama-catchall", claiming_plugin("catchall", trylast=True)),
    ]
    host = PluginHost([plugins[i] for i in order], include_core=False)
    assert exporter_labels(host) == ["first", "plain", "catchall"]


@pytest.mark.parametrize("pack_first", [True, False])
def test_a_packs_exporter_wins_over_a_trylast_catch_all_for_its_class(pack_first: bool) -> None:
    pack = FakeEntryPoint("pack", "trama-pack", claiming_plugin("pack"))
    catch_all = FakeEntryPoint("tracer", "trama-tracer", claiming_plugin("tracer", trylast=True))
    host = PluginHost([pack, catch_all] if pack_first else [catch_all, pack], include_core=False)
    reset_plugins(host)
    try:
        model = trama.export_model(Scale(2.0), inputs=["x"], outputs=["y"])
    finally:
        reset_plugins()
    assert model.nodes[0].op == "pack.Scale"


def test_within_one_tier_exporters_keep_discovery_order() -> None:
    one = FakeEntryPoint("one", "trama-one", claiming_plugin("one"))
    two = FakeEntryPoint("two", "trama-two", claiming_plugin("two"))
    assert exporter_labels(PluginHost([one, two], include_core=False)) == ["one", "two"]
    assert exporter_labels(PluginHost([two, one], include_core=False)) == ["two", "one"]


def test_the_torch_tracer_is_registered_trylast() -> None:
    """The installed trama-torch marks its catch-all exporter ``trylast`` (the rule above makes
    that sufficient); checked on the real plugin module, without importing torch."""
    from trama_torch import plugin

    options = PluginHost(include_core=False, selection=())._manager.parse_hookimpl_opts(plugin, "trama_exporters")
    assert options is not None
    assert options["trylast"] is True


# --- TRAMA_PLUGINS ----------------------------------------------------------------------------


class Recording(FakeEntryPoint):
    """An entry point that remembers whether it was imported."""

    loaded = False

    def load(self) -> Any:
        self.loaded = True
        return super().load()


@pytest.fixture
def entries() -> list[Recording]:
    return [
        Recording("acme", "trama-acme", acme_plugin()),
        Recording("lenses", "trama_Lenses", claiming_plugin("lenses")),
    ]


def loaded(host: PluginHost) -> list[str]:
    return [info.name for info in host.plugins()]


def test_without_the_variable_every_entry_point_loads(
    entries: list[Recording], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SELECTION_VARIABLE, raising=False)
    host = PluginHost(entries, include_core=False)
    assert loaded(host) == ["acme", "lenses"]
    assert not host.selection().active


def test_the_variable_is_an_allowlist_of_entry_point_or_distribution_names(
    entries: list[Recording], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SELECTION_VARIABLE, " TRAMA-lenses , nothing-here")
    host = PluginHost(entries, include_core=False)
    assert loaded(host) == ["lenses"]
    assert [entry.loaded for entry in entries] == [False, True]  # left out means never imported
    selection = host.selection()
    assert selection.allowed == ("TRAMA-lenses", "nothing-here")
    assert selection.skipped == (("acme", "trama-acme"),)
    assert selection.unmatched == ("nothing-here",)
    monkeypatch.setenv(SELECTION_VARIABLE, "acme")
    assert loaded(PluginHost(entries, include_core=False)) == ["acme"]


def test_an_empty_variable_loads_no_plugin_but_keeps_the_catalog(
    entries: list[Recording], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SELECTION_VARIABLE, "")
    host = PluginHost(entries)
    assert loaded(host) == ["catalog"]
    assert not any(entry.loaded for entry in entries)
    assert "Linear" in host.registry(None)
    assert "acme.Scale" not in host.registry(None)


def test_a_missing_default_runtime_names_the_variable_when_it_left_the_package_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(SELECTION_VARIABLE, "lenses")  # no framework at all: nothing to fall back on
    reset_plugins(PluginHost())
    try:
        with pytest.raises(RuntimeNotFoundError, match=rf"trama-numpy is installed but {SELECTION_VARIABLE} leaves it"):
            trama.runtime_for_name("default")
    finally:
        reset_plugins()


def test_a_missing_runtime_package_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    reset_plugins(PluginHost([], include_core=True, selection=None))
    try:
        with pytest.raises(RuntimeNotFoundError, match=r"install trama-numpy \(pip install trama-numpy\)"):
            trama.runtime_for_name("default")
        with pytest.raises(RuntimeNotFoundError, match=r"pip install trama-jax"):
            trama.runtime_for_name("jax:cpu")
    finally:
        reset_plugins()


def test_the_cli_honours_the_variable() -> None:
    """``trama ops`` in a fresh process lists the lenses example's ops only when it is selected."""
    probe = "import sys; from trama.tools.cli import main; sys.exit(main(['ops']))"

    def ops(selection: str) -> str:
        env = {**_environment(), SELECTION_VARIABLE: selection}
        result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
        assert result.returncode == 0, result.stderr
        return result.stdout

    assert "lenses.ThinLens" in ops("lenses")
    assert "lenses.ThinLens" not in ops("")


def _environment() -> dict[str, str]:
    import os

    return {key: value for key, value in os.environ.items() if key != SELECTION_VARIABLE}


# --- Factory adapters ------------------------------------------------------------------------


class Wrapped:
    def __init__(self, node: trama.Node, inner: Any) -> None:
        self.node = node
        self.inner = inner


def framework_plugin(adapter: Any) -> Plugin:
    """A framework package: it names 'acme-fw' and adapts every factory for it."""

    def trama_frameworks() -> Sequence[str]:
        return ["acme-fw"]

    def trama_factory_adapters(framework: str) -> Sequence[Any] | None:
        return [adapter] if framework == "acme-fw" else None

    plugin = Plugin()
    plugin.trama_frameworks = hookimpl(trama_frameworks)  # type: ignore[attr-defined]
    plugin.trama_factory_adapters = hookimpl(trama_factory_adapters)  # type: ignore[attr-defined]
    return plugin


def wrap_result(factory: Any) -> Any:
    def build(node: trama.Node, *, children: Mapping[str, Any], parameters: Mapping[str, Any]) -> Wrapped:
        return Wrapped(node, factory(node, children=children, parameters=parameters))

    return build


def test_every_factory_for_a_framework_goes_through_its_adapters() -> None:
    host = PluginHost(
        [
            FakeEntryPoint("acme", "trama-acme", acme_plugin(frameworks=("acme-fw",))),
            FakeEntryPoint("fw", "trama-fw", framework_plugin(wrap_result)),
        ],
        include_core=False,
    )
    model = trama.export_model(Scale(3.0), inputs=["x"], outputs=["y"], registry=host.registry("acme-fw"))
    built = trama.import_model(model, registry=host.registry("acme-fw"))
    assert isinstance(built, Wrapped)
    assert built.node.id == "root"
    assert isinstance(built.inner, Scale)
    assert built.inner.factor == 3.0
    # Other frameworks' factories are not adapted.
    numpy_host = PluginHost([FakeEntryPoint("acme", "trama-acme", acme_plugin())], include_core=False)
    assert not isinstance(numpy_host.registry("numpy")["acme.Scale"].factory, Wrapped)


def test_an_adapter_that_fails_is_reported_and_the_factories_stay_usable() -> None:
    def broken(factory: Any) -> Any:
        raise RuntimeError("adapter bug")

    host = PluginHost(
        [
            FakeEntryPoint("acme", "trama-acme", acme_plugin(frameworks=("acme-fw",))),
            FakeEntryPoint("fw", "trama-fw", framework_plugin(broken)),
        ],
        include_core=False,
    )
    with pytest.warns(PluginLoadWarning, match="a factory adapter failed: RuntimeError: adapter bug"):
        registry = host.registry("acme-fw")
    assert registry["acme.Scale"].factory is not None
    (info,) = [info for info in host.plugins() if info.distribution == "trama-fw"]
    assert "trama_factory_adapters for 'acme-fw': a factory adapter failed: RuntimeError: adapter bug" in info.errors


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    reset_plugins()
    yield
    reset_plugins()


def test_trama_plugins_shows_what_the_variable_selected(monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from trama.tools import main

    monkeypatch.setenv(SELECTION_VARIABLE, "lenses, nope")
    reset_plugins(PluginHost())
    listing = subprocess.run(
        [sys.executable, "-c", "import sys; from trama.tools.cli import main; sys.exit(main(['plugins']))"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    first = listing.stdout.splitlines()[0]
    assert first.startswith(f"{SELECTION_VARIABLE} selects lenses, nope; left out: ")
    assert "numpy (trama-numpy)" in first
    assert "no installed plugin is called 'nope'" in first
    assert "trama-lenses" in listing.stdout
    assert "trama-numpy" not in listing.stdout.split("\n", 1)[1]

    reset_plugins(PluginHost())
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["plugins", "--json"]) == 0
    selection = json.loads(out.getvalue())["selection"]
    assert selection["allowed"] == ["lenses", "nope"]
    assert {"name": "numpy", "distribution": "trama-numpy"} in selection["skipped"]
    assert selection["unmatched"] == ["nope"]


def test_without_trama_numpy_default_is_another_frameworks_cpu_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    """``pip install trama-jax`` alone: ``"default"`` answers with ``jax:cpu``."""
    monkeypatch.setenv(SELECTION_VARIABLE, "jax")
    reset_plugins(PluginHost())
    try:
        runtime = trama.runtime_for_name("default")
        assert runtime.name() == "jax:cpu"
    finally:
        reset_plugins()
