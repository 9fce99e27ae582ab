"""FactoryTable: the table a framework package's op modules fill, and setting()."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trama import Parameter, Tensor
from trama.extension import FactoryTable, setting


def _factory(node: Any, *, children: Any, parameters: Any) -> str:
    return "built"


def test_implements_registers_under_every_name_and_refuses_a_second_implementation() -> None:
    table = FactoryTable("toy", ())
    assert table.implements("relu", "ReLU")(_factory) is _factory
    assert table.load() == {"relu": _factory, "ReLU": _factory}
    with pytest.raises(RuntimeError, match="toy op 'relu' is implemented twice"):
        table.implements("relu")(_factory)


def test_load_imports_the_op_modules_that_fill_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = FactoryTable("toy", ["toy_ops_for_table_test"])
    (tmp_path / "toy_ops_for_table_test.py").write_text(
        "from trama.extension._factorytable import FactoryTable\n"
        "def register(table: FactoryTable) -> None:\n"
        "    table.implements('toy.Op')(lambda node, *, children, parameters: 'built')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "toy_ops_for_table_test", raising=False)
    assert table.load() == {}  # the module registers nothing by itself...
    module = sys.modules["toy_ops_for_table_test"]  # ...but load() imported it
    module.register(table)
    assert list(table.load()) == ["toy.Op"]


def test_setting_reads_plain_values_scalars_and_defaults() -> None:
    parameters = {
        "n": Parameter(3),
        "eps": Parameter(Tensor.from_array(np.float32(0.5))),
        "shape": Parameter(Tensor.from_array(np.array([2, 3], np.int64))),
    }
    assert setting(parameters, "n") == 3
    assert setting(parameters, "eps") == 0.5
    np.testing.assert_array_equal(setting(parameters, "shape"), [2, 3])
    assert setting(parameters, "missing", default="d") == "d"
