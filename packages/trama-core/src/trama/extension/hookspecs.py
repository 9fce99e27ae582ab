"""The hooks through which installed packages extend trama (pluggy, project name ``trama``).

A package plugs in by naming a module (or any object) in the entry-point group ``trama``::

    [project.entry-points.trama]
    lenses = "trama_lenses.plugin"

and implementing some of the hooks below in it with the :data:`hookimpl` marker. Discovery
imports that module, so it must stay cheap: it may import trama and the standard library, but
a framework (torch, jax) only inside the functions it returns, when an implementation is
actually built. ``docs/plugins.md`` states each hook's contract and how stable it is.

What a hook returns is checked before anything uses it (:mod:`trama.extension._contracts`): the
kind of container, each item's type, every name, the size. A hook that raises or returns the
wrong kind of value contributes nothing from that call, a bad item of a good return value is
dropped alone, and each problem is reported against the plugin's distribution (``trama
plugins``); the other plugins never notice. ``None`` means "nothing here" only from the hooks
that receive a ``framework``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pluggy

from trama.format._specs import Exporter, OpSpec

__all__ = [
    "PROJECT",
    "hookimpl",
    "hookspec",
    "trama_exporters",
    "trama_factory_adapters",
    "trama_frameworks",
    "trama_op_implementations",
    "trama_op_specs",
    "trama_opsets",
    "trama_runtimes",
    "trama_sized_leaf",
]

#: The pluggy project name, and the entry-point group plugins register in.
PROJECT = "trama"

hookspec = pluggy.HookspecMarker(PROJECT)
#: Mark a plugin's hook implementations with this (``from trama.extension.hookspecs import hookimpl``).
hookimpl = pluggy.HookimplMarker(PROJECT)

#: Builds the runtime object of one node: ``factory(node, *, children, parameters)``, or a class
#: with a ``from_node`` classmethod of that signature (:class:`trama.ImportableOp`).
Factory = Callable[..., Any]


@hookspec
def trama_op_specs() -> Sequence[OpSpec]:
    """Framework-neutral specifications of the ops this plugin defines.

    Names outside the standard catalog must be namespaced (``lenses.AsphericSurface``); the
    part before the last dot is the namespace, declared in :func:`trama_opsets`. Factories
    are ignored here: they come from :func:`trama_op_implementations`. Stable.
    """
    raise NotImplementedError


@hookspec
def trama_opsets() -> Mapping[str, int]:
    """The op namespaces this plugin owns and their current opset versions (``{"lenses": 1}``).

    Exported documents record the versions of the namespaces they use. Stable.
    """
    raise NotImplementedError


@hookspec
def trama_frameworks() -> Sequence[str]:
    """The frameworks this plugin implements ops for (``["numpy"]``), without importing them.

    This is how ``trama.registry(framework)`` knows which frameworks exist. Stable.
    """
    raise NotImplementedError


@hookspec
def trama_op_implementations(framework: str) -> Mapping[str, Factory] | None:
    """Factories for ``framework``, by op name; ``None`` (or nothing) for other frameworks.

    Returning the mapping must not import the framework; building a node may. Each op must
    have a specification from some plugin. Stable.
    """
    raise NotImplementedError


@hookspec
def trama_exporters(framework: str) -> Sequence[Exporter] | None:
    """Exporters for ``framework``: ``exporter(obj, ctx)`` returns a
    :class:`trama.NodeFragment` for the objects it handles and ``None`` for any other.

    An exporter is offered objects of every kind, so it must decline foreign ones quickly and
    without importing its framework (check ``type(obj).__module__`` first). Stable.

    **Priority.** The first exporter that returns a fragment wins, and the order never depends
    on discovery order alone: plugins whose implementation is marked ``@hookimpl(tryfirst=True)``
    are asked first, then plain ones, then ``@hookimpl(trylast=True)`` ones; within one of those
    tiers, in discovery order. Catch-all exporters (trama-torch's tracer, which claims every
    ``torch.nn.Module``) are ``trylast``, so a pack's plain exporter for its own classes always
    comes before them.
    """
    raise NotImplementedError


@hookspec
def trama_factory_adapters(framework: str) -> Sequence[Callable[[Factory], Factory]] | None:
    """Wrappers that ``framework``'s own package applies to *every* factory implementing an op
    for it, its own and every pack's, so that all of them go through the same path.

    trama-jax uses this to turn the :class:`trama_jax.JaxKernel` a factory returns into the
    module that its importer and runtimes wire, so a pack's JAX factory simply returns a
    ``JaxKernel``. An adapter is called once per factory when the registry is built, must not
    import the framework, and returns the factory to use (same signature). Provisional: meant
    for framework packages, not op packs.
    """
    raise NotImplementedError


@hookspec(firstresult=True)
def trama_sized_leaf(framework: str) -> Callable[[Any], Any] | None:
    """How ``framework`` builds a leaf whose settings depend on the input sizes (a setting that
    is a :class:`trama.SizeExpr`): a callable that takes the :class:`trama.conversion.SizedNode`
    and returns the framework's kind of object for the node (a torch module, a JAX leaf), which
    calls ``sized.current()`` when it runs to get the node built for the run's sizes. ``None``
    for another framework. The first plugin that answers is used; without one, importing such a
    node is an :class:`~trama.ImportModelError`. Must not import the framework when called.
    Provisional: meant for framework packages, not op packs.
    """
    raise NotImplementedError


@hookspec
def trama_runtimes() -> Sequence[Any]:
    """Runtimes this plugin provides, for the runtime API: :class:`trama.Runtime` objects, none
    answering to a name (or alias) that an earlier runtime answers to.

    Provisional: the runtime objects' interface is defined with the runtime API and may change
    until it is released.
    """
    raise NotImplementedError
