"""Large documents: read a block at a time, tensors' base64 decoded as it is read or left in the file.

``trama.load`` reads a file of ``MMAP_THRESHOLD`` bytes or more with positional reads and never
maps it. By default each long ``data`` string that is plain base64 is decoded as it is read,
into an array of its own (hashed for its checksum on the way when the text before it gives the
tensor's dtype and shape); any other is left in the file. With ``lazy_inline=True`` each is
checked and hashed at load and left in the file; a tensor reads it again on first use, a chunk
at a time, straight into an array of its own. These tests check that such files behave exactly
like small ones in both modes (same values, same errors, same lifting as text in memory,
whatever the block boundaries), that memory stays that of the weights, and that writing or
validating a lazily loaded model holds one tensor at a time. What happens when the file changes
under a loaded model is in ``tests/reliability/test_inline_under_reader.py``.
"""

from __future__ import annotations

import base64
import gc
import json
import mmap
import os
import random
import re
import tracemalloc
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trama
import trama.format._serialization
from trama import JSONError, Model, Node, Parameter, Ref, Tensor, TramaError
from trama.format import _jsontext, _tensor, document_problems, json_schema
from trama.format._codec import decode_document
from trama.format._jsontext import (
    BASE64_PATTERN,
    BLOB_MIN_LENGTH,
    DecodedRun,
    DocumentFile,
    TextRun,
    lift_text,
    parse_json,
)
from trama.format._tensor import checksum_hasher

FIXTURES = sorted(Path(__file__).parent.joinpath("fixtures", "legacy").glob("v0_*/*.trama.json"))


def weights_model(arrays: dict[str, np.ndarray]) -> Model:
    """One node holding every array as a parameter."""
    parameters = {name: Parameter(Tensor.from_array(array), learnable=True) for name, array in arrays.items()}
    node = Node("root", "Weights", {"x": Ref(trama.INPUT, "x")}, ["y"], {name: name for name in arrays})
    return Model(["x"], [Ref("root", "y")], [node], parameters)


def big_model() -> Model:
    """A model whose inline weights (~1.5 MB of base64) exceed the threshold."""
    weight = np.random.default_rng(3).standard_normal((512, 512)).astype(np.float32)
    return Model(
        inputs=["x"],
        outputs=[Ref("root", "y")],
        nodes=[Node("root", "Dense", {"x": Ref(trama.INPUT, "x")}, ["y"], {"weight": "root.weight"})],
        parameters={"root.weight": Parameter(Tensor.from_array(weight), learnable=True)},
    )


def open_document(path: Path) -> DocumentFile:
    return DocumentFile(os.open(path, os.O_RDONLY), path.stat().st_size, path.name)


@pytest.mark.parametrize("version", ["1.2", "1.3"])
@pytest.mark.parametrize("lazy", [False, True], ids=["decoded", "lazy"])
def test_a_large_inline_file_is_read_and_reads_back_bit_exact(tmp_path: Path, lazy: bool, version: str) -> None:
    model = big_model()
    path = tmp_path / "big.trama.json"
    trama.dump(model, path, format_version=version)
    assert path.stat().st_size >= trama.format._serialization.MMAP_THRESHOLD
    loaded = trama.load(path, lazy_inline=lazy)
    tensor = loaded.parameters["root.weight"].value
    assert isinstance(tensor, Tensor)
    source = tensor.source
    assert isinstance(source, _tensor.Base64Source)
    if lazy:
        assert isinstance(source.data, TextRun)  # left in the file, not in memory
    else:
        assert isinstance(source.data, DecodedRun)  # decoded as it was read
        if version == "1.2":  # for 1.3, see the test below
            assert source.data.hashed is not None
            assert source.data.hashed[:2] == ("float32", (512, 512))
    assert loaded.parameters == model.parameters
    assert loaded.metadata == model.metadata


@pytest.mark.parametrize(
    "dtype",
    [
        "float32",  # format 1.3 leaves "dtype" out: the scan takes it for float32
        "float64",
    ],
)
def test_a_run_of_a_nested_document_is_hashed_as_it_is_decoded(tmp_path: Path, dtype: str) -> None:
    weight = np.random.default_rng(3).standard_normal((512, 512)).astype(dtype)
    model = weights_model({"root.weight": weight})
    model.nodes[0].parameters = {"weight": "root.weight"}
    path = tmp_path / "big.trama.json"
    trama.dump(model, path)
    source = trama.load(path).parameters["root.weight"].value.source  # type: ignore[union-attr]
    assert isinstance(source.data, DecodedRun)
    assert source.data.hashed is not None
    assert source.data.hashed[:2] == (dtype, (512, 512))


def mapping_of(array: np.ndarray) -> str:
    """What backs the memory of ``array`` according to ``/proc/self/maps``: a file's path, or
    an empty string (or ``[heap]``) for memory of the process's own."""
    address = array.__array_interface__["data"][0]
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        begin, end = (int(part, 16) for part in fields[0].split("-"))
        if begin <= address < end:
            return fields[5] if len(fields) > 5 else ""
    raise AssertionError("the array's memory is not mapped")


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc/self/maps")
@pytest.mark.parametrize("lazy", [False, True], ids=["decoded", "lazy"])
@pytest.mark.parametrize("side", [16, 512])  # from the heap, and (1 MiB) a mapping of its own from malloc
def test_a_decoded_tensor_is_memory_of_its_own(tmp_path: Path, side: int, lazy: bool) -> None:
    # Not a view of the document's file (nor of a larger buffer): the array's own bytes, read-only.
    path = tmp_path / "big.trama.json"
    weight = np.random.default_rng(3).standard_normal((512, 512)).astype(np.float32)
    trama.dump(weights_model({"big": weight, "small": np.ones((side, side), np.float32)}), path)
    loaded = trama.load(path, lazy_inline=lazy)
    for name in ("big", "small"):
        value = np.asarray(loaded.parameters[name].value)
        assert mapping_of(value) in ("", "[heap]"), mapping_of(value)
        owner: Any = value
        while isinstance(owner, np.ndarray) and owner.base is not None:
            owner = owner.base
        assert memoryview(owner).nbytes == value.nbytes
        assert not value.flags.writeable


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
@pytest.mark.parametrize("lazy", [False, True], ids=["decoded", "lazy"])
def test_file_and_memory_loads_agree_on_every_fixture(path: Path, monkeypatch: pytest.MonkeyPatch, lazy: bool) -> None:
    read = trama.load(path)
    monkeypatch.setattr(trama.format._serialization, "MMAP_THRESHOLD", 1)
    streamed = trama.load(path, lazy_inline=lazy)
    assert [n.id for n in streamed.nodes] == [n.id for n in read.nodes]
    assert streamed.parameters.keys() == read.parameters.keys()
    for name, entry in read.parameters.items():
        other = streamed.parameters[name]
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
    doubled = text.replace('"inputs":["x"],', '"inputs":["x"],"inputs":["x"],', 1)
    assert doubled != text
    path.write_text(doubled)
    with pytest.raises(JSONError, match="appears twice"):
        trama.load(path)


def test_empty_files_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trama.format._serialization, "MMAP_THRESHOLD", 0)
    path = tmp_path / "empty.trama.json"
    path.write_bytes(b"")
    with pytest.raises(TramaError):
        trama.load(path)


# --- the file scan lifts exactly what the scan of text in memory lifts -------------------


def _spaces(rng: random.Random) -> str:
    return rng.choice(["", "", " ", "\n", " \t\r\n ", " " * rng.randint(0, 30)])


def _run_text(rng: random.Random) -> str:
    """A candidate ``data`` string: mostly base64 around the lifting threshold, sometimes broken."""
    size = rng.choice(
        [0, 4, 100, BLOB_MIN_LENGTH - 4, BLOB_MIN_LENGTH, BLOB_MIN_LENGTH + 4, 3000, rng.randint(0, 6000)]
    )
    text = base64.b64encode(rng.randbytes(size * 3 // 4 + rng.randint(0, 2))).decode()
    roll = rng.random()
    if roll < 0.25 and text:
        at = rng.randrange(len(text))
        text = (
            text[:at] + rng.choice(["\n", "\\u0041", "=", "==", "AA==", "-", "\u00e9", '\\"', "\x00"]) + text[at + 1 :]
        )
    elif roll < 0.3:
        text = text[:-1]
    return text


def _json_value(rng: random.Random, depth: int) -> str:
    roll = rng.random()
    if depth > 3 or roll < 0.2:
        return rng.choice(["1", '"x"', "null", '"data"', '",\\"data\\": \\""', "[]", "{}"])
    if depth == 0 or roll < 0.75:
        members = []
        keys = rng.sample(["dtype", "x", "data ", "shape"], rng.randint(0, 3))
        if rng.random() < 0.8:
            keys.insert(rng.randint(0, len(keys)), "data")
        if rng.random() < 0.03:
            keys.append("x")  # a repeated key: refused
        for key in keys:
            value = f'"{_run_text(rng)}"' if key == "data" and rng.random() < 0.8 else _json_value(rng, depth + 1)
            members.append(f'{_spaces(rng)}"{key}"{_spaces(rng)}:{_spaces(rng)}{value}{_spaces(rng)}')
        return "{" + ",".join(members) + "}"
    items = [_spaces(rng) + _json_value(rng, depth + 1) + _spaces(rng) for _ in range(rng.randint(0, 4))]
    return "[" + ",".join(items) + "]"


def _restored(value: Any, blobs: dict[str, Any]) -> Any:
    """Parsed data with every placeholder replaced by the text it stands for."""
    if isinstance(value, dict):
        return {key: _restored(item, blobs) for key, item in value.items()}
    if isinstance(value, list):
        return [_restored(item, blobs) for item in value]
    if isinstance(value, str) and value in blobs:
        return ("lifted", bytes(blobs[value]).decode("ascii"))  # a DecodedRun: encoded again
    return value


def _outcome(data: Any, decode: bool = False) -> tuple[Any, ...]:
    try:
        parsed = parse_json(lift_text(data, decode=decode, hashers=checksum_hasher) if decode else data)
    except JSONError as exc:
        return ("refused", str(exc))
    return ("parsed", _restored(parsed.data, parsed.blobs), len(parsed.blobs))


@pytest.mark.parametrize("decode", [False, True], ids=["left", "decoded"])
@pytest.mark.parametrize("block", [8, 12, 64, 4096])
def test_the_file_scan_lifts_what_the_text_scan_lifts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int, decode: bool
) -> None:
    # Small blocks put every boundary (inside "data", in the whitespace around the colon, in a
    # run, at its closing quote) between two reads. Decoded as read, a run that is plain base64
    # is a DecodedRun, any other a TextRun: either way the same text is lifted.
    monkeypatch.setattr(_jsontext, "READ_BLOCK", block)
    monkeypatch.setattr(_jsontext, "DECODE_STEP", block)
    monkeypatch.setattr(_jsontext, "SCAN_STEP", max(8, block // 2))
    rng = random.Random(block)
    lifted = refused = 0
    for _ in range(150):
        text = ("\ufeff" if rng.random() < 0.05 else "") + _spaces(rng) + _json_value(rng, 0) + _spaces(rng)
        data = text.encode()
        if rng.random() < 0.05:
            data = data[: rng.randrange(len(data) + 1)]
        path = tmp_path / "doc.json"
        path.write_bytes(data)
        expected = _outcome(data)
        got = _outcome(open_document(path), decode)
        assert got == expected, data[:200]
        if expected[0] == "parsed":
            lifted += expected[2]
        else:
            refused += 1
    assert lifted > 50
    assert refused > 5


def test_a_run_in_a_file_answers_the_schema_pattern_as_its_text_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_jsontext, "READ_BLOCK", 64)  # the padding may end a block, or not
    assert json_schema()["$defs"]["tensor"]["properties"]["data"]["pattern"] == BASE64_PATTERN
    good = base64.b64encode(bytes(range(256)) * 4 + b"x").decode()  # ends in "=="
    for text in [good, good[:-4] + "AA==", "AA==" + good[4:], good[:-4] + "A===", good[:60] + "AAA=" + good[64:]]:
        path = tmp_path / "doc.json"
        path.write_text(json.dumps({"data": text}))
        (run,) = parse_json(open_document(path)).blobs.values()
        assert isinstance(run, TextRun)
        assert run.well_formed == bool(re.search(BASE64_PATTERN, text)), text[-8:]


def test_a_mapped_document_has_its_runs_copied_out(tmp_path: Path) -> None:
    # A caller may hand parse_json a mapping; nothing may stay a view of it.
    path = tmp_path / "big.trama.json"
    trama.dump(big_model(), path)
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        parsed = parse_json(mapped)
        blobs = list(parsed.blobs.values())
        assert blobs
        assert all(type(blob) is bytes for blob in blobs)
    model = trama.loads(path.read_bytes())
    assert decode_document(parsed.data, blobs=parsed.blobs).parameters == model.parameters


def test_the_file_is_closed_once_every_tensor_was_decoded(tmp_path: Path) -> None:
    path = tmp_path / "big.trama.json"
    trama.dump(weights_model({"a": np.arange(4096.0), "b": np.ones(4096, np.float32) / 3}), path)
    assert path.stat().st_size < trama.format._serialization.MMAP_THRESHOLD
    path.write_bytes(path.read_bytes() + b" " * (1 << 20))  # large, same document
    model = trama.load(path, lazy_inline=True)
    sources = [entry.value.source for entry in model.parameters.values() if isinstance(entry.value, Tensor)]
    assert all(isinstance(source, _tensor.Base64Source) and isinstance(source.data, TextRun) for source in sources)
    file = weakref.ref(sources[0].data.file)  # type: ignore[union-attr]
    del sources
    for entry in model.parameters.values():
        np.asarray(entry.value)
    gc.collect()
    assert file() is None  # and with it the descriptor (closed by its finalizer)


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc/self/fd")
def test_by_default_the_file_is_closed_when_load_returns(tmp_path: Path) -> None:
    path = tmp_path / "big.trama.json"
    trama.dump(big_model(), path)
    gc.collect()
    before = sorted(os.listdir("/proc/self/fd"))
    model = trama.load(path)
    gc.collect()
    assert sorted(os.listdir("/proc/self/fd")) == before  # every run decoded: nothing keeps the file
    assert model.parameters == big_model().parameters


def _reordered(path: Path, value_keys: list[str]) -> None:
    """Rewrite the document at ``path`` with each tensor's members in this order (large still)."""
    doc = json.loads(path.read_text())
    for entry in doc["parameters"].values():
        entry["value"] = {key: entry["value"][key] for key in value_keys}
    path.write_text(json.dumps(doc, indent=1) + " " * (1 << 20))


@pytest.mark.parametrize("order", [["dtype", "shape", "data"], ["data", "dtype", "shape"], ["shape", "dtype", "data"]])
def test_a_decoded_run_is_checked_against_its_checksum_whatever_the_order_of_its_members(
    tmp_path: Path, order: list[str]
) -> None:
    # Hashed as it was decoded where "dtype" and "shape" come before "data" (as trama writes
    # them), at first use otherwise: a wrong checksum is refused both ways, a right one passes.
    path = tmp_path / "big.trama.json"
    trama.dump(big_model(), path, format_version="1.2")  # the flat form's members are reordered
    _reordered(path, order)
    run = trama.load(path).parameters["root.weight"].value.source.data  # type: ignore[union-attr]
    assert isinstance(run, DecodedRun)
    assert (run.hashed is not None) == (order == ["dtype", "shape", "data"])
    assert trama.load(path).parameters == big_model().parameters
    doc = json.loads(path.read_text())
    checksum = doc["parameters"]["root.weight"]["checksum"]
    doc["parameters"]["root.weight"]["checksum"] = checksum[:-1] + ("0" if checksum[-1] != "0" else "1")
    path.write_text(json.dumps(doc) + " " * (1 << 20))
    with pytest.raises(trama.TensorDataError, match="does not match the checksum") as caught:
        np.asarray(trama.load(path).parameters["root.weight"].value)
    assert caught.value.location == "/parameters/root.weight/checksum"


@pytest.mark.parametrize("guess", [("int32", (512, 512)), ("float32", (512, 511)), ("float32", (262144,))])
def test_a_hash_taken_for_another_dtype_or_shape_is_not_trusted(guess: tuple[str, tuple[int, ...]]) -> None:
    # The scan's guess only saves a pass: a source whose guess is not the parsed dtype and shape
    # hashes the bytes itself, so its verdict is that of the checksum alone.
    weight = np.random.default_rng(3).standard_normal((512, 512)).astype(np.float32)
    raw = np.frombuffer(weight.tobytes(), dtype=np.uint8)
    right = _tensor.tensor_checksum("float32", (512, 512), raw)
    wrong_hasher = checksum_hasher(*guess)
    wrong_hasher.update(raw)
    for checksum, good in ((right, True), (_tensor.checksum_of(wrong_hasher), False)):
        run = DecodedRun(raw, _tensor.base64_length(raw.size), (*guess, checksum_hasher(*guess)))
        run.hashed[2].update(raw)  # type: ignore[index]
        tensor = Tensor.from_base64("float32", [512, 512], run, location="/w", checksum=checksum, entry="w")
        if good:
            np.testing.assert_array_equal(np.asarray(tensor), weight)
        else:
            with pytest.raises(trama.TensorDataError, match="does not match the checksum"):
                np.asarray(tensor)


# --- chunked decoding ---------------------------------------------------------------------


@pytest.mark.parametrize("lazy", [False, True], ids=["decoded", "lazy"])
def test_a_tensor_larger_than_a_chunk_decodes_bit_exact_and_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lazy: bool
) -> None:
    monkeypatch.setattr(_tensor, "DECODE_CHUNK", 4096)  # many chunks for a small tensor
    monkeypatch.setattr(_jsontext, "DECODE_STEP", 4096)
    monkeypatch.setattr(_jsontext, "_RESERVE", 5000)  # and the array grows past its reservation
    values = np.random.default_rng(5).integers(-(2**62), 2**62, 70_001, dtype=np.int64)
    path = tmp_path / "big.trama.json"
    trama.dump(weights_model({"w": values}), path)
    np.testing.assert_array_equal(np.asarray(trama.load(path, lazy_inline=lazy).parameters["w"].value), values)

    # The same bytes relabelled: the checksum, fed a chunk at a time, says so.
    doc = json.loads(path.read_text())
    assert doc["parameters"]["w"]["dtype"] == "int64"  # an entry of the table (its slot is not "root.w")
    doc["parameters"]["w"]["dtype"] = "float64"
    path.write_text(json.dumps(doc))
    with pytest.raises(trama.TensorDataError, match="does not match the checksum") as caught:
        np.asarray(trama.load(path, lazy_inline=lazy).parameters["w"].value)
    assert caught.value.location == "/parameters/w/checksum"


@pytest.mark.parametrize("lazy", [False, True], ids=["decoded", "lazy"])
@pytest.mark.parametrize("at", [4092, 4096, 10_000])
def test_padding_inside_a_long_run_is_refused_at_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at: int, lazy: bool
) -> None:
    # "AA==" in the middle decodes on its own; ending a chunk (at 4092) it is still refused.
    # Decoding as the file is read gives up on such a run and leaves it in the file.
    monkeypatch.setattr(_tensor, "DECODE_CHUNK", 4096)
    monkeypatch.setattr(_jsontext, "DECODE_STEP", 4096)
    path = tmp_path / "big.trama.json"
    # the flat form: the places reported are those of its table, and the schema's of format 1.2
    trama.dump(weights_model({"w": np.arange(20_000, dtype=np.float32)}), path, format_version="1.2")
    doc = json.loads(path.read_text())
    del doc["parameters"]["w"]["checksum"]
    data = doc["parameters"]["w"]["value"]["data"]
    doc["parameters"]["w"]["value"]["data"] = data[:at] + "AA==" + data[at + 4 :]
    path.write_text(json.dumps(doc) + " " * (1 << 20))
    model = trama.load(path, lazy_inline=lazy)
    assert isinstance(model.parameters["w"].value.source.data, TextRun)  # type: ignore[union-attr]
    with pytest.raises(trama.TensorDataError, match="not valid base64") as caught:
        np.asarray(model.parameters["w"].value)
    assert caught.value.location == "/parameters/w/value"
    expected = [f"/parameters/w/value/data: the {len(data)}-character string does not match {BASE64_PATTERN!r}"]
    assert [str(p) for p in document_problems(path.read_bytes(), tmp_path)] == expected
    assert [str(p) for p in document_problems(open_document(path), tmp_path)] == expected
    assert [str(p) for p in document_problems(open_document(path), tmp_path, schema=False)] == [
        f"/parameters/w/value: {caught.value.message}"
    ]


# --- memory -------------------------------------------------------------------------------


def traced_peak(work: Any) -> tuple[int, Any]:
    """The peak of memory traced while ``work()`` runs (numpy arrays included), and its result."""
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        result = work()
        return tracemalloc.get_traced_memory()[1] - start, result
    finally:
        tracemalloc.stop()


def test_loading_and_using_every_tensor_costs_the_weights_and_little_more(tmp_path: Path) -> None:
    arrays = {f"w{k}": np.random.default_rng(k).standard_normal((1024, 1024)).astype(np.float32) for k in range(6)}
    weight_bytes = sum(a.nbytes for a in arrays.values())  # 24 MiB
    path = tmp_path / "big.trama.json"
    trama.dump(weights_model(arrays), path)

    def load_and_use(lazy: bool) -> list[np.ndarray]:
        model = trama.load(path, lazy_inline=lazy)
        return [np.asarray(model.parameters[name].value) for name in arrays]

    for lazy in (False, True):
        peak, values = traced_peak(lambda: load_and_use(lazy))  # noqa: B023 - called at once
        assert [v.tobytes() for v in values] == [a.tobytes() for a in arrays.values()]
        assert peak <= 1.1 * weight_bytes, f"peak {peak / weight_bytes:.2f}x the weights (lazy: {lazy})"


def test_redumping_a_loaded_document_writes_the_same_bytes_and_decodes_nothing_for_keeps(tmp_path: Path) -> None:
    arrays = {f"w{k}": np.random.default_rng(k).standard_normal((1024, 1024)).astype(np.float32) for k in range(6)}
    largest = max(a.nbytes for a in arrays.values())
    path = tmp_path / "big.trama.json"
    trama.dump(weights_model(arrays), path)
    model = trama.load(path, lazy_inline=True)
    np.asarray(model.parameters["w2"].value)  # one already in use stays so
    again = tmp_path / "again.trama.json"
    peak, _ = traced_peak(lambda: trama.dump(model, again))
    assert again.read_bytes() == path.read_bytes()
    assert {name: entry.value.is_decoded for name, entry in model.parameters.items()} == {
        name: name == "w2" for name in arrays
    }
    assert peak < 2 * largest, f"peak {peak / largest:.1f}x the largest tensor"  # one at a time, not six
    assert trama.dumps(model).encode() == path.read_bytes()
    assert not model.parameters["w0"].value.is_decoded


def test_validating_external_weights_holds_one_tensor_at_a_time(tmp_path: Path) -> None:
    arrays = {f"w{k}": np.full((1024, 1024), k, np.float32) for k in range(8)}
    largest = max(a.nbytes for a in arrays.values())
    path = tmp_path / "ext.trama.json"
    trama.dump(weights_model(arrays), path, weights="external")
    data = path.read_bytes()
    peak, problems = traced_peak(lambda: document_problems(data, tmp_path))
    assert problems == []
    assert peak < 2 * largest, f"peak {peak / largest:.1f}x the largest tensor"  # not 8x

    # Still a check of every tensor: a changed one is reported.
    weights = trama.weights_path(path)
    raw = bytearray(weights.read_bytes())
    raw[-1] ^= 0xFF
    weights.write_bytes(bytes(raw))
    assert [p.location for p in document_problems(data, tmp_path)] == ["/parameters/w7"]  # the 1.3 text's entry


def test_validating_a_large_inline_file_holds_one_tensor_at_a_time(tmp_path: Path) -> None:
    arrays = {f"w{k}": np.full((1024, 1024), k, np.float32) for k in range(8)}
    largest = max(a.nbytes for a in arrays.values())
    path = tmp_path / "big.trama.json"
    trama.dump(weights_model(arrays), path)
    peak, problems = traced_peak(lambda: document_problems(open_document(path), tmp_path))
    assert problems == []
    assert peak < 2 * largest, f"peak {peak / largest:.1f}x the largest tensor"
