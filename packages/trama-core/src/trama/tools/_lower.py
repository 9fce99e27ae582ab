"""``trama lower DOC --to onnx -o model.onnx``: a document as a file another stack runs.

Lowering is a framework package's job (``trama-onnx`` for ONNX: every catalog op by its catalog
semantics, each composite an ONNX local function); this command loads the document, asks that
package, checks the result with ``onnx.checker`` (full check) and writes it without ever leaving
a half-written file in place of a good one: the model (and its external data file, with
``--external-data``) is written beside the target under a temporary name and moved over it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from trama.errors import TramaError

__all__ = ["lower_arguments", "run_lower"]

#: What ``--to`` accepts, and the package that lowers to it.
TARGETS = {"onnx": "trama-onnx"}


def lower_arguments(parser: argparse.ArgumentParser) -> None:
    from trama.tools.cli import _document

    parser.add_argument("file", type=_document, metavar="FILE", help="a trama document (.trama.json), or - for stdin")
    parser.add_argument("--to", choices=sorted(TARGETS), default="onnx", help="what to lower to (default: onnx)")
    parser.add_argument("-o", "--output", type=Path, required=True, help="the file to write (replaced atomically)")
    parser.add_argument(
        "--external-data",
        action="store_true",
        help="write the weights to OUTPUT.data beside the model (ONNX external data) instead of inside it; "
        "needed above 2 GB",
    )
    parser.add_argument(
        "--inline", action="store_true", help="inline every composite instead of one ONNX function per block"
    )
    parser.add_argument("--opset", type=int, default=None, help="the ONNX opset (default: trama-onnx's)")


def run_lower(args: argparse.Namespace) -> int:
    """Lower, check and write; a bad document, a node that cannot be lowered or a file that
    cannot be written is one line on stderr and exit status 1."""
    from trama.tools.cli import EXIT_INVALID, EXIT_OK, _clip, _load_or_say, _name, _one_line, _special_file

    kind = _special_file(args.output)
    if kind is not None:
        print(f"{_name(args.output)}: cannot write the model: it is {kind}, not a regular file", file=sys.stderr)
        return EXIT_INVALID
    try:
        onnx = importlib.import_module("onnx")
        trama_onnx = importlib.import_module("trama_onnx")  # a framework package: never imported by the core itself
    except ImportError:
        package = TARGETS[args.to]
        print(f"trama lower: lowering to {args.to} needs {package} (pip install {package})", file=sys.stderr)
        return EXIT_INVALID
    model = _load_or_say(args.file)
    if model is None:
        return EXIT_INVALID
    output: Path = args.output
    data_name = output.name + ".data" if args.external_data else None
    options: dict[str, Any] = {"functions": not args.inline}
    if args.opset is not None:
        options["opset"] = args.opset
    try:
        proto = trama_onnx.lower(model, **options)
    except TramaError as exc:
        print(f"{_name(args.file)}: {_one_line(exc)}", file=sys.stderr)
        return EXIT_INVALID
    try:
        _write(onnx, proto, output, data_name)
    except OSError as exc:
        print(f"{_name(output)}: cannot write the model: {_clip(str(exc))}", file=sys.stderr)
        return EXIT_INVALID
    if not args.quiet:
        graph = proto.graph
        print(
            f"wrote {output.name} (opset {proto.opset_import[0].version}, {len(graph.node)} nodes in the graph, "
            f"{len(proto.functions)} functions, {len(graph.initializer)} initializers"
            + (f"; weights in {data_name}" if data_name else "")
            + ")"
        )
    return EXIT_OK


def _write(onnx: Any, proto: Any, output: Path, data_name: str | None) -> None:
    """Write the model (and its external data) under temporary names beside ``output``, then move
    them over the targets, the data file first, so that a reader never finds the new model with
    the old weights, and a failure leaves the old files as they were."""
    folder = output.parent if str(output.parent) else Path(".")
    with tempfile.TemporaryDirectory(dir=folder, prefix=".trama-lower-") as scratch:
        staged = Path(scratch) / output.name
        if data_name is None:
            staged.write_bytes(proto.SerializeToString())
        else:
            # onnx looks for an existing data file relative to the working directory: save from
            # inside the scratch folder, where nothing of that name exists.
            here = os.getcwd()
            os.chdir(scratch)
            try:
                onnx.save_model(proto, output.name, save_as_external_data=True, location=data_name, size_threshold=0)
            finally:
                os.chdir(here)
            data = Path(scratch) / data_name
            os.chmod(data, staged.stat().st_mode & 0o777)  # onnx writes it owner-only; as the model
            os.replace(data, folder / data_name)
        os.replace(staged, output)
