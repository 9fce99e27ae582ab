"""A catalogue of hostile inputs: small named builders that write an attack into a folder.

Each :class:`Hostile` case is one way a file from anywhere can try to hang, crash, exhaust or
fool trama: the cases of issue 14 (expansion bombs, special files, symlinks out of the folder,
bad characters in paths, huge facts and settings, silent dtype swaps, deep trees, forged review
text, text that skips the checks, bad safetensors, the command line's files) and variants of
them (truncated and empty files, byte order marks, numbers past every range, duplicate keys,
text that is not UTF-8...), and those of the nested form of format 1.3 (a block expansion bomb,
blocks that use themselves, an instance short of a tensor, a relative class with nothing to
continue). Builders that attack the flat structure (ids, parents, the parameter table, external
references) write the flat form of format 1.2, which every trama still reads; a clean document
written by trama itself is in the format ``dump`` writes now. ``case.build(folder)`` writes the
files and returns the path to hand to a command; nothing is written outside ``folder`` (a few
cases *point* outside it, at ``/``, ``/etc`` or ``/dev/zero``, which is the attack).

The catalogue says, per case, what a correct trama does with it (:attr:`Hostile.valid`: whether
the document is a valid one that ``validate``, ``ssa`` and ``info`` accept, such as an expansion
bomb the format does not bound; :attr:`Hostile.runs`: whether ``run`` succeeds), so that a test
can check the verdict and not only the absence of a traceback. :data:`FLAG_CASES` are hostile
command lines rather than hostile documents: ``--input`` files and ``--output`` targets.

Builders use only the standard library and numpy, and write small files (the largest, the
schema-heavy document, is 1.6 MB), so the whole catalogue builds in well under a second.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "CASES",
    "DOCUMENT_COMMANDS",
    "FLAG_CASES",
    "FlagCase",
    "Hostile",
    "by_name",
    "safetensors_bytes",
    "split_safetensors",
]

#: The commands that read a document (``trama --help``): each is run on every case.
DOCUMENT_COMMANDS = ("validate", "ssa", "info", "run", "profile")

Doc = dict[str, Any]


@dataclass(frozen=True)
class Hostile:
    """One hostile input and what trama must do with it.

    ``valid``: the document is valid (``validate`` prints ok, ``ssa`` and ``info`` render it);
    otherwise all three refuse it (exit 1). ``runs``: ``trama run`` (and ``profile``) succeed on
    it with ``run_args``; otherwise they refuse it (exit 1). ``lazy``: the problem is in tensor
    data that trama checks on first use, by design (docs/format.md section 5.4), so ``ssa`` and
    ``info``, which never read tensor values, may render it although ``validate`` and ``run``
    refuse it. ``frameworks``: the attack aims at a framework (facts, settings, deep trees),
    so ``run`` is also tried on ``torch:cpu`` and ``jax:cpu``. ``memory_mb``/``timeout_s``: the
    bounds a command gets on this case (the defaults are generous; a case about cost is given
    tight ones). ``mentions``: a regular expression the refusal line must match, where the
    issue was the message itself. ``needs``: an ``os`` function the case needs (``mkfifo``,
    ``symlink``); the case is skipped where it is missing. ``stdin``: ``validate -`` also reads
    the document from standard input (not for what is not a regular file, nor for the large
    files, where it would only cost time). ``import_refuses``: a valid document whose settings
    the catalog refuses at import (``arange`` past the size bound): ``ssa`` and ``info`` render
    it, and ``validate``, which checks what import would refuse, refuses it.
    """

    name: str
    what: str
    build: Callable[[Path], Path]
    valid: bool = False
    runs: bool = False
    lazy: bool = False
    frameworks: bool = False
    run_args: Callable[[Path], list[str]] | None = None
    memory_mb: int = 1_500
    timeout_s: float = 60.0
    mentions: str | None = None
    needs: str | None = None
    stdin: bool = True
    import_refuses: bool = False

    def expected_status(self, command: str) -> int:
        """The exit status a correct ``trama COMMAND`` gives on this case."""
        if command in ("run", "profile"):
            return 0 if self.runs else 1
        if command in ("ssa", "info") and self.lazy:
            return 0
        if command == "validate" and self.import_refuses:
            return 1
        return 0 if self.valid else 1


@dataclass(frozen=True)
class FlagCase:
    """A hostile command line: ``build(folder, document)`` returns the arguments after ``trama``
    (``document`` is a small valid model in the folder, with one input ``x`` of float32[2, 4]),
    and ``status`` the exit status a correct trama gives."""

    name: str
    what: str
    build: Callable[[Path, Path], list[str]]
    status: int = 1
    mentions: str | None = None
    needs: str | None = None
    output_created: bool = False


# --- small documents ---------------------------------------------------------------------------


def _ref(node: str, output: str = "y") -> dict[str, str]:
    return {"node": node, "output": output}


X = _ref("%input", "x")


def _leaf(node_id: str, op: str, inputs: dict[str, Any] | None = None, **slots: str) -> Doc:
    return {
        "id": node_id,
        "parent": node_id.rpartition(".")[0] or None,
        "op": op,
        "inputs": {"x": X} if inputs is None else inputs,
        "outputs": ["y"],
        "parameters": {slot: {"name": entry} for slot, entry in slots.items()},
        "output_bindings": None,
    }


def _composite(node_id: str, op: str, bound_to: str, inputs: dict[str, Any] | None = None) -> Doc:
    node = _leaf(node_id, op, inputs)
    node["output_bindings"] = {"y": _ref(bound_to)}
    return node


def _doc(
    nodes: list[Doc],
    parameters: dict[str, Any] | None = None,
    *,
    inputs: Sequence[str] = ("x",),
    output: str | None = None,
    version: str = "1.2",
    **extra: Any,
) -> Doc:
    doc: Doc = {"format_version": version, "inputs": list(inputs)}
    doc.update(extra)
    doc["outputs"] = [_ref(output or nodes[0]["id"])]
    doc["nodes"] = nodes
    doc["parameters"] = parameters or {}
    return doc


def _value(value: Any, learnable: bool = False) -> dict[str, Any]:
    return {"value": value, "learnable": learnable}


def _tensor(array: np.ndarray) -> dict[str, Any]:
    array = np.ascontiguousarray(array)
    dtype = {"float32": "float32", "float64": "float64", "int64": "int64", "bool": "bool"}[str(array.dtype)]
    raw = array.astype(array.dtype.newbyteorder("<")).tobytes()
    return {"dtype": dtype, "shape": list(array.shape), "data": base64.b64encode(raw).decode("ascii")}


def _write(folder: Path, doc: Doc | str | bytes, name: str = "model.trama.json") -> Path:
    path = folder / name
    if isinstance(doc, bytes):
        path.write_bytes(doc)
    elif isinstance(doc, str):
        path.write_bytes(doc.encode("utf-8", "surrogatepass"))
    else:
        path.write_text(json.dumps(doc), encoding="ascii")  # ensure_ascii: lone surrogates as \\uXXXX
    return path


def _linear_doc(features: int = 4, out: int = 2) -> Doc:
    """Linear(features -> out) then relu: a small valid, runnable document (format 1.2)."""
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((out, features)).astype(np.float32)
    return _doc(
        [
            _composite("net", "Sequential", "net.act"),
            _leaf("net.fc", "Linear", in_features="n_in", out_features="n_out", weight="fc.w"),
            _leaf("net.act", "relu", {"x": _ref("net.fc")}),
        ],
        {
            "n_in": _value(features),
            "n_out": _value(out),
            "fc.w": _value(_tensor(weight), learnable=True),
        },
    )


def _trama_linear(
    folder: Path, name: str = "model.trama.json", *, external: bool = False, format_version: str | None = None
) -> Path:
    """The same model written by trama itself (checksums, and a weights file when external),
    in the format ``dump`` writes now unless ``format_version`` asks for another ("1.2": the
    flat form, for a builder that edits the flat structure)."""
    import trama

    model = trama.loads(json.dumps(_linear_doc()))
    path = folder / name
    version = {} if format_version is None else {"format_version": format_version}
    trama.dump(model, path, weights="external" if external else "inline", **version)
    return path


def _x_npy(folder: Path, shape: tuple[int, ...] = (2, 4)) -> list[str]:
    path = folder / "x.npy"
    np.save(path, np.ones(shape, dtype=np.float32))
    return ["--input", f"x={path}"]


# --- safetensors, by hand ----------------------------------------------------------------------


def split_safetensors(raw: bytes) -> tuple[dict[str, Any], bytes]:
    """A well-formed safetensors file's header (parsed) and data section."""
    (length,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + length]), raw[8 + length :]


def safetensors_bytes(header: dict[str, Any] | bytes, data: bytes, *, length: int | None = None) -> bytes:
    """A safetensors file from a header (a dict, or its exact bytes) and a data section; the
    length prefix is the header's true length unless ``length`` says otherwise."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode("utf-8", "surrogatepass")
    return struct.pack("<Q", len(text) if length is None else length) + text + data


def _external_doc(folder: Path, path_in_doc: str, *, name: str = "model.trama.json") -> Path:
    """The small model with its weight stored externally at ``path_in_doc`` (which the caller
    makes hostile). The checksum is the true one of the weight's bytes, so only the path and
    what it leads to can be wrong. Written in the flat form (format 1.2, which every trama still
    reads), whose ``external`` references this edits."""
    real = _trama_linear(folder, "clean.trama.json", external=True, format_version="1.2")
    doc = json.loads(real.read_text())
    for entry in doc["parameters"].values():
        value = entry["value"]
        if isinstance(value, dict) and "external" in value:
            value["external"]["path"] = path_in_doc
    return _write(folder, doc, name)


def _sidecar(folder: Path) -> tuple[Path, Path]:
    """A clean external document, as ``dump`` writes it now, and its weights file (whatever
    name trama gave it: format 1.3 names it once, in the top-level ``weights``)."""
    document = _trama_linear(folder, external=True)
    return document, folder / _weights_named(json.loads(document.read_text()))


def _weights_named(doc: Doc) -> str:
    """The one weights file a document written by trama names (format 1.3 or 1.2)."""
    if "weights" in doc:
        weights: str = doc["weights"]
        return weights
    paths = {
        entry["value"]["external"]["path"]
        for entry in doc["parameters"].values()
        if isinstance(entry["value"], dict) and "external" in entry["value"]
    }
    (path,) = paths
    return path


def _rewrite_sidecar(folder: Path, change: Callable[[dict[str, Any], bytes], bytes]) -> Path:
    document, weights = _sidecar(folder)
    header, data = split_safetensors(weights.read_bytes())
    weights.write_bytes(change(header, data))
    return document


def _tensor_key(header: dict[str, Any]) -> str:
    return next(key for key in header if key != "__metadata__")


# --- builders ----------------------------------------------------------------------------------


def doubling_calls(folder: Path, levels: int = 40) -> Path:
    """Block k calls block k-1 twice: two calling nodes per level, 2^levels leaves once expanded."""
    nodes = [_composite("b0", "Graph", "b0.r"), _leaf("b0.r", "relu")]
    for k in range(1, levels + 1):
        block = f"b{k}"
        nodes.append(_composite(block, "Graph", f"{block}.c1"))
        first = _leaf(f"{block}.c0", "Graph")
        second = _leaf(f"{block}.c1", "Graph", {"x": _ref(f"{block}.c0")})
        for call in (first, second):
            del call["parameters"], call["output_bindings"]
            call["calls"] = f"b{k - 1}"
        nodes += [first, second]
    return _write(folder, _doc(nodes, output=f"b{levels}"))


def chain_of_calls(folder: Path, blocks: int = 4_000) -> Path:
    """About 1 MB of blocks, each holding a call of the block before it: each top-level block
    expands to all the blocks below it, blocks^2 / 2 nodes in all."""
    nodes = [_composite("b0", "Graph", "b0.r"), _leaf("b0.r", "relu")]
    for k in range(1, blocks):
        block = f"b{k}"
        nodes.append(_composite(block, "Graph", f"{block}.c"))
        call = _leaf(f"{block}.c", "Graph")
        del call["parameters"], call["output_bindings"]
        call["calls"] = f"b{k - 1}"
        nodes.append(call)
    return _write(folder, _doc(nodes, output=f"b{blocks - 1}"))


# --- format 1.3: blocks, instances, relative classes ------------------------------------------


def _nested_doc(nodes: list[Doc], outputs: list[str], blocks: dict[str, Doc] | None = None) -> Doc:
    """A nested document (format 1.3) of one input ``x``: ``nodes`` are node objects, ``outputs``
    reference strings."""
    doc: Doc = {"format_version": "1.3", "inputs": ["x"], "outputs": outputs}
    if blocks is not None:
        doc["blocks"] = blocks
    doc["nodes"] = nodes
    return doc


def _relu_block() -> Doc:
    return {"in": ["x"], "nodes": [{"name": "r", "op": "relu", "in": "%x"}], "out": {"y": "r"}}


def block_bomb(levels: int) -> Callable[[Path], Path]:
    """Blocks nested ``levels`` deep, each using the one below 8 times, and one instance of the
    top one: 8^levels nodes from a few lines of text (12 levels: 68 billion). The reader bounds
    the expansion by the text's size, and refuses beyond it before allocating the nodes."""

    def build(folder: Path) -> Path:
        blocks: dict[str, Doc] = {"B0": _relu_block()}
        for level in range(1, levels + 1):
            body = [{"name": f"i{k}", "use": f"B{level - 1}", "in": "%x" if k == 0 else f"i{k - 1}"} for k in range(8)]
            blocks[f"B{level}"] = {"in": ["x"], "nodes": body, "out": {"y": "i7"}}
        return _write(folder, _nested_doc([{"name": "net", "use": f"B{levels}", "in": "%x"}], ["net"], blocks))

    return build


def block_uses_itself(folder: Path) -> Path:
    """A block whose body holds an instance of itself: an expansion without end."""
    loop = {
        "in": ["x"],
        "nodes": [{"name": "r", "op": "relu", "in": "%x"}, {"name": "again", "use": "Loop", "in": "r"}],
        "out": {"y": "again"},
    }
    return _write(folder, _nested_doc([{"name": "net", "use": "Loop", "in": "%x"}], ["net"], {"Loop": loop}))


def blocks_use_each_other(folder: Path) -> Path:
    """Block A uses B, and B uses A."""
    blocks = {
        name: {"in": ["x"], "nodes": [{"name": "inner", "use": other, "in": "%x"}], "out": {"y": "inner"}}
        for name, other in (("A", "B"), ("B", "A"))
    }
    return _write(folder, _nested_doc([{"name": "net", "use": "A", "in": "%x"}], ["net"], blocks))


def layer_instances(*, drop_last_tensor: bool = False) -> Callable[[Path], Path]:
    """Two layers of one block (a Linear 4 -> 4 with its own weight and bias, then relu), each
    instance giving the values of the tensors the body leaves open, in order; with
    ``drop_last_tensor`` the second instance leaves out its bias."""

    def build(folder: Path) -> Path:
        rng = np.random.default_rng(0)
        settings = {"in_features": 4, "out_features": 4, "weight": {"shape": [4, 4]}, "bias": {"shape": [4]}}
        layer = {
            "op": "Sequential",
            "in": ["x"],
            "nodes": [
                {"name": "fc", "op": "Linear", "in": "%x", "set": settings},
                {"name": "act", "op": "relu", "in": "fc"},
            ],
            "out": {"y": "act"},
        }

        def given() -> list[Doc]:
            arrays = (rng.standard_normal((4, 4)), rng.standard_normal(4))
            return [{"data": _tensor(array.astype(np.float32))["data"]} for array in arrays]

        nodes = [{"name": "l0", "use": "Layer", "in": "%x", "tensors": given()}]
        nodes.append({"name": "l1", "use": "Layer", "in": "l0", "tensors": given()})
        if drop_last_tensor:
            nodes[1]["tensors"].pop()
        return _write(folder, _nested_doc(nodes, ["l1"], {"Layer": layer}))

    return build


def relative_class(where: str) -> Callable[[Path], Path]:
    """A relative ``class`` (``.Layer``: in the module of the enclosing node's class) where
    nothing encloses it with a class: a top-level node, or a block body's node in a block
    that has no class."""

    def build(folder: Path) -> Path:
        if where == "tree":
            node = {"name": "net", "op": "relu", "in": "%x", "class": ".Layer"}
            return _write(folder, _nested_doc([node], ["net"]))
        block = _relu_block()
        block["nodes"][0]["class"] = ".ReLU"
        return _write(folder, _nested_doc([{"name": "net", "use": "Act", "in": "%x"}], ["net"], {"Act": block}))

    return build


def _fifo(folder: Path, name: str) -> Path:
    path = folder / name
    os.mkfifo(path)
    return path


def fifo_external(folder: Path) -> Path:
    _fifo(folder, "weights.safetensors")
    return _external_doc(folder, "weights.safetensors")


def fifo_document(folder: Path) -> Path:
    return _fifo(folder, "model.trama.json")


def dev_zero(folder: Path) -> Path:
    return Path("/dev/zero")


def dev_zero_link(folder: Path) -> Path:
    link = folder / "model.trama.json"
    link.symlink_to("/dev/zero")
    return link


def directory(folder: Path) -> Path:
    path = folder / "model.trama.json"
    path.mkdir()
    return path


def missing(folder: Path) -> Path:
    return folder / "nowhere" / "model.trama.json"


def symlink_to_file_outside(folder: Path) -> Path:
    (folder / "weights.safetensors").symlink_to("/etc/passwd")
    return _external_doc(folder, "weights.safetensors")


def symlink_to_good_weights_outside(folder: Path) -> Path:
    """The link leads to the document's *true* weights, but outside its folder: the content
    is right, the place is not, and the folder rule is about the place."""
    outside = folder / "outside"
    outside.mkdir()
    _, weights = _sidecar(outside)
    inside = folder / "inside"
    inside.mkdir()
    (inside / "w.safetensors").symlink_to(weights)
    document = _external_doc(outside, "w.safetensors")
    target = inside / "model.trama.json"
    target.write_bytes(document.read_bytes())
    return target


def symlink_dir_outside(folder: Path) -> Path:
    (folder / "sub").symlink_to("/etc")
    return _external_doc(folder, "sub/passwd")


def symlink_to_root(folder: Path) -> Path:
    (folder / "root").symlink_to("/")
    return _external_doc(folder, "root/etc/passwd")


def symlink_loop(folder: Path) -> Path:
    (folder / "a").symlink_to("b")
    (folder / "b").symlink_to("a")
    return _external_doc(folder, "a")


def external_path(path: str) -> Callable[[Path], Path]:
    def build(folder: Path) -> Path:
        (folder / "dir.safetensors").mkdir()
        return _external_doc(folder, path)

    return build


def input_facts(shape: list[Any], dtype: str = "float32") -> Callable[[Path], Path]:
    """The ~300-byte document of the issue: relu on x, whose facts claim ``shape``."""

    def build(folder: Path) -> Path:
        doc = _doc([_leaf("act", "relu")], input_facts=[{"dtype": dtype, "shape": shape}])
        return _write(folder, doc)

    return build


def settings(op: str, node_inputs: dict[str, Any] | None = None, **values: Any) -> Callable[[Path], Path]:
    """One leaf of ``op`` whose settings are ``values``: sizes no machine can allocate."""

    def build(folder: Path) -> Path:
        slots = {slot: f"s.{slot}" for slot in values}
        node = _leaf("s", op, node_inputs, **slots)
        inputs = ["x"] if node_inputs is None or node_inputs else []
        if op in ("GRU", "LSTM", "RNN"):
            node["outputs"] = ["y", "h_n"] if op != "LSTM" else ["y", "h_n", "c_n"]
        doc = _doc([node], {f"s.{slot}": _value(value) for slot, value in values.items()}, inputs=inputs)
        return _write(folder, doc)

    return build


def gru_layers(folder: Path) -> Path:
    """A GRU with num_layers = 10^9 and the weights of its first layer: everything a reader
    checks slot by slot is there for layer 0, and the count asks for a billion more."""
    size = 4
    node = _leaf("s", "GRU", input_size="s.input_size", hidden_size="s.hidden_size", num_layers="s.num_layers")
    node["outputs"] = ["y", "h_n"]
    parameters = {"s.input_size": _value(size), "s.hidden_size": _value(size), "s.num_layers": _value(10**9)}
    shapes = {
        "weight_ih_l0": (3 * size, size),
        "weight_hh_l0": (3 * size, size),
        "bias_ih_l0": (3 * size,),
        "bias_hh_l0": (3 * size,),
    }
    for slot, shape in shapes.items():
        node["parameters"][slot] = {"name": f"s.{slot}"}
        parameters[f"s.{slot}"] = _value(_tensor(np.zeros(shape, dtype=np.float32)), learnable=True)
    return _write(folder, _doc([node], parameters))


def int64_as_float64(folder: Path) -> Path:
    """An inline int64 tensor relabelled float64: the same length, other numbers."""
    array = np.arange(6, dtype=np.int64).reshape(2, 3)
    import trama

    model = trama.Model(
        ["x"],
        [trama.Ref("t", "y")],
        [trama.Node("t", "Tag", {"x": trama.Ref(trama.INPUT, "x")}, ["y"], {"table": "t.table"})],
        {"t.table": trama.Parameter(trama.Tensor.from_array(array))},
    )
    doc = json.loads(trama.dumps(model, format_version="1.2"))
    entry = doc["parameters"]["t.table"]
    assert "checksum" in entry, "format 1.2 writes a checksum on inline tensors"
    entry["value"]["dtype"] = "float64"
    return _write(folder, doc)


def deep_tree(depth: int, *, width: int = 0) -> Callable[[Path], Path]:
    """Sequential composites nested ``depth`` deep, a relu at the bottom; ``width`` pads every
    level with that many extra relu siblings (to reach the size of the issue's file)."""

    def build(folder: Path) -> Path:
        nodes: list[Doc] = []
        ids = ["n"]
        for _ in range(depth - 1):
            ids.append(ids[-1] + ".n")
        for level, node_id in enumerate(ids):
            if level == len(ids) - 1:
                nodes.append(_leaf(node_id, "relu"))
            else:
                nodes.append(_composite(node_id, "Sequential", ids[level + 1]))
        for node_id in ids[:-1]:
            for k in range(width):
                nodes.append(_leaf(f"{node_id}.p{k}", "relu"))
        return _write(folder, _doc(nodes, output="n"))

    return build


def schema_heavy(folder: Path, target: int = 1_600_000) -> Path:
    """A valid document of about 1.6 MB: a Graph of thousands of small leaves, each with a few
    ports and slots, the shape that made the JSON Schema pass take gigabytes."""
    nodes: list[Doc] = [_composite("g", "Graph", "g.l0")]
    parameters: dict[str, Any] = {}
    k = 0
    size = 0
    while size < target:
        node = _leaf(f"g.l{k}", "Tag", {"x": X, "z": X}, a=f"p{k}.a", b=f"p{k}.b")
        node["outputs"] = ["y", "z"]
        parameters[f"p{k}.a"] = _value(k)
        parameters[f"p{k}.b"] = _value(f"label {k}")
        nodes.append(node)
        size += len(json.dumps(node)) + 80
        k += 1
    return _write(folder, _doc(nodes, parameters, output="g"))


def op_name(name: str) -> Callable[[Path], Path]:
    def build(folder: Path) -> Path:
        doc = _linear_doc()
        doc["nodes"][2]["op"] = name
        return _write(folder, doc)

    return build


def renamed(where: str, name: str) -> Callable[[Path], Path]:
    """A name a listing prints (a port, an output, a model input, an entry) set to ``name``."""

    def build(folder: Path) -> Path:
        doc = _linear_doc()
        act = doc["nodes"][2]
        if where == "port":
            act["inputs"] = {name: _ref("net.fc")}
        elif where == "output":
            act["outputs"] = [name]
            doc["nodes"][0]["output_bindings"] = {"y": _ref("net.act", name)}
        elif where == "input":
            doc["inputs"] = [name]
            doc["nodes"][0]["inputs"] = {"x": _ref("%input", name)}
        elif where == "entry":
            doc["parameters"][name] = doc["parameters"].pop("fc.w")
            doc["nodes"][1]["parameters"]["weight"] = {"name": name}
        elif where == "key":  # the weight's slot name
            doc["nodes"][1]["parameters"][name] = doc["nodes"][1]["parameters"].pop("weight")
        return _write(folder, doc)

    return build


def shown_text(where: str, text: str) -> Callable[[Path], Path]:
    """A *valid* document carrying ``text`` where ssa and info print free text: a string
    setting, or the producer in the metadata. The listing must escape it."""

    def build(folder: Path) -> Path:
        if where == "metadata":
            doc = _linear_doc()
            doc["metadata"] = {"producer": {"name": text, "version": text}, text: text}
        else:
            doc = _doc([_leaf("t", "Tag", label="t.label")], {"t.label": _value(text)})
        return _write(folder, doc)

    return build


def long_data(bad: bytes, *, length: int = 1 << 16) -> Callable[[Path], Path]:
    """An inline float32 tensor whose long base64 ``data`` holds ``bad`` bytes in its middle:
    long strings are lifted out of the text before parsing, the path that skipped the checks."""

    def build(folder: Path) -> Path:
        count = length * 3 // 4 // 4
        doc = _doc(
            [_leaf("t", "Tag", table="t.table")], {"t.table": _value(_tensor(np.zeros(count, dtype=np.float32)))}
        )
        text = json.dumps(doc).encode("ascii")
        start = text.index(b'"data": "') + len(b'"data": "')
        middle = start + length // 2
        return _write(folder, text[:middle] + bad + text[middle + len(bad) :])

    return build


def bad_offsets(kind: str) -> Callable[[Path], Path]:
    """The external document with its weights file's ``data_offsets`` made wrong."""

    def change(header: dict[str, Any], data: bytes) -> bytes:
        key = _tensor_key(header)
        begin, end = header[key]["data_offsets"]
        if kind == "beyond":
            header[key]["data_offsets"] = [begin + 4096, end + 4096]
        elif kind == "reversed":
            header[key]["data_offsets"] = [end, begin]
        elif kind == "short":
            header[key]["data_offsets"] = [begin, end - 4]
        elif kind == "negative":
            header[key]["data_offsets"] = [-8, end]
        elif kind == "huge":
            header[key]["data_offsets"] = [2**64, 2**64 + end - begin]
        elif kind == "overlap":  # a second tensor over the first one's bytes
            header["other"] = dict(header[key])
        return safetensors_bytes(header, data)

    return lambda folder: _rewrite_sidecar(folder, change)


def sidecar(change: Callable[[dict[str, Any], bytes], bytes]) -> Callable[[Path], Path]:
    return lambda folder: _rewrite_sidecar(folder, change)


def _deep_json(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def npy_header(shape: tuple[int, ...], descr: str = "<f8", *, data: bytes = b"") -> bytes:
    """A .npy file (version 1.0) whose header claims ``shape``, followed by ``data``."""
    header = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode("latin1")
    pad = 64 - (10 + len(header) + 1) % 64
    header += b" " * pad + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + data


def text_doc(text: str | bytes) -> Callable[[Path], Path]:
    return lambda folder: _write(folder, text)


def valid_doc_text(change: Callable[[str], str | bytes]) -> Callable[[Path], Path]:
    """The small valid document's text (one line, as json.dumps writes it), changed."""
    return lambda folder: _write(folder, change(json.dumps(_linear_doc())))


def _param_value(text: str) -> Callable[[Path], Path]:
    """The small document with an extra float setting whose JSON text is ``text``."""

    def build(folder: Path) -> Path:
        doc = _doc([_leaf("t", "Tag", value="t.value")], {"t.value": _value(0.5)})
        return _write(folder, json.dumps(doc).replace("0.5", text))

    return build


def explicit_nulls(where: str) -> Callable[[Path], Path]:
    """The small valid document with an explicit ``null`` where the format allows one (a node's
    metadata, a fact's dtype or shape, the fact arrays): valid, to ``load`` and to ``validate``
    alike (docs/format.md section 6, rules 6 and 8)."""

    def build(folder: Path) -> Path:
        doc = _linear_doc()
        if where == "node_metadata":
            doc["nodes"][1]["metadata"] = None
        elif where == "facts_dtype":
            doc["input_facts"] = [{"dtype": None, "shape": [2, 4]}]
        elif where == "facts_shape":
            doc["input_facts"] = [{"dtype": "float32", "shape": None}]
        else:
            doc["input_facts"] = None
        return _write(folder, doc)

    return build


def duplicate_key(folder: Path) -> Path:
    text = json.dumps(_linear_doc())
    return _write(folder, text.replace('"inputs": ["x"],', '"inputs": ["x"], "inputs": ["x"],', 1))


def huge_shape_no_data(folder: Path) -> Path:
    doc = _doc(
        [_leaf("t", "Tag", table="t.table")],
        {"t.table": _value({"dtype": "float64", "shape": [10**12, 10**12], "data": ""})},
    )
    return _write(folder, doc)


def rank(count: int) -> Callable[[Path], Path]:
    def build(folder: Path) -> Path:
        doc = _doc(
            [_leaf("t", "Tag", table="t.table")],
            {"t.table": _value({"dtype": "float32", "shape": [1] * count, "data": "AAAAAA=="})},
        )
        return _write(folder, doc)

    return build


def deep_value(where: str, depth: int) -> Callable[[Path], Path]:
    """A list value or a metadata object nested ``depth`` deep, written as text (a Python
    structure that deep could not even be serialized)."""

    def build(folder: Path) -> Path:
        if where == "metadata":
            nested = '{"a": ' * depth + "1" + "}" * depth
            doc = _linear_doc()
            doc["metadata"] = "@@"
        else:
            nested = "[" * depth + "1" + "]" * depth
            doc = _doc([_leaf("t", "Tag", value="t.value")], {"t.value": _value("@@")})
        return _write(folder, json.dumps(doc).replace('"@@"', nested))

    return build


def many_broken_references(folder: Path, count: int = 5_000) -> Path:
    nodes = [_composite("g", "Graph", "g.n0")]
    nodes += [_leaf(f"g.n{k}", "relu", {"x": _ref(f"g.ghost{k}")}) for k in range(count)]
    return _write(folder, _doc(nodes, output="g"))


def odd_file_name(name: str) -> Callable[[Path], Path]:
    """A valid document under a file name that holds ``name`` (a newline, an escape)."""

    def build(folder: Path) -> Path:
        return _trama_linear(folder, name)

    return build


def unused_sidecar_keys(folder: Path) -> Path:
    """A weights file with thousands of extra tensors nobody names: harmless, must load."""

    def change(header: dict[str, Any], data: bytes) -> bytes:
        for k in range(5_000):
            header[f"extra.{k}"] = {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}
        return safetensors_bytes(header, data)

    return _rewrite_sidecar(folder, change)


# --- the catalogue -------------------------------------------------------------------------------


def _st_entry(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any], bytes], bytes]:
    def apply(header: dict[str, Any], data: bytes) -> bytes:
        change(header[_tensor_key(header)])
        return safetensors_bytes(header, data)

    return apply


def _st_set(**values: Any) -> Callable[[dict[str, Any]], None]:
    return lambda entry: entry.update(values)


def _st_header_text(text: bytes) -> Callable[[dict[str, Any], bytes], bytes]:
    return lambda header, data: safetensors_bytes(text, data)


def _st_length(length: Callable[[int], int]) -> Callable[[dict[str, Any], bytes], bytes]:
    def apply(header: dict[str, Any], data: bytes) -> bytes:
        text = json.dumps(header).encode()
        return safetensors_bytes(text, data, length=length(len(text)))

    return apply


def _st_truncate(keep: int) -> Callable[[dict[str, Any], bytes], bytes]:
    return lambda header, data: safetensors_bytes(header, data)[:keep]


def _st_flip_data(header: dict[str, Any], data: bytes) -> bytes:
    flipped = bytearray(data)
    begin = header[_tensor_key(header)]["data_offsets"][0]
    flipped[begin] ^= 0xFF
    return safetensors_bytes(header, bytes(flipped))


def _x_only(folder: Path) -> list[str]:
    return _x_npy(folder)


_TINY = '{"format_version": "1.2", "inputs": [], "outputs": [], "nodes": [], "parameters": {}}'

CASES: tuple[Hostile, ...] = (
    # Expansion bombs: valid documents (the format does not bound calls) that must not run.
    Hostile("calls_doubling_40", "block k calls block k-1 twice, 40 levels: 2^40 leaves", doubling_calls, valid=True),
    Hostile(
        "calls_chain_1mb",
        "~1 MB of blocks each calling the one before: ~8M nodes expanded",
        chain_of_calls,
        valid=True,
        stdin=False,
    ),
    Hostile(
        "calls_doubling_small",
        "the same bomb 3 levels deep: a small model of calls that must run",
        lambda folder: doubling_calls(folder, 3),
        valid=True,
        runs=True,
        run_args=_x_only,
    ),
    # Format 1.3's blocks: expansion bounded by the text, no block using itself, every tensor given.
    Hostile(
        "blocks_bomb_12",
        "blocks nested 12 deep, 8 instances each: 8^12 nodes from 5 KB (refused: the expansion is bounded)",
        block_bomb(12),
        memory_mb=400,
        timeout_s=20.0,
        mentions="expands to more than",
    ),
    Hostile(
        "blocks_bomb_small",
        "the same bomb 3 levels deep (512 nodes): a small model of blocks that must run",
        block_bomb(3),
        valid=True,
        runs=True,
        run_args=_x_only,
    ),
    Hostile("block_uses_itself", "a block whose body uses the block itself", block_uses_itself, mentions="itself"),
    Hostile("blocks_use_each_other", "block A uses B, B uses A", blocks_use_each_other, mentions="itself"),
    Hostile(
        "block_instances",
        "two instances of a block, each giving its tensors (valid, runs)",
        layer_instances(),
        valid=True,
        runs=True,
        run_args=_x_only,
    ),
    Hostile(
        "block_instance_missing_tensor",
        "an instance giving one tensor fewer than its block holds",
        layer_instances(drop_last_tensor=True),
        mentions="tensors",
    ),
    Hostile(
        "relative_class_top",
        "a top-level node of class '.Layer': relative, with no enclosing class",
        relative_class("tree"),
        mentions="relative",
    ),
    Hostile(
        "relative_class_block",
        "a node of class '.ReLU' in the body of a block that has no class",
        relative_class("block"),
        mentions="relative",
    ),
    # Special files: only regular files are read, never blocking.
    Hostile("fifo_external", "the external weights path names a FIFO", fifo_external, needs="mkfifo"),
    Hostile("fifo_document", "the document itself is a FIFO", fifo_document, needs="mkfifo", stdin=False),
    Hostile("dev_zero", "the document is /dev/zero", dev_zero, stdin=False),
    Hostile("dev_zero_link", "the document is a symlink to /dev/zero", dev_zero_link, needs="symlink", stdin=False),
    Hostile("directory", "the document is a directory", directory, stdin=False),
    Hostile("missing", "the document does not exist (nor its folder)", missing, stdin=False),
    # Escaping the folder through links, and bad paths.
    Hostile(
        "link_file_out", "weights path: a link in the folder to /etc/passwd", symlink_to_file_outside, needs="symlink"
    ),
    Hostile(
        "link_good_weights_out",
        "weights path: a link to the true weights, outside the folder",
        symlink_to_good_weights_outside,
        needs="symlink",
    ),
    Hostile("link_dir_out", "weights path through a link to /etc", symlink_dir_outside, needs="symlink"),
    Hostile("link_root", "weights path through a link to /", symlink_to_root, needs="symlink"),
    Hostile("link_loop", "weights path: a symlink loop", symlink_loop, needs="symlink"),
    Hostile("path_nul", "weights path holding a NUL", external_path("w\u0000.safetensors")),
    Hostile("path_surrogate", "weights path holding a lone surrogate", external_path("w\udc80.safetensors")),
    Hostile("path_absolute", "weights path /etc/passwd", external_path("/etc/passwd")),
    Hostile("path_dotdot", "weights path ../x.safetensors", external_path("../x.safetensors")),
    Hostile("path_backslash", "weights path with a backslash", external_path("..\\x.safetensors")),
    Hostile("path_directory", "weights path naming a directory", external_path("dir.safetensors")),
    Hostile("path_missing", "weights path naming nothing", external_path("gone.safetensors")),
    Hostile("path_control", "weights path with an ANSI escape", external_path("\x1b[2Jw.safetensors")),
    Hostile("path_empty", "weights path empty", external_path("")),
    # Facts and settings no framework can honour: checked before any framework sees them.
    Hostile(
        "facts_huge",
        "300-byte document whose input facts claim [2^40, 2^40]",
        input_facts([2**40, 2**40]),
        valid=True,
        frameworks=True,
        run_args=_x_only,
    ),
    Hostile(
        "facts_product_overflow",
        "facts [2^62, 2^62, 2^62]: each fits int64, the product does not",
        input_facts([2**62, 2**62, 2**62]),
        valid=True,
        frameworks=True,
        run_args=_x_only,
    ),
    Hostile("facts_beyond_int64", "facts with a size of 2^64", input_facts([2**64, 2]), frameworks=True),
    Hostile("facts_negative", "facts with a negative size", input_facts([-1, 4])),
    Hostile("facts_rank_65", "facts with 65 dimensions", input_facts([1] * 65)),
    Hostile(
        "gru_layers_1e9",
        "GRU with num_layers = 10^9",
        gru_layers,
        valid=True,
        import_refuses=True,
        frameworks=True,
        run_args=lambda folder: _x_npy(folder, (2, 3, 4)),
    ),
    Hostile(
        "arange_huge",
        "arange(0, 10^15)",
        settings("arange", {}, end=10**15),
        valid=True,
        import_refuses=True,
        frameworks=True,
    ),
    Hostile(
        "arange_beyond_int64",
        "arange(0, 2^70)",
        settings("arange", {}, end=2**70),
        valid=True,
        import_refuses=True,
        frameworks=True,
    ),
    Hostile(
        "full_huge",
        "full([10^6, 10^6], 1.0)",
        settings("full", {}, size=[10**6, 10**6], fill_value=1.0),
        valid=True,
        frameworks=True,
    ),
    Hostile(
        "zeros_beyond_int64",
        "zeros([2^40, 2^40, 2^40])",
        settings("zeros", {}, size=[2**40] * 3),
        valid=True,
        import_refuses=True,
        frameworks=True,
    ),
    Hostile(
        "ones_negative",
        "ones([-5, 3])",
        settings("ones", {}, size=[-5, 3]),
        valid=True,
        import_refuses=True,
        frameworks=True,
    ),
    # Silent corruption: caught by the inline checksum (on first use, like the base64 checks).
    Hostile("int64_as_float64", "inline int64 tensor relabelled float64 (same length)", int64_as_float64, lazy=True),
    # Deep trees.
    Hostile(
        "deep_600",
        "nodes nested 600 deep (~1.2 MB)",
        deep_tree(600),
        frameworks=True,
        mentions="deeper than 512",
        stdin=False,
    ),
    Hostile(
        "deep_1500", "nodes nested 1500 deep", deep_tree(1500), frameworks=True, mentions="deeper than 512", stdin=False
    ),
    Hostile(
        "deep_512",
        "nodes nested 512 deep, the limit: valid, and it runs",
        deep_tree(512),
        stdin=False,
        valid=True,
        runs=True,
        frameworks=True,
        run_args=_x_only,
    ),
    Hostile(
        "schema_heavy_1_6mb",
        "a valid 1.6 MB document of thousands of leaves: validated in memory in proportion",
        schema_heavy,
        valid=True,
        memory_mb=600,
        timeout_s=30.0,
        stdin=False,
    ),
    # The review view: names a listing prints cannot forge lines or drive the terminal.
    Hostile("op_newline", "op name with a newline and a forged SSA line", op_name("relu\n%y = forged()")),
    Hostile("op_ansi", "op name with ANSI escapes", op_name("\x1b[2J\x1b[31mrelu")),
    Hostile("op_nul", "op name with a NUL", op_name("re\x00lu")),
    Hostile("op_surrogate", "op name with a lone surrogate", op_name("relu\udc80")),
    Hostile("port_newline", "input port name with a newline", renamed("port", "x\nforged")),
    Hostile("output_ansi", "output name with an ANSI escape", renamed("output", "y\x1b[31m")),
    Hostile("model_input_newline", "model input name with a newline", renamed("input", "x\ny")),
    Hostile("entry_ansi", "parameter entry name with an ANSI escape", renamed("entry", "fc.w\x1b[0m")),
    Hostile("slot_surrogate", "slot name with a lone surrogate", renamed("key", "weight\ud800")),
    Hostile(
        "string_setting_ansi",
        "a valid string setting full of ANSI escapes and newlines",
        shown_text("setting", "ok\n%forged = relu(%x)\x1b[2J\x1b]0;title\x07"),
        valid=True,
    ),
    Hostile(
        "metadata_ansi",
        "valid metadata (producer, free keys) with escapes, newlines, a lone surrogate",
        shown_text("metadata", "evil\n\x1b[31mred\u202e\ud800"),
        valid=True,
        runs=True,
        run_args=_x_only,
    ),
    # Text that skipped the checks: long data strings with bytes JSON or UTF-8 refuse.
    Hostile("data_0xff_long", "a long base64 string holding 0xFF", long_data(b"\xff")),
    Hostile("data_newline_long", "a long base64 string holding a raw newline", long_data(b"\n")),
    Hostile("data_nul_long", "a long base64 string holding a NUL", long_data(b"\x00")),
    Hostile("data_quote_long", "a long base64 string cut by a quote", long_data(b'"')),
    Hostile("data_0xff_short", "a short base64 string holding 0xFF", long_data(b"\xff", length=16)),
    Hostile("data_bad_base64_long", "a long data string with a character outside base64", long_data(b"!"), lazy=True),
    # Safetensors sidecars.
    Hostile("st_offsets_beyond", "data_offsets past the end", bad_offsets("beyond"), lazy=True, mentions="offset"),
    Hostile(
        "st_offsets_reversed", "data_offsets end before begin", bad_offsets("reversed"), lazy=True, mentions="offset"
    ),
    Hostile("st_offsets_short", "data_offsets 4 bytes short", bad_offsets("short"), lazy=True, mentions="offset"),
    Hostile("st_offsets_negative", "a negative data_offset", bad_offsets("negative"), lazy=True, mentions="offset"),
    Hostile("st_offsets_huge", "data_offsets past 2^64", bad_offsets("huge"), lazy=True, mentions="offset"),
    Hostile(
        "st_offsets_overlap",
        "two tensors over the same bytes (harmless: loads)",
        bad_offsets("overlap"),
        valid=True,
        runs=True,
        run_args=_x_only,
    ),
    Hostile("st_header_len_huge", "header length 2^64 - 1", sidecar(_st_length(lambda n: 2**64 - 1))),
    Hostile("st_header_len_past_end", "header length past the file", sidecar(_st_length(lambda n: n + 10**6))),
    Hostile("st_header_len_short", "header length one byte short", sidecar(_st_length(lambda n: n - 1))),
    Hostile("st_header_len_zero", "header length 0", sidecar(_st_length(lambda n: 0))),
    Hostile("st_header_not_json", "header is not JSON", sidecar(_st_header_text(b"{not json"))),
    Hostile("st_header_not_utf8", "header is not UTF-8", sidecar(_st_header_text(b'{"\xff": 1}'))),
    Hostile("st_header_array", "header is a JSON array", sidecar(_st_header_text(b"[]"))),
    Hostile("st_header_deep", "header nested 100,000 deep", sidecar(_st_header_text(_deep_json(100_000)))),
    Hostile(
        "st_header_5000_digits",
        "a 5000-digit number in the header",
        sidecar(_st_header_text(b'{"n": ' + b"9" * 5000 + b"}")),
    ),
    Hostile(
        "st_dtype_same_size",
        "header dtype I32 for a float32 tensor",
        sidecar(_st_entry(_st_set(dtype="I32"))),
        lazy=True,
        mentions="I32",
    ),
    Hostile("st_dtype_unknown", "header dtype F8_E4M3", sidecar(_st_entry(_st_set(dtype="F8_E4M3"))), lazy=True),
    Hostile(
        "st_shape_transposed",
        "header shape transposed (same bytes)",
        sidecar(_st_entry(lambda e: e.update(shape=e["shape"][::-1]))),
        lazy=True,
    ),
    Hostile(
        "st_offsets_floats",
        "data_offsets as floats",
        sidecar(_st_entry(lambda e: e.update(data_offsets=[float(o) for o in e["data_offsets"]]))),
        lazy=True,
    ),
    Hostile(
        "st_data_flipped", "one byte of the tensor flipped", sidecar(_st_flip_data), lazy=True, mentions="checksum"
    ),
    Hostile("st_truncated", "weights file cut in the data", sidecar(_st_truncate(-8)), lazy=True),
    Hostile("st_only_prefix", "weights file of 7 bytes", sidecar(_st_truncate(7))),
    Hostile("st_empty", "empty weights file", sidecar(lambda header, data: b"")),
    Hostile(
        "st_metadata_odd",
        "__metadata__ that is not strings (harmless: loads)",
        sidecar(lambda h, d: safetensors_bytes({**h, "__metadata__": {"a": [1, {"b": None}]}}, d)),
        valid=True,
        runs=True,
        run_args=_x_only,
    ),
    Hostile(
        "st_many_unused_keys",
        "5000 tensors nobody names (harmless: loads)",
        unused_sidecar_keys,
        valid=True,
        runs=True,
        run_args=_x_only,
    ),
    # JSON text and numbers.
    Hostile("empty", "an empty file", text_doc(b"")),
    Hostile("whitespace", "only whitespace", text_doc(b" \n\t" * 1000)),
    Hostile("nul_bytes", "a megabyte of NUL bytes", text_doc(b"\x00" * (1 << 20)), stdin=False),
    Hostile("truncated", "a valid document cut in the middle", valid_doc_text(lambda t: t[: len(t) // 2])),
    Hostile(
        "utf8_bom",
        "a UTF-8 byte order mark first (readers may skip it: trama does)",
        valid_doc_text(lambda t: "\ufeff" + t),
        valid=True,
        runs=True,
        run_args=_x_only,
    ),
    Hostile("utf8_bom_twice", "two byte order marks", valid_doc_text(lambda t: "\ufeff\ufeff" + t)),
    Hostile("utf16", "the document in UTF-16", valid_doc_text(lambda t: t.encode("utf-16"))),
    Hostile(
        "not_utf8",
        "a byte that is not UTF-8 inside a string",
        valid_doc_text(lambda t: t.replace('"relu"', '"rel\udcffu"').encode("utf-8", "surrogateescape")),
    ),
    Hostile(
        "cesu_surrogate",
        "a surrogate encoded as raw bytes (CESU-8)",
        valid_doc_text(lambda t: t.replace('"relu"', '"rel\ud800u"')),
    ),
    Hostile(
        "raw_control_char",
        "a raw control character inside a string",
        valid_doc_text(lambda t: t.replace('"relu"', '"re\x01lu"')),
    ),
    Hostile("top_level_array", "a JSON array, not an object", text_doc(b"[" + json.dumps(_TINY).encode() + b"]")),
    Hostile("top_level_huge_int", "a 100,000-digit integer at top level", text_doc(b"9" * 100_000)),
    Hostile("deep_json_array", "a JSON array nested a million deep", text_doc(_deep_json(1_000_000)), stdin=False),
    Hostile(
        "deep_json_object",
        "an object nested 100,000 deep",
        text_doc(b'{"a": ' * 100_000 + b"1" + b"}" * 100_000),
        stdin=False,
    ),
    Hostile("deep_metadata", "metadata nested 10,000 deep", deep_value("metadata", 10_000)),
    Hostile("deep_list_value", "a list setting nested 100,000 deep", deep_value("list", 100_000)),
    Hostile("deep_list_value_101", "a list setting nested 101 deep (one past the limit)", deep_value("list", 101)),
    Hostile("number_1e400", "a float literal 1e400", _param_value("1e400")),
    Hostile("number_minus_1e400", "a float literal -1e400", _param_value("-1e400")),
    Hostile("number_5000_digits", "a 5000-digit integer setting", _param_value("9" * 5000)),
    Hostile("number_huge_exponent", "a float literal 1e99999999999999999999", _param_value("1e99999999999999999999")),
    Hostile("number_tiny", "1e-400 (rounds to zero: a valid float)", _param_value("1e-400"), valid=True),
    Hostile("nan_literal", "a NaN literal", _param_value("NaN")),
    Hostile("infinity_literal", "an Infinity literal", _param_value("-Infinity")),
    Hostile("duplicate_key", "a key repeated in the top-level object", duplicate_key),
    Hostile(
        "format_version_huge",
        "format_version 99999999999999999999.0",
        valid_doc_text(lambda t: t.replace('"1.2"', '"99999999999999999999.0"')),
    ),
    Hostile("format_version_number", "format_version as a number", valid_doc_text(lambda t: t.replace('"1.2"', "1.2"))),
    Hostile("huge_shape_no_data", "a tensor claiming [10^12, 10^12] with empty data", huge_shape_no_data),
    Hostile("rank_65", "a tensor of rank 65", rank(65)),
    Hostile(
        "many_broken_references", "5000 references to nodes that do not exist", many_broken_references, stdin=False
    ),
    Hostile(
        "long_string_key",
        "a 1 MB key",
        valid_doc_text(lambda t: t.replace('"relu"', '"relu", "' + "k" * (1 << 20) + '": 1')),
        stdin=False,
    ),
    # Nulls the format allows: the JSON Schema pass of validate must agree with the decoder.
    Hostile(
        "null_node_metadata",
        "a node's metadata null (allowed)",
        explicit_nulls("node_metadata"),
        valid=True,
        runs=True,
        run_args=_x_only,
    ),
    Hostile(
        "null_fact_dtype",
        "an input fact's dtype null (allowed)",
        explicit_nulls("facts_dtype"),
        valid=True,
        runs=True,
        run_args=_x_only,
    ),
    Hostile(
        "null_fact_shape",
        "an input fact's shape null (allowed)",
        explicit_nulls("facts_shape"),
        valid=True,
        runs=True,
        run_args=_x_only,
    ),
    Hostile(
        "null_input_facts",
        "input_facts null (allowed)",
        explicit_nulls("input_facts"),
        valid=True,
        runs=True,
        run_args=_x_only,
    ),
    # File names the command prints.
    Hostile(
        "name_newline",
        "a valid document whose file name holds a newline and an escape",
        odd_file_name("ok\nforged: ok\x1b[2J.trama.json"),
        valid=True,
        runs=True,
        run_args=_x_only,
    ),
    Hostile(
        "name_not_utf8",
        "a valid document whose file name is not UTF-8",
        odd_file_name("m\udcff.trama.json"),
        valid=True,
        runs=True,
        run_args=_x_only,
    ),
)


# --- hostile command lines -------------------------------------------------------------------------


def _input(
    name: str, content: bytes | None = None, *, make: Callable[[Path], None] | None = None
) -> Callable[[Path, Path], list[str]]:
    """``run DOC --input x=FILE`` with FILE holding ``content`` (or made by ``make``)."""

    def build(folder: Path, document: Path) -> list[str]:
        path = folder / name
        if make is not None:
            make(path)
        elif content is not None:
            path.write_bytes(content)
        return ["run", str(document), "--input", f"x={path}"]

    return build


def _output(target: Callable[[Path], Path]) -> Callable[[Path, Path], list[str]]:
    def build(folder: Path, document: Path) -> list[str]:
        return ["run", str(document), *_x_npy(folder), "--output", str(target(folder))]

    return build


def _pickled(path: Path) -> None:
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)


def _npy_ok(path: Path) -> None:
    np.save(path, np.ones((2, 4), dtype=np.float32))


def _truncated_npy(path: Path) -> None:
    _npy_ok(path)
    path.write_bytes(path.read_bytes()[:-5])


def _mkdir(path: Path) -> None:
    path.mkdir()


def _mkfifo(path: Path) -> None:
    os.mkfifo(path)


def _directory_output(folder: Path) -> Path:
    path = folder / "out.npz"
    path.mkdir()
    return path


def _special_output(folder: Path) -> Path:
    """A FIFO where the outputs are to go: it stands for any special file (``/dev/stdout`` as
    root, a device), without touching a real one. Replacing it with a regular file by a rename
    would destroy what was there."""
    path = folder / "out.npz"
    os.mkfifo(path)
    return path


def _file_then(name: str) -> Callable[[Path], Path]:
    def target(folder: Path) -> Path:
        (folder / "file.txt").write_text("a file")
        return folder / "file.txt" / name

    return target


FLAG_CASES: tuple[FlagCase, ...] = (
    FlagCase(
        "npy_huge_header", ".npy whose header claims (10^6, 10^6) float64", _input("x.npy", npy_header((10**6, 10**6)))
    ),
    FlagCase("npy_beyond_int64", ".npy whose header claims (2^63, 2^63)", _input("x.npy", npy_header((2**63, 2**63)))),
    FlagCase("npy_negative_shape", ".npy whose header claims (-1, 4)", _input("x.npy", npy_header((-1, 4)))),
    FlagCase("npy_pickle", ".npy of Python objects (a pickle)", _input("x.npy", make=_pickled)),
    FlagCase("npy_truncated", ".npy cut short", _input("x.npy", make=_truncated_npy)),
    FlagCase("npy_text", "a text file as .npy", _input("x.npy", b"hello\n")),
    FlagCase("npy_empty", "an empty .npy", _input("x.npy", b"")),
    FlagCase("npy_bad_descr", ".npy with a nonsense dtype", _input("x.npy", npy_header((2, 4), "<q9"))),
    FlagCase(
        "npy_structured",
        ".npy of a structured dtype",
        _input("x.npy", npy_header((2,), "[('a', '<f4')]", data=b"\0" * 8)),
    ),
    FlagCase("npy_missing", "--input naming nothing", _input("gone.npy")),
    FlagCase("npy_directory", "--input naming a directory", _input("d.npy", make=_mkdir)),
    FlagCase("npy_fifo", "--input naming a FIFO", _input("f.npy", make=_mkfifo), needs="mkfifo"),
    FlagCase("npy_dev_zero", "--input /dev/zero", lambda folder, doc: ["run", str(doc), "--input", "x=/dev/zero"]),
    FlagCase("input_no_equals", "--input without NAME=", lambda folder, doc: ["run", str(doc), "--input", "x.npy"]),
    FlagCase(
        "input_wrong_shape", "--input of the wrong shape", _input("x.npy", npy_header((3, 7), "<f4", data=b"\0" * 84))
    ),
    FlagCase(
        "input_unknown_name",
        "--input for an input the model lacks",
        lambda folder, doc: ["run", str(doc), "--input", f"nope={folder / 'x.npy'}", *_x_npy(folder)],
    ),
    FlagCase("output_directory", "--output naming a directory", _output(_directory_output)),
    FlagCase(
        "output_missing_folder", "--output in a missing folder", _output(lambda f: f / "no" / "where" / "out.npz")
    ),
    FlagCase("output_under_file", "--output under a regular file", _output(_file_then("out.npz"))),
    FlagCase(
        "output_fifo",
        "--output naming a FIFO (a special file: refused, and left as it is, never replaced by a rename)",
        _output(_special_output),
        needs="mkfifo",
    ),
    FlagCase(
        "output_odd_name",
        "--output to a name with a newline and an escape (written, name escaped)",
        _output(lambda f: f / "o\nforged\x1b[2J.npz"),
        status=0,
        output_created=True,
    ),
    FlagCase(
        "runtime_unknown", "--runtime naming nothing", lambda folder, doc: ["run", str(doc), "--runtime", "nowhere:cpu"]
    ),
    FlagCase(
        "runtime_ansi", "--runtime with escapes", lambda folder, doc: ["run", str(doc), "--runtime", "\x1b[2J\nforged"]
    ),
    FlagCase(
        "stdin_twice", "validate - - (standard input twice)", lambda folder, doc: ["validate", "-", "-"], status=2
    ),
    FlagCase("no_file", "run with no document", lambda folder, doc: ["run"], status=2),
    FlagCase("unknown_flag", "an unknown flag", lambda folder, doc: ["validate", "--frobnicate", str(doc)], status=2),
)


def by_name(name: str) -> Hostile:
    """The case called ``name``."""
    for case in CASES:
        if case.name == name:
            return case
    raise KeyError(name)


def available(needs: str | None) -> bool:
    """Whether this platform has what a case needs."""
    return needs is None or hasattr(os, needs)


def main(argv: list[str] | None = None) -> int:
    """``python -m reliability.hostile_files FOLDER``: write every case into FOLDER/<name>/
    and print each case's argument, for trying them by hand."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m reliability.hostile_files FOLDER", file=sys.stderr)
        return 2
    root = Path(args[0])
    for case in CASES:
        if not available(case.needs):
            continue
        folder = root / case.name
        folder.mkdir(parents=True, exist_ok=False)
        path = case.build(folder)
        print(f"{case.name:28} {str(path)!a}  # {case.what}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
