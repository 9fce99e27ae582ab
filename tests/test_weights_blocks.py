"""Tensors read, hashed and written a block at a time (issue 15).

External weights are read into a tensor's own array a block (``trama.format._external.BLOCK``)
at a time, each block hashed while it is in cache, and written the same way; inline tensors are
hashed a piece at a time as they are encoded. These tests check that the pieces add up to what
one pass over the whole would give: the same file bytes, the same checksums (the format's, for
either algorithm), the same values, and the same clean errors for a change or a cut anywhere in
the tensor, not only in its first block.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pybase64
import pytest
import xxhash

import trama
from trama import Model, Node, Parameter, Ref, Tensor
from trama.format import _external
from trama.format._tensor import checksum_hasher, checksum_of, encode_base64, fresh_bytes, tensor_checksum

#: A tensor of three and a half blocks: the last block is a partial one.
SIDE = int((3.5 * _external.BLOCK / 4) ** 0.5)
WEIGHT = np.random.default_rng(15).standard_normal((SIDE, SIDE)).astype(np.float32)


def weights_model(arrays: dict[str, np.ndarray]) -> Model:
    """One node holding every array as a parameter."""
    parameters = {name: Parameter(Tensor.from_array(array), learnable=True) for name, array in arrays.items()}
    node = Node("root", "Weights", {"x": Ref(trama.INPUT, "x")}, ["y"], {name: name for name in arrays})
    return Model(["x"], [Ref("root", "y")], [node], parameters)


def test_the_tensor_spans_several_blocks() -> None:
    assert 3 * _external.BLOCK < WEIGHT.nbytes < 4 * _external.BLOCK


def data_start(weights: Path) -> int:
    """The file offset of the first tensor's bytes in a safetensors file."""
    with open(weights, "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
    return 8 + int(length)


def make_pair(folder: Path, version: str = trama.FORMAT_VERSION) -> Path:
    path = folder / "model.trama.json"
    model = weights_model({"w": WEIGHT, "small": np.arange(5, dtype=np.int64)})
    trama.dump(model, path, weights="external", format_version=version)
    return path


@pytest.fixture
def pair(tmp_path: Path) -> Path:
    return make_pair(tmp_path)


#: The forms of a document: the flat one (format 1.2) and the nested one (1.3, the default).
VERSIONS = pytest.mark.parametrize("version", ["1.2", "1.3"])


def checksum_holder(doc: dict[str, Any], name: str) -> dict[str, Any]:
    """The object holding the ``checksum`` of entry ``name``'s tensor in the weights file: its
    external reference (format 1.2), or the tensor itself, given by its checksum alone (1.3;
    the weights file is the document's ``weights``)."""
    if doc["format_version"] == "1.2":
        return doc["parameters"][name]["value"]["external"]  # type: ignore[no-any-return]
    assert "weights" in doc
    return doc["parameters"][name]  # type: ignore[no-any-return]


@VERSIONS
def test_external_checksums_written_by_blocks_are_those_of_the_whole_tensor(tmp_path: Path, version: str) -> None:
    pair = make_pair(tmp_path, version)
    doc = json.loads(pair.read_text())
    recorded = checksum_holder(doc, "w")["checksum"]
    if version != "1.2":  # an xxh3-64 checksum is written as its 16 digits alone
        recorded = "xxh3-64:" + recorded
    assert recorded == "xxh3-64:" + xxhash.xxh3_64_hexdigest(WEIGHT.tobytes())
    # The bytes written are the tensor's, whole and in place.
    weights = trama.weights_path(pair)
    start = data_start(weights)
    assert weights.read_bytes()[start : start + WEIGHT.nbytes] == WEIGHT.tobytes()


@VERSIONS
@pytest.mark.parametrize("algorithm", ["xxh3-64", "sha256"])
def test_external_tensors_read_by_blocks_are_bit_exact_and_verified(
    tmp_path: Path, algorithm: str, version: str
) -> None:
    pair = make_pair(tmp_path, version)
    if algorithm == "sha256":  # the document may record either; the reader streams both
        doc = json.loads(pair.read_text())
        digest = hashlib.sha256(WEIGHT.tobytes()).hexdigest()
        checksum_holder(doc, "w")["checksum"] = f"sha256:{digest}"
        pair.write_text(json.dumps(doc))
    value = np.asarray(trama.load(pair).parameters["w"].value)
    np.testing.assert_array_equal(value, WEIGHT)
    assert value.dtype == WEIGHT.dtype
    assert value.shape == WEIGHT.shape
    assert not value.flags.writeable


def external_location(pair: Path) -> str:
    """Where an error of the external tensor ``w`` is reported: its entry in the flat form, the
    table's own member in the nested one (whose reference to the file is implied)."""
    flat = json.loads(pair.read_text())["format_version"] == "1.2"
    return "/parameters/w/value/external" if flat else "/parameters/w"


@pytest.mark.parametrize("block", [0, 1, 3])  # the first, a middle and the last (partial) block
def test_a_change_in_any_block_is_refused(pair: Path, block: int) -> None:
    model = trama.load(pair)
    weights = trama.weights_path(pair)
    at = data_start(weights) + min(block * _external.BLOCK + 17, WEIGHT.nbytes - 1)
    with open(weights, "r+b") as handle:
        handle.seek(at)
        byte = handle.read(1)
        handle.seek(at)
        handle.write(bytes([byte[0] ^ 0x40]))
    with pytest.raises(trama.WeightsFileError, match="checksum") as caught:
        np.asarray(model.parameters["w"].value)
    assert caught.value.location == external_location(pair)


@pytest.mark.parametrize("keep", [0, _external.BLOCK, _external.BLOCK + 1000, 3 * _external.BLOCK])
def test_a_cut_in_any_block_is_a_clean_error(pair: Path, keep: int) -> None:
    model = trama.load(pair)
    weights = trama.weights_path(pair)
    with open(weights, "r+b") as handle:
        handle.truncate(data_start(weights) + keep)
    with pytest.raises(trama.WeightsFileError, match="truncated") as caught:
        np.asarray(model.parameters["w"].value)
    assert caught.value.location == external_location(pair)


@VERSIONS
def test_an_unknown_checksum_algorithm_is_refused_before_reading(tmp_path: Path, version: str) -> None:
    pair = make_pair(tmp_path, version)
    doc = json.loads(pair.read_text())
    checksum_holder(doc, "w")["checksum"] = "md5:" + "0" * 32
    pair.write_text(json.dumps(doc))
    model = trama.load(pair, validate=False)
    weights = trama.weights_path(pair)
    weights.write_bytes(weights.read_bytes()[: data_start(weights)])  # nothing left to read
    with pytest.raises(trama.WeightsFileError, match="unknown checksum algorithm 'md5'"):
        np.asarray(model.parameters["w"].value)


# --- inline: hashed as encoded ---------------------------------------------------------------


def test_encode_base64_feeds_its_hasher_the_bytes_it_encodes() -> None:
    hasher = checksum_hasher("float32", WEIGHT.shape)
    pieces = [encode_base64(WEIGHT.reshape(-1)[k : k + 1000], hasher=hasher) for k in range(0, WEIGHT.size, 1000)]
    assert checksum_of(hasher) == tensor_checksum("float32", WEIGHT.shape, WEIGHT.tobytes())
    # 1000 float32 are 4000 bytes, not a multiple of 3: the pieces are separate texts.
    assert b"".join(pybase64.b64decode(piece) for piece in pieces) == WEIGHT.tobytes()


@VERSIONS
def test_an_inline_tensor_of_several_pieces_records_the_checksum_of_the_whole(tmp_path: Path, version: str) -> None:
    path = tmp_path / "model.trama.json"
    trama.dump(weights_model({"w": WEIGHT}), path, format_version=version)
    entry = json.loads(path.read_text())["parameters"]["w"]
    expected = tensor_checksum("float32", WEIGHT.shape, WEIGHT.tobytes())
    if version == "1.2":
        assert entry["checksum"] == expected
        data = entry["value"]["data"]
    else:  # the tensor itself, its checksum beside its data, as 16 digits
        assert "xxh3-64:" + entry["checksum"] == expected
        data = entry["data"]
    assert pybase64.b64decode(data) == WEIGHT.tobytes()
    np.testing.assert_array_equal(np.asarray(trama.load(path).parameters["w"].value), WEIGHT)


# --- the memory a tensor is read into --------------------------------------------------------


@pytest.mark.parametrize("size", [0, 10, 5 << 20])
def test_fresh_bytes_is_writable_memory_of_its_own(size: int) -> None:
    array = fresh_bytes(size)
    assert array.dtype == np.uint8
    assert array.shape == (size,)
    assert array.flags.writeable
    assert array.flags.c_contiguous
    assert array.base is None  # not a view of something larger
    array[:] = 7
    assert int(array.sum()) == 7 * size


def test_an_external_tensor_is_an_array_of_its_own(pair: Path) -> None:
    value = np.asarray(trama.load(pair).parameters["w"].value)
    owner = value
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    assert owner.base is None
    assert owner.nbytes == WEIGHT.nbytes
