"""Building trama-jax kernels from torch modules, and holding them to torch and to trama-numpy.

The tests build each node by hand (:func:`torch_slots`: the module's ``state_dict``, with ``.``
as ``_``, and its attributes named like the catalog's slots) instead of through the torch
exporter: the kernels are checked against torch itself, not against another piece of trama.
Every slot is checked against the catalog's spec first, so a misnamed slot fails here rather than
silently falling back to a default. :meth:`Built.reference` runs trama-numpy's kernel for the same
node, the catalog's reference implementation.

:class:`Errors` records the largest error seen per op; the test modules print it at the end
(``pytest -s``), which is where the figures in reports come from.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import trama
from trama.catalog import standard_registry
from trama_jax import _registry
from trama_jax.kernel import JaxKernel
from trama_numpy._registry import implementations as numpy_implementations

#: float32 agreement with torch promised by the catalog's implementations.
RTOL = ATOL = 1e-5

_SPECS = standard_registry()


def state(module: torch.nn.Module) -> dict[str, np.ndarray]:
    """A module's parameters and buffers as slots: its ``state_dict`` keys with ``.`` as ``_``."""
    return {name.replace(".", "_"): value.detach().numpy().copy() for name, value in module.state_dict().items()}


def torch_slots(op: str, module: torch.nn.Module, **settings: Any) -> dict[str, Any]:
    """The slots of ``op`` for ``module``, read the way the catalog names them: every slot that is
    a key of the module's state (``.`` as ``_``) or one of its attributes (the catalog names its
    settings after torch's constructor arguments, which torch keeps as attributes), and then
    ``settings``, which win: constructor arguments torch does not keep, forward flags.

    Attribute values are put in the catalog's form: tuples become lists, and an int where the
    slot holds a list is one entry per spatial dimension (torch's pools keep ``kernel_size=2``).
    """
    spec = _SPECS[op]
    tensors = state(module)
    dimensions = 1 if op.endswith("1d") else 2
    slots: dict[str, Any] = {}
    for schema in spec.parameters:
        name = schema.name
        if name in tensors:
            slots[name] = tensors[name]
            continue
        value = getattr(module, name, _MISSING)
        if value is _MISSING or isinstance(value, (torch.Tensor, torch.nn.Module)) or callable(value):
            continue
        if isinstance(value, tuple):
            value = list(value)
        elif "list" in schema.types and isinstance(value, int) and not isinstance(value, bool):
            value = [value] * dimensions
        if value is None and not schema.accepts(None):
            continue  # a state torch does not have (running statistics when not tracking)
        slots[name] = value
    slots.update(settings)
    return slots


_MISSING = object()


def _value(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        value = value.detach().numpy()
    if isinstance(value, np.ndarray):
        return trama.Tensor.from_array(np.ascontiguousarray(value))
    return value


@dataclass
class Built:
    """A node, its parameters and the jax kernel its factory built (plus trama-numpy's, the reference)."""

    node: trama.Node
    parameters: dict[str, trama.Parameter]
    kernel: JaxKernel

    @property
    def tensors(self) -> dict[str, jax.Array]:
        """What a runtime passes ``apply``: the kernel's tensor slots as JAX arrays."""
        return {slot: jnp.asarray(np.asarray(self.parameters[slot].value)) for slot in self.kernel.tensor_slots}

    def apply(self, inputs: Mapping[str, Any], *, jit: bool = True) -> dict[str, Any]:
        """The kernel's outputs as numpy arrays (``None`` stays ``None``), through ``jax.jit`` (as
        runtimes call it, and one compilation instead of one per primitive: the faster way to test)
        or eagerly, op by op."""
        arguments = {port: jnp.asarray(value) for port, value in inputs.items()}
        apply = jax.jit(self.kernel.apply) if jit else self.kernel.apply
        return {
            name: None if value is None else np.asarray(value) for name, value in apply(self.tensors, arguments).items()
        }

    def reference(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """trama-numpy's kernel for the same node and parameters, on the same inputs."""
        kernel = numpy_implementations()[self.node.op](self.node, children={}, parameters=self.parameters)
        return dict(kernel({port: np.asarray(value) for port, value in inputs.items()}))


def kernel_factories() -> Mapping[str, Any]:
    """The kernel factories themselves, by op (the registry hands them out wrapped into modules)."""
    _registry.implementations()  # imports every op module, which registers its factories
    return _registry._FACTORIES


def build(op: str, slots: Mapping[str, Any], connected: Sequence[str] | None = None) -> Built:
    """The jax kernel of a one-node document with these slots, from the registered factory.

    ``connected`` names the input ports wired to the node (default: the spec's required ones);
    ``None`` slot values are kept (a null slot), as documents may hold them.
    """
    spec = _SPECS[op]
    parameters = {}
    for name, value in slots.items():
        schema = spec.slot(name)
        assert schema is not None, f"{op} has no slot {name!r}"
        wrapped = _value(value)
        assert schema.accepts(wrapped), f"{op} slot {name!r} refuses {wrapped!r}"
        parameters[name] = trama.Parameter(wrapped, learnable=schema.learnable is not False)
    if connected is None:
        connected = [port for port in spec.inputs if port not in spec.optional_inputs]
    node = trama.Node(
        id="net.layer",
        op=op,
        inputs={port: trama.Ref(trama.INPUT, port) for port in connected},
        outputs=list(spec.outputs),
        parameters={name: f"net.layer.{name}" for name in slots},
    )
    kernel = kernel_factories()[op](node, children={}, parameters=parameters)
    assert isinstance(kernel, JaxKernel)
    return Built(node, parameters, kernel)


class Errors:
    """The largest absolute and relative error against torch seen per op, for the report.

    The relative error is normwise, the largest absolute error over the largest expected
    magnitude: elementwise ratios would be dominated by outputs near zero, where any rounding is
    a large fraction of the value.
    """

    def __init__(self) -> None:
        self.worst: dict[str, tuple[float, float]] = {}

    def check(self, op: str, actual: Any, expected: Any, *, rtol: float = RTOL, atol: float = ATOL) -> None:
        """``actual`` has ``expected``'s dtype and shape and its values within tolerance (NaN
        where it has NaN); the error is recorded."""
        if isinstance(expected, torch.Tensor):
            expected = expected.detach().numpy()
        actual, expected = np.asarray(actual), np.asarray(expected)
        assert actual.dtype == expected.dtype, f"{op}: dtype {actual.dtype}, expected {expected.dtype}"
        assert actual.shape == expected.shape, f"{op}: shape {actual.shape}, expected {expected.shape}"
        wide, reference = actual.astype(np.float64), expected.astype(np.float64)
        np.testing.assert_allclose(wide, reference, rtol=rtol, atol=atol, equal_nan=True, err_msg=op)
        finite = np.isfinite(reference)
        absolute = float(np.max(np.abs(wide - reference)[finite], initial=0.0))
        scale = float(np.max(np.abs(reference)[finite], initial=0.0))
        relative = absolute / scale if scale else 0.0
        old = self.worst.get(op, (0.0, 0.0))
        self.worst[op] = (max(old[0], absolute), max(old[1], relative))

    def fixture(self) -> Any:
        """A module-scoped, autouse fixture that prints the table after the module's tests: bind it
        to a name in the test module (``report_errors = ERRORS.fixture()``)."""

        @pytest.fixture(scope="module", autouse=True)
        def report_errors() -> Iterator[None]:
            yield from self.report()

        return report_errors

    def report(self) -> Iterator[None]:
        """A module-scoped fixture body: print the table once the module's tests have run."""
        yield
        width = max(map(len, self.worst), default=0)
        print("\nlargest error against torch (float32), per op: absolute, normwise relative")
        for op, (absolute, relative) in sorted(self.worst.items()):
            print(f"  {op:<{width}}  {absolute:.3g}  {relative:.3g}")


def torch_grads(module: torch.nn.Module, loss: torch.Tensor) -> dict[str, np.ndarray]:
    """The gradient of ``loss`` with respect to each of ``module``'s parameters, by slot name."""
    named = dict(module.named_parameters())
    grads = torch.autograd.grad(loss, list(named.values()))
    return {name.replace(".", "_"): grad.numpy() for name, grad in zip(named, grads, strict=True)}


def assert_gradients_match(grads: Mapping[str, Any], module: torch.nn.Module, loss: torch.Tensor) -> None:
    """``grads`` (JAX's, by slot) are finite and torch's gradients of ``loss`` within 1e-4: the
    two sum a gradient's terms in different orders, over a loss of many outputs."""
    expected = torch_grads(module, loss)
    assert set(grads) == set(expected)
    for slot, grad in grads.items():
        assert np.isfinite(grad).all(), slot
        np.testing.assert_allclose(grad, expected[slot], rtol=1e-4, atol=1e-4, err_msg=slot)


#: torch warns that it copies the input for an even kernel with padding "same"; that is its business.
SAME_PADDING_COPIES = pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning")
