"""``trama validate``'s fast path: a document of the current format is proven valid by the typed
reader that ``trama.load`` uses (plus :func:`trama.format._problems.proven_valid`), and the JSON
Schema pass runs only to explain what fails. The verdict and every message must be those of the
stages run in full (:func:`trama.format._problems._explained_problems`, the schema first): here
over the fixtures (and the same models written in the current format), the fuzz seeds in both
forms (flat, format 1.2, read by :mod:`trama.format._typed`; nested, 1.3, read by
:mod:`trama.format._typed_nested`) and a few hundred mutations of them, and over random edits of
every member that the schema constrains. And the memory of validating the schema-heavy hostile
document is that of its structure, in a bounded child process.
"""

from __future__ import annotations

import copy
import json
import random
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from json_edits import random_edit
from reliability.fuzz_documents import Seed, build_seeds, mutate
from reliability.hostile_files import schema_heavy
from reliability.isolation import run_isolated
from test_typed_reader import mutate_nested

import trama
from trama.format._external import make_resolver
from trama.format._jsontext import lift_text, parse_json
from trama.format._problems import _explained_problems, document_problems, proven_valid, schema_violations
from trama.format._typed import decode_typed
from trama.format._typed_nested import decode_nested

FIXTURES = Path(__file__).resolve().parent / "fixtures"
#: Mutated documents checked both ways (each costs a schema pass: about 10 ms).
MUTATIONS = 400


def both_ways(text: bytes, folder: Path) -> tuple[list[str], list[str]]:
    """What ``trama validate`` reports, and what the stages run in full report."""
    fast = [str(problem) for problem in document_problems(text, folder)]
    full = [str(problem) for problem in _explained_problems(text, folder, schema=True)]
    return fast, full


def proven(text: bytes, folder: Path) -> bool:
    """Whether the fast path alone says the document is valid (no schema pass): a flat
    document read by the typed reader, a nested one (1.3) by its own."""
    lifted = lift_text(text)
    typed = decode_typed(lifted, make_resolver(folder))
    if typed is None:
        nested = decode_nested(lifted, make_resolver(folder))
        typed = None if nested is None else (nested, True)
    return typed is not None and typed[1] and proven_valid(typed[0])


def is_nested(text: bytes) -> bool:
    return b'"format_version": "1.3"' in text[:64] or b'"format_version":"1.3"' in text[:64]


def check_agreement(text: bytes, folder: Path, counts: dict[str, int], what: str) -> None:
    fast, full = both_ways(text, folder)
    assert fast == full, what
    if proven(text, folder):
        # The heart of it: what the proof accepts, the schema accepts (the document's tensors
        # may still be corrupt, which the schema does not see).
        assert schema_violations(parse_json(text)) == [], what
        counts["proven"] += 1
        if is_nested(text):
            counts["proven nested"] = counts.get("proven nested", 0) + 1
    counts["ok" if not full else "refused"] += 1


@pytest.fixture(scope="module")
def seeds() -> Iterator[list[Seed]]:
    with tempfile.TemporaryDirectory() as folder:
        yield build_seeds(Path(folder), with_torch=False)


def test_the_fixtures_and_the_seeds_get_the_same_verdict_both_ways(seeds: list[Seed], tmp_path: Path) -> None:
    counts = dict.fromkeys(("proven", "ok", "refused"), 0)
    for path in sorted(FIXTURES.rglob("*.json")):
        check_agreement(path.read_bytes(), path.parent, counts, str(path))
        if path.name.endswith(".trama.json"):  # and the same model written in the current format
            check_agreement(trama.dumps(trama.load(path)).encode(), tmp_path, counts, f"{path} rewritten")
    for seed in seeds:
        check_agreement(seed.text, seed.path.parent, counts, seed.name)
    assert counts["proven"] >= 10, counts
    assert counts.get("proven nested", 0) >= 5, counts  # the seeds as 1.3 writes them, the fixtures rewritten
    assert counts["refused"] >= 10, counts  # the expected.json files are not documents


def test_mutated_documents_get_the_same_verdict_and_messages_both_ways(seeds: list[Seed]) -> None:
    counts = dict.fromkeys(("proven", "ok", "refused"), 0)
    for index in range(MUTATIONS):
        rng = random.Random(f"validate-proof/{index}")
        seed = rng.choice(seeds)
        if is_nested(seed.text) and rng.random() < 0.5:
            text, done = mutate_nested(seed.tree, rng)  # written compactly, as the nested reader takes it
        else:
            text, done = mutate(seed, rng)
        check_agreement(text, seed.path.parent, counts, f"case {index} of {seed.name}: {done}")
    # Both verdicts are well represented (the fuzz is not refusing everything at the first byte).
    assert counts["proven"] > MUTATIONS // 10, counts
    assert any(is_nested(seed.text) for seed in seeds)
    assert any(not is_nested(seed.text) for seed in seeds)
    assert counts["refused"] > MUTATIONS // 4, counts


#: Values an edit puts anywhere in a document (as in test_schema.py), with the forms the schema
#: is particular about: checksums in capitals, ids too deep, names too long, a final newline.
VALUES: list[Any] = [
    None,
    True,
    0,
    -1,
    1.5,
    2**70,
    "",
    "x",
    "a b",
    "a.b",
    "%input",
    "y\n",
    "n" * 257,
    ".".join(["n"] * 258),
    "xxh3-64:" + "A" * 16,
    "sha256:" + "0" * 64,
    [],
    [1],
    [{}],
    [[[{"z": 1}]]],
    {},
    {"a": 1},
]


def rich_document(folder: Path) -> list[dict[str, Any]]:
    """Valid documents with every kind of member: facts, opsets, metadata, calls, settings of
    every value form, inline and external tensors with checksums."""
    x = trama.Ref(trama.INPUT, "x")
    nodes = [
        trama.Node("g", "Graph", {"x": x}, ["y"], {}, {"y": trama.Ref("g.b", "y")}, {"note": "a"}),
        trama.Node("g.a", "Tag", {"x": x}, ["y"], {"w": "g.a.w", "s": "g.a.s", "l": "g.a.l"}),
        trama.Node("g.b", "Tag", {"x": trama.Ref("g.a", "y")}, ["y"], {"w": "g.b.w"}),
        trama.Node("c", "Graph", {"x": x}, ["y"], calls="g"),
    ]
    table = {
        "g.a.w": trama.Parameter(trama.Tensor.from_array(np.arange(6, dtype=np.float32).reshape(2, 3))),
        "g.a.s": trama.Parameter("text", learnable=False),
        "g.a.l": trama.Parameter([1, [2.5, None], True], learnable=False),
        "g.b.w": trama.Parameter(trama.Tensor.from_array(np.ones(3, dtype=np.int64)), learnable=False),
    }
    model = trama.Model(
        ["x"],
        [trama.Ref("c", "y")],
        nodes,
        table,
        metadata={"producer": {"name": "test"}},
        opsets={"trama": 1},
        input_facts=[trama.ValueFact("float32", ("batch", 3))],
        output_facts=[None],
    )
    trama.dump(model, folder / "external.trama.json", weights="external", format_version="1.2")
    return [
        json.loads(trama.dumps(model, format_version="1.2")),
        json.loads((folder / "external.trama.json").read_text()),
    ]


@pytest.mark.parametrize("seed", range(2))
def test_edits_of_every_member_get_the_same_verdict_both_ways(
    make_doc: Callable[[], dict[str, Any]], tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    bases = [make_doc(), *rich_document(tmp_path)]
    counts = dict.fromkeys(("proven", "ok", "refused"), 0)
    for _ in range(150):
        doc = copy.deepcopy(rng.choice(bases))
        for _ in range(rng.randint(1, 2)):
            random_edit(doc, rng, VALUES)
        check_agreement(json.dumps(doc).encode(), tmp_path, counts, json.dumps(doc)[:2000])
    assert counts["refused"] > 50, counts


def capitalized(checksum: str) -> str:
    algorithm, _, digits = checksum.partition(":")
    return f"{algorithm}:{digits.upper()}"


@pytest.mark.parametrize("where", ["inline", "external"])
def test_a_checksum_in_capitals_loads_but_the_schema_refuses_it(tmp_path: Path, where: str) -> None:
    # The one thing the readers accept and the schema does not: a checksum's digits in
    # capitals (the readers compare them ignoring case). The proof sends it to the schema.
    tensor = trama.Tensor.from_array(np.arange(6, dtype=np.float32))
    node = trama.Node("t", "Tag", {"x": trama.Ref(trama.INPUT, "x")}, ["y"], {"table": "t.table"})
    model = trama.Model(["x"], [trama.Ref("t", "y")], [node], {"t.table": trama.Parameter(tensor)})
    trama.dump(
        model,
        tmp_path / "m.trama.json",
        weights="external" if where == "external" else "inline",
        format_version="1.2",
    )
    doc = json.loads((tmp_path / "m.trama.json").read_text())
    entry = doc["parameters"]["t.table"]
    holder, pointer = (entry, "/parameters/t.table/checksum")
    if where == "external":
        holder, pointer = (entry["value"]["external"], "/parameters/t.table/value/external/checksum")
    holder["checksum"] = capitalized(holder["checksum"])
    text = json.dumps(doc).encode()
    loaded = trama.loads(text, base_dir=tmp_path)
    assert np.array_equal(np.asarray(loaded.parameters["t.table"].value), np.arange(6, dtype=np.float32))
    assert not proven(text, tmp_path)
    fast, full = both_ways(text, tmp_path)
    assert fast == full
    assert len(fast) == 1
    assert fast[0].startswith(f"{pointer}: '{holder['checksum']}' does not match")


def test_a_corrupt_tensor_in_a_sound_document_is_explained_by_the_schema_first(tmp_path: Path) -> None:
    tensor = trama.Tensor.from_array(np.arange(6, dtype=np.float32))
    node = trama.Node("t", "Tag", {"x": trama.Ref(trama.INPUT, "x")}, ["y"], {"table": "t.table"})
    model = trama.Model(["x"], [trama.Ref("t", "y")], [node], {"t.table": trama.Parameter(tensor)})
    doc = json.loads(trama.dumps(model, format_version="1.2"))
    entry = doc["parameters"]["t.table"]
    data = entry["value"]["data"]
    entry["value"]["data"] = "AA==" + data[4:]  # padding inside: refused by the schema's pattern
    fast, full = both_ways(json.dumps(doc).encode(), tmp_path)
    assert fast == full
    assert fast[0].startswith("/parameters/t.table/value/data: ")
    other = "B" if data[0] == "A" else "A"
    entry["value"]["data"] = other + data[1:]  # well-formed base64, other values: the checksum says so
    fast, full = both_ways(json.dumps(doc).encode(), tmp_path)
    assert fast == full
    assert fast == ["/parameters/t.table/checksum: " + fast[0].partition(": ")[2]]
    assert "does not match the checksum" in fast[0]


def test_without_the_schema_the_fast_path_reports_the_structural_errors(tmp_path: Path) -> None:
    node = trama.Node("t", "Tag", {"x": trama.Ref(trama.INPUT, "x")}, ["y"], {})
    doc = json.loads(trama.dumps(trama.Model(["x"], [trama.Ref("t", "y")], [node], {}), format_version="1.2"))
    doc["nodes"][0]["inputs"]["x"] = {"node": "nowhere", "output": "y"}
    text = json.dumps(doc).encode()
    expected = ["/nodes/0/inputs/x (node 't'): refers to unknown node 'nowhere'"]
    assert [str(p) for p in document_problems(text, tmp_path, schema=False)] == expected
    assert [str(p) for p in _explained_problems(text, tmp_path, schema=False)] == expected
    assert [str(p) for p in document_problems(text, tmp_path)] == expected


# --- memory -----------------------------------------------------------------------------------

#: Address space validating may add, as a multiple of the file's size, on top of a fixed
#: allowance for the allocator's arenas. Measured: about 8x (the typed records of the whole
#: document while the model is built, what trama.load costs too); the JSON Schema pass of
#: the whole document once took 135x.
MEMORY_RATIO = 10
SLACK_MB = 16

_BOUNDED_VALIDATE = """
import resource, sys
from trama.tools.cli import main

def vm_size():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))

path, ratio, slack = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) << 20
import os
limit = vm_size() + ratio * os.path.getsize(path) + slack
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
sys.exit(main(["validate", path]))
"""


def test_validating_the_schema_heavy_document_costs_its_structure(tmp_path: Path) -> None:
    path = schema_heavy(tmp_path)
    code = f"import sys\nsys.argv[1:] = {[str(path), str(MEMORY_RATIO), str(SLACK_MB)]!r}\n" + _BOUNDED_VALIDATE
    outcome = run_isolated(code, timeout_s=60)
    assert outcome.returncode == 0, outcome.describe()
    assert re.search(r": ok( \(.*\))?$", outcome.stdout.strip()), outcome.describe()
