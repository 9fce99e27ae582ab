"""Coverage: every framework implements every leaf op of the catalog, and the coverage matrix of
``docs/ops.md`` says what the registries really hold.

The op tests compare runtimes only where all of them run an op; this module is what makes a gap
visible by name instead of as a pile of failures. ``tests/test_catalog.py`` checks that
``docs/ops.md`` is the current render of the specs; here the matrix is read back as a reader
would read it, cell by cell, against the registries.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conformance_support import catalog_leaves

from trama.catalog import standard_specs
from trama.extension import implementation_coverage

REPO = Path(__file__).resolve().parents[2]

#: The frameworks whose runtimes the conformance suite compares.
FRAMEWORKS = ("numpy", "torch", "jax")

#: A row of the matrix: ``| [`Linear`](#op-Linear) | ✓ |  | ✓ |``.
_ROW = re.compile(r"\| \[`(?P<op>[^`]+)`\]\(#op-[^)]+\) \|(?P<cells>.*)\|\s*\Z")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_framework_implements_every_catalog_leaf(framework: str) -> None:
    coverage = implementation_coverage()
    assert framework in coverage, f"no installed plugin implements ops for {framework}; installed: {sorted(coverage)}"
    missing = sorted(catalog_leaves() - coverage[framework])
    assert not missing, f"{framework} implements no factory for {len(missing)} catalog leaf op(s): {missing}"


def _matrix() -> tuple[list[str], dict[str, list[str]]]:
    """The coverage table of ``docs/ops.md``: its framework columns, and each op's cells."""
    text = (REPO / "docs" / "ops.md").read_text(encoding="utf-8")
    section = text.split("## Coverage\n", 1)[1].split("\n## ", 1)[0]
    lines = section.splitlines()
    header = next(line for line in lines if line.startswith("| op |"))
    columns = [cell.strip() for cell in header.strip("|").split("|")][1:]
    rows = {}
    for line in lines:
        match = _ROW.match(line)
        if match:
            rows[match["op"]] = [cell.strip() for cell in match["cells"].split("|")]
    return columns, rows


def test_the_ops_md_matrix_shows_what_the_registries_hold() -> None:
    """Every cell of the matrix is ✓ exactly where that framework's registry has a factory."""
    columns, rows = _matrix()
    coverage = implementation_coverage()
    catalog = [spec.name for spec in standard_specs()]
    expected_columns = sorted(f for f, ops in coverage.items() if ops & set(catalog))
    assert columns == expected_columns, "regenerate docs/ops.md: python -m trama.catalog.docs"
    assert list(rows) == catalog
    wrong = [
        f"{op} × {framework}: the matrix says {'✓' if cell else 'nothing'}"
        for op, cells in rows.items()
        for framework, cell in zip(columns, cells, strict=True)
        if (cell == "✓") != (op in coverage[framework])
    ]
    assert not wrong, "docs/ops.md's matrix is out of date (python -m trama.catalog.docs): " + "; ".join(wrong)
    for framework in FRAMEWORKS:
        assert framework in columns, f"docs/ops.md's matrix has no column for {framework}"
