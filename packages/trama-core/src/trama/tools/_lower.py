"""``trama lower DOC --to onnx -o model.onnx``: a document as a file another stack runs.

Lowering is a framework package's job: ``trama-onnx`` for ONNX (every catalog op by its catalog
semantics, each composite an ONNX local function), ``trama-torch`` for a ``torch.export``
program (``--to torch-export -o model.pt2``: the document imported into torch and traced, its
symbolic sizes dynamic). This command loads the document, asks that package, checks the result
(``onnx.checker``'s full check; torch.export checks its own trace) and writes it without ever
leaving a half-written file in place of a good one: the model (and its external data file, with
``--external-data``) is written beside the target under a temporary name and moved over it.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trama.errors import TramaError

__all__ = ["lower_arguments", "run_lower"]

#: What ``--to`` accepts, and the package that lowers to it.
TARGETS = {"onnx": "trama-onnx", "torch-export": "trama-torch"}
#: The target an output's suffix means when ``--to`` is not given.
_SUFFIXES = {".onnx": "onnx", ".pt2": "torch-export"}


def lower_arguments(parser: argparse.ArgumentParser) -> None:
    from trama.tools.cli import _document

    parser.add_argument("file", type=_document, metavar="FILE", help="a trama document (.trama.json), or - for stdin")
    parser.add_argument(
        "--to",
        choices=sorted(TARGETS),
        default=None,
        help="what to lower to: onnx (a .onnx file) or torch-export (a torch.export .pt2 program, for ExecuTorch "
        "or AOTInductor); default: by the output's suffix, onnx for any other",
    )
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
    parser.add_argument(
        "--size",
        action="append",
        default=[],
        metavar="SYMBOL=N",
        help="torch-export: the size a symbol takes in the example inputs the trace runs on (default 7, within "
        "the symbol's range); the program still takes any size in the range. Repeatable",
    )


def run_lower(args: argparse.Namespace) -> int:
    """Lower, check and write; a bad document, a node that cannot be lowered or a file that
    cannot be written is one line on stderr and exit status 1."""
    from trama.tools.cli import EXIT_INVALID, EXIT_OK, _clip, _load_or_say, _name, _one_line, _special_file

    kind = _special_file(args.output)
    if kind is not None:
        print(f"{_name(args.output)}: cannot write the model: it is {kind}, not a regular file", file=sys.stderr)
        return EXIT_INVALID
    target = args.to or _SUFFIXES.get(args.output.suffix, "onnx")
    sizes = _sizes(args.size)
    if sizes is None:
        return EXIT_INVALID
    if target == "torch-export":
        return _lower_to_torch_export(args, sizes)
    if sizes:
        print("trama lower: --size is for --to torch-export (an ONNX model takes any size)", file=sys.stderr)
        return EXIT_INVALID
    try:
        onnx = importlib.import_module("onnx")
        trama_onnx = importlib.import_module("trama_onnx")  # a framework package: never imported by the core itself
    except ImportError:
        return _needs(target)
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
            f"wrote {output.name} (opset {proto.opset_import[0].version}, {_count(len(graph.node), 'node')} in the "
            f"graph, {_count(len(proto.functions), 'function')}, {_count(len(graph.initializer), 'initializer')}"
            + (f"; weights in {data_name}" if data_name else "")
            + ")"
        )
    return EXIT_OK


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _needs(target: str) -> int:
    from trama.tools.cli import EXIT_INVALID

    package = TARGETS[target]
    print(f"trama lower: lowering to {target} needs {package} (pip install {package})", file=sys.stderr)
    return EXIT_INVALID


def _sizes(given: list[str]) -> dict[str, int] | None:
    """``--size`` options as a mapping; a malformed one is said on stderr (``None``)."""
    sizes: dict[str, int] = {}
    for text in given:
        symbol, sep, number = text.partition("=")
        if not sep or not symbol.strip() or not number.strip().isdigit():
            print(f"trama lower: --size takes SYMBOL=N (a positive integer), got {text!r}", file=sys.stderr)
            return None
        sizes[symbol.strip()] = int(number)
    return sizes


def _lower_to_torch_export(args: argparse.Namespace, sizes: dict[str, int]) -> int:
    """``--to torch-export``: the document's ``torch.export`` program, saved with
    ``torch.export.save`` under a temporary name beside the target and moved over it."""
    from trama.tools.cli import EXIT_INVALID, EXIT_OK, _clip, _load_or_say, _name, _one_line

    if args.external_data or args.inline or args.opset is not None:
        print("trama lower: --external-data, --inline and --opset are for --to onnx", file=sys.stderr)
        return EXIT_INVALID
    try:
        torch = importlib.import_module("torch")
        program = importlib.import_module("trama_torch.program")  # a framework package, as trama_onnx
    except ImportError:
        return _needs("torch-export")
    model = _load_or_say(args.file)
    if model is None:
        return EXIT_INVALID
    try:
        exported = program.export_program(model, sizes=sizes)
    except TramaError as exc:
        print(f"{_name(args.file)}: {_one_line(exc)}", file=sys.stderr)
        return EXIT_INVALID
    output: Path = args.output
    try:
        with _staged(output) as (staged, _):
            torch.export.save(exported, staged)
    except OSError as exc:
        print(f"{_name(output)}: cannot write the program: {_clip(str(exc))}", file=sys.stderr)
        return EXIT_INVALID
    if not args.quiet:
        dynamic = ", ".join(_dynamic_sizes(model))
        print(
            f"wrote {output.name} (torch.export program, {len(exported.graph.nodes)} graph nodes; "
            + (f"dynamic sizes: {dynamic})" if dynamic else "static sizes)")
        )
    return EXIT_OK


def _dynamic_sizes(model: Any) -> list[str]:
    """Each symbol of the input facts with the range the document gives it, in words."""
    from trama.format._validation import input_symbols

    ranges = model.symbols or {}
    return [
        f"{symbol} ({ranges[symbol].describe()})" if symbol in ranges else symbol
        for symbol in sorted(input_symbols(model))
    ]


@contextlib.contextmanager
def _staged(output: Path) -> Iterator[tuple[Path, Path]]:
    """A path beside ``output`` to write the new file to (and the scratch folder it is in), moved
    over ``output`` once the block has written it: a failure leaves the old file as it was."""
    folder = output.parent if str(output.parent) else Path(".")
    with tempfile.TemporaryDirectory(dir=folder, prefix=".trama-lower-") as scratch:
        staged = Path(scratch) / output.name
        yield staged, Path(scratch)
        os.replace(staged, output)


def _write(onnx: Any, proto: Any, output: Path, data_name: str | None) -> None:
    """Write the model (and its external data) under temporary names beside ``output``, then move
    them over the targets, the data file first, so that a reader never finds the new model with
    the old weights, and a failure leaves the old files as they were."""
    with _staged(output) as (staged, scratch):
        if data_name is None:
            staged.write_bytes(proto.SerializeToString())
            return
        # onnx looks for an existing data file relative to the working directory: save from
        # inside the scratch folder, where nothing of that name exists.
        here = os.getcwd()
        os.chdir(scratch)
        try:
            onnx.save_model(proto, output.name, save_as_external_data=True, location=data_name, size_threshold=0)
        finally:
            os.chdir(here)
        data = scratch / data_name
        os.chmod(data, staged.stat().st_mode & 0o777)  # onnx writes it owner-only; as the model
        os.replace(data, output.parent / data_name)
