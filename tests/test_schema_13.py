"""trama.json_schema(): the JSON Schema of format 1.3, the nested text (nodes nested under their
parents, blocks and their instances, settings and tensors written in their nodes, references as
strings). Every document the test suite's fixtures hold, written again by trama.dumps, satisfies
it; written with format_version="1.2", the flat schema (json_schema(format_version="1.2"), tested
in tests/test_schema.py) accepts it. Documents of the wrong shape are refused, and trama's own
schema pass (trama validate) reports what one jsonschema run over the whole document reports,
located by JSON pointers into the nested text.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import random
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from jsonschema import Draft202012Validator

import trama
from trama import INPUT, Model, Node, Parameter, Ref, Tensor, ValueFact
from trama.format import document_problems, schema_violations
from trama.format._jsontext import parse_json
from trama.format._names import NAME, is_op_name
from trama.format._problems import _compiled, _document_order, _pointer, _specific_errors
from trama.format._schema import nested_version

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "tests"
FIXTURES = SUITE / "fixtures"
for _folder in (REPO / "demo", SUITE):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

from json_edits import random_edit  # noqa: E402
from reliability.fuzz_documents import build_seeds  # noqa: E402

Doc = dict[str, Any]


def suite_conftest() -> ModuleType:
    """The core suite's conftest (its make_doc document and toy MLP), loaded under a name of its
    own: this folder is not under it."""
    spec = importlib.util.spec_from_file_location("_trama_suite_conftest", SUITE / "conftest.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def deep_stack(work: Callable[[], Any]) -> Any:
    """``work()`` on a thread with room to recurse: jsonschema walks a tree nested hundreds deep
    (tests/fixtures/legacy/deep is 301 levels) one Python frame after another."""
    result: dict[str, Any] = {}

    def run() -> None:
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(100_000)
        try:
            result["value"] = work()
        except BaseException as exc:  # raised again on the caller's thread
            result["error"] = exc
        finally:
            sys.setrecursionlimit(limit)

    size = threading.stack_size(512 << 20)
    try:
        thread = threading.Thread(target=run)
        thread.start()
    finally:
        threading.stack_size(size)
    thread.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


@pytest.fixture(scope="module")
def nested() -> Draft202012Validator:
    schema = trama.json_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


@pytest.fixture(scope="module")
def flat() -> Draft202012Validator:
    return Draft202012Validator(trama.json_schema(format_version="1.2"))


def errors_of(validator: Draft202012Validator, doc: Any) -> list[str]:
    """What one jsonschema run over the whole document reports."""
    found: list[str] = deep_stack(
        lambda: [f"/{'/'.join(map(str, error.absolute_path))}: {error.message}" for error in validator.iter_errors(doc)]
    )
    return found


def violations(doc: Any) -> list[str]:
    """What trama's schema pass (trama validate) reports."""
    return [str(problem) for problem in schema_violations(parse_json(json.dumps(doc)))]


# --------------------------------------------------------------------------------------------
# The schema itself
# --------------------------------------------------------------------------------------------


def test_the_schema_is_the_current_formats_and_a_valid_draft_2020_12_schema() -> None:
    schema = trama.json_schema()
    assert trama.FORMAT_VERSION == "1.3"
    assert schema == trama.json_schema(format_version="1.3")
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"].endswith("format-1.3.json")
    Draft202012Validator.check_schema(schema)
    assert json.loads(json.dumps(schema, allow_nan=False)) == schema  # plain JSON
    version = Draft202012Validator({"type": "string", **schema["properties"]["format_version"]})
    assert [v for v in ("1.0", "1.2", "1.3", "1.4", "2.3", "1.3 ") if version.is_valid(v)] == ["1.3"]
    assert schema["required"] == ["format_version", "inputs", "outputs", "nodes"]


def test_the_schema_is_a_fresh_copy() -> None:
    schema = trama.json_schema()
    schema["$defs"]["node"].clear()
    schema["$defs"]["tensor"]["properties"].clear()
    assert trama.json_schema()["$defs"]["node"]
    assert trama.json_schema()["$defs"]["tensor"]["properties"]
    assert trama.json_schema(format_version="1.2")["$defs"]["tensor"]["properties"]


@pytest.mark.parametrize("version", ["0.2", "1.4", "2.0", "", "1.3.0"])
def test_only_known_versions_have_a_schema(version: str) -> None:
    with pytest.raises(ValueError, match="format_version must be one of"):
        trama.json_schema(format_version=version)


def test_the_schema_knows_every_dtype() -> None:
    from trama.format import DTYPE_NAMES

    defs = trama.json_schema()["$defs"]
    for form in ("own_tensor", "own_tensor_in_block", "tensor", "external_tensor"):
        assert defs[form]["properties"]["dtype"]["enum"] == list(DTYPE_NAMES), form


NAME_SAMPLES = [
    "Linear",
    "conv1d",
    "lenses.ThinLens",
    "_private",
    "0",
    "1x",
    "acme.2d",
    "x" * 256,
    "x" * 257,
    "",
    ".",
    "a.",
    ".a",
    "a..b",
    "a.b.c",
    "a b",
    "a-b",
    "é",
    "Linear\n",
    "%x",
    "%x.y",
    "%",
    "%%x",
    "a/b",
]
CHECKSUMS = {
    "0123456789abcdef": True,
    "xxh3-64:0123456789abcdef": True,
    "sha256:" + "0" * 64: True,
    "0123456789ABCDEF": False,  # the readers compare ignoring case; the schema wants lowercase
    "0123456789abcde": False,
    "0123456789abcdef0": False,
    "xxh3-64:0123456789abcde": False,
    "sha256:" + "0" * 16: False,
    "sha256:" + "0" * 63: False,
    "md5:" + "0" * 32: False,
    "0123456789abcdef\n": False,
    "": False,
}


def test_the_schema_patterns_say_what_trama_reads() -> None:
    schema = trama.json_schema()
    defs = schema["$defs"]

    def accepts(member: dict[str, Any], text: str) -> bool:
        # `$` as JSON Schema reads it: the end of the string (trama validate reads it so too)
        length_ok = len(text) >= member.get("minLength", 0) and len(text) <= member.get("maxLength", len(text))
        return length_ok and _compiled(member["pattern"]).search(text) is not None

    leaf = defs["leaf"]["properties"]
    for text in NAME_SAMPLES:
        name_ok = bool(NAME.match(text))
        assert accepts(leaf["name"], text) == name_ok, text
        assert accepts(leaf["out"]["items"], text) == name_ok, text
        assert accepts(defs["instance"]["properties"]["use"], text) == name_ok, text
        assert accepts({"pattern": schema["properties"]["blocks"]["propertyNames"]["pattern"]}, text) == name_ok
        assert accepts(leaf["op"], text) == is_op_name(text), text
        head, dot, tail = text.partition(".")
        reference_ok = (text.startswith("%") and bool(NAME.match(text[1:]))) or (
            bool(NAME.match(head)) and (not dot or bool(NAME.match(tail)))
        )
        assert accepts(defs["ref"], text) == reference_ok, text
    for text, ok in CHECKSUMS.items():
        assert accepts(defs["own_tensor"]["properties"]["checksum"], text) == ok, text
        assert accepts(defs["own_tensor_in_block"]["properties"]["checksum"], text) == ok, text
        assert accepts(defs["instance_tensor"]["anyOf"][0], text) == ok, text
        assert accepts(defs["instance_tensor"]["anyOf"][1]["properties"]["checksum"], text) == ok, text
        # a 1.2 external reference (in 1.3 too) spells the algorithm out
        external = defs["own_tensor"]["properties"]["external"]["properties"]["checksum"]
        assert accepts(external, text) == (ok and ":" in text), text


def test_nested_versions() -> None:
    assert [nested_version(v) for v in ("1.3", "1.4", "1.2", "1.0", "0.3", "2.3", None, 1.3, "1.x", "١.٣")] == [
        True,
        True,
        False,
        False,
        False,
        False,
        False,
        False,
        False,
        False,
    ]


# --------------------------------------------------------------------------------------------
# Every document of the suite's fixtures, written again
# --------------------------------------------------------------------------------------------


def tensor(shape: tuple[int, ...], start: float = 0.0, dtype: Any = np.float32) -> Tensor:
    return Tensor.from_array((np.arange(int(np.prod(shape))) + start).astype(dtype).reshape(shape))


def stack_model() -> Model:
    """A stack of three equal layers (a block) whose two sub-blocks are equal too (a block used
    by a block), a top-level leaf with settings of every value form, a shared table entry, a
    learnable setting, a calling node, and every optional member of a document."""
    x = Ref(INPUT, "x")
    nodes = [Node("stack", "Graph", {"x": x}, ["y"], {}, {"y": Ref("stack.l2", "y")}, {"class": "zoo.Stack"})]
    table = {"dims.k": Parameter(4, learnable=False), "shared.w": Parameter(tensor((2,), 9.0))}
    previous = x
    for i in range(3):
        layer = f"stack.l{i}"
        bindings = {"y": Ref(f"{layer}.mlp_b", "y")}
        nodes.append(
            Node(layer, "Graph", {"x": previous}, ["y"], {"eps": f"{layer}.eps"}, bindings, {"class": "zoo.Layer"})
        )
        table[f"{layer}.eps"] = Parameter(1e-5, learnable=False)
        nodes.append(
            Node(f"{layer}.fc", "Tag", {"x": x}, ["y"], {"w": f"{layer}.fc.w", "k": "dims.k", "t": "shared.w"})
        )
        table[f"{layer}.fc.w"] = Parameter(tensor((2, 2), i), learnable=True)
        source = Ref(f"{layer}.fc", "y")
        for half in ("a", "b"):
            mlp = f"{layer}.mlp_{half}"
            bindings = {"y": Ref(f"{mlp}.act", "y")}
            nodes.append(Node(mlp, "Graph", {"x": source}, ["y"], {}, bindings, {"class": "zoo.MLP", "note": 1}))
            nodes.append(Node(f"{mlp}.act", "Tag", {"x": x}, ["y"], {"b": f"{mlp}.act.b"}))
            table[f"{mlp}.act.b"] = Parameter(tensor((3,), i, np.int64))
            source = Ref(mlp, "y")
        previous = Ref(layer, "y")
    slots = {"w": "head.w", "rate": "head.rate", "scale": "head.scale", "none": "head.none"}
    metadata = {"class": "zoo.Head", "source": "zoo.py:1"}
    nodes.append(Node("head", "Tag", {"x": Ref("stack", "y")}, ["y", "aux"], slots, metadata=metadata))
    table["head.w"] = Parameter(tensor((2,), 0.5, np.float16))
    table["head.rate"] = Parameter(0.1, learnable=True)
    table["head.scale"] = Parameter([1, [2.5, None], "s"], learnable=False)
    table["head.none"] = Parameter(None, learnable=False)
    nodes.append(Node("again", "Tag", {"x": Ref("head", "aux")}, ["y", "aux"], calls="head"))
    return Model(
        ["x"],
        [Ref("again", "y"), Ref("head", "aux")],
        nodes,
        table,
        metadata={"description": "every member"},
        opsets={"trama": 1, "zoo": 2},
        input_facts=[ValueFact("float32", ("batch", 2))],
        output_facts=[None, ValueFact(shape=(2,))],
    )


@pytest.fixture(scope="module")
def fixture_models(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, Model]]:
    """Every document the suite's fixtures hold, as models: the files of tests/fixtures, the
    conftest's document and toy MLP, the fuzz seeds, and the stack above."""
    conftest = suite_conftest()
    models = [(str(path.relative_to(FIXTURES)), trama.load(path)) for path in sorted(FIXTURES.rglob("*.trama.json"))]
    assert len(models) >= 10
    models.append(("conftest make_doc", trama.loads(json.dumps(conftest._BASE_DOC))))
    mlp = conftest.toylayers.mlp([4, 3, 2], seed=0)
    models.append(
        (
            "conftest mlp_model",
            trama.export_model(mlp, inputs=["x"], outputs=["y"], registry=conftest.toylayers.registry()),
        )
    )
    for seed in build_seeds(tmp_path_factory.mktemp("seeds"), with_torch=False):
        models.append((f"seed {seed.name}", trama.load(seed.path)))
    models.append(("stack", stack_model()))
    return models


def test_every_fixture_rewritten_in_1_3_validates(nested: Draft202012Validator, fixture_models: Any) -> None:
    kinds: set[str] = set()
    for name, model in fixture_models:
        text = trama.dumps(model)
        doc = json.loads(text)
        assert doc["format_version"] == "1.3"
        kinds.update(key for key in ("blocks", "parameters") if key in doc)
        assert errors_of(nested, doc) == [], name
        assert violations(doc) == [], name  # trama validate's pass walks the tree without recursion
    assert kinds == {"blocks", "parameters"}  # the fixtures reach every part of the format


def test_every_fixture_rewritten_in_1_2_validates_against_the_flat_schema(
    flat: Draft202012Validator, nested: Draft202012Validator, fixture_models: Any
) -> None:
    for name, model in fixture_models:
        doc = json.loads(trama.dumps(model, format_version="1.2"))
        assert doc["format_version"] == "1.2"
        assert errors_of(flat, doc) == [], name
        assert violations(doc) == [], name
        assert errors_of(nested, doc) != [], name  # each schema is for its own shape


@pytest.mark.parametrize("weights", ["inline", "external"])
def test_written_files_validate_and_trama_validate_finds_nothing(
    nested: Draft202012Validator, tmp_path: Path, weights: Any
) -> None:
    path = tmp_path / "stack.trama.json"
    trama.dump(stack_model(), path, weights=weights)
    doc = json.loads(path.read_text())
    assert ("weights" in doc) == (weights == "external")
    instances = [node for node in doc["nodes"][0]["nodes"] if "use" in node]
    assert len(instances) == 3
    assert all(type(fill) is (str if weights == "external" else dict) for node in instances for fill in node["tensors"])
    assert errors_of(nested, doc) == []
    assert document_problems(path.read_bytes(), tmp_path) == []


def test_a_tensor_in_a_1_2_external_reference_validates(nested: Draft202012Validator, tmp_path: Path) -> None:
    path = tmp_path / "stack.trama.json"
    trama.dump(stack_model(), path, weights="external")
    doc = json.loads(path.read_text())
    w = doc["nodes"][1]["set"]["w"]
    w["external"] = {"path": doc["weights"], "key": "head.w", "checksum": "xxh3-64:" + w.pop("checksum")}
    assert errors_of(nested, doc) == []
    path.write_text(json.dumps(doc))
    assert document_problems(path.read_bytes(), tmp_path) == []


# --------------------------------------------------------------------------------------------
# Documents of the wrong shape
# --------------------------------------------------------------------------------------------


def stack_doc() -> Doc:
    doc: Doc = json.loads(trama.dumps(stack_model()))
    return doc


def instance(doc: Doc, k: int = 0) -> Doc:
    node: Doc = doc["nodes"][0]["nodes"][k]
    return node


def body(doc: Doc, block: str = "Layer", k: int = 0) -> Doc:
    node: Doc = doc["blocks"][block]["nodes"][k]
    return node


def head(doc: Doc) -> Doc:
    node: Doc = doc["nodes"][1]
    return node


def renamed_block(doc: Doc) -> None:
    doc["blocks"]["La.yer"] = doc["blocks"].pop("Layer")
    for node in doc["nodes"][0]["nodes"]:
        node["use"] = "La.yer"


#: (name, edit, where trama validate reports the first problem, whether trama.loads refuses it too)
INVALID: list[tuple[str, Callable[[Doc], Any], str, bool]] = [
    # unknown members
    ("unknown-top-level-member", lambda d: d.update(extra=1), "/", True),
    ("unknown-node-member", lambda d: head(d).update(extra=1), "/nodes/1", True),
    ("unknown-composite-member", lambda d: d["nodes"][0].update(extra=1), "/nodes/0", True),
    ("unknown-instance-member", lambda d: instance(d).update(extra=1), "/nodes/0/nodes/0", True),
    ("unknown-block-member", lambda d: d["blocks"]["Layer"].update(extra=1), "/blocks/Layer", True),
    ("unknown-tensor-member", lambda d: head(d)["set"]["w"].update(extra=1), "/nodes/1/set/w", True),
    ("unknown-body-tensor-member", lambda d: body(d)["set"]["w"].update(extra=1), "/blocks/Layer/nodes/0/set/w", True),
    ("flat-node-members", lambda d: head(d).update(id="head", parent=None), "/nodes/1", True),
    # names
    ("name-with-a-dot", lambda d: head(d).update(name="he.ad"), "/nodes/1/name", True),
    ("child-name-with-a-dot", lambda d: instance(d, 1).update(name="l.1"), "/nodes/0/nodes/1/name", True),
    ("body-name-with-a-dot", lambda d: body(d).update(name="f.c"), "/blocks/Layer/nodes/0/name", True),
    ("name-missing", lambda d: head(d).pop("name"), "/nodes/1", True),
    ("use-with-a-dot", lambda d: instance(d).update(use="zoo.Layer"), "/nodes/0/nodes/0/use", True),
    ("block-name-with-a-dot", renamed_block, "/blocks", True),
    ("output-name-twice", lambda d: head(d).update(out=["y", "y"]), "/nodes/1/out", True),
    ("port-name", lambda d: head(d).update(**{"in": {"a b": "stack"}}), "/nodes/1/in", True),
    ("op-with-a-space", lambda d: head(d).update(op="T ag"), "/nodes/1/op", True),
    ("op-digit-segment", lambda d: head(d).update(op="zoo.2d"), "/nodes/1/op", True),
    ("class-empty", lambda d: head(d).update({"class": ""}), "/nodes/1/class", True),
    ("input-name", lambda d: d.update(inputs=["a.b"]), "/inputs/0", True),
    ("entry-name", lambda d: d["parameters"].update({"a b": 1}), "/parameters", True),
    # the three kinds of node
    ("instance-with-op", lambda d: instance(d).update(op="Graph"), "/nodes/0/nodes/0", True),
    ("instance-with-nodes", lambda d: instance(d).update(nodes=[]), "/nodes/0/nodes/0", True),
    ("instance-with-set", lambda d: instance(d).update(set={"eps": 1}), "/nodes/0/nodes/0", True),
    ("tensors-in-a-body-instance", lambda d: body(d, k=1).update(tensors=[]), "/blocks/Layer/nodes/1", True),
    ("leaf-without-op", lambda d: head(d).pop("op"), "/nodes/1", True),
    ("composite-without-out", lambda d: d["nodes"][0].pop("out"), "/nodes/0", True),
    ("composite-with-calls", lambda d: d["nodes"][0].update(calls="head"), "/nodes/0", True),
    ("calling-node-with-set", lambda d: d["nodes"][2].update(set={"w": 1}), "/nodes/2", True),
    ("calls-not-an-id", lambda d: d["nodes"][2].update(calls="not an id!"), "/nodes/2/calls", True),
    ("out-neither-names-nor-bindings", lambda d: head(d).update(out="y"), "/nodes/1/out", True),
    ("nodes-not-an-array", lambda d: d["nodes"][0].update(nodes={}), "/nodes/0/nodes", True),
    ("block-without-out", lambda d: d["blocks"]["MLP"].pop("out"), "/blocks/MLP", True),
    ("block-ports-not-names", lambda d: d["blocks"]["MLP"].update(**{"in": "x"}), "/blocks/MLP/in", True),
    # references
    ("reference-with-two-dots", lambda d: head(d).update(**{"in": "stack.y.z"}), "/nodes/1/in", True),
    ("input-reference-with-a-dot", lambda d: head(d).update(**{"in": "%x.y"}), "/nodes/1/in", True),
    (
        "reference-object",
        lambda d: head(d).update(**{"in": {"x": {"node": "stack", "output": "y"}}}),
        "/nodes/1/in/x",
        True,
    ),
    ("output-reference", lambda d: d.update(outputs=["%"]), "/outputs/0", True),
    ("binding-reference", lambda d: d["blocks"]["MLP"].update(out={"y": "act."}), "/blocks/MLP/out/y", True),
    # values and tensors
    ("tensor-without-shape", lambda d: head(d)["set"]["w"].pop("shape"), "/nodes/1/set/w", True),
    ("body-tensor-without-shape", lambda d: body(d)["set"]["w"].pop("shape"), "/blocks/Layer/nodes/0/set/w", True),
    ("table-tensor-without-shape", lambda d: d["parameters"]["shared.w"].pop("shape"), "/parameters/shared.w", True),
    ("open-tensor-outside-a-block", lambda d: head(d)["set"].update(w={"shape": [2]}), "/nodes/1/set/w", True),
    ("unknown-dtype", lambda d: head(d)["set"]["w"].update(dtype="float8"), "/nodes/1/set/w/dtype", True),
    ("negative-dim", lambda d: body(d)["set"]["w"].update(shape=[-2, 2]), "/blocks/Layer/nodes/0/set/w/shape/0", True),
    ("base64-alphabet", lambda d: head(d)["set"]["w"].update(data="-_-_"), "/nodes/1/set/w/data", True),
    ("learnable-string", lambda d: head(d)["set"]["w"].update(learnable="no"), "/nodes/1/set/w/learnable", True),
    (
        "data-and-external",
        lambda d: head(d)["set"]["w"].update(external={"path": "w", "key": "k", "checksum": "x"}),
        "/nodes/1/set/w",
        True,
    ),
    (
        "table-reference-in-the-table",
        lambda d: d["parameters"].update({"dims.k": {"ref": "shared.w"}}),
        "/parameters/dims.k",
        True,
    ),
    (
        "table-reference-bad-name",
        lambda d: body(d)["set"].update(k={"ref": "a b"}),
        "/blocks/Layer/nodes/0/set/k/ref",
        True,
    ),
    (
        "setting-learnable-string",
        lambda d: d["parameters"].update({"head.rate": {"value": 0.1, "learnable": "yes"}}),
        "/parameters/head.rate/learnable",
        True,
    ),
    ("object-in-a-list", lambda d: head(d)["set"].update(scale=[1, {"a": 1}]), "/nodes/1/set/scale/1", True),
    ("weights-empty", lambda d: d.update(weights=""), "/weights", False),  # the inline tensors use none
    # checksums
    ("checksum-form", lambda d: head(d)["set"]["w"].update(checksum="md5:00"), "/nodes/1/set/w/checksum", True),
    ("checksum-15-digits", lambda d: head(d)["set"]["w"].update(checksum="0" * 15), "/nodes/1/set/w/checksum", True),
    (
        "checksum-in-capitals",
        lambda d: head(d)["set"]["w"].update(checksum=head(d)["set"]["w"]["checksum"].upper()),
        "/nodes/1/set/w/checksum",
        False,
    ),
    (
        "instance-checksum-form",
        lambda d: instance(d)["tensors"][0].update(checksum="sha256:00"),
        "/nodes/0/nodes/0/tensors/0/checksum",
        True,
    ),
    (
        "instance-tensor-string",
        lambda d: instance(d)["tensors"].__setitem__(1, "not a checksum"),
        "/nodes/0/nodes/0/tensors/1",
        True,
    ),
    (
        "instance-tensor-member",
        lambda d: instance(d)["tensors"][0].update(shape=[2, 2]),
        "/nodes/0/nodes/0/tensors/0",
        True,
    ),
    (
        "external-checksum-short",
        lambda d: head(d)["set"].update(
            w={"shape": [2], "external": {"path": "w.safetensors", "key": "head.w", "checksum": "0" * 16}}
        ),
        "/nodes/1/set/w/external/checksum",
        True,
    ),
    (
        "external-and-checksum",
        lambda d: (
            head(d)["set"]["w"].update(
                external={"path": "w", "key": "k", "checksum": "xxh3-64:" + "0" * 16}, checksum="0" * 16
            )
            or head(d)["set"]["w"].pop("data")
        ),
        "/nodes/1/set/w",
        True,
    ),
    # the document
    ("no-nodes", lambda d: d.pop("nodes"), "/", True),
    ("no-outputs", lambda d: d.pop("outputs"), "/", True),
    ("opset-zero", lambda d: d.update(opsets={"trama": 0}), "/opsets/trama", True),
    ("fact-shape", lambda d: d.update(input_facts=[{"shape": [-1]}]), "/input_facts/0/shape/0", True),
]


def load_and_use(text: str) -> None:
    model = trama.loads(text)
    for entry in model.parameters.values():  # a checksum that does not match is found on use
        if isinstance(entry.value, Tensor):
            np.asarray(entry.value)


@pytest.mark.parametrize(
    ("edit", "where", "refused_on_load"), [case[1:] for case in INVALID], ids=[case[0] for case in INVALID]
)
def test_invalid_documents_are_rejected(
    nested: Draft202012Validator, edit: Callable[[Doc], Any], where: str, refused_on_load: bool
) -> None:
    doc = stack_doc()
    assert errors_of(nested, doc) == []
    edit(doc)
    assert errors_of(nested, doc) != []
    found = violations(doc)
    assert found, doc
    assert found[0].split(": ")[0] == where, found
    if refused_on_load:
        with pytest.raises(trama.TramaError):
            load_and_use(json.dumps(doc))
    else:  # the readers are more lenient than the schema here: trama validate still refuses it
        load_and_use(json.dumps(doc))


def test_trama_validate_reports_nested_places_in_document_order(tmp_path: Path) -> None:
    doc = stack_doc()
    doc["extra"] = 1
    head(doc)["set"]["w"]["dtype"] = "float33"
    instance(doc, 2).update(op="Graph")
    body(doc)["name"] = "f.c"
    doc["blocks"]["MLP"]["nodes"][0]["set"]["b"]["shape"] = [-1]
    instance(doc, 1)["tensors"][0]["checksum"] = "xxh3-64:00"
    problems = [str(problem) for problem in document_problems(json.dumps(doc).encode(), tmp_path)]
    assert [problem.split(": ")[0] for problem in problems] == [
        "/",
        "/blocks/Layer/nodes/0/name",
        "/blocks/MLP/nodes/0/set/b/shape/0",
        "/nodes/0/nodes/1/tensors/0/checksum",
        "/nodes/0/nodes/2",
        "/nodes/1/set/w/dtype",
    ]
    assert problems[0].endswith("Additional properties are not allowed ('extra' was unexpected)")
    assert problems[1] == "/blocks/Layer/nodes/0/name: 'f.c' does not match '^[A-Za-z0-9_]{1,256}$'"
    assert problems[4] == "/nodes/0/nodes/2: Additional properties are not allowed ('op' was unexpected)"
    assert problems[5].startswith("/nodes/1/set/w/dtype: 'float33' is not one of ['float16'")


def test_a_checksum_in_capitals_loads_but_trama_validate_refuses_it(tmp_path: Path) -> None:
    path = tmp_path / "stack.trama.json"
    trama.dump(stack_model(), path, weights="external")
    doc = json.loads(path.read_text())
    instance(doc)["tensors"][0] = instance(doc)["tensors"][0].upper()
    path.write_text(json.dumps(doc))
    load_and_use_file = trama.load(path)
    assert np.array_equal(np.asarray(load_and_use_file.parameters["stack.l0.fc.w"].value), tensor((2, 2)).numpy())
    problems = [str(problem) for problem in document_problems(path.read_bytes(), tmp_path)]
    assert len(problems) == 1
    assert problems[0].startswith(f"/nodes/0/nodes/0/tensors/0: '{instance(doc)['tensors'][0]}' does not match")


def test_a_document_is_judged_by_the_schema_of_its_own_version(tmp_path: Path) -> None:
    flat_doc = json.loads(trama.dumps(stack_model(), format_version="1.2"))
    assert document_problems(json.dumps(flat_doc).encode(), tmp_path) == []
    flat_doc["extra"] = 1
    flat_doc["nodes"][1]["op"] = ""
    problems = [str(problem) for problem in document_problems(json.dumps(flat_doc).encode(), tmp_path)]
    assert problems == [
        "/: Additional properties are not allowed ('extra' was unexpected)",
        "/nodes/1/op: '' should be non-empty",
    ]
    # The flat shape under version 1.3 is judged by the nested schema (and refused on loading)...
    flat_doc = json.loads(trama.dumps(stack_model(), format_version="1.2"))
    flat_doc["format_version"] = "1.3"
    problems = [str(problem) for problem in document_problems(json.dumps(flat_doc).encode(), tmp_path)]
    assert problems[0] == "/outputs/0: {'node': 'again', 'output': 'y'} is not of type 'string'", problems
    assert "/nodes/0: 'name' is a required property" in problems
    assert all(not problem.startswith("/format_version") for problem in problems)
    # ... and the nested shape under version 1.2 by the flat one.
    nested_doc = stack_doc()
    nested_doc["format_version"] = "1.2"
    problems = [str(problem) for problem in document_problems(json.dumps(nested_doc).encode(), tmp_path)]
    assert "/: 'parameters' is a required property" not in problems
    assert problems[0] == "/: Additional properties are not allowed ('blocks' was unexpected)", problems


def test_a_deep_tree_is_checked_without_recursion(tmp_path: Path) -> None:
    # tests/fixtures/legacy/deep nests 301 levels; the schema pass walks it part by part.
    doc = json.loads(trama.dumps(trama.load(FIXTURES / "legacy" / "deep" / "deep.trama.json")))
    node = doc["nodes"][0]
    for _ in range(200):
        node = node["nodes"][0]
    node["extra"] = 1
    parsed = parse_json(json.dumps(doc))
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(400)  # well under what a recursive walk of 600 levels of JSON would need
    try:
        problems = [str(problem) for problem in schema_violations(parsed)]
    finally:
        sys.setrecursionlimit(limit)
    assert problems == [
        "/nodes/0" + "/nodes/0" * 200 + ": Additional properties are not allowed ('extra' was unexpected)"
    ]


# --------------------------------------------------------------------------------------------
# trama's schema pass: part by part, what one whole-document run reports
# --------------------------------------------------------------------------------------------


def reference_violations(doc: Any) -> list[str]:
    """What one jsonschema run over the whole document reports (with the schema of its version,
    as trama validate picks it), ranked and ordered as trama reports it."""
    version = doc.get("format_version") if isinstance(doc, dict) else None
    validator = Draft202012Validator(trama.json_schema(format_version="1.3" if nested_version(version) else "1.2"))
    position = _document_order(doc)
    found: list[tuple[list[int], str]] = []
    for error in validator.iter_errors(doc):
        for leaf in _specific_errors(error):
            schema = leaf.schema
            if (
                leaf.validator == "pattern"
                and leaf.instance == ""
                and isinstance(schema, dict)
                and schema.get("minLength")
            ):
                continue  # said once, by minLength
            path = list(leaf.absolute_path)
            text = f"{_pointer(path)}: {leaf.message}"
            if all(text != seen for _, seen in found):
                found.append((position(path), text))
    found.sort(key=lambda item: item[0])
    return [text for _, text in found]


VALUES: list[Any] = [
    None,
    True,
    0,
    -1,
    1.5,
    "",
    "x",
    "a b",
    "a.b",
    "a.b.c",
    "%x",
    "%input",
    "0123456789abcdef",
    "0123456789ABCDEF",
    "1.3",
    [],
    [1],
    ["y"],
    [{}],
    {},
    {"a": 1},
    {"ref": "dims.k"},
    {"shape": [2]},
    {"value": 1, "learnable": True},
    [[[{"z": 1}]]],
    2**70,
]


@pytest.mark.parametrize("seed", range(4))
def test_the_schema_pass_reports_what_one_whole_document_run_reports(tmp_path: Path, seed: int) -> None:
    rng = random.Random(f"schema-13/{seed}")
    trama.dump(stack_model(), tmp_path / "external.trama.json", weights="external")
    bases = [stack_doc(), json.loads((tmp_path / "external.trama.json").read_text())]
    for _ in range(150):
        doc = copy.deepcopy(rng.choice(bases))
        for _ in range(rng.randint(1, 3)):
            random_edit(
                doc,
                rng,
                VALUES,
                lambda rng: rng.choice(["extra", "use", "nodes", "calls", "op", "out", "data", "checksum"]),
            )
        assert violations(doc) == reference_violations(doc), doc


def test_messages_quote_long_values_cut_short() -> None:
    doc = stack_doc()
    head(doc)["name"] = "n" * 5000
    (problem,) = violations(doc)
    assert problem.startswith("/nodes/1/name: 'nnnn")
    assert len(problem) < 400
    assert re.search(r"\.\.\. does not match", problem)
