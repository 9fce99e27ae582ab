"""Sizes read at run time: captured as expressions over the input symbols, run at other sizes.

Each module below reads its input's sizes the way real models do (position ids from
``arange``, a ``zeros`` of token type ids, a class token expanded to the batch, a ``view``
into heads, a slice to the length, ``repeat`` by a size, arithmetic on sizes, an interpolation
to another input's size). Exported once with its axes symbolic, the document holds
``SizeExpr`` settings over the caller's symbol names, and runs on numpy, torch:cpu and jax:cpu at
sizes other than the example's, equal to the module's own output at those sizes. The sympy to
text translation is checked on its own: every expression it writes evaluates, for random sizes,
to what torch's own expression does.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
import sympy
import torch
import torch.nn.functional as F
from export_support import RUNTIMES
from torch import nn
from torch.utils._sympy.functions import FloorDiv, Max, Min, PythonMod

import trama
from trama.format._sizes import size_symbols
from trama_torch.capture.sizes import _text


class Positions(nn.Module):
    """BERT/GPT-2: position ids from ``arange(seq)`` and token types from ``zeros``."""

    def __init__(self) -> None:
        super().__init__()
        self.positions = nn.Embedding(64, 8)
        self.types = nn.Embedding(2, 8)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        batch, length = ids.shape
        where = torch.arange(length).unsqueeze(0).expand(batch, length)
        kinds = torch.zeros(batch, length, dtype=torch.long)
        return self.positions(where) + self.types(kinds) + ids.unsqueeze(-1).float()


class Heads(nn.Module):
    """Attention heads: ``view(b, s, h, d)``, a transpose, and back with ``reshape(b, s, h * d)``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        heads = x.view(b, s, 2, 4).transpose(1, 2)
        return (heads * 2.0).transpose(1, 2).reshape(b, s, 8)


class Arithmetic(nn.Module):
    """Sizes computed from sizes: a floor division, a remainder, ``max``, a scale by a size.
    (Each is at least 2 for any batch and length: torch.export refuses a size it would have to
    assume is not 1, its 0/1 specialization.)"""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        b, s = x.shape
        half = torch.zeros(b, s // 2 + 2)
        tail = torch.arange(s % 3 + 2, s * 2 + 2)
        wide = x.new_ones(torch.sym_max(b, 2), s % 3 + 2)
        scaled = x * s
        padded = torch.full((b, s * 2 + 1), 0.5)
        return half, tail, wide, scaled, padded


class Repeats(nn.Module):
    """``repeat`` by a size, ``repeat_interleave`` by a size and a class token to the batch."""

    def __init__(self) -> None:
        super().__init__()
        self.cls = nn.Parameter(torch.randn(1, 1, 3))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        b = x.shape[0]
        tokens = torch.cat([self.cls.expand(b, -1, -1), x], dim=1)
        tiled = x[:, :1, :].repeat(1, x.shape[1], 1)
        return tokens, tiled


class Follow(nn.Module):
    """An image resized to the size of another input (a decoder's skip connection)."""

    def forward(self, x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        return F.interpolate(x, size=like.shape[-2:], mode="nearest") + like


def _export(model: nn.Module, names: list[str], outputs: int, examples: tuple[Any, ...], dynamic: Any) -> trama.Model:
    document = trama.export_model(
        model.eval(),
        inputs=names,
        outputs=[f"y{k}" for k in range(outputs)],
        example_inputs=examples,
        dynamic_shapes=dynamic,
    )
    return trama.loads(trama.dumps(document))


def _sizes_in(document: trama.Model) -> set[str]:
    return {symbol for entry in document.parameters.values() for symbol in size_symbols(entry.value)}


CASES = [
    (
        Positions(),
        ["ids"],
        1,
        (torch.randint(0, 5, (2, 8)),),
        {"ids": {0: "batch", 1: "seq"}},
        [(torch.randint(0, 5, (1, 3)),), (torch.randint(0, 5, (4, 21)),)],
    ),
    (
        Heads(),
        ["x"],
        1,
        (torch.randn(2, 8, 8),),
        {"x": {0: "batch", 1: "seq"}},
        [(torch.randn(1, 3, 8),), (torch.randn(3, 17, 8),)],
    ),
    (
        Arithmetic(),
        ["x"],
        5,
        (torch.randn(3, 8),),
        {"x": {0: "batch", 1: "seq"}},
        [(torch.randn(5, 7),), (torch.randn(2, 22),)],
    ),
    (
        Repeats(),
        ["x"],
        2,
        (torch.randn(2, 6, 3),),
        {"x": {0: "batch", 1: "seq"}},
        [(torch.randn(1, 4, 3),), (torch.randn(3, 11, 3),)],
    ),
    (
        Follow(),
        ["x", "like"],
        1,
        (torch.randn(2, 3, 4, 4), torch.randn(2, 3, 8, 6)),
        {"x": {0: "batch"}, "like": {0: "batch", 2: "height", 3: "width"}},
        [(torch.randn(1, 3, 4, 4), torch.randn(1, 3, 5, 9)), (torch.randn(3, 3, 4, 4), torch.randn(3, 3, 12, 12))],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: type(case[0]).__name__)
def test_sizes_read_at_run_time_follow_the_inputs_on_every_runtime(case: Any) -> None:
    model, names, outputs, examples, dynamic, others = case
    document = _export(model, names, outputs, examples, dynamic)
    symbols = {symbol for axes in dynamic.values() for symbol in axes.values()}
    assert _sizes_in(document)
    assert _sizes_in(document) <= symbols
    for runtime in RUNTIMES:
        runnable = trama.runtime_for_name(runtime).prepare(document)
        for inputs in [examples, *others]:
            with torch.no_grad():
                expected = model(*inputs)
            expected = expected if isinstance(expected, tuple) else (expected,)
            got = runnable.run([value.numpy() for value in inputs])
            assert len(got) == len(expected)
            for have, want in zip(got, expected, strict=True):
                have_array = np.asarray(have)
                assert have_array.shape == tuple(want.shape), runtime
                np.testing.assert_allclose(
                    have_array.astype(np.float64),
                    want.numpy().astype(np.float64),
                    rtol=1e-5,
                    atol=1e-5,
                    err_msg=runtime,
                )


def test_a_symbol_torch_bounds_is_written_with_its_range() -> None:
    """A position table of 64 rows indexed by ``arange(seq)`` and sliced: torch derives
    ``seq <= 64`` (a guard of the slice), and the document's ``symbols`` says so; a longer
    input is then one clear error before anything runs."""

    class Table(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = nn.Parameter(torch.randn(64, 4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            torch._check(x.shape[1] <= 64)
            return x.unsqueeze(-1) + self.table[: x.shape[1]]

    document = _export(Table(), ["x"], 1, (torch.randn(2, 8),), {"x": {1: "seq"}})
    assert document.symbols is not None
    assert document.symbols["seq"].max == 64
    runnable = trama.runtime_for_name("numpy").prepare(document)
    assert np.asarray(runnable.run([np.zeros((2, 64), np.float32)])[0]).shape == (2, 64, 4)
    with pytest.raises(trama.ExecutionError, match=r"input 'x': axis 1 is 'seq'.*seq <= 64.*65"):
        runnable.run([np.zeros((2, 65), np.float32)])


def test_the_text_of_an_expression_computes_what_torch_computes() -> None:
    s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)
    names = {"s0": "batch", "s1": "seq"}
    expressions = [
        s0,
        s0 + 1,
        s1 - 1,
        2 * s0 * s1,
        FloorDiv(s1, 2),
        FloorDiv(s1 + 3, 4),
        PythonMod(s1, 3),
        Max(2, s1 - 5),
        Min(s1, 64) - s0,
        1 - s0,
        -s0 + 2 * s1 - 3,
        (s1 + 1) * (s0 - 2),
        s0**2,
        FloorDiv(s0 * s1, 3) + PythonMod(s0, 2),
    ]
    generator = random.Random(0)
    for expression in expressions:
        written = trama.SizeExpr.parse(_text(expression, names)[0])
        for _ in range(20):
            a, b = generator.randint(1, 50), generator.randint(1, 50)
            want = int(expression.subs({s0: a, s1: b}))
            assert written.evaluate({"batch": a, "seq": b}) == want, (expression, written.text, a, b)
