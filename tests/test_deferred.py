"""Deferred factories: a plugin's table is cheap to list, and the real one loads on first use."""

from __future__ import annotations

from typing import Any

import pytest

import trama
from trama.extension import deferred_factories


class _Built:
    def __init__(self, node: Any, children: Any, parameters: Any) -> None:
        self.node, self.children, self.parameters = node, children, parameters

    @classmethod
    def from_node(cls, node: Any, *, children: Any, parameters: Any) -> _Built:
        return cls(node, children, parameters)


def test_the_real_table_loads_once_on_first_build_and_every_call_is_handed_on() -> None:
    loads: list[int] = []

    def load() -> dict[str, Any]:
        loads.append(1)
        return {"A": lambda node, *, children, parameters: ("A", node, dict(children), dict(parameters)), "B": _Built}

    table = deferred_factories(["A", "B"], load, distribution="pack")
    assert loads == []  # listing costs nothing
    assert table["A"]("n", children={"c": 1}, parameters={"p": 2}) == ("A", "n", {"c": 1}, {"p": 2})
    built = table["B"]("m", children={}, parameters={})
    assert isinstance(built, _Built)  # a class with from_node is built through from_node
    assert built.node == "m"
    assert loads == [1]


def test_a_name_the_real_table_lacks_is_a_registry_error_naming_the_package() -> None:
    table = deferred_factories(["A", "Missing"], lambda: {"A": _Built}, distribution="trama-pack")
    with pytest.raises(trama.RegistryError, match=r"trama-pack lists op 'Missing'"):
        table["Missing"]("n", children={}, parameters={})


def test_an_error_of_the_real_factory_reaches_the_importer_as_its_own() -> None:
    def broken(node: Any, *, children: Any, parameters: Any) -> Any:
        raise ValueError("bad slot")

    table = deferred_factories(["A"], lambda: {"A": broken}, distribution="pack")
    with pytest.raises(ValueError, match="bad slot"):
        table["A"]("n", children={}, parameters={})
