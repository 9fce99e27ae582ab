"""The module calls of a captured program: which module computed each graph node, and on what.

``torch.export`` gives one flat graph of aten ops; the document must be the tree the user wrote.
The tree is recorded while ``torch.export`` runs the model (non-strict export runs the real
Python, so module hooks fire): a forward pre-hook and a forward hook on every module (none
below a catalog leaf, whose inside the document never shows) record each call with

* the module, its place in the model and its parent call;
* its arguments and its result, with every tensor replaced by the graph node that holds it
  (the tracer's proxy for that tensor), so that ports bind to ``forward``'s own parameter names
  and outputs follow the returned structure, and so that a call that adds no node at all (an
  ``nn.Dropout`` in eval mode returns its input) is still a call of the tree;
* the graph nodes created while it was the innermost running call, stamped into each node's
  ``meta`` (``trama_call``, ``trama_order``), which ``torch.export`` copies along with the node
  wherever its last passes rebuild the graph.

This is what ``nn_module_stack`` says too, plus the arguments and the empty calls, and at the
cost of two Python calls per module call instead of a second ``torch.export`` with preserved
call signatures (which costs up to three times the capture on models with many modules).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx
from torch import nn
from torch.fx.experimental import proxy_tensor
from torch.utils import _pytree as pytree
from torch.utils.hooks import RemovableHandle

from trama_torch import leaves

__all__ = [
    "Call",
    "CallTree",
    "Recorder",
    "Symbolic",
    "TensorArg",
    "inline_wrapped",
    "module_paths",
    "opaque_kind",
    "plain_encoder",
]

#: Node meta keys stamped while tracing: the index of the call that made the node, and its order.
CALL_KEY = "trama_call"
ORDER_KEY = "trama_order"


@dataclass(frozen=True)
class TensorArg:
    """A tensor passed to or returned by a module call: the graph node that holds it."""

    node: fx.Node


@dataclass(frozen=True)
class Symbolic:
    """A symbolic size (``SymInt``) passed to or returned by a module call."""

    value: Any


def opaque_kind(module: nn.Module, claimed: Callable[[nn.Module], bool] | None = None) -> str | None:
    """``"exportable"`` for a module with its own ``to_node`` or that an exporter ranked before
    trama-torch's own claims (``claimed``: an op pack's, for its own classes or another
    library's, such as a ``trama-transformers`` pack's ``LlamaRMSNorm``; both are handed whole
    to ``ctx.child``, so the exporter chain decides there as it does without capture),
    ``"leaf"`` for a catalog leaf module (its whole inside is its op), ``"encoder"`` for an
    ``nn.TransformerEncoder`` the catalog's composite holds (:func:`plain_encoder`), ``None``
    for a module whose inside the tree shows."""
    if callable(getattr(module, "to_node", None)):
        return "exportable"
    if claimed is not None and claimed(module):
        return "exportable"
    if leaves.leaf_op(module) is not None:
        return "leaf"
    if plain_encoder(module):
        return "encoder"
    return None


def plain_encoder(module: nn.Module) -> bool:
    """Whether ``module`` is an ``nn.TransformerEncoder`` running torch's own ``forward`` over
    catalog ``TransformerEncoderLayer``\\ s (and a catalog leaf ``norm`` from ``x`` to ``y``, or
    none): the catalog's ``TransformerEncoder`` composite, whose wiring is that ``forward``, so
    the document reads as the source does (``layers_0``, ``layers_1``, ``norm``) instead of a
    ``Graph`` of the mask handling torch runs inside it."""
    if not isinstance(module, nn.TransformerEncoder) or type(module).forward is not nn.TransformerEncoder.forward:
        return False
    layers = list(module.layers)
    if not layers or any(leaves.leaf_op(layer) != "TransformerEncoderLayer" for layer in layers):
        return False
    norm = module.norm
    if norm is None:
        return True
    op = leaves.leaf_op(norm)
    if op is None or leaves.leaf_result_structure(op) != "y":
        return False
    try:
        ports, _ = leaves.bind_leaf_call(op, (_Marker(),), {})
    except Exception:
        return False
    return list(ports) == ["x"]


class _Marker:
    """A stand-in tensor argument, to ask which port a leaf's first argument binds to."""


def module_paths(model: nn.Module) -> dict[int, str]:
    """Each module object's first qualified name in ``model`` (``""`` for the model itself)."""
    return {id(module): name for name, module in model.named_modules()}


@dataclass(eq=False)
class Call:
    """One call of one module during the capture."""

    index: int
    module: nn.Module
    #: the module's first qualified name in the model (``"encoder.layers.0"``, ``""`` for the root)
    path: str
    parent: Call | None
    opaque: str | None
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    #: where the call starts among the graph nodes' orders (just before its first node)
    position: float
    #: how many calls of the same module object came before this one
    occurrence: int
    result: Any = None
    children: list[Call] = field(default_factory=list)
    #: the graph nodes this call made itself (for an opaque call: every node inside it)
    nodes: list[fx.Node] = field(default_factory=list)
    #: depth-first interval: a node is inside this call iff its owner's ``first`` is in [first, last]
    first: int = 0
    last: int = 0

    @property
    def cls(self) -> str:
        cls = type(self.module)
        return f"{cls.__module__}.{cls.__qualname__}"

    def described(self) -> str:
        """``'encoder.layers.0' (torch.nn.modules.linear.Linear)``, as errors name a module; the
        model itself is ``the model (mypkg.Net)``."""
        return f"{self.path!r} ({self.cls})" if self.path else f"the model ({self.cls})"

    def contains(self, other: Call) -> bool:
        return self.first <= other.first <= self.last

    def walk(self) -> Iterator[Call]:
        yield self
        for child in self.children:
            yield from child.walk()


class Recorder:
    """Hooks that record the module calls of one capture (see the module docstring)."""

    def __init__(self, model: nn.Module, claimed: Callable[[nn.Module], bool] | None = None) -> None:
        self.model = model
        self._claimed = claimed
        self._kinds: dict[int, str | None] = {}  # id(module) -> its opaque kind, asked once
        self.paths = module_paths(model)
        self.calls: list[Call] = []
        self._stack: list[Call | None] = []
        self._counts: dict[int, int] = {}
        self._last: fx.Node | None = None
        self._order = 0
        self._handles: list[RemovableHandle] = []

    # -- hooks ------------------------------------------------------------------------------

    def install(self) -> None:
        """Hook every module of the model except those inside an opaque one."""
        inside: list[str] = []
        for name, module in self.model.named_modules():
            if any(name.startswith(prefix) for prefix in inside):
                continue
            # Bound to the module itself: torch.export may run a copy of the tree (it does when
            # modules share a submodule), whose hooks are these same objects.
            self._handles.append(
                module.register_forward_pre_hook(functools.partial(self._pre, module), with_kwargs=True)
            )
            self._handles.append(module.register_forward_hook(functools.partial(self._post, module), with_kwargs=True))
            if self.opaque_kind(module) is not None and module is not self.model:
                inside.append(f"{name}.")

    def opaque_kind(self, module: nn.Module) -> str | None:
        """:func:`opaque_kind` of ``module``, asked once per module (the exporters' answer
        included)."""
        key = id(module)
        if key not in self._kinds:
            self._kinds[key] = opaque_kind(module, self._claimed)
        return self._kinds[key]

    def reset(self) -> None:
        """Forget what a failed capture recorded, before capturing again."""
        self.calls.clear()
        self._stack.clear()
        self._counts.clear()
        self._last = None
        self._order = 0

    def innermost(self) -> Call | None:
        """The innermost call still running (where a failed capture stopped)."""
        return next((call for call in reversed(self._stack) if call is not None), None)

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _tracer(self) -> Any:
        mode = proxy_tensor.get_proxy_mode()
        return mode.tracer if mode is not None else None

    def _stamp(self, tracer: Any) -> None:
        """Stamp the nodes made since the last hook with the call that was running."""
        graph: fx.Graph = tracer.graph
        owner = self._stack[-1] if self._stack else None
        node = self._last.next if self._last is not None and not getattr(self._last, "_erased", False) else None
        if node is None:
            node = next(iter(graph.nodes), None)
        while node is not None and node.op != "root":
            if ORDER_KEY not in node.meta:
                node.meta[ORDER_KEY] = self._order
                self._order += 1
                if owner is not None:
                    node.meta[CALL_KEY] = owner.index
            self._last = node
            node = node.next

    def _value(self, value: Any, tracer: Any) -> Any:
        def convert(leaf: Any) -> Any:
            if isinstance(leaf, torch.Tensor):
                slot = proxy_tensor.get_proxy_slot(leaf, tracer, None)
                proxy = getattr(slot, "proxy", None)
                node = getattr(proxy, "node", None)
                return TensorArg(node) if isinstance(node, fx.Node) else leaf
            if isinstance(leaf, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                return Symbolic(leaf)
            return leaf

        return pytree.tree_map(convert, value)

    def _pre(self, module: nn.Module, _running: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        tracer = self._tracer()
        if tracer is None:
            return
        self._stamp(tracer)
        top = self._stack[-1] if self._stack else None
        if self._stack and (top is None or top.opaque is not None):
            self._stack.append(None)  # a module run inside an opaque one: part of it
            return
        occurrence = self._counts.get(id(module), 0)
        self._counts[id(module)] = occurrence + 1
        call = Call(
            index=len(self.calls),
            module=module,
            path=self.paths.get(id(module), ""),
            parent=top,
            opaque=self.opaque_kind(module) if self._stack else None,
            args=self._value(args, tracer),
            kwargs=self._value(kwargs, tracer),
            position=self._order - 0.5,
            occurrence=occurrence,
        )
        self.calls.append(call)
        if top is not None:
            top.children.append(call)
        self._stack.append(call)

    def _post(
        self, module: nn.Module, _running: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any
    ) -> None:
        tracer = self._tracer()
        if tracer is None or not self._stack:
            return
        self._stamp(tracer)
        call = self._stack.pop()
        if call is not None:
            call.result = self._value(output, tracer)


@dataclass
class CallTree:
    """The recorded calls resolved against the exported program's graph."""

    root: Call
    calls: list[Call]
    graph: fx.Graph
    #: each graph node's call and order
    owner: dict[fx.Node, Call]
    order: dict[fx.Node, float]

    @classmethod
    def build(cls, recorder: Recorder, graph: fx.Graph, copies: dict[str, fx.Node] | None = None) -> CallTree:
        calls = recorder.calls
        if not calls:
            raise RuntimeError("the capture recorded no module call")
        root = calls[0]
        by_name = {node.name: node for node in graph.nodes} | dict(copies or {})
        final = set(graph.nodes)
        placeholders = [node for node in graph.nodes if node.op == "placeholder"]
        traced: dict[fx.Graph, list[fx.Node]] = {}

        found_for: dict[fx.Node, fx.Node | None] = {}
        by_target: dict[Any, list[fx.Node]] = {}

        def same_call(node: fx.Node, candidate: fx.Node) -> bool:
            """Whether ``candidate`` computes what ``node`` did: same target, and arguments that
            are the same constants or the final graph's nodes for the same traced nodes."""
            if candidate.target != node.target:
                return False
            mine = pytree.tree_leaves((node.args, node.kwargs))
            theirs = pytree.tree_leaves((candidate.args, candidate.kwargs))
            if len(mine) != len(theirs):
                return False
            for a, b in zip(mine, theirs, strict=True):
                if isinstance(a, fx.Node):
                    if (a if a in final else find(a)) is not b:
                        return False
                elif isinstance(b, fx.Node) or type(a) is not type(b) or a != b:
                    return False
            return True

        def find(node: fx.Node) -> fx.Node | None:
            """The final graph's node for a node of the traced graph, where torch.export's last
            passes rebuilt the graph: placeholders by position (they may be renamed), others by
            name where the node of that name computes the same, else the node that does (names
            are mostly kept, but not always: Phi-3's ``chunk`` results were renamed while
            another ``getitem`` took the name)."""
            if node in found_for:
                return found_for[node]
            found_for[node] = None  # a cycle guard; graphs have none
            if node.op == "placeholder":
                order = traced.setdefault(node.graph, [n for n in node.graph.nodes if n.op == "placeholder"])
                index = order.index(node) if node in order else -1
                result = placeholders[index] if 0 <= index < len(placeholders) else None
            else:
                named = by_name.get(node.name)
                if named is not None and same_call(node, named):
                    result = named
                else:
                    if not by_target:
                        for each in final:
                            by_target.setdefault(each.target, []).append(each)
                    candidates = [each for each in by_target.get(node.target, []) if same_call(node, each)]
                    if len(candidates) == 1:
                        result = candidates[0]
                    else:  # no better guess than the name (a region's copy, whose arguments moved)
                        result = named if named is not None and named.target == node.target else None
            found_for[node] = result
            return result

        def resolve(value: Any) -> Any:
            def convert(leaf: Any) -> Any:
                if isinstance(leaf, TensorArg) and leaf.node not in final:
                    found = find(leaf.node)
                    return TensorArg(found) if found is not None else leaf
                return leaf

            return pytree.tree_map(convert, value, is_leaf=lambda leaf: isinstance(leaf, (TensorArg, Symbolic)))

        for call in calls:
            call.args = resolve(call.args)
            call.kwargs = resolve(call.kwargs)
            call.result = resolve(call.result)
        for counter, call in enumerate(root.walk()):
            call.first = counter
        for call in reversed(list(root.walk())):
            call.last = max([call.first, *(child.last for child in call.children)])
        owner: dict[fx.Node, Call] = {}
        order: dict[fx.Node, float] = {}
        previous = -1.0
        extra = 0
        for node in graph.nodes:
            stamped = node.meta.get(ORDER_KEY)
            if isinstance(stamped, int):
                previous, extra = float(stamped), 0
                order[node] = previous
            else:  # made after tracing (runtime asserts, size reads): right after its predecessor
                extra += 1
                order[node] = previous + extra * 1e-6
            index = node.meta.get(CALL_KEY)
            call = calls[index] if isinstance(index, int) and index < len(calls) else root
            owner[node] = call
            if node.op == "call_function":
                call.nodes.append(node)
        return cls(root, calls, graph, owner, order)

    def inside(self, node: fx.Node, call: Call) -> bool:
        """Whether ``node`` was made by ``call`` or a call below it."""
        owner = self.owner.get(node)
        return owner is not None and call.contains(owner)


def tensor_leaves(value: Any) -> list[TensorArg]:
    """The tensors of an argument or result structure, in pytree order."""
    return [
        leaf
        for leaf in pytree.tree_leaves(value, is_leaf=lambda leaf: isinstance(leaf, (TensorArg, Symbolic)))
        if isinstance(leaf, TensorArg)
    ]


def _wrappers() -> dict[Any, int]:
    """The higher-order ops torch.export wraps a region in, and where their submodule argument is."""
    found: dict[Any, int] = {}
    higher = getattr(torch.ops, "higher_order", None)
    for name, index in (("wrap_with_set_grad_enabled", 1), ("wrap_with_autocast", 4)):
        op = getattr(higher, name, None) if higher is not None else None
        if op is not None:
            found[op] = index
    return found


class WrappedRegionError(Exception):
    """A region the capture cannot inline (autocast switched on inside the model)."""


def inline_wrapped(module: fx.GraphModule) -> dict[str, fx.Node]:
    """Put the regions torch.export wrapped in a submodule back in the graph, in place.

    ``with torch.no_grad():`` (and ``torch.autocast(enabled=False)``, which transformers' rotary
    embeddings use) inside ``forward`` becomes a call of a higher-order op on a submodule; for
    the inference a document records, gradient mode changes nothing, so the region's nodes are
    copied into the graph where the call was (with their meta, so the module calls they belong
    to are kept). Returns the copies by the names the region's nodes had."""
    wrappers = _wrappers()
    copies: dict[str, fx.Node] = {}
    graph = module.graph
    for node in list(graph.nodes):
        index = wrappers.get(node.target) if node.op == "call_function" else None
        if index is None:
            continue
        if index == 4 and node.args[2]:
            raise WrappedRegionError("torch.autocast")
        holder = node.args[index]
        assert isinstance(holder, fx.Node)
        sub = getattr(module, str(holder.target))
        operands = list(node.args[index + 1 :])
        inner = [each for each in sub.graph.nodes if each.op == "placeholder"]
        env: dict[fx.Node, Any] = dict(zip(inner, operands, strict=True))
        result: Any = None
        with graph.inserting_before(node):
            for each in sub.graph.nodes:
                if each.op == "placeholder":
                    continue
                if each.op == "output":
                    result = fx.node.map_arg(each.args[0], env.__getitem__)
                    continue
                copy = graph.node_copy(each, env.__getitem__)
                env[each] = copy
                copies[each.name] = copy
        for user in list(node.users):
            if user.op == "call_function" and user.target is operator.getitem:
                user.replace_all_uses_with(result[user.args[1]])
                graph.erase_node(user)
            else:
                user.replace_input_with(node, result)
        graph.erase_node(node)
        if not holder.users:
            graph.erase_node(holder)
    return copies
