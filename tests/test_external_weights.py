"""dump(..., weights="external"): tensors in a safetensors file beside the document, named after
its content, read back lazily (copies by default, views of a memory map on request) and verified
against their checksums on first use."""

from __future__ import annotations

import hashlib
import json
import mmap
import re
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import safetensors.numpy
import xxhash

import trama
from trama import NodeFragment, Param

ARRAYS: dict[str, np.ndarray] = {
    "f16": np.array([[1.0, -2.5], [65504.0, 6e-8]], dtype="<f2"),
    "f32": np.arange(12, dtype="<f4").reshape(2, 3, 2) - 5.5,
    "f64": np.array([0.1, -1e-300, np.inf, -0.0], dtype="<f8"),
    "i8": np.array([-128, 0, 127], dtype="i1"),
    "i16": np.array([-32768, 300], dtype="<i2"),
    "i32": np.array([[-(2**31), 7], [70000, 2**31 - 1]], dtype="<i4"),
    "i64": np.array([-(2**63), 2**53 + 1, 2**63 - 1], dtype="<i8"),
    "u8": np.array([0, 128, 255], dtype="u1"),
    "bool": np.array([[True, False, True]]),
    "scalar": np.array(3.5, dtype="<f4"),
    "empty": np.zeros((2, 0, 3), dtype="<i4"),
}
BF16 = np.array([1.0, -2.5, 0.15625, 65536.0], dtype=ml_dtypes.bfloat16)


class Bag:
    def __init__(self, slots: Mapping[str, Any]) -> None:
        self.slots = dict(slots)

    def to_node(self, ctx: trama.ExportContext) -> NodeFragment:
        return NodeFragment(op="Bag", outputs=["y"], parameters=self.slots)


def bag_model(slots: Mapping[str, Any]) -> trama.Model:
    return trama.export_model(Bag(slots), inputs=["x"], outputs=["y"])


def all_dtypes_model() -> trama.Model:
    return bag_model(
        {**{name: Param(array, learnable=True) for name, array in ARRAYS.items()}, "bf16": BF16, "n": 3, "s": "same"}
    )


def written_values(doc: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """Each entry a nested (format 1.3) document writes in a node's ``set``, by name (``<node
    id>.<slot>``), with its place and value; then the entries of its table."""
    found: dict[str, tuple[str, Any]] = {}
    stack: list[tuple[list[Any], str, str]] = [(doc["nodes"], "", "/nodes")]
    while stack:
        nodes, prefix, where = stack.pop()
        for k, node in enumerate(nodes):
            node_id = prefix + node["name"]
            for slot, value in node.get("set", {}).items():
                if not (isinstance(value, dict) and "ref" in value):
                    found[f"{node_id}.{slot}"] = (f"{where}/{k}/set/{slot}", value)
            if "nodes" in node:
                stack.append((node["nodes"], f"{node_id}.", f"{where}/{k}/nodes"))
    for name, value in doc.get("parameters", {}).items():
        found[name] = (f"/parameters/{name}", value)
    return found


def place_of(path: Path, entry: str) -> str:
    """Where the document at ``path`` gives entry ``entry``'s tensor: in the flat form (format
    1.2), its table's value; in the nested one (1.3), the value written in its slot."""
    doc = json.loads(path.read_text())
    if doc["format_version"] == "1.2":
        return f"/parameters/{entry}/value"
    return written_values(doc)[entry][0]


def tensors_of(model: trama.Model) -> dict[str, trama.Tensor]:
    return {name: e.value for name, e in model.parameters.items() if isinstance(e.value, trama.Tensor)}


# --------------------------------------------------------------------------------------------
# Files and document form
# --------------------------------------------------------------------------------------------


def weights_of(path: Path) -> Path:
    """The one weights file the document at ``path`` names."""
    return trama.weights_path(path)


@pytest.mark.parametrize(
    ("document", "stem"),
    [
        ("model.trama.json", "model"),
        ("model.json", "model"),
        ("model", "model"),
        ("my.model.v2.trama.json", "my.model.v2"),
        (".trama.json", ".trama"),
    ],
)
def test_the_weights_file_is_named_after_the_document_and_its_content(tmp_path: Path, document: str, stem: str) -> None:
    trama.dump(bag_model({"w": np.arange(3, dtype=np.float32)}), tmp_path / document, weights="external")
    weights = weights_of(tmp_path / document)
    assert weights.parent == tmp_path
    assert re.fullmatch(re.escape(stem) + r"\.[0-9a-f]{16}\.safetensors", weights.name), weights.name
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([document, weights.name])


def test_equal_content_gives_an_equal_name_and_different_content_another(tmp_path: Path) -> None:
    names = []
    for folder, values in (("a", [1.0, 2.0]), ("b", [1.0, 2.0]), ("c", [1.0, 2.5])):
        (tmp_path / folder).mkdir()
        path = tmp_path / folder / "m.trama.json"
        trama.dump(bag_model({"w": np.array(values, dtype=np.float32)}), path, weights="external")
        names.append(weights_of(path).name)
    assert names[0] == names[1]
    assert names[0] != names[2]


def test_dump_external_writes_the_weights_beside_the_json(tmp_path: Path, mlp_model: trama.Model) -> None:
    path = tmp_path / "mlp.trama.json"
    trama.dump(mlp_model, path, weights="external")
    weights = weights_of(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [weights.name, "mlp.trama.json"]
    # format 1.3: the weights file named once; a tensor there, under its entry's name, is its
    # dtype (float32 left out), shape and the checksum of its bytes (16 digits: xxh3-64)
    doc = json.loads(path.read_text())
    assert doc["weights"] == weights.name
    tensors = 0
    for name, (_, value) in written_values(doc).items():
        if isinstance(value, dict):
            assert set(value) == {"shape", "checksum"}
            array = np.asarray(mlp_model.parameters[name].value)
            assert value["shape"] == list(array.shape)
            assert value["checksum"] == xxhash.xxh3_64_hexdigest(array.tobytes())
            tensors += 1
        else:
            assert isinstance(value, int)  # scalars stay in the JSON
    assert tensors == len(tensors_of(mlp_model))
    assert '"data"' not in path.read_text()
    assert sorted(safetensors.numpy.load_file(weights)) == sorted(tensors_of(mlp_model))

    # format 1.2: each tensor an external reference of its own
    flat = tmp_path / "flat" / "mlp.trama.json"
    flat.parent.mkdir()
    trama.dump(mlp_model, flat, weights="external", format_version="1.2")
    weights = weights_of(flat)
    doc = json.loads(flat.read_text())
    for name, entry in doc["parameters"].items():
        value = entry["value"]
        if isinstance(value, dict):
            assert set(value) == {"dtype", "shape", "external"}
            assert value["external"]["path"] == weights.name
            assert value["external"]["key"] == name
            checksum = value["external"]["checksum"]
            assert checksum.startswith("xxh3-64:")
            assert len(checksum) == len("xxh3-64:") + 16
            array = np.asarray(mlp_model.parameters[name].value)
            assert checksum == "xxh3-64:" + xxhash.xxh3_64_hexdigest(array.tobytes())
        else:
            assert isinstance(value, int)  # scalars stay in the JSON
    assert '"data"' not in flat.read_text()


def test_shared_tensor_is_written_once(tmp_path: Path) -> None:
    tied = np.arange(6, dtype="<f4").reshape(2, 3)
    model = bag_model({"a": tied, "b": tied, "c": tied.copy()})
    path = tmp_path / "tied.trama.json"
    trama.dump(model, path, weights="external")
    assert sorted(safetensors.numpy.load_file(weights_of(path))) == ["root.a", "root.c"]
    back = trama.load(path)
    assert back.node("root").parameters == {"a": "root.a", "b": "root.a", "c": "root.c"}


def test_safetensors_header_is_aligned_and_well_formed(tmp_path: Path) -> None:
    path = tmp_path / "m.trama.json"
    trama.dump(all_dtypes_model(), path, weights="external")
    data = weights_of(path).read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    assert (8 + length) % 8 == 0
    header = json.loads(data[8 : 8 + length])
    # The metadata comes first and names the document the file was written for.
    assert next(iter(header)) == "__metadata__"
    assert header.pop("__metadata__") == {"trama.document": "m.trama.json"}
    end = 0
    for key, entry in header.items():
        begin, stop = entry["data_offsets"]
        assert begin == end, key  # packed, in order
        end = stop
    assert 8 + length + end == len(data)


# --------------------------------------------------------------------------------------------
# The safetensors package reads our files
# --------------------------------------------------------------------------------------------


def test_safetensors_package_reads_identical_arrays(tmp_path: Path) -> None:
    model = bag_model(ARRAYS)
    trama.dump(model, tmp_path / "m.trama.json", weights="external")
    loaded = safetensors.numpy.load_file(weights_of(tmp_path / "m.trama.json"))
    assert set(loaded) == {f"root.{name}" for name in ARRAYS}
    for name, array in ARRAYS.items():
        theirs = loaded[f"root.{name}"]
        assert theirs.dtype == array.dtype, name
        assert theirs.shape == array.shape, name
        assert theirs.tobytes() == array.tobytes(), name


def test_safetensors_package_reads_bfloat16(tmp_path: Path) -> None:
    trama.dump(bag_model({"bf16": BF16}), tmp_path / "m.trama.json", weights="external")
    try:
        loaded = safetensors.numpy.load_file(weights_of(tmp_path / "m.trama.json"))
    except (TypeError, ValueError) as exc:  # pragma: no cover - depends on the safetensors version
        pytest.skip(f"this safetensors cannot represent bfloat16 in numpy: {exc}")
    theirs = loaded["root.bf16"]
    assert theirs.view("<u2").tobytes() == BF16.view("<u2").tobytes()
    assert theirs.shape == BF16.shape


def test_we_read_files_written_by_the_safetensors_package(tmp_path: Path) -> None:
    ours = tmp_path / "m.trama.json"
    trama.dump(bag_model(ARRAYS), ours, weights="external")
    # Rewrite the weights with the reference writer (its own layout and padding): still readable.
    weights = weights_of(ours)
    arrays = safetensors.numpy.load_file(weights)
    safetensors.numpy.save_file(arrays, weights, metadata={"format": "np"})
    back = trama.load(ours)
    for name, array in ARRAYS.items():
        assert np.asarray(back.parameters[f"root.{name}"].value).tobytes() == array.tobytes()


# --------------------------------------------------------------------------------------------
# Reading back: lazy, verified; private copies by default, a memory map on request
# --------------------------------------------------------------------------------------------


def test_external_round_trip_every_dtype(tmp_path: Path) -> None:
    model = all_dtypes_model()
    path = tmp_path / "m.trama.json"
    trama.dump(model, path, weights="external")
    back = trama.load(path)
    assert back.parameters == model.parameters
    for name, tensor in tensors_of(back).items():
        original = np.asarray(model.parameters[name].value)
        decoded = np.asarray(tensor)
        assert decoded.dtype == original.dtype
        assert decoded.shape == original.shape
        assert decoded.tobytes() == original.tobytes()


def test_load_is_lazy(tmp_path: Path, mlp_model: trama.Model) -> None:
    path = tmp_path / "m.trama.json"
    trama.dump(mlp_model, path, weights="external")
    back = trama.load(path)
    tensors = tensors_of(back)
    assert tensors
    assert not any(t.is_decoded for t in tensors.values())
    assert all(f"external {weights_of(path).name}" in repr(t) for t in tensors.values())
    first, *rest = tensors.values()
    np.asarray(first)
    assert first.is_decoded
    assert not any(t.is_decoded for t in rest)  # one tensor touched, one tensor read


def base_buffer(array: np.ndarray) -> Any:
    """The object at the bottom of an array's chain of views."""
    base: Any = array
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    while isinstance(base, memoryview):
        base = base.obj
    return base


def test_values_are_read_only_private_copies_by_default(tmp_path: Path, mlp_model: trama.Model) -> None:
    path = tmp_path / "m.trama.json"
    trama.dump(mlp_model, path, weights="external")
    for tensor in tensors_of(trama.load(path)).values():
        array = np.asarray(tensor)
        base = base_buffer(array)
        assert isinstance(base, np.ndarray)
        assert base.base is None  # owns its memory: no mapping behind it
        assert not array.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            array[...] = 0
        assert np.asarray(tensor) is array  # decoded once, then cached


def test_with_mmap_weights_values_are_read_only_views_of_a_memory_map(tmp_path: Path, mlp_model: trama.Model) -> None:
    path = tmp_path / "m.trama.json"
    trama.dump(mlp_model, path, weights="external")
    model = trama.load(path, mmap_weights=True)
    assert model.parameters == mlp_model.parameters
    for tensor in tensors_of(model).values():
        array = np.asarray(tensor)
        assert isinstance(base_buffer(array), mmap.mmap)
        assert not array.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            array[...] = 0
        assert np.asarray(tensor) is array
    text = path.read_text()
    assert trama.loads(text, base_dir=tmp_path, mmap_weights=True).parameters == mlp_model.parameters


def test_the_weights_file_is_released_once_every_tensor_was_read(tmp_path: Path, mlp_model: trama.Model) -> None:
    import gc
    import os

    def open_files() -> set[str]:
        folder = Path("/proc/self/fd")
        return {os.path.realpath(folder / fd) for fd in os.listdir(folder)} if folder.exists() else set()

    if not Path("/proc/self/fd").exists():
        pytest.skip("needs /proc")
    path = tmp_path / "m.trama.json"
    trama.dump(mlp_model, path, weights="external")
    weights = os.path.realpath(weights_of(path))
    model = trama.load(path)
    assert weights in open_files()  # held open: a newer dump replacing it does not matter
    touch(model)
    gc.collect()
    assert weights not in open_files()


def test_checksum_is_verified_on_first_access(tmp_path: Path, mlp_model: trama.Model) -> None:
    path = tmp_path / "m.trama.json"
    trama.dump(mlp_model, path, weights="external")
    weights = weights_of(path)
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01  # the last byte belongs to the last tensor
    weights.write_bytes(bytes(data))
    back = trama.load(path)  # loading reads the header only: no error yet
    tensors = tensors_of(back)
    last = list(tensors)[-1]
    for name, tensor in tensors.items():
        if name != last:
            np.asarray(tensor)  # untouched tensors still verify
    with pytest.raises(trama.WeightsFileError, match="checksum") as info:
        np.asarray(tensors[last])
    assert info.value.location == place_of(path, last)
    assert not tensors[last].is_decoded


def test_change_after_load_is_caught_on_access(tmp_path: Path, mlp_model: trama.Model) -> None:
    path = tmp_path / "m.trama.json"
    trama.dump(mlp_model, path, weights="external")
    back = trama.load(path)
    weights = weights_of(path)
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01
    with open(weights, "r+b") as handle:  # in place, as another program might
        handle.write(bytes(data))
    with pytest.raises(trama.WeightsFileError, match="checksum"):
        touch(back)


def touch(model: trama.Model) -> None:
    for tensor in tensors_of(model).values():
        np.asarray(tensor)


@pytest.mark.parametrize("version", ["1.2", "1.3"])
def test_sha256_checksums_are_accepted(tmp_path: Path, mlp_model: trama.Model, version: str) -> None:
    path = tmp_path / "m.trama.json"
    trama.dump(mlp_model, path, weights="external", format_version=version)
    doc = json.loads(path.read_text())
    if version == "1.2":
        table = doc["parameters"].items()
        holders = {name: entry["value"]["external"] for name, entry in table if isinstance(entry["value"], dict)}
    else:
        holders = {name: value for name, (_, value) in written_values(doc).items()}
    changed = 0
    for name, holder in holders.items():
        if isinstance(holder, dict) and "checksum" in holder:
            raw = np.asarray(mlp_model.parameters[name].value).tobytes()
            holder["checksum"] = "sha256:" + hashlib.sha256(raw).hexdigest().upper()
            changed += 1
    assert changed == len(tensors_of(mlp_model))
    path.write_text(json.dumps(doc))
    assert trama.load(path).parameters == mlp_model.parameters


def test_loads_without_base_dir_fails_clearly_on_access(tmp_path: Path, mlp_model: trama.Model) -> None:
    path = tmp_path / "m.trama.json"
    trama.dump(mlp_model, path, weights="external")
    text = path.read_text()
    model = trama.loads(text)  # the structure reads fine
    tensor = model.parameters["root.layers_0.weight"].value
    assert isinstance(tensor, trama.Tensor)
    with pytest.raises(trama.WeightsFileError, match="base_dir") as info:
        np.asarray(tensor)
    assert info.value.location == place_of(path, "root.layers_0.weight")
    # ...and with the folder it works.
    assert trama.loads(text, base_dir=tmp_path).parameters == mlp_model.parameters


def test_loads_with_base_dir_resolves_relative_to_it(tmp_path: Path, mlp_model: trama.Model) -> None:
    path = tmp_path / "a" / "m.trama.json"
    path.parent.mkdir()
    trama.dump(mlp_model, path, weights="external")
    with pytest.raises(trama.WeightsFileError, match="cannot open"):
        trama.loads(path.read_text(), base_dir=tmp_path)


def test_moving_the_pair_together_keeps_it_readable(tmp_path: Path, mlp_model: trama.Model) -> None:
    path = tmp_path / "a" / "m.trama.json"
    path.parent.mkdir()
    trama.dump(mlp_model, path, weights="external")
    moved = tmp_path / "b"
    path.parent.rename(moved)
    assert trama.load(moved / "m.trama.json").parameters == mlp_model.parameters


def test_imported_model_from_external_weights_computes_the_same(
    tmp_path: Path, mlp_module: Any, mlp_model: trama.Model, toy_registry: trama.OpRegistry
) -> None:
    path = tmp_path / "m.trama.json"
    trama.dump(mlp_model, path, weights="external")
    instance = trama.import_model(trama.load(path), registry=toy_registry)
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    assert np.array_equal(instance(x), mlp_module(x))


def test_external_and_inline_conversions(tmp_path: Path) -> None:
    model = all_dtypes_model()
    external = tmp_path / "e.trama.json"
    trama.dump(model, external, weights="external")
    # external -> inline -> external: the same values and, inline, the same text
    inline = tmp_path / "i.trama.json"
    trama.dump(trama.load(external), inline)
    assert inline.read_text() == trama.dumps(model)
    again = tmp_path / "again.trama.json"
    trama.dump(trama.load(inline), again, weights="external")
    # The same tensors, laid out the same way; only the metadata (the document's name) differs.
    assert without_metadata(weights_of(again)) == without_metadata(weights_of(external))


def without_metadata(weights: Path) -> tuple[dict[str, Any], bytes]:
    data = weights.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    header.pop("__metadata__")
    return header, data[8 + length :]


def test_rewriting_a_pair_in_place_from_its_own_lazy_model(tmp_path: Path) -> None:
    # The tensors being written are views of the very file being replaced.
    model = all_dtypes_model()
    path = tmp_path / "m.trama.json"
    trama.dump(model, path, weights="external")
    for mmap_weights in (False, True):
        lazy = trama.load(path, mmap_weights=mmap_weights)
        trama.dump(lazy, path, weights="external")
        assert trama.load(path).parameters == model.parameters
        assert sorted(p.name for p in tmp_path.iterdir()) == [weights_of(path).name, "m.trama.json"]
        assert lazy.parameters == model.parameters  # still reading the file it was loaded from


def test_rewriting_a_lazy_model_does_not_keep_its_tensors(tmp_path: Path) -> None:
    # Re-dumping a lazily loaded model reads each tensor for the occasion, one at a time.
    model = all_dtypes_model()
    path = tmp_path / "m.trama.json"
    trama.dump(model, path, weights="external")
    lazy = trama.load(path)
    trama.dump(lazy, tmp_path / "copy.trama.json", weights="external")
    assert not any(t.is_decoded for t in tensors_of(lazy).values())
    assert trama.load(tmp_path / "copy.trama.json").parameters == model.parameters


def test_writing_an_inline_model_out_of_line_does_not_keep_its_tensors(tmp_path: Path) -> None:
    model = all_dtypes_model()
    path = tmp_path / "m.trama.json"
    trama.dump(model, path)
    lazy = trama.load(path)
    trama.dump(lazy, tmp_path / "copy.trama.json", weights="external")
    assert not any(t.is_decoded for t in tensors_of(lazy).values())
    assert trama.load(tmp_path / "copy.trama.json").parameters == model.parameters


def test_model_without_tensors(tmp_path: Path) -> None:
    model = bag_model({"n": 3})
    path = tmp_path / "m.trama.json"
    trama.dump(model, path, weights="external")
    assert trama.load(path).parameters == model.parameters
    assert [p.name for p in tmp_path.iterdir()] == ["m.trama.json"]  # no weights, no weights file
    with pytest.raises(trama.WeightsFileError, match="names 0 weights files"):
        trama.weights_path(path)


def test_an_entry_named_like_the_safetensors_metadata(tmp_path: Path) -> None:
    # safetensors reserves the key __metadata__, a valid entry name: its tensor gets another key.
    value = np.arange(4, dtype=np.float32)
    model = trama.Model(
        ["x"],
        [trama.Ref("bag", "y")],
        [trama.Node("bag", "Bag", {"x": trama.Ref(trama.INPUT, "x")}, ["y"], {"w": "__metadata__"})],
        {"__metadata__": trama.Parameter(trama.Tensor.from_array(value), learnable=True)},
    )
    for version in ("1.2", "1.3"):
        path = tmp_path / version / "m.trama.json"
        path.parent.mkdir()
        trama.dump(model, path, weights="external", format_version=version)
        doc = json.loads(path.read_text())
        if version == "1.2":
            assert doc["parameters"]["__metadata__"]["value"]["external"]["key"] == "trama:__metadata__"
        else:  # the key is implied by the entry's name
            assert doc["parameters"]["__metadata__"] == {"shape": [4], "checksum": xxhash.xxh3_64_hexdigest(value)}
        theirs = safetensors.numpy.load_file(weights_of(path))
        assert theirs["trama:__metadata__"].tobytes() == value.tobytes()
        assert trama.load(path).parameters == model.parameters


def test_unknown_weights_mode_is_refused(tmp_path: Path, mlp_model: trama.Model) -> None:
    with pytest.raises(ValueError, match="weights must be"):
        trama.dump(mlp_model, tmp_path / "m.trama.json", weights="separate")  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_a_document_replaced_while_it_is_read_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Another process commits a new dump between our reading the JSON and opening the weights
    # file it names, and retires that file: load reads the new document instead of failing.
    import trama.format._serialization as serialization

    path = tmp_path / "m.trama.json"
    first, second = bag_model({"w": np.zeros(3, np.float32)}), bag_model({"w": np.ones(3, np.float32)})
    trama.dump(first, path, weights="external")
    stale = serialization._read_document(path)
    trama.dump(second, path, weights="external")
    real = serialization._read_document
    calls: list[Path] = []

    def read_document(file: Path) -> Any:
        calls.append(file)
        return stale if len(calls) == 1 else real(file)

    monkeypatch.setattr(serialization, "_read_document", read_document)
    assert trama.load(path).parameters == second.parameters
    assert len(calls) == 2


def test_a_missing_weights_file_of_an_unchanged_document_is_reported_at_once(tmp_path: Path) -> None:
    path = tmp_path / "m.trama.json"
    trama.dump(bag_model({"w": np.zeros(3, np.float32)}), path, weights="external")
    trama.weights_path(path).unlink()
    with pytest.raises(trama.WeightsFileError, match="cannot open weights file"):
        trama.load(path)


def rewrite_header(weights: Path, change: Any) -> None:
    data = weights.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    change(header)
    text = json.dumps(header).encode()
    weights.write_bytes(struct.pack("<Q", len(text)) + text + data[8 + length :])


@pytest.mark.parametrize("offsets", ["0-16", [0], [0, 1.5], None, [True, 8]])
def test_malformed_data_offsets_are_blamed_not_the_dtype(tmp_path: Path, offsets: Any) -> None:
    path = tmp_path / "m.trama.json"
    trama.dump(bag_model({"w": np.ones(4, np.float32)}), path, weights="external")

    def change(header: dict[str, Any]) -> None:
        header["root.w"]["data_offsets"] = offsets

    rewrite_header(weights_of(path), change)
    with pytest.raises(trama.WeightsFileError, match=r"has corrupt offsets: data_offsets is not \[begin, end\]"):
        np.asarray(trama.load(path).parameters["root.w"].value)


def test_header_values_in_messages_are_short_and_printable(tmp_path: Path) -> None:
    path = tmp_path / "m.trama.json"
    trama.dump(bag_model({"w": np.ones(4, np.float32)}), path, weights="external")

    def change(header: dict[str, Any]) -> None:
        header["root.w"]["dtype"] = "\x1b[2J" + "F" * 100
        header["root.w"]["shape"] = list(range(1000))

    rewrite_header(weights_of(path), change)
    with pytest.raises(trama.WeightsFileError, match="but the document says float32") as caught:
        np.asarray(trama.load(path).parameters["root.w"].value)
    message = str(caught.value)
    assert message.isprintable()
    assert len(message) < 300
