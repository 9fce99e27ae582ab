"""Reference worker: the old PyPI release trama 0.2.0, driven through its public API only.

Runs under the reference interpreter (``.venv-ref/bin/python``, see ``setup_reference.sh``),
never under ours: that release is a different library that shares the name ``trama``. The
orchestrators in ``bench_weights.py`` and ``bench_graph.py`` start it once per measured case::

    .venv-ref/bin/python benchmarks/_ref_v02.py weights-dump DIR --count 16 --side 2048
    .venv-ref/bin/python benchmarks/_ref_v02.py weights-load DIR
    .venv-ref/bin/python benchmarks/_ref_v02.py chain-write N PATH
    .venv-ref/bin/python benchmarks/_ref_v02.py chain-load PATH
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from _common import Probe, fingerprint

import trama

if trama.__version__ != "0.2.0":
    sys.exit(f"_ref_v02.py needs trama 0.2.0 (the reference interpreter), got {trama.__version__}")

FILE_NAME = "model.trama.json"


class Weights:
    """A leaf op holding tensors (0.2.0's ExportableOp / ImportableOp protocols).

    As 0.2.0 stores tensors as ``TensorValue`` (base64 text) from the moment of export, the
    base64 encoding happens in ``to_node``, i.e. in the export phase.
    """

    def __init__(self, arrays: list[np.ndarray]) -> None:
        self.arrays = arrays

    def to_node(self, *, node_id: str, ctx: Any) -> Any:
        slots: dict[str, Any] = {}
        table: dict[str, Any] = {}
        for k, array in enumerate(self.arrays):
            slot = f"w{k:02d}"
            name = ctx.parameter_name(array, hint=f"{node_id}.{slot}")
            slots[slot] = trama.ParameterRef(name=name)
            value = trama.TensorValue(
                dtype="float32",
                shape=[int(d) for d in array.shape],
                data=trama.encode_bytes(memoryview(array).cast("B")),  # type: ignore[arg-type]
            )
            table[name] = trama.ParameterEntry(value=value, learnable=True)
        node = trama.Node(
            id=node_id,
            parent=trama.parent_of(node_id),
            op="Weights",
            inputs=dict(ctx.input_refs),
            outputs=["y"],
            parameters=slots,
            output_bindings=None,
        )
        return trama.NodeFragment(root_id=node_id, nodes=[node], parameters=table)

    @classmethod
    def from_node(cls, node: Any, *, children: dict[str, Any], parameters: dict[str, Any]) -> Weights:
        """Decode every tensor to numpy: 0.2.0's "decode on import"."""
        arrays = []
        for slot in sorted(parameters):
            value = parameters[slot].value
            raw = trama.decode_bytes(value.data)
            arrays.append(np.frombuffer(raw, dtype=np.float32).reshape(value.shape))
        return cls(arrays)


def weights_registry(count: int) -> Any:
    registry = trama.OpRegistry()
    registry.register(
        trama.OpSpec(
            name="Weights",
            inputs=["x"],
            outputs=["y"],
            parameters={f"w{k:02d}": trama.ParameterSchema(type="tensor") for k in range(count)},
            is_composite=False,
            factory=Weights.from_node,
        )
    )
    return registry


def make_arrays(count: int, side: int) -> list[np.ndarray]:
    """The same numbers as ``bench_weights.make_arrays`` (same seed, same generator)."""
    rng = np.random.default_rng(20240611)
    return [rng.standard_normal((side, side), dtype=np.float32) for _ in range(count)]


def weights_dump(folder: Path, count: int, side: int) -> None:
    arrays = make_arrays(count, side)
    (folder / "fingerprint.json").write_text(json.dumps(fingerprint(arrays)))
    probe = Probe()  # baseline after building the input: the arrays are not the cost
    with probe.phase("export"):
        model = trama.export_model(Weights(arrays), inputs=["x"], outputs=["y"])
    with probe.phase("dump"):
        trama.dump(model, folder / FILE_NAME)
    probe.extra["file_bytes"] = (folder / FILE_NAME).stat().st_size
    probe.emit()


def weights_load(folder: Path) -> None:
    expected = json.loads((folder / "fingerprint.json").read_text())
    registry = weights_registry(len(expected))
    probe = Probe()
    with probe.phase("load"):
        model = trama.load(folder / FILE_NAME)
    with probe.phase("materialise"):
        instance = trama.import_model(model, registry=registry)
        arrays = [np.asarray(a) for a in instance.arrays]
    probe.extra["verified"] = fingerprint(arrays) == expected
    probe.extra["weight_bytes"] = sum(a.nbytes for a in arrays)
    probe.emit()


class ReLU:
    def to_node(self, *, node_id: str, ctx: Any) -> Any:
        node = trama.Node(
            id=node_id,
            parent=trama.parent_of(node_id),
            op="ReLU",
            inputs=dict(ctx.input_refs),
            outputs=["y"],
            parameters={},
            output_bindings=None,
        )
        return trama.NodeFragment(root_id=node_id, nodes=[node])


class Sequential:
    """A root composite whose children are chained: ``relu_i`` reads ``relu_{i-1}``."""

    def __init__(self, children: list[ReLU]) -> None:
        self.children = children

    def to_node(self, *, node_id: str, ctx: Any) -> Any:
        pieces = []
        prev = trama.ValueRef(node="%input", output="x")
        for i, child in enumerate(self.children):
            child_id = f"{node_id}.relu_{i}"
            child_ctx = trama.ExportContext(input_refs={"x": prev}, parameter_name=ctx.parameter_name)
            pieces.append((child_id, child.to_node(node_id=child_id, ctx=child_ctx)))
            prev = trama.ValueRef(node=child_id, output="y")
        nodes, table = trama.compose_fragment(pieces)
        root = trama.Node(
            id=node_id,
            parent=trama.parent_of(node_id),
            op="Sequential",
            inputs=dict(ctx.input_refs),
            outputs=["y"],
            parameters={},
            output_bindings={"y": prev},
        )
        return trama.NodeFragment(root_id=node_id, nodes=[root, *nodes], parameters=table)


def chain_write(count: int, path: Path) -> None:
    probe = Probe()
    with probe.phase("export"):
        model = trama.export_model(Sequential([ReLU() for _ in range(count)]), inputs=["x"], outputs=["y"])
    with probe.phase("dump"):
        trama.dump(model, path)
    probe.extra["file_bytes"] = path.stat().st_size
    probe.emit()


def chain_load(path: Path) -> None:
    probe = Probe()
    with probe.phase("load"):
        model = trama.load(path)
    probe.extra["nodes"] = len(model.nodes)
    probe.emit()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    dump = sub.add_parser("weights-dump")
    dump.add_argument("folder", type=Path)
    dump.add_argument("--count", type=int, required=True)
    dump.add_argument("--side", type=int, required=True)
    sub.add_parser("weights-load").add_argument("folder", type=Path)
    write = sub.add_parser("chain-write")
    write.add_argument("count", type=int)
    write.add_argument("path", type=Path)
    sub.add_parser("chain-load").add_argument("path", type=Path)
    args = parser.parse_args(argv)
    if args.mode == "weights-dump":
        weights_dump(args.folder, args.count, args.side)
    elif args.mode == "weights-load":
        weights_load(args.folder)
    elif args.mode == "chain-write":
        chain_write(args.count, args.path)
    else:
        chain_load(args.path)


if __name__ == "__main__":
    main(sys.argv[1:])
