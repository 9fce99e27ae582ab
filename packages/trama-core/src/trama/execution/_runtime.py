"""The runtime API: run a document, not only load it.

Shaped after tract's: a :class:`Runtime` names a backend and a device and prepares a model into
a :class:`Runnable`; a runnable runs inputs to outputs and spawns :class:`State` objects for
streaming, whose recurrent buffers carry over from one call to the next and can be frozen into
an immutable :class:`FrozenState` and thawed into fresh, independent states.

Runtimes come from plugins (the ``trama_runtimes`` hook): ``trama-numpy`` provides ``"numpy"``
and the embedded ``"default"``; framework packages add ``"torch:cpu"``, ``"jax:gpu"`` and the
like. :class:`GraphRuntime` is the base of runtimes that execute the flattened wiring with one
kernel per leaf (see :mod:`trama.execution`).
"""

from __future__ import annotations

import importlib.util
import time
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar

from trama.errors import ExecutionError, RuntimeNotFoundError
from trama.execution._bounds import check_facts, framework_failures
from trama.execution._costs import static_costs
from trama.execution._inputs import as_declared, bound_sizes, check_inputs
from trama.execution._plan import ExecutionPlan, Step, build_plan
from trama.format._model import JSONValue, Model, ValueFact
from trama.format._specs import OpRegistry

__all__ = [
    "FrozenState",
    "GraphRunnable",
    "GraphRuntime",
    "Runnable",
    "Runtime",
    "RuntimeInfo",
    "State",
    "availability",
    "order_inputs",
    "resolve_placement",
    "runtime_for_name",
    "runtimes",
]

#: A runtime's own kind of device (``torch.device``, ``jax.Device``, a name).
DeviceT = TypeVar("DeviceT")

#: The name of the runtime used when none is named (``trama run`` without ``--runtime``).
DEFAULT = "default"

#: Names that pick an available runtime of any installed framework by kind of device.
DEVICE_ALIASES = {"cuda": ("cuda",), "gpu": ("cuda", "rocm", "gpu"), "metal": ("mps", "metal")}


class Runtime(ABC):
    """A backend on a device. Subclasses set ``framework`` and ``device`` and implement
    :meth:`prepare`; ``aliases`` are extra names it answers to (``"default"``)."""

    framework: str = ""
    device: str = "cpu"
    aliases: tuple[str, ...] = ()

    def name(self) -> str:
        """The name :func:`runtime_for_name` knows it by: ``"<framework>:<device>"``."""
        return f"{self.framework}:{self.device}"

    def is_available(self) -> bool:
        """Whether it can run here (its framework is importable and the device exists)."""
        return True

    def unavailable_reason(self) -> str | None:
        """Why :meth:`is_available` says no, in a few words (``None`` when it says yes), for
        ``trama runtimes``. This default can only tell a framework that is not installed from a
        device that is absent; a runtime that knows more (a missing driver) overrides it."""
        if self.is_available():
            return None
        module = self.framework
        try:
            missing = module.isidentifier() and importlib.util.find_spec(module) is None
        except (ImportError, ValueError):  # a framework name that is no module name
            missing = False
        return f"{module} is not installed" if missing else f"no {self.device} device here"

    def for_name(self, name: str) -> Runtime | None:
        """This runtime if it answers to ``name`` (its name or an alias), else ``None``.

        Runtimes with numbered devices override this to answer ``"torch:cuda:1"`` with a runtime
        bound to that device, without listing every device up front."""
        return self if name in (self.name(), *self.aliases) else None

    @abstractmethod
    def prepare(self, model: Model, placement: Mapping[str, str] | None = None) -> Runnable:
        """Check and compile ``model`` for this runtime. ``placement`` maps node ids to devices
        (a subtree goes where its root is placed); a runtime that cannot honour it says so."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name()}>"


@dataclass(frozen=True, slots=True)
class RuntimeInfo:
    """What ``trama.runtimes()`` lists for one runtime."""

    name: str
    framework: str
    device: str
    available: bool
    aliases: tuple[str, ...]


def availability(runtime: Runtime) -> tuple[bool, str | None]:
    """Whether ``runtime`` can run here, and why not: its own answer, or, when its check itself
    fails (a framework that breaks on import, a plugin's defect), no, with what the check raised.
    One runtime's broken check must not break the listing or the choice of the others."""
    try:
        if runtime.is_available():
            return True, None
        return False, runtime.unavailable_reason()
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # a plugin's or a framework's defect (sys.exit() too), reported
        message = " ".join(str(error).split())[:300]
        return False, f"its availability check failed: {type(error).__name__}: {message}"


def _available(runtime: Runtime) -> bool:
    return availability(runtime)[0]


def _registered() -> list[Runtime]:
    from trama.extension._plugins import PluginLoadWarning, plugin_host

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PluginLoadWarning)  # reported by `trama plugins`
        return [runtime for runtime in plugin_host().runtimes() if isinstance(runtime, Runtime)]


def runtimes() -> list[RuntimeInfo]:
    """Every registered runtime, with its framework, device and availability here."""
    return [
        RuntimeInfo(runtime.name(), runtime.framework, runtime.device, _available(runtime), runtime.aliases)
        for runtime in _registered()
    ]


def runtime_for_name(name: str) -> Runtime:
    """The runtime called ``name`` (or aliased so). ``"cuda"``, ``"gpu"`` and ``"metal"`` pick
    an available runtime of any installed framework on such a device.

    ``"default"`` is trama-numpy's reference runtime when it is installed (trama-torch brings
    it); without it, the first available CPU runtime of another installed framework (``jax:cpu``
    after ``pip install trama-jax`` alone), so that every install can run a document."""
    registered = _registered()
    kinds = DEVICE_ALIASES.get(name)
    for runtime in registered:
        candidate = (
            (runtime if runtime.device.split(":")[0] in kinds else None)
            if kinds is not None
            else runtime.for_name(name)
        )
        if candidate is not None and _available(candidate):
            return candidate
    if name == DEFAULT:
        for runtime in registered:
            if runtime.device == "cpu" and _available(runtime):
                return runtime
    available = [r.name() + (f" ({', '.join(r.aliases)})" if r.aliases else "") for r in registered if _available(r)]
    unavailable = [r.name() for r in registered if not _available(r)]
    known = any(r.for_name(name) is not None for r in registered) or kinds is not None
    reason = "is not available on this machine" if known else "is not a known runtime"
    listing = ", ".join(available) or "none"
    extra = f"; registered but unavailable here: {', '.join(unavailable)}" if unavailable else ""
    raise RuntimeNotFoundError(f"runtime {name!r} {reason}; available: {listing}{extra}{_install_hint(name, known)}")


def resolve_placement(
    model: Model, placement: Mapping[str, str] | None, resolve: Callable[[str], DeviceT]
) -> dict[str, DeviceT]:
    """Node id -> device for ``placement`` (node id -> device name), every node checked to be in
    ``model`` and every name turned into the runtime's device by ``resolve``, which raises
    :class:`~trama.ExecutionError` for a device that does not exist here. Runtimes call this
    before building anything, so a typo costs no import."""
    ids = {node.id for node in model.nodes}
    devices: dict[str, DeviceT] = {}
    for node_id, name in (placement or {}).items():
        if node_id not in ids:
            raise ExecutionError(f"placement names node {node_id!r}, which the model does not have")
        try:
            devices[node_id] = resolve(name)
        except ExecutionError as exc:
            raise ExecutionError(f"cannot place {node_id!r} on {name!r}: {exc.message}", node_id=node_id) from None
    return devices


#: The package that provides the runtimes whose names start so (``"torch:cuda"`` -> trama-torch).
PROVIDERS = {
    "default": "trama-numpy",
    "numpy": "trama-numpy",
    "torch": "trama-torch",
    "jax": "trama-jax",
    "onnxruntime": "trama-onnx",
}


def _install_hint(name: str, known: bool) -> str:
    """What to do when a runtime is missing: install its package, or let ``TRAMA_PLUGINS`` load it."""
    from trama.extension._plugins import SELECTION_VARIABLE, plugin_host

    selection = plugin_host().selection()
    package = PROVIDERS.get(name.split(":")[0])
    if known or package is None:
        return ""
    if selection.active and any(distribution == package for _, distribution in selection.skipped):
        return f" ({package} is installed but {SELECTION_VARIABLE} leaves it out)"
    return f"; install {package} (pip install {package})"


class Runnable(ABC):
    """A model prepared for one runtime."""

    @abstractmethod
    def run(self, inputs: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
        """Outputs (in the model's output order) for inputs given in the model's input order or
        by name. Each call starts from fresh recurrent state; use :meth:`spawn_state` to
        stream."""

    @abstractmethod
    def spawn_state(self) -> State:
        """A state for streaming, starting from every stateful node's initial state."""

    @abstractmethod
    def run_with_state(self, inputs: Sequence[Any] | Mapping[str, Any], states: dict[str, Any]) -> list[Any]:
        """Like :meth:`run`, with stateful nodes reading and updating ``states`` (by node id); a
        node missing from ``states`` starts from its initial state. :class:`State` calls this."""

    @abstractmethod
    def profile_json(self, inputs: Sequence[Any] | Mapping[str, Any]) -> dict[str, Any]:
        """Run once, timing each node, and report static costs (see ``docs/runtime.md``)."""

    @property
    @abstractmethod
    def model(self) -> Model:
        """The model this runnable runs."""

    def input_count(self) -> int:
        return len(self.model.inputs)

    def output_count(self) -> int:
        return len(self.model.outputs)

    def input_fact(self, index: int) -> ValueFact:
        """What the document says about input ``index`` (dtype, shape with symbolic dims)."""
        return _fact(self.model.input_facts, index, self.input_count())

    def output_fact(self, index: int) -> ValueFact:
        return _fact(self.model.output_facts, index, self.output_count())

    def input_facts(self) -> list[ValueFact]:
        return [self.input_fact(i) for i in range(self.input_count())]

    def output_facts(self) -> list[ValueFact]:
        return [self.output_fact(i) for i in range(self.output_count())]

    def property_keys(self) -> list[str]:
        """The document's metadata keys."""
        return list(self.model.metadata)

    def property(self, name: str) -> JSONValue:
        """One metadata value (``KeyError`` names the keys there are)."""
        try:
            return self.model.metadata[name]
        except KeyError:
            raise KeyError(f"{name!r} is not a property of this model; it has {self.property_keys()}") from None


def _fact(facts: list[ValueFact | None] | None, index: int, count: int) -> ValueFact:
    if not 0 <= index < count:
        raise IndexError(f"index {index} out of range: the model has {count}")
    fact = facts[index] if facts is not None else None
    return fact if fact is not None else ValueFact()


def order_inputs(names: Sequence[str], inputs: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
    """The caller's inputs in the model's input order: given by name (exactly the model's
    names) or by position (exactly as many). Every runnable accepts both forms, with the same
    errors, so they share this."""
    if isinstance(inputs, Mapping):
        unknown = sorted(set(inputs) - set(names))
        missing = [name for name in names if name not in inputs]
        if unknown or missing:
            raise ExecutionError(
                f"inputs must be exactly {list(names)}"
                + (f"; missing {missing}" if missing else "")
                + (f"; unknown {unknown}" if unknown else "")
            )
        return [inputs[name] for name in names]
    ordered = list(inputs)
    if len(ordered) != len(names):
        raise ExecutionError(f"the model takes {len(names)} input(s) {list(names)}, got {len(ordered)}")
    return ordered


class State:
    """Streaming state: recurrent buffers that carry over from one :meth:`run` to the next."""

    def __init__(self, runnable: Runnable, states: dict[str, Any]) -> None:
        self._runnable = runnable
        self._states = states

    def run(self, inputs: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
        """Like :meth:`Runnable.run`, continuing from the state the previous call left."""
        return self._runnable.run_with_state(inputs, self._states)

    def freeze(self) -> FrozenState:
        """An immutable snapshot; this state goes on changing independently."""
        return FrozenState(self._runnable, dict(self._states))


class FrozenState:
    """An immutable snapshot of a :class:`State`; each :meth:`unfreeze` gives a new, independent
    state starting from it. Kernels never modify a state they are given (they return a new one),
    so the snapshot's buffers are shared safely."""

    def __init__(self, runnable: Runnable, states: dict[str, Any]) -> None:
        self._runnable = runnable
        self._states = MappingProxyType(states)

    def unfreeze(self) -> State:
        return State(self._runnable, dict(self._states))


class GraphRunnable(Runnable):
    """A runnable that walks an :class:`~trama.execution.ExecutionPlan`. Runtimes customise how
    inputs come in (:meth:`convert_input`); kernels come from the framework's registry."""

    def __init__(self, runtime: GraphRuntime, plan: ExecutionPlan) -> None:
        self._runtime = runtime
        self._plan = plan

    @property
    def model(self) -> Model:
        return self._plan.model

    @property
    def plan(self) -> ExecutionPlan:
        return self._plan

    def run(self, inputs: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
        values = self._inputs(inputs)
        with bound_sizes(check_inputs(self.model, values)):
            return self._plan.run(values)

    def run_with_state(self, inputs: Sequence[Any] | Mapping[str, Any], states: dict[str, Any]) -> list[Any]:
        values = self._inputs(inputs)
        with bound_sizes(check_inputs(self.model, values)):
            return self._plan.run(values, states)

    def spawn_state(self) -> State:
        with framework_failures("starting a state"):
            return State(self, self._plan.initial_states())

    def _inputs(self, inputs: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
        names = self.model.inputs
        converted = []
        facts = self.model.input_facts or [None] * len(names)
        for index, (name, value, fact) in enumerate(zip(names, order_inputs(names, inputs), facts, strict=True)):
            with framework_failures(f"converting input {name!r}"):
                converted.append(self._runtime.convert_input(as_declared(value, fact, name, index)))
        return converted

    def profile_json(self, inputs: Sequence[Any] | Mapping[str, Any]) -> dict[str, Any]:
        calls: dict[str, int] = {}
        seconds: dict[str, float] = {}

        def timer(step: Step, elapsed: float) -> None:
            calls[step.node.id] = calls.get(step.node.id, 0) + 1
            seconds[step.node.id] = seconds.get(step.node.id, 0.0) + elapsed

        values = self._inputs(inputs)
        with bound_sizes(check_inputs(self.model, values)):
            started = time.perf_counter()
            self._plan.run(values, timer=timer)
            total = time.perf_counter() - started
            shapes = self._shapes(values)
        with framework_failures("profiling"):
            return static_costs(self.model, calls, seconds, shapes, total, runtime=self._runtime.name())

    def _shapes(self, values: list[Any]) -> dict[str, list[list[list[int]]]]:
        """Input and output shapes of every leaf, from a second, instrumented run."""
        shapes: dict[str, list[list[list[int]]]] = {}
        plan = self._plan
        original = [step.kernel for step in plan.steps]
        try:
            for step in plan.steps:
                step.kernel = _ShapeRecorder(step, shapes)
            plan.run(values)
        finally:
            for step, kernel in zip(plan.steps, original, strict=True):
                step.kernel = kernel
        return shapes


class _ShapeRecorder:
    """Wraps a kernel for one run to note its input and output shapes (for multiply-adds)."""

    def __init__(self, step: Step, shapes: dict[str, list[list[list[int]]]]) -> None:
        self._kernel = step.kernel
        self._id = step.node.id
        self._shapes = shapes

    def __call__(self, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        outputs: Mapping[str, Any] = self._kernel(inputs)
        self._note(inputs, outputs)
        return outputs

    def initial_state(self) -> Any:
        return self._kernel.initial_state()

    def step(self, inputs: Mapping[str, Any], state: Any) -> tuple[Mapping[str, Any], Any]:
        outputs, new_state = self._kernel.step(inputs, state)
        self._note(inputs, outputs)
        return outputs, new_state

    def _note(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> None:
        self._shapes[self._id] = [
            [list(getattr(v, "shape", ())) for v in inputs.values()],
            [list(getattr(v, "shape", ())) for v in outputs.values()],
        ]


class GraphRuntime(Runtime):
    """A runtime that runs the flattened wiring with ``framework``'s kernels on one device."""

    #: Devices this runtime can place nodes on (``placement`` values).
    devices: tuple[str, ...] = ("cpu",)

    def registry(self) -> OpRegistry:
        from trama.extension._plugins import registry

        return registry(self.framework)

    def convert_input(self, value: Any) -> Any:
        """Turn a caller's input into this framework's value (a numpy array, a tensor...)."""
        return value

    def prepare(self, model: Model, placement: Mapping[str, str] | None = None) -> GraphRunnable:
        """Check ``model`` (its facts against trama's bounds, its placement, its validity) and build
        every leaf's kernel. Every failure is a trama error: a framework's exception while a
        kernel is built is an :class:`~trama.ImportModelError` naming the node, any other an
        :class:`~trama.ExecutionError`."""
        from trama.format._validation import validate

        check_facts(model)
        self.check_placement(model, placement)
        with framework_failures("preparing the model"):
            registry = self.registry()
            validate(model, registry)
            return GraphRunnable(self, build_plan(model, registry))

    def check_placement(self, model: Model, placement: Mapping[str, str] | None) -> None:
        """Refuse placements this runtime cannot honour, naming the node and device."""

        def resolve(device: str) -> str:
            if device not in self.devices:
                raise ExecutionError(f"it runs on {', '.join(self.devices)} only (runtime {self.name()})")
            return device

        resolve_placement(model, placement, resolve)
