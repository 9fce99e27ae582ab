"""The JAX runtimes: ``jax:cpu``, ``jax:gpu`` (alias ``jax:cuda``), ``jax:tpu`` and ``jax:metal``.

A graph runtime calls one kernel per leaf from Python; a JAX runtime should not, since what JAX
is good at is compiling a whole function. So :meth:`JaxRuntime.prepare` builds the document's
modules (:func:`trama_jax.model.build`) and returns a :class:`~trama_jax.runnable.JaxRunnable`,
which runs the whole wiring as one ``jax.jit`` function (see there for placement and streaming).

**Devices** are named ``"<kind>:<index>"``: ``"cpu:0"``, ``"gpu:1"``, ``"tpu:0"``, ``"metal:0"``
(``"cuda"`` is a synonym of ``"gpu"``, and a bare kind means index 0), the index counting that
kind's devices as ``jax.devices(kind)`` lists them. A runtime runs on its device: ``"jax:gpu:1"``
on the second GPU, ``"jax:gpu"`` on the first.

Every runtime is listed whether or not its backend exists here; ``is_available()`` asks JAX, and
a backend that is missing or fails to start (a TPU without its library) is simply unavailable.
The plugin lists runtimes whenever anyone looks one up, so this module imports JAX only when a
runtime's availability or devices are asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from trama.errors import ExecutionError, RuntimeNotFoundError
from trama.execution import Runtime, check_facts, framework_failures, resolve_placement
from trama.format import Model

if TYPE_CHECKING:
    import jax

    from trama_jax.runnable import JaxRunnable

__all__ = ["JaxRuntime", "available_devices", "device_name", "resolve_device", "runtimes"]

#: Each device kind and the JAX backend names that may provide it (jax-metal's is "METAL").
KINDS: dict[str, tuple[str, ...]] = {"cpu": ("cpu",), "gpu": ("gpu",), "tpu": ("tpu",), "metal": ("METAL", "metal")}
#: Other spellings of a kind, in runtime and device names.
SYNONYMS = {"cuda": "gpu"}


def _devices(kind: str) -> list[jax.Device]:
    """The devices of one kind here, none when JAX or the backend is missing (a backend that
    fails to start, such as a TPU without its library, counts as missing)."""
    try:
        import jax
    except ImportError:
        return []
    for backend in KINDS[kind]:
        try:
            return list(jax.devices(backend))
        except RuntimeError:
            continue
    return []


def available_devices() -> list[str]:
    """Every device JAX has here, named as placements and runtimes name them."""
    return [f"{kind}:{index}" for kind in KINDS for index in range(len(_devices(kind)))]


def resolve_device(name: str) -> jax.Device:
    """The JAX device ``name`` (``"cpu:1"``, ``"gpu"``, ``"cuda:0"``) stands for;
    :class:`trama.ExecutionError` when the name is malformed or no such device exists here."""
    kind, colon, index = name.partition(":")
    kind = SYNONYMS.get(kind, kind)
    if kind not in KINDS or (colon and not index.isdigit()):
        raise ExecutionError(f"{name!r} is not a JAX device name: use cpu, gpu, tpu or metal, optionally ':<index>'")
    devices = _devices(kind)
    number = int(index) if colon else 0
    if number >= len(devices):
        listing = ", ".join(available_devices()) or "none"
        raise ExecutionError(f"JAX device {name!r} is not available here; available: {listing}")
    return devices[number]


def device_name(device: jax.Device) -> str:
    """The name of a JAX device, as :func:`resolve_device` reads it back."""
    for kind in KINDS:
        devices = _devices(kind)
        if device in devices:
            return f"{kind}:{devices.index(device)}"
    return str(device)  # pragma: no cover - a device of a kind this module does not list


class JaxRuntime(Runtime):
    """The JAX runtime of one device kind (and, for ``"jax:gpu:1"``, one device of it)."""

    framework = "jax"

    def __init__(self, kind: str, *, index: int | None = None, aliases: tuple[str, ...] = ()) -> None:
        self.kind = kind
        self.index = index
        self.device = kind if index is None else f"{kind}:{index}"
        self.aliases = aliases

    def is_available(self) -> bool:
        return len(_devices(self.kind)) > (self.index or 0)

    def for_name(self, name: str) -> Runtime | None:
        """Also answers ``"jax:gpu:1"`` (and ``"jax:cuda:1"``) with a runtime on that device."""
        if name in (self.name(), *self.aliases):
            return self
        framework, _, rest = name.partition(":")
        kind, colon, index = rest.partition(":")
        if framework != self.framework or SYNONYMS.get(kind, kind) != self.kind or self.index is not None:
            return None
        return JaxRuntime(self.kind, index=int(index)) if colon and index.isdigit() else None

    def prepare(self, model: Model, placement: Mapping[str, str] | None = None) -> JaxRunnable:
        """Check the document, build its modules, put their tensors on their devices, and compile
        it right away if its input facts say every shape and dtype.

        Facts are checked against trama's bounds first (:func:`trama.execution.check_facts`), and
        every failure is a trama error: JAX's and XLA's own exceptions come out as
        :class:`trama.ExecutionError`."""
        from trama.extension import registry as discovered
        from trama.format import validate
        from trama_jax.model import build
        from trama_jax.runnable import JaxRunnable

        check_facts(model)  # before XLA sees a shape: one whose byte size overflows aborts it
        if not self.is_available():
            listing = ", ".join(available_devices()) or "none (is jax installed?)"
            raise RuntimeNotFoundError(f"runtime {self.name()!r} is not available here; JAX devices: {listing}")
        device = resolve_device(self.device)
        placed = _check_placement(model, placement)
        with framework_failures("preparing the model"):
            registry = discovered(self.framework)
            validate(model, registry)
            runnable = JaxRunnable(self.name(), model, build(model, registry), device, placed)
            runnable.compile_for_facts()
        return runnable


def _check_placement(model: Model, placement: Mapping[str, str] | None) -> dict[str, jax.Device]:
    """The placement's devices, each node checked to exist and each device to be here."""
    return resolve_placement(model, placement, resolve_device)


def runtimes() -> list[Runtime]:
    """The runtimes the plugin registers, one per JAX backend."""
    return [
        JaxRuntime("cpu"),
        JaxRuntime("gpu", aliases=("jax:cuda",)),
        JaxRuntime("tpu"),
        JaxRuntime("metal"),
    ]
