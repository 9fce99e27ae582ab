"""Deep trees: a document nesting 512 levels (the most the format allows) runs everywhere.

Issue 14: a 539 KB document nesting nodes 400 deep made ``jax:cpu`` fail with a raw
RecursionError and ``torch:cpu`` took 67 s to refuse 1,500 levels. The format now stops at 256
levels (a node id of at most 256 segments, refused at load beyond that), and every walker of the
tree handles 256 without recursing per level: calls expansion, the execution plans, import,
numpy, ``torch:cpu`` and ``jax:cpu`` prepare and run (the torch runtime runs a flattened program,
JAX walks scopes on an explicit stack), and export (whose plugin protocol recurses; it makes
room on the stack for the levels the format allows).

Each walk runs here under a *stack budget*: the recursion limit set to the frames already on the
stack plus :data:`BUDGET`, fewer than one frame per level: a walker that recursed once per level
would fail (torch's module calls, four frames per level, failed at the default limit before).
The document nests ``Graph`` composites (compiled ``torch.fx`` modules, in torch) 128 deep, then
``Sequential`` ones, then a last Graph over a leaf, with a ReLU on every ``Graph`` level, and a
top-level node calls the second level's subtree, so calls are expanded at depth too.
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest

import trama
from reliability.forkrun import TESTS
from reliability.isolation import run_isolated
from trama import INPUT, Model, Node, Ref
from trama.errors import ExportError, TramaError
from trama.format._calls import check_expansion, expand_calls
from trama.format._codec import encode_document
from trama.format._names import MAX_NODE_DEPTH
from trama.format._stack import stack_depth

T = TypeVar("T")

DEPTH = MAX_NODE_DEPTH
#: Frames a walk of the whole tree may add to the stack: fewer than one per level (the walks
#: take a few dozen, whatever the depth; a JAX trace the most).
BUDGET = 200
#: Seconds one runtime may take to prepare and run the deep document (it takes well under one).
SECONDS = 30.0
X = np.array([[-1.0, 0.5, 2.0]], dtype=np.float32)


def graph_level(level: int, depth: int) -> bool:
    """Whether the composite at ``level`` (0 for the root) of a tree ``depth`` deep is a Graph:
    the upper half are Graphs, the lower half Sequentials but for a last Graph above the leaf,
    so that long runs of each kind nest, and each kind in the other."""
    return level < depth // 2 or level == depth - 2


def deep_model(depth: int = DEPTH) -> Model:
    """``root`` (a Graph) holds Graphs in Graphs down to half the depth, then Sequentials in
    Sequentials, then a last Graph holding a ``Tanh`` at ``depth``; each Graph applies a ``ReLU``
    to its inner composite's output. A top-level node ``again`` calls ``root.inner`` (the Graph
    below the root) on ``root``'s output."""
    ids = ["root"]
    while len(ids) < depth:  # a Graph's child is "inner", a Sequential's "0"
        ids.append(f"{ids[-1]}.{'inner' if graph_level(len(ids) - 1, depth) else '0'}")
    nodes: list[Node] = []
    relus: list[Node] = []
    for level, (node_id, child) in enumerate(itertools.pairwise(ids)):
        if graph_level(level, depth):
            nodes.append(Node(node_id, "Graph", {"x": Ref(INPUT, "x")}, ["y"], {}, {"y": Ref(f"{node_id}.relu", "y")}))
            relus.append(Node(f"{node_id}.relu", "ReLU", {"x": Ref(child, "y")}, ["y"]))
        else:
            nodes.append(Node(node_id, "Sequential", {"x": Ref(INPUT, "x")}, ["y"], {}, {"y": Ref(child, "y")}))
    nodes.append(Node(ids[-1], "Tanh", {"x": Ref(INPUT, "x")}, ["y"]))
    nodes.extend(reversed(relus))  # each after its scope's inner composite, deepest first
    nodes.append(Node("again", "Graph", {"x": Ref("root", "y")}, ["y"], calls="root.inner"))
    return Model(["x"], [Ref("root", "y"), Ref("again", "y")], nodes, {})


def expected(depth: int = DEPTH) -> list[np.ndarray]:
    """What the deep model computes: one ReLU after the tanh is all the stacked ReLUs do."""
    inner = np.maximum(np.tanh(X), 0)
    return [inner, np.maximum(np.tanh(inner), 0)]


@contextmanager
def stack_budget(frames: int = BUDGET) -> Iterator[None]:
    """The recursion limit at the frames on the stack now plus ``frames``, for the block."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(stack_depth() + frames)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def within_budget(work: Callable[[], T]) -> tuple[T, float]:
    """``work()`` under the stack budget, and the seconds it took."""
    started = time.perf_counter()
    with stack_budget():
        result = work()
    return result, time.perf_counter() - started


@pytest.fixture(scope="module")
def document() -> str:
    return trama.dumps(deep_model())


def test_the_document_is_as_deep_as_the_format_allows(document: str) -> None:
    model = trama.loads(document)
    assert max(node.id.count(".") + 1 for node in model.nodes) == DEPTH == 512
    assert len(document) < 4_000_000  # ids grow with depth: this model takes 2.8 MB at 512 levels


def test_a_tree_one_level_deeper_is_refused_at_load() -> None:
    model = deep_model(DEPTH + 1)  # written without validation: dumps would refuse it
    text = json.dumps(encode_document(model, lambda name, tensor: {}))
    started = time.perf_counter()
    with pytest.raises(TramaError, match=str(DEPTH)):
        trama.loads(text)
    assert time.perf_counter() - started < 5


def test_calls_expand_at_depth_without_recursion(document: str) -> None:
    model = trama.loads(document)
    (nodes, origin), _ = within_budget(lambda: expand_calls(model))
    within_budget(lambda: check_expansion(model.nodes))
    copies = [node for node in nodes if node.id.startswith("again.")]
    assert len(copies) == sum(1 for node in model.nodes if node.id.startswith("root.inner."))
    assert origin["again"] == "root.inner"
    assert max(node.id.count(".") + 1 for node in copies) == DEPTH - 1


@pytest.mark.parametrize("runtime", ["numpy", "torch:cpu"])
def test_each_runtime_prepares_and_runs_the_deep_document(document: str, runtime: str) -> None:
    chosen = trama.runtime_for_name(runtime)
    warm = trama.loads(trama.dumps(deep_model(4)))  # imports the framework outside the budget
    for output, wanted in zip(chosen.prepare(warm).run([X]), expected(), strict=True):
        np.testing.assert_allclose(np.asarray(output), wanted, rtol=1e-6)
    model = trama.loads(document)

    def prepare_and_run() -> list[Any]:
        return chosen.prepare(model).run([X])

    outputs, seconds = within_budget(prepare_and_run)
    for output, wanted in zip(outputs, expected(), strict=True):
        np.testing.assert_allclose(np.asarray(output), wanted, rtol=1e-6)
    assert seconds < SECONDS


#: ``jax:cpu`` runs in a child process: JAX, once started, makes every later fork of the test
#: process (the other reliability tests' bounded children) warn that it may deadlock.
JAX_CHILD = """
import json, sys, time
sys.path.insert(0, {tests!r})
import numpy as np
import trama
from reliability.test_deep_trees import X, deep_model, within_budget

results = {{}}
runtime = trama.runtime_for_name("jax:cpu")
runtime.prepare(trama.loads(trama.dumps(deep_model(4)))).run([X])  # JAX started outside the budget
model = trama.loads(open({path!r}).read())
for name, work in (
    ("runtime", lambda: runtime.prepare(model).run([X])),
    ("import", lambda: [trama.import_model(model, registry=trama.registry("jax"))["root"](X)]),
):
    try:
        outputs, seconds = within_budget(work)
        results[name] = {{"outputs": [np.asarray(o).tolist() for o in outputs], "seconds": seconds}}
    except BaseException as exc:
        results[name] = {{"error": f"{{type(exc).__name__}}: {{str(exc)[:300]}}"}}
print("RESULTS " + json.dumps(results))
"""


def test_jax_prepares_runs_imports_and_applies_the_deep_document(document: str, tmp_path: Path) -> None:
    path = tmp_path / "deep.trama.json"
    path.write_text(document)
    child = run_isolated(JAX_CHILD.format(tests=str(TESTS), path=str(path)), timeout_s=180)
    assert not child.crashed, child.describe()
    lines = [line for line in child.stdout.splitlines() if line.startswith("RESULTS ")]
    assert lines, child.describe()
    results = json.loads(lines[0][len("RESULTS ") :])
    for name, wanted in (("runtime", expected()), ("import", expected()[:1])):
        result = results[name]
        assert "error" not in result, f"{name}: {result.get('error')}"
        for output, value in zip(result["outputs"], wanted, strict=True):
            np.testing.assert_allclose(np.asarray(output), value, rtol=1e-6)
        assert result["seconds"] < SECONDS


def test_torch_imports_the_deep_document_and_exports_it_back(document: str) -> None:
    torch = pytest.importorskip("torch")
    model = trama.loads(document)
    roots, seconds = within_budget(lambda: trama.import_model(model, registry=trama.registry("torch")))
    assert seconds < SECONDS
    root = roots["root"]
    assert isinstance(root, torch.nn.Module)
    # Export recurses through the exporters' protocol (a few frames per level): it makes the
    # room the 512 levels need, even from this budget, gives it back, and gives the tree back.
    started = time.perf_counter()
    with stack_budget():
        limit = sys.getrecursionlimit()
        back = trama.export_model(root, inputs=["x"], outputs=["y"])
        assert sys.getrecursionlimit() == limit
    assert time.perf_counter() - started < SECONDS
    assert max(node.id.count(".") + 1 for node in back.nodes) == DEPTH
    (output,) = trama.runtime_for_name("torch:cpu").prepare(back).run([X])
    np.testing.assert_allclose(output.numpy(), expected()[0], rtol=1e-6)


def test_export_refuses_an_object_tree_deeper_than_a_document_may_be() -> None:
    torch = pytest.importorskip("torch")
    module: Any = torch.nn.ReLU()
    for _ in range(DEPTH):
        module = torch.nn.Sequential(module)
    with pytest.raises(ExportError, match=f"nests deeper than {DEPTH} levels") as info:
        trama.export_model(module, inputs=["x"], outputs=["y"])
    assert info.value.node_id is not None
    assert info.value.node_id.count(".") + 1 == DEPTH + 1
