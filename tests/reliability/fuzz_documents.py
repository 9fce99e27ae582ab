"""Seeded structural fuzz of trama documents: mutate valid documents, and require that trama
either accepts the result and does right by it, or refuses it with a trama error.

**Seeds.** Valid documents of every kind trama reads: models exported from torch (an MLP, a CNN
with batch norm and pooling, a two-layer GRU, an embedding with layer norm, a captured graph of
functions with input facts), a hand-built model full of calling nodes, one with settings-only
ops (``arange``, ``full``) and symbolic facts, a stack of repeated layers (which format 1.3
writes as blocks, one using another), the MLP with its weights in a safetensors file beside it
(whose folder also holds a FIFO, links to ``/`` and ``/etc/passwd``, a directory and a link
loop, for paths to wander into), the MLP as format 1.1 (no inline checksums), and every legacy
0.1 / 0.2 fixture of ``tests/fixtures/legacy``. Each model (and the external one) is a seed
twice: in the flat form of format 1.2 (``name``), which every trama still reads, and as
``dump`` writes it now, nested (format 1.3, ``name_13``).

**Mutations.** One to five per case, structural (on the parsed tree: delete, repeat, retype or
rename a member; swap references; change an op, an id, a parent, the node order; add calls;
change a tensor's dtype, shape, data, checksum or external reference; set facts and settings
to extremes; nest deep; garble strings) and, one case in six, then at the byte level (cut the
text, flip bytes, insert a byte order mark or a NUL, re-encode). A nested (1.3) document gets
the same mutations in its own terms (a node's name for its id, reference strings, settings and
tensors in a node's ``set``, the weights file named once) and some of its own: blocks that use
themselves or each other, a small expansion bomb, a block's ports and outputs, an instance's
block, ports and tensors, a composite turned into an instance, relative classes.

**Stages.** ``load`` (``trama.loads``, or ``trama.load`` of a file), ``tensors`` (every tensor
decoded, and checked against the original when it still carries an original checksum: a value
that changed under an intact checksum is silent corruption), ``views`` (``trama ssa`` and
``trama info`` render it with nothing raw in the text, and ``dumps`` writes a document that loads
back equal), ``validate`` (the ``trama validate`` engine agrees with ``load``), ``registry``
(``trama.validate`` against the installed catalogs), ``prepare`` and ``run`` on a runtime
(numpy mostly; torch and JAX for some cases) with small inputs made from the facts or the seed's
examples. See :mod:`reliability.fuzzing` for the verdicts.

Run: ``python -m reliability.fuzz_documents --cases 20000 --seed 1`` from ``tests/``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import copy
import dataclasses
import json
import math
import os
import random
import shutil
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from reliability.fuzzing import (
    EXTREME_NUMBERS,
    HOSTILE_STRINGS,
    RAW_CONTROL,
    Raw,
    Verdict,
    deep,
    fuzz_main,
    mutate_json,
    mutate_text,
    random_string,
    render,
    verdict_of,
)

__all__ = ["RUNTIME_WEIGHTS", "Seed", "build_seeds", "case_function", "main", "run_case"]

REPO = Path(__file__).resolve().parents[2]
LEGACY = REPO / "tests" / "fixtures" / "legacy"

#: How often each runtime runs an accepted case (JAX compiles each model: the costliest).
RUNTIME_WEIGHTS = {"numpy": 0.75, "torch:cpu": 0.17, "jax:cpu": 0.08}
#: The share of cases mutated gently only (kept well-formed, to reach the runtimes).
GENTLE_SHARE = 0.4
#: Inputs larger than this many elements are not made: the run is skipped.
MAX_INPUT_ELEMENTS = 1 << 16


@dataclass
class Seed:
    """A valid document to mutate: its file and folder, its parsed tree, example inputs (dtype
    and shape per input) when its ops can run, and what each original checksum stands for."""

    name: str
    path: Path
    text: bytes
    tree: Any
    examples: dict[str, tuple[str, tuple[int, ...]]] | None
    originals: dict[str, set[tuple[str, tuple[int, ...], bytes]]] = field(default_factory=dict)


# --- seeds --------------------------------------------------------------------------------------


Examples = dict[str, tuple[str, tuple[int, ...]]]


def _torch_models() -> dict[str, tuple[Any, Examples]]:
    """Small torch modules exported by trama, with their example inputs."""
    import torch

    import trama

    torch.manual_seed(0)
    nn = torch.nn
    mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    cnn = nn.Sequential(
        nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(18, 3)
    ).eval()
    gru = nn.GRU(4, 3, num_layers=2, batch_first=True)
    embed = nn.Sequential(nn.Embedding(10, 4), nn.LayerNorm(4), nn.Linear(4, 2))

    class Captured(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(4, 3))

        def forward(self, x: Any, z: Any) -> Any:
            return torch.relu(x @ self.w).sum(-1) * 2 + z.mean()

    models: dict[str, tuple[Any, Examples]] = {
        "torch_mlp": (trama.export_model(mlp, inputs=["x"], outputs=["y"]), {"x": ("float32", (2, 4))}),
        "torch_cnn": (trama.export_model(cnn, inputs=["x"], outputs=["y"]), {"x": ("float32", (1, 1, 8, 8))}),
        "torch_gru": (trama.export_model(gru, inputs=["x"], outputs=["y", "h_n"]), {"x": ("float32", (2, 5, 4))}),
        "torch_embedding": (trama.export_model(embed, inputs=["x"], outputs=["y"]), {"x": ("int64", (2, 3))}),
        "torch_captured": (
            trama.export_model(
                Captured(), inputs=["x", "z"], outputs=["y"], example_inputs=(torch.ones(2, 4), torch.ones(5))
            ),
            {"x": ("float32", (2, 4)), "z": ("float32", (5,))},
        ),
    }
    return models


def _calls_model() -> Any:
    """A Graph whose blocks are called again from other scopes, of composites and of leaves."""
    import trama
    from trama import INPUT, Node, Parameter, Ref, Tensor

    x = Ref(INPUT, "x")
    slots = {"in_features": "n", "out_features": "n", "weight": "w", "bias": "b"}
    rng = np.random.default_rng(1)
    nodes = [
        Node("root", "Graph", {"x": x}, ["y"], output_bindings={"y": Ref("root.pair2", "y")}),
        Node("root.block", "Sequential", {"x": x}, ["y"], output_bindings={"y": Ref("root.block.act", "y")}),
        Node("root.block.fc", "Linear", {"x": x}, ["y"], dict(slots)),
        Node("root.block.act", "relu", {"x": Ref("root.block.fc", "y")}, ["y"]),
        Node("root.again", "Sequential", {"x": Ref("root.block", "y")}, ["y"], calls="root.block"),
        Node(
            "root.other", "Graph", {"x": Ref("root.again", "y")}, ["y"], output_bindings={"y": Ref("root.other.h", "y")}
        ),
        Node("root.other.inner", "Sequential", {"x": x}, ["y"], calls="root.block"),
        Node("root.other.h", "Linear", {"x": Ref("root.other.inner", "y")}, ["y"], calls="root.block.fc"),
        Node(
            "root.pair", "Graph", {"x": Ref("root.other", "y")}, ["y"], output_bindings={"y": Ref("root.pair.b", "y")}
        ),
        Node("root.pair.a", "Linear", {"x": x}, ["y"], dict(slots)),
        Node("root.pair.b", "Linear", {"x": Ref("root.pair.a", "y")}, ["y"], calls="root.pair.a"),
        Node("root.pair2", "Graph", {"x": Ref("root.pair", "y")}, ["y"], calls="root.pair"),
    ]
    parameters = {
        "n": Parameter(3),
        "w": Parameter(Tensor.from_array(rng.standard_normal((3, 3)).astype(np.float32)), learnable=True),
        "b": Parameter(Tensor.from_array(rng.standard_normal(3).astype(np.float32)), learnable=True),
    }
    return trama.Model(["x"], [Ref("root", "y")], nodes, parameters)


def _settings_model() -> Any:
    """Ops whose output size comes from settings alone, next to a symbolic fact: the settings
    are where mutations ask a framework for the impossible."""
    import trama
    from trama import INPUT, Node, Parameter, Ref, ValueFact

    nodes = [
        Node(
            "root",
            "Graph",
            {"x": Ref(INPUT, "x")},
            ["a", "f", "r"],
            output_bindings={"a": Ref("root.a", "y"), "f": Ref("root.f", "y"), "r": Ref("root.r", "y")},
        ),
        Node("root.a", "arange", {}, ["y"], {"start": "a.start", "end": "a.end", "step": "a.step"}),
        Node("root.f", "full", {}, ["y"], {"size": "f.size", "fill_value": "f.fill"}),
        Node("root.r", "relu", {"x": Ref(INPUT, "x")}, ["y"]),
    ]
    parameters = {
        "a.start": Parameter(0),
        "a.end": Parameter(6),
        "a.step": Parameter(2),
        "f.size": Parameter([2, 3]),
        "f.fill": Parameter(1.5),
    }
    outputs = [Ref("root", name) for name in ("a", "f", "r")]
    return trama.Model(["x"], outputs, nodes, parameters, input_facts=[ValueFact("float32", ("batch", 4))])


def _blocks_model() -> Any:
    """A stack of three equal layers, each of two equal sublayers (a Linear with its own
    tensors, then relu): format 1.3 writes a block for the layer whose body uses a block for
    the sublayer, and each layer gives its own tensors."""
    import trama
    from trama import INPUT, Node, Parameter, Ref, Tensor

    rng = np.random.default_rng(2)
    x = Ref(INPUT, "x")
    nodes = [
        Node(
            "net",
            "Sequential",
            {"x": x},
            ["y"],
            output_bindings={"y": Ref("net.l2", "y")},
            metadata={"class": "acme.nets.Stack"},
        )
    ]
    parameters: dict[str, Any] = {}
    previous = x
    for k in range(3):
        layer = f"net.l{k}"
        bindings = {"y": Ref(f"{layer}.b", "y")}
        nodes.append(
            Node(
                layer,
                "Sequential",
                {"x": previous},
                ["y"],
                output_bindings=bindings,
                metadata={"class": "acme.nets.Layer"},
            )
        )
        inner = x
        for sub in ("a", "b"):
            sub_id = f"{layer}.{sub}"
            bindings = {"y": Ref(f"{sub_id}.act", "y")}
            nodes.append(
                Node(
                    sub_id,
                    "Sequential",
                    {"x": inner},
                    ["y"],
                    output_bindings=bindings,
                    metadata={"class": "acme.nets.Sub"},
                )
            )
            slots = {slot: f"{sub_id}.fc.{slot}" for slot in ("in_features", "out_features", "weight", "bias")}
            nodes.append(Node(f"{sub_id}.fc", "Linear", {"x": x}, ["y"], slots, metadata={"class": "torch.nn.Linear"}))
            nodes.append(Node(f"{sub_id}.act", "relu", {"x": Ref(f"{sub_id}.fc", "y")}, ["y"]))
            weight = rng.standard_normal((3, 3)).astype(np.float32)
            parameters[f"{sub_id}.fc.in_features"] = Parameter(3)
            parameters[f"{sub_id}.fc.out_features"] = Parameter(3)
            parameters[f"{sub_id}.fc.weight"] = Parameter(Tensor.from_array(weight), learnable=True)
            parameters[f"{sub_id}.fc.bias"] = Parameter(
                Tensor.from_array(rng.standard_normal(3).astype(np.float32)), learnable=True
            )
            inner = Ref(sub_id, "y")
        previous = Ref(layer, "y")
    return trama.Model(["x"], [Ref("net", "y")], nodes, parameters)


def _neighbours(folder: Path) -> None:
    """Things for external paths to wander into, beside the external seed."""
    (folder / "subdir").mkdir()
    if hasattr(os, "mkfifo"):
        os.mkfifo(folder / "fifo.safetensors")
    if hasattr(os, "symlink"):
        (folder / "link_root").symlink_to("/")
        (folder / "link_passwd.safetensors").symlink_to("/etc/passwd")
        (folder / "link_devzero.safetensors").symlink_to("/dev/zero")
        (folder / "loop_a").symlink_to("loop_b")
        (folder / "loop_b").symlink_to("loop_a")


#: External paths a mutation may substitute (the neighbours above, and the usual suspects).
EXTERNAL_PATHS = (
    "fifo.safetensors",
    "link_root/etc/passwd",
    "link_passwd.safetensors",
    "link_devzero.safetensors",
    "loop_a",
    "subdir",
    "subdir/../model.safetensors",
    "./copy.safetensors",
    "copy.safetensors",
    "missing.safetensors",
    "../model.safetensors",
    "/etc/passwd",
    "/dev/zero",
    "",
    ".",
    "a\\b",
    "w\u0000.safetensors",
    "w\udc80.safetensors",
    "w\n.safetensors",
    "x" * 5000,
    "model.trama.json",
)


def _examples_for_legacy(model: Any) -> dict[str, tuple[str, tuple[int, ...]]] | None:
    """Inputs a legacy fixture runs on: float32 [2, k], the first k that works on numpy."""
    import trama

    try:
        runnable = trama.runtime_for_name("numpy").prepare(model)
    except trama.TramaError:
        return None
    for width in range(1, 9):
        try:
            runnable.run([np.ones((2, width), np.float32) for _ in model.inputs])
        except trama.TramaError:
            continue
        return {name: ("float32", (2, width)) for name in model.inputs}
    return None


def build_seeds(folder: Path, *, with_torch: bool = True) -> list[Seed]:
    """Write every seed document into ``folder`` (one subfolder each) and return them, each
    checked: it loads, passes the registry and runs on numpy on its examples."""
    import trama

    models: dict[str, tuple[Any, dict[str, tuple[str, tuple[int, ...]]] | None]] = {}
    if with_torch:
        with contextlib.suppress(ImportError):  # trama-torch is optional: the other seeds cover the format
            models.update(_torch_models())
    models["calls"] = (_calls_model(), {"x": ("float32", (2, 3))})
    models["settings"] = (_settings_model(), {"x": ("float32", (2, 4))})
    models["blocks"] = (_blocks_model(), {"x": ("float32", (2, 3))})
    seeds: list[Seed] = []
    for name, (model, examples) in models.items():
        for seed_name, version in _forms(name):
            path = folder / seed_name / "model.trama.json"
            path.parent.mkdir(parents=True)
            trama.dump(model, path, format_version=version)
            seeds.append(_seed(seed_name, path, examples))
    mlp = models.get("torch_mlp", models["calls"])
    for seed_name, version in _forms("external"):
        external = folder / seed_name / "model.trama.json"
        external.parent.mkdir()
        trama.dump(mlp[0], external, weights="external", format_version=version)
        weights = [p for p in external.parent.iterdir() if p.suffix == ".safetensors"]
        shutil.copyfile(weights[0], external.parent / "copy.safetensors")
        _neighbours(external.parent)
        seeds.append(_seed(seed_name, external, mlp[1]))
    old = folder / "format_1_1" / "model.trama.json"
    old.parent.mkdir()
    doc = json.loads(trama.dumps(mlp[0], format_version="1.2"))
    doc["format_version"] = "1.1"
    for entry in doc["parameters"].values():
        entry.pop("checksum", None)
    old.write_text(json.dumps(doc, indent=1))
    seeds.append(_seed("format_1_1", old, mlp[1]))
    for fixture in sorted(LEGACY.glob("v0_*/*.trama.json")):
        name = f"legacy_{fixture.parent.name}_{fixture.name.split('.')[0]}"
        path = folder / name / "model.trama.json"
        path.parent.mkdir()
        shutil.copyfile(fixture, path)
        seeds.append(_seed(name, path, _examples_for_legacy(trama.load(path))))
    for seed in seeds:
        _check_seed(seed)
    return seeds


def _forms(name: str) -> tuple[tuple[str, str], ...]:
    """The seeds of one model: (seed name, format version), flat then nested."""
    return ((name, "1.2"), (f"{name}_13", "1.3"))


def _seed(name: str, path: Path, examples: dict[str, tuple[str, tuple[int, ...]]] | None) -> Seed:
    import trama
    from trama.format._tensor import tensor_checksum

    text = path.read_bytes()
    seed = Seed(name, path, text, json.loads(text), examples)
    model = trama.load(path)
    for parameter in model.parameters.values():
        value = parameter.value
        if isinstance(value, trama.Tensor):
            raw = np.ascontiguousarray(value.numpy()).tobytes()
            original = (value.dtype, tuple(value.shape), raw)
            for checksum in (tensor_checksum(value.dtype, value.shape, raw), _bytes_checksum(raw)):
                seed.originals.setdefault(checksum, set()).add(original)
    return seed


def _bytes_checksum(raw: bytes) -> str:
    from trama.format._external import checksum

    return checksum(np.frombuffer(raw, dtype=np.uint8))


def _check_seed(seed: Seed) -> None:
    import trama

    model = trama.load(seed.path)
    if seed.examples is not None:
        trama.validate(model, trama.registry())
        runnable = trama.runtime_for_name("numpy").prepare(model)
        runnable.run(_inputs(model, seed, random.Random(0)) or [])


# --- document mutations ---------------------------------------------------------------------------


def _nodes(doc: Any) -> list[dict[str, Any]]:
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    return [n for n in nodes if isinstance(n, dict)] if isinstance(nodes, list) else []


def _entries(doc: Any) -> dict[str, Any]:
    table = doc.get("parameters") if isinstance(doc, dict) else None
    return table if isinstance(table, dict) else {}


def _tensors(doc: Any) -> list[dict[str, Any]]:
    found = []
    for entry in _entries(doc).values():
        value = entry.get("value") if isinstance(entry, dict) else None
        if isinstance(value, dict) and "dtype" in value:
            found.append(value)
    for node in _nodes(doc):  # format 0.1 keeps values in the node
        for slot in (node.get("parameters") or {}).values() if isinstance(node.get("parameters"), dict) else ():
            value = slot.get("value") if isinstance(slot, dict) else None
            if isinstance(value, dict) and "dtype" in value:
                found.append(value)
    return found


def _refs(doc: Any) -> list[dict[str, Any]]:
    refs = [r for r in doc.get("outputs", []) if isinstance(r, dict)] if isinstance(doc.get("outputs"), list) else []
    for node in _nodes(doc):
        for member in ("inputs", "output_bindings"):
            ports = node.get(member)
            if isinstance(ports, dict):
                refs += [r for r in ports.values() if isinstance(r, dict)]
    return refs


_DTYPES = ("float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool")
_BAD_DTYPES = ("float8", "Float32", "", "uint16", "complex64", "f4", "<f4", "object", None, 32)
_OPS = (
    "Linear",
    "relu",
    "ReLU",
    "Sequential",
    "Graph",
    "GRU",
    "Conv2d",
    "add",
    "matmul",
    "constant",
    "arange",
    "full",
    "zeros",
    "reshape",
    "Embedding",
    "LayerNorm",
    "Flatten",
    "MaxPool2d",
    "BatchNorm2d",
    "sum",
    "mean",
    "lenses.System",
    "trama.Linear",
    "unknown_op",
    "Linear\n%x = relu()",
    "\x1b[31mrelu",
    "",
    "a..b",
    "_",
    "1x",
)
_VERSIONS = (
    "1.0",
    "1.1",
    "1.2",
    "1.3",
    "1.99",
    "2.0",
    "0.1",
    "0.2",
    "0.3",
    "01.2",
    "1.2 ",
    "1.2.0",
    "",
    "1",
    "99999999999999999999.0",
    "1.99999999999999999999",
)
_SIZES = (
    0,
    1,
    2,
    3,
    4,
    7,
    -1,
    2**31,
    2**40,
    2**62,
    2**63 - 1,
    2**63,
    2**64,
    10**20,
    1.5,
    True,
    None,
    "batch",
    "",
    "n",
    [2],
)


def _document_mutation(root: dict[str, Any], rng: random.Random, seed: Seed | None) -> str:
    """One mutation that knows the format (falls back to a generic one when the document has
    lost what it aims at)."""
    doc = root["doc"]
    if not isinstance(doc, dict):
        return mutate_json(root, rng)
    if _is_nested(doc):
        return _nested_mutation(root, rng, seed)
    kinds = (
        "refs",
        "op",
        "id",
        "calls",
        "order",
        "copy_node",
        "dtype",
        "shape",
        "data",
        "checksum",
        "external",
        "facts",
        "version",
        "settings",
        "table",
        "metadata",
        "outputs",
        "bindings",
        "nest_value",
    )
    kind = rng.choice(kinds)
    if seed is not None and seed.name == "external" and rng.random() < 0.4:
        kind = "external"  # the one seed whose paths lead somewhere: aim at them more often
    nodes = _nodes(doc)
    ids: list[str] = [n["id"] for n in nodes if isinstance(n.get("id"), str)] or ["root"]
    tensors = _tensors(doc)
    entries = _entries(doc)
    if kind == "refs":
        refs = _refs(doc)
        if len(refs) >= 2 and rng.random() < 0.4:
            a, b = rng.sample(refs, 2)
            a_copy = dict(a)
            a.clear()
            a.update(b)
            b.clear()
            b.update(a_copy)
            return "swap two references"
        if refs:
            ref = rng.choice(refs)
            member = rng.choice(("node", "output"))
            pool = [*ids, "%input", rng.choice(HOSTILE_STRINGS)] if member == "node" else ["y", "x", "h_n", "nope", ""]
            ref[member] = rng.choice(pool)
            return f"reference {member} -> {str(ref[member])[:30]!a}"
    if kind == "op" and nodes:
        node = rng.choice(nodes)
        node["op"] = rng.choice((*_OPS, random_string(rng)))
        return f"op of {str(node.get('id'))[:30]!a} -> {node['op'][:30]!a}"
    if kind == "id" and nodes:
        node = rng.choice(nodes)
        member = rng.choice(("id", "parent"))
        node[member] = rng.choice((*ids, None, rng.choice(ids) + ".x", "x." * 300 + "x", rng.choice(HOSTILE_STRINGS)))
        return f"{member} of a node -> {str(node[member])[:30]!a}"
    if kind == "calls" and nodes:
        node = rng.choice(nodes)
        node["calls"] = rng.choice((*ids, "nowhere", node.get("id")))
        if rng.random() < 0.6:
            node.pop("parameters", None)
            node.pop("output_bindings", None)
        return f"calls on {str(node.get('id'))[:30]!a} -> {str(node['calls'])[:30]!a}"
    if kind == "order" and len(nodes) >= 2:
        listed = doc["nodes"]
        way = rng.choice(("shuffle", "reverse", "move"))
        if way == "shuffle":
            rng.shuffle(listed)
        elif way == "reverse":
            listed.reverse()
        else:
            listed.insert(rng.randrange(len(listed)), listed.pop(rng.randrange(len(listed))))
        return f"reorder nodes ({way})"
    if kind == "copy_node" and nodes:
        node = copy.deepcopy(rng.choice(nodes))
        if rng.random() < 0.5 and isinstance(node.get("id"), str):
            node["id"] = node["id"] + "_copy"
        doc["nodes"].insert(rng.randrange(len(doc["nodes"]) + 1), node)
        return "copy a node"
    if kind == "dtype" and tensors:
        tensor = rng.choice(tensors)
        tensor["dtype"] = rng.choice(_DTYPES) if rng.random() < 0.8 else rng.choice(_BAD_DTYPES)
        return f"tensor dtype -> {tensor['dtype']!a}"
    if kind == "shape" and tensors:
        return _reshape(rng.choice(tensors), rng)
    if kind == "data" and tensors:
        return _change_data(rng.choice(tensors), rng)
    if kind == "checksum":
        named = [e for e in entries.values() if isinstance(e, dict)]
        if named:
            entry = rng.choice(named)
            old = entry.get("checksum")
            way = rng.choice(("flip", "upper", "algorithm", "drop", "junk"))
            if way == "flip" and isinstance(old, str) and old:
                entry["checksum"] = old[:-1] + ("0" if old[-1] != "0" else "1")
            elif way == "upper" and isinstance(old, str):
                entry["checksum"] = old.upper()
            elif way == "algorithm" and isinstance(old, str):
                entry["checksum"] = rng.choice(("sha256:", "md5:", "xxh3-64:", "XXH3-64:", "")) + old.partition(":")[2]
            elif way == "drop":
                entry.pop("checksum", None)
            else:
                entry["checksum"] = rng.choice(("xxh3-64:" + "0" * 16, "sha256:" + "0" * 64, 12, None, "", "x" * 10**5))
            return f"entry checksum ({way})"
    if kind == "external":
        external = [t for t in tensors if isinstance(t.get("external"), dict)]
        if external:
            reference = rng.choice(external)["external"]
            member = rng.choice(("path", "path", "key", "checksum", "extra"))
            if member == "path":
                reference["path"] = rng.choice(EXTERNAL_PATHS)
            elif member == "key":
                keys = [t["external"].get("key") for t in external]
                reference["key"] = rng.choice((*keys, "__metadata__", "", "nope", "\udc80"))
            elif member == "checksum" and isinstance(reference.get("checksum"), str):
                reference["checksum"] = reference["checksum"][:-1] + "f"
            else:
                reference[rng.choice(("mtime", "offset", "size"))] = 1
            return f"external {member} -> {str(reference.get(member, ''))[:30]!a}"
        if tensors:  # point an inline tensor at a file
            tensor = rng.choice(tensors)
            tensor.pop("data", None)
            tensor["external"] = {"path": rng.choice(EXTERNAL_PATHS), "key": "w", "checksum": "xxh3-64:" + "0" * 16}
            return "inline tensor made external"
    if kind == "facts":
        return _extreme_facts(doc, rng)
    if kind == "version":
        return _any_version(doc, rng)
    if kind == "settings":
        scalars = [e for e in entries.values() if isinstance(e, dict) and type(e.get("value")) in (int, float, list)]
        if scalars:
            return _extreme_setting(rng.choice(scalars), "value", rng)
    if kind == "table" and entries:
        name = rng.choice(list(entries))
        way = rng.choice(("drop", "rename", "alias", "inline"))
        if way == "drop":
            del entries[name]
        elif way == "rename":
            entries[rng.choice((name + "_", name.upper(), rng.choice(ids), rng.choice(HOSTILE_STRINGS)))] = entries.pop(
                name
            )
        elif way == "alias" and nodes:
            node = rng.choice(nodes)
            if isinstance(node.get("parameters"), dict) and node["parameters"]:
                node["parameters"][rng.choice(list(node["parameters"]))] = {"name": name}
        else:
            holder = rng.choice(nodes) if nodes else None
            if holder is not None and isinstance(holder.get("parameters"), dict):
                holder["parameters"]["inline"] = copy.deepcopy(entries[name])
        return f"table entry ({way})"
    if kind == "metadata":
        where = doc if rng.random() < 0.5 or not nodes else rng.choice(nodes)
        where["metadata"] = _hostile_metadata(rng)
        return "metadata"
    if kind == "outputs" and nodes:
        node = rng.choice(nodes)
        if isinstance(node.get("outputs"), list):
            return _outputs_list(node, "outputs", rng)
    if kind == "bindings" and nodes:
        node = rng.choice(nodes)
        node["output_bindings"] = rng.choice(
            (None, {}, {"y": {"node": "%input", "output": "x"}}, {"y": {"node": rng.choice(ids), "output": "y"}})
        )
        return "node output_bindings"
    if kind == "nest_value" and entries:
        entry = rng.choice([e for e in entries.values() if isinstance(e, dict)] or [{}])
        entry["value"] = rng.choice((deep(rng), Raw("[" * 100 + "1" + "]" * 100), [[[[1]]]], [1, [2, [3, ["x"]]]]))
        return "nested list value"
    return mutate_json(root, rng)


# --- what both forms' mutations share ---------------------------------------------------------------


def _count(values: Any) -> int:
    """How many inputs (or outputs) a member lists: one where a mutation left no list."""
    return len(values) if isinstance(values, list) else 1


def _extreme_facts(doc: dict[str, Any], rng: random.Random) -> str:
    member = rng.choice(("input_facts", "output_facts"))
    count = _count(doc.get("inputs" if member == "input_facts" else "outputs", []))
    count = max(0, count + rng.choice((0, 0, 0, 1, -1)))
    doc[member] = [
        None
        if rng.random() < 0.1
        else {
            "dtype": rng.choice((*_DTYPES, None, "int4")),
            "shape": [rng.choice(_SIZES) for _ in range(rng.choice((0, 1, 2, 2, 3, 4, 65)))],
        }
        for _ in range(count)
    ]
    return f"{member} set"


def _any_version(doc: dict[str, Any], rng: random.Random) -> str:
    doc["format_version"] = rng.choice(_VERSIONS) if rng.random() < 0.9 else rng.choice(EXTREME_NUMBERS)
    return f"format_version -> {str(doc['format_version'])[:30]!a}"


def _reshape(tensor: dict[str, Any], rng: random.Random) -> str:
    old_shape = tensor.get("shape")
    shape: list[Any] = list(old_shape) if isinstance(old_shape, list) else []
    way = rng.choice(("dim", "add", "drop", "reverse", "rank"))
    if way == "dim" and shape:
        shape[rng.randrange(len(shape))] = rng.choice(_SIZES)
    elif way == "add":
        shape.insert(rng.randint(0, len(shape)), rng.choice((1, 1, 2, 0)))
    elif way == "drop" and shape:
        shape.pop(rng.randrange(len(shape)))
    elif way == "reverse":
        shape.reverse()
    else:
        shape = [1] * rng.choice((64, 65, 1000))
    tensor["shape"] = shape
    return f"tensor shape ({way})"


def _change_data(tensor: dict[str, Any], rng: random.Random) -> str:
    data = tensor.get("data")
    if isinstance(data, str):
        way = rng.choice(("char", "same_length", "cut", "pad", "space", "urlsafe", "unicode", "long"))
        if way == "char" and data:
            at = rng.randrange(len(data))
            data = data[:at] + rng.choice("ABCabc019+/=") + data[at + 1 :]
        elif way == "same_length":
            raw = bytes(rng.randrange(256) for _ in range(len(base64.b64decode(data + "==="[: -len(data) % 4]))))
            data = base64.b64encode(raw).decode()
        elif way == "cut":
            data = data[: rng.randint(0, len(data))]
        elif way == "pad":
            data += rng.choice(("=", "==", "AAAA", "A"))
        elif way == "space":
            at = rng.randint(0, len(data))
            data = data[:at] + rng.choice((" ", "\n", "\t", "\r\n")) + data[at:]
        elif way == "urlsafe":
            data = data.replace("+", "-").replace("/", "_")
        elif way == "unicode":
            at = rng.randint(0, len(data))
            data = data[:at] + rng.choice(("é", "\x00", "\ud800", "\uff21")) + data[at:]
        else:
            data = "A" * rng.choice((4 * 10**5, 4 * 10**6 + 4))
        tensor["data"] = data
        return f"tensor data ({way})"
    tensor["data"] = rng.choice(("", "AAAA", None, 0))
    return "tensor data where there was none"


def _hostile_metadata(rng: random.Random) -> Any:
    return rng.choice(
        (
            {"producer": {"name": rng.choice(HOSTILE_STRINGS), "version": random_string(rng)}},
            {rng.choice(HOSTILE_STRINGS): random_string(rng)},
            {"big": "x" * 2_000_000},
            {"many": {str(k): k for k in range(20_000)}},
            {"deep": deep(rng)},
            {"producer": "not an object"},
            [1, 2],
            None,
        )
    )


def _extreme_setting(container: Any, key: Any, rng: random.Random) -> str:
    """The plain setting at ``container[key]`` (a number or a list) taken to an extreme."""
    value = container[key]
    if isinstance(value, list) and value:
        value[rng.randrange(len(value))] = rng.choice((*_SIZES, *EXTREME_NUMBERS))
    else:
        container[key] = rng.choice((*_SIZES, *EXTREME_NUMBERS))
    return "setting to an extreme"


def _small_setting(container: Any, key: Any, rng: random.Random) -> str:
    """The plain setting at ``container[key]`` set to a small value of its kind."""
    value = container[key]
    small = (0, 1, 2, 3, -1, -2, 7, 64)
    if isinstance(value, list):
        container[key] = [rng.choice(small) for _ in range(rng.choice((0, 1, 2, 3, len(value))))]
    elif type(value) is bool:
        container[key] = not value
    elif type(value) is float:
        container[key] = rng.choice((0.0, -1.0, 1e-12, 1e30, 0.5, 2.0))
    else:
        container[key] = rng.choice(small)
    return "small setting"


def _coherent_tensor(old: dict[str, Any], rng: random.Random) -> tuple[str, list[int], bytes]:
    """A new tensor near ``old`` (a dtype, a shape of small sizes) and random bytes of its size."""
    from trama.format._dtypes import numpy_dtype

    shape = list(old.get("shape", [])) if isinstance(old.get("shape"), list) else []
    if shape and rng.random() < 0.6:
        shape[rng.randrange(len(shape))] = rng.choice((0, 1, 2, 3, 5, 8))
    elif rng.random() < 0.5:
        shape = [*shape, rng.choice((1, 2))] if len(shape) < 4 else shape[:-1]
    shape = [d if type(d) is int and 0 <= d <= 64 else 2 for d in shape]
    dtype = old.get("dtype") if old.get("dtype") in _DTYPES and rng.random() < 0.7 else rng.choice(_DTYPES)
    size = math.prod(shape) * numpy_dtype(dtype).itemsize
    raw = bytes(rng.randrange(2) if dtype == "bool" else rng.randrange(256) for _ in range(size))
    return dtype, shape, raw


def _plausible_facts(doc: dict[str, Any], rng: random.Random) -> str:
    member = rng.choice(("input_facts", "output_facts"))
    count = _count(doc.get("inputs" if member == "input_facts" else "outputs", []))
    doc[member] = [
        {
            "dtype": rng.choice(("float32", "float32", "float64", "int64", "bool")),
            "shape": [rng.choice((1, 2, 3, 4, 8, "batch", "n")) for _ in range(rng.choice((1, 2, 3, 4)))],
        }
        for _ in range(count)
    ]
    return f"plausible {member}"


def _reorder_outputs(doc: dict[str, Any], rng: random.Random) -> str:
    rng.shuffle(doc["outputs"])
    doc.pop("output_facts", None)
    return "model outputs reordered"


def _outputs_list(node: dict[str, Any], member: str, rng: random.Random) -> str:
    """A node's list of output names changed: one repeated, dropped, renamed, or ten thousand."""
    outputs = node[member]
    way = rng.choice(("repeat", "drop", "rename", "many"))
    if way == "repeat" and outputs:
        outputs.append(outputs[0])
    elif way == "drop" and outputs:
        outputs.pop()
    elif way == "rename" and outputs:
        outputs[0] = rng.choice(("z", "y2", *HOSTILE_STRINGS))
    else:
        node[member] = [f"o{k}" for k in range(10_000)]
    return f"node outputs ({way})"


_SAME_SIGNATURE = ("relu", "sigmoid", "tanh", "gelu", "abs", "neg", "exp", "sqrt", "ReLU", "Tanh", "Sigmoid")


def _gentle_mutation(root: dict[str, Any], rng: random.Random) -> str:
    """A change that keeps the document well-formed, so that it reaches the registry, the
    runtimes and the run: a tensor replaced by another coherent one (its data and checksum
    matching a new dtype and shape), small settings, plausible facts, an op of the same
    signature, a checksum dropped, an entry renamed everywhere, the model outputs reordered."""
    from trama.format._tensor import tensor_checksum

    doc = root["doc"]
    if not isinstance(doc, dict):
        return mutate_json(root, rng)
    if _is_nested(doc):
        return _nested_gentle(root, rng)
    entries = _entries(doc)
    kind = rng.choice(("tensor", "tensor", "setting", "setting", "facts", "op", "checksum", "rename", "outputs"))
    if kind == "tensor":
        holders = [e for e in entries.values() if isinstance(e, dict) and isinstance(e.get("value"), dict)]
        if holders:
            entry = rng.choice(holders)
            dtype, shape, raw = _coherent_tensor(entry["value"], rng)
            entry["value"] = {"dtype": dtype, "shape": shape, "data": base64.b64encode(raw).decode()}
            if "checksum" in entry or rng.random() < 0.5:
                entry["checksum"] = tensor_checksum(dtype, shape, raw)
            return f"coherent tensor {dtype}{shape}"
    if kind == "setting":
        scalars = [
            e for e in entries.values() if isinstance(e, dict) and type(e.get("value")) in (int, float, bool, list)
        ]
        if scalars:
            return _small_setting(rng.choice(scalars), "value", rng)
    if kind == "facts":
        return _plausible_facts(doc, rng)
    if kind == "op":
        leaves = [n for n in _nodes(doc) if n.get("op") in _SAME_SIGNATURE]
        if leaves:
            node = rng.choice(leaves)
            node["op"] = rng.choice(_SAME_SIGNATURE)
            return f"op -> {node['op']}"
    if kind == "checksum":
        summed = [e for e in entries.values() if isinstance(e, dict) and "checksum" in e]
        if summed:
            rng.choice(summed).pop("checksum")
            return "checksum dropped"
    if kind == "rename" and entries:
        name = rng.choice(list(entries))
        new = f"renamed.e{rng.randrange(1000)}"
        entries[new] = entries.pop(name)
        for node in _nodes(doc):
            for ref in (node.get("parameters") or {}).values() if isinstance(node.get("parameters"), dict) else ():
                if isinstance(ref, dict) and ref.get("name") == name:
                    ref["name"] = new
        return "entry renamed everywhere"
    if kind == "outputs" and isinstance(doc.get("outputs"), list):
        return _reorder_outputs(doc, rng)
    return _document_mutation(root, rng, None)


# --- the nested form (format 1.3) ------------------------------------------------------------------


def _is_nested(doc: Any) -> bool:
    """Whether ``doc`` is a nested document (format 1.3): its nodes have names, not ids."""
    if not isinstance(doc, dict):
        return False
    nodes = doc.get("nodes")
    for node in nodes if isinstance(nodes, list) else ():
        if isinstance(node, dict) and ("id" in node or "name" in node):
            return "id" not in node
    return "blocks" in doc or "weights" in doc or doc.get("format_version") == "1.3"


@dataclass
class _Held:
    """A node object of a nested document: the array holding it, its id (inside a block body,
    relative to the instance, as a body's ``calls`` are) and the block whose body holds it."""

    node: dict[str, Any]
    scope: list[Any]
    node_id: str
    block: str | None


def _blocks(doc: dict[str, Any]) -> dict[str, Any]:
    blocks = doc.get("blocks")
    return blocks if isinstance(blocks, dict) else {}


def _held(doc: dict[str, Any]) -> list[_Held]:
    """Every node object of a nested document, the tree's then each block body's (iteratively:
    a mutated document may be deep)."""
    found: list[_Held] = []
    stack: list[tuple[list[Any], str, str | None]] = []
    for name, block in reversed(list(_blocks(doc).items())):
        if isinstance(block, dict) and isinstance(block.get("nodes"), list):
            stack.append((block["nodes"], "", name))
    if isinstance(doc.get("nodes"), list):
        stack.append((doc["nodes"], "", None))
    while stack:
        scope, prefix, block = stack.pop()
        for node in scope:
            if not isinstance(node, dict):
                continue
            node_id = f"{prefix}{node.get('name')}"
            found.append(_Held(node, scope, node_id, block))
            if isinstance(node.get("nodes"), list):
                stack.append((node["nodes"], f"{node_id}.", block))
    return found


def _scopes(doc: dict[str, Any], held: list[_Held]) -> list[list[Any]]:
    """Every array of node objects: the tree's top level, each block body, each composite's."""
    scopes = [doc["nodes"]] if isinstance(doc.get("nodes"), list) else []
    scopes += [b["nodes"] for b in _blocks(doc).values() if isinstance(b, dict) and isinstance(b.get("nodes"), list)]
    return scopes + [h.node["nodes"] for h in held if isinstance(h.node.get("nodes"), list)]


def _ref_slots(doc: dict[str, Any], held: list[_Held]) -> list[tuple[Any, Any]]:
    """(container, key) of every reference string: the model outputs, each node's ``in`` and a
    composite's (or block's) ``out``."""
    slots: list[tuple[Any, Any]] = []
    outputs = doc.get("outputs")
    if isinstance(outputs, list):
        slots += [(outputs, k) for k in range(len(outputs))]
    for h in held:
        wires = h.node.get("in")
        if isinstance(wires, str):
            slots.append((h.node, "in"))
        elif isinstance(wires, dict):
            slots += [(wires, port) for port in wires]
    composites = [h.node for h in held] + [b for b in _blocks(doc).values() if isinstance(b, dict)]
    for node in composites:
        out = node.get("out")
        if isinstance(out, dict):
            slots += [(out, key) for key in out]
    return slots


@dataclass
class _Value:
    """A value of a nested document: ``container[key]``; ``owner`` the id of the node whose
    ``set`` holds it (``None`` for the top-level table, or a block's own set); ``in_body`` where
    it is in a block (each instance gives the tensors it leaves open)."""

    container: dict[str, Any]
    key: str
    owner: str | None
    in_body: bool

    @property
    def value(self) -> Any:
        return self.container[self.key]


def _values(doc: dict[str, Any], held: list[_Held]) -> list[_Value]:
    found: list[_Value] = []
    for h in held:
        values = h.node.get("set")
        if isinstance(values, dict):
            found += [_Value(values, slot, h.node_id, h.block is not None) for slot in values]
    for block in _blocks(doc).values():
        values = block.get("set") if isinstance(block, dict) else None
        if isinstance(values, dict):
            found += [_Value(values, slot, None, True) for slot in values]
    table = doc.get("parameters")
    if isinstance(table, dict):
        found += [_Value(table, name, None, False) for name in table]
    return found


def _fills(held: list[_Held]) -> list[tuple[list[Any], int]]:
    """(array, index) of every tensor an instance gives (its ``tensors``)."""
    return [
        (h.node["tensors"], k)
        for h in held
        if isinstance(h.node.get("tensors"), list)
        for k in range(len(h.node["tensors"]))
    ]


def _is_tensor(value: Any) -> bool:
    return isinstance(value, dict) and "shape" in value


def _first_input(doc: dict[str, Any]) -> str:
    inputs = doc.get("inputs")
    return inputs[0] if isinstance(inputs, list) and inputs and isinstance(inputs[0], str) else "x"


def _ports_reading(ports: Any) -> Any:
    """An instance's ``in`` feeding each of ``ports`` from the scope's input of the same name."""
    if ports == ["x"]:
        return "%x"
    return {port: f"%{port}" for port in ports} if isinstance(ports, list) else "%x"


def _make_instance(doc: dict[str, Any], held: list[_Held], rng: random.Random) -> str | None:
    """A composite of the tree made an instance of a new block whose body is its own (its
    tensors stay in the body, given there once for every instance): valid, when the composite
    reads nothing outside itself, and a way to blocks for a document that had none."""
    composites = [
        h
        for h in held
        if h.block is None and "use" not in h.node and isinstance(h.node.get("out"), dict) and "calls" not in h.node
    ]
    if not composites:
        return None
    target = rng.choice(composites)
    node = target.node
    wires = node.get("in")
    ports = ["x"] if isinstance(wires, str) else list(wires) if isinstance(wires, dict) else []
    block = {"in": ports}
    block.update({k: copy.deepcopy(v) for k, v in node.items() if k in ("op", "class", "meta", "set", "nodes", "out")})
    if not isinstance(doc.get("blocks"), dict):
        doc["blocks"] = {}
    name = f"Made{len(doc['blocks'])}"
    doc["blocks"][name] = block
    instance: dict[str, Any] = {"name": node.get("name"), "use": name}
    if wires is not None:
        instance["in"] = wires
    target.scope[target.scope.index(node)] = instance
    return f"composite {target.node_id[:30]!a} made an instance of a new block"


def _bomb(doc: dict[str, Any], rng: random.Random) -> str:
    """Blocks nested ``levels`` deep, each using the one below 8 times, and an instance of the
    top one: 8^levels nodes from a few lines (3 levels: 512, a model that runs)."""
    levels = rng.choice((2, 3, 6, 12))
    blocks = doc["blocks"] = dict(_blocks(doc))
    blocks["Bomb0"] = {"in": ["x"], "nodes": [{"name": "r", "op": "relu", "in": "%x"}], "out": {"y": "r"}}
    for level in range(1, levels + 1):
        body = [{"name": f"i{k}", "use": f"Bomb{level - 1}", "in": "%x" if k == 0 else f"i{k - 1}"} for k in range(8)]
        blocks[f"Bomb{level}"] = {"in": ["x"], "nodes": body, "out": {"y": "i7"}}
    if not isinstance(doc.get("nodes"), list):
        doc["nodes"] = []
    doc["nodes"].append({"name": "bomb", "use": f"Bomb{levels}", "in": f"%{_first_input(doc)}"})
    if isinstance(doc.get("outputs"), list) and rng.random() < 0.5:
        doc["outputs"].append("bomb")
        doc.pop("output_facts", None)
    return f"expansion bomb of {levels} levels"


_NESTED_KINDS = (
    "refs",
    "op",
    "name",
    "calls",
    "order",
    "copy_node",
    "dtype",
    "shape",
    "data",
    "checksum",
    "weights",
    "facts",
    "version",
    "settings",
    "table",
    "metadata",
    "outputs",
    "bindings",
    "nest_value",
    "blocks",
    "blocks",
    "instance",
    "instance",
    "class",
)


def _nested_mutation(root: dict[str, Any], rng: random.Random, seed: Seed | None) -> str:
    """:func:`_document_mutation` for a nested document: the same attacks in its terms, and
    those on what only it has (blocks, instances, relative classes, the weights file named once)."""
    doc = root["doc"]
    kind = rng.choice(_NESTED_KINDS)
    if seed is not None and seed.name.startswith("external") and rng.random() < 0.4:
        kind = "weights"  # the seeds whose paths lead somewhere: aim at them more often
    held = _held(doc)
    names = [h.node["name"] for h in held if isinstance(h.node.get("name"), str)] or ["x"]
    values = _values(doc, held)
    fills = _fills(held)
    tensors = [v.value for v in values if _is_tensor(v.value)]
    given = [lst[k] for lst, k in fills if isinstance(lst[k], dict)]  # an instance's {"data": ...}
    if kind == "refs":
        slots = _ref_slots(doc, held)
        if len(slots) >= 2 and rng.random() < 0.4:
            (a, ka), (b, kb) = rng.sample(slots, 2)
            a[ka], b[kb] = b[kb], a[ka]
            return "swap two references"
        if slots:
            container, key = rng.choice(slots)
            name = rng.choice(names)
            container[key] = rng.choice(
                (
                    name,
                    f"{name}.y",
                    f"{name}.nope",
                    f"{name}.y.z",
                    f"%{_first_input(doc)}",
                    "%nope",
                    "%",
                    "",
                    ".",
                    "a..b",
                    rng.choice(HOSTILE_STRINGS),
                    5,
                    None,
                    {"node": name, "output": "y"},
                )
            )
            return f"reference -> {str(container[key])[:30]!a}"
    if kind == "op" and held:
        node = rng.choice(held).node
        if rng.random() < 0.15:
            node.pop("op", None)
            return "op left out"
        node["op"] = rng.choice((*_OPS, random_string(rng)))
        return f"op of {str(node.get('name'))[:30]!a} -> {node['op'][:30]!a}"
    if kind == "name" and held:
        target = rng.choice(held)
        siblings = [n.get("name") for n in target.scope if isinstance(n, dict)]
        old = str(target.node.get("name"))
        target.node["name"] = rng.choice(
            (*siblings, old + "_x", f"{old}.x", "", "0", "01", "%x", "x" * 300, None, 5, rng.choice(HOSTILE_STRINGS))
        )
        return f"name of a node -> {str(target.node['name'])[:30]!a}"
    if kind == "calls" and held:
        target = rng.choice(held)
        pool = [h.node_id for h in held if h.block == target.block]
        for h in held:  # ids inside the expansion of an instance of the tree
            if h.block is None and isinstance(h.node.get("use"), str):
                pool += [f"{h.node_id}.{b.node_id}" for b in held if b.block == h.node["use"]]
        target.node["calls"] = rng.choice((*pool, "nowhere", target.node_id, 5))
        if rng.random() < 0.6:
            target.node.pop("set", None)
            target.node.pop("nodes", None)
            if isinstance(target.node.get("out"), dict):
                del target.node["out"]
        return f"calls on {target.node_id[:30]!a} -> {str(target.node['calls'])[:30]!a}"
    if kind == "order":
        scopes = [scope for scope in _scopes(doc, held) if len(scope) >= 2]
        if scopes:
            listed = rng.choice(scopes)
            way = rng.choice(("shuffle", "reverse", "move"))
            if way == "shuffle":
                rng.shuffle(listed)
            elif way == "reverse":
                listed.reverse()
            else:
                listed.insert(rng.randrange(len(listed)), listed.pop(rng.randrange(len(listed))))
            return f"reorder a scope's nodes ({way})"
    if kind == "copy_node" and held:
        source = rng.choice(held)
        node = copy.deepcopy(source.node)
        if rng.random() < 0.5 and isinstance(node.get("name"), str):
            node["name"] += "_copy"
        scope = source.scope if rng.random() < 0.7 else rng.choice(_scopes(doc, held))
        scope.insert(rng.randrange(len(scope) + 1), node)
        return "copy a node"
    if kind == "dtype" and tensors:
        tensor = rng.choice(tensors)
        if rng.random() < 0.15:
            tensor.pop("dtype", None)
            return "tensor dtype left out (float32)"
        tensor["dtype"] = rng.choice(_DTYPES) if rng.random() < 0.8 else rng.choice(_BAD_DTYPES)
        return f"tensor dtype -> {tensor['dtype']!a}"
    if kind == "shape" and tensors:
        return _reshape(rng.choice(tensors), rng)
    if kind == "data" and (tensors or given):
        with_data = [t for t in (*tensors, *given) if "data" in t]
        return _change_data(rng.choice(with_data or [*tensors, *given]), rng)
    if kind == "checksum":
        places: list[tuple[Any, Any]] = [(t, "checksum") for t in (*tensors, *given) if "checksum" in t]
        places += [(lst, k) for lst, k in fills if isinstance(lst[k], str)]
        if places:
            container, key = rng.choice(places)
            old = container[key]
            way = rng.choice(("flip", "upper", "algorithm", "drop", "junk"))
            if way == "flip" and isinstance(old, str) and old:
                container[key] = old[:-1] + ("0" if old[-1] != "0" else "1")
            elif way == "upper" and isinstance(old, str):
                container[key] = old.upper()
            elif way == "algorithm" and isinstance(old, str):
                prefix = rng.choice(("sha256:", "md5:", "xxh3-64:", "XXH3-64:", "", "xxh3-64"))
                container[key] = prefix + old.rpartition(":")[2]
            elif way == "drop":
                del container[key]  # from an instance's tensors: one fewer
            else:
                container[key] = rng.choice(
                    ("0" * 16, "0" * 15, "g" * 16, "xxh3-64:" + "0" * 16, 12, None, "", "x" * 10**5)
                )
            return f"checksum ({way})"
    if kind == "weights":
        external = [t for t in (*tensors, *given) if isinstance(t.get("external"), dict)]
        stored = [t for t in tensors if "checksum" in t and "data" not in t]  # in the weights file
        way = rng.choice(("path", "path", "path", "drop", "retype", "checksum", "inline"))
        if "weights" in doc and (way in ("path", "drop", "retype") or not stored):
            if way == "drop":
                del doc["weights"]
            elif way == "retype":
                doc["weights"] = rng.choice((5, None, ["weights.safetensors"], {"path": "copy.safetensors"}))
            else:
                doc["weights"] = rng.choice(EXTERNAL_PATHS)
            return f"weights -> {str(doc.get('weights', '(none)'))[:30]!a}"
        if stored:
            tensor = rng.choice(stored)
            if way == "inline":
                tensor["data"] = rng.choice(("", "AAAA", "AAAAAA=="))
                return "a stored tensor given data too"
            if way == "checksum" and isinstance(tensor["checksum"], str):
                tensor["checksum"] = tensor["checksum"][:-1] + "f"
                return "a stored tensor's checksum changed"
            doc["weights"] = rng.choice(EXTERNAL_PATHS)
            return f"weights -> {doc['weights'][:30]!a}"
        if external:
            reference = rng.choice(external)["external"]
            member = rng.choice(("path", "path", "key", "checksum", "extra"))
            if member == "path":
                reference["path"] = rng.choice(EXTERNAL_PATHS)
            elif member == "key":
                reference["key"] = rng.choice(("__metadata__", "", "nope", "\udc80", rng.choice(names)))
            elif member == "checksum" and isinstance(reference.get("checksum"), str):
                reference["checksum"] = reference["checksum"][:-1] + "f"
            else:
                reference[rng.choice(("mtime", "offset", "size"))] = 1
            return f"external {member} -> {str(reference.get(member, ''))[:30]!a}"
        inline = [t for t in (*tensors, *given) if "data" in t]
        if inline:  # point an inline tensor at a file
            tensor = rng.choice(inline)
            tensor.pop("data")
            how = rng.choice(("external", "weights", "checksum alone"))
            if how == "external":
                tensor.pop("checksum", None)
                tensor["external"] = {"path": rng.choice(EXTERNAL_PATHS), "key": "w", "checksum": "0" * 16}
            elif how == "weights":
                doc["weights"] = rng.choice(EXTERNAL_PATHS)
                tensor.setdefault("checksum", "0" * 16)
            return f"inline tensor made external ({how})"
    if kind == "facts":
        return _extreme_facts(doc, rng)
    if kind == "version":
        return _any_version(doc, rng)
    if kind == "settings":
        plain = [v for v in values if type(v.value) in (int, float, list)]
        if plain:
            chosen = rng.choice(plain)
            return _extreme_setting(chosen.container, chosen.key, rng)
    if kind == "table":
        table = doc.get("parameters")
        way = rng.choice(("drop", "rename", "alias", "inline", "hoist", "ref_in_table"))
        if way == "hoist" or not isinstance(table, dict) or not table:
            owned = [v for v in values if v.owner is not None and not v.in_body]
            if owned:  # a value written in its node moved to the table, or written in both
                chosen = rng.choice(owned)
                if not isinstance(doc.get("parameters"), dict):
                    doc["parameters"] = {}
                entry = f"{chosen.owner}.{chosen.key}"
                doc["parameters"][entry] = copy.deepcopy(chosen.value)
                both = rng.random() < 0.3
                if not both:
                    chosen.container[chosen.key] = {"ref": entry}
                return f"value of {entry[:30]!a} in the table{' too' if both else ''}"
        elif isinstance(table, dict) and table:
            name = rng.choice(list(table))
            holders = [h.node for h in held if isinstance(h.node.get("set"), dict)]
            if way == "drop":
                del table[name]
            elif way == "rename":
                new = rng.choice((name + "_", name.upper(), rng.choice(names), rng.choice(HOSTILE_STRINGS)))
                table[new] = table.pop(name)
            elif way == "alias" and holders:
                node = rng.choice(holders)
                slot = rng.choice([*node["set"], "extra"])
                node["set"][slot] = {"ref": rng.choice((name, name, "nowhere", 5))}
            elif way == "inline" and holders:
                rng.choice(holders)["set"]["inline"] = copy.deepcopy(table[name])
            else:
                table[name] = {"ref": rng.choice(list(table))}
            return f"table entry ({way})"
    if kind == "metadata":
        if rng.random() < 0.5 or not held:
            doc["metadata"] = _hostile_metadata(rng)
            return "metadata"
        node = rng.choice(held).node
        if rng.random() < 0.5:
            node["meta"] = rng.choice((_hostile_metadata(rng), {"class": "a.B"}, {}))
            return "a node's meta"
        node["class"] = rng.choice((".Rel", ".", "", "..x", "a.", "a.b.C", 5, None, rng.choice(HOSTILE_STRINGS)))
        return f"a node's class -> {str(node['class'])[:30]!a}"
    if kind == "outputs" and held:
        node = rng.choice(held).node
        out = node.get("out")
        if isinstance(out, list):
            return _outputs_list(node, "out", rng)
        if isinstance(out, dict):
            way = rng.choice(("drop", "add", "rename", "many"))
            if way == "drop" and out:
                del out[rng.choice(list(out))]
            elif way == "add":
                out[rng.choice(("z", "y", "h_n"))] = rng.choice((*names, "%x"))
            elif way == "rename" and out:
                out[rng.choice(HOSTILE_STRINGS)] = out.pop(rng.choice(list(out)))
            else:
                first = next(iter(out.values()), "%x")
                node["out"] = {f"o{k}": first for k in range(10_000)}
            return f"composite outputs ({way})"
        node["out"] = rng.choice((["y", "y"], [], ["a", "b"], "y", 5))
        return "node out"
    if kind == "bindings":
        targets = [h.node for h in held if isinstance(h.node.get("out"), dict) or "nodes" in h.node]
        targets += [b for b in _blocks(doc).values() if isinstance(b, dict)]
        if targets:
            rng.choice(targets)["out"] = rng.choice(
                (None, {}, {"y": "%x"}, {"y": "nope"}, {"y": 5}, ["y"], {"y": rng.choice(names)})
            )
            return "a composite's out"
    if kind == "nest_value" and values:
        chosen = rng.choice(values)
        chosen.container[chosen.key] = rng.choice(
            (deep(rng), Raw("[" * 100 + "1" + "]" * 100), [[[[1]]]], [1, [2, [3, ["x"]]]])
        )
        return "nested list value"
    if kind == "blocks":
        blocks = _blocks(doc)
        way = rng.choice(("self", "cycle", "drop", "rename", "ports", "out", "bomb", "body_tensor", "make"))
        if way == "bomb":
            return _bomb(doc, rng)
        if blocks and way != "make":
            name = rng.choice(list(blocks))
            block = blocks[name]
            if way in ("self", "cycle") and isinstance(block, dict) and isinstance(block.get("nodes"), list):
                other = rng.choice([b for b in blocks if b != name] or [name]) if way == "cycle" else name
                block["nodes"].append({"name": "again", "use": other, "in": _ports_reading(blocks[other].get("in"))})
                if other != name and isinstance(blocks[other], dict) and isinstance(blocks[other].get("nodes"), list):
                    blocks[other]["nodes"].append({"name": "back", "use": name, "in": _ports_reading(block.get("in"))})
                return f"block {name!a} uses {other!a}" + (" and back" if other != name else "")
            if way == "drop":
                del blocks[name]
                return f"block {name!a} dropped"
            if way == "rename":
                new = rng.choice((name + "_", "0bad", "a.b", "", rng.choice(HOSTILE_STRINGS)))
                blocks[new] = blocks.pop(name)
                return f"block {name!a} renamed {new[:30]!a}"
            if isinstance(block, dict) and way == "ports":
                ports = block.get("in") if isinstance(block.get("in"), list) else []
                block["in"] = rng.choice((ports[::-1], [*ports, "z"], ports[:-1], ["x", "x"], "x", [5], None))
                return "block ports"
            if isinstance(block, dict) and way == "out":
                block["out"] = rng.choice((None, {}, {"y": "%x"}, {"y": "nope"}, {"z": rng.choice(names)}, ["y"]))
                return "block out"
            open_tensors = [v.value for v in values if v.in_body and _is_tensor(v.value) and "data" not in v.value]
            if open_tensors:
                tensor = rng.choice(open_tensors)
                if rng.random() < 0.5:
                    tensor["data"] = rng.choice(("", "AAAAAA==", "AAAA"))
                else:
                    tensor["checksum"] = "0" * 16
                return "a block's open tensor given values in the body"
        made = _make_instance(doc, held, rng)
        if made is not None:
            return made
    if kind == "instance":
        instances = [h for h in held if "use" in h.node]
        if not instances:
            made = _make_instance(doc, held, rng)
            if made is not None:
                return made
        else:
            target = rng.choice(instances)
            node = target.node
            way = rng.choice(("tensors", "tensors", "tensors", "in", "use", "extra", "no_use", "body_tensors"))
            if way == "tensors":
                given_tensors = node.get("tensors")
                if isinstance(given_tensors, list) and given_tensors:
                    how = rng.choice(("drop", "repeat", "reverse", "extra", "swap", "retype", "nest"))
                    others = [
                        h.node for h in instances if h.node is not node and isinstance(h.node.get("tensors"), list)
                    ]
                    if how == "drop":
                        given_tensors.pop(rng.randrange(len(given_tensors)))
                    elif how == "repeat":
                        given_tensors.insert(rng.randrange(len(given_tensors) + 1), rng.choice(given_tensors))
                    elif how == "reverse":
                        given_tensors.reverse()
                    elif how == "extra":
                        given_tensors.append(rng.choice(("0" * 16, {"data": "AAAAAA=="}, {"external": {}}, 5)))
                    elif how == "swap" and others:
                        other = rng.choice(others)
                        node["tensors"], other["tensors"] = other["tensors"], node["tensors"]
                    elif how == "retype":
                        given_tensors[rng.randrange(len(given_tensors))] = rng.choice(
                            (None, 5, {"shape": [2]}, {"data": "AA", "checksum": "0" * 16, "x": 1}, [])
                        )
                    else:
                        node["tensors"] = rng.choice(("0" * 16, {}, [given_tensors], 5))
                    return f"instance tensors ({how})"
                node["tensors"] = rng.choice((["0" * 16], [{"data": "AAAAAA=="}], "x"))
                return "instance tensors where there were none"
            if way == "in":
                wires = node.get("in")
                if isinstance(wires, dict) and wires:
                    node["in"] = rng.choice((dict(reversed(list(wires.items()))), {}, {**wires, "z": "%x"}))
                else:
                    node["in"] = rng.choice(({"x": wires, "z": wires}, {}, None, {"y": wires}))
                return "instance ports"
            if way == "use":
                node["use"] = rng.choice((*_blocks(doc), "nowhere", 5, None, ""))
                return f"instance uses {str(node['use'])[:30]!a}"
            if way == "extra":
                member = rng.choice(("op", "set", "nodes", "out", "class", "calls", "meta"))
                node[member] = copy.deepcopy(rng.choice((*names, {}, [], {"y": "%x"}, "Graph")))
                return f"instance given {member}"
            if way == "no_use":
                node.pop("use")
                return "instance without its block"
            inner = [h.node for h in instances if h.block is not None]
            if inner:
                rng.choice(inner)["tensors"] = ["0" * 16]
                return "an instance in a block body gives tensors"
    if kind == "class" and held:
        target = rng.choice(held)
        classed = [h for h in held if isinstance(h.node.get("class"), str) and not h.node["class"].startswith(".")]
        if classed and rng.random() < 0.4:  # a class that the children's relative ones continue, gone
            del rng.choice(classed).node["class"]
            return "a class left out"
        for block in _blocks(doc).values():
            if isinstance(block, dict) and rng.random() < 0.3:
                block.pop("class", None)
        target.node["class"] = rng.choice((".Rel", ".Rel", ".", "..Rel", ".a.B", "Rel"))
        return f"relative class {target.node['class']!a} on {target.node_id[:30]!a}"
    return mutate_json(root, rng)


def _nested_gentle(root: dict[str, Any], rng: random.Random) -> str:
    """:func:`_gentle_mutation` for a nested document: a coherent new tensor written in a node
    or the table, small settings, plausible facts, an op of the same signature, a checksum
    dropped, a table entry renamed everywhere, the model outputs reordered, two instances of a
    block trading their tensors."""
    from trama.format._tensor import tensor_checksum

    doc = root["doc"]
    held = _held(doc)
    values = _values(doc, held)
    kind = rng.choice(
        ("tensor", "tensor", "setting", "setting", "facts", "op", "checksum", "rename", "outputs", "swap")
    )
    if kind == "tensor":
        holders = [
            v for v in values if not v.in_body and _is_tensor(v.value) and ("data" in v.value or "checksum" in v.value)
        ]
        if holders:
            chosen = rng.choice(holders)
            old = chosen.value
            dtype, shape, raw = _coherent_tensor({"dtype": "float32", **old}, rng)
            new: dict[str, Any] = {"dtype": dtype, "shape": shape}
            if dtype == "float32" and rng.random() < 0.5:
                del new["dtype"]  # the default
            if "learnable" in old:
                new["learnable"] = old["learnable"]
            new["data"] = base64.b64encode(raw).decode()
            if "checksum" in old or rng.random() < 0.5:
                checksum = tensor_checksum(dtype, shape, raw)
                new["checksum"] = checksum.rpartition(":")[2] if rng.random() < 0.7 else checksum
            chosen.container[chosen.key] = new
            return f"coherent tensor {dtype}{shape}"
    if kind == "setting":
        plain = [v for v in values if type(v.value) in (int, float, bool, list)]
        if plain:
            chosen = rng.choice(plain)
            return _small_setting(chosen.container, chosen.key, rng)
    if kind == "facts":
        return _plausible_facts(doc, rng)
    if kind == "op":
        leaves = [h.node for h in held if h.node.get("op") in _SAME_SIGNATURE]
        if leaves:
            node = rng.choice(leaves)
            node["op"] = rng.choice(_SAME_SIGNATURE)
            return f"op -> {node['op']}"
    if kind == "checksum":
        given = [lst[k] for lst, k in _fills(held) if isinstance(lst[k], dict)]
        summed = [
            t for t in (*(v.value for v in values if _is_tensor(v.value)), *given) if "data" in t and "checksum" in t
        ]
        if summed:
            rng.choice(summed).pop("checksum")
            return "checksum dropped"
    if kind == "rename":
        table = doc.get("parameters")
        if isinstance(table, dict) and table:
            name = rng.choice(list(table))
            new_name = f"renamed.e{rng.randrange(1000)}"
            table[new_name] = table.pop(name)
            for value in values:
                if value.container is not table and value.value == {"ref": name}:
                    value.container[value.key] = {"ref": new_name}
            return "table entry renamed everywhere"
    if kind == "outputs" and isinstance(doc.get("outputs"), list):
        return _reorder_outputs(doc, rng)
    if kind == "swap":
        by_block: dict[str, list[dict[str, Any]]] = {}
        for h in held:
            if h.block is None and isinstance(h.node.get("use"), str) and isinstance(h.node.get("tensors"), list):
                by_block.setdefault(h.node["use"], []).append(h.node)
        pairs = [nodes for nodes in by_block.values() if len(nodes) >= 2]
        if pairs:
            a, b = rng.sample(rng.choice(pairs), 2)
            a["tensors"], b["tensors"] = b["tensors"], a["tensors"]
            return "two instances trade their tensors"
    return _nested_mutation(root, rng, None)


def mutate(seed: Seed, rng: random.Random) -> tuple[bytes, list[str]]:
    """The text of one case: the seed's tree, mutated one to five times, rendered, and
    sometimes mutated again as bytes."""
    root = {"doc": copy.deepcopy(seed.tree)}
    done = []
    if rng.random() < GENTLE_SHARE:
        for _ in range(rng.choice((1, 1, 2))):
            done.append(_gentle_mutation(root, rng))
        return render(root["doc"], ascii_only=rng.random() < 0.7), done
    for _ in range(rng.choice((1, 1, 1, 1, 2, 2, 3, 5))):
        if rng.random() < 0.7:
            done.append(_document_mutation(root, rng, seed))
        else:
            done.append(mutate_json(root, rng))
    text = render(root["doc"], ascii_only=rng.random() < 0.7)
    if rng.random() < 1 / 6:
        text, what = mutate_text(text, rng)
        done.append(what)
    return text, done


# --- one case -------------------------------------------------------------------------------------

#: The seeds, built once by the process that forks the cases (a fork inherits them).
SEEDS: list[Seed] = []
RUNTIMES: dict[str, float] = dict(RUNTIME_WEIGHTS)


def _inputs(model: Any, seed: Seed, rng: random.Random) -> list[np.ndarray] | None:
    """Small inputs for ``model``: from its facts (symbols taken as 2) or the seed's examples;
    ``None`` when neither says enough, or the inputs would be large."""
    from trama.format._dtypes import numpy_dtype

    arrays = []
    facts = model.input_facts or []
    for k, name in enumerate(model.inputs):
        fact = facts[k] if k < len(facts) else None
        example = (seed.examples or {}).get(name)
        dtype = (fact.dtype if fact is not None else None) or (example[0] if example else None)
        shape: Any = None
        if fact is not None and fact.shape is not None:
            shape = tuple(2 if isinstance(d, str) else d for d in fact.shape)
        elif example is not None:
            shape = example[1]
        if dtype is None or shape is None or len(shape) > 8 or math.prod(shape) > MAX_INPUT_ELEMENTS:
            return None
        np_dtype = numpy_dtype(dtype)
        generator = np.random.default_rng(rng.randrange(2**32))
        if np_dtype.kind == "f" or dtype == "bfloat16":
            array = generator.standard_normal(shape).astype(np_dtype)
        elif np_dtype.kind == "b":
            array = generator.integers(0, 2, shape).astype(bool)
        else:
            array = generator.integers(0, 4, shape).astype(np_dtype)
        arrays.append(array)
    return arrays


def _touch_tensors(model: Any, seed: Seed) -> Verdict | None:
    """Decode every tensor; a tensor whose recorded checksum is an original's must hold the
    original's dtype, shape and bytes (else the checksum let a change through)."""
    import trama

    for name, parameter in model.parameters.items():
        value = parameter.value
        if not isinstance(value, trama.Tensor):
            continue
        recorded = getattr(value.source, "checksum", None)
        array = value.numpy()
        if isinstance(recorded, str):
            originals = seed.originals.get(recorded.lower())
            if originals is not None:
                got = (value.dtype, tuple(value.shape), np.ascontiguousarray(array).tobytes())
                if got not in originals:
                    return Verdict(
                        "other",
                        "tensors",
                        f"silent corruption: entry {name!a} carries an original checksum but holds "
                        f"{value.dtype}{list(value.shape)} with other bytes",
                    )
    return None


def _views(model: Any, text: bytes, folder: Path) -> Verdict | None:
    """The review views render with nothing raw in them, and dumps writes what loads back."""
    import trama
    from trama.tools import render_summary, summarize, to_ssa

    for view, rendered in (("ssa", to_ssa(model)), ("info", render_summary(summarize(model)))):
        raw = RAW_CONTROL.search(rendered)
        if raw is not None:
            return Verdict("other", "views", f"trama {view} prints a raw {raw.group()!a}")
    again = trama.loads(trama.dumps(model), base_dir=folder)
    again.source_format_version = model.source_format_version  # dumps writes the current version
    # The nested text lists every node after its parent's earlier children, depth first: a flat
    # document whose scopes interleave comes back in that order, the same model otherwise.
    expected = dataclasses.replace(model, nodes=_depth_first(model.nodes))
    if again != expected:
        return Verdict("other", "views", "dumps then loads gives another model")
    return None


def _depth_first(nodes: list[Any]) -> list[Any]:
    """``nodes`` with each node followed by its subtree, siblings in their order."""
    from trama.format import children_by_parent

    children = children_by_parent(nodes)
    ordered: list[Any] = []
    stack = list(reversed(children.get(None, [])))
    while stack:
        node = stack.pop()
        ordered.append(node)
        stack.extend(reversed(children.get(node.id, [])))
    return ordered


def _validate_agrees(text: bytes, folder: Path, format_ok: bool, detail: str) -> Verdict | None:
    """``trama validate`` (every problem, the JSON Schema included) says ok exactly when
    loading and decoding every tensor succeeds."""
    from trama.format._problems import document_problems

    problems = document_problems(text, folder, schema=True)
    if format_ok and problems:
        return Verdict("other", "validate", f"load accepts, validate refuses: {problems[0]}")
    if not format_ok and not problems:
        return Verdict("other", "validate", f"validate says ok, load refuses: {detail}")
    return None


def classify(text: bytes, seed: Seed, rng: random.Random) -> Verdict:
    """Every stage of one case (see the module docstring); the first that decides, decides."""
    import trama

    folder = seed.path.parent
    verdict: Verdict | None = None
    model: Any = None
    stage = "load"
    try:
        if rng.random() < 0.3:
            path = folder / f".fuzz-{os.getpid()}.trama.json"
            path.write_bytes(text)
            try:
                model = trama.load(path, mmap_weights=rng.random() < 0.5)
            finally:
                path.unlink()
        else:
            model = trama.loads(text, base_dir=folder, mmap_weights=rng.random() < 0.5)
        stage = "tensors"
        verdict = _touch_tensors(model, seed)
    except BaseException as error:
        if isinstance(error, KeyboardInterrupt):
            raise
        verdict = verdict_of(error, stage)
    format_ok = verdict is None
    if rng.random() < VALIDATE_SHARE:
        try:
            disagreement = _validate_agrees(text, folder, format_ok, verdict.detail if verdict else "")
        except BaseException as error:
            disagreement = verdict_of(error, "validate")
            if disagreement.outcome == "refused":  # validate reports problems, it does not raise them
                disagreement = Verdict("other", "validate", "validate raised " + disagreement.detail)
        if disagreement is not None:
            return disagreement
    if verdict is not None:
        return verdict
    try:
        stage = "views"
        verdict = _views(model, text, folder)
        if verdict is not None:
            return verdict
    except BaseException as error:
        found = verdict_of(error, stage)
        return Verdict("other", stage, found.detail)  # the model was accepted: its views must work
    try:
        stage = "registry"
        trama.validate(model, trama.registry())
        names = list(RUNTIMES)
        runtime = rng.choices(names, weights=[RUNTIMES[n] for n in names])[0]
        stage = f"prepare:{runtime}"
        runnable = trama.runtime_for_name(runtime).prepare(model)
        inputs = _inputs(model, seed, rng)
        if inputs is None:
            return Verdict("accepted", "not run")
        stage = f"run:{runtime}"
        runnable.run(inputs)
    except BaseException as error:
        if isinstance(error, KeyboardInterrupt):
            raise
        return verdict_of(error, stage)
    return Verdict("accepted", "ran")


#: The share of cases also checked by the ``trama validate`` engine (its JSON Schema pass is the
#: costliest stage of a small document).
VALIDATE_SHARE = 0.5


def run_case(seed: int, index: int) -> dict[str, Any]:
    """Case ``index`` of ``seed``: its verdict, the seed document and the mutations."""
    import warnings

    rng = random.Random(f"{seed}/{index}")
    chosen = rng.choice(SEEDS)
    text, done = mutate(chosen, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # overflow in a run on garbage weights is no defect
        verdict = classify(text, chosen, rng)
    return {**verdict.as_dict(), "seed": chosen.name, "mutations": done}


def case_function(seed: int) -> Callable[[int], dict[str, Any]]:
    return lambda index: run_case(seed, index)


# --- the command line -------------------------------------------------------------------------------


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--runtimes",
        default=",".join(RUNTIME_WEIGHTS),
        help="runtimes accepted cases run on, comma-separated (default: %(default)s)",
    )
    parser.add_argument("--no-torch", action="store_true", help="leave out the seeds exported from torch")
    parser.add_argument("--keep", help="build the seeds in this folder and keep them (default: a temporary one)")


#: Folders :func:`_prepare` made, removed by :func:`_cleanup` after a run.
_MADE: list[Path] = []


def _cleanup() -> None:
    while _MADE:
        shutil.rmtree(_MADE.pop(), ignore_errors=True)


def _prepare(args: argparse.Namespace) -> Callable[[int], dict[str, Any]]:
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="fuzz-documents-"))
    if not args.keep:
        _MADE.append(folder)
    folder.mkdir(parents=True, exist_ok=True)
    SEEDS[:] = build_seeds(folder, with_torch=not args.no_torch)
    wanted = [name for name in args.runtimes.split(",") if name]
    RUNTIMES.clear()
    RUNTIMES.update({name: RUNTIME_WEIGHTS.get(name, 0.1) for name in wanted})
    if "jax:cpu" in RUNTIMES:
        import jax  # noqa: F401 - imported before the forks, started in each child that runs it
    return case_function(args.seed)


def _describe(args: argparse.Namespace, index: int) -> str:
    """Replay case ``index`` here: write its text beside the seeds, show the verdict and, for an
    ``other``, the traceback of the failure."""
    case = _prepare(args)
    rng = random.Random(f"{args.seed}/{index}")
    chosen = rng.choice(SEEDS)
    text, done = mutate(chosen, rng)
    out = chosen.path.parent / f"case-{args.seed}-{index}.trama.json"
    out.write_bytes(text)
    lines = [f"seed document: {chosen.name} ({chosen.path})", f"mutations: {'; '.join(done)}", f"case text: {out}"]
    result = case(index)
    lines.append(f"verdict: {result['outcome']} at {result['stage']}: {result['detail']}")
    if result["outcome"] == "other":
        import trama

        try:
            model = trama.loads(text, base_dir=chosen.path.parent)
            trama.validate(model, trama.registry())
        except BaseException:
            lines.append(traceback.format_exc())
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m reliability.fuzz_documents [--cases N] [--seed S] [--case I]``."""
    return fuzz_main(
        "fuzz_documents", argv, prepare=_prepare, describe=_describe, add_arguments=_add_arguments, cleanup=_cleanup
    )


if __name__ == "__main__":
    raise SystemExit(main())
