"""What every runtime checks before a framework sees a document, and how failures come out.

Two rules hold for every runtime (``numpy``, ``torch:*``, ``jax:*`` and any other built on this
package), so they live here once:

* **Bounds first.** The input and output facts a document declares are checked against
  :data:`~trama.catalog._limits.MAX_TENSOR_BYTES` (:func:`check_facts`) before anything is
  built: a 300-byte file declaring an input of shape ``[10**12, 10**12]`` is refused with a
  trama error naming the input, where XLA would abort the whole process compiling for it.
  (Settings are bounded by the catalog's checks, :mod:`trama.catalog._limits`.)
* **Every failure is a trama error.** Whatever a framework raises while a model is prepared or
  run (its own exception types, ``MemoryError``, ``RecursionError``) reaches the caller as an
  :class:`~trama.ExecutionError`, naming the node and op where that is known, with the
  framework's message; a :class:`~trama.TramaError` passes through as it is
  (:func:`framework_failures`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from trama.catalog._limits import MAX_TENSOR_BYTES, extent_problem
from trama.errors import ExecutionError, TramaError
from trama.format._dtypes import numpy_dtype
from trama.format._model import Model, ValueFact

__all__ = ["MAX_TENSOR_BYTES", "check_facts", "describe_failure", "framework_failures"]


def check_facts(model: Model) -> None:
    """Refuse a fact whose shape holds more than :data:`MAX_TENSOR_BYTES` (its dtype's bytes per
    element, 1 when it names no dtype; a named dimension counts as 1), naming the input or
    output. Runtimes call it first in ``prepare``."""
    for kind, names, facts in (
        ("input", list(model.inputs), model.input_facts),
        ("output", [str(ref) for ref in model.outputs], model.output_facts),
    ):
        for index, fact in enumerate(facts or ()):
            problem = _fact_problem(fact)
            if problem is not None:
                name = names[index] if index < len(names) else str(index)
                raise ExecutionError(f"{kind} {name!r} is declared {problem}", location=f"/{kind}_facts/{index}")


def _fact_problem(fact: ValueFact | None) -> str | None:
    if fact is None or fact.shape is None:
        return None
    itemsize = 1
    if fact.dtype is not None:
        try:
            itemsize = numpy_dtype(fact.dtype).itemsize
        except TramaError:  # an unknown dtype is the decoder's to report; the size still counts
            itemsize = 1
    sizes = [size for size in fact.shape if isinstance(size, int)]
    problem = extent_problem(sizes, itemsize, limit=MAX_TENSOR_BYTES)
    return None if problem is None else f"with {problem}"


def describe_failure(exc: BaseException) -> str:
    """A framework's exception as a message: its type and its text (some, ``MemoryError``
    among them, have none)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@contextmanager
def framework_failures(what: str, *, node_id: str | None = None, op: str | None = None) -> Iterator[None]:
    """Run the block; a :class:`~trama.TramaError` raised in it passes through, any other
    exception becomes an :class:`~trama.ExecutionError` saying ``what`` failed (``"preparing the
    model"``, or the op, with ``node_id``), with the framework's message.

    ``MemoryError`` and ``RecursionError`` are exceptions like the others here: a model too
    large for this machine, or a framework recursing too deep, is the model's failure to run,
    not a crash of the caller. So is any ``BaseException`` a plugin's code raises
    (``SystemExit``, ``GeneratorExit``...), but ``KeyboardInterrupt``."""
    try:
        yield
    except (TramaError, KeyboardInterrupt):
        raise
    except BaseException as exc:  # a factory's or kernel's sys.exit() or BaseException too
        subject = f"{op} failed" if op is not None else f"{what} failed"
        raise ExecutionError(f"{subject}: {describe_failure(exc)}", node_id=node_id) from exc
