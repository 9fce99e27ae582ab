"""Every catalog op's settings check, and the one place frameworks call it.

:func:`trama.conversion._importer.build_node` builds every node, for ``import_model``, for the graph runtimes
and for trama-jax: it runs the check of a catalog node (:func:`checking`) before the framework's
factory is called, so a bad document fails with the same :class:`~trama.RegistryError`, class
and message, in every framework, torch included, before any kernel exists. A factory that needs
the settings asks :func:`check_settings`, which, inside :func:`checking` for the same node,
returns what was checked there instead of checking again; called on its own (a kernel's test
calling a factory directly) it checks.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from trama.catalog import (
    _arrays_checks,
    _attention_checks,
    _elementwise_checks,
    _function_checks,
    _layer_checks,
    _layer_functions_checks,
    _pooling_checks,
    _sequence_checks,
)
from trama.catalog._reader import Checker, Settings
from trama.errors import RegistryError, TramaError
from trama.extension._contracts import describe_exception
from trama.format._model import Node, Parameter
from trama.format._sizes import is_symbolic_int
from trama.format._specs import OpSpec

__all__ = ["CHECKERS", "check_settings", "checker_for", "checking", "run_spec_check"]

#: Every catalog op's checker, by op name (a test sees that each catalog spec has one).
CHECKERS: Mapping[str, Checker] = {
    **_layer_checks.CHECKERS,
    **_sequence_checks.CHECKERS,
    **_function_checks.CHECKERS,
    **_function_checks.ACTIVATION_CHECKERS,
    **_elementwise_checks.CHECKERS,
    **_arrays_checks.CHECKERS,
    **_layer_functions_checks.CHECKERS,
    **_pooling_checks.CHECKERS,
    **_attention_checks.CHECKERS,
}

#: The node being built by :func:`checking`, its parameters and its settings.
_BUILDING: ContextVar[tuple[Node, Mapping[str, Parameter], Settings] | None] = ContextVar(
    "trama_catalog_building", default=None
)


def checker_for(op: str) -> Checker:
    """The checker of catalog op ``op``; a name the catalog does not have is a RegistryError."""
    checker = CHECKERS.get(op)
    if checker is None:
        raise RegistryError(f"op {op!r} is not in the standard catalog, so it has no settings check")
    return checker


def check_settings(node: Node, parameters: Mapping[str, Parameter]) -> Settings:
    """The checked settings of a catalog node with these parameters (by slot).

    Raises :class:`~trama.RegistryError` naming the op and the node for the first setting the
    catalog does not allow, or that contradicts another one or a tensor's shape. Inside
    :func:`checking` for this very node and parameters (a factory called by ``build_node``),
    the settings checked there are returned.
    """
    building = _BUILDING.get()
    if building is not None and building[0] is node and building[1] is parameters:
        return building[2]
    return checker_for(node.op).check(node, parameters)


def _catalog_specs() -> dict[str, OpSpec]:
    from trama.catalog import standard_specs_by_name

    return standard_specs_by_name()


def _is_catalog_spec(spec: OpSpec) -> bool:
    """Whether ``spec`` is the catalog's op of its name (a hand-made registry may give a toy op a
    catalog name and other slots: the catalog's rules are not its)."""
    catalog = _catalog_specs().get(spec.name)
    return catalog is not None and (catalog is spec or catalog == spec)


@contextmanager
def checking(
    node: Node, spec: OpSpec, parameters: Mapping[str, Parameter], *, example: Mapping[str, Parameter] | None = None
) -> Iterator[Settings | None]:
    """Check ``node`` if ``spec`` is a catalog op's, and let :func:`check_settings` hand the
    result to the factory called inside; yields the settings, or ``None`` for another op, whose
    own check (:attr:`OpSpec.check`, a pack's) runs first where it has one.

    ``example``: ``parameters`` hold symbolic sizes (``torch.export`` tracing a sized node), and
    ``example`` the same settings at the example's numbers. The checks run on ``example`` (they
    compare and convert numbers, which would fix a symbolic size at its example), and the
    factory gets those settings with the symbolic values put back where ``parameters`` has them."""
    checked = parameters if example is None else example
    if not _is_catalog_spec(spec):
        run_spec_check(node, spec, checked)
        yield None
        return
    settings = CHECKERS[spec.name].check(node, checked)
    if example is not None:
        settings = settings.with_values(
            {
                slot: _symbolic_like(settings[slot], entry.value)
                for slot, entry in parameters.items()
                if slot in settings
            }
        )
    token = _BUILDING.set((node, parameters, settings))
    try:
        yield settings
    finally:
        _BUILDING.reset(token)


def _symbolic_like(checked: Any, value: Any) -> Any:
    """``value`` (a setting holding symbolic sizes) in the form the checker gave ``checked``
    (the same setting at the example's numbers): a list where it made a tuple, and where it
    converted a number (an int to a float) or derived another value, what it made."""
    if is_symbolic_int(value):
        return value
    if isinstance(checked, (tuple, list)) and isinstance(value, (tuple, list)) and len(checked) == len(value):
        return type(checked)(_symbolic_like(c, v) for c, v in zip(checked, value, strict=True))
    return checked


def run_spec_check(node: Node, spec: OpSpec, parameters: Mapping[str, Parameter]) -> None:
    """Run ``spec``'s own settings check (:attr:`OpSpec.check`, a pack's) on ``node``, if it has
    one. What it raises is the node's :class:`~trama.RegistryError`, in the pack's words; a
    check that fails in another way (a defect of the pack) says so, never a traceback."""
    check = spec.check
    if check is None:
        return
    try:
        check(node, parameters)
    except RegistryError as exc:
        if exc.node_id is None:
            raise RegistryError(exc.message, node_id=node.id) from None
        raise
    except TramaError:
        raise
    except (ValueError, TypeError) as exc:
        raise RegistryError(f"{node.op}: {exc}", node_id=node.id) from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a defect of the pack's check: reported as one
        raise RegistryError(
            f"{node.op}: the settings check of its package failed: {describe_exception(exc)}", node_id=node.id
        ) from None
