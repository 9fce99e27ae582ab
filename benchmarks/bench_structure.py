"""How big and how readable a model's structure is: trama JSON against ONNX, weights left out.

The model is ``nn.TransformerEncoder`` with two ``TransformerEncoderLayer(d_model=64, nhead=4,
dim_feedforward=128, dropout=0, batch_first=True)``, in eval mode, on an input ``[2, 10, 64]``.
Its parameters are redrawn at random per tensor first: ``TransformerEncoder`` deep-copies one
layer, so both layers start with equal weights, and ONNX's exporter folds equal initializers
into one (adding ``Identity`` nodes), which would make the two files describe different models.

Weights are left out of both, so that what is compared is the structure:

* trama: ``trama.dump(model, path, weights="external")`` writes the tensors to a ``.safetensors``
  file beside the document; only the ``.json`` is measured. It still holds each tensor's entry
  (dtype, shape, file key and checksum), so it remains a complete, loadable document.
* ONNX: ``torch.onnx.export(..., dynamo=False)`` (the TorchScript-based exporter; its
  ``DeprecationWarning`` is silenced here), then ``graph.initializer`` is emptied, which drops
  the weights together with their names, types and shapes. Small constants inside ``Constant``
  nodes stay: they are part of the graph.

Reported: bytes as written and gzip'd (level 9), the number of nodes (trama: all nodes and the
leaves among them; ONNX: ``graph.node``), and the head of each as text, to judge readability:
``trama ssa``'s rendering of the wiring (its parameter table left out) and ONNX's own text form
(``onnx.printer``). A structure benchmark, not a
timing one: nothing is run in a fresh process and nothing is asserted.

    .venv/bin/python benchmarks/bench_structure.py [--d-model 64] [--heads 4] [--layers 2] [--head-lines 24]
"""

from __future__ import annotations

import argparse
import gzip
import io
import tempfile
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

from _common import describe_machine, machine_info, table, write_json


def build(d_model: int, heads: int, feedforward: int, layers: int) -> Any:
    """The encoder, in eval mode, every parameter redrawn from a seeded normal distribution."""
    import torch

    layer = torch.nn.TransformerEncoderLayer(d_model, heads, feedforward, dropout=0.0, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).eval()
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in encoder.parameters():
            parameter.copy_(0.1 * torch.randn(parameter.shape, generator=generator))
    return encoder


def trama_figures(encoder: Any, folder: Path) -> dict[str, Any]:
    import trama
    from trama.tools import to_ssa

    model = trama.export_model(encoder, inputs=["x"], outputs=["y"])
    path = folder / "encoder.trama.json"
    trama.dump(model, path, weights="external")
    data = path.read_bytes()
    leaves = [node for node in model.nodes if not node.is_composite]
    return {
        "bytes": len(data),
        "gzip_bytes": len(gzip.compress(data, 9)),
        "nodes": len(model.nodes),
        "leaves": len(leaves),
        "ops": dict(Counter(node.op for node in model.nodes)),
        "weights_file_bytes": trama.weights_path(path).stat().st_size,
        # The wiring, without the parameter table (the SSA's second section, one line per entry).
        "text": "\n\n".join(part for part in to_ssa(model).split("\n\n") if not part.startswith("parameters:")),
    }


def onnx_figures(encoder: Any, x: Any) -> dict[str, Any]:
    import onnx
    import onnx.printer
    import torch

    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the legacy exporter says it is legacy
        torch.onnx.export(encoder, (x,), buffer, dynamo=False, input_names=["x"], output_names=["y"])
    proto = onnx.load_from_string(buffer.getvalue())
    with_weights = len(buffer.getvalue())
    initializers = len(proto.graph.initializer)
    del proto.graph.initializer[:]
    data = proto.SerializeToString()
    return {
        "bytes": len(data),
        "gzip_bytes": len(gzip.compress(data, 9)),
        "nodes": len(proto.graph.node),
        "ops": dict(Counter(node.op_type for node in proto.graph.node)),
        "with_initializers_bytes": with_weights,
        "initializers": initializers,
        "text": onnx.printer.to_text(proto.graph),
    }


def head(text: str, lines: int) -> str:
    kept = text.splitlines()
    more = f"\n  ... ({len(kept) - lines} more lines)" if len(kept) > lines else ""
    return "\n".join("  " + line for line in kept[:lines]) + more


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--feedforward", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--head-lines", type=int, default=24, help="lines of each text form to show")
    parser.add_argument("--out", default="structure.json")
    args = parser.parse_args(argv)

    import torch

    encoder = build(args.d_model, args.heads, args.feedforward, args.layers)
    x = torch.randn(2, 10, args.d_model, generator=torch.Generator().manual_seed(1))
    with tempfile.TemporaryDirectory() as folder:
        ours = trama_figures(encoder, Path(folder))
    theirs = onnx_figures(encoder, x)

    print(
        f"nn.TransformerEncoder: {args.layers} layers, d_model {args.d_model}, {args.heads} heads, "
        f"feed-forward {args.feedforward}; structure only (weights left out)\n"
    )
    print(
        table(
            ["", "bytes", "gzip'd", "nodes"],
            [
                [
                    "trama .json (weights external)",
                    ours["bytes"],
                    ours["gzip_bytes"],
                    f"{ours['nodes']} ({ours['leaves']} leaves)",
                ],
                ["ONNX, initializers removed", theirs["bytes"], theirs["gzip_bytes"], theirs["nodes"]],
                [
                    "trama / ONNX",
                    f"{ours['bytes'] / theirs['bytes']:.2f}x",
                    f"{ours['gzip_bytes'] / theirs['gzip_bytes']:.2f}x",
                    f"{ours['nodes'] / theirs['nodes']:.2f}x",
                ],
            ],
        )
    )
    print(f"\ntrama ops: {ours['ops']}")
    print(f"ONNX ops:  {theirs['ops']}")
    print(
        f"(for scale: the weights file is {ours['weights_file_bytes']} bytes; the ONNX file with its "
        f"{theirs['initializers']} initializers is {theirs['with_initializers_bytes']} bytes)"
    )
    lines = args.head_lines
    print(f"\ntrama ssa without its parameter table, first {lines} lines:\n{head(ours['text'], lines)}")
    print(f"\nONNX text (onnx.printer), first {args.head_lines} lines:\n{head(theirs['text'], args.head_lines)}")
    info = machine_info()
    print()
    print(describe_machine(info))
    summary = {
        name: {k: v for k, v in figures.items() if k != "text"} for name, figures in (("trama", ours), ("onnx", theirs))
    }
    out = write_json(args.out, {"machine": info, "config": vars(args), "summary": summary})
    print(f"\nresults written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
