"""Structural signatures (trama.tools._repeats): which composites are the same block.

``trama ssa`` prints such blocks once, and the format's writer is to store them once, so the
rule is checked on its own: same structure exactly when only the place, the tensors' values and
the names of the blocks' own entries differ.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable

import numpy as np
import pytest
from test_ssa import stack

from trama import INPUT, Model, Node, Parameter, Ref, Tensor
from trama.tools._repeats import block_signatures, repeated_blocks

LAYERS = ["root.layers.0", "root.layers.1"]


def same(model: Model) -> bool:
    digests = block_signatures(model, LAYERS)
    return digests[LAYERS[0]] == digests[LAYERS[1]]


def test_identical_layers_with_their_own_tensors_have_one_structure() -> None:
    model = stack()
    assert not np.array_equal(
        np.asarray(model.parameters["root.layers.0.fc.weight"].value),
        np.asarray(model.parameters["root.layers.1.fc.weight"].value),
    )
    assert same(model)
    assert repeated_blocks(model) == [LAYERS]


def test_digests_are_hex_and_deterministic() -> None:
    first, again = block_signatures(stack()), block_signatures(stack(seed=5))
    assert first == again  # other weights, same structure
    assert all(re.fullmatch(r"[0-9a-f]{32}", digest) for digest in first.values())
    assert set(first) == {"root", "root.layers", *LAYERS}  # composites only
    assert block_signatures(stack(), ["root.layers.0.fc", "nowhere", "root.layers.0"]) == {
        "root.layers.0": first["root.layers.0"]
    }


def change(edit: Callable[[Model], None]) -> Model:
    model = copy.deepcopy(stack())
    edit(model)
    return model


def entry(model: Model, name: str) -> Parameter:
    return model.parameters[name]


def node(model: Model, node_id: str) -> Node:
    return model.node(node_id)


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (lambda m: setattr(entry(m, "root.layers.1.fc.out_features"), "value", 8), "a setting's value"),
        (lambda m: setattr(entry(m, "root.layers.1.fc.out_features"), "value", 4.0), "an int against a float"),
        (lambda m: setattr(entry(m, "root.layers.1.fc.out_features"), "learnable", True), "the learnable flag"),
        (
            lambda m: setattr(
                entry(m, "root.layers.1.fc.weight"), "value", Tensor.from_array(np.zeros((4, 4), np.float16))
            ),
            "a tensor's dtype",
        ),
        (
            lambda m: setattr(
                entry(m, "root.layers.1.fc.weight"), "value", Tensor.from_array(np.zeros((4, 5), np.float32))
            ),
            "a tensor's shape",
        ),
        (lambda m: setattr(node(m, "root.layers.1.act"), "op", "gelu"), "a child's op"),
        (lambda m: setattr(node(m, "root.layers.1"), "metadata", {"class": "pkg.Other"}), "the class"),
        (lambda m: setattr(node(m, "root.layers.1.act"), "metadata", {"note": 1}), "a child's metadata"),
        (
            lambda m: setattr(node(m, "root.layers.1.act"), "inputs", {"x": Ref(INPUT, "x")}),
            "a child's wiring",
        ),
        (
            lambda m: node(m, "root.layers.1.fc").parameters.update(weight="root.layers.0.fc.weight"),
            "a weight tied to the other layer's",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_what_makes_two_structures(edit: Callable[[Model], None], why: str) -> None:
    assert not same(change(edit)), why
    assert repeated_blocks(change(edit)) == []


def test_what_does_not() -> None:
    """The block's own id, its inputs' wiring, its metadata other than ``class``, and the names
    of private entries: one under another name, of the same kind and value, is the same."""

    def edit(model: Model) -> None:
        node(model, "root.layers.1").metadata = {"class": "pkg.Block", "torch_name": "layers.1"}
        model.parameters["renamed"] = model.parameters.pop("root.layers.1.fc.in_features")
        node(model, "root.layers.1.fc").parameters["in_features"] = "root.layers.1.renamed"
        model.parameters["root.layers.1.renamed"] = model.parameters.pop("renamed")

    model = change(edit)
    assert same(model)


def test_a_shared_outside_entry_is_the_same_structure_only_when_it_is_the_same_entry() -> None:
    def tie_both(to_first: str, to_second: str) -> Model:
        def edit(model: Model) -> None:
            model.parameters["shared.a"] = Parameter(Tensor.from_array(np.ones((4, 4), np.float32)))
            model.parameters["shared.b"] = Parameter(Tensor.from_array(np.ones((4, 4), np.float32)))
            node(model, "root.layers.0.fc").parameters["weight"] = to_first
            node(model, "root.layers.1.fc").parameters["weight"] = to_second
            for name in ("a", "b"):  # each entry also read outside the layers: shared
                model.nodes.append(Node(f"root.{name}", "constant", {}, ["y"], {"value": f"shared.{name}"}))

        return change(edit)

    assert same(tie_both("shared.a", "shared.a"))
    assert not same(tie_both("shared.a", "shared.b"))
    private = change(lambda m: node(m, "root.layers.1.fc").parameters.update(weight="root.layers.1.fc.weight"))
    assert same(private)


def test_groups_in_document_order() -> None:
    model = stack((4, 8, 4, 8, 8))
    assert repeated_blocks(model) == [
        ["root.layers.0", "root.layers.2"],
        ["root.layers.1", "root.layers.3", "root.layers.4"],
    ]
    assert repeated_blocks(model, ["root.layers.4", "root.layers.1", "root.layers.0"]) == [
        ["root.layers.1", "root.layers.4"]
    ]


def test_deep_nesting_needs_no_recursion() -> None:
    depth = 3000
    nodes = []
    for level in range(depth):
        node_id = ".".join(["n"] * (level + 1))
        inner = ".".join(["n"] * (level + 2)) if level < depth - 1 else None
        binding = Ref(inner, "y") if inner else Ref(INPUT, "x")
        nodes.append(Node(node_id, "Graph", {"x": Ref(INPUT, "x")}, ["y"], {}, {"y": binding}))
    model = Model(["x"], [Ref("n", "y")], nodes, {})
    assert len(block_signatures(model)) == depth
    assert repeated_blocks(model) == []
