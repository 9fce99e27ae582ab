"""Seeded fuzz of the safetensors files beside external-weights documents: mutate the weights
file, load the document, use every tensor, and require the original values or a trama error.

**Seeds.** Two models written by ``trama.dump(..., weights="external")``: a bag of one
tensor per dtype and many shapes (0-d, empty, 4-d, bool, bfloat16...), and a small MLP of
catalog ops that also runs on numpy; each in the format ``dump`` writes (1.3: the weights file
named once, each tensor keyed by its entry's name) and in the flat form of 1.2 (an ``external``
reference per entry), which every trama still reads.

**Mutations** of the weights file, one or two per case: the header as JSON (every generic
mutation of :func:`reliability.fuzzing.mutate_json`, on the parsed header), a tensor's
``data_offsets`` (shifted, reversed, past the end, negative, huge, floats, another tensor's),
``dtype`` (same-size swaps such as F32 -> I32, unknown codes), ``shape`` (transposed, reshaped
to the same element count), keys (renamed, repeated, removed), ``__metadata__``, the 8-byte
length prefix (short, long, zero, 2^64 - 1), padding and garbage after the header, bytes of the
data flipped, the file cut anywhere, and two harmless rewrites that must load with the same
values: the tensors laid out in another order with offsets to match, and a reformatted header.

**Verdict.** Loading and decoding every tensor (copies, or a shared mapping: both modes) must
either give exactly the original dtype, shape and bytes of each tensor, or raise a trama error;
a value that differs without an error is silent corruption (``other``), as is any other
exception or a crash. The ``trama validate`` engine must agree, and the MLP, when accepted, runs.

Run: ``python -m reliability.fuzz_safetensors --cases 20000 --seed 1`` from ``tests/``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import shutil
import struct
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from reliability.fuzzing import Pairs, Raw, Verdict, fuzz_main, mutate_json, render, verdict_of

__all__ = ["SidecarSeed", "build_seeds", "main", "mutate_sidecar", "run_case"]

_CODES = (
    "F64",
    "F32",
    "F16",
    "BF16",
    "I64",
    "I32",
    "I16",
    "I8",
    "U8",
    "BOOL",
    "U16",
    "U32",
    "F8_E4M3",
    "f32",
    "",
    "C64",
)


@dataclass
class SidecarSeed:
    """An external-weights document: its JSON text, the weights file's name and bytes, the
    parsed header and data section, and each tensor entry's original (dtype, shape, bytes)."""

    name: str
    document: bytes
    document_name: str
    weights_name: str
    weights: bytes
    header: dict[str, Any]
    data: bytes
    originals: dict[str, tuple[str, tuple[int, ...], bytes]]
    runs: bool
    #: The safetensors key of each tensor entry, as the document gives it.
    keys: dict[str, str]


def _bag() -> Any:
    """One leaf holding a tensor of every dtype, in shapes from 0-d to 4-d and empty."""
    import trama
    from trama import INPUT, Node, Parameter, Ref, Tensor

    rng = np.random.default_rng(3)
    arrays = {
        "f32": rng.standard_normal((3, 4)).astype(np.float32),
        "f16": rng.standard_normal(5).astype(np.float16),
        "f64": np.array(2.5),
        "i64": np.array([-(2**63), 2**63 - 1, 0, 7], dtype=np.int64),
        "i32": np.arange(4, dtype=np.int32).reshape(2, 2),
        "i16": np.array([-1, 0, 1], dtype=np.int16),
        "i8": np.arange(-3, 4, dtype=np.int8),
        "u8": np.zeros(0, dtype=np.uint8),
        "flag": np.array([[True, False, True], [False, False, True]]),
        "deep": rng.standard_normal((1, 1, 1, 2)).astype(np.float32),
        "empty": np.zeros((2, 0, 3), dtype=np.float32),
    }
    tensors = {name: Tensor.from_array(array) for name, array in arrays.items()}
    try:
        import ml_dtypes

        tensors["bf16"] = Tensor.from_array(np.array([[1.0, -2.0, 0.5], [3.0, 0.0, -0.25]], dtype=ml_dtypes.bfloat16))
    except ImportError:
        pass
    slots = {name: f"bag.{name}" for name in tensors}
    node = Node("bag", "Bag", {"x": Ref(INPUT, "x")}, ["y"], slots)
    parameters = {f"bag.{name}": Parameter(tensor, learnable=True) for name, tensor in tensors.items()}
    return trama.Model(["x"], [Ref("bag", "y")], [node], parameters)


def _mlp() -> Any:
    import trama
    from trama import INPUT, Node, Parameter, Ref, Tensor

    rng = np.random.default_rng(4)
    x = Ref(INPUT, "x")
    nodes = [
        Node("net", "Sequential", {"x": x}, ["y"], output_bindings={"y": Ref("net.fc2", "y")}),
        Node(
            "net.fc1",
            "Linear",
            {"x": x},
            ["y"],
            {"in_features": "n4", "out_features": "n3", "weight": "w1", "bias": "b1"},
        ),
        Node("net.act", "relu", {"x": Ref("net.fc1", "y")}, ["y"]),
        Node(
            "net.fc2",
            "Linear",
            {"x": Ref("net.act", "y")},
            ["y"],
            {"in_features": "n3", "out_features": "n2", "weight": "w2"},
        ),
    ]
    parameters = {
        "n4": Parameter(4),
        "n3": Parameter(3),
        "n2": Parameter(2),
        "w1": Parameter(Tensor.from_array(rng.standard_normal((3, 4)).astype(np.float32)), learnable=True),
        "b1": Parameter(Tensor.from_array(rng.standard_normal(3).astype(np.float32)), learnable=True),
        "w2": Parameter(Tensor.from_array(rng.standard_normal((2, 3)).astype(np.float32)), learnable=True),
    }
    return trama.Model(["x"], [Ref("net", "y")], nodes, parameters)


def split(raw: bytes) -> tuple[dict[str, Any], bytes]:
    """A well-formed safetensors file's header and data section."""
    (length,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + length]), raw[8 + length :]


def join(header: Any, data: bytes, *, length: int | None = None, pad: bytes = b"") -> bytes:
    """A safetensors file: the header (a tree, rendered, or exact bytes), ``pad`` after it, the
    data; the length prefix counts header and pad unless ``length`` says otherwise."""
    text = (header if isinstance(header, bytes) else render(header)) + pad
    return struct.pack("<Q", len(text) if length is None else length % 2**64) + text + data


def tensor_keys(doc: dict[str, Any], entries: list[str]) -> dict[str, str]:
    """The safetensors key the document gives each of ``entries`` (its external tensors): in the
    flat form (1.2) its ``external`` reference's ``key``; in 1.3, where a tensor in the weights
    file is its checksum alone, the entry's name (``trama:__metadata__`` for ``__metadata__``,
    the one key safetensors reserves)."""
    if doc["format_version"] == "1.2":
        return {entry: doc["parameters"][entry]["value"]["external"]["key"] for entry in entries}
    assert isinstance(doc.get("weights"), str), "a 1.3 external document names its weights file"
    return {entry: "trama:__metadata__" if entry == "__metadata__" else entry for entry in entries}


#: The seed documents: (name, model, whether it runs on numpy, format version).
_SEED_MODELS = (
    ("bag", _bag, False, "1.3"),
    ("mlp", _mlp, True, "1.3"),
    ("bag_1_2", _bag, False, "1.2"),
    ("mlp_1_2", _mlp, True, "1.2"),
)


def build_seeds(folder: Path) -> list[SidecarSeed]:
    """Dump the seed documents with external weights into ``folder`` and read them back."""
    import trama

    seeds = []
    for name, make, runs, version in _SEED_MODELS:
        path = folder / name / "model.trama.json"
        path.parent.mkdir(parents=True)
        trama.dump(make(), path, weights="external", format_version=version)
        weights = [p for p in path.parent.iterdir() if p.suffix == ".safetensors"]
        if len(weights) != 1:
            raise RuntimeError(f"expected one weights file beside {path}, found {weights}")
        raw = weights[0].read_bytes()
        header, data = split(raw)
        loaded = trama.load(path)
        doc = json.loads(path.read_text())
        if doc["format_version"] != version:
            raise RuntimeError(f"{path} is format {doc['format_version']}, not {version}")
        tensors = {entry: p.value for entry, p in loaded.parameters.items() if isinstance(p.value, trama.Tensor)}
        keys = tensor_keys(doc, list(tensors))
        originals = {}
        for entry, value in tensors.items():
            if keys[entry] not in header:
                raise RuntimeError(f"{path}: no tensor {keys[entry]!a} in {weights[0].name}")
            originals[keys[entry]] = (value.dtype, tuple(value.shape), np.ascontiguousarray(value.numpy()).tobytes())
        seeds.append(
            SidecarSeed(name, path.read_bytes(), path.name, weights[0].name, raw, header, data, originals, runs, keys)
        )
    return seeds


# --- mutations ------------------------------------------------------------------------------------


def _tensor_keys(header: dict[str, Any]) -> list[str]:
    return [key for key in header if key != "__metadata__"]


def _relayout(seed: SidecarSeed, rng: random.Random) -> bytes:
    """The same tensors in another order in the data section, offsets to match: valid."""
    keys = _tensor_keys(seed.header)
    rng.shuffle(keys)
    header: dict[str, Any] = {}
    if "__metadata__" in seed.header:
        header["__metadata__"] = seed.header["__metadata__"]
    data = bytearray()
    for key in keys:
        begin, end = seed.header[key]["data_offsets"]
        data += b"\0" * rng.choice((0, 0, 8, 3))  # gaps between tensors are allowed
        header[key] = {**seed.header[key], "data_offsets": [len(data), len(data) + end - begin]}
        data += seed.data[begin:end]
    return join(header, bytes(data), pad=b" " * rng.choice((0, 1, 7)))


def mutate_sidecar(seed: SidecarSeed, rng: random.Random) -> tuple[bytes, list[str]]:
    """The bytes of one case's weights file, and what was done to them."""
    header = copy.deepcopy(seed.header)
    data = seed.data
    done: list[str] = []
    keys = _tensor_keys(header)
    kind = rng.choice(
        (
            "json",
            "json",
            "offsets",
            "offsets",
            "dtype",
            "shape",
            "keys",
            "metadata",
            "length",
            "pad",
            "flip",
            "cut",
            "relayout",
            "reformat",
            "swap_data",
        )
    )
    length: int | None = None
    pad = b""
    if kind == "json":
        root = {"doc": header}
        for _ in range(rng.choice((1, 1, 2, 3))):
            done.append("header: " + mutate_json(root, rng))
        return join(root["doc"], data), done
    if kind == "offsets":
        key = rng.choice(keys)
        begin, end = header[key]["data_offsets"]
        other = header[rng.choice(keys)]["data_offsets"]
        shift = rng.choice((1, -1, 8, -8, 4096, len(data), -begin - 1))
        choices: list[Any] = [
            [begin + shift, end + shift],
            [begin, end + shift],
            [begin + shift, end],
            [end, begin],
            list(other),
            [begin, len(data) + 1],
            [-8, end],
            [2**63, 2**63 + end - begin],
            [2**64, 2**64 + end - begin],
            [float(begin), float(end)],
            [str(begin), str(end)],
            [begin, end, end],
            [begin],
            None,
            [[begin], [end]],
            [True, end] if begin == 1 else [begin, True],
        ]
        header[key]["data_offsets"] = rng.choice(choices)
        done.append(f"{key}: data_offsets -> {header[key]['data_offsets']!a}"[:120])
    elif kind == "dtype":
        key = rng.choice(keys)
        header[key]["dtype"] = rng.choice((*_CODES, None, 32))
        done.append(f"{key}: dtype -> {header[key]['dtype']!a}")
    elif kind == "shape":
        key = rng.choice(keys)
        shape = list(header[key]["shape"])
        count = int(np.prod(shape)) if shape else 1
        header[key]["shape"] = rng.choice(
            (
                shape[::-1],
                [count],
                [1, *shape],
                shape[:-1],
                [*shape, 1],
                [count, 0],
                [-count],
                [2**62, 2**62],
                [float(d) for d in shape],
                [True] * len(shape),
                None,
                "3",
            )
        )
        done.append(f"{key}: shape -> {header[key]['shape']!a}")
    elif kind == "keys":
        key = rng.choice(keys)
        way = rng.choice(("rename", "repeat", "drop", "swap"))
        if way == "rename":
            header[rng.choice((key + "_", key.upper(), "", "\udc80", "__metadata__"))] = header.pop(key)
        elif way == "repeat":
            pairs = Pairs(header.items())
            twin = copy.deepcopy(header[rng.choice(keys)])
            pairs.insert(rng.randint(0, len(pairs)), (key, twin))
            done.append(f"repeat key {key}")
            return join(pairs, data), done
        elif way == "drop":
            del header[key]
        else:
            other = rng.choice(keys)
            header[key], header[other] = header[other], header[key]
        done.append(f"{key}: key ({way})")
    elif kind == "metadata":
        header["__metadata__"] = rng.choice(
            (
                {"format": "pt"},
                {"a": 1},
                {"a": None},
                {"a": ["x"]},
                "text",
                [],
                None,
                {"x" * 1000: "y" * 100_000},
                Raw("[" * 50_000 + "]" * 50_000),
            )
        )
        done.append("__metadata__")
    elif kind == "length":
        true = len(render(header))
        length = rng.choice(
            (0, 1, 7, true - 1, true + 1, true + len(data), true + len(data) + 1, 2**63, 2**64 - 1, 100 * 2**20 + 1, -1)
        )
        done.append(f"length prefix {true} -> {length % 2**64}")
    elif kind == "pad":
        pad = rng.choice((b" " * 9, b"\n", b"\t", b"\0", b"\xff", b"}", b" x", b"\xef\xbb\xbf"))
        done.append(f"after the header: {pad[:8]!r}")
    elif kind == "flip" and data:
        flipped = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        data = bytes(flipped)
        done.append("flip data bits")
    elif kind == "cut":
        whole = join(header, data)
        at = rng.randrange(len(whole) + 1)
        return whole[:at], [f"cut at byte {at} of {len(whole)}"]
    elif kind == "relayout":
        return _relayout(seed, rng), ["tensors laid out in another order (valid)"]
    elif kind == "reformat":
        text = json.dumps(header, indent=rng.choice((None, 1, 4)), sort_keys=rng.random() < 0.5).encode()
        return join(text, data), ["header reformatted (valid)"]
    elif kind == "swap_data" and len(keys) >= 2:
        a, b = rng.sample(keys, 2)
        header[a]["data_offsets"], header[b]["data_offsets"] = header[b]["data_offsets"], header[a]["data_offsets"]
        if rng.random() < 0.5:
            header[a]["shape"], header[b]["shape"] = header[b]["shape"], header[a]["shape"]
            header[a]["dtype"], header[b]["dtype"] = header[b]["dtype"], header[a]["dtype"]
        done.append(f"data of {a} and {b} swapped")
    if rng.random() < 0.15:  # and a second, generic one now and then
        root = {"doc": header}
        done.append("header: " + mutate_json(root, rng))
        header = root["doc"]
    return join(header, data, length=length, pad=pad), done


# --- one case -------------------------------------------------------------------------------------

SEEDS: list[SidecarSeed] = []
SCRATCH: list[Path] = []
#: The share of cases also checked by the ``trama validate`` engine.
VALIDATE_SHARE = 0.5


def _use_every_tensor(model: Any, seed: SidecarSeed) -> Verdict | None:
    import trama

    for entry, parameter in model.parameters.items():
        value = parameter.value
        if not isinstance(value, trama.Tensor):
            continue
        array = value.numpy()
        key = seed.keys[entry]
        got = (value.dtype, tuple(value.shape), np.ascontiguousarray(array).tobytes())
        if got != seed.originals[key]:
            return Verdict("other", "tensors", f"silent corruption: tensor {key!a} loads as other values")
    return None


def classify(weights: bytes, seed: SidecarSeed, rng: random.Random) -> Verdict:
    import trama
    from trama.format._problems import document_problems

    folder = SCRATCH[0] / f"{os.getpid()}"
    folder.mkdir(exist_ok=True)
    (folder / seed.weights_name).write_bytes(weights)
    path = folder / seed.document_name
    path.write_bytes(seed.document)
    stage = "load"
    verdict: Verdict | None = None
    model: Any = None
    try:
        model = trama.load(path, mmap_weights=rng.random() < 0.5)
        stage = "tensors"
        verdict = _use_every_tensor(model, seed)
    except BaseException as error:
        if isinstance(error, KeyboardInterrupt):
            raise
        verdict = verdict_of(error, stage)
    if rng.random() < VALIDATE_SHARE:
        try:
            problems = document_problems(seed.document, folder)
        except BaseException as error:
            return Verdict("other", "validate", "validate raised " + verdict_of(error, "validate").detail)
        if verdict is None and problems:
            return Verdict("other", "validate", f"load accepts, validate refuses: {problems[0]}")
        if verdict is not None and verdict.outcome == "refused" and not problems:
            return Verdict("other", "validate", f"validate says ok, load refuses: {verdict.detail}")
    if verdict is not None:
        return verdict
    if seed.runs:
        try:
            stage = "run"
            runnable = trama.runtime_for_name("numpy").prepare(model)
            runnable.run([np.ones((2, 4), np.float32)])
        except BaseException as error:
            return verdict_of(error, stage)
    return Verdict("accepted", "used")


def run_case(seed: int, index: int) -> dict[str, Any]:
    rng = random.Random(f"{seed}/{index}")
    chosen = rng.choice(SEEDS)
    weights, done = mutate_sidecar(chosen, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        verdict = classify(weights, chosen, rng)
    return {**verdict.as_dict(), "seed": chosen.name, "mutations": done}


def _cleanup() -> None:
    for folder in {path.parent for path in SCRATCH}:
        shutil.rmtree(folder, ignore_errors=True)
    SCRATCH.clear()


def _prepare(args: argparse.Namespace) -> Callable[[int], dict[str, Any]]:
    folder = Path(tempfile.mkdtemp(prefix="fuzz-safetensors-"))
    SEEDS[:] = build_seeds(folder / "seeds")
    SCRATCH[:] = [folder / "cases"]
    SCRATCH[0].mkdir()
    return lambda index: run_case(args.seed, index)


def _describe(args: argparse.Namespace, index: int) -> str:
    case = _prepare(args)
    rng = random.Random(f"{args.seed}/{index}")
    chosen = rng.choice(SEEDS)
    weights, done = mutate_sidecar(chosen, rng)
    result = case(index)
    folder = SCRATCH[0] / str(os.getpid())
    keep = Path(tempfile.mkdtemp(prefix=f"safetensors-case-{index}-"))
    shutil.copytree(folder, keep, dirs_exist_ok=True)
    (keep / chosen.weights_name).write_bytes(weights)
    return "\n".join(
        [
            f"seed document: {chosen.name}",
            f"mutations: {'; '.join(done)}",
            f"case files: {keep}",
            f"verdict: {result['outcome']} at {result['stage']}: {result['detail']}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m reliability.fuzz_safetensors [--cases N] [--seed S] [--case I]``."""
    return fuzz_main("fuzz_safetensors", argv, prepare=_prepare, describe=_describe, cleanup=_cleanup)


if __name__ == "__main__":
    raise SystemExit(main())
