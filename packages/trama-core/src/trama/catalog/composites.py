"""The two generic composites: ``Sequential`` (a chain) and ``Graph`` (any wiring).

Both mean exactly what their wiring says, so a consumer that evaluates a composite by walking
its children already runs them; an importer may still build its framework's own container
from the children. ``Graph`` is what makes a traced user module portable: its inside is made
of catalog ops, and nothing about the user's class needs to be known elsewhere.
"""

from __future__ import annotations

from trama.catalog._build import op
from trama.format._specs import OpSpec

__all__ = ["SPECS"]

SEQUENTIAL = op(
    "Sequential",
    """
    Its children applied in order, each to the previous one's result, as `torch.nn.Sequential`.
    Every child has an input port `x` and an output `y`. The first child's `x` reads the
    Sequential's port `x` (`%input.x`), each later child's `x` reads the previous child's `y`,
    and the output `y` is bound to the last child's `y`. A Sequential without children binds
    `y` to `%input.x`: the identity.

    The op means that chain and nothing else, and the wiring is authoritative: evaluating the
    children in document order computes it. A Sequential whose wiring is not such a chain is
    malformed (trama's registry validation checks ports and slots, not this). Importers build
    their framework's sequential container from the children in document order.

    Children are named `0`, `1`, … as torch names them (a Sequential built from an `OrderedDict`
    keeps its keys). The names are a convention that keeps torch's `state_dict` keys
    recoverable; they are not validated, and the order of the children is their order in
    `nodes`, never the order of their names.
    """,
    composite=True,
)

GRAPH = op(
    "Graph",
    """
    A composite whose meaning is entirely its wiring: each output is the value its
    `output_bindings` names, computed by evaluating the children in document order. It is what
    an exporter writes for a module that has no op of its own — a user-defined
    `torch.nn.Module`, a traced function — so that its inside stays readable and runs wherever
    the ops it contains are implemented.

    Input ports and outputs are free (any names, any number). By convention the ports are named
    after the module's `forward` arguments; a single result is the output `y`, a tuple of
    results `y0`, `y1`, … in order, and a dict of results its keys (when they are valid names).
    A Graph has no parameter slots: a tensor that the module's `forward` reads directly (a
    parameter or buffer the module owns itself, not through a child) is a `constant` child, so
    that every value in the wiring has a producer.

    Exporters may record the source class in the node's metadata (for example
    `"metadata": {"class": "mypkg.blocks.Block"}`); as the format requires, readers do not
    interpret it. An importer without an implementation of the original class builds the
    Graph from its children and wiring alone.
    """,
    inputs=(),
    outputs=(),
    composite=True,
    variadic_inputs=True,
    variadic_outputs=True,
)

SPECS: tuple[OpSpec, ...] = (SEQUENTIAL, GRAPH)
