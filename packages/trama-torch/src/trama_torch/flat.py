"""A document module flattened into one program: what the torch runtimes call on every run.

An imported document is a tree of torch modules (:mod:`trama_torch.importing`): each ``Graph``
is a compiled scope whose ``forward`` calls its children, each ``Sequential`` an
``nn.Sequential``. Calling the root runs that tree as torch does, by recursion: about four
Python frames per level (``__call__``, ``_call_impl``, ``forward``…), so a document nesting 256
levels, which the format allows, would pass Python's default limit of 1000 frames. And a run
pays torch's call overhead once per composite as well as once per leaf.

Both composites mean exactly their wiring (``docs/ops.md``), so nothing is lost by running the
wiring itself: :func:`flat_program` inlines every ``Graph`` and ``Sequential`` into its parent,
down to the leaves, and compiles the result with ``torch.fx`` into one ``forward`` that calls
each leaf module directly (``print(program.code)`` shows it). A run is then one call of that
``forward``: no recursion however deep the tree, and the leaves run exactly as they do inside
the tree (the same module objects, called the same way, their hooks included, so streaming,
profiles and failure probes work unchanged).

What is not inlined is called as a unit, exactly as its parent would call it: any other module
(``TransformerEncoder``, an op pack's composite, a leaf) and any composite that carries hooks
when the program is built (a placed subtree, whose hooks move values between devices), whose
inside then runs as torch runs it. A module called from several places (a calling node) is
inlined at each, as the numpy runtime expands calls; the document's expansion is bounded
(:data:`trama.format._calls.MAX_EXPANDED_NODES`).

The walk over the tree is iterative too: each scope being inlined is a generator on an explicit
stack, asking the driver to call (or inline) each child.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any

import torch.fx as fx
from torch import nn

from trama_torch.wiring import ScopeModule

__all__ = ["FlatProgram", "flat_program"]

#: A scope being inlined: yields ``(module, args, kwargs)`` for each child call and receives the
#: fx value of its result; returns the fx value of its own result.
_Frame = Generator[tuple[nn.Module, tuple[Any, ...], dict[str, Any]], Any, Any]


class FlatProgram(fx.GraphModule):
    """The flattened program of a document module (see the module doc): ``forward(*inputs)``
    returns the tuple of the model's outputs, as the document module's does. Its attributes
    ``m0``, ``m1``, … are the document's own modules (shared, not copied)."""

    def _recompile_submodules(self) -> list[tuple[str, Any]]:
        """The modules it calls are the document's, compiled when they were built: compiling the
        program recompiles none of them (``GraphModule`` would recompile every scope it holds)."""
        return []


def _hooked(module: nn.Module) -> bool:
    return bool(module._forward_hooks or module._forward_pre_hooks)


def _inlined(module: nn.Module, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> bool:
    """Whether a call of ``module`` is replaced by its wiring: a compiled scope (a ``Graph``)
    or a plain ``nn.Sequential`` of one value, without hooks."""
    if _hooked(module) or kwargs:
        return False
    if isinstance(module, ScopeModule):
        return True
    return type(module) is nn.Sequential and len(args) == 1


def _scope(module: ScopeModule, args: tuple[Any, ...], graph: fx.Graph, owner: Any) -> _Frame:
    """A compiled scope's graph copied into ``graph``: its placeholders are ``args``, its
    constants read from the scope module itself, its children called (or inlined) by the
    driver."""
    env: dict[fx.Node, Any] = {}
    given = iter(args)

    def mapped(value: Any) -> Any:
        return fx.node.map_arg(value, env.__getitem__)

    for node in module.graph.nodes:
        if node.op == "placeholder":
            env[node] = next(given)
        elif node.op == "get_attr":
            env[node] = graph.get_attr(f"{owner(module)}.{node.target}")
        elif node.op == "call_module":
            child = module.get_submodule(str(node.target))
            env[node] = yield child, mapped(node.args), mapped(node.kwargs)
        elif node.op == "output":
            return mapped(node.args[0])
        else:
            env[node] = graph.create_node(node.op, node.target, mapped(node.args), mapped(node.kwargs))
    raise AssertionError("a compiled scope's graph ends with its output")  # pragma: no cover


def _sequential(module: nn.Sequential, args: tuple[Any, ...]) -> _Frame:
    """``nn.Sequential.forward``: each child on the previous one's result."""
    (value,) = args
    for child in module._modules.values():
        if child is not None:
            value = yield child, (value,), {}
    return value


def flat_program(document: ScopeModule) -> FlatProgram:
    """The flattened program of ``document`` (see the module doc), built once, at prepare time,
    after placement and streaming have hooked their modules."""
    graph = fx.Graph()
    holder = nn.Module()
    names: dict[int, str] = {}

    def owner(module: nn.Module) -> str:
        name = names.get(id(module))
        if name is None:
            name = names[id(module)] = f"m{len(names)}"
            holder.add_module(name, module)
        return name

    def frame(module: nn.Module, args: tuple[Any, ...]) -> _Frame:
        if isinstance(module, ScopeModule):
            return _scope(module, args, graph, owner)
        assert isinstance(module, nn.Sequential)
        return _sequential(module, args)

    inputs = tuple(graph.placeholder(str(node.target)) for node in document.graph.nodes if node.op == "placeholder")
    stack = [_scope(document, inputs, graph, owner)]
    sent: Any = None
    while stack:
        try:
            module, args, kwargs = stack[-1].send(sent)
        except StopIteration as finished:
            stack.pop()
            sent = finished.value
            continue
        if _inlined(module, args, kwargs):
            stack.append(frame(module, args))
            sent = None
        else:
            sent = graph.call_module(owner(module), args, kwargs)
    graph.output(sent)
    program = FlatProgram(holder, graph, class_name="FlatProgram")
    for name, held in holder._modules.items():  # the modules themselves, not copies of a path
        if held is not None:
            program._modules[name] = held
    program.training = False
    return program
