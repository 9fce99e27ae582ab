"""Inputs are checked against the document's input facts before a run, on every runtime and on
``trama run`` (``trama.execution.check_inputs``, ``docs/runtime.md``).

Each wrong input (a rank-3 ``input_ids`` for ``["batch", "seq"]``, a float64 array for a float32
input, int32 token ids for int64 ones, an 8x8 image for a 6x6 one, two inputs that disagree on
``seq``, a ``seq`` beyond its range) is one :class:`trama.ExecutionError` naming the input, the
axis, what the file expects and what came, located at the fact (``/input_facts/k/...``) or at
the range (``/symbols/<name>``), raised before any kernel runs. The same text comes from numpy,
torch:cpu and jax:cpu, for documents built by hand and for one exported from torch with
``dynamic_shapes``; right inputs run at several sizes, Python lists taking the declared dtype.

Tests marked ``xfail(strict=True)`` state the consistent behaviour where the runtimes differ
today (each reason says how).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest

import trama
from trama import INPUT, Model, Node, Parameter, Ref, SizeExpr, SymbolRange, ValueFact
from trama.tools import main

RUNTIMES = ("numpy", "torch:cpu", "jax:cpu")


def runnable(name: str, model: Model) -> trama.Runnable:
    """``model`` prepared by runtime ``name`` (skipped where its framework is not installed)."""
    if name.startswith("torch"):
        pytest.importorskip("torch")
    if name.startswith("jax"):
        pytest.importorskip("jax")
    return trama.runtime_for_name(name).prepare(model)


def as_numpy(value: Any) -> np.ndarray[Any, Any]:
    """An output as a numpy array (torch tensors and JAX arrays alike)."""
    detach = getattr(value, "detach", None)
    return np.asarray(detach().cpu() if callable(detach) else value)


def tokens(symbols: dict[str, SymbolRange] | None = None) -> Model:
    """A text model's two inputs sharing ``batch`` and ``seq``: ``input_ids + arange(seq)`` (an
    ``arange`` whose end is the size ``seq``) and ``attention_mask * 2``."""
    return Model(
        inputs=["input_ids", "attention_mask"],
        outputs=[Ref("shifted", "y"), Ref("scaled", "y")],
        nodes=[
            Node("positions", "arange", {}, ["y"], {"end": "positions.end"}),
            Node("shifted", "add", {"x": Ref(INPUT, "input_ids"), "other": Ref("positions", "y")}, ["y"], {}),
            Node("scaled", "mul", {"x": Ref(INPUT, "attention_mask")}, ["y"], {"other": "scaled.other"}),
        ],
        parameters={"positions.end": Parameter(SizeExpr.parse("seq")), "scaled.other": Parameter(2.0)},
        opsets={trama.catalog.CATALOG_NAMESPACE: trama.catalog.CATALOG_OPSET},
        input_facts=[ValueFact("int64", ("batch", "seq")), ValueFact("float32", ("batch", "seq"))],
        symbols=symbols,
    )


def tokens_expected(ids: Any, mask: Any) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    ids, mask = np.asarray(ids, np.int64), np.asarray(mask, np.float32)
    return ids + np.arange(ids.shape[1]), mask * np.float32(2)


def doubling(fact: ValueFact | None, name: str = "x") -> Model:
    """``name * 2``, with ``fact`` for the input (``None``: a document without input facts)."""
    return Model(
        inputs=[name],
        outputs=[Ref("double", "y")],
        nodes=[Node("double", "mul", {"x": Ref(INPUT, name)}, ["y"], {"other": "double.other"})],
        parameters={"double.other": Parameter(2)},
        input_facts=None if fact is None else [fact],
    )


def image(shape: tuple[int | str, ...]) -> Model:
    """An image model whose fact fixes the channels and the 6x6 size."""
    return doubling(ValueFact("float32", shape), "image")


def reshaping() -> Model:
    """``x`` (float32 ``[n]``, ``n <= 9``) reshaped to ``[3, 3]``: the kernel fails for any ``n``
    but 9, so an error without a node proves the check came first."""
    return Model(
        inputs=["x"],
        outputs=[Ref("square", "y")],
        nodes=[Node("square", "reshape", {"x": Ref(INPUT, "x")}, ["y"], {"shape": "square.shape"})],
        parameters={"square.shape": Parameter([3, 3])},
        input_facts=[ValueFact("float32", ("n",))],
        symbols={"n": SymbolRange(max=9)},
    )


def ids(*shape: int, dtype: Any = np.int64) -> np.ndarray[Any, Any]:
    return np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape) % 7


def mask(*shape: int, dtype: Any = np.float32) -> np.ndarray[Any, Any]:
    return np.ones(shape, dtype=dtype)


class Wrong(NamedTuple):
    """A wrong set of inputs for a model, and the one error it gets."""

    model: Callable[[], Model]
    inputs: list[Any]
    location: str
    message: str


WRONG = {
    "rank": Wrong(
        tokens,
        [ids(2, 5, 1), mask(2, 5)],
        "/input_facts/0/shape",
        "input 'input_ids': the file expects rank 2 (shape [batch, seq]), got rank 3 (shape [2, 5, 1])",
    ),
    "float64 for float32": Wrong(
        tokens,
        [ids(2, 5), mask(2, 5, dtype=np.float64)],
        "/input_facts/1/dtype",
        "input 'attention_mask': the file expects dtype float32, got float64",
    ),
    "int32 for int64": Wrong(
        tokens,
        [ids(2, 5, dtype=np.int32), mask(2, 5)],
        "/input_facts/0/dtype",
        "input 'input_ids': the file expects dtype int64, got int32",
    ),
    "fixed size": Wrong(
        lambda: image(("batch", 3, 6, 6)),
        [np.zeros((1, 3, 8, 8), np.float32)],
        "/input_facts/0/shape/2",
        "input 'image': axis 2 must be 6 (shape [batch, 3, 6, 6]), got 8 (shape [1, 3, 8, 8])",
    ),
    "fixed size, every size fixed": Wrong(  # JAX compiles this one at prepare
        lambda: image((1, 3, 6, 6)),
        [np.zeros((1, 3, 6, 8), np.float32)],
        "/input_facts/0/shape/3",
        "input 'image': axis 3 must be 6 (shape [1, 3, 6, 6]), got 8 (shape [1, 3, 6, 8])",
    ),
    "seq disagrees": Wrong(
        tokens,
        [ids(2, 5), mask(2, 6)],
        "/input_facts/1/shape/1",
        "input 'attention_mask': axis 1 is 'seq', which is 5 in input 'input_ids' (axis 1), but it is 6 here",
    ),
    "batch disagrees": Wrong(
        tokens,
        [ids(2, 5), mask(3, 5)],
        "/input_facts/1/shape/0",
        "input 'attention_mask': axis 0 is 'batch', which is 2 in input 'input_ids' (axis 0), but it is 3 here",
    ),
    "seq above its range": Wrong(
        lambda: tokens({"seq": SymbolRange(max=16)}),
        [ids(2, 17), mask(2, 17)],
        "/symbols/seq",
        "input 'input_ids': axis 1 is 'seq', which the file allows as seq <= 16, but it is 17",
    ),
    "seq below its range": Wrong(
        lambda: tokens({"seq": SymbolRange(1, 16)}),
        [ids(2, 0), mask(2, 0)],
        "/symbols/seq",
        "input 'input_ids': axis 1 is 'seq', which the file allows as 1 <= seq <= 16, but it is 0",
    ),
    "a number for a tensor": Wrong(
        tokens,
        [ids(2, 5), 1.0],
        "/input_facts/1/shape",
        "input 'attention_mask': the file expects rank 2 (shape [batch, seq]), got rank 0 (shape [])",
    ),
    "a tuple for a tensor": Wrong(
        tokens,
        [ids(2, 5), (mask(2, 5),)],
        "/input_facts/1",
        "input 'attention_mask': the file expects a tensor, got tuple",
    ),
}


def refused(run: Callable[[Any], Any], inputs: Any) -> trama.ExecutionError:
    with pytest.raises(trama.ExecutionError) as caught:
        run(inputs)
    return caught.value


def check_error(error: trama.ExecutionError, location: str, message: str) -> None:
    assert (error.location, error.message, error.node_id) == (location, message, None)
    assert str(error) == f"{location}: {message}"


# ----- each wrong input is one error, the same on every runtime -------------------------------


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("case", WRONG, ids=str)
def test_a_wrong_input_is_one_error_naming_the_input_and_axis(runtime: str, case: str) -> None:
    wrong = WRONG[case]
    model = wrong.model()
    prepared = runnable(runtime, model)
    check_error(refused(prepared.run, wrong.inputs), wrong.location, wrong.message)
    by_name = dict(zip(model.inputs, wrong.inputs, strict=True))
    check_error(refused(prepared.run, by_name), wrong.location, wrong.message)


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("case", ["rank", "int32 for int64", "seq disagrees", "seq above its range"])
def test_states_and_profiles_check_their_inputs_too(runtime: str, case: str) -> None:
    wrong = WRONG[case]
    prepared = runnable(runtime, wrong.model())
    check_error(refused(prepared.spawn_state().run, wrong.inputs), wrong.location, wrong.message)
    check_error(refused(prepared.profile_json, wrong.inputs), wrong.location, wrong.message)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_the_check_comes_before_any_kernel(runtime: str) -> None:
    """The reshape to ``[3, 3]`` fails for every length but 9: a wrong input's error names no
    node (the check's), a right input of another length fails in the node."""
    prepared = runnable(runtime, reshaping())
    assert as_numpy(prepared.run([np.arange(9, dtype=np.float32)])[0]).shape == (3, 3)
    check_error(
        refused(prepared.run, [np.arange(9, dtype=np.float64)]),
        "/input_facts/0/dtype",
        "input 'x': the file expects dtype float32, got float64",
    )
    check_error(
        refused(prepared.run, [np.zeros((1, 9), np.float32)]),
        "/input_facts/0/shape",
        "input 'x': the file expects rank 1 (shape [n]), got rank 2 (shape [1, 9])",
    )
    check_error(
        refused(prepared.run, [np.zeros(10, np.float32)]),
        "/symbols/n",
        "input 'x': axis 0 is 'n', which the file allows as n <= 9, but it is 10",
    )
    in_the_kernel = refused(prepared.run, [np.zeros(4, np.float32)])
    assert in_the_kernel.node_id == "square"


# ----- right inputs run -----------------------------------------------------------------------


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_right_inputs_run_at_several_sizes(runtime: str) -> None:
    prepared = runnable(runtime, tokens({"seq": SymbolRange(1, 16)}))
    for batch, seq in [(2, 5), (1, 1), (3, 16), (2, 5), (4, 9)]:
        inputs = [ids(batch, seq), mask(batch, seq)]
        shifted, scaled = (as_numpy(value) for value in prepared.run(inputs))
        want_shifted, want_scaled = tokens_expected(*inputs)
        np.testing.assert_array_equal(shifted, want_shifted)
        np.testing.assert_array_equal(scaled, want_scaled)
        assert scaled.dtype == np.float32


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_python_lists_take_the_declared_dtype(runtime: str) -> None:
    """Lists have no dtype: ``[[1, 1, 0]]`` for the float32 mask is float32, ``[[3, 1, 4]]`` for
    int64 ids int64 (an array of another dtype would be refused)."""
    prepared = runnable(runtime, tokens())
    shifted, scaled = (as_numpy(value) for value in prepared.run([[[3, 1, 4]], [[1, 1, 0]]]))
    np.testing.assert_array_equal(shifted, [[3, 2, 6]])
    np.testing.assert_array_equal(scaled, [[2.0, 2.0, 0.0]])
    assert scaled.dtype == np.float32
    assert shifted.dtype == (np.int32 if runtime.startswith("jax") else np.int64)  # JAX without x64
    # a list is checked as the array it becomes
    check_error(
        refused(prepared.run, [[[3, 1, 4]], [[1, 1]]]),
        "/input_facts/1/shape/1",
        "input 'attention_mask': axis 1 is 'seq', which is 3 in input 'input_ids' (axis 1), but it is 2 here",
    )


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_document_without_facts_takes_anything(runtime: str) -> None:
    prepared = runnable(runtime, doubling(None))
    for value in [np.ones((2, 3, 4)), np.arange(3, dtype=np.int32), np.ones((5,), np.float16), [1.0, 2.0], 3.0]:
        got = as_numpy(prepared.run([value])[0])
        np.testing.assert_array_equal(got, np.asarray(value) * 2)
    # a fact that says nothing (no dtype, no shape) checks nothing either
    prepared = runnable(runtime, doubling(ValueFact()))
    assert as_numpy(prepared.run([np.ones((2, 2, 2), np.float64)])[0]).shape == (2, 2, 2)


# ----- a document exported from torch ---------------------------------------------------------


@pytest.fixture(scope="module")
def exported() -> tuple[Model, Any]:
    """A tiny text model (token and position embeddings, positions from ``arange(seq)``, times
    the mask) exported with ``batch`` and ``seq`` symbolic; its position table has 16 rows, so
    the document is given ``seq <= 16`` (torch derives no such guard from an embedding)."""
    pytest.importorskip("torch")
    import torch
    from torch import nn

    class Tiny(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tokens = nn.Embedding(10, 4)
            self.positions = nn.Embedding(16, 4)

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            where = torch.arange(input_ids.shape[1])
            embedded: torch.Tensor = self.tokens(input_ids) + self.positions(where)
            return embedded * attention_mask.unsqueeze(-1)

    torch.manual_seed(0)
    module = Tiny().eval()
    document = trama.export_model(
        module,
        inputs=["input_ids", "attention_mask"],
        outputs=["y"],
        example_inputs=(torch.randint(0, 10, (2, 8)), torch.ones(2, 8)),
        dynamic_shapes={"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}},
    )
    document = trama.loads(trama.dumps(document))
    assert document.input_facts == [ValueFact("int64", ("batch", "seq")), ValueFact("float32", ("batch", "seq"))]
    assert any(isinstance(entry.value, SizeExpr) for entry in document.parameters.values())
    document = trama.loads(trama.dumps(dataclasses.replace(document, symbols={"seq": SymbolRange(max=16)})))
    return document, module


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_an_exported_document_checks_its_inputs(runtime: str, exported: tuple[Model, Any]) -> None:
    import torch

    document, module = exported
    prepared = runnable(runtime, document)
    generator = torch.Generator().manual_seed(1)
    for batch, seq in [(2, 8), (1, 1), (3, 16), (2, 5)]:
        token_ids = torch.randint(0, 10, (batch, seq), generator=generator)
        attention = (torch.rand(batch, seq, generator=generator) > 0.3).float()
        with torch.no_grad():
            want = module(token_ids, attention).numpy()
        got = as_numpy(prepared.run([token_ids.numpy(), attention.numpy()])[0])
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    listed = as_numpy(prepared.run([[[1, 2, 3]], [[1, 1, 0]]])[0])  # lists: int64 and float32
    with torch.no_grad():
        want = module(torch.tensor([[1, 2, 3]]), torch.tensor([[1.0, 1.0, 0.0]])).numpy()
    np.testing.assert_allclose(listed, want, rtol=1e-6, atol=1e-6)

    for case in ["rank", "float64 for float32", "int32 for int64", "seq disagrees", "batch disagrees"]:
        wrong = WRONG[case]
        check_error(refused(prepared.run, wrong.inputs), wrong.location, wrong.message)
    wrong = WRONG["seq above its range"]
    check_error(refused(prepared.run, wrong.inputs), wrong.location, wrong.message)
    if not runtime.startswith("jax"):  # numpy and torch take torch tensors, checked as they are
        check_error(
            refused(prepared.run, [torch.zeros(2, 5, dtype=torch.int64), torch.ones(2, 5, dtype=torch.float64)]),
            "/input_facts/1/dtype",
            "input 'attention_mask': the file expects dtype float32, got float64",
        )


# ----- trama run ------------------------------------------------------------------------------


def _save(folder: Path, names: Sequence[str], values: Sequence[Any]) -> list[str]:
    arguments = []
    for name, value in zip(names, values, strict=True):
        path = folder / f"{name}.npy"
        np.save(path, np.asarray(value))
        arguments += ["--input", f"{name}={path}"]
    return arguments


CLI_CASES = ["rank", "float64 for float32", "int32 for int64", "fixed size", "seq disagrees", "seq above its range"]


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("case", CLI_CASES)
def test_trama_run_reports_a_wrong_input_in_one_line(
    runtime: str, case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip(runtime.split(":")[0])
    wrong = WRONG[case]
    model = wrong.model()
    path = tmp_path / "model.trama.json"
    trama.dump(model, path)
    arguments = _save(tmp_path, model.inputs, wrong.inputs)
    assert main(["run", str(path), "--runtime", runtime, *arguments]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"{path}: {wrong.location}: {wrong.message}\n"


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_trama_run_runs_right_inputs(runtime: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip(runtime.split(":")[0])
    path = tmp_path / "model.trama.json"
    trama.dump(tokens({"seq": SymbolRange(max=16)}), path)
    integer = "int32" if runtime.startswith("jax") else "int64"
    for batch, seq in [(2, 5), (1, 16)]:
        arguments = _save(tmp_path, ["input_ids", "attention_mask"], [ids(batch, seq), mask(batch, seq)])
        assert main(["run", str(path), "--runtime", runtime, *arguments]) == 0
        assert capsys.readouterr().out == f"shifted.y: {integer}[{batch}, {seq}]\nscaled.y: float32[{batch}, {seq}]\n"


# ----- where the runtimes differ today --------------------------------------------------------


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_list_for_a_fact_without_dtype_is_array_like_data(runtime: str) -> None:
    prepared = runnable(runtime, doubling(ValueFact(None, ("batch", 3))))
    np.testing.assert_array_equal(as_numpy(prepared.run([[[1.0, 2.0, 3.0]]])[0]), [[2.0, 4.0, 6.0]])
    check_error(
        refused(prepared.run, [[1.0, 2.0]]),
        "/input_facts/0/shape",
        "input 'x': the file expects rank 2 (shape [batch, 3]), got rank 1 (shape [2])",
    )
    prepared = runnable(runtime, doubling(ValueFact(None, ())))
    assert float(as_numpy(prepared.run([3.0])[0])) == 6.0  # docs/runtime.md: JAX takes Python numbers


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_ragged_list_says_why_it_is_no_array(runtime: str) -> None:
    prepared = runnable(runtime, doubling(ValueFact("float32", ("a", "b"))))
    error = refused(prepared.run, [[[1.0], [2.0, 3.0]]])
    assert "'x'" in error.message
    assert "inhomogeneous" in error.message


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_list_that_does_not_fit_the_declared_dtype_says_so(runtime: str) -> None:
    prepared = runnable(runtime, doubling(ValueFact("int32", ("n",))))
    for values in ([1.5, 2.0], [1, 2**40]):
        error = refused(prepared.run, [values])
        assert error.location == "/input_facts/0/dtype"
        assert "cannot hold the list's values exactly" in error.message
    error = refused(prepared.run, [[1, 2**40]])
    assert "'x'" in error.message
    assert "int32" in error.message
    assert "got int64" not in error.message
    assert "expects a tensor" not in error.message


def test_jax_takes_its_own_arrays_for_64_bit_inputs() -> None:
    jnp = pytest.importorskip("jax.numpy")
    prepared = runnable("jax:cpu", tokens())
    shifted, scaled = prepared.run([jnp.asarray(ids(2, 5)), jnp.asarray(mask(2, 5))])
    want_shifted, want_scaled = tokens_expected(ids(2, 5), mask(2, 5))
    np.testing.assert_array_equal(as_numpy(shifted), want_shifted)
    np.testing.assert_array_equal(as_numpy(scaled), want_scaled)
