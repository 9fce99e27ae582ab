"""The onnxruntime runtimes: ``"onnxruntime"`` (also ``"onnxruntime:cpu"``) and ``"onnxruntime:cuda"``.

``prepare`` lowers the document once (:func:`trama_onnx.lower`, composites as local functions) and
opens an ``onnxruntime.InferenceSession`` on the bytes in memory (a model over 2 GB goes through a
temporary folder, its weights in an external file). ``run`` checks the inputs against the facts as
every runtime does, runs the session and returns numpy arrays in the model's output order.

A document whose input facts do not give every input's dtype and shape is lowered when it first
runs, for the dtypes and shapes it is given, and again for each new combination (the last
:data:`SESSIONS` are kept).

``profile_json`` runs once on a session of the inlined model (``functions=False``), where
onnxruntime's profile names each node after its trama node, and adds up the time of every ONNX
node of a leaf into that leaf's row. Discovery imports this module to list the runtimes, so it
imports neither onnx nor onnxruntime at the top.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import re
import tempfile
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trama.errors import ExecutionError, TramaError
from trama.execution import (
    Runnable,
    Runtime,
    State,
    as_declared,
    check_facts,
    check_inputs,
    describe_failure,
    framework_failures,
    order_inputs,
    resolve_placement,
    static_costs,
)
from trama.format import Model

if TYPE_CHECKING:
    import numpy as np

    from trama_onnx.lowering import Lowered

__all__ = ["CHECKED", "SESSIONS", "OnnxRunnable", "OnnxRuntime", "runtimes"]

#: How many sessions a runnable keeps for a document lowered per input signature.
SESSIONS = 8

#: How many input signatures a runnable remembers as checked against the facts.
CHECKED = 64

#: onnxruntime's execution provider for each device.
PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}

#: A protobuf message cannot be serialized past 2 GB: larger models go through a file.
_LARGEST_IN_MEMORY = 2**31 - 2**24


class OnnxRuntime(Runtime):
    """onnxruntime on one device: ``"cpu"`` (named ``"onnxruntime"``) or ``"cuda"``."""

    framework = "onnxruntime"

    def __init__(self, device: str = "cpu", *, functions: bool = True) -> None:
        self.device = device
        self.aliases = ("onnxruntime:cpu",) if device == "cpu" else ()
        #: Whether composites are lowered as local functions (``False``: every leaf inlined).
        self.functions = functions

    def name(self) -> str:
        return "onnxruntime" if self.device == "cpu" else f"onnxruntime:{self.device}"

    def providers(self) -> list[str]:
        """The execution providers a session is opened with, in order."""
        own = PROVIDERS[self.device]
        return [own] if own == PROVIDERS["cpu"] else [own, PROVIDERS["cpu"]]

    def is_available(self) -> bool:
        if importlib.util.find_spec("onnxruntime") is None:
            return False
        import onnxruntime

        return PROVIDERS[self.device] in onnxruntime.get_available_providers()

    def unavailable_reason(self) -> str | None:
        if importlib.util.find_spec("onnxruntime") is None:
            return "onnxruntime is not installed"
        if self.is_available():
            return None
        return f"this onnxruntime build has no {PROVIDERS[self.device]} (install onnxruntime-gpu for CUDA)"

    def prepare(self, model: Model, placement: Mapping[str, str] | None = None) -> OnnxRunnable:
        """Lower ``model`` and open its session. The facts are checked against trama's bounds
        first; a placement can only put every node on this runtime's device. Raises the lowering's
        :class:`~trama_onnx.LoweringError` (naming the node and op), the document's validation
        errors, and :class:`~trama.ExecutionError` for anything onnxruntime refuses."""
        check_facts(model)

        def resolve(device: str) -> str:
            if device != self.device:
                raise ExecutionError(f"the {self.name()} runtime runs the whole model on {self.device}")
            return device

        resolve_placement(model, placement, resolve)
        if not self.is_available():
            raise ExecutionError(f"the {self.name()} runtime is not available here: {self.unavailable_reason()}")
        return OnnxRunnable(self, model)


def runtimes() -> list[OnnxRuntime]:
    """The runtimes the plugin registers."""
    return [OnnxRuntime("cpu"), OnnxRuntime("cuda")]


class _Session:
    """One lowered model and its onnxruntime session."""

    def __init__(self, runtime: OnnxRuntime, model: Model, lowered: Lowered, *, profile: str | None = None) -> None:
        import onnxruntime

        self.lowered = lowered
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        if profile is not None:
            options.enable_profiling = True
            options.profile_file_prefix = profile
        proto = lowered.proto
        self.inputs = [value.name for value in proto.graph.input]
        values = [*proto.graph.input, *proto.graph.output]
        #: onnxruntime's Python API takes and gives no bfloat16 arrays: those go through OrtValues.
        self.bfloat16 = any(value.type.tensor_type.elem_type == _BFLOAT16 for value in values)
        #: The graph's outputs, and whether they are the model's outputs in order (none static).
        self.outputs = [value.name for value in proto.graph.output]
        self.direct = not lowered.static and list(lowered.outputs) == list(range(len(model.outputs)))
        self.session: Any = None
        if not proto.graph.output:
            return  # every output is a Python value: nothing to run
        with _ort_failures("preparing the model", model):
            if proto.ByteSize() < _LARGEST_IN_MEMORY:
                source: Any = proto.SerializeToString()
            else:
                source = self._saved(proto)
            self.session = onnxruntime.InferenceSession(source, options, providers=runtime.providers())

    def _saved(self, proto: Any) -> str:
        import onnx
        from onnx.external_data_helper import convert_model_to_external_data

        self._folder = tempfile.TemporaryDirectory(prefix="trama-onnx-")
        path = Path(self._folder.name) / "model.onnx"
        copy = onnx.ModelProto()
        copy.CopyFrom(proto)
        convert_model_to_external_data(copy, all_tensors_to_one_file=True, location="weights.bin")
        onnx.save_model(copy, str(path))
        return str(path)

    def run(self, model: Model, values: Sequence[Any]) -> list[Any]:
        if self.session is None:
            return self._results(model, [])
        feed = dict(zip(self.inputs, values, strict=True))
        try:  # (not _ort_failures: a run of a small model is tens of microseconds)
            if self.bfloat16:
                given = {name: _ort_value(value) for name, value in feed.items()}
                produced = [_from_ort_value(value) for value in self.session.run_with_ort_values(None, given)]
            else:
                produced = self.session.run(self.outputs, feed)
        except (TramaError, KeyboardInterrupt):
            raise
        except Exception as error:
            raise _ort_error("running the model", model, error) from error
        if self.direct:
            return produced
        return self._results(model, produced)

    def _results(self, model: Model, produced: Sequence[Any]) -> list[Any]:
        """The model's outputs: the session's, and the Python values the lowering computed."""
        results: list[Any] = [None] * len(model.outputs)
        for index, value in self.lowered.static.items():
            results[index] = value
        for index, value in zip(self.lowered.outputs, produced, strict=True):
            results[index] = value
        return results


class OnnxRunnable(Runnable):
    """A document prepared for onnxruntime (see the module's documentation)."""

    def __init__(self, runtime: OnnxRuntime, model: Model) -> None:
        import numpy as np

        from trama_onnx.lowering import facts_complete

        self._runtime = runtime
        self._model = model
        self._complete = facts_complete(model)
        self._ndarray = np.ndarray
        #: The input signatures (each input's dtype and shape) that passed the check.
        self._checked: set[tuple[Any, ...]] = set()
        self._sessions: OrderedDict[Any, _Session] = OrderedDict()
        if self._complete:
            self._sessions[None] = self._open(None)

    @property
    def model(self) -> Model:
        return self._model

    @property
    def runtime(self) -> OnnxRuntime:
        return self._runtime

    def onnx_model(self, inputs: Sequence[Any] | Mapping[str, Any] | None = None) -> Any:
        """The ``onnx.ModelProto`` this runnable runs (for a document lowered per input signature,
        the one for ``inputs``)."""
        if inputs is None:
            if not self._complete:
                raise ExecutionError("this document is lowered per input signature: give the inputs")
            return self._sessions[None].lowered.proto
        return self._session_for(self._inputs(inputs)).lowered.proto

    def _open(
        self, inputs: Mapping[str, Any] | None, *, functions: bool | None = None, profile: str | None = None
    ) -> _Session:
        from trama_onnx.lowering import lowered

        use = self._runtime.functions if functions is None else functions
        result = lowered(self._model, inputs=inputs, functions=use, check=False)
        return _Session(self._runtime, self._model, result, profile=profile)

    def _session_for(self, values: Sequence[Any]) -> _Session:
        if self._complete:
            return self._sessions[None]
        key = tuple((str(value.dtype), tuple(value.shape)) for value in values)
        found = self._sessions.get(key)
        if found is None:
            found = self._open(dict(zip(self._model.inputs, values, strict=True)))
            self._sessions[key] = found
            while len(self._sessions) > SESSIONS:
                self._sessions.popitem(last=False)
        else:
            self._sessions.move_to_end(key)
        return found

    def _inputs(self, inputs: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
        names = self._model.inputs
        ordered = order_inputs(names, inputs)
        if all(type(value) is self._ndarray for value in ordered):
            return ordered  # numpy arrays are what the session takes, as they are
        facts = self._model.input_facts or [None] * len(names)
        converted = []
        for index, (name, value, fact) in enumerate(zip(names, ordered, facts, strict=True)):
            with framework_failures(f"converting input {name!r}"):
                converted.append(_as_array(as_declared(value, fact, name, index), name))
        return converted

    def _check(self, values: Sequence[np.ndarray]) -> None:
        """:func:`~trama.execution.check_inputs`, which reads nothing but each array's dtype and
        shape: a signature that passed once is not checked again (a run on a small model is a few
        tens of microseconds, and the check would be a good part of that)."""
        signature = tuple((value.dtype, value.shape) for value in values)
        if signature in self._checked:
            return
        check_inputs(self._model, values)
        if len(self._checked) >= CHECKED:
            self._checked.clear()
        self._checked.add(signature)

    def run(self, inputs: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
        values = self._inputs(inputs)
        self._check(values)
        return self._session_for(values).run(self._model, values)

    def run_with_state(self, inputs: Sequence[Any] | Mapping[str, Any], states: dict[str, Any]) -> list[Any]:
        """As :meth:`run`: the lowered ops keep no state between runs."""
        return self.run(inputs)

    def spawn_state(self) -> State:
        return State(self, {})

    def profile_json(self, inputs: Sequence[Any] | Mapping[str, Any]) -> dict[str, Any]:
        """One run on a profiling session of the inlined model; each leaf's time is the sum of its
        ONNX nodes' kernel times (onnxruntime's profile, node names being trama ids)."""
        values = self._inputs(inputs)
        binding = check_inputs(self._model, values)
        named = None if self._complete else dict(zip(self._model.inputs, values, strict=True))
        with tempfile.TemporaryDirectory(prefix="trama-onnx-profile-") as folder:
            session = self._open(named, functions=False, profile=str(Path(folder) / "profile"))
            started = time.perf_counter()
            session.run(self._model, values)
            total = time.perf_counter() - started
            events: list[dict[str, Any]] = []
            if session.session is not None:
                path = session.session.end_profiling()
                with framework_failures("reading onnxruntime's profile"):
                    events = json.loads(Path(path).read_text())
        ids = {node.id for node in session.lowered.builder.nodes}
        calls, seconds = _node_times(events, ids, session.lowered.proto.graph)
        shapes = _shapes(session.lowered.facts, binding)
        with framework_failures("profiling"):
            return static_costs(self._model, calls, seconds, shapes, total, runtime=self._runtime.name())


def _node_times(
    events: Sequence[Mapping[str, Any]], ids: set[str], graph: Any = None
) -> tuple[dict[str, int], dict[str, float]]:
    """Kernel times by trama node. onnxruntime's profile names a kernel after its ONNX node, which
    is a trama id (``root.fc``, ``root.fc#2``) or, for a node its optimizer made by fusing several
    (a convolution with its batch norm and activation, a matrix product with its bias and
    activation), after one of their names or outputs (``root.relu.y_nchwc``,
    ``fused root.fc#1/MatMulAddFusion``). Each kernel counts for the longest node id its name
    (``fused`` left out) starts with; where that leaf has no ONNX node of the kernel's op type
    (a convolution named after the activation fused into it), for the nearest leaf upstream in
    ``graph`` (the inlined ``onnx.GraphProto``) that has one, so that a leaf fused into another's
    kernel is timed in that one's row. The others (layout changes the optimizer added) count only
    in the total."""
    calls: dict[str, int] = {}
    seconds: dict[str, float] = {}
    suffix = "_kernel_time"
    lineage = _Lineage(graph, ids) if graph is not None else None
    for event in events:
        name = event.get("name", "")
        if event.get("cat") != "Node" or not isinstance(name, str) or not name.endswith(suffix):
            continue
        node_id = _owner(name[: -len(suffix)].removeprefix(_FUSED), ids)
        if node_id is None:
            continue
        if lineage is not None:
            node_id = lineage.computing(node_id, str(event.get("args", {}).get("op_name", "")))
        calls[node_id] = 1
        seconds[node_id] = seconds.get(node_id, 0.0) + float(event.get("dur", 0)) / 1e6
    return calls, seconds


#: How onnxruntime's optimizer begins the name of a node it fused with the activation after it.
_FUSED = "fused "

#: The ONNX op types a fused kernel of onnxruntime's stands for (any other stands for itself).
_FUSED_KERNELS: dict[str, frozenset[str]] = {
    "FusedConv": frozenset({"Conv"}),
    "FusedGemm": frozenset({"Gemm", "MatMul"}),
    "Gemm": frozenset({"Gemm", "MatMul"}),
    "FusedMatMul": frozenset({"MatMul"}),
}

#: How many ONNX nodes upstream a fused kernel's own leaf is looked for.
_UPSTREAM = 16


class _Lineage:
    """The inlined graph's leaves: each leaf's ONNX op types, and the ONNX nodes upstream."""

    def __init__(self, graph: Any, ids: set[str]) -> None:
        self._owners: dict[int, str | None] = {}
        self._types: dict[str, set[str]] = {}
        self._nodes: dict[str, list[Any]] = {}
        self._producers: dict[str, Any] = {}
        for node in graph.node:
            owner = _owner(node.name, ids)
            self._owners[id(node)] = owner
            if owner is not None:
                self._types.setdefault(owner, set()).add(node.op_type)
                self._nodes.setdefault(owner, []).append(node)
            for output in node.output:
                self._producers[output] = node

    def computing(self, node_id: str, op_type: str) -> str:
        """The leaf a kernel of ``op_type`` named after leaf ``node_id`` computes for."""
        wanted = _FUSED_KERNELS.get(op_type, frozenset({op_type}))
        if not op_type or self._types.get(node_id, set()) & wanted:
            return node_id
        queue = list(self._nodes.get(node_id, ()))
        seen = {id(node) for node in queue}
        for _ in range(_UPSTREAM):
            if not queue:
                break
            node = queue.pop(0)
            owner = self._owners[id(node)]
            if owner is not None and node.op_type in wanted:
                return owner
            for value in node.input:
                producer = self._producers.get(value)
                if producer is not None and id(producer) not in seen:
                    seen.add(id(producer))
                    queue.append(producer)
        return node_id


def _owner(name: str, ids: set[str]) -> str | None:
    """The longest node id that ``name`` is, or starts with up to a separator."""
    for end in range(len(name), 0, -1):
        if (end == len(name) or name[end] in ".#/_:~") and name[:end] in ids:
            return name[:end]
    return None


def _shapes(facts: Any, binding: Mapping[str, int]) -> dict[str, list[list[list[int]]]]:
    """Each leaf's input and output shapes in this run, where the shape pass knows them."""
    shapes: dict[str, list[list[list[int]]]] = {}

    def sized(info: Any) -> list[int] | None:
        if info is None:
            return None
        out: list[int] = []
        for size in info.shape:
            if isinstance(size, int):
                out.append(size)
            elif isinstance(size, str) and size in binding:
                out.append(binding[size])
            else:
                return None
        return out

    for node_id, ports in facts.inputs.items():
        ins = [sized(info) for info in ports.values()]
        outs = [sized(info) for info in facts.outputs.get(node_id, {}).values()]
        if all(shape is not None for shape in (*ins, *outs)):
            shapes[node_id] = [[s for s in ins if s is not None], [s for s in outs if s is not None]]
    return shapes


def _as_array(value: Any, name: str) -> np.ndarray:
    import numpy as np

    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, tuple):
        raise ExecutionError(f"input {name!r} is a tuple, which an ONNX graph cannot take")
    detach = getattr(value, "detach", None)
    if callable(detach):
        value = detach().cpu().numpy()
    return np.asarray(value)


#: ONNX's element type of bfloat16 (``onnx.TensorProto.BFLOAT16``).
_BFLOAT16 = 16


def _ort_value(value: np.ndarray) -> Any:
    """An input as an ``OrtValue`` (bfloat16 by its bits: onnxruntime has no numpy type for it)."""
    import numpy as np
    import onnxruntime

    from trama.execution import dtype_of

    array = np.asarray(value)
    if not array.flags.c_contiguous:  # (numpy.ascontiguousarray would make a 0-d array 1-d)
        array = array.copy(order="C")
    if dtype_of(array) == "bfloat16":
        return onnxruntime.OrtValue.ortvalue_from_numpy_with_onnx_type(array.view(np.uint16), _BFLOAT16)
    return onnxruntime.OrtValue.ortvalue_from_numpy(array)


def _from_ort_value(value: Any) -> np.ndarray:
    """An output ``OrtValue`` as a numpy array (bfloat16 copied from its buffer)."""
    import ctypes

    import numpy as np

    from trama.format import numpy_dtype

    if value.data_type() != "tensor(bfloat16)":
        return np.asarray(value.numpy())
    shape = tuple(value.shape())
    raw = ctypes.string_at(value.data_ptr(), 2 * int(np.prod(shape, dtype=np.int64)))
    return np.frombuffer(raw, np.uint16).view(numpy_dtype("bfloat16")).reshape(shape).copy()


_NODE_NAME = re.compile(r"Name:'([^']*)'")


@contextlib.contextmanager
def _ort_failures(what: str, model: Model) -> Iterator[None]:
    """onnxruntime's exceptions as :class:`~trama.ExecutionError`, naming the trama node where its
    message names an ONNX node that is one (``Name:'root.fc'``)."""
    try:
        yield
    except (TramaError, KeyboardInterrupt):
        raise
    except Exception as error:
        raise _ort_error(what, model, error) from error


def _ort_error(what: str, model: Model, error: Exception) -> ExecutionError:
    """onnxruntime's exception as an :class:`~trama.ExecutionError` (see :func:`_ort_failures`)."""
    node_id = None
    match = _NODE_NAME.search(str(error))
    if match:
        node_id = _owner(match.group(1), {node.id for node in model.nodes})
    op = next((node.op for node in model.nodes if node.id == node_id), None)
    subject = f"{op} failed" if op is not None else f"{what} failed"
    return ExecutionError(f"{subject} on onnxruntime: {describe_failure(error)}", node_id=node_id)
