"""The standard catalog as a plugin: the core contributes its specifications through the same
hooks as every other package (see :mod:`trama.extension.hookspecs`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from trama.catalog import CATALOG_NAMESPACE, CATALOG_OPSET, standard_specs
from trama.extension.hookspecs import hookimpl
from trama.format._specs import OpSpec


@hookimpl
def trama_op_specs() -> Sequence[OpSpec]:
    return standard_specs()


@hookimpl
def trama_opsets() -> Mapping[str, int]:
    return {CATALOG_NAMESPACE: CATALOG_OPSET}
