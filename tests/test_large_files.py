"""Files large enough to be memory-mapped by ``trama.load`` behave exactly like small ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import trama
import trama.format._serialization
from trama import JSONError, Model, Node, Parameter, Ref, Tensor, TramaError

FIXTURES = sorted(Path(__file__).parent.joinpath("fixtures", "legacy").glob("v0_*/*.trama.json"))


def big_model() -> Model:
    """A model whose inline weights (~1.5 MB of base64) exceed the memory-map threshold."""
    weight = np.random.default_rng(3).standard_normal((512, 512)).astype(np.float32)
    return Model(
        inputs=["x"],
        outputs=[Ref("root", "y")],
        nodes=[Node("root", "Dense", {"x": Ref(trama.INPUT, "x")}, ["y"], {"weight": "root.weight"})],
        parameters={"root.weight": Parameter(Tensor.from_array(weight), learnable=True)},
    )


def test_a_large_inline_file_is_mapped_and_reads_back_bit_exact(tmp_path: Path) -> None:
    model = big_model()
    path = tmp_path / "big.trama.json"
    trama.dump(model, path)
    assert path.stat().st_size >= trama.format._serialization.MMAP_THRESHOLD
    loaded = trama.load(path)
    assert loaded.parameters == model.parameters
    assert loaded.metadata == model.metadata


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_mapped_and_read_loads_agree_on_every_fixture(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    read = trama.load(path)
    monkeypatch.setattr(trama.format._serialization, "MMAP_THRESHOLD", 1)
    mapped = trama.load(path)
    assert [n.id for n in mapped.nodes] == [n.id for n in read.nodes]
    assert mapped.parameters.keys() == read.parameters.keys()
    for name, entry in read.parameters.items():
        other = mapped.parameters[name]
        assert other.learnable == entry.learnable
        if isinstance(entry.value, Tensor):
            assert isinstance(other.value, Tensor)
            assert np.asarray(other.value).tobytes() == np.asarray(entry.value).tobytes()
        else:
            assert other.value == entry.value or (other.value != other.value and entry.value != entry.value)


def test_a_truncated_large_file_is_a_located_json_error(tmp_path: Path) -> None:
    path = tmp_path / "big.trama.json"
    trama.dump(big_model(), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 200])
    with pytest.raises(JSONError) as caught:
        trama.load(path)
    assert caught.value.line > 1


def test_a_large_file_with_a_duplicate_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.trama.json"
    trama.dump(big_model(), path)
    text = path.read_text()
    path.write_text(text.replace('"inputs": ["x"],', '"inputs": ["x"], "inputs": ["x"],', 1))
    with pytest.raises(JSONError, match="appears twice"):
        trama.load(path)


def test_empty_files_are_read_not_mapped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trama.format._serialization, "MMAP_THRESHOLD", 0)
    path = tmp_path / "empty.trama.json"
    path.write_bytes(b"")
    with pytest.raises(TramaError):
        trama.load(path)
