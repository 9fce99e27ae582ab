"""``trama validate`` refuses what import would refuse, with the installed packages' checks.

Issue 23: a document whose pack op had ``"rotary_dim": "four"`` validated ok and failed only at
import. Validation now runs, on a document the format accepts, every check import runs that
needs no framework: each op's spec (ports, outputs, slot types), the catalog's settings checks
and a pack's own :attr:`trama.OpSpec.check`; and it says which ops it could not check because
no installed package knows them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import trama
from trama import INPUT, Model, Node, OpSpec, Parameter, ParameterSchema, Ref, RegistryError
from trama.conversion import build_node
from trama.extension import PluginHost, hookimpl, reset_plugins
from trama.tools import main

ROPE = "rope.Rotary"


def _check_rotary(node: Node, parameters: Mapping[str, Parameter]) -> None:
    dim = parameters["rotary_dim"].value
    if dim % 2:
        raise RegistryError(f"{node.op}: rotary_dim must be even, got {dim}", node_id=node.id)


def _pack(check: Any = _check_rotary) -> Any:
    spec = OpSpec(
        ROPE, inputs=("x",), outputs=("y",), parameters=(ParameterSchema("rotary_dim", ("int",)),), check=check
    )

    @hookimpl
    def trama_op_specs() -> Sequence[OpSpec]:
        return (spec,)

    @hookimpl
    def trama_opsets() -> Mapping[str, int]:
        return {"rope": 1}

    return SimpleNamespace(trama_op_specs=trama_op_specs, trama_opsets=trama_opsets)


class _EntryPoint:
    def __init__(self, plugin: Any) -> None:
        self.name = "rope"
        self.dist = SimpleNamespace(name="trama-rope", version="1.0")
        self._plugin = plugin

    def load(self) -> Any:
        return self._plugin


@pytest.fixture
def with_pack() -> Iterator[None]:
    reset_plugins(PluginHost([_EntryPoint(_pack())]))
    yield
    reset_plugins()


@pytest.fixture
def without_pack() -> Iterator[None]:
    reset_plugins(PluginHost([]))
    yield
    reset_plugins()


def _document(tmp_path: Path, rotary_dim: Any, *, dropout: float = 0.1) -> Path:
    x = Ref(INPUT, "x")
    model = Model(
        inputs=["x"],
        outputs=[Ref("drop", "y")],
        nodes=[
            Node("rot", ROPE, {"x": x}, ["y"], {"rotary_dim": "rot.rotary_dim"}),
            Node("drop", "Dropout", {"x": Ref("rot", "y")}, ["y"], {"p": "drop.p"}),
        ],
        parameters={"rot.rotary_dim": Parameter(rotary_dim), "drop.p": Parameter(dropout)},
    )
    path = tmp_path / "model.trama.json"
    trama.dump(model, path)
    return path


def _validate(path: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, str]:
    status = main(["validate", *flags, str(path)])
    return status, capsys.readouterr().out


def test_a_slot_of_the_wrong_type_for_an_installed_pack_is_refused(
    with_pack: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out = _validate(_document(tmp_path, "four"), capsys)
    assert status == 1
    assert "parameter 'rotary_dim' of op 'rope.Rotary' must be int, got string" in out
    assert "/nodes/0" in out


def test_a_packs_own_check_speaks_in_validate(
    with_pack: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _document(tmp_path, 3)
    status, out = _validate(path, capsys)
    assert status == 1
    assert "rope.Rotary: rotary_dim must be even, got 3" in out
    status, out = _validate(path, capsys, "--json")
    report = json.loads(out)
    assert report["ok"] is False
    assert report["files"][0]["problems"][0]["node"] == "rot"


def test_a_catalog_setting_out_of_range_is_refused(
    with_pack: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out = _validate(_document(tmp_path, 4, dropout=1.5), capsys)
    assert status == 1
    assert "/nodes/1" in out
    assert "p" in out
    assert "rope.Rotary" not in out  # the pack's node is fine


def test_a_valid_document_is_ok_with_its_pack(
    with_pack: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out = _validate(_document(tmp_path, 4), capsys)
    assert status == 0
    assert out.strip().endswith(": ok")


def test_without_the_pack_validate_says_which_ops_it_could_not_check(
    without_pack: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _document(tmp_path, "four")  # import would need the pack anyway
    status, out = _validate(path, capsys)
    assert status == 0
    assert "ok (not checked as import would check them: no installed package defines rope.Rotary)" in out
    status, out = _validate(path, capsys, "--json")
    assert json.loads(out)["files"][0]["unchecked_ops"] == ["rope.Rotary"]


def test_import_runs_the_same_check_before_any_factory(with_pack: None, tmp_path: Path) -> None:
    model = trama.load(_document(tmp_path, 3))
    node = model.node("rot")
    parameters = {slot: model.parameters[name] for slot, name in node.parameters.items()}
    with pytest.raises(RegistryError, match="rotary_dim must be even") as info:
        build_node(node, trama.registry(None), children={}, parameters=parameters)
    assert info.value.node_id == "rot"


def test_a_check_that_breaks_is_reported_as_the_packs_defect(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(node: Node, parameters: Mapping[str, Parameter]) -> None:
        raise KeyError("oops")

    reset_plugins(PluginHost([_EntryPoint(_pack(broken))]))
    try:
        status, out = _validate(_document(tmp_path, 4), capsys)
    finally:
        reset_plugins()
    assert status == 1
    assert "the settings check of its package failed: KeyError: 'oops'" in out


def test_a_spec_whose_check_is_not_callable_is_refused_at_discovery() -> None:
    with pytest.warns(trama.extension.PluginLoadWarning, match="check is str, not a callable"):
        registry = PluginHost([_EntryPoint(_pack(check="nope"))]).registry(None)
    assert registry.get(ROPE) is None
