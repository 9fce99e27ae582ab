"""Sizes that depend on the inputs (``{"size": "seq + 1"}``) and the ranges of the input symbols
(``"symbols"``) in every reader, writer and schema of the format: the nested text of 1.3, the
flat form a 1.3 document expands to, the fast readers against the careful one, the structural
rules, the JSON Schemas, and the 1.2 writer, which refuses them (``docs/format.md``, section 5.6).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from jsonschema import Draft202012Validator

import trama
from trama.errors import SchemaError, TramaError, ValidationError, WriteError
from trama.format import (
    INPUT,
    Model,
    Node,
    Parameter,
    Ref,
    SizeExpr,
    SymbolRange,
    Tensor,
    ValueFact,
    document_problems,
    schema_violations,
    structural_errors,
)
from trama.format._codec import decode_document, encode_document
from trama.format._jsontext import lift_text, parse_json
from trama.format._sizes import MAX_SIZE_TEXT
from trama.format._typed import decode_typed
from trama.format._typed_nested import decode_nested

size = SizeExpr.parse


def _tensor(seed: int, shape: tuple[int, ...]) -> Tensor:
    return Tensor.from_array(np.random.default_rng(seed).standard_normal(shape).astype("float32"))


def reshaping(symbols: dict[str, SymbolRange] | None = None) -> Model:
    """A leaf whose settings are sizes: one alone, two in a list among numbers, one nested in a
    list of lists, and a shared one in the table; the input facts name ``batch`` and ``seq``."""
    return Model(
        inputs=["x"],
        outputs=[Ref("tail", "y")],
        nodes=[
            Node(
                "view",
                "view",
                {"x": Ref(INPUT, "x")},
                ["y"],
                {"shape": "view.shape", "end": "view.end", "pad": "view.pad", "limit": "limit"},
            ),
            Node("tail", "narrow", {"x": Ref("view", "y")}, ["y"], {"length": "limit"}),
        ],
        parameters={
            "view.shape": Parameter([size("batch"), size("seq"), 12, 64]),
            "view.end": Parameter(size("seq + 1")),
            "view.pad": Parameter([[0, size("max(seq, 8) - seq")], []]),
            "limit": Parameter(size("min(seq, 64)")),
        },
        input_facts=[ValueFact("float32", ("batch", "seq", 768))],
        symbols=symbols,
    )


def layers(count: int, ends: list[str] | None = None) -> Model:
    """``count`` equal composites, each a Linear and a leaf with size settings (``ends[i]`` the
    text of layer ``i``'s ``end``, ``"seq - 1"`` unless given)."""
    nodes = [Node("body", "Graph", {"x": Ref(INPUT, "x")}, ["y"], {}, {}, {"class": "demo.Stack"})]
    parameters: dict[str, Parameter] = {}
    previous = Ref(INPUT, "x")
    for i in range(count):
        layer = f"body.layer_{i}"
        nodes.append(
            Node(layer, "Graph", {"x": previous}, ["y"], {}, {"y": Ref(f"{layer}.cut", "y")}, {"class": "demo.Layer"})
        )
        nodes.append(
            Node(
                f"{layer}.fc",
                "Linear",
                {"x": Ref(INPUT, "x")},
                ["y"],
                {slot: f"{layer}.fc.{slot}" for slot in ("in_features", "out_features", "weight")},
            )
        )
        nodes.append(
            Node(
                f"{layer}.cut",
                "view",
                {"x": Ref(f"{layer}.fc", "y")},
                ["y"],
                {"shape": f"{layer}.cut.shape", "end": f"{layer}.cut.end"},
            )
        )
        parameters[f"{layer}.fc.in_features"] = Parameter(4)
        parameters[f"{layer}.fc.out_features"] = Parameter(4)
        parameters[f"{layer}.fc.weight"] = Parameter(_tensor(i, (4, 4)), True)
        parameters[f"{layer}.cut.shape"] = Parameter([size("batch"), size("seq // 2"), 2, 4])
        parameters[f"{layer}.cut.end"] = Parameter(size(ends[i] if ends else "seq - 1"))
        previous = Ref(layer, "y")
    nodes[0].output_bindings = {"y": previous}
    return Model(
        inputs=["x"],
        outputs=[Ref("body", "y")],
        nodes=nodes,
        parameters=parameters,
        input_facts=[ValueFact(None, ("batch", "seq", 4))],
        symbols={"seq": SymbolRange(2, 128)},
    )


def same(a: Model, b: Model) -> None:
    assert (a.inputs, a.outputs, a.nodes) == (b.inputs, b.outputs, b.nodes)
    assert a.parameters == b.parameters
    assert (a.input_facts, a.output_facts, a.symbols, a.metadata, a.opsets) == (
        b.input_facts,
        b.output_facts,
        b.symbols,
        b.metadata,
        b.opsets,
    )


def careful(text: str | bytes) -> Model:
    """The careful reader: the parsed JSON, expanded when nested, decoded by the flat decoder."""
    parsed = parse_json(text.encode() if isinstance(text, str) else text)
    return decode_document(parsed.data, blobs=parsed.blobs)


def careful_error(text: str) -> TramaError:
    with pytest.raises(TramaError) as caught:
        careful(text)
    return caught.value


def loads_error(text: str) -> TramaError:
    with pytest.raises(TramaError) as caught:
        trama.loads(text)
    return caught.value


def _inline(name: str, tensor: Tensor) -> dict[str, Any]:
    return trama.format._serialization._inline_tensor(name, tensor)


def flat_text(model: Model) -> str:
    """The flat form of ``model`` (what a 1.3 document expands to), as JSON text."""
    return json.dumps(encode_document(model, _inline))


# ----- the expression text --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "binding", "value"),
    [
        ("seq", {"seq": 7}, 7),
        ("seq + 1", {"seq": 7}, 8),
        ("batch * seq * 12", {"batch": 2, "seq": 3}, 72),
        ("-seq // 4", {"seq": 7}, -2),  # floor division: toward minus infinity
        ("seq % -4", {"seq": 7}, -1),  # modulo takes the divisor's sign
        ("seq / 2", {"seq": 7}, 3.5),  # true division gives a float
        ("max(seq, 8) - min(seq, 2, 3)", {"seq": 5}, 6),
        ("(seq + 1) * (seq - 1)", {"seq": 4}, 15),
        ("0.5 * seq", {"seq": 4}, 2.0),
        ("  seq+1  ", {"seq": 1}, 2),
        ("12", {}, 12),
    ],
)
def test_an_expression_reads_and_evaluates(text: str, binding: dict[str, int], value: int | float) -> None:
    parsed = size(text)
    assert parsed.evaluate(binding) == value
    assert type(parsed.evaluate(binding)) is type(value)
    assert parsed.symbols == frozenset(binding)
    assert parsed == SizeExpr.parse(text)
    assert parsed.text == text


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("seq +", "ends too early"),
        ("seq 1", "unexpected '1'"),
        ("(seq", "ends too early"),
        ("(seq,", "not closed"),
        ("seq)", "unexpected ')'"),
        ("seq ** 2", "unexpected '*'"),
        ("min seq", "in parentheses"),
        ("max(seq", "ends too early"),
        ("max(seq;", "unexpected"),
        ("seq; import os", "unexpected"),
        ("__import__('os')", "unexpected"),
        ("seq $ 2", "unexpected '$"),
        ("1e5", "unexpected 'e5'"),
        ("x" * (MAX_SIZE_TEXT + 1), f"at most {MAX_SIZE_TEXT} characters"),
        ("(" * 40 + "seq" + ")" * 40, "nests more than 32 levels"),
        ("min(" * 40 + "seq" + ")" * 40, "nests more than 32 levels"),
    ],
)
def test_a_bad_expression_is_a_schema_error_at_its_place(text: str, says: str) -> None:
    with pytest.raises(SchemaError, match=None) as caught:
        SizeExpr.parse(text, "/nodes/3/set/end")
    assert caught.value.location == "/nodes/3/set/end"
    assert says in caught.value.message


@pytest.mark.parametrize("text", [5, 5.0, None, True, ["seq"], {"seq": 1}])
def test_a_text_that_is_not_a_string_is_a_schema_error(text: Any) -> None:
    with pytest.raises(SchemaError) as caught:
        SizeExpr.parse(text, "/nodes/0/set/end")
    assert caught.value.location == "/nodes/0/set/end"


def test_a_chain_of_unary_minus_counts_toward_the_nesting_limit() -> None:
    with pytest.raises(SchemaError, match="nests more than 32"):
        SizeExpr.parse("-" * 100 + "seq", "/a")
    assert SizeExpr.parse("-" * 30 + "seq").evaluate({"seq": 3}) == 3


@pytest.mark.parametrize("text", ["\u0663 + seq", "seq\u00a0+ 1", "s\u00e9q"])
def test_only_ascii_digits_letters_and_spaces_are_read(text: str) -> None:
    with pytest.raises(SchemaError, match="ASCII"):
        SizeExpr.parse(text, "/a")


def test_a_size_is_not_the_number_it_may_equal() -> None:
    assert Parameter(size("3")) != Parameter(3)
    assert Parameter([size("3")]) != Parameter([3])
    assert Parameter(size("seq")) == Parameter(size("seq"))
    assert Parameter(size("seq + 1")) != Parameter(size("seq+1"))  # equal by text


# ----- round trips ----------------------------------------------------------------------------


def test_sizes_round_trip_through_the_nested_text() -> None:
    model = reshaping()
    text = trama.dumps(model)
    doc = json.loads(text)
    view = doc["nodes"][0]
    assert view["set"]["end"] == {"size": "seq + 1"}
    assert view["set"]["shape"] == [{"size": "batch"}, {"size": "seq"}, 12, 64]
    assert view["set"]["pad"] == [[0, {"size": "max(seq, 8) - seq"}], []]
    assert view["set"]["limit"] == {"ref": "limit"}  # shared: in the table, as any setting
    assert doc["parameters"] == {"limit": {"size": "min(seq, 64)"}}
    assert '"end":{"size":"seq + 1"}' in text  # one line, written as the format's layout says
    again = trama.loads(text)
    same(again, model)
    assert isinstance(again.parameters["view.end"].value, SizeExpr)
    assert again.parameters["view.end"].value.evaluate({"seq": 9}) == 10
    assert trama.dumps(again) == text


def test_sizes_round_trip_through_the_flat_form() -> None:
    model = reshaping({"seq": SymbolRange(1, 64)})
    data = encode_document(model, _inline)
    assert data["parameters"]["view.end"] == {"value": {"size": "seq + 1"}, "learnable": False}
    assert data["parameters"]["view.shape"]["value"] == [{"size": "batch"}, {"size": "seq"}, 12, 64]
    assert data["symbols"] == {"seq": {"min": 1, "max": 64}}
    assert list(data).index("symbols") == list(data).index("input_facts") + 1
    decoded = decode_document(json.loads(json.dumps(data)))
    same(decoded, model)
    # the parsed data the decoder read is left as it was: a list holding a size is a new list
    raw = json.loads(json.dumps(data))
    kept = copy.deepcopy(raw)
    decode_document(raw)
    assert raw == kept


def test_a_learnable_size_is_an_entry_spelled_out() -> None:
    model = reshaping()
    model.parameters["view.end"] = Parameter(size("seq + 1"), learnable=True)
    doc = json.loads(trama.dumps(model))
    assert doc["parameters"]["view.end"] == {"value": {"size": "seq + 1"}, "learnable": True}
    same(trama.loads(trama.dumps(model)), model)


def test_equal_layers_with_sizes_are_one_block() -> None:
    model = layers(3)
    text = trama.dumps(model)
    doc = json.loads(text)
    assert list(doc["blocks"]) == ["Layer"]
    assert [layer["use"] for layer in doc["nodes"][0]["nodes"]] == ["Layer"] * 3
    body = doc["blocks"]["Layer"]["nodes"]
    assert body[1]["set"] == {"shape": [{"size": "batch"}, {"size": "seq // 2"}, 2, 4], "end": {"size": "seq - 1"}}
    again = trama.loads(text)
    same(again, model)
    for i in range(3):  # each instance has entries of its own
        assert again.parameters[f"body.layer_{i}.cut.end"].value == size("seq - 1")


def test_layers_whose_sizes_differ_are_not_one_block() -> None:
    model = layers(3, ends=["seq - 1", "seq - 2", "seq - 1"])
    doc = json.loads(trama.dumps(model))
    assert [layer.get("use") for layer in doc["nodes"][0]["nodes"]] == ["Layer", None, "Layer"]
    assert doc["nodes"][0]["nodes"][1]["nodes"][1]["set"]["end"] == {"size": "seq - 2"}
    same(trama.loads(trama.dumps(model)), model)


def test_a_size_and_the_number_it_may_equal_are_not_one_block() -> None:
    model = layers(2)
    model.parameters["body.layer_1.cut.end"] = Parameter(3)
    model.parameters["body.layer_0.cut.end"] = Parameter(size("3"))
    doc = json.loads(trama.dumps(model))
    assert "blocks" not in doc
    same(trama.loads(trama.dumps(model)), model)


def test_symbols_round_trip_in_both_forms_after_the_input_facts() -> None:
    symbols = {"seq": SymbolRange(1, 64), "batch": SymbolRange(max=8), "other": SymbolRange()}
    model = reshaping(symbols)
    model.input_facts = [ValueFact("float32", ("batch", "seq", "other"))]
    text = trama.dumps(model)
    doc = json.loads(text)
    assert doc["symbols"] == {"seq": {"min": 1, "max": 64}, "batch": {"max": 8}, "other": {}}
    assert list(doc).index("symbols") == list(doc).index("input_facts") + 1
    assert list(doc).index("symbols") < list(doc).index("outputs")
    assert '\n"symbols":{"seq":{"min":1,"max":64},"batch":{"max":8},"other":{}},' in text
    same(trama.loads(text), model)
    same(decode_document(json.loads(flat_text(model))), model)


def test_no_symbols_writes_no_member_and_empty_symbols_stay_empty() -> None:
    model = reshaping()
    assert "symbols" not in json.loads(trama.dumps(model))
    assert trama.loads(trama.dumps(model)).symbols is None
    model.symbols = {}
    assert json.loads(trama.dumps(model))["symbols"] == {}
    assert trama.loads(trama.dumps(model)).symbols == {}


def test_a_model_with_sizes_dumps_and_loads_through_a_file(tmp_path: Path) -> None:
    model = layers(2)
    for weights in ("inline", "external"):
        path = tmp_path / f"{weights}.trama.json"
        trama.dump(model, path, weights=weights)
        same(trama.load(path), model)
        assert document_problems(path.read_bytes(), tmp_path) == []


# ----- format 1.2 cannot hold them ------------------------------------------------------------


def test_the_1_2_writer_refuses_a_size(tmp_path: Path) -> None:
    model = reshaping()
    with pytest.raises(WriteError, match=r"format 1\.2 has no sizes") as caught:
        trama.dumps(model, format_version="1.2")
    assert caught.value.location is not None
    assert caught.value.location.startswith("/parameters/view.")
    path = tmp_path / "model.trama.json"
    with pytest.raises(WriteError, match=r"write this model in format 1\.3"):
        trama.dump(model, path, format_version="1.2")
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []


def test_the_1_2_writer_refuses_symbols(tmp_path: Path) -> None:
    model = reshaping({"seq": SymbolRange(1, 2)})
    for entry in model.parameters.values():
        entry.value = 1
    with pytest.raises(WriteError, match="'symbols'") as caught:
        trama.dumps(model, format_version="1.2")
    assert caught.value.location == "/symbols"
    with pytest.raises(WriteError):
        trama.dump(model, tmp_path / "a.trama.json", weights="external", format_version="1.2")
    assert list(tmp_path.iterdir()) == []


def test_the_1_2_writer_still_writes_a_model_without_them() -> None:
    model = reshaping()
    for entry in model.parameters.values():
        entry.value = 2
    same(trama.loads(trama.dumps(model, format_version="1.2")), model)


# ----- structural rules -----------------------------------------------------------------------


def test_a_size_reading_a_symbol_no_input_fact_names_is_a_validation_error() -> None:
    model = reshaping()
    model.parameters["view.end"] = Parameter(size("seqq + 1"))
    model.parameters["view.shape"] = Parameter([size("batch"), size("heads * 2")])
    errors = structural_errors(model)
    assert [(error.location, error.node_id) for error in errors] == [
        ("/nodes/0/parameters/shape", "view"),
        ("/nodes/0/parameters/end", "view"),
    ]
    assert all(isinstance(error, ValidationError) for error in errors)
    assert "slot 'shape'" in errors[0].message
    assert "'heads'" in errors[0].message
    assert "slot 'end'" in errors[1].message
    assert "'seqq'" in errors[1].message
    with pytest.raises(ValidationError):
        trama.dumps(model)


def test_a_shared_size_is_checked_at_every_slot_that_names_it() -> None:
    model = reshaping()
    model.parameters["limit"] = Parameter(size("min(len, 64)"))
    errors = structural_errors(model)
    assert [(error.location, error.node_id) for error in errors] == [
        ("/nodes/0/parameters/limit", "view"),
        ("/nodes/1/parameters/length", "tail"),
    ]


def test_sizes_need_input_facts_that_name_their_symbols() -> None:
    model = reshaping()
    model.input_facts = None
    assert len(structural_errors(model)) == 6  # shape: batch and seq; end; pad; limit, at both its slots
    model.input_facts = [ValueFact("float32", ("batch", "seq", 768))]
    model.output_facts = [ValueFact(None, ("other",))]
    assert structural_errors(model) == []
    model.parameters["view.end"] = Parameter(size("other"))  # an output fact's symbol is not bound
    assert len(structural_errors(model)) == 1


def test_a_size_built_without_parsing_is_checked_by_its_text() -> None:
    model = reshaping()
    model.parameters["view.end"] = Parameter(SizeExpr("seq +"))
    (error,) = structural_errors(model)
    assert error.location == "/nodes/0/parameters/end"
    assert "does not parse" in error.message
    model.parameters["view.end"] = Parameter(SizeExpr("ghost"))  # no symbols recorded: parsed here
    (error,) = structural_errors(model)
    assert "'ghost'" in error.message


def test_an_undeclared_symbol_in_a_document_is_located_in_its_node() -> None:
    text = trama.dumps(reshaping()).replace('"seq + 1"', '"seqq + 1"')
    error = loads_error(text)
    assert isinstance(error, ValidationError)
    assert error.location == "/nodes/0/set/end"
    assert error.node_id == "view"
    assert "'seqq'" in error.message
    doc = json.loads(trama.dumps(layers(2)))
    doc["blocks"]["Layer"]["nodes"][1]["set"]["end"] = {"size": "ghost"}
    error = loads_error(json.dumps(doc))
    assert error.location == "/blocks/Layer/nodes/1/set/end"
    assert "in block instance 'body.layer_0'" in error.message


@pytest.mark.parametrize(
    ("symbols", "location", "says"),
    [
        ({"heads": SymbolRange(1, 2)}, "/symbols/heads", "named by no input fact"),
        ({"seq": SymbolRange(5, 3)}, "/symbols/seq", "min 5 greater than max 3"),
        ({"seq": SymbolRange(-1, 3)}, "/symbols/seq/min", "integer from 0"),
        ({"seq": SymbolRange(True, 3)}, "/symbols/seq/min", "integer from 0"),
        ({"seq": SymbolRange(1, 2.0)}, "/symbols/seq/max", "integer from 0"),  # type: ignore[arg-type]
        ({"seq": SymbolRange(1, 2**63)}, "/symbols/seq/max", "integer from 0"),
        ({"min": SymbolRange()}, "/symbols/min", "not a symbol name"),
        ({"seq": (1, 2)}, "/symbols/seq", "SymbolRange"),
    ],
)
def test_bad_symbols_are_validation_errors(symbols: Any, location: str, says: str) -> None:
    model = reshaping(symbols)
    model.input_facts = [ValueFact("float32", ("batch", "seq", "min"))]
    errors = structural_errors(model)
    assert [error.location for error in errors] == [location]
    assert says in errors[0].message
    with pytest.raises(ValidationError):
        trama.dumps(model)


def test_symbols_of_a_document_are_checked_against_its_input_facts() -> None:
    model = reshaping({"seq": SymbolRange(1, 64)})
    text = trama.dumps(model)
    error = loads_error(text.replace('"symbols":{"seq"', '"symbols":{"heads"'))
    assert isinstance(error, ValidationError)
    assert error.location == "/symbols/heads"
    error = loads_error(text.replace('"min":1,"max":64', '"min":65,"max":64'))
    assert isinstance(error, ValidationError)
    assert error.location == "/symbols/seq"
    flat = flat_text(model)
    error = loads_error(flat.replace('"symbols": {"seq"', '"symbols": {"heads"'))
    assert isinstance(error, ValidationError)
    assert error.location == "/symbols/heads"


# ----- reading bad documents --------------------------------------------------------------------

BAD_SIZES: list[tuple[Any, str, str]] = [
    # (what replaces {"size": "seq + 1"} at /nodes/0/set/end, where the error is, what it says)
    ({"size": 5}, "", "got int"),
    ({"size": None}, "", "got NoneType"),
    ({"size": ["seq"]}, "", "got list"),
    ({"size": "a", "x": 1}, "", "no other member"),
    ({"size": "seq", "shape": [2]}, "", "no other member"),
    ({"size": "seq +"}, "", "ends too early"),
    ({"size": ""}, "", "empty"),
    ({"size": "x" * 10_000}, "", f"at most {MAX_SIZE_TEXT} characters"),
    ({"size": "(" * 200 + "seq" + ")" * 200}, "", "nests more than 32"),
    ({"size": "min(" * 40 + "seq" + ")" * 40}, "", "nests more than 32"),
    ({"size": "seq \u0000 1"}, "", "unexpected"),
]


def _with_end(text: str, value: Any) -> str:
    doc = json.loads(text)
    doc["nodes"][0]["set"]["end"] = value
    return json.dumps(doc)


@pytest.mark.parametrize(("value", "rest", "says"), BAD_SIZES)
def test_a_bad_size_in_a_nested_document_is_a_schema_error_at_the_value(value: Any, rest: str, says: str) -> None:
    text = _with_end(trama.dumps(reshaping()), value)
    assert decode_nested(lift_text(text.encode()), None) is None  # the careful reader says why
    for error in (loads_error(text), careful_error(text)):
        assert isinstance(error, SchemaError)
        assert error.location == "/nodes/0/set/end" + rest
        assert says in error.message


@pytest.mark.parametrize(("value", "rest", "says"), BAD_SIZES)
def test_a_bad_size_in_a_list_or_the_flat_form_is_a_schema_error_at_the_value(value: Any, rest: str, says: str) -> None:
    doc = json.loads(trama.dumps(reshaping()))
    doc["nodes"][0]["set"]["shape"][1] = value
    text = json.dumps(doc)
    error = loads_error(text)
    assert isinstance(error, SchemaError)
    assert error.location == "/nodes/0/set/shape/1"
    assert says in error.message
    flat = json.loads(flat_text(reshaping()))
    flat["parameters"]["view.end"]["value"] = value
    flat["parameters"]["view.pad"]["value"][0][1] = value
    text = json.dumps(flat)
    assert decode_typed(lift_text(text.encode()), None) is None
    error = loads_error(text)
    assert isinstance(error, SchemaError)
    assert says in error.message
    assert error.location in ("/parameters/view.end/value", "/parameters/view.pad/value/0/1")


def test_an_object_in_a_list_that_is_no_size_is_refused() -> None:
    doc = json.loads(trama.dumps(reshaping()))
    doc["nodes"][0]["set"]["shape"][1] = {"seq": 1}
    error = loads_error(json.dumps(doc))
    assert isinstance(error, SchemaError)
    assert error.location == "/nodes/0/set/shape/1"
    assert "sizes" in error.message


@pytest.mark.parametrize(
    ("symbols", "location"),
    [
        ([], "/symbols"),
        (None, "/symbols"),
        ({"seq": 3}, "/symbols/seq"),
        ({"seq": {"min": 1, "most": 2}}, "/symbols/seq"),
        ({"seq": {"min": 1.0}}, "/symbols/seq/min"),
        ({"seq": {"min": True}}, "/symbols/seq/min"),
        ({"seq": {"max": -1}}, "/symbols/seq/max"),
        ({"seq": {"max": None}}, "/symbols/seq/max"),
        ({"seq": {"max": 2**63}}, "/symbols/seq/max"),
    ],
)
def test_malformed_symbols_are_schema_errors_in_both_forms(symbols: Any, location: str) -> None:
    doc = json.loads(trama.dumps(reshaping()))
    doc["symbols"] = symbols
    error = loads_error(json.dumps(doc))
    assert isinstance(error, SchemaError)
    assert error.location == location
    flat = json.loads(flat_text(reshaping()))
    flat["symbols"] = symbols
    text = json.dumps(flat)
    assert decode_typed(lift_text(text.encode()), None) is None
    error = loads_error(text)
    assert isinstance(error, SchemaError)
    assert error.location == location


def test_a_repeated_key_in_symbols_is_refused_by_both_readers() -> None:
    text = trama.dumps(reshaping({"seq": SymbolRange(1, 64)}))
    repeated = text.replace('"min":1,"max":64', '"min":1,"max":64,"max":65')
    assert decode_nested(lift_text(repeated.encode()), None) is None
    with pytest.raises(TramaError, match="appears twice"):
        trama.loads(repeated)


# ----- the fast readers agree with the careful one ----------------------------------------------


def _comparable(model: Model) -> Any:
    tensors = {
        name: (entry.learnable, np.asarray(entry.value).tobytes() if isinstance(entry.value, Tensor) else entry.value)
        for name, entry in model.parameters.items()
    }
    return (model.inputs, model.outputs, model.nodes, tensors, model.input_facts, model.symbols)


@pytest.mark.parametrize(
    "model",
    [reshaping(), reshaping({"seq": SymbolRange(1, 64), "batch": SymbolRange()}), layers(1)],
    ids=["sizes", "sizes-and-symbols", "layer"],
)
def test_the_fast_nested_reader_reads_sizes_as_the_careful_one(model: Model) -> None:
    text = trama.dumps(model).encode()
    fast = decode_nested(lift_text(text), None)
    assert fast is not None  # sizes and symbols are read fast, not declined
    assert _comparable(fast) == _comparable(careful(text)) == _comparable(model)
    assert structural_errors(fast) == []


def test_the_fast_flat_reader_reads_sizes_as_the_careful_one() -> None:
    model = reshaping({"seq": SymbolRange(1, 64)})
    text = flat_text(model).encode()
    typed = decode_typed(lift_text(text), None)
    assert typed is not None
    fast, sound = typed
    assert sound
    assert _comparable(fast) == _comparable(careful(text)) == _comparable(model)


def test_the_fast_readers_leave_a_broken_rule_to_validation() -> None:
    model = reshaping({"seq": SymbolRange(1, 64)})
    flat = flat_text(model).replace('"seq + 1"', '"ghost + 1"').encode()
    typed = decode_typed(lift_text(flat), None)
    assert typed is not None
    assert typed[1] is False
    flat = flat_text(model).replace('"symbols": {"seq"', '"symbols": {"ghost"').encode()
    typed = decode_typed(lift_text(flat), None)
    assert typed is not None
    assert typed[1] is False
    nested = trama.dumps(model).replace('"seq + 1"', '"ghost + 1"').encode()
    assert decode_nested(lift_text(nested), None) is None


# ----- the JSON Schemas -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nested_schema() -> Draft202012Validator:
    return Draft202012Validator(trama.json_schema())


@pytest.fixture(scope="module")
def flat_schema() -> Draft202012Validator:
    return Draft202012Validator(trama.json_schema("1.2"))


def test_both_schemas_accept_sizes_and_symbols(
    nested_schema: Draft202012Validator, flat_schema: Draft202012Validator
) -> None:
    for model in (reshaping({"seq": SymbolRange(1, 64), "batch": SymbolRange()}), layers(2)):
        text = trama.dumps(model)
        assert list(nested_schema.iter_errors(json.loads(text))) == []
        assert schema_violations(parse_json(text.encode())) == []
        flat = flat_text(model)
        assert list(flat_schema.iter_errors(json.loads(flat))) == []
        assert schema_violations(parse_json(flat.encode())) == []


@pytest.mark.parametrize(
    ("value", "where", "says"),
    [
        ({"size": 5}, "/size", "is not of type 'string'"),
        ({"size": "a", "x": 1}, "", "'x' was unexpected"),
        ({"size": ""}, "/size", "should be non-empty"),
        ({"size": "x" * (MAX_SIZE_TEXT + 1)}, "/size", "is too long"),
    ],
)
def test_both_schemas_refuse_a_malformed_size(
    nested_schema: Draft202012Validator, value: Any, where: str, says: str
) -> None:
    model = reshaping()
    doc = json.loads(_with_end(trama.dumps(model), value))
    assert list(nested_schema.iter_errors(doc))
    problems = schema_violations(parse_json(json.dumps(doc).encode()))
    assert [problem.location for problem in problems] == ["/nodes/0/set/end" + where]
    assert says in problems[0].message
    doc = json.loads(trama.dumps(model))
    doc["nodes"][0]["set"]["shape"][0] = value  # in a list
    problems = schema_violations(parse_json(json.dumps(doc).encode()))
    assert [problem.location for problem in problems] == ["/nodes/0/set/shape/0" + where]
    flat = json.loads(flat_text(model))
    flat["parameters"]["view.pad"]["value"][0][1] = value
    problems = schema_violations(parse_json(json.dumps(flat).encode()))
    assert [problem.location for problem in problems] == ["/parameters/view.pad/value/0/1" + where]
    assert says in problems[0].message


@pytest.mark.parametrize(
    "symbols",
    [[], {"seq": 3}, {"seq": {"least": 1}}, {"seq": {"min": -1}}, {"seq": {"max": "64"}}, {"min": {}}, {"a b": {}}],
)
def test_both_schemas_refuse_malformed_symbols(
    nested_schema: Draft202012Validator, flat_schema: Draft202012Validator, symbols: Any
) -> None:
    model = reshaping()
    doc = json.loads(trama.dumps(model))
    doc["symbols"] = symbols
    assert list(nested_schema.iter_errors(doc))
    assert schema_violations(parse_json(json.dumps(doc).encode()))
    flat = json.loads(flat_text(model))
    flat["symbols"] = symbols
    assert list(flat_schema.iter_errors(flat))
    assert schema_violations(parse_json(json.dumps(flat).encode()))


def test_trama_validate_reports_a_bad_size_where_it_is(tmp_path: Path) -> None:
    text = trama.dumps(reshaping()).replace('"seq + 1"', '"seq +"').encode()
    problems = document_problems(text, tmp_path)
    assert [(problem.location, "ends too early" in problem.message) for problem in problems] == [
        ("/nodes/0/set/end", True)
    ]
    text = trama.dumps(reshaping()).replace('"seq + 1"', '"ghost"').encode()
    problems = document_problems(text, tmp_path)
    assert [(problem.location, problem.node) for problem in problems] == [("/nodes/0/set/end", "view")]
