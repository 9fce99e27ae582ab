"""Calling nodes: a module used in two places is one node, *called* from the second place.

``y = self.block(self.block(x))`` runs one module twice; a module shared by two parents belongs
to both. The document keeps one node for the module (the *target*) and, where it is used again,
a *calling node* whose ``calls`` names the target: same op and outputs, no parameters or children
of its own, its own inputs (``docs/format.md``, "Calling nodes").

Two views of a model need calls taken apart:

* running it, where a call must compute exactly what its target computes: :func:`expand_calls`
  replaces every calling node by a copy of its target's subtree, so that a graph runtime only
  ever sees ordinary leaves and composites;
* checking it, where a call that, through the calls inside its target, needs itself would
  expand forever: :func:`call_cycle` finds such a loop.

Calls do not create data dependencies between scopes: a calling node reads its own scope's
values and its target's inside is copied, not shared, so the target may be anywhere in the tree.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from trama.errors import ValidationError
from trama.format._model import INPUT, Model, Node, Ref, children_by_parent, parent_of

__all__ = ["MAX_EXPANDED_NODES", "call_cycle", "check_expansion", "expand_calls", "expanded_size"]

#: The most nodes a model may have once its calls are expanded, for running it: a 20 KB
#: document whose block k calls block k − 1 twice would otherwise ask for 2^40 nodes. Real
#: models stay far below (a 24-layer encoder expands to a few thousand).
MAX_EXPANDED_NODES = 1_000_000


def expand_calls(model: Model) -> tuple[list[Node], dict[str, str]]:
    """The model's nodes with every calling node replaced by a copy of what it calls, and a map
    from each copy's id to the id of the original (non-calling) node it copies.

    A call of a leaf becomes a leaf with the caller's id, inputs and metadata and the target's op
    and parameter entries. A call of a composite becomes a composite with the target's bindings,
    followed by copies of every node inside the target, their ids moved from under the target's
    id to under the caller's (``root.block.fc`` -> ``root.again.fc``) and their references
    renamed alike. Calling nodes inside a target are expanded in turn. The list keeps the
    document's invariants (parents before children, producers before consumers in each scope),
    and the model's own nodes are returned as they are, not copied. A model without calls costs
    one scan.

    Raises :class:`~trama.errors.ValidationError` for calls that validation refuses and that
    would make expansion fail or never end (a missing target, a call of a call, a cycle).
    """
    nodes = model.nodes
    if not any(node.calls is not None for node in nodes):
        return list(nodes), {}
    check_expansion(nodes)
    by_id = {node.id: node for node in nodes}
    children = children_by_parent(nodes)
    expanded: list[Node] = []
    origin: dict[str, str] = {}
    # (node, the original it copies or None, the targets whose expansion it lies in), as a stack
    # so that a call's copies come right after it.
    work: list[tuple[Node, str | None, tuple[str, ...]]] = [(node, None, ()) for node in reversed(nodes)]
    while work:
        node, original, within = work.pop()
        if node.calls is None:
            expanded.append(node)
            if original is not None:
                origin[node.id] = original
            continue
        target = _target(node, by_id, within)
        expanded.append(_called(node, target))
        origin[node.id] = target.id
        inside = (*within, target.id)
        copies = [(_moved(d, target.id, node.id), d.id, inside) for d in _descendants(target.id, children)]
        work.extend(reversed(copies))
    return expanded, origin


def check_expansion(nodes: Sequence[Node]) -> None:
    """Refuse, before anything is built, a model whose calls expand past
    :data:`MAX_EXPANDED_NODES`: running it (and tracing it, for JAX) costs in proportion to the
    expansion, not to the document."""
    if not any(node.calls is not None for node in nodes):
        return
    size = expanded_size(nodes)
    if size is not None and size > MAX_EXPANDED_NODES:
        raise ValidationError(
            f"expanding its calls would make {size} nodes, more than trama's limit of {MAX_EXPANDED_NODES} "
            "(calls of calls multiply; docs/format.md, section 4.6)"
        )


def expanded_size(nodes: Sequence[Node]) -> int | None:
    """How many nodes ``nodes`` make once every call is expanded, counted without expanding
    (each subtree's size once, a call counting its target's): ``None`` where a call is broken or
    the calls form a cycle, which :func:`expand_calls` then reports. Iterative, so a deep tree
    costs no recursion."""
    by_id = {node.id: node for node in nodes}
    children = children_by_parent(nodes)
    sizes: dict[str, int] = {}
    for top in children.get(None, []):
        stack: list[tuple[str, bool]] = [(top.id, False)]
        path: set[str] = set()  # visited, not finished: the current chain of dependencies
        while stack:
            node_id, finished = stack.pop()
            node = by_id[node_id]
            if node.calls is not None:
                target = by_id.get(node.calls)
                if target is None or target.calls is not None:
                    return None
                needed = [target.id]
            else:
                needed = [child.id for child in children.get(node_id, [])]
            if finished:
                path.discard(node_id)
                own = 0 if node.calls is not None else 1  # a call is its target's copy
                sizes[node_id] = own + sum(sizes[each] for each in needed)
                continue
            if node_id in sizes:
                continue
            if node_id in path:
                return None  # a cycle
            path.add(node_id)
            stack.append((node_id, True))
            stack.extend((each, False) for each in needed if each not in sizes)
    return sum(sizes.get(top.id, 0) for top in children.get(None, []))


def call_cycle(nodes: Sequence[Node]) -> list[Node] | None:
    """Calling nodes whose expansion never ends, in call order, or ``None`` when there are none.

    Expanding a call of ``T`` expands the calls inside ``T``; if one of those leads, call by
    call, back to ``T``, expansion loops. (A call of its own ancestor is the shortest such
    loop.) Targets that are missing or are calls themselves are ignored here: they are
    reported as such.
    """
    ids = {node.id for node in nodes}
    calling = [(node, node.calls) for node in nodes if node.calls is not None and node.calls in ids]
    targets = {target for _, target in calling}
    # target id -> the calls inside that target's subtree, with the id each one calls
    inside: dict[str, list[tuple[Node, str]]] = {}
    for node, target in calling:
        ancestor = parent_of(node.id)
        while ancestor is not None:
            if ancestor in targets:
                inside.setdefault(ancestor, []).append((node, target))
            ancestor = parent_of(ancestor)
    state: dict[str, int] = {}  # absent: unseen, 1: on the current path, 2: done
    for start in inside:
        if start in state:
            continue
        path: list[Node] = []  # the calls taken from ``start`` to the current target
        stack: list[tuple[str, list[tuple[Node, str]]]] = [(start, list(inside[start]))]
        state[start] = 1
        while stack:
            current, pending = stack[-1]
            if not pending:
                state[current] = 2
                stack.pop()
                if path:
                    path.pop()
                continue
            call, following = pending.pop()
            seen = state.get(following)
            if seen == 1:
                first = next(k for k, (target, _) in enumerate(stack) if target == following)
                return [*path[first:], call]
            if seen is None:
                state[following] = 1
                path.append(call)
                stack.append((following, list(inside.get(following, ()))))
    return None


def _target(node: Node, by_id: dict[str, Node], within: tuple[str, ...]) -> Node:
    """The node ``node`` calls, refusing what would make expansion wrong or endless."""
    target = by_id.get(node.calls or "")
    if target is None:
        problem = f"calls unknown node {node.calls!r}"
    elif target.calls is not None:
        problem = f"calls {target.id!r}, which is itself a calling node"
    elif target.id in within or node.id.startswith(target.id + "."):
        problem = f"calls {target.id!r}, whose expansion contains this call again (the calls form a cycle)"
    else:
        return target
    raise ValidationError(problem, node_id=node.id)


def _called(caller: Node, target: Node) -> Node:
    """The caller as a copy of its target: the target's op, entries and bindings, the caller's
    id, wiring and metadata."""
    bindings = target.output_bindings
    return Node(
        caller.id,
        target.op,
        dict(caller.inputs),
        list(target.outputs),
        dict(target.parameters),
        None if bindings is None else _renamed(bindings, target.id, caller.id),
        caller.metadata,
    )


def _moved(node: Node, old: str, new: str) -> Node:
    """A copy of ``node`` (inside ``old``) placed inside ``new``, references renamed alike."""
    bindings = node.output_bindings
    return Node(
        new + node.id[len(old) :],
        node.op,
        _renamed(node.inputs, old, new),
        list(node.outputs),
        dict(node.parameters),
        None if bindings is None else _renamed(bindings, old, new),
        node.metadata,
        node.calls,
    )


def _renamed(refs: dict[str, Ref], old: str, new: str) -> dict[str, Ref]:
    """References to nodes inside ``old`` pointed at their copies inside ``new``. (Inside a
    valid target every reference is to a node inside it, or to ``%input``.)"""
    prefix = old + "."
    return {
        key: Ref(new + ref.node[len(old) :], ref.output) if ref.node != INPUT and ref.node.startswith(prefix) else ref
        for key, ref in refs.items()
    }


def _descendants(node_id: str, children: dict[str | None, list[Node]]) -> Iterable[Node]:
    """Every node under ``node_id``, parents before children, siblings in document order."""
    stack = list(reversed(children.get(node_id, [])))
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children.get(node.id, [])))
