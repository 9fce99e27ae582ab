"""A document prepared for a JAX runtime: compiled once, run as one program, placed, streamed.

:class:`JaxRunnable` runs the document's modules (:mod:`trama_jax.model`) as one ``jax.jit``
function, compiled once per input signature (shapes and dtypes): at prepare time when the
document's input facts give every shape and dtype, else on the first run with such inputs. Each
compilation is timed, and ``profile_json`` reports it.

**Placement** (``prepare(model, placement={"root.encoder": "cpu:1"})``) puts a subtree on another
device: its parameters are stored there (``jax.device_put``), and it runs there. XLA compiles a
program for one device, so a placed model runs as several programs: every subtree whose nodes all
run on one device is one compiled function (a :class:`Segment`), and the composites above them
are walked in Python, each value moved to the device of the node that reads it. An entry used on
several devices lives on the device of its first use (:meth:`JaxRunnable.parameter_devices`) and
is copied, once, at prepare time, to the others.

**Streaming**: a ``State`` carries the recurrent leaves' states (GRU, LSTM) by node path; a
segment's compiled function takes and returns them as a pytree, so a chunk costs one call of one
program.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar

import jax
import numpy as np

from trama.errors import ExecutionError, TramaError
from trama.execution import (
    Runnable,
    State,
    as_declared,
    bound_sizes,
    check_inputs,
    describe_failure,
    framework_failures,
    order_inputs,
    static_costs,
)
from trama.format import Model, numpy_dtype
from trama_jax.model import Evaluation, JaxComposite, JaxLeaf, JaxModule, JaxProgram, value_size_problem, walk
from trama_jax.runtime import device_name

__all__ = ["JaxRunnable", "Segment", "ready"]

T = TypeVar("T")


#: The dtypes JAX holds 64-bit values in while its x64 mode is off (its default).
_NARROWED = {"int64": "int32", "float64": "float32", "uint64": "uint32"}


def _narrowed(value: Any, fact: Any) -> Any:
    """A JAX array for a 64-bit input, held at 32 bits because JAX's x64 mode is off, as the
    numpy array of the declared dtype it stands for (JAX narrows that one the same way)."""
    declared = getattr(fact, "dtype", None)
    if (
        isinstance(value, jax.Array)
        and declared in _NARROWED
        and str(value.dtype) == _NARROWED[declared]
        and not jax.config.read("jax_enable_x64")  # type: ignore[no-untyped-call]
    ):
        return np.asarray(value).astype(numpy_dtype(declared))
    return value


class Segment:
    """A subtree that runs on one device as one compiled function, compiled once per signature
    of its recurrent states and inputs.

    Its learnable tensors are arguments of the compiled function, so that XLA does not fold the
    weights into the program as constants; its other tensors (buffers, constants) are closed
    over, so that they stay concrete while JAX traces (a constant bool mask can index).

    An output that is a Python value (a ``constant`` number, string or list) is not an array and
    cannot be an output of an XLA program: JAX would turn a number into a 0-d array and refuse a
    string. It is known when the program is traced, so it is kept then (:class:`_Program`) and
    given back as it is, outside the compiled function, as the numpy and torch runtimes give it."""

    def __init__(self, module: JaxModule, path: str, device: jax.Device, tensors: Mapping[str, Any]) -> None:
        self.device = device
        self.compile_seconds = 0.0
        self._compiled: dict[Any, _Program] = {}
        learnable = module.params  # which entries are learnable (the values used are ``tensors``)
        self._params = {name: tensors[name] for name in module.tensor_entries() if name in learnable}
        buffers = {name: tensors[name] for name in module.tensor_entries() if name not in learnable}

        def function(params: Mapping[str, Any], states: dict[str, Any] | None, inputs: Mapping[str, Any]) -> Any:
            evaluation = Evaluation({**buffers, **params}, states)
            return module.compute(evaluation, path, inputs), evaluation.states

        self._function = function

    def __call__(self, states: dict[str, Any] | None, inputs: Mapping[str, Any]) -> Any:
        """The outputs and the new states (``None`` without streaming)."""
        inputs = {port: _put(value, self.device) for port, value in inputs.items()}
        return self.compile(states, inputs)(self._params, states, inputs)

    def compile(self, states: dict[str, Any] | None, inputs: Mapping[str, Any]) -> _Program:
        """The program for the signature of ``states`` and ``inputs``, compiled on first use."""
        leaves, structure = jax.tree.flatten((states, inputs))
        signature = (structure, *(_signature(leaf) for leaf in leaves))
        program = self._compiled.get(signature)
        if program is None:
            started = time.perf_counter()
            program = self._compiled[signature] = _Program.compile(self._function, self._params, states, inputs)
            self.compile_seconds += time.perf_counter() - started
        return program

    @property
    def compilations(self) -> int:
        return len(self._compiled)


class _Program:
    """One compiled signature of a segment, and its Python-valued outputs (see :class:`Segment`).

    When some outputs are Python values, the compiled function returns only the array leaves of
    the outputs, and a call puts the Python values back in their places; otherwise it returns
    the outputs as they are."""

    __slots__ = ("_compiled", "_static")

    def __init__(self, compiled: Any, static: tuple[Any, list[Any | None]] | None) -> None:
        self._compiled = compiled
        #: ``None``, or the outputs' tree structure and its leaves, ``None`` where an array goes.
        self._static = static

    @classmethod
    def compile(
        cls, function: Any, params: Mapping[str, Any], states: dict[str, Any] | None, inputs: Mapping[str, Any]
    ) -> _Program:
        """``function`` traced for these arguments and compiled. Tracing runs ``function`` once,
        here: what its outputs hold that is not traced is noted then. A fresh ``jax.jit`` for each
        signature makes sure of that (JAX reuses a trace of the same function and signature)."""
        found: list[tuple[Any, list[Any | None]] | None] = [None]

        def arrays_only(params: Mapping[str, Any], states: dict[str, Any] | None, inputs: Mapping[str, Any]) -> Any:
            outputs, new_states = function(params, states, inputs)
            leaves, structure = jax.tree.flatten(outputs)
            if not any(_is_python_value(leaf) for leaf in leaves):
                return outputs, new_states
            found[0] = (structure, [leaf if _is_python_value(leaf) else None for leaf in leaves])
            return [leaf for leaf in leaves if not _is_python_value(leaf)], new_states

        traced = jax.jit(arrays_only).trace(params, states, inputs)
        check_values(traced.jaxpr)
        compiled = traced.lower().compile()
        return cls(compiled, found[0])

    def __call__(self, params: Mapping[str, Any], states: dict[str, Any] | None, inputs: Mapping[str, Any]) -> Any:
        outputs, new_states = self._compiled(params, states, inputs)
        if self._static is None:
            return outputs, new_states
        structure, leaves = self._static
        arrays = iter(outputs)
        whole = [next(arrays) if leaf is None else leaf for leaf in leaves]
        return jax.tree.unflatten(structure, whole), new_states


def check_values(program: Any) -> None:
    """Refuse a traced program that makes a value of more than trama's
    :data:`~trama.catalog._limits.MAX_TENSOR_BYTES`, before XLA compiles it: XLA aborts the
    whole process on a shape whose byte size overflows 64 bits. Every leaf's outputs were
    checked as it was traced (naming the node); this walks every equation of the program, its
    inner programs included (iteratively), for the values made inside a kernel."""
    pending = [program]
    seen: set[int] = set()
    while pending:
        jaxpr = pending.pop()
        jaxpr = getattr(jaxpr, "jaxpr", jaxpr)  # a ClosedJaxpr holds its Jaxpr
        if id(jaxpr) in seen or not hasattr(jaxpr, "eqns"):
            continue
        seen.add(id(jaxpr))
        for eqn in jaxpr.eqns:
            for var in eqn.outvars:
                problem = value_size_problem(getattr(var, "aval", None))
                if problem is not None:
                    raise ExecutionError(f"the program would make a value ({eqn.primitive}) {problem}")
            for param in eqn.params.values():
                items = param if isinstance(param, tuple | list) else (param,)
                pending.extend(item for item in items if hasattr(item, "eqns") or hasattr(item, "jaxpr"))


def _is_python_value(leaf: Any) -> bool:
    """Whether an output leaf is a Python value (a number, bool or string), not an array."""
    return isinstance(leaf, (bool, int, float, complex, str)) and not isinstance(leaf, np.generic)


def _signature(leaf: Any) -> tuple[Any, ...]:
    """What a compiled program is specialised to: shape, dtype, and whether a Python number."""
    if isinstance(leaf, (bool, int, float)):
        return (type(leaf),)
    return (tuple(np.shape(leaf)), str(leaf.dtype) if hasattr(leaf, "dtype") else type(leaf).__name__)


def ready(value: T) -> T:
    """``value`` once every array in it is computed (JAX dispatches asynchronously: a timing
    must wait for the work, not for its dispatch)."""
    return jax.block_until_ready(value)  # type: ignore[no-untyped-call,no-any-return]


def _put(value: Any, device: jax.Device) -> Any:
    """An array on ``device`` (moved if it is elsewhere); Python values and tuples of them as
    they are, so that a number keeps its weak promotion."""
    if isinstance(value, jax.Array):
        return value if value.devices() == {device} else jax.device_put(value, device)
    if isinstance(value, np.ndarray):
        return jax.device_put(value, device)
    return value


class JaxRunnable(Runnable):
    """A document prepared for a JAX runtime (see the module's docstring)."""

    def __init__(
        self,
        runtime_name: str,
        model: Model,
        program: JaxProgram,
        device: jax.Device,
        placement: Mapping[str, jax.Device],
    ) -> None:
        self._runtime_name = runtime_name
        self._model = model
        self._program = program
        self._default = device
        self._placement = dict(placement)
        self._paths = dict(_paths(program))
        self._devices = {path: self._device_of(path) for path in self._paths}
        self._entry_devices = self._home_devices()
        self._tensors = self._placed_tensors()
        self._segments: dict[str, Segment] = {}
        top = "" if self._uniform("") else None
        for path in [top] if top is not None else self._segment_roots():
            module = program if path == "" else self._paths[path]
            device = self._devices[path] if path else next(iter(self._devices.values()), self._default)
            self._segments[path] = Segment(module, path, device, self._tensors[device])

    # Where things run -----------------------------------------------------------------------

    def _device_of(self, path: str) -> jax.Device:
        """The device of the node at ``path``: that of its nearest placed ancestor (or itself)."""
        probe = path
        while probe:
            if probe in self._placement:
                return self._placement[probe]
            probe = probe.rpartition(".")[0]
        return self._default

    def _uniform(self, path: str) -> bool:
        """Whether every node at or under ``path`` runs on one device."""
        prefix = f"{path}." if path else ""
        devices = {device for p, device in self._devices.items() if p == path or p.startswith(prefix)}
        return len(devices) <= 1

    def _segment_roots(self) -> Iterator[str]:
        """The highest paths whose subtrees each run on one device, in document order."""
        pending = [member.name for member in reversed(self._program.members)]
        while pending:
            path = pending.pop()
            module = self._paths[path]
            if self._uniform(path) or not isinstance(module, JaxComposite):
                yield path
            else:
                pending.extend(f"{path}.{member.name}" for member in reversed(module.members))

    def _home_devices(self) -> dict[str, jax.Device]:
        """Each tensor entry's device: that of the first leaf (in document order) using it."""
        homes: dict[str, jax.Device] = {}
        for path, module in self._paths.items():
            if isinstance(module, JaxLeaf):
                for slot in module.kernel.tensor_slots:
                    homes.setdefault(module.node.parameters[slot], self._devices[path])
        return homes

    def _placed_tensors(self) -> dict[jax.Device, dict[str, Any]]:
        """Every tensor on every device that reads it: on its home device first, copied from
        there to the others (once, here, not at every run)."""
        program = self._program
        values = {**program.buffers, **program.params}
        homes = {name: jax.device_put(value, self._entry_devices[name]) for name, value in values.items()}
        placed: dict[jax.Device, dict[str, Any]] = {self._default: {}}
        for path, module in self._paths.items():
            if isinstance(module, JaxLeaf):
                device = self._devices[path]
                on_device = placed.setdefault(device, {})
                for slot in module.kernel.tensor_slots:
                    name = module.node.parameters[slot]
                    if name not in on_device:
                        home = homes[name]
                        on_device[name] = home if self._entry_devices[name] == device else jax.device_put(home, device)
        return placed

    @property
    def segments(self) -> Mapping[str, Segment]:
        """The compiled subtrees by path (``""``: the whole document, when it is not placed)."""
        return self._segments

    def device_of(self, path: str) -> jax.Device:
        """The device the node at ``path`` runs on."""
        return self._devices[path]

    def tensors_on(self, device: jax.Device) -> Mapping[str, Any]:
        """The tensor entries that nodes on ``device`` read, stored there."""
        return self._tensors[device]

    def parameter_devices(self) -> dict[str, str]:
        """Where each tensor entry lives, by entry name: ``{"root.encoder.0.weight": "cpu:1"}``."""
        return {name: device_name(device) for name, device in self._entry_devices.items()}

    # Running --------------------------------------------------------------------------------

    @property
    def model(self) -> Model:
        return self._model

    @property
    def program(self) -> JaxProgram:
        """The modules this runnable runs (``program.apply`` is the same function, uncompiled)."""
        return self._program

    def run(self, inputs: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
        values = self._inputs(inputs)
        try:
            # Waited for here: XLA reports an allocation that fails while the program runs
            # (RESOURCE_EXHAUSTED) only to whoever waits, and jaxlib aborts the process when such
            # a result is read later (a NumPy conversion), instead of raising.
            return ready(self._execute(values, None))
        except TramaError:
            raise
        except Exception as exc:
            raise self._failure(exc, values) from exc

    def run_with_state(self, inputs: Sequence[Any] | Mapping[str, Any], states: dict[str, Any]) -> list[Any]:
        values = self._inputs(inputs)
        try:
            return ready(self._execute(values, states))  # waited for, as in run
        except TramaError:
            raise
        except Exception as exc:
            raise self._failure(exc, values) from exc

    def spawn_state(self) -> State:
        with framework_failures("starting a state"):
            return State(self, self._program.initial_states())

    def _failure(self, exc: Exception, values: dict[str, Any]) -> ExecutionError:
        """An :class:`ExecutionError` for what JAX or XLA raised running the compiled program(s),
        naming the node it came from: a compiled program does not say, so the inputs are run
        again op by op (each leaf on its own, as profiles do), where the failing leaf names
        itself. Only a failing run pays for that."""
        located: ExecutionError | None = None
        try:
            with self._sizes(values):
                ready(self._program.compute(_Probe(self), "", values))
        except ExecutionError as again:
            located = again if again.node_id is not None else None
        except Exception:  # the op-by-op run fails another way: say what the first one said
            located = None
        if located is not None:
            return located
        return ExecutionError(f"running the model failed: {describe_failure(exc)}")

    def _inputs(self, inputs: Sequence[Any] | Mapping[str, Any]) -> dict[str, Any]:
        """The inputs by name (a list as the declared dtype)."""
        names = self.model.inputs
        facts = self.model.input_facts or [None] * len(names)
        values = [
            _narrowed(as_declared(value, fact, name, index), fact)
            for index, (name, value, fact) in enumerate(zip(names, order_inputs(names, inputs), facts, strict=True))
        ]
        return dict(zip(names, values, strict=True))  # checked when they run (_sizes)

    def _sizes(self, inputs: dict[str, Any]) -> contextlib.AbstractContextManager[None]:
        """The inputs checked against their facts (``trama.execution.check_inputs``, once per
        run), and the sizes they bind, bound while the program is traced: a node whose settings
        read them is built for them (:class:`trama.conversion.SizedNode`), once per signature."""
        return bound_sizes(check_inputs(self.model, [inputs[name] for name in self.model.inputs]))

    def _execute(self, inputs: dict[str, Any], states: dict[str, Any] | None) -> list[Any]:
        """Run the segments: the one program, or the placed subtrees along the wiring. The
        caller's ``states`` dict is updated with the new states (``State`` keeps it)."""
        program = self._program
        evaluation = _Placed(self, states)
        with self._sizes(inputs):
            if "" in self._segments:
                outputs = evaluation.segment("", program, inputs)
            else:
                outputs = walk(evaluation, None, program.members, inputs, program.bindings)
        if states is not None and evaluation.states is not None:
            states.update(evaluation.states)
        return [outputs[name] for name in program.output_names]

    def compile_for_facts(self) -> None:
        """Compile now, for the document's input facts, when they give every shape and dtype and
        the document runs as one program (a placed one compiles each part when the values of the
        parts before it are known, on the first run). Facts that do not suit the model are left
        for the first run to report, with the real inputs."""
        whole = self._segments.get("")
        if whole is None:
            return
        shapes = []
        for fact in self.input_facts():
            shape = fact.shape
            if fact.dtype is None or shape is None or not all(isinstance(size, int) for size in shape):
                return
            struct = jax.ShapeDtypeStruct(tuple(int(size) for size in shape), numpy_dtype(fact.dtype))  # type: ignore[no-untyped-call]
            shapes.append(struct)
        if shapes:
            with contextlib.suppress(ExecutionError):
                whole.compile(None, self._inputs(shapes))

    # Profiling ------------------------------------------------------------------------------

    @property
    def compile_seconds(self) -> float:
        """Time spent compiling so far, every program and signature together."""
        return sum(segment.compile_seconds for segment in self._segments.values())

    def profile_json(self, inputs: Sequence[Any] | Mapping[str, Any]) -> dict[str, Any]:
        """The core's profile (``docs/runtime.md``) plus ``"compile"``: the seconds spent compiling
        and the number of programs compiled. ``total.seconds`` is one run of the compiled
        program(s), after compiling; each node's ``seconds`` comes from a second, op-by-op run
        that waits for every leaf (a compiled program has no per-node times: XLA fuses them)."""
        values = self._inputs(inputs)
        ready(self.run(values))  # compiled, if it was not yet; a failure named as a run's
        with framework_failures("profiling"):
            started = time.perf_counter()
            ready(self._execute(values, None))
            total = time.perf_counter() - started
            with self._sizes(values):
                probe = _Probe(self)
                ready(self._program.compute(probe, "", values))  # op by op, each primitive compiled on first use
                probe = _Probe(self)
                ready(self._program.compute(probe, "", values))  # the timed one
            profile = static_costs(
                self.model, probe.calls, probe.seconds, probe.shapes, total, runtime=self._runtime_name
            )
        profile["compile"] = {
            "seconds": self.compile_seconds,
            "programs": sum(segment.compilations for segment in self._segments.values()),
        }
        return profile


def _paths(program: JaxProgram) -> Iterator[tuple[str, JaxModule]]:
    """Every node of the program by its path, parents first, in document order; a called module
    once per call, under the caller's path."""
    pending = [(member.name, member.module) for member in reversed(program.members)]
    while pending:
        path, module = pending.pop()
        yield path, module
        if isinstance(module, JaxComposite):
            pending.extend((f"{path}.{member.name}", member.module) for member in reversed(module.members))


class _Placed(Evaluation):
    """The evaluation of one run: a segment runs compiled on its device; above the segments the
    wiring is walked here, in Python."""

    def __init__(self, runnable: JaxRunnable, states: dict[str, Any] | None) -> None:
        super().__init__({}, dict(states) if states is not None else None)
        self._runnable = runnable

    def module(self, module: JaxModule, path: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
        if path in self._runnable.segments:
            return self.segment(path, module, inputs)
        return module.compute(self, path, inputs)

    def descends(self, module: JaxComposite, path: str) -> bool:
        return path not in self._runnable.segments  # a segment runs compiled, as one call

    def segment(self, path: str, module: JaxModule, inputs: Mapping[str, Any]) -> dict[str, Any]:
        segment = self._runnable.segments[path]
        states = None
        if self.states is not None:
            prefix = f"{path}."
            states = {p: s for p, s in self.states.items() if not path or p == path or p.startswith(prefix)}
        outputs, new_states = segment(states, inputs)
        if self.states is not None and new_states is not None:
            self.states.update(new_states)
        return dict(outputs)


class _Probe(Evaluation):
    """An op-by-op evaluation for profiles: each leaf runs on its device, is waited for and
    timed, and its input and output shapes are noted."""

    def __init__(self, runnable: JaxRunnable) -> None:
        super().__init__({})
        self._runnable = runnable
        self.calls: dict[str, int] = {}
        self.seconds: dict[str, float] = {}
        self.shapes: dict[str, list[list[list[int]]]] = {}

    def module(self, module: JaxModule, path: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(module, JaxLeaf):
            return module.compute(self, path, inputs)
        device = self._runnable.device_of(path)
        self.tensors = self._runnable.tensors_on(device)
        inputs = {port: _put(value, device) for port, value in inputs.items()}
        started = time.perf_counter()
        outputs = ready(module.compute(self, path, inputs))
        self.seconds[path] = self.seconds.get(path, 0.0) + time.perf_counter() - started
        self.calls[path] = self.calls.get(path, 0) + 1
        self.shapes[path] = [_shapes(inputs.values()), _shapes(outputs.values())]
        return dict(outputs)


def _shapes(values: Any) -> list[list[int]]:
    return [list(np.shape(value)) for value in values]
