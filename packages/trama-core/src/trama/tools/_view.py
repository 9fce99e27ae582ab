"""A model as one self-contained HTML page, for people: ``trama view FILE -o FILE.html``.

The page is a browser for the tree: every node with its name, op, recorded class and parameter
count (its own tensors' elements and its subtree's), collapsible to any depth; a search box;
and, for the node selected, its settings (a tensor as ``f32[32, 64]``, learnable or not), what
each input port reads and what each output is, with dtype and shape where they are known, the
wiring between the children of a composite (which sibling feeds which), and the composites of
the same structure (``×24 LlamaDecoderLayer``, :mod:`trama.tools._repeats`).

It is one file that works offline: the HTML, its CSS and script (``view_template.html``, package
data) and the model's data, which is JSON in a ``<script type="application/json">`` element,
escaped so that nothing a document holds (a ``</script>`` in its metadata) can end the element
early, and rendered by the script with text nodes only, never as markup. A content security
policy forbids every network request. No tensor's data is embedded, only dtypes and shapes: a
zoo model's page is tens to hundreds of kilobytes. The same model always gives the same bytes.

Where types come from:

* without a run, as ``trama ssa`` states them: the model inputs' and outputs' facts, a
  ``constant``'s tensor, and what the wiring carries of them into and out of composites
  (nothing is inferred);
* with :func:`run_shapes` (``trama view --shapes``), from one run of the model on a graph runtime
  (numpy by default) with example inputs built from the input facts: every element is 1 (a valid
  index, an attention mask that masks nothing), each symbolic size is the one ``--size
  SYMBOL=N`` gives or 2 (within the range the document allows), or the inputs are read from
  files (``--input NAME=FILE.npy``). Every leaf's input and output dtype and shape are recorded,
  and a composite's are those of the values its ports read and its outputs are bound to. The
  page says which inputs the run used: the shapes are those of that run, not general facts.

The page opens with the nodes down to depth 3 shown (the top-level nodes are depth 1) and the
first top-level node selected. A URL fragment changes that, so a link can point into a model:
``#select=root.model.layers.0.mlp`` selects a node and shows it, ``expand=ID,ID`` expands those
composites (and their ancestors), ``depth=N`` shows nodes down to depth N, ``q=TEXT`` searches.
"""

from __future__ import annotations

import argparse
import functools
import html
import json
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from trama.errors import TramaError
from trama.format._lazy import is_tensor
from trama.format._model import INPUT, Model, Node, Ref, ValueFact
from trama.tools._repeats import repeated_blocks
from trama.tools._ssa import (
    _composite_label,
    _signature,
    _View,
    describe_metadata_value,
    format_fact,
    format_value,
)
from trama.tools._summary import summarize

__all__ = [
    "DEFAULT_SIZE",
    "NodeShapes",
    "ShapeRun",
    "example_inputs",
    "render_html",
    "run_shapes",
    "run_view",
    "view_arguments",
    "view_data",
]

#: The size a symbolic axis of the example inputs gets when ``--size`` does not name it.
DEFAULT_SIZE = 2
#: The package data file that holds the page: its HTML, CSS and script.
TEMPLATE = "view_template.html"
#: A setting's or a metadata value's text is cut to this many characters (a long ``getitem``
#: index, free-form metadata): the page is for reading, the document has the whole value.
_VALUE_WIDTH = 400
#: Stands for ", " inside a type in :mod:`trama.tools._ssa`'s texts.
_KEEP = "\x00"


@dataclass(frozen=True, slots=True)
class NodeShapes:
    """The dtype and shape of what one node read and computed in a run, by port and by output
    (``None`` where the run has none: a node that did not run)."""

    inputs: dict[str, ValueFact | None]
    outputs: dict[str, ValueFact | None]


@dataclass(frozen=True, slots=True)
class ShapeRun:
    """What :func:`run_shapes` recorded: each node's :class:`NodeShapes` by id, the inputs the
    model ran on (their dtype and shape, by name), and the runtime it ran on."""

    nodes: dict[str, NodeShapes]
    inputs: dict[str, ValueFact]
    runtime: str

    def describe(self) -> str:
        """One line for the page: which inputs the shapes come from."""
        inputs = ", ".join(f"{name}: {_type_text(fact)}" for name, fact in self.inputs.items())
        return f"shapes of one {self.runtime} run on inputs {inputs or '(none)'}"


# --- shapes from one run ---------------------------------------------------------------------


def example_inputs(model: Model, sizes: Mapping[str, int] | None = None) -> dict[str, Any]:
    """Inputs for one run of ``model``, by name, from its input facts: numpy arrays of ones of
    the stated dtype (float32 where none is stated) and shape, each symbolic axis ``sizes[symbol]``
    or :data:`DEFAULT_SIZE` (moved into the range ``model.symbols`` allows).

    Raises :class:`~trama.errors.TramaError` for an input whose facts state no shape, and for a
    symbol of ``sizes`` that no input has.
    """
    sizes = dict(sizes or {})
    _check_symbols(model, sizes)
    return _built_inputs(model, sizes, model.inputs)


def _check_symbols(model: Model, sizes: Mapping[str, int]) -> None:
    facts = model.input_facts or []
    symbols = {d for fact in facts if fact is not None and fact.shape for d in fact.shape if isinstance(d, str)}
    unknown = sorted(set(sizes) - symbols)
    if unknown:
        known = ", ".join(sorted(symbols)) or "none"
        raise TramaError(f"no input has the symbolic size {unknown[0]!r} (the inputs' symbols: {known})")


def _built_inputs(model: Model, sizes: Mapping[str, int], names: Sequence[str]) -> dict[str, Any]:
    import numpy as np

    from trama.format._dtypes import numpy_dtype

    facts = model.input_facts or []
    arrays: dict[str, Any] = {}
    for k, name in enumerate(model.inputs):
        if name not in names:
            continue
        fact = _fact_at(facts, k)
        if fact is None or fact.shape is None:
            raise TramaError(
                f"the document states no shape for input {name!r}: give the input with --input {name}=FILE.npy"
            )
        shape = tuple(_symbol_size(model, d, sizes) if isinstance(d, str) else d for d in fact.shape)
        arrays[name] = np.ones(shape, numpy_dtype(fact.dtype or "float32"))
    return arrays


def _symbol_size(model: Model, symbol: str, sizes: Mapping[str, int]) -> int:
    if symbol in sizes:
        return sizes[symbol]
    bounds = (model.symbols or {}).get(symbol)
    size = DEFAULT_SIZE
    if bounds is not None and bounds.min is not None:
        size = max(size, bounds.min)
    if bounds is not None and bounds.max is not None:
        size = min(size, bounds.max)
    return size


def run_shapes(model: Model, inputs: Mapping[str, Any] | None = None, *, runtime: str = "numpy") -> ShapeRun:
    """Run ``model`` once on ``inputs`` (by name; :func:`example_inputs` when ``None``) on a graph
    runtime and record the dtype and shape of every value each node reads and computes.

    Leaves are recorded as they run (a calling node's copies included); a composite's ports and
    outputs are the values they are wired to. Numerical warnings of the run (a mask of ones may
    divide by zero somewhere) are silenced: only shapes are kept. Raises
    :class:`~trama.errors.TramaError` where the model cannot run, and for a runtime that does not
    walk the graph leaf by leaf (compiled ones).
    """
    from trama.execution._inputs import dtype_of
    from trama.execution._runtime import GraphRunnable, runtime_for_name
    from trama.format._calls import expand_calls

    values = dict(example_inputs(model) if inputs is None else inputs)
    found = runtime_for_name(runtime)
    runnable = found.prepare(model)
    if not isinstance(runnable, GraphRunnable):
        raise TramaError(f"the {found.name()} runtime does not run a model leaf by leaf: record shapes with numpy")
    recorded: dict[tuple[str, str], ValueFact] = {}
    for name, value in values.items():
        recorded[(INPUT, name)] = ValueFact(dtype_of(value), tuple(getattr(value, "shape", ())))
    steps = runnable.plan.steps
    kernels = [step.kernel for step in steps]
    try:
        for step in steps:
            step.kernel = _Recorder(step.kernel, step.node.id, [name for name, _ in step.outputs], recorded, dtype_of)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _quietly(runnable.run, values)
    finally:
        for step, kernel in zip(steps, kernels, strict=True):
            step.kernel = kernel
    nodes, _ = expand_calls(model)
    by_id: dict[str, Node] = {}
    for node in nodes:
        by_id.setdefault(node.id, node)
    resolve = _Resolver(by_id, recorded, limit=2 * len(nodes) + 2)
    shapes: dict[str, NodeShapes] = {}
    for node in model.nodes:
        if node.id in shapes:
            continue
        shapes[node.id] = NodeShapes(
            {port: resolve(ref, node.parent) for port, ref in node.inputs.items()},
            {output: resolve(Ref(node.id, output), node.parent) for output in node.outputs},
        )
    used = {name: recorded[(INPUT, name)] for name in model.inputs if (INPUT, name) in recorded}
    return ShapeRun(shapes, used, found.name())


def _quietly(run: Any, values: Mapping[str, Any]) -> None:
    """``run(values)`` with numpy's floating-point warnings off (and numpy imported only here)."""
    import numpy as np

    with np.errstate(all="ignore"):
        run(values)


class _Recorder:
    """Wraps one step's kernel for one run, noting the dtype and shape of its outputs."""

    def __init__(
        self, kernel: Any, node_id: str, outputs: list[str], recorded: dict[tuple[str, str], ValueFact], dtype_of: Any
    ) -> None:
        self._kernel = kernel
        self._id = node_id
        self._outputs = outputs
        self._recorded = recorded
        self._dtype_of = dtype_of

    def __call__(self, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        outputs: Mapping[str, Any] = self._kernel(inputs)
        self._note(outputs)
        return outputs

    def initial_state(self) -> Any:
        return self._kernel.initial_state()

    def step(self, inputs: Mapping[str, Any], state: Any) -> tuple[Mapping[str, Any], Any]:
        outputs, new_state = self._kernel.step(inputs, state)
        self._note(outputs)
        return outputs, new_state

    def _note(self, outputs: Mapping[str, Any]) -> None:
        for name in self._outputs:
            value = outputs.get(name) if isinstance(outputs, Mapping) else None
            shape = getattr(value, "shape", None)
            if shape is not None:
                self._recorded[(self._id, name)] = ValueFact(self._dtype_of(value), tuple(int(d) for d in shape))


class _Resolver:
    """The recorded type of a reference seen from a scope, followed through composites' ports
    and bindings to the leaf output or model input that holds the value."""

    def __init__(self, by_id: dict[str, Node], recorded: dict[tuple[str, str], ValueFact], limit: int) -> None:
        self.by_id = by_id
        self.recorded = recorded
        self.limit = limit

    def __call__(self, ref: Ref, scope: str | None) -> ValueFact | None:
        for _ in range(self.limit):  # a bound, in case an invalid model's bindings loop
            if ref.is_input:
                if scope is None:
                    return self.recorded.get((INPUT, ref.output))
                owner = self.by_id.get(scope)
                following = None if owner is None else owner.inputs.get(ref.output)
                if owner is None or following is None:
                    return None
                ref, scope = following, owner.parent
            else:
                target = self.by_id.get(ref.node)
                if target is None:
                    return None
                if target.output_bindings is None:
                    return self.recorded.get((target.id, ref.output))
                following = target.output_bindings.get(ref.output)
                if following is None:
                    return None
                ref, scope = following, target.id
        return None


# --- the page's data -----------------------------------------------------------------------


def render_html(model: Model, *, title: str | None = None, shapes: ShapeRun | None = None) -> str:
    """``model`` as one self-contained HTML page (see the module docstring). ``title`` names
    the page (default ``"trama model"``); ``shapes``, from :func:`run_shapes`, adds every node's
    input and output shapes. Reads no tensor's data; deterministic."""
    data = view_data(model, title=title, shapes=shapes)
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"))
    # Inside <script>, only "</script", "<!--" and "<script" matter; escaping every <, > and &
    # (inside JSON strings: the structure has none) leaves no markup at all.
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    page = _template()
    head, marker, tail = page.partition("{{DATA}}")
    if not marker:
        raise AssertionError(f"{TEMPLATE} has no {{{{DATA}}}} marker")
    # A title from a file name may hold a lone surrogate, which UTF-8 cannot write: escaped.
    name = html.escape(data["title"].encode("utf-8", "backslashreplace").decode("utf-8"), quote=True)
    return head.replace("{{TITLE}}", name) + text + tail.replace("{{TITLE}}", name)


@functools.cache
def _template() -> str:
    return resources.files("trama.tools").joinpath(TEMPLATE).read_text(encoding="utf-8")


def view_data(model: Model, *, title: str | None = None, shapes: ShapeRun | None = None) -> dict[str, Any]:
    """The JSON data the page embeds (``render_html`` writes it, the page's script reads it)."""
    return _Data(model, shapes).build(title or "trama model")


class _Data:
    """Builds the page's data: the nodes in document order, each referring to others by index."""

    def __init__(self, model: Model, shapes: ShapeRun | None) -> None:
        self.model = model
        self.shapes = shapes
        self.view = _View(model, None)  # trama ssa's known types
        self.index: dict[str, int] = {}
        for k, node in enumerate(model.nodes):
            self.index.setdefault(node.id, k)

    def build(self, title: str) -> dict[str, Any]:
        model = self.model
        summary = summarize(model)
        own, subtree = self._counts()
        groups = repeated_blocks(model)
        member = {node_id: g for g, ids in enumerate(groups) for node_id in ids}
        nodes = []
        for k, node in enumerate(model.nodes):
            item = self._node(node, k)
            if own[k]:
                item["w"] = own[k]
            if subtree[k]:
                item["W"] = subtree[k]
            group = member.get(node.id)
            if group is not None and self.index[node.id] == k:
                item["g"] = group
            nodes.append(item)
        facts = model.input_facts or []
        out_facts = model.output_facts or []
        header: list[tuple[str, str | None]] = [("format", model.source_format_version or summary.format_version)]
        header += [("producer", summary.producer), ("framework", summary.framework)]
        others = sorted(key for key in model.metadata if key not in ("producer", "framework"))
        header += [(key, _clipped(describe_metadata_value(model.metadata[key]))) for key in others]
        return {
            "title": title,
            "signature": _signature(self.view).replace(_KEEP, " "),
            "header": [[key, text] for key, text in header if text],
            "totals": {
                "nodes": summary.node_count,
                "leaves": summary.leaf_count,
                "composites": summary.composite_count,
                "calls": summary.call_count,
                "depth": summary.depth,
                "elements": summary.parameters.elements,
                "learnable": summary.learnable.elements,
                "bytes": summary.parameters.bytes,
            },
            "shapes": None if self.shapes is None else self.shapes.describe(),
            "model": {
                "in": [[name, self._input_type(k, name, facts)] for k, name in enumerate(model.inputs)],
                "out": [self._output(str(k), ref, None, _fact_at(out_facts, k)) for k, ref in enumerate(model.outputs)],
            },
            "groups": [
                {"label": _composite_label(model.nodes[self.index[ids[0]]]), "ids": [self.index[i] for i in ids]}
                for ids in groups
            ],
            "nodes": nodes,
        }

    def _input_type(self, k: int, name: str, facts: Sequence[ValueFact | None]) -> str | None:
        if self.shapes is not None and name in self.shapes.inputs:
            return _type_text(self.shapes.inputs[name])
        return _type_text(_fact_at(facts, k))

    def _node(self, node: Node, k: int) -> dict[str, Any]:
        item: dict[str, Any] = {"n": node.name}
        parent = node.parent
        p = -1 if parent is None else self.index.get(parent)
        if p is None or (p >= 0 and not self.model.nodes[p].is_composite):
            # An orphan (an invalid model): shown at the top, under its whole id.
            p = -1
            item["n"] = node.id
        item["p"] = p
        item["o"] = node.op
        cls = (node.metadata or {}).get("class")
        if isinstance(cls, str):
            item["c"] = cls
        label = _composite_label(node) if node.is_composite else node.op
        if label != node.op:
            item["l"] = label
        item["k"] = 2 if node.calls is not None else 1 if node.is_composite else 0
        if node.calls is not None:
            item["t"] = self.index.get(node.calls, node.calls)
        settings = [self._setting(node, slot, key) for slot, key in node.parameters.items()]
        if settings:
            item["s"] = settings
        run = self.shapes.nodes.get(node.id) if self.shapes is not None else None
        ins = []
        for port, ref in node.inputs.items():
            fact = run.inputs.get(port) if run is not None else None
            if fact is None:
                key = ("in", node.id, port) if node.is_composite else self.view._key(ref, parent)
                fact = self.view.facts.get(key)
            ins.append([port, self._ref(ref, parent), _type_text(fact), self._source(ref, parent)])
        if ins:
            item["i"] = ins
        outs = []
        for output in node.outputs:
            fact = run.outputs.get(output) if run is not None else None
            if fact is None:
                fact = self.view.facts.get(("out", node.id, output))
            bound = (node.output_bindings or {}).get(output) if node.is_composite else None
            outs.append(self._output(output, bound, node.id, fact))
        if outs:
            item["u"] = outs
        meta = [
            [key, _clipped(describe_metadata_value(value))]
            for key, value in sorted((node.metadata or {}).items())
            if key != "class"
        ]
        if meta:
            item["m"] = meta
        return item

    def _output(self, name: str, bound: Ref | None, scope: str | None, fact: ValueFact | None) -> list[Any]:
        """``[name, reference it is bound to or null, type or null, source index]``."""
        if bound is None:
            return [name, None, _type_text(fact), -1]
        return [name, self._ref(bound, scope), _type_text(fact), self._source(bound, scope)]

    def _setting(self, node: Node, slot: str, key: str) -> dict[str, Any]:
        entry = self.model.parameters.get(key)
        item: dict[str, Any] = {"s": slot}
        if key != f"{node.id}.{slot}":
            item["e"] = key  # a shared or tied entry
        if entry is None:
            item["v"] = "(no such entry)"
            return item
        value = entry.value
        item["v"] = _clipped(format_value(value))
        if is_tensor(value):
            item["t"] = 1
        if entry.learnable:
            item["L"] = 1
        return item

    def _ref(self, ref: Ref, scope: str | None) -> str:
        """A reference as a 1.3 document writes it in ``scope``: ``%port`` for an input of the
        scope, ``name`` (a sibling's one output) or ``name.output``; another node's whole id
        (only an invalid model has one)."""
        if ref.is_input:
            return f"%{ref.output}"
        k = self.index.get(ref.node)
        if k is not None and self.model.nodes[k].parent == scope:
            node = self.model.nodes[k]
            return node.name if node.outputs == [ref.output] else f"{node.name}.{ref.output}"
        return f"{ref.node}.{ref.output}"

    def _source(self, ref: Ref, scope: str | None) -> int:
        """The index of the sibling that produces ``ref`` in ``scope``, or -1 (an input)."""
        if ref.is_input:
            return -1
        k = self.index.get(ref.node)
        return k if k is not None and self.model.nodes[k].parent == scope else -1

    def _counts(self) -> tuple[list[int], list[int]]:
        """Tensor elements of each node's own slots, and of its subtree (an entry that several
        slots use counted once)."""
        table = self.model.parameters
        nodes = self.model.nodes

        def size(key: str) -> int:
            entry = table.get(key)
            return entry.value.size if entry is not None and is_tensor(entry.value) else 0

        entries: list[set[str]] = [{key for key in node.parameters.values() if size(key)} for node in nodes]
        own = [sum(size(key) for key in keys) for keys in entries]
        below: list[set[str]] = [set(keys) for keys in entries]
        for k in range(len(nodes) - 1, -1, -1):  # children come after their parent
            parent = nodes[k].parent
            p = None if parent is None else self.index.get(parent)
            if p is not None and p < k:
                below[p] |= below[k]
        subtree = [sum(size(key) for key in keys) for keys in below]
        return own, subtree


def _fact_at(facts: Sequence[ValueFact | None], k: int) -> ValueFact | None:
    return facts[k] if k < len(facts) else None


def _type_text(fact: ValueFact | None) -> str | None:
    return format_fact(fact)


def _clipped(text: str) -> str:
    return text if len(text) <= _VALUE_WIDTH else text[: _VALUE_WIDTH - 1] + "…"


# --- the command ---------------------------------------------------------------------------


def view_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``trama view``."""
    from trama.tools.cli import _STDIN_HELP, _document

    parser.add_argument(
        "file", metavar="FILE", type=_document, help=f"a trama document (.trama.json), or {_STDIN_HELP}"
    )
    parser.add_argument("-o", "--output", type=Path, required=True, help="the HTML file to write (replaced atomically)")
    parser.add_argument("--title", help="the page's title (default: the document's file name)")
    parser.add_argument(
        "--shapes",
        action="store_true",
        help="run the model once (on the numpy runtime, or --runtime) and show every node's input and output "
        "shapes; the inputs are ones of the input facts' dtype and shape, each symbolic size 2 or as --size "
        "gives it, unless --input gives them",
    )
    parser.add_argument(
        "--size",
        action="append",
        default=[],
        metavar="SYMBOL=N",
        help="with --shapes: the size of a symbolic axis of the inputs (repeat for each; default 2)",
    )
    parser.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=FILE.npy",
        help="with --shapes: one model input from a .npy file (repeat for each; the others are built)",
    )
    parser.add_argument(
        "--runtime", default="numpy", help="with --shapes: the runtime to run on (default: %(default)s)"
    )


def run_view(args: argparse.Namespace) -> int:
    """``trama view``: write the page; a bad document or option is one line on stderr, exit 1."""
    from trama.tools.cli import EXIT_INVALID, EXIT_OK, EXIT_USAGE, _clip, _load_or_say, _name, _one_line, _special_file

    if not args.shapes and (args.size or args.input or args.runtime != "numpy"):
        print("trama view: --size, --input and --runtime take effect with --shapes only", file=sys.stderr)
        return EXIT_USAGE
    try:
        sizes = _sizes(args.size)
    except ValueError as exc:
        print(f"trama view: {exc}", file=sys.stderr)
        return EXIT_USAGE
    kind = _special_file(args.output)
    if kind is not None:
        print(f"{_name(args.output)}: cannot write the page: it is {kind}, not a regular file", file=sys.stderr)
        return EXIT_INVALID
    model = _load_or_say(args.file, lazy_inline=not args.shapes)
    if model is None:
        return EXIT_INVALID
    shapes = None
    if args.shapes:
        try:
            shapes = run_shapes(model, _shape_inputs(model, sizes, args.input), runtime=args.runtime)
        except TramaError as exc:
            print(f"{_name(args.file)}: cannot record shapes: {_one_line(exc)}", file=sys.stderr)
            return EXIT_INVALID
    title = args.title if args.title is not None else _default_title(args.file)
    page = render_html(model, title=title, shapes=shapes).encode("utf-8")
    from trama.format._serialization import atomic_file

    try:
        with atomic_file(args.output) as handle:
            handle.write(page)
    except TramaError as exc:
        print(f"{_name(args.output)}: {_one_line(exc)}", file=sys.stderr)
        return EXIT_INVALID
    except OSError as exc:
        print(f"{_name(args.output)}: {_clip(exc.strerror or str(exc))}", file=sys.stderr)
        return EXIT_INVALID
    print(f"wrote {_name(args.output)} ({len(page):,} bytes, {len(model.nodes):,} nodes)")
    return EXIT_OK


def _sizes(specs: list[str]) -> dict[str, int]:
    """``SYMBOL=N`` arguments as a mapping (``ValueError`` says what is wrong)."""
    sizes: dict[str, int] = {}
    for spec in specs:
        symbol, sep, text = spec.partition("=")
        try:
            size = int(text)
        except ValueError:
            size = -1
        if not sep or not symbol or size < 0:
            raise ValueError(f"--size takes SYMBOL=N with N a whole number, 0 or more, got {spec!r}")
        sizes[symbol] = size
    return sizes


def _shape_inputs(model: Model, sizes: dict[str, int], specs: list[str]) -> dict[str, Any]:
    """The inputs of the shape run: those read from files, the others built from the facts."""
    from trama.tools.cli import _read_inputs

    given = _read_inputs(specs)
    unknown = sorted(set(given) - set(model.inputs))
    if unknown:
        raise TramaError(f"the model has no input {unknown[0]!r}; its inputs are {', '.join(model.inputs) or 'none'}")
    _check_symbols(model, sizes)
    built = _built_inputs(model, sizes, [name for name in model.inputs if name not in given])
    return {name: given[name] if name in given else built[name] for name in model.inputs}


def _default_title(document: object) -> str:
    name = getattr(document, "name", None)
    if isinstance(name, str) and name:
        for suffix in (".trama.json", ".json"):
            if name.endswith(suffix) and len(name) > len(suffix):
                return name[: -len(suffix)]
        return name
    return "trama model"
