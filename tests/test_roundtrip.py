"""Property tests: values survive export -> text/file -> load -> import bit for bit.

Tensors are drawn as raw bytes of every dtype the format knows (so NaN payloads, signalling NaNs,
-0.0, subnormals and every other bit pattern occur), in shapes that include 0-d and empty ones.
Scalars and nested lists of scalars go through the same routes. Every route is checked:
``dumps``/``loads``, ``dump``/``load`` with inline weights, and with external weights.
"""

from __future__ import annotations

import base64
import json
import math
import struct
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import trama
from trama import NodeFragment, OpRegistry, OpSpec, Param, ParameterSchema

SLOTS = tuple(f"p{k}" for k in range(6))
SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NUMPY_DTYPES = {
    "float16": np.dtype("<f2"),
    "float32": np.dtype("<f4"),
    "float64": np.dtype("<f8"),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "int8": np.dtype("i1"),
    "int16": np.dtype("<i2"),
    "int32": np.dtype("<i4"),
    "int64": np.dtype("<i8"),
    "uint8": np.dtype("u1"),
    "bool": np.dtype("?"),
}


def test_the_test_covers_every_dtype_of_the_format() -> None:
    from trama.format import DTYPE_NAMES

    assert set(NUMPY_DTYPES) == set(DTYPE_NAMES)


# --------------------------------------------------------------------------------------------
# A generic exportable op and the registry that imports it
# --------------------------------------------------------------------------------------------


class Bag:
    """A leaf holding any parameters: ``slots`` maps slot name -> Param (or a bare value)."""

    def __init__(self, slots: Mapping[str, Any]) -> None:
        self.slots = dict(slots)

    def to_node(self, ctx: trama.ExportContext) -> NodeFragment:
        return NodeFragment(op="Bag", outputs=["y"], parameters=self.slots)


class Pair:
    """A composite of two children, chained: ``second(first(x))``."""

    def __init__(self, first: Any, second: Any) -> None:
        self.first = first
        self.second = second

    def to_node(self, ctx: trama.ExportContext) -> NodeFragment:
        a = ctx.child("first", self.first, inputs={"x": ctx.input("x")}, outputs=["y"])["y"]
        b = ctx.child("second", self.second, inputs={"x": a}, outputs=["y"])["y"]
        return NodeFragment(op="Pair", outputs=["y"], output_bindings={"y": b})


def build(node: trama.Node, *, children: Mapping[str, Any], parameters: Mapping[str, trama.Parameter]) -> dict:
    return {"op": node.op, "children": dict(children), "parameters": dict(parameters)}


def registry() -> OpRegistry:
    return OpRegistry(
        [
            OpSpec(
                "Bag",
                inputs=("x",),
                outputs=("y",),
                parameters=tuple(ParameterSchema(slot, optional=True) for slot in SLOTS),
                factory=build,
            ),
            OpSpec("Pair", inputs=("x",), outputs=("y",), composite=True, factory=build),
        ]
    )


# --------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------

shapes = st.lists(st.integers(0, 4), min_size=0, max_size=4)


@st.composite
def arrays(draw: st.DrawFn, dtype: str | None = None) -> np.ndarray:
    name = dtype or draw(st.sampled_from(sorted(NUMPY_DTYPES)))
    np_dtype = NUMPY_DTYPES[name]
    shape = draw(shapes)
    count = math.prod(shape)
    if name == "bool":
        raw = bytes(draw(st.lists(st.integers(0, 1), min_size=count, max_size=count)))
    else:
        raw = draw(st.binary(min_size=count * np_dtype.itemsize, max_size=count * np_dtype.itemsize))
    array = np.frombuffer(raw, dtype=np_dtype).reshape(shape).copy()
    if draw(st.booleans()) and array.ndim >= 2:  # a non-contiguous view must export its values in C order
        array = array.T
    return array


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
lists = st.recursive(st.lists(scalars, max_size=4), lambda inner: st.lists(inner | scalars, max_size=3), max_leaves=12)
values = st.one_of(arrays(), scalars, lists)
slot_values = st.dictionaries(st.sampled_from(SLOTS), st.tuples(values, st.booleans()), min_size=1, max_size=len(SLOTS))


# --------------------------------------------------------------------------------------------
# Comparison: bit for bit
# --------------------------------------------------------------------------------------------


def assert_same_tensor(tensor: Any, array: np.ndarray) -> None:
    assert isinstance(tensor, trama.Tensor)
    decoded = np.asarray(tensor)
    assert tensor.dtype == trama.Tensor.from_array(array).dtype
    assert tensor.shape == array.shape
    assert decoded.shape == array.shape
    assert decoded.dtype == array.dtype
    assert decoded.tobytes(order="C") == np.ascontiguousarray(array).tobytes(order="C")


def assert_same_value(got: Any, want: Any) -> None:
    if isinstance(want, np.ndarray):
        assert_same_tensor(got, want)
    elif isinstance(want, (list, tuple)):
        assert type(got) is list
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert_same_value(g, w)
    elif isinstance(want, float):
        assert type(got) is float
        assert struct.pack("<d", got) == struct.pack("<d", want)  # tells -0.0 from 0.0
    else:
        assert type(got) is type(want)
        assert got == want


def export(module: Any) -> trama.Model:
    return trama.export_model(module, inputs=["x"], outputs=["y"], registry=registry())


def every_route(model: trama.Model) -> list[trama.Model]:
    """The model back from each way of writing and reading it."""
    text = trama.dumps(model)
    # As bytes, a lone surrogate read from a "\\ud800" escape can only be written as an escape.
    results = [trama.loads(text), trama.loads(text.encode("utf-8", "backslashreplace"))]
    with tempfile.TemporaryDirectory() as folder:
        inline = Path(folder) / "inline.trama.json"
        trama.dump(model, inline)
        results.append(trama.load(inline))
        external = Path(folder) / "external.trama.json"
        trama.dump(model, external, weights="external")
        back = trama.load(external)
        # Decode (and verify) while the folder exists; the arrays are views of the mapped file.
        for entry in back.parameters.values():
            if isinstance(entry.value, trama.Tensor):
                np.asarray(entry.value)
        results.append(back)
        assert not list(Path(folder).glob("*.tmp"))
    return results


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------


@SETTINGS
@given(slot_values)
@example({"p0": (np.array(-0.0, dtype="<f4"), True)})
@example({"p0": (np.frombuffer(b"\x01\x00\xc0\x7f", dtype="<f4").reshape(()), False)})  # NaN with a payload
@example({"p0": (np.frombuffer(b"\x01\x00\x00\x00\x00\x00\xf0\x7f", dtype="<f8").copy(), False)})  # signalling NaN
@example({"p0": (np.frombuffer(b"\xc1\x7f", dtype=ml_dtypes.bfloat16).copy(), True)})  # bfloat16 NaN
@example({"p0": (np.zeros((2, 0, 3), dtype="<i4"), False), "p1": (-0.0, True), "p2": (2**70, False)})
@example({"p0": ("", False), "p1": ('h\u00e9llo \u2713 "q" \\ \n\t\x00', False), "p2": ([[], [[]]], True)})
@example({"p0": ("lone \ud800 and \udfff surrogates", False), "p1": (["\udc80", ["\U0001f600"]], False)})
def test_values_survive_every_route(slots: dict[str, tuple[Any, bool]]) -> None:
    model = export(Bag({slot: Param(value, learnable=flag) for slot, (value, flag) in slots.items()}))
    for back in [model, *every_route(model)]:
        node = back.node("root")
        assert set(node.parameters) == set(slots)
        for slot, (value, flag) in slots.items():
            entry = back.parameter(node, slot)
            assert entry.learnable is flag
            assert_same_value(entry.value, value)
        assert back.parameters == model.parameters
        instance = trama.import_model(back, registry=registry())
        for slot, (value, flag) in slots.items():
            assert instance["parameters"][slot].learnable is flag
            assert_same_value(instance["parameters"][slot].value, value)


@SETTINGS
@given(arrays(), st.booleans(), arrays())
def test_tied_tensors_stay_one_shared_entry(tied: np.ndarray, learnable: bool, other: np.ndarray) -> None:
    weight = Param(tied, learnable=learnable)
    module = Pair(Bag({"p0": weight, "p1": other}), Bag({"p0": weight}))
    model = export(module)
    assert len(model.parameters) == 2
    for back in [model, *every_route(model)]:
        first, second = back.node("root.first"), back.node("root.second")
        assert first.parameters["p0"] == second.parameters["p0"]
        assert len(back.parameters) == 2
        instance = trama.import_model(back, registry=registry())
        a = instance["children"]["first"]["parameters"]["p0"]
        b = instance["children"]["second"]["parameters"]["p0"]
        assert a is b  # the same Parameter object for every slot of a shared entry
        assert np.asarray(a.value) is np.asarray(b.value)
        assert_same_value(a.value, tied)
        assert a.learnable is learnable
        assert_same_value(instance["children"]["first"]["parameters"]["p1"].value, other)


@SETTINGS
@given(arrays())
def test_the_same_array_object_in_two_slots_is_one_entry(array: np.ndarray) -> None:
    model = export(Pair(Bag({"p0": array}), Bag({"p3": array})))
    assert len(model.parameters) == 1
    text = trama.dumps(model)
    assert len(json.loads(text)["parameters"]) == 1
    back = trama.loads(text)
    instance = trama.import_model(back, registry=registry())
    assert instance["children"]["first"]["parameters"]["p0"] is instance["children"]["second"]["parameters"]["p3"]


@SETTINGS
@given(arrays())
def test_equal_but_distinct_arrays_are_not_merged(array: np.ndarray) -> None:
    model = export(Pair(Bag({"p0": array}), Bag({"p0": array.copy()})))
    assert len(model.parameters) == 2
    instance = trama.import_model(trama.loads(trama.dumps(model)), registry=registry())
    assert instance["children"]["first"]["parameters"]["p0"] is not instance["children"]["second"]["parameters"]["p0"]


@SETTINGS
@given(arrays())
def test_dumps_is_stable(array: np.ndarray) -> None:
    model = export(Bag({"p0": Param(array, learnable=True), "p1": 3}))
    text = trama.dumps(model)
    assert trama.dumps(trama.loads(text)) == text


@pytest.mark.parametrize("dtype", sorted(NUMPY_DTYPES))
def test_each_dtype_keeps_its_name_and_byte_order(dtype: str) -> None:
    array = np.arange(6).astype(NUMPY_DTYPES[dtype]).reshape(2, 3)
    model = export(Bag({"p0": array}))
    value = json.loads(trama.dumps(model, format_version="1.2"))["parameters"]["root.p0"]["value"]
    assert value["dtype"] == dtype
    assert value["shape"] == [2, 3]
    assert base64.b64decode(value["data"]) == array.astype(array.dtype.newbyteorder("<")).tobytes()


def test_big_endian_arrays_are_stored_little_endian() -> None:
    array = np.array([1.5, -2.0, 3.25], dtype=">f4")
    back = trama.loads(trama.dumps(export(Bag({"p0": array}))))
    decoded = np.asarray(back.parameters["root.p0"].value)
    assert decoded.dtype == np.dtype("<f4")
    assert decoded.tolist() == [1.5, -2.0, 3.25]


def test_zero_dimensional_arrays_stay_zero_dimensional() -> None:
    model = export(Bag({"p0": np.float32(2.5), "p1": np.array(7, dtype="<i8"), "p2": np.bool_(True)}))
    for back in [model, *every_route(model)]:
        for slot in ("p0", "p1", "p2"):
            tensor = back.parameter(back.node("root"), slot).value
            assert isinstance(tensor, trama.Tensor)
            assert tensor.shape == ()
            assert np.asarray(tensor).shape == ()


def test_numpy_float64_scalars_round_trip_as_equal_floats() -> None:
    # numpy.float64 is a subclass of float; it must come back equal (as a plain float).
    model = export(Bag({"p0": np.float64(0.1), "p1": [np.float64(1.5), 2]}))
    back = trama.loads(trama.dumps(model))
    assert back.parameters == model.parameters
    assert type(back.parameters["root.p0"].value) is float


@SETTINGS
@given(st.lists(arrays(), min_size=1, max_size=4), st.text(max_size=30))
def test_dump_writes_exactly_the_text_of_dumps(tensors: list[np.ndarray], note: str) -> None:
    # dump() streams the base64 in after laying the text out; the layout must not depend on that.
    module = Bag({f"p{k}": Param(array, learnable=k % 2 == 0) for k, array in enumerate(tensors)})
    model = trama.export_model(module, inputs=["x"], outputs=["y"], registry=registry(), metadata={"note": note})
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "m.trama.json"
        trama.dump(model, path)
        assert path.read_bytes() == trama.dumps(model).encode("utf-8")


def test_lone_surrogate_escapes_survive_load_and_dump() -> None:
    # JSON may escape a lone surrogate ("\ud800"); such a string is read, and written back escaped.
    model = trama.export_model(Bag({"p0": "VALUE"}), inputs=["x"], outputs=["y"], metadata={"KEY": "META"})
    text = trama.dumps(model).replace("VALUE", "a\\ud800b\\udc80")
    text = text.replace("KEY", "k\\udfff").replace("META", "\\ud83d\\ude00 \\ud83d")
    model = trama.loads(text.encode())
    assert model.parameters["root.p0"].value == "a\ud800b\udc80"
    assert model.metadata["k\udfff"] == "\U0001f600 \ud83d"
    assert trama.loads(trama.dumps(model)).metadata == model.metadata
    with tempfile.TemporaryDirectory() as folder:
        for weights in ("inline", "external"):
            path = Path(folder) / f"{weights}.trama.json"
            trama.dump(model, path, weights=weights)  # type: ignore[arg-type]
            assert b"\\ud800" in path.read_bytes()
            back = trama.load(path)
            assert back.parameters == model.parameters
            assert back.metadata == model.metadata


# --------------------------------------------------------------------------------------------
# The checksum of inline tensors (format 1.2): written by default, over dtype, shape and bytes
# --------------------------------------------------------------------------------------------


def expected_checksum(dtype: str, array: np.ndarray) -> str:
    """The definition of docs/format.md ("Inline tensors"), computed without trama."""
    import xxhash

    header = f"{dtype}[{','.join(str(d) for d in array.shape)}]".encode("ascii")
    return "xxh3-64:" + xxhash.xxh3_64_hexdigest(header + np.ascontiguousarray(array).tobytes())


@pytest.mark.parametrize("version", ["1.2", "1.3"])
@pytest.mark.parametrize("dtype", sorted(NUMPY_DTYPES))
def test_every_inline_tensor_records_the_checksum_of_its_dtype_shape_and_bytes(dtype: str, version: str) -> None:
    arrays = {
        "p0": (np.arange(6) % 2).astype(NUMPY_DTYPES[dtype]).reshape(2, 3),
        "p1": np.zeros((), dtype=NUMPY_DTYPES[dtype]),
        "p2": np.zeros((3, 0), dtype=NUMPY_DTYPES[dtype]),
    }
    model = export(Bag({**arrays, "p3": 7, "p4": [1, 2]}))
    text = trama.dumps(model, format_version=version)
    doc = json.loads(text)
    assert doc["format_version"] == version
    if version == "1.2":
        table = doc["parameters"]
        for slot, array in arrays.items():
            entry = table[f"root.{slot}"]
            assert list(entry) == ["value", "learnable", "checksum"]
            assert entry["checksum"] == expected_checksum(dtype, array)
        assert "checksum" not in table["root.p3"]
        assert "checksum" not in table["root.p4"]
    else:  # each value in its slot; an xxh3-64 checksum as its 16 digits alone
        assert trama.FORMAT_VERSION == "1.3"
        assert "parameters" not in doc
        values = doc["nodes"][0]["set"]
        for slot, array in arrays.items():
            tensor = values[slot]
            assert list(tensor) == [  # the data right after the shape: hashed as it is read
                *(["dtype"] if dtype != "float32" else []),
                "shape",
                "data",
                "checksum",
                "learnable",
            ]
            assert tensor["shape"] == list(array.shape)
            assert "xxh3-64:" + tensor["checksum"] == expected_checksum(dtype, array)
        assert values["p3"] == 7
        assert values["p4"] == [1, 2]
    # read back, the checksums are verified, and writing again gives the same text
    back = trama.loads(text)
    for slot, array in arrays.items():
        assert np.array_equal(np.asarray(back.parameters[f"root.{slot}"].value), array, equal_nan=True)
    assert trama.dumps(back, format_version=version) == text


def test_dump_writes_the_checksums_too_and_external_entries_have_none(tmp_path: Path) -> None:
    model = export(Bag({"p0": np.arange(4, dtype="<i8"), "p1": 1.5}))
    inline = tmp_path / "inline.trama.json"
    trama.dump(model, inline, format_version="1.2")
    entry = json.loads(inline.read_text())["parameters"]["root.p0"]
    assert entry["checksum"] == expected_checksum("int64", np.arange(4, dtype="<i8"))
    external = tmp_path / "external.trama.json"
    trama.dump(model, external, weights="external", format_version="1.2")
    entry = json.loads(external.read_text())["parameters"]["root.p0"]
    assert "checksum" not in entry  # the external reference carries its own
    assert "checksum" in entry["value"]["external"]
    assert np.asarray(trama.load(external).parameters["root.p0"].value).tolist() == [0, 1, 2, 3]
    file_checksum = entry["value"]["external"]["checksum"]

    # Format 1.3: an inline tensor's checksum beside its data; one in the weights file is given
    # by the checksum of its bytes there alone (the file is named once, by the document).
    nested_inline = tmp_path / "nested_inline.trama.json"
    trama.dump(model, nested_inline)
    tensor = json.loads(nested_inline.read_text())["nodes"][0]["set"]["p0"]
    assert "xxh3-64:" + tensor["checksum"] == expected_checksum("int64", np.arange(4, dtype="<i8"))
    nested_external = tmp_path / "nested_external.trama.json"
    trama.dump(model, nested_external, weights="external")
    doc = json.loads(nested_external.read_text())
    tensor = doc["nodes"][0]["set"]["p0"]
    assert "data" not in tensor
    assert "xxh3-64:" + tensor["checksum"] == file_checksum
    assert (tmp_path / doc["weights"]).is_file()
    assert np.asarray(trama.load(nested_external).parameters["root.p0"].value).tolist() == [0, 1, 2, 3]


def test_an_older_document_is_rewritten_with_checksums() -> None:
    model = export(Bag({"p0": np.arange(3, dtype="<f4")}))
    doc = json.loads(trama.dumps(model, format_version="1.2"))
    doc["format_version"] = "1.1"
    del doc["parameters"]["root.p0"]["checksum"]
    old = trama.loads(json.dumps(doc))
    assert old.source_format_version == "1.1"
    rewritten = json.loads(trama.dumps(old, format_version="1.2"))
    assert rewritten["format_version"] == "1.2"
    assert rewritten["parameters"]["root.p0"]["checksum"] == expected_checksum("float32", np.arange(3, dtype="<f4"))
