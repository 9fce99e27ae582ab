"""A scope's wiring as a ``torch.fx.GraphModule``: how an imported ``Graph`` (and the whole
document) runs its children.

A scope is a list of children in document order, each reading ports from the scope's inputs
or from earlier children, and a list of values to return. Interpreting that on every call
(looking up references in a dict, per node) would cost more than the torch code it replaces,
so the wiring is compiled once into Python code with fx: ``print(module.code)`` shows exactly
what runs, one line per child, and the call is as fast as hand-written ``forward``.

How a child is called (the single convention :func:`call_node` also follows):

* a catalog leaf module (``nn.Linear``, ``nn.GRU``…) as torch code calls it,
  :func:`trama_torch.leaves.leaf_call_arguments`; a result tuple is taken apart along
  :func:`trama_torch.leaves.leaf_result_structure`;
* ``TransformerEncoder`` with its ports as keywords (its forward's parameter names, some of
  which may be left out);
* another namespace's module (an op pack's) with its ports in its spec's order: positionally
  up to the first optional port left unconnected, by name after it;
* anything else (a function op's module, a ``Graph``, a ``Sequential``) with its connected
  ports positionally in ``node.inputs`` order,

each returning the value of its only output, or a tuple of its outputs in order.

Children are registered as submodules under their node names, so the ``state_dict`` keys are
the original module's where the tree is the original's; a calling node's module, being the
very object of the node it calls, is registered once and called again.

No string of the document reaches the generated code unless the format already restricts it
to ``[A-Za-z0-9_]`` (node names, ports): fx writes an attribute name into the Python source
of ``forward`` unescaped, so a free-form name would be code. The torch name a node's metadata
keeps (``{"torch_name": "block1-0"}``, any text torch accepts) is data only: the child is
held under its node name, and the scope's ``state_dict`` hooks write and read its keys under
the torch name (:func:`scope_module`). Metadata never decides what is computed: a torch name
that two children claim, or that another child's name already is, is not used.

A module node's torch name may be a dotted path below the scope (``{"torch_name":
"attentions.0"}``): the capture writes the items of two ``ModuleList``\\ s whose calls interleave
as children of the scope itself, and their keys still say ``attentions.0.weight``. A module that
torch registers under several names is held once, where it is called, and the scope's
``{"torch_aliases": {"shared": "encoder.embed_tokens"}}`` registers it again under each other
name (:func:`register_aliases`): ``back.shared is back.encoder.embed_tokens``, as in the original,
and the keys of both names are in the ``state_dict``. Both are data too: they name
``state_dict`` keys and attributes that no generated code reads.
"""

from __future__ import annotations

import functools
import keyword
import operator
import re
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.fx as fx
from torch import nn

from trama.catalog import op_namespace
from trama.format import INPUT, Node, Ref
from trama_torch import leaves
from trama_torch.walk import submodules

__all__ = [
    "TORCH_ALIASES",
    "ScopeModule",
    "as_module",
    "call_arguments",
    "call_node",
    "register_aliases",
    "result_paths",
    "scope_module",
    "torch_aliases",
    "torch_name",
    "torch_path",
]

#: Node metadata key of a ``Graph`` scope: ``{other name: name}``, torch paths below the scope's
#: module, each other name a submodule of it is registered under (:func:`register_aliases`).
TORCH_ALIASES = "torch_aliases"

#: Composite ops whose module takes its ports as keywords.
_KEYWORD_OPS = frozenset({"TransformerEncoder"})


def _is_leaf(op: str) -> bool:
    return op in _leaf_ops()


_LEAF_OPS: frozenset[str] | None = None


def _leaf_ops() -> frozenset[str]:
    global _LEAF_OPS
    if _LEAF_OPS is None:
        _LEAF_OPS = frozenset(leaves.leaf_factories())
    return _LEAF_OPS


def call_arguments(node: Node, module: Any, values: Mapping[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The ``(args, kwargs)`` that call ``node``'s built module on its port values."""
    if _is_leaf(node.op) and isinstance(module, nn.Module):
        return leaves.leaf_call_arguments(node, values, leaves.leaf_call_constants(module))
    if node.op in _KEYWORD_OPS:
        return (), {port: values[port] for port in node.inputs}
    if op_namespace(node.op) != "trama":
        return _spec_order_arguments(node, values)
    return tuple(values[port] for port in node.inputs), {}


def _spec_order_arguments(node: Node, values: Mapping[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Another namespace's module is called as its op's spec declares its ports (its inputs,
    then its optional inputs), whatever order the document lists them in: positionally up to the
    first port left unconnected, by name after it (so an optional port left out never shifts the
    others), and ports beyond the spec (a variadic op) positionally after the declared ones."""
    from trama.extension import registry

    spec = registry(None).get(node.op)
    declared = [*spec.inputs, *spec.optional_inputs] if spec is not None else []
    connected = [port for port in declared if port in node.inputs]
    gap = next((index for index, port in enumerate(declared) if port not in node.inputs), len(declared))
    extra = [port for port in node.inputs if port not in declared]
    if extra and gap < len(declared):
        raise TypeError(f"{node.op} at {node.id!r}: ports beyond its spec follow an unconnected optional port")
    args = [values[port] for port in declared[:gap]] + [values[port] for port in extra]
    kwargs = {port: values[port] for port in connected if port not in declared[:gap]}
    return tuple(args), kwargs


def result_paths(node: Node) -> dict[str, tuple[int, ...]]:
    """Where each output of ``node`` sits in what its module returns: ``()`` for the returned
    value itself, ``(1, 0)`` for ``result[1][0]`` (an LSTM's ``c_n``)."""
    if _is_leaf(node.op):
        paths: dict[str, tuple[int, ...]] = {}
        _walk(leaves.leaf_result_structure(node.op), (), paths)
        return paths
    if len(node.outputs) == 1:
        return {node.outputs[0]: ()}
    return {output: (index,) for index, output in enumerate(node.outputs)}


def _walk(structure: Any, path: tuple[int, ...], paths: dict[str, tuple[int, ...]]) -> None:
    if isinstance(structure, str):
        paths[structure] = path
    else:
        for index, part in enumerate(structure):
            _walk(part, (*path, index), paths)


def call_node(node: Node, module: Any, values: Mapping[str, Any]) -> dict[str, Any]:
    """Call any built module the way its scope does, and return its outputs by name."""
    if _is_leaf(node.op) and isinstance(module, nn.Module):
        return leaves.call_leaf(node, module, values)
    args, kwargs = call_arguments(node, module, values)
    result = module(*args, **kwargs)
    outputs: dict[str, Any] = {}
    for output, path in result_paths(node).items():
        value = result
        for index in path:
            value = value[index]
        outputs[output] = value
    return outputs


class _Callable(nn.Module):
    """A built object that is not a torch module (another namespace's factory may return a
    plain callable), made one so that the scope can register and call it."""

    def __init__(self, function: Any) -> None:
        super().__init__()
        self.function = function

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)


def as_module(obj: Any) -> nn.Module:
    """``obj`` if it is a torch module, else a module that calls it."""
    return obj if isinstance(obj, nn.Module) else _Callable(obj)


class ScopeModule(fx.GraphModule):
    """A compiled scope: a ``GraphModule`` whose submodules (and constant tensors) are the
    scope's children, and ``child_attributes`` says which attribute holds each child (its own
    name, unless Python or ``GraphModule`` reserve it); ``state_names`` says under which torch
    path (``block1-0``, ``attentions.0``) its ``state_dict`` writes an attribute's keys, where
    that is not the attribute itself."""

    child_attributes: dict[str, str]
    state_names: dict[str, str]

    def _recompile_submodules(self) -> list[tuple[str, Any]]:
        """``GraphModule`` recompiles every child ``GraphModule`` whenever it compiles itself, and
        they theirs, down the tree: building a tree of scopes bottom-up (each compiled as it is
        built) would compile the scope ``k`` levels down ``k`` times, by recursion, a few frames
        per level. A child scope was compiled when it was built and its graph is not edited
        after, so only other ``GraphModule`` children are recompiled here."""
        return [
            (name, child.recompile())
            for name, child in self.named_children()
            if isinstance(child, fx.GraphModule) and not isinstance(child, ScopeModule)
        ]


def scope_module(
    *,
    inputs: Sequence[str],
    children: Sequence[tuple[Node, Any]],
    outputs: Sequence[Ref],
    always_tuple: bool,
    class_name: str,
    module_class: type[ScopeModule] | None = None,
    aliases: Mapping[str, str] | None = None,
) -> ScopeModule:
    """Compile one scope into a module whose ``forward`` takes ``inputs`` positionally.

    ``children`` are the scope's nodes with their built objects, in document order; ``outputs``
    the values returned: the single one as it is unless ``always_tuple``, several as a tuple.
    ``module_class`` is a subclass of :class:`ScopeModule` to build instead. ``aliases`` are the
    scope's :data:`TORCH_ALIASES`, registered by :func:`register_aliases`.
    """
    holder = nn.Module()
    attributes: dict[str, str] = {}  # child name -> the attribute that holds its module or tensor
    held: set[str] = set()  # children whose attribute is a tensor (a constant), read by get_attr
    by_object: dict[int, str] = {}
    bare: set[int] = set()  # the modules made here to hold a constant at its torch path

    # Own nodes first, and among them the tensors of submodules (``qkv.weight``) last, so that
    # they go into the submodule where one was built and into a bare one where none was.
    def order(child: tuple[Node, Any]) -> tuple[bool, bool]:
        return child[0].calls is not None, "." in _state_path(child[0])

    for node, obj in sorted(children, key=order):
        _check_segment(node)
        same_scope = node.calls is not None and node.calls.rpartition(".")[0] == node.id.rpartition(".")[0]
        target = node.calls.rpartition(".")[2] if node.calls is not None and same_scope else None
        tensor = _constant_tensor(node, obj) if node.calls is None else None
        if target is not None and target in held:
            attributes[node.name] = attributes[target]
            held.add(node.name)
        elif tensor is not None and "." in _state_path(node):
            attributes[node.name] = _hold_nested_tensor(
                holder, _state_path(node), node.name, tensor, persistent=_persistent(node), bare=bare
            )
            held.add(node.name)
        elif tensor is not None:
            attributes[node.name] = _hold_tensor(holder, node.name, tensor, persistent=_persistent(node))
            held.add(node.name)
        elif id(obj) in by_object:
            attributes[node.name] = by_object[id(obj)]
        else:
            attributes[node.name] = by_object[id(obj)] = _hold_module(holder, node.name, obj)
    graph = fx.Graph()
    env: dict[Ref, fx.Node] = {}
    for port in inputs:
        env[Ref(INPUT, port)] = graph.placeholder(_argument_name(port, {node.target for node in env.values()}))
    pending: dict[str, tuple[fx.Node, dict[str, tuple[int, ...]]]] = {}
    parts: dict[tuple[str, tuple[int, ...]], fx.Node] = {}

    def value(ref: Ref) -> fx.Node:
        """The fx value of a reference, taking a child's result apart on first use (once per
        part: an LSTM's ``h_n`` and ``c_n`` share the ``result[1]`` they come from)."""
        found = env.get(ref)
        if found is None:
            call, paths = pending[ref.node]
            found, path = call, paths[ref.output]
            for depth in range(1, len(path) + 1):
                key = (ref.node, path[:depth])
                if key not in parts:
                    parts[key] = graph.call_function(operator.getitem, (found, path[depth - 1]))
                found = parts[key]
            env[ref] = found
        return found

    for node, obj in children:
        if node.name in held:
            env[Ref(node.id, node.outputs[0])] = graph.create_node(
                "get_attr", attributes[node.name], name=_value_name(attributes[node.name])
            )
            continue
        values = {port: value(ref) for port, ref in node.inputs.items()}
        args, kwargs = call_arguments(node, obj, values)
        call = graph.create_node("call_module", attributes[node.name], args, kwargs, _value_name(attributes[node.name]))
        pending[node.id] = (call, result_paths(node))
    results = tuple(value(ref) for ref in outputs)
    graph.output(results[0] if len(results) == 1 and not always_tuple else results)
    module = (module_class or ScopeModule)(holder, graph, class_name=class_name)
    # GraphModule copies buffers as persistent. A child scope module is held whole, with its own
    # buffers' flags, so the walk stops there (and never recurses: a document may nest deep).
    for path, part in submodules(holder, stop=lambda sub: isinstance(sub, ScopeModule)):
        if isinstance(part, ScopeModule) and path:
            continue
        copy = module.get_submodule(path) if path else module
        for attribute in part._non_persistent_buffers_set:
            copy.register_buffer(attribute, getattr(copy, attribute), persistent=False)
    module.child_attributes = attributes
    renames = _state_renames([node for node, _ in children], attributes, holder)
    module.state_names = renames
    if renames:
        module.register_state_dict_post_hook(functools.partial(_keys_out, renames))  # type: ignore[no-untyped-call]
        back = {v: k for k, v in renames.items()}
        depth = max(path.count(".") for path in back) + 1
        module.register_load_state_dict_pre_hook(functools.partial(_keys_in, back, depth))  # type: ignore[no-untyped-call]
    if aliases:
        register_aliases(module, aliases)
    return module


#: A node id segment or port name as the format allows it: the only document text that may
#: reach generated code (fx writes ``self.fc1`` or ``getattr(self, "0")``).
_SEGMENT = re.compile(r"[A-Za-z0-9_]+")


def _check_segment(node: Node) -> None:
    """Refuse a child whose name is not a format segment. Every document that ``trama.load``
    or ``trama.Model`` validation admits passes; this guards the one place a name becomes
    code against a model built by hand and never validated."""
    if _SEGMENT.fullmatch(node.name) is None:
        from trama.errors import ImportModelError

        raise ImportModelError(f"the node name {node.name[:80]!r} is not a name the format allows", node_id=node.id)


def _state_renames(nodes: Sequence[Node], attributes: Mapping[str, str], holder: nn.Module) -> dict[str, str]:
    """attribute -> the torch path its ``state_dict`` keys carry, where the two differ: the
    torch name the exporter escaped (``block1_0`` holds what torch called ``block1-0``), a
    module's path below the scope (``attentions_0`` holds ``attentions.0``), or a node name
    Python or ``GraphModule`` reserve (``code_`` holds ``code``). A path that is not free
    (another child's, one that starts with another child's attribute, one that starts another
    path, or a reserved one) is not used: its child keeps its attribute's keys, so no two
    children ever share keys, and each key is read back into the child that wrote it."""
    owned = {*holder._modules, *holder._parameters, *holder._buffers}
    wanted: dict[str, str] = {}
    for node in nodes:
        attribute = attributes.get(node.name)
        if attribute is None or attribute in wanted or node.calls is not None or attribute not in owned:
            continue
        original = torch_name(node) if node.op == "constant" else torch_path(node)
        if original != attribute:
            wanted[attribute] = original
    claims: dict[str, int] = {}
    for original in wanted.values():
        claims[original] = claims.get(original, 0) + 1
    free = {
        original
        for original in wanted.values()
        if claims[original] == 1 and original not in owned and original.partition(".")[0] not in owned
    }
    # No path may start another (``attentions`` and ``attentions.0``): their keys would mix.
    starts = {".".join(parts[:end]) for parts in (path.split(".") for path in free) for end in range(1, len(parts))}
    clashing = starts & free
    return {
        attribute: original
        for attribute, original in wanted.items()
        if original in free and original not in clashing and not _starts_with_any(original, clashing)
    }


def _starts_with_any(path: str, starts: set[str]) -> bool:
    """Whether one of ``starts`` is a path ``path`` lies below."""
    parts = path.split(".")
    return any(".".join(parts[:end]) in starts for end in range(1, len(parts)))


def _renamed(key: str, prefix: str, renames: Mapping[str, str]) -> str:
    head, dot, tail = key[len(prefix) :].partition(".")
    new = renames.get(head)
    return key if new is None else f"{prefix}{new}{dot}{tail}"


def _keys_out(
    renames: Mapping[str, str], module: nn.Module, state_dict: dict[str, Any], prefix: str, local_metadata: Any
) -> None:
    """The scope's ``state_dict`` post-hook: its children's keys under their torch names. The
    scope's keys are the last ones written, all starting with ``prefix``; they are written
    again in the same order."""
    keys = list(state_dict)
    start = len(keys)
    while start > 0 and keys[start - 1].startswith(prefix):
        start -= 1
    moved = [(key, state_dict.pop(key)) for key in keys[start:]]
    for key, value in moved:
        state_dict[_renamed(key, prefix, renames)] = value


def _keys_in(
    renames: Mapping[str, str],
    depth: int,
    module: nn.Module,
    state_dict: dict[str, Any],
    prefix: str,
    local_metadata: Any,
    strict: bool,
    missing_keys: list[str],
    unexpected_keys: list[str],
    error_msgs: list[str],
) -> None:
    """The scope's ``load_state_dict`` pre-hook: keys under torch paths (of at most ``depth``
    parts) back to attributes."""
    for key in [key for key in state_dict if key.startswith(prefix)]:
        new = _restored(key, prefix, renames, depth)
        if new != key and new not in state_dict:
            state_dict[new] = state_dict.pop(key)


def _restored(key: str, prefix: str, back: Mapping[str, str], depth: int) -> str:
    """``key`` with the torch path it starts with below ``prefix`` (``attentions.0``) back to
    the attribute that holds that child (``attentions_0``); the paths start no other."""
    parts = key[len(prefix) :].split(".")
    for end in range(1, min(depth, len(parts) - 1) + 1):
        attribute = back.get(".".join(parts[:end]))
        if attribute is not None:
            return ".".join([f"{prefix}{attribute}", *parts[end:]])
    return key


def _value_name(attribute: str) -> str:
    """The name of the value a child gives in the generated ``forward``: fx names it after the
    attribute, which must not be ``self`` (transformers' ``attention.self``), the name of the
    module itself there."""
    name = attribute.replace(".", "_")
    return f"{name}_out" if name == "self" else name


def _argument_name(port: str, taken: set[Any]) -> str:
    """A port's name as a parameter of the generated ``forward``: itself when Python allows it
    (``x``, ``tokens``), else made one (``0`` -> ``in_0``, ``def`` -> ``in_def``, ``self`` ->
    ``in_self``); ports are passed by position, so the name only has to be valid and unique."""
    name = port if port.isidentifier() and not keyword.iskeyword(port) and port != "self" else f"in_{port}"
    candidate, n = name, 1
    while candidate in taken:
        candidate, n = f"{name}_{n}", n + 1
    return candidate


def _constant_tensor(node: Node, obj: Any) -> torch.Tensor | None:
    """The tensor of a ``constant`` node (the module's ``value``), held by the scope itself.

    A parameter that ``forward`` reads directly (``x * self.scale``) was exported as a
    ``constant`` named after it; holding the tensor as the scope's own attribute of that name,
    read with ``get_attr``, gives back the original ``state_dict`` key (``scale``, not
    ``scale.value``) and the original ``self.scale``."""
    if node.op != "constant" or not isinstance(obj, nn.Module):
        return None
    value = getattr(obj, "value", None)
    return value if isinstance(value, torch.Tensor) else None


def _attribute_name(holder: nn.Module, name: str) -> str:
    """The attribute that holds child ``name``: the name itself (so ``state_dict`` keys are the
    original's), unless Python or ``GraphModule`` reserve it (``if``, ``graph``, ``code``): then
    ``if_``, ``graph_``… (``self`` is allowed: the generated code names its value otherwise)."""
    candidate = name
    while keyword.iskeyword(candidate) or hasattr(fx.GraphModule, candidate) or hasattr(holder, candidate):
        candidate = f"{candidate}_"
    return candidate


#: The longest torch name honoured (the format's limit for one name).
_MAX_TORCH_NAME = 256


def torch_name(node: Node) -> str:
    """The name torch gave the child's module or tensor: the torch name the exporter had to
    escape to make the id (``{"torch_name": "block1-0"}`` in its metadata, see
    ``docs/format.md``, "Names from other frameworks"), or its node name. A torch name is
    honoured only as torch could have made it (a printable string of at most 256 characters
    without a dot); it is data, used for ``state_dict`` keys and ``nn.Sequential`` entries,
    never for the generated code."""
    original = (node.metadata or {}).get("torch_name")
    if (
        isinstance(original, str)
        and 0 < len(original) <= _MAX_TORCH_NAME
        and "." not in original
        and original.isprintable()
    ):
        return original
    return node.name


def torch_path(node: Node) -> str:
    """Where a module node's ``state_dict`` keys go below its scope: its torch name, which for
    a module may be a dotted path (``attentions.0``: an item of a container whose calls the
    capture wrote into the scope itself) of parts as :func:`torch_name` honours a name, else
    its node name. Data only, as the torch name."""
    original = (node.metadata or {}).get("torch_name")
    if isinstance(original, str) and "." in original and _is_torch_path(original):
        return original
    return torch_name(node)


def _is_torch_path(path: str) -> bool:
    """A dotted path torch could have made: printable, at most 256 characters, no empty part."""
    return 0 < len(path) <= _MAX_TORCH_NAME and path.isprintable() and all(path.split("."))


def torch_aliases(node: Node) -> dict[str, str]:
    """A ``Graph`` node's :data:`TORCH_ALIASES` (``{"shared": "encoder.embed_tokens"}``), its
    well-formed entries only: both torch paths as :func:`torch_path` honours them."""
    found = (node.metadata or {}).get(TORCH_ALIASES)
    if not isinstance(found, Mapping):
        return {}
    return {
        alias: target
        for alias, target in found.items()
        if isinstance(alias, str) and isinstance(target, str) and _is_torch_path(alias) and _is_torch_path(target)
    }


def register_aliases(scope: ScopeModule, aliases: Mapping[str, str]) -> None:
    """Register submodules of ``scope`` again under their other torch names: ``{"shared":
    "encoder.embed_tokens"}`` makes ``scope.shared`` the very module that the scope holds at
    ``encoder.embed_tokens`` (T5 and BART register one ``nn.Embedding`` under both names), so its
    keys are in the ``state_dict`` under both, and a tie stays one object.

    Both are torch paths below the scope, as its ``state_dict`` keys spell them: the target is
    found through the modules the scope holds (a child held under its node name, by its torch
    path). The alias goes into the scope itself, or into plain ``nn.Module``\\ s made for it
    where its path names nothing yet, never into a module a node built, and only under a name
    that nothing there has or claims: an alias replaces nothing, changes no computation and
    makes no cycle (the scope is no submodule of its own submodule). An entry that cannot be
    placed so is left out: it is data."""
    made: set[int] = set()
    for alias, target in aliases.items():
        module = _torch_submodule(scope, target)
        if module is None or module is scope:
            continue
        *path, last = alias.split(".")
        owner: nn.Module = scope
        placed = True
        for part in path:
            child = owner._modules.get(part)
            if child is None and _free(owner, part):
                child = nn.Module()
                owner.add_module(part, child)
                made.add(id(child))
            if child is None or id(child) not in made:
                placed = False
                break
            owner = child
        if placed and _free(owner, last):
            owner.add_module(last, module)


def _free(owner: nn.Module, name: str) -> bool:
    """Whether ``name`` is no attribute of ``owner`` and starts no torch path of its keys."""
    if hasattr(owner, name):
        return False
    names: dict[str, str] = getattr(owner, "state_names", {}) if isinstance(owner, ScopeModule) else {}
    return all(path.partition(".")[0] != name for path in names.values())


def _torch_submodule(scope: nn.Module, path: str) -> nn.Module | None:
    """The module at ``path`` below ``scope`` as ``state_dict`` keys name it: in a compiled scope
    by its children's torch paths (``attentions.0``, ``block1-0``), elsewhere by the registered
    names; ``None`` where that is no module."""
    parts = path.split(".")
    module = scope
    index = 0
    while index < len(parts):
        names: dict[str, str] = getattr(module, "state_names", {}) if isinstance(module, ScopeModule) else {}
        child: nn.Module | None = None
        step = 1
        for attribute, original in names.items():
            pieces = original.split(".")
            if parts[index : index + len(pieces)] == pieces:
                child, step = module._modules.get(attribute), len(pieces)
                break
        else:
            if parts[index] not in names:  # an attribute whose keys are written elsewhere is not its name
                child = module._modules.get(parts[index])
        if child is None:
            return None
        module = child
        index += step
    return module


def _state_path(node: Node) -> str:
    """A ``constant``'s dotted ``torch_name`` (``qkv.weight``: the state of a submodule that the
    scope reads without calling it, as Swin's attention reads ``self.qkv.weight``), or ``""``."""
    original = (node.metadata or {}).get("torch_name")
    if node.op != "constant" or not isinstance(original, str) or "." not in original:
        return ""
    parts = original.split(".")
    return original if all(_IDENTIFIER.fullmatch(part) and not keyword.iskeyword(part) for part in parts) else ""


#: A segment of a constant's torch path written into generated code (``self.qkv.weight``):
#: ASCII only, since Python folds other identifiers (NFKC: ``ﬁ`` reads as ``fi``).
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


#: A bare module, to ask what every module holds (``training``, ``forward``…): no such name
#: can be a part of a constant's torch path.
_BARE = nn.Module()


def _hold_nested_tensor(
    holder: nn.Module, path: str, name: str, tensor: torch.Tensor, *, persistent: bool, bare: set[int]
) -> str:
    """Hold ``tensor`` at ``path`` below ``holder`` (``qkv.weight``): where a child built at
    that path already holds this very tensor, it is shared; otherwise it goes into bare
    ``nn.Module``\\ s made for it (``bare``), so that the ``state_dict`` key is the original's.
    A tensor is never added to a module a node built (a ``Linear`` declared without a bias
    must not gain one from a constant's metadata): where the path meets one, or is taken, the
    tensor is held under the node's own name instead."""
    *prefix, leaf = path.split(".")
    owner: nn.Module | None = holder
    missing: list[str] = []  # the parts to make, bare, below the last existing one
    for part in prefix:
        child = owner._modules.get(part) if owner is not None else None
        if child is None and owner is not None:
            if hasattr(owner, part) or (owner is not holder and id(owner) not in bare):
                return _hold_tensor(holder, name, tensor, persistent=persistent)
            missing.append(part)
            owner = None
        elif owner is None:
            missing.append(part)
        else:
            owner = child
    if owner is not None:
        existing = getattr(owner, leaf, None)
        if existing is tensor:
            return path
        if id(owner) not in bare or existing is not None or hasattr(type(owner), leaf) or leaf in owner.__dict__:
            return _hold_tensor(holder, name, tensor, persistent=persistent)
    elif any(hasattr(_BARE, part) for part in (*missing[1:], leaf)):
        return _hold_tensor(holder, name, tensor, persistent=persistent)
    else:
        owner = holder.get_submodule(".".join(prefix[: len(prefix) - len(missing)]))
        for part in missing:
            child = nn.Module()
            owner.add_module(part, child)
            bare.add(id(child))
            owner = child
    if isinstance(tensor, nn.Parameter):
        owner.register_parameter(leaf, tensor)
    else:
        owner.register_buffer(leaf, tensor, persistent=persistent)
    return path


def _persistent(node: Node) -> bool:
    """Whether a constant's tensor belongs in the ``state_dict``: not for a buffer its module
    kept out of it, nor for a tensor the program computed (``{"torch_persistent": false}``)."""
    return (node.metadata or {}).get("torch_persistent") is not False


def _hold_tensor(holder: nn.Module, name: str, tensor: torch.Tensor, *, persistent: bool = True) -> str:
    attribute = _attribute_name(holder, name)
    if isinstance(tensor, nn.Parameter):
        holder.register_parameter(attribute, tensor)
    else:
        holder.register_buffer(attribute, tensor, persistent=persistent)
    return attribute


def _hold_module(holder: nn.Module, name: str, obj: Any) -> str:
    attribute = _attribute_name(holder, name)
    holder.add_module(attribute, as_module(obj))
    return attribute
