"""What importing a document would refuse, found without importing it: ``trama validate``'s
last stage.

A document can be well formed and still be refused by ``trama.import_model``: a slot of the
wrong type for the op's spec (``"rotary_dim": "four"`` where a pack declares an int), a
catalog op's setting out of range, a pack's own settings check. :func:`import_checks` runs
every one of those checks that the installed packages provide, on every node, without building
anything and without importing a framework: the spec of every op (its ports, outputs and slot
types), the catalog's settings checkers, and each pack's :attr:`~trama.OpSpec.check`. An op
that no installed package knows cannot be checked beyond the format: it is named in
:attr:`ImportChecks.unchecked`, so the report can say which checks did not run and why.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from trama.catalog._checkers import checking
from trama.errors import TramaError
from trama.format._model import Model, Parameter
from trama.format._sizes import has_sizes, resolve_sizes, size_symbols
from trama.format._specs import OpRegistry
from trama.format._validation import registry_errors

__all__ = ["ImportChecks", "import_checks"]


@dataclass(frozen=True)
class ImportChecks:
    """What :func:`import_checks` found: every refusal (each with its node and location), and
    the ops no installed package knows, with how many nodes use each."""

    errors: list[TramaError] = field(default_factory=list)
    unchecked: dict[str, int] = field(default_factory=dict)


#: The size a symbol takes for the checks of a node whose settings read it, within its range: a
#: size like a run's (odd, so that no evenness is assumed), not an edge case.
_SAMPLE = 7


def _at_sample_sizes(model: Model, parameters: dict[str, Parameter]) -> dict[str, Parameter]:
    """A sized node's parameters with each size computed for one sample binding, so that the
    catalog checks the settings as a run would build them (each run builds the node for its
    own sizes, and the same checks run then)."""
    ranges = model.symbols or {}
    binding: dict[str, int] = {}
    for entry in parameters.values():
        for symbol in size_symbols(entry.value):
            bounds = ranges.get(symbol)
            low = bounds.min if bounds is not None and bounds.min is not None else 2
            high = bounds.max if bounds is not None else None
            size = max(_SAMPLE, low)
            binding[symbol] = size if high is None else min(size, high)
    resolved = dict(parameters)
    for slot, entry in parameters.items():
        if has_sizes(entry.value):
            try:
                resolved[slot] = Parameter(resolve_sizes(entry.value, binding), entry.learnable)
            except (ValueError, ArithmeticError):
                continue  # a size that cannot be computed for the sample: the run says why
    return resolved


def import_checks(model: Model, registry: OpRegistry) -> ImportChecks:
    """Every check import would run on ``model`` that ``registry`` (the installed packages'
    specs: ``trama.registry(None)``) can run without a framework."""
    errors = registry_errors(model, registry, allow_unknown_ops=True)
    failed = {error.node_id for error in errors}
    unchecked: Counter[str] = Counter()
    for index, node in enumerate(model.nodes):
        spec = registry.get(node.op)
        if spec is None:
            unchecked[node.op] += 1
            continue
        if node.calls is not None or node.id in failed:
            continue  # a call's settings are its target's; a node already refused says why
        parameters = {slot: model.parameters[name] for slot, name in node.parameters.items()}
        if any(has_sizes(entry.value) for entry in parameters.values()):
            parameters = _at_sample_sizes(model, parameters)
        try:
            with checking(node, spec, parameters):
                pass
        except TramaError as exc:
            if exc.location is None:
                exc.location = f"/nodes/{index}"
            errors.append(exc)
    return ImportChecks(errors, dict(unchecked))
