"""What the leaf and function tests share: a registry of this package's leaf and function
factories, and the export → JSON → import round trip they all go through.

The registry is built from the catalog's specs and the two factory tables directly, not through
plugin discovery, so that these tests depend on nothing but the modules under test (the
composites and the exporter are another part of the package). A test-only ``Graph`` factory
returns its children by name, which is all a test needs to look at two tied leaves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import trama
from trama import ExportContext, Model, NodeFragment, OpRegistry
from trama.catalog import standard_registry, standard_specs
from trama_torch.functions import function_factories
from trama_torch.leaves import export_leaf, leaf_factories


def _children(node: trama.Node, *, children: Mapping[str, Any], parameters: Mapping[str, Any]) -> dict[str, Any]:
    return dict(children)


def torch_registry() -> OpRegistry:
    """The catalog's specs with this package's leaf and function factories (and a test Graph)."""
    factories: dict[str, Any] = {**leaf_factories(), **function_factories(), "Graph": _children}
    return OpRegistry(
        (dataclasses.replace(spec, factory=factories.get(spec.name)) for spec in standard_specs()), framework="torch"
    )


class Leaf:
    """Exports one torch module through :func:`export_leaf` (a stand-in for the package's exporter)."""

    def __init__(self, module: Any, constants: Mapping[str, Any] | None = None) -> None:
        self.module = module
        self.constants = constants

    def to_node(self, ctx: ExportContext) -> NodeFragment:
        return export_leaf(self.module, ctx, self.constants)


def round_trip(obj: Any, inputs: list[str], outputs: list[str]) -> Model:
    """Export ``obj`` (validated against the catalog) and read it back from its JSON text."""
    model = trama.export_model(obj, inputs=inputs, outputs=outputs, registry=standard_registry())
    return trama.loads(trama.dumps(model))
