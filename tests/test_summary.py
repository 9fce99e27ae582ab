"""Model summaries: the numbers ``trama info`` prints, computed without decoding weights."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import toylayers  # lives in demo/, which tests/conftest.py puts on sys.path

import trama
from trama import INPUT, Model, Node, Parameter, Ref, Tensor, ValueFact
from trama.tools import OpCount, ParameterTotals, render_summary, summarize

REPO = Path(__file__).resolve().parents[1]
LEGACY = REPO / "tests" / "fixtures" / "legacy"


def toy_mlp() -> Model:
    """Linear(4->8), ReLU, Linear(8->3): 32+8+24+3 = 67 float32 weights, 4 int scalars."""
    return trama.export_model(
        toylayers.mlp([4, 8, 3], seed=1), inputs=["x"], outputs=["y"], registry=toylayers.registry()
    )


def test_toy_mlp_counts() -> None:
    summary = summarize(toy_mlp())
    assert summary.format_version == trama.FORMAT_VERSION
    assert summary.producer == f"trama {trama.__version__}"
    assert summary.framework is None
    assert (summary.node_count, summary.leaf_count, summary.composite_count, summary.depth) == (4, 3, 1, 2)
    assert summary.ops == (OpCount("Linear", False, 2), OpCount("ReLU", False, 1), OpCount("Sequential", True, 1))
    assert summary.parameters == ParameterTotals(entries=8, tensors=4, elements=67, bytes=268)
    assert summary.learnable == ParameterTotals(entries=4, tensors=4, elements=67, bytes=268)
    assert summary.frozen == ParameterTotals(entries=4, tensors=0, elements=0, bytes=0)
    assert summary.dtype_bytes == {"float32": 268}
    assert summary.shared_entries == 0
    assert summary.external_tensors == 0
    assert [value.name for value in summary.inputs] == ["x"]
    assert [value.name for value in summary.outputs] == ["%root.y"]


def test_summary_never_decodes_tensors() -> None:
    """Sizes come from dtype and shape: even a tensor whose bytes are garbage is counted."""
    bad = Tensor.from_base64("float32", [2], "AAAAAAAAAA==")  # right length, decodes to 7 bytes
    node = Node("n", "Bag", {"x": Ref(INPUT, "x")}, ["y"], {"w": "n.w"})
    model = Model(["x"], [Ref("n", "y")], [node], {"n.w": Parameter(bad, learnable=True)})
    summary = summarize(model)
    assert summary.learnable == ParameterTotals(entries=1, tensors=1, elements=2, bytes=8)
    assert not bad.is_decoded

    loaded = trama.loads(trama.dumps(toy_mlp()))
    summarize(loaded)
    assert not any(e.value.is_decoded for e in loaded.parameters.values() if isinstance(e.value, Tensor))


def test_legacy_fixtures_report_their_version_and_sharing() -> None:
    mlp = summarize(trama.load(LEGACY / "v0_2" / "mlp.trama.json"))
    assert mlp.format_version == "0.2"
    assert mlp.shared_entries == 1  # dims.hidden
    assert mlp.parameters.entries == 7
    assert mlp.parameters.bytes == (12 + 3 + 6) * 4
    assert mlp.learnable.entries == 3
    tied = summarize(trama.load(LEGACY / "v0_2" / "tied.trama.json"))
    assert tied.shared_entries == 1
    dtypes = summarize(trama.load(LEGACY / "v0_1" / "dtypes.trama.json"))
    assert dtypes.format_version == "0.1"
    assert list(dtypes.dtype_bytes) == [
        "float16",
        "float32",
        "float64",
        "bfloat16",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "bool",
    ]
    assert dtypes.dtype_bytes["bfloat16"] == 6 * 2
    nested = summarize(trama.load(LEGACY / "v0_2" / "nested.trama.json"))
    assert (nested.leaf_count, nested.composite_count, nested.depth) == (5, 3, 4)


def test_facts_metadata_and_external_weights(tmp_path: Path) -> None:
    model = toy_mlp()
    model.metadata = {"producer": "exporter-x 1.2", "framework": {"name": "numpy", "version": "2.1"}}
    model.input_facts = [ValueFact("float32", ("batch", 4))]
    model.output_facts = [ValueFact(shape=("batch", 3))]
    model.opsets = {"trama": 1}
    path = tmp_path / "m.trama.json"
    trama.dump(model, path, weights="external")
    summary = summarize(trama.load(path))
    assert summary.producer == "exporter-x 1.2"
    assert summary.framework == "numpy 2.1"
    assert summary.opsets == {"trama": 1}
    assert summary.inputs[0].dtype == "float32"
    assert summary.inputs[0].shape == ("batch", 4)
    assert summary.outputs[0].dtype is None
    assert summary.external_tensors == 4

    text = render_summary(summary)
    assert "inputs      x: float32[batch, 4]\n" in text
    assert "outputs     %root.y: ?[batch, 3]\n" in text
    assert "framework   numpy 2.1\n" in text
    assert "external    4 tensors in external weights files\n" in text


def test_render_text() -> None:
    text = render_summary(summarize(toy_mlp()))
    lines = text.splitlines()
    assert lines[0] == f"format      {trama.FORMAT_VERSION}"
    assert "nodes       4 (3 leaves, 1 composite, depth 2)" in lines
    assert "              Sequential  1  composite" in lines
    assert "parameters  8 entries, 4 tensors, 0 shared" in lines
    assert "bytes       268 B" in lines
    assert "learnable   4 entries, 67 elements, 268 B" in lines
    assert "frozen      4 entries, 0 elements, 0 B" in lines
    assert "dtypes      float32 268 B" in lines
    assert text.endswith("\n")
    assert f"format      0.2 (this trama writes {trama.FORMAT_VERSION})" in render_summary(
        summarize(trama.load(LEGACY / "v0_2" / "tiny.trama.json"))
    )


def test_large_sizes_read_in_binary_units() -> None:
    big = Tensor.from_array(np.zeros((1024, 1024), dtype=np.float32))
    node = Node("n", "Bag", {"x": Ref(INPUT, "x")}, ["y"], {"w": "n.w"})
    model = Model(["x"], [Ref("n", "y")], [node], {"n.w": Parameter(big)})
    assert "bytes       4,194,304 B (4.0 MiB)\n" in render_summary(summarize(model))


def test_to_dict_is_json() -> None:
    data = json.loads(json.dumps(summarize(toy_mlp()).to_dict()))
    assert data["parameters"] == {"entries": 8, "tensors": 4, "elements": 67, "bytes": 268}
    assert data["ops"][0] == {"op": "Linear", "composite": False, "count": 2}
    assert data["inputs"] == [{"name": "x", "dtype": None, "shape": None}]
