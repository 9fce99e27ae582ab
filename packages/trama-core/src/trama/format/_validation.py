"""The rules a document must follow beyond its JSON shape, and checks against a registry.

Structural rules (ids, scopes, references, bindings, the parameter table) need nothing but the
document. Registry rules (known ops, ports, slots and their value types) need the specs.
Both checks collect every problem in one linear pass over the nodes, so validating a 200,000-node
file costs about twice a 100,000-node one, and a command-line run can report all errors at once.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Container, Iterable
from typing import Any, TypeAlias

from trama.errors import RegistryError, SchemaError, TramaError, ValidationError, pointer_token
from trama.format._calls import call_cycle
from trama.format._codec import MAX_FACT_DIM, fact_shape_problem
from trama.format._model import INPUT, Model, Node, Ref
from trama.format._names import (
    DOTTED_ID,
    MAX_ENTRY_SEGMENTS,
    MAX_NAME_LENGTH,
    MAX_NODE_DEPTH,
    NAME,
    depth_of,
    is_op_name,
    op_name_problem,
    shown_name,
)
from trama.format._sizes import SizeExpr, SymbolRange, is_symbol_name
from trama.format._specs import OpRegistry, value_type
from trama.format._tensor import Tensor

__all__ = [
    "DOTTED_ID",
    "NAME",
    "Declared",
    "StructureProof",
    "all_dotted",
    "binding_errors",
    "call_errors",
    "collect_errors",
    "model_level_errors",
    "node_errors",
    "ref_problem",
    "registry_errors",
    "structural_errors",
    "symbol_errors",
    "table_errors",
    "validate",
]


def validate(
    model: Model,
    registry: OpRegistry | None = None,
    *,
    allow_unknown_ops: bool = False,
    structure_checked: bool = False,
) -> None:
    """Raise the first problem found (every problem is in its ``all_errors``); else return.

    ``structure_checked`` skips the structural rules, for a reader that has just proven them
    (:mod:`trama.format._typed`)."""
    if structure_checked:
        errors = registry_errors(model, registry, allow_unknown_ops=allow_unknown_ops) if registry is not None else []
    else:
        errors = collect_errors(model, registry, allow_unknown_ops=allow_unknown_ops)
    if errors:
        first = errors[0]
        first.all_errors = errors
        raise first


def collect_errors(
    model: Model, registry: OpRegistry | None = None, *, allow_unknown_ops: bool = False
) -> list[TramaError]:
    """Every structural problem, then (if the structure holds and a registry is given) every
    registry problem. ``allow_unknown_ops`` checks only the nodes whose op the registry knows
    (the format does not need a catalog to know an op)."""
    errors = structural_errors(model)
    if not errors and registry is not None:
        errors = registry_errors(model, registry, allow_unknown_ops=allow_unknown_ops)
    return errors


class Declared:
    """Every node of a document by id, for the rules that follow references: where each id is
    first declared (``index``: its position in ``nodes``, built in one C call), and each node's
    parent id (``parents``, ``None`` at top level; filled as the nodes are checked in order).
    A node is declared to the nodes after it only."""

    __slots__ = ("index", "nodes", "parents")

    def __init__(self, nodes: list[Node], ids: list[str]) -> None:
        self.nodes = nodes
        self.index = index_ids(ids)
        self.parents: list[str | None] = [None] * len(ids)

    def get(self, node_id: str, before: int | None = None) -> tuple[Node, str | None] | None:
        """The node declared as ``node_id`` and its parent id, or ``None``; with ``before``,
        only if it comes before position ``before``."""
        j = self.index.get(node_id)
        if j is None or (before is not None and j >= before):
            return None
        return self.nodes[j], self.parents[j]

    def by_id(self) -> dict[str, Node]:
        return {node_id: self.nodes[j] for node_id, j in self.index.items()}


def index_ids(ids: list[str]) -> dict[str, int]:
    """Each id's position, the first one where an id repeats: built in C, unless some id does."""
    index = dict(zip(ids, range(len(ids)), strict=True))
    if len(index) != len(ids):
        index = {}
        for i, node_id in enumerate(ids):
            index.setdefault(node_id, i)
    return index


#: Records one problem: ``fail(message, location, node_id=None)``.
Fail: TypeAlias = Callable[..., None]


def structural_errors(model: Model) -> list[TramaError]:
    """Check the rules of ``docs/format.md`` ("Structural rules") and return every violation.

    This runs on every load and every dump, so the common case is kept lean: locations are
    formatted only when something fails, names already seen valid are not matched again, and
    each node's parent is computed once. The checks come in sections: the model's own fields,
    the nodes in order (:func:`node_errors`, the hot loop), then what needs every node declared
    (:func:`binding_errors`, the calls, :func:`table_errors`). The fast reader
    (:mod:`trama.format._typed`) proves the node loop's rules for the common case while it
    builds the nodes, and the writer (:mod:`trama.format._writer`, for ``dump`` and ``dumps``,
    see :class:`StructureProof`) while it writes their text; both run this module's other
    sections as they are, and leave every error to this function.
    """
    errors: list[TramaError] = []

    def fail(message: str, location: str, node_id: str | None = None) -> None:
        errors.append(ValidationError(message, location=location, node_id=node_id))

    model_inputs = model_level_errors(model, fail)
    nodes = model.nodes
    ids = [node.id for node in nodes]
    if not all_dotted(ids):
        for i, node_id in enumerate(ids):
            problem = _dotted_problem(node_id, MAX_NODE_DEPTH)
            if problem is not None:
                fail(f"node id {shown_name(node_id)} {problem}", f"/nodes/{i}/id", node_id)
    declared = Declared(nodes, ids)
    calling = node_errors(declared, model_inputs, fail)
    binding_errors(declared, fail)
    if calling:
        errors += call_errors(nodes, calling, declared.by_id())
    table_errors(model, declared, model_inputs, fail)
    return errors


def model_level_errors(model: Model, fail: Fail) -> set[str]:
    """The model's inputs, opset namespaces and facts; returns the set of model input names."""
    model_inputs = set(model.inputs)
    if len(model_inputs) != len(model.inputs):
        fail("model inputs repeat a name", "/inputs")
    for k, name in enumerate(model.inputs):
        if not NAME.match(name):
            fail(f"input name {shown_name(name)} {_not_a_name(name)}", f"/inputs/{k}")
    for namespace in model.opsets:
        if not is_op_name(namespace):
            fail(
                f"opset namespace {shown_name(namespace)} {op_name_problem(namespace)}",
                f"/opsets/{pointer_token(namespace)}",
            )
    for k, fact in enumerate(model.input_facts or ()):
        _check_fact(fact, f"/input_facts/{k}", fail)
    for k, fact in enumerate(model.output_facts or ()):
        _check_fact(fact, f"/output_facts/{k}", fail)
    if model.symbols is not None:
        symbol_errors(model, fail)
    return model_inputs


def input_symbols(model: Model) -> set[str]:
    """The symbols the input facts name: every dimension of their shapes that is a name."""
    return {
        dim for fact in model.input_facts or () for dim in (getattr(fact, "shape", None) or ()) if isinstance(dim, str)
    }


def symbol_errors(model: Model, fail: Fail) -> None:
    """The ranges of ``symbols``: each for a symbol that an input fact's shape names, with
    bounds from 0 to 2**63 - 1 and ``min <= max`` (the decoder has checked a document's types;
    this checks a model built in memory too)."""
    symbols: Any = model.symbols  # a model built in memory may hold anything here
    if symbols is None:
        return
    if not isinstance(symbols, dict):
        fail(f"symbols must be a dict of SymbolRange, got {type(symbols).__name__}", "/symbols")
        return
    named = input_symbols(model)
    for name, bounds in symbols.items():
        where = f"/symbols/{pointer_token(name) if isinstance(name, str) else name}"
        if not isinstance(name, str) or not is_symbol_name(name):
            fail(f"{name!r} is not a symbol name (an identifier other than min and max)", where)
        elif name not in named:
            fail(f"symbol {name!r} is named by no input fact's shape", where)
        if not isinstance(bounds, SymbolRange):
            fail(f"a symbol's range is a SymbolRange, got {type(bounds).__name__}", where)
            continue
        low, high = bounds.min, bounds.max
        for key, bound in (("min", low), ("max", high)):
            if bound is not None and (type(bound) is not int or not 0 <= bound <= MAX_FACT_DIM):
                fail(f"{key} must be an integer from 0 to 2**63 - 1, got {bound!r}", f"{where}/{key}")
        if type(low) is int and type(high) is int and low > high:
            fail(f"symbol {name!r} has min {low} greater than max {high}", where)


def ref_problem(ref: Ref, scope: str | None, scope_inputs: object, declared: Declared, position: int) -> str | None:
    """What is wrong with one reference seen from ``scope`` by the node at ``position``, or
    ``None`` (callers build the location only when there is a problem)."""
    ref_node, output = ref
    if ref_node == INPUT:
        if output in scope_inputs:  # type: ignore[operator]
            return None
        whose = f"composite {scope!r}" if scope is not None else "the model"
        return f"{output!r} is not an input of {whose}"
    found = declared.get(ref_node, position)
    if found is None:
        if ref_node in declared.index:
            return f"refers to {ref_node!r}, which comes later (wrong order or a cycle)"
        return f"refers to unknown node {ref_node!r}"
    if found[1] != scope:
        return f"refers to {ref_node!r}, which is not in the same scope"
    if output not in found[0].outputs:
        return f"node {ref_node!r} has no output {output!r}"
    return None


def node_errors(declared: Declared, model_inputs: set[str], fail: Fail) -> list[int]:
    """The rules each node must meet when it is reached in order: a unique id, an op name, a
    parent declared before it that is a composite, names, and inputs that refer to values
    already made in its scope. Fills ``declared.parents``; returns the indexes of calling nodes
    (checked once every node is declared).

    The passing case of these rules is written out again where a pass over the nodes proves
    them on its way (:mod:`trama.format._typed`, :meth:`trama.format._writer._NodeWriter.texts`):
    this function is the definition, and a rule changed here is changed there too (their tests
    hold them to this function: ``tests/test_typed_reader.py``, ``tests/test_dump_proof.py``)."""
    nodes, index, parents = declared.nodes, declared.index, declared.parents
    good_names: set[str] = set()  # port, output and slot names already matched against NAME
    good_ops: set[str] = set()  # op names already matched against OP_NAME
    calling: list[int] = []

    def check_name(name: str, what: str, node_id: str, i: int, field: str) -> None:
        """Match a name once per distinct name; the location ``/nodes/i/field`` is built on failure."""
        if NAME.match(name):
            good_names.add(name)
        else:
            fail(f"{what} {shown_name(name)} {_not_a_name(name)}", f"/nodes/{i}/{field}", node_id)

    last_parent: str | None = None  # siblings come in runs: the scope of the last one is kept
    scope_inputs: object = model_inputs
    for i, node in enumerate(nodes):
        # The passing path is written out inline (a failed test is explained by the helpers):
        # this loop runs for every node of every load and every dump.
        node_id = node.id
        op = node.op
        if index[node_id] != i:
            fail(f"node id {node_id!r} is used twice", f"/nodes/{i}/id", node_id)
        if op not in good_ops:
            if is_op_name(op):
                good_ops.add(op)
            else:
                fail(f"op {shown_name(op)} {op_name_problem(op)}", f"/nodes/{i}/op", node_id)
        head, dot, _ = node_id.rpartition(".")
        if not dot:
            parent = last_parent = None
            scope_inputs = model_inputs
        elif head != last_parent:
            parent = head
            j = index.get(head)
            if j is not None and j < i and nodes[j].output_bindings is not None:
                scope_inputs = nodes[j].inputs
                last_parent = head
            else:
                last_parent = None
                scope_inputs = model_inputs
                if j is None or j >= i:
                    fail(f"parent {parent!r} does not exist or comes later", f"/nodes/{i}/parent", node_id)
                else:
                    kind = "a calling node, which has no children" if nodes[j].calls is not None else "a leaf"
                    fail(f"parent {parent!r} is {kind} (it has no output_bindings)", f"/nodes/{i}/parent", node_id)
        else:
            parent = last_parent
        parents[i] = parent
        for port, ref in node.inputs.items():
            if port not in good_names:
                check_name(port, "input port name", node_id, i, "inputs")
            ref_node, output = ref
            if ref_node == INPUT:
                if output in scope_inputs:  # type: ignore[operator]
                    continue
            else:
                j = index.get(ref_node)
                if j is not None and j < i and parents[j] == parent and output in nodes[j].outputs:
                    continue
            problem = ref_problem(ref, parent, scope_inputs, declared, i)
            fail(problem or "", f"/nodes/{i}/inputs/{pointer_token(port)}", node_id)
        outputs = node.outputs
        if not good_names.issuperset(outputs):
            for k, output in enumerate(outputs):
                if output not in good_names:
                    check_name(output, "output name", node_id, i, f"outputs/{k}")
        if len(outputs) > 1 and len(set(outputs)) != len(outputs):
            fail("outputs repeat a name", f"/nodes/{i}/outputs", node_id)
        if node.calls is not None:
            calling.append(i)
    return calling


class StructureProof:
    """The structural rules of a model, proven alongside the one pass over its nodes that
    ``dump`` and ``dumps`` make anyway: the pass that writes the nodes' text
    (:mod:`trama.format._writer`) proves :func:`node_errors`' rules as it goes, instead of a pass
    of their own before it (on a 100,000-node chain that pass cost as much as the text).

    **Only ever accepts.** Nothing here builds an error. Wherever a rule is not proven (it is
    broken, or the proof is unsure), :meth:`settle` runs :func:`validate`, which raises the
    model's first error with every error in its ``all_errors``, exactly as validating before
    writing did; should it find nothing (the proof was only unsure), the model is valid and the
    rest of the write needs no proof (``settled``). :func:`structural_errors` stays the one
    authority on what is wrong and where.

    The rules come in :func:`structural_errors`' sections:

    * at construction, what the node pass relies on: :func:`model_level_errors` (the model's
      inputs are the top-level scope), the ids (:func:`all_dotted`, which the writer writes
      unescaped, and :class:`Declared`: none repeated, so each node is its id's first
      declaration, :func:`node_errors`' first rule), and the parameter table's names (dotted,
      :func:`all_dotted`: a slot that names an entry of the table is then a plain name too).
      ``proven`` says whether all of it held;
    * during the pass, in node order, the rest of :func:`node_errors`' rules, by the writer,
      which fills ``declared.parents`` and keeps here the scope (``last_parent``,
      ``scope_inputs``), the node before (``last_node``: its id and its outputs), the names
      and ops already matched (``good_names``, ``good_ops``), the positions of the calling
      nodes, the composites and the nodes with slots (``calling``, ``composites``,
      ``slotted``: the sections after the pass look at those only), and how many nodes it has
      proven (``reached``);
    * at :meth:`finish`, once every node is declared: :func:`binding_errors`,
      :func:`call_errors` and :func:`table_errors`, as they are.
    """

    __slots__ = (
        "calling",
        "composites",
        "declared",
        "good_names",
        "good_ops",
        "last_node",
        "last_parent",
        "model",
        "model_inputs",
        "proven",
        "reached",
        "scope_inputs",
        "settled",
        "slotted",
        "table",
    )

    def __init__(self, model: Model) -> None:
        self.model = model
        broken: list[object] = []

        def flag(*problem: object) -> None:
            broken.append(problem)

        self.model_inputs = model_level_errors(model, flag)
        nodes = model.nodes
        self.table = model.parameters
        ids = [node.id for node in nodes]
        dotted = all_dotted(ids)
        self.declared = Declared(nodes, ids)
        #: Whether the rules checked at construction hold (else :meth:`settle` must decide
        #: before anything is written).
        self.proven = not broken and dotted and len(self.declared.index) == len(ids) and all_dotted(list(self.table))
        self.good_names: set[str] = set()
        self.good_ops: set[str] = set()
        self.calling: list[int] = []
        self.composites: list[int] = []
        self.slotted: list[int] = []
        self.last_parent: str | None = None
        self.scope_inputs: Container[str] = self.model_inputs
        self.last_node: tuple[str | None, list[str]] = (None, [])
        self.reached = 0
        #: Whether the model is known valid: proven whole, or validated the careful way.
        self.settled = False

    def prove_node(self, node: Node, parent: str | None, scope_inputs: Container[str]) -> None:
        """:func:`node_errors`' rules for one node, for a writer that visits the nodes in another
        order than theirs (the nested writer goes depth first, a scope's nodes in their order):
        its id is declared, its parent comes before it, its op and names are plain, each input
        reads a scope input or an output of a node of its scope that comes before it. A node
        proven counts in ``reached`` and fills ``declared.parents`` and the lists :meth:`finish`
        reads; a node whose rules are not proven does not count, so that :meth:`finish` settles.
        A sibling a node reads is visited before it (a scope's nodes are visited in their
        order), so its parent is known when it is compared. (The nested writer proves its
        commonest node, a leaf of one input, inline: the same rules, written out again.)"""
        if self.settled:
            return
        declared = self.declared
        index, parents, nodes = declared.index, declared.parents, declared.nodes
        i = index.get(node.id)
        if i is None or nodes[i] is not node:
            return
        if parent is not None:
            j = index.get(parent)
            if j is None or j >= i:
                return
        good_names, good_ops = self.good_names, self.good_ops
        op = node.op
        if op not in good_ops:
            if not is_op_name(op):
                return
            good_ops.add(op)
        for port, (ref_node, output) in node.inputs.items():
            if port not in good_names:
                if not NAME.match(port):
                    return
                good_names.add(port)
            if ref_node == INPUT:
                if output not in scope_inputs:
                    return
            else:
                j = index.get(ref_node)
                if j is None or j >= i or parents[j] != parent or output not in nodes[j].outputs:
                    return
        outputs = node.outputs
        if not good_names.issuperset(outputs):
            if not all(NAME.match(output) for output in outputs):
                return
            good_names.update(outputs)
        if len(outputs) > 1 and len(set(outputs)) != len(outputs):
            return
        parents[i] = parent
        if node.calls is not None:
            self.calling.append(i)
        if node.output_bindings is not None:
            self.composites.append(i)
        if node.parameters:
            self.slotted.append(i)
        self.reached += 1

    def settle(self) -> None:
        """Decide the careful way, once: :func:`validate` raises the model's first error, or
        returns, and then the model is valid whatever was left unproven."""
        if not self.settled:
            self.settled = True
            validate(self.model)

    def finish(self) -> None:
        """The sections that need every node declared, once the node pass has proven every
        node (else :meth:`settle` decides: a writer that did not prove its nodes, as when the
        layout writes them all, leaves ``reached`` short)."""
        if self.settled:
            return
        declared = self.declared
        nodes = declared.nodes
        broken: list[object] = []

        def flag(*problem: object) -> None:
            broken.append(problem)

        if self.reached != len(nodes):
            broken.append("not every node was proven")
        else:
            binding_errors(declared, flag, self.composites)
            if self.calling and call_errors(nodes, self.calling, declared.by_id()):
                broken.append("calls")
            table_errors(self.model, declared, self.model_inputs, flag, self.slotted)
        if broken:
            self.settle()
        self.settled = True


def binding_errors(declared: Declared, fail: Fail, composites: Iterable[int] | None = None) -> None:
    """Each composite's output bindings: exactly its outputs, each bound to one of its inputs or
    to an output of one of its children (which needs every node declared).

    ``composites``, the positions of every node that has output bindings, in order, spares a
    caller that knows them a look at every node."""
    nodes = declared.nodes
    for i, node in enumerate(nodes) if composites is None else ((i, nodes[i]) for i in composites):
        bindings = node.output_bindings
        if bindings is None:
            continue
        here = f"/nodes/{i}/output_bindings"
        if bindings.keys() != set(node.outputs):
            missing = sorted(set(node.outputs) - bindings.keys())
            extra = sorted(bindings.keys() - set(node.outputs))
            detail = "; ".join(
                part
                for part in (f"missing {missing}" if missing else "", f"not declared {extra}" if extra else "")
                if part
            )
            fail(f"bindings must cover exactly the declared outputs ({detail})", here, node.id)
        for name, ref in bindings.items():
            if ref.node == INPUT:
                if ref.output not in node.inputs:
                    fail(f"{ref.output!r} is not an input of this composite", f"{here}/{pointer_token(name)}", node.id)
                continue
            found = declared.get(ref.node)
            if found is None:
                fail(f"binds to unknown node {ref.node!r}", f"{here}/{pointer_token(name)}", node.id)
            elif found[1] != node.id:
                fail(
                    f"binds to {ref.node!r}, which is not a child of this composite",
                    f"{here}/{pointer_token(name)}",
                    node.id,
                )
            elif ref.output not in found[0].outputs:
                fail(f"node {ref.node!r} has no output {ref.output!r}", f"{here}/{pointer_token(name)}", node.id)


def table_errors(
    model: Model, declared: Declared, model_inputs: set[str], fail: Fail, slotted: Iterable[int] | None = None
) -> None:
    """The model's outputs, and the parameter table with the slots that refer to it.

    ``slotted``, the positions of every node that has slots, in order, spares a caller that
    knows them a look at every node."""
    nodes = model.nodes
    for k, ref in enumerate(model.outputs):
        if ref.node == INPUT:
            fail("a model output must be an output of a top-level node, not %input", f"/outputs/{k}")
            continue
        problem = ref_problem(ref, None, model_inputs, declared, len(nodes))
        if problem is not None:
            fail(problem, f"/outputs/{k}")

    table = model.parameters
    referenced: set[str] = set()
    good_slots: set[str] = set()
    for i, node in enumerate(nodes) if slotted is None else ((i, nodes[i]) for i in slotted):
        slots = node.parameters
        if not slots:
            continue
        for slot, key in slots.items():
            if slot not in good_slots:
                if NAME.match(slot):
                    good_slots.add(slot)
                else:
                    fail(f"slot name {shown_name(slot)} {_not_a_name(slot)}", f"/nodes/{i}/parameters", node.id)
            if key not in table:
                fail(
                    f"slot {slot!r} refers to missing parameter {key!r}",
                    f"/nodes/{i}/parameters/{pointer_token(slot)}",
                    node.id,
                )
            referenced.add(key)
    sized: set[str] = set()
    for name in table:
        where = f"/parameters/{pointer_token(name)}"
        problem = _dotted_problem(name, MAX_ENTRY_SEGMENTS)
        if problem is not None:
            fail(f"parameter name {shown_name(name)} {problem}", where)
        elif name in declared.index:
            fail(f"parameter name {name!r} is also a node id", where)
        if name not in referenced:
            fail(f"parameter {name!r} is not referenced by any node", where)
        problem = _value_problem(table[name].value)
        if problem is not None:
            if problem is _SIZED:
                sized.add(name)
            else:
                fail(f"parameter {name!r} cannot be stored: {problem}", f"{where}/value")
    if sized:
        size_errors(model, sized, fail)


def size_errors(model: Model, sized: Container[str], fail: Fail) -> None:
    """The sizes of the entries ``sized`` (those whose value holds a :class:`SizeExpr`), at
    each slot that names one: each text parses, and every symbol it reads is named by an input
    fact's shape, since a runtime binds the symbols from the inputs' shapes."""
    named = input_symbols(model)
    table = model.parameters
    for i, node in enumerate(model.nodes):
        for slot, key in node.parameters.items():
            if key not in sized:
                continue
            where = f"/nodes/{i}/parameters/{pointer_token(slot)}"
            for size in _sizes_in(table[key].value):
                try:
                    symbols = SizeExpr.parse(size.text).symbols
                except SchemaError as error:
                    fail(
                        f"slot {slot!r} (entry {key!r}) holds a size that does not parse: {error.message}",
                        where,
                        node.id,
                    )
                    continue
                for symbol in sorted(symbols - named):
                    fail(
                        f"slot {slot!r} (entry {key!r}) holds the size {size.text!r}, which reads the symbol "
                        f"{symbol!r}, but no input fact's shape names it",
                        where,
                        node.id,
                    )


def _sizes_in(value: object) -> list[SizeExpr]:
    """The sizes in a setting value, at any depth of its lists."""
    if isinstance(value, SizeExpr):
        return [value]
    if isinstance(value, (list, tuple)):
        return [size for item in value for size in _sizes_in(item)]
    return []


def call_errors(nodes: list[Node], calling: list[int], by_id: dict[str, Node]) -> list[TramaError]:
    """The rules of calling nodes (``docs/format.md``, "Calling nodes"): no contents of their
    own, a target that exists and is no call, the target's op, outputs and connected ports, and
    no call that, directly or through the calls inside its target, needs itself."""
    errors: list[TramaError] = []
    targets_ok = True
    for i in calling:
        node = nodes[i]
        here = f"/nodes/{i}"

        def fail(message: str, where: str, node: Node = node) -> None:
            errors.append(ValidationError(message, location=where, node_id=node.id))

        if node.parameters:
            fail(
                "a calling node has no parameters of its own: it uses those of the node it calls", f"{here}/parameters"
            )
        if node.output_bindings is not None:
            fail(
                "a calling node has no output_bindings: it is not a composite, even when it calls one",
                f"{here}/output_bindings",
            )
        target = by_id.get(node.calls or "")
        problem = f"calls unknown node {node.calls!r}" if target is None else _target_problem(node, target)
        if target is None or problem is not None:
            fail(problem or "", f"{here}/calls")
            targets_ok = False
            continue
        if node.op != target.op:
            fail(f"op {node.op!r} differs from {target.op!r}, the op of {target.id!r}, which it calls", f"{here}/op")
        if node.outputs != target.outputs:
            fail(
                f"outputs {node.outputs} differ from {target.outputs}, those of {target.id!r}, which it calls "
                "(the same names in the same order)",
                f"{here}/outputs",
            )
        if node.inputs.keys() != target.inputs.keys():
            fail(
                f"connects ports {sorted(node.inputs)}, but {target.id!r}, which it calls, connects "
                f"{sorted(target.inputs)}",
                f"{here}/inputs",
            )
    if targets_ok:
        cycle = call_cycle(nodes)
        if cycle is not None:
            where = next(i for i in calling if nodes[i] is cycle[0])
            steps = ", then ".join(f"{call.id!r} calls {call.calls!r}" for call in cycle)
            errors.append(
                ValidationError(
                    f"the calls form a cycle, so expanding them never ends: {steps}, "
                    "and each target contains the next call",
                    location=f"/nodes/{where}/calls",
                    node_id=cycle[0].id,
                )
            )
    return errors


def _target_problem(node: Node, target: Node) -> str | None:
    """Why ``node`` cannot call ``target`` wherever the two are, or ``None``."""
    if target.id == node.id:
        return "calls itself"
    if target.calls is not None:
        return f"calls {target.id!r}, which is itself a call (of {target.calls!r}): call that node directly"
    if node.id.startswith(target.id + "."):
        return f"calls {target.id!r}, one of its own ancestors: a call cannot recurse"
    return None


_UNBOUNDED_DOTTED = re.compile(r"[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*\Z")


def all_dotted(ids: list[str]) -> bool:
    """Whether every id is a dotted identifier of at most :data:`MAX_NODE_DEPTH` segments.

    In a few passes of byte operations over all of them: the joined ids may hold only segment
    characters, dots and the newlines that join them, no empty segment (two dots, a dot at either
    end of an id) and no empty id. One translation marks every byte as a segment character
    (``a``), a dot or newline (``.``) or anything else (``!``): then one search finds a byte that
    has no place in an id, and one an empty segment or id, which is two dots or newlines in a row
    or one at either end (a single search, where the bytes themselves needed four). Where no id
    is longer than :data:`MAX_NAME_LENGTH`, no segment can be too long nor an id have too many
    segments; otherwise each id is checked alone. The newline count guards against an id that
    itself contains a newline, which would otherwise read as two valid ids.
    """
    if not ids:
        return True
    joined = "\n".join(ids)
    if joined.count("\n") != len(ids) - 1 or not joined.isascii():
        return False
    marks = joined.encode("ascii").translate(_MARKS)
    if not marks or b"!" in marks or b".." in marks or marks[:1] == b"." or marks[-1:] == b".":
        return False
    if max(map(len, ids)) <= MAX_NAME_LENGTH:
        return True
    return all(_dotted_problem(node_id, MAX_NODE_DEPTH) is None for node_id in ids)


#: The bytes of joined node ids: segment characters, and dots and the joining newlines.
_SEGMENT_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"
_SEPARATOR_BYTES = b".\n"
#: Each byte as :func:`all_dotted` reads it: ``a`` a segment character, ``.`` a dot or a
#: newline, ``!`` anything else.
_MARKS = bytes(
    ord("a") if byte in _SEGMENT_BYTES else ord(".") if byte in _SEPARATOR_BYTES else ord("!") for byte in range(256)
)


def _not_a_name(name: str) -> str:
    """Why a name that failed :data:`NAME` is not one."""
    if len(name) > MAX_NAME_LENGTH:
        return f"is not an identifier: it has {len(name)} characters, at most {MAX_NAME_LENGTH} are allowed"
    return "is not an identifier ([A-Za-z0-9_]+)"


def _dotted_problem(name: str, max_segments: int) -> str | None:
    """Why ``name`` is not a dotted identifier of at most ``max_segments`` segments, or ``None``."""
    if not DOTTED_ID.match(name):
        if _UNBOUNDED_DOTTED.match(name):
            return f"is not a dotted identifier: a segment has more than {MAX_NAME_LENGTH} characters"
        return "is not a dotted identifier"
    if depth_of(name) > max_segments:
        return f"has {depth_of(name)} segments; at most {max_segments} are allowed"
    return None


def _check_fact(fact: object, where: str, fail: Callable[[str, str], None]) -> None:
    """A fact's shape as decoding requires it (:func:`trama.format._codec.fact_shape_problem`),
    for a model built in memory rather than read."""
    shape = getattr(fact, "shape", None)
    if shape is not None:
        found = fact_shape_problem(shape)
        if found is not None:
            message, dim = found
            fail(message, f"{where}/shape" if dim is None else f"{where}/shape/{dim}")


#: What :func:`_value_problem` says of a value that holds a size and nothing wrong: its sizes
#: are checked against the input symbols (:func:`size_errors`).
_SIZED = "holds a size"


def _value_problem(value: object) -> str | None:
    """Why a parameter value has no form in a document (``None`` when it has one, and
    :data:`_SIZED` when it has one and holds a :class:`SizeExpr`)."""
    if value is None or isinstance(value, (Tensor, bool, int, str)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value} is not a JSON number (store it as a 0-d tensor)"
    if isinstance(value, (list, tuple)):
        sized = None
        for item in value:
            if isinstance(item, Tensor):
                return "a list value may hold scalars, sizes and lists only, not tensors"
            problem = _value_problem(item)
            if problem is not None:
                if problem is not _SIZED:
                    return problem
                sized = _SIZED
        return sized
    if isinstance(value, SizeExpr):
        return _SIZED if type(value.text) is str else f"a size's text is a string, got {type(value.text).__name__}"
    return f"a value of type {type(value).__name__} is not a tensor, bool, int, float, string, null, size or list"


def registry_errors(model: Model, registry: OpRegistry, *, allow_unknown_ops: bool = False) -> list[TramaError]:
    """Check every node against its op's spec and return every mismatch."""
    errors: list[TramaError] = []
    table = model.parameters
    for i, node in enumerate(model.nodes):
        here = f"/nodes/{i}"

        def fail(message: str, where: str = here, node: Node = node) -> None:
            errors.append(RegistryError(message, location=where, node_id=node.id))

        spec = registry.get(node.op)
        if spec is None:
            if not allow_unknown_ops:
                fail(registry.unknown_op_message(node.op), f"{here}/op")
            continue
        is_call = node.calls is not None  # its kind and slots are its target's, checked there
        if not is_call and spec.composite != node.is_composite:
            kind = "a composite" if spec.composite else "a leaf"
            fail(f"op {node.op!r} is {kind}, but this node {'is not' if spec.composite else 'is'}")
        ports = set(node.inputs)
        known_ports = set(spec.inputs) | set(spec.optional_inputs)
        missing = [p for p in spec.inputs if p not in ports]
        if missing:
            fail(f"op {node.op!r} needs input(s) {missing}", f"{here}/inputs")
        if not spec.variadic_inputs:
            unknown = sorted(ports - known_ports)
            if unknown:
                fail(f"op {node.op!r} has no input(s) {unknown}", f"{here}/inputs")
        if not spec.variadic_outputs and set(node.outputs) != set(spec.outputs):
            fail(f"op {node.op!r} declares outputs {list(spec.outputs)}, node has {node.outputs}", f"{here}/outputs")
        for schema in () if is_call else spec.parameters:
            key = node.parameters.get(schema.name)
            if key is None:
                if not schema.optional:
                    fail(f"op {node.op!r} needs parameter {schema.name!r}", f"{here}/parameters")
                continue
            entry = table[key]
            if not schema.accepts(entry.value):
                fail(
                    f"parameter {schema.name!r} of op {node.op!r} must be {' or '.join(schema.types)}, "
                    f"got {value_type(entry.value)} (entry {key!r})",
                    f"{here}/parameters/{schema.name}",
                )
            if schema.learnable is not None and entry.learnable != schema.learnable:
                fail(
                    f"parameter {schema.name!r} of op {node.op!r} must have learnable="
                    f"{str(schema.learnable).lower()} (entry {key!r})",
                    f"{here}/parameters/{schema.name}",
                )
        declared_slots = {schema.name for schema in spec.parameters}
        for slot in node.parameters:
            if slot not in declared_slots:
                fail(f"op {node.op!r} has no parameter slot {slot!r}", f"{here}/parameters/{pointer_token(slot)}")
    return errors
