"""The standard op catalog: framework-neutral specifications of the ops that every framework
package implements, so that a file exported from torch runs in JAX or numpy.

The format itself treats op names as opaque (``docs/format.md``); this package is what gives
the un-namespaced names (``Linear``, ``relu``, ``Sequential``) their meaning. Each spec's doc is
the exact semantics an implementer codes against, and ``docs/ops.md`` is generated from them
(:mod:`trama.catalog.docs`). The specs carry no factories: implementations come from framework
packages, which pair these specs with their own factories.

Ops are grouped in :data:`CATALOG_CATEGORIES`, one module each; :func:`standard_specs` is all of
them in that order.

The specs' semantics that can be checked without running anything are checked here too, once for
every framework: :func:`check_settings` reads a catalog node's settings with the catalog's
defaults, refuses what the catalog does not allow (a stride of 0, ``groups`` that does not divide
the channels, a weight of the wrong shape) and returns them as :class:`Settings`, which kernels
read instead of checking again. ``trama.conversion._importer.build_node`` runs it before any framework's
factory, so one bad document gets one error in every framework. The framework-neutral rules the
kernels share live here as well: torch's type promotion (:func:`result_type`), torch's indexing
(:func:`torch_index`), the stacking of recurrent layers (:func:`stacked_layers`) and the
shape rules of inputs, pools and attention masks
(:class:`PoolWindows`, :func:`channels_first`, …), which raise ``ValueError`` for a kernel to
re-raise as its framework's error.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trama.catalog import (
    activations,
    arrays,
    attention,
    composites,
    elementwise,
    functions,
    layer_functions,
    layers,
    pooling,
    sequence,
)
from trama.catalog._precision import HALF_PRECISION, STEPPED_OPS, HalfTolerance, half_tolerance
from trama.catalog.sequence import RNN_MAX_LAYERS
from trama.format._lazy import lazy_face
from trama.format._specs import CATALOG_NAMESPACE, OpRegistry, OpSpec, op_namespace

if TYPE_CHECKING:
    from trama.catalog._checkers import check_settings
    from trama.catalog._geometry import (
        PAD_MODES,
        PoolWindows,
        adaptive_windows,
        channels_first,
        check_pad_room,
        flattened_shape,
        merged_attention_mask,
        pool_output_size,
    )
    from trama.catalog._import_checks import ImportChecks, import_checks
    from trama.catalog._indexing import TorchIndex, index_width, torch_index
    from trama.catalog._promotion import promote_types, result_type
    from trama.catalog._reader import Settings
    from trama.catalog._recurrence import stacked_layers

__all__ = [
    "CATALOG_CATEGORIES",
    "CATALOG_NAMESPACE",
    "CATALOG_OPSET",
    "HALF_PRECISION",
    "PAD_MODES",
    "RNN_MAX_LAYERS",
    "STEPPED_OPS",
    "Category",
    "HalfTolerance",
    "ImportChecks",
    "PoolWindows",
    "Settings",
    "TorchIndex",
    "adaptive_windows",
    "category_of",
    "channels_first",
    "check_pad_room",
    "check_settings",
    "flattened_shape",
    "half_tolerance",
    "import_checks",
    "index_width",
    "merged_attention_mask",
    "op_namespace",
    "pool_output_size",
    "promote_types",
    "result_type",
    "stacked_layers",
    "standard_op_names",
    "standard_registry",
    "standard_specs",
    "standard_specs_by_name",
    "torch_index",
]


#: The catalog's version. Bump it when an op, a slot or a port is added; meanings never change
#: within a name (``docs/ops.md``, "Versions"), so a document of opset n reads the same under any
#: later opset.
CATALOG_OPSET = 2


@dataclass(frozen=True, slots=True)
class Category:
    """A group of ops that docs print together, with what the group has in common."""

    key: str
    title: str
    doc: str
    specs: tuple[OpSpec, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(spec.name for spec in self.specs)


#: The catalog's ops by category, in the order docs print them.
CATALOG_CATEGORIES: tuple[Category, ...] = (
    Category(
        "composites",
        "Composites",
        "Containers whose meaning is their wiring: evaluating their children in document order computes them.",
        composites.SPECS,
    ),
    Category(
        "layers",
        "Layers",
        "The `torch.nn` layers with a fixed computation: dense and bilinear maps, convolutions, pooling, "
        "normalization, embedding, dropout and shape helpers.",
        (*layers.SPECS, *layer_functions.LAYERS, *pooling.LAYERS, *attention.LAYERS),
    ),
    Category(
        "sequence",
        "Attention and recurrent layers",
        "Leaves holding torch's full state under its `state_dict` names (nested keys flattened with `_`), "
        "and the encoder stack, a composite of encoder layers.",
        sequence.SPECS,
    ),
    Category(
        "activations",
        "Activations",
        "Each activation twice, with one meaning: the module (`ReLU`) and the function (`relu`).",
        activations.SPECS,
    ),
    Category(
        "functions",
        "Tensor functions",
        "The calls a tracer finds in a `forward`: arithmetic, joining, reshaping, reductions, indexing and constants.",
        functions.SPECS,
    ),
    Category(
        "elementwise",
        "Elementwise math, comparisons and selection",
        "Elementwise functions of one or more tensors: math, comparisons, logic, selection and casts.",
        elementwise.SPECS,
    ),
    Category(
        "arrays",
        "Shapes, gathering, scans, selection and creation",
        "Expanding, gathering, scanning, repeating, selecting (`topk`) and creating tensors.",
        arrays.SPECS,
    ),
    Category(
        "layer_functions",
        "Layers as functions",
        "The function forms of the dense, convolution, normalization and embedding layers, as "
        "`torch.nn.functional` calls them: weights are input ports, fed by `constant` nodes.",
        layer_functions.SPECS,
    ),
    Category(
        "pooling",
        "Pooling, resampling and padding as functions",
        "The function forms of pooling and upsampling, and padding.",
        pooling.SPECS,
    ),
    Category(
        "attention",
        "Attention as a function",
        "Scaled dot-product attention as `torch.nn.functional.scaled_dot_product_attention` computes it.",
        attention.SPECS,
    ),
)

_CATEGORY_OF = {spec.name: category.key for category in CATALOG_CATEGORIES for spec in category.specs}


@functools.cache
def standard_specs() -> tuple[OpSpec, ...]:
    """Every spec of the catalog, category by category (cached: the specs are immutable)."""
    return tuple(spec for category in CATALOG_CATEGORIES for spec in category.specs)


@functools.cache
def standard_specs_by_name() -> dict[str, OpSpec]:
    """The catalog's specs by op name (cached; do not modify the mapping)."""
    return {spec.name: spec for spec in standard_specs()}


def standard_op_names() -> list[str]:
    """The names of the catalog's ops, in catalog order: what a framework package that
    implements the whole catalog defers (``implementation_hooks(..., names=standard_op_names)``)."""
    return [spec.name for spec in standard_specs()]


def standard_registry() -> OpRegistry:
    """A fresh registry of the catalog's specs, for validating documents against the catalog.

    Fresh on every call because registries are mutable (exporters, extra specs).
    """
    return OpRegistry(standard_specs())


def category_of(name: str) -> str | None:
    """The key of the category that holds op ``name``, or ``None`` if the catalog has no such op."""
    return _CATEGORY_OF.get(name)


#: The module (within this package) of each name imported on first use: the checks and the
#: shared kernel rules use numpy, which the specs above (all that discovery reads) do not.
_HOMES = {
    "check_settings": "_checkers",
    **dict.fromkeys(
        (
            "PAD_MODES",
            "PoolWindows",
            "adaptive_windows",
            "channels_first",
            "check_pad_room",
            "flattened_shape",
            "half_tolerance",
            "merged_attention_mask",
            "pool_output_size",
        ),
        "_geometry",
    ),
    **dict.fromkeys(("ImportChecks", "import_checks"), "_import_checks"),
    **dict.fromkeys(("TorchIndex", "index_width", "torch_index"), "_indexing"),
    **dict.fromkeys(("promote_types", "result_type"), "_promotion"),
    "Settings": "_reader",
    "stacked_layers": "_recurrence",
}

if not TYPE_CHECKING:  # mypy reads the imports above; at run time, each name on first use
    __getattr__, __dir__ = lazy_face(__name__, _HOMES)
