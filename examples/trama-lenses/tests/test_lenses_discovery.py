"""Discovery: the installed distribution is found through its entry point and listed by the CLI."""

from __future__ import annotations

import importlib.metadata

import pytest

import trama
from trama.extension import plugin_host
from trama.tools import main
from trama_lenses.plugin import export_element

OPS = ["lenses.AsphericSurface", "lenses.FreeSpace", "lenses.System", "lenses.ThinLens"]
HOOKS = ("trama_exporters", "trama_frameworks", "trama_op_implementations", "trama_op_specs", "trama_opsets")


def test_the_distribution_is_discovered_with_its_hooks_and_no_errors() -> None:
    (info,) = [info for info in plugin_host().plugins() if info.distribution == "trama-lenses"]
    assert info.name == "lenses"
    assert info.version == importlib.metadata.version("trama-lenses")
    assert info.hooks == HOOKS
    assert info.errors == ()


def test_the_numpy_registry_holds_every_lenses_op_with_a_factory() -> None:
    registry = trama.registry("numpy")
    assert [name for name in registry.names() if name.startswith("lenses.")] == OPS
    assert all(registry[name].factory is not None for name in OPS)
    assert export_element in registry.exporters


def test_the_framework_neutral_registry_has_the_specs_and_the_exporter_but_no_factories() -> None:
    registry = trama.registry()
    assert all(registry[name].factory is None for name in OPS)
    assert export_element in registry.exporters


def test_namespace_opset_and_framework_are_known() -> None:
    host = plugin_host()
    assert host.opsets()["lenses"] == 1
    assert "numpy" in host.frameworks()
    assert set(OPS) <= host.coverage()["numpy"]


def test_trama_plugins_lists_the_distribution(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins"]) == 0
    lines = capsys.readouterr().out.splitlines()
    version = importlib.metadata.version("trama-lenses")
    at = lines.index(f"trama-lenses {version}  (entry point 'lenses')")
    assert lines[at + 1] == f"  hooks: {', '.join(HOOKS)}"


def test_trama_ops_lists_the_ops_as_implemented_for_numpy(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ops", "--framework", "numpy"]) == 0
    rows = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines()[1:]}
    for name in OPS:
        assert rows[name][0] == "yes", rows[name]
    assert rows["lenses.System"][1] == "composite"
