"""What a reviewer has to read for one model: trama against ONNX and ``torch.export``, weights left out.

Why: a model-interchange file is also what a pull request that changes a model shows, and what
someone reads to check what a checkpoint really computes, so its size and length matter. trama
keeps the module hierarchy (a composite node per submodule, its operators inside it), ONNX and
``torch.export`` give one flat graph of operators. This puts the three side by side on real
models, the zoo of ``tests/realworld/`` (small configs of the libraries' own classes, random
seeded weights), all measured in one run on the same inputs:

* trama: ``trama.export_model(model, inputs=..., outputs=..., example_inputs=...)`` (the capture
  through torch.export); the number of nodes of the document (``len(document.nodes)``); the bytes
  of its ``.trama.json`` written by ``trama.dump(document, path, weights="external")``, so that the
  tensors go to the ``.safetensors`` file beside it and only the structure is counted (each
  tensor's entry, dtype, shape, key and checksum, stays in the JSON); and the number of lines
  ``trama ssa FILE`` prints for that file (the CLI's own ``main``, run in this process).
* ONNX: ``torch.onnx.export(model, args, kwargs=kwargs, dynamo=True)``, the exporter's defaults:
  its onnxscript optimizer folds constants and, in eval mode, each ``BatchNormalization`` into the
  ``Conv`` before it, so a CNN's graph has fewer operators than the model has modules
  (``--no-onnx-optimize`` exports with ``optimize=False``). Reported: the nodes of the main graph
  (``len(graph.node)``) and of everything (the main graph, the model's local functions and any
  subgraphs of control-flow nodes); and ``len(model.SerializeToString())`` once the weights and
  the provenance are stripped: ``graph.initializer`` (and the ``graph.input`` entries that name
  one) removed, every ``metadata_props`` (the model's, the graph's, every node's and function's:
  the dynamo exporter stores each node's stack trace, module path and FX node there) and every
  ``doc_string`` cleared. What is left is the operators, their wiring, attributes and constants,
  and the value types.
* ``torch.export``: the lines of ``torch.export.export(model, args, kwargs, strict=False)
  .graph_module.print_readable(print_output=False)``, the program as torch shows it (its
  per-node ``# File: ...`` comments included, as a reader gets them; the JSON also has the count
  without comment and blank lines).

The table shows both ratios a reviewer cares about: trama's JSON bytes ÷ ONNX's stripped bytes
(JSON text against a binary protobuf), and ``trama ssa``'s lines ÷ ``print_readable``'s lines
(``trama ssa`` as a reviewer runs it: a repeated block printed once, no tensor table; earlier
versions printed their parameter table first, one line per entry). For a fairer reading the JSON
has a few more figures: both files gzip'd (level 9), the number of trama's leaves (its node count
includes the composite nodes of the hierarchy), ``trama ssa``'s lines without a parameter table
(the same figure now that the table is printed only on request), and the lines of ONNX's own
text form of the stripped model (``onnx.printer.to_text``).

A failure of any exporter is written in its row as one line and the run carries on. A report, not
a test: nothing is asserted. The models run in this process, one after the other; the JSON
(``--json``, ``benchmarks/out/review.json`` by default) also has each exporter's time (after one
warm-up export of an ``nn.Linear``).

    .venv/bin/python benchmarks/bench_review.py [--models hf_llama hf_bert ...] [--all] [--json PATH]
                                                [--no-onnx-optimize]
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from _common import OUT_DIR, REPO, describe_machine, machine_info, ratio, seconds, write_json

sys.path.insert(0, str(REPO / "tests"))

DEFAULT_MODELS = ("hf_llama", "hf_llama_8_layers", "hf_bert", "timm_convnext_atto")
#: Entries of this report that are a zoo entry with more layers: how the structure grows with
#: depth (trama writes a repeated block once; ONNX and torch.export write every layer).
DEEPER = {"hf_llama_8_layers": ("hf_llama", 8)}
LABELS = {"trama": "trama", "onnx": "ONNX", "torch_export": "torch.export"}  # result key: how it is named
LIBRARIES = ("torch", "torchvision", "transformers", "timm", "onnx", "onnxscript", "onnx-ir", "trama", "trama-torch")


def first_line(exc: BaseException, width: int = 160) -> str:
    """``Type: first line of the message``, clipped: how a row shows a failure."""
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return text if len(text) <= width else text[: width - 1] + "…"


@contextlib.contextmanager
def quiet() -> Iterator[io.StringIO]:
    """Silence the exporters' progress prints and warnings (kept in the yielded buffer)."""
    buffer = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        warnings.simplefilter("ignore")
        yield buffer


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


# --------------------------------------------------------------------------------------------
# The three exporters
# --------------------------------------------------------------------------------------------


def trama_figures(entry: Any, folder: Path) -> dict[str, Any]:
    import trama
    from trama.tools.cli import main as trama_main

    model = entry.build()
    args, kwargs = entry.args_kwargs()
    with quiet():
        document, elapsed = timed(
            lambda: trama.export_model(
                model,
                inputs=list(entry.input_names),
                outputs=list(entry.output_names),
                example_inputs=kwargs if kwargs else args,
            )
        )
    path = folder / f"{entry.name}.trama.json"
    trama.dump(document, path, weights="external")
    ssa = io.StringIO()
    with contextlib.redirect_stdout(ssa):
        status = trama_main(["ssa", "--quiet", str(path)])
    if status != 0:
        raise RuntimeError(f"trama ssa exited {status}")
    text = ssa.getvalue()
    data = path.read_bytes()
    wiring = "\n\n".join(part for part in text.split("\n\n") if not part.startswith("parameters:"))
    return {
        "nodes": len(document.nodes),
        "leaves": sum(1 for node in document.nodes if not node.is_composite),
        "json_bytes": len(data),
        "json_gzip_bytes": len(gzip.compress(data, 9)),
        "weights_file_bytes": trama.weights_path(path).stat().st_size,
        "ssa_lines": len(text.splitlines()),
        "ssa_lines_without_parameter_table": len(wiring.splitlines()),
        "ssa_bytes": len(text.encode()),
        "export_s": elapsed,
    }


def _graphs(graph: Any) -> Iterator[Any]:
    """``graph`` and every subgraph held in its nodes' attributes (If, Loop, Scan), depth first."""
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("g"):
                yield from _graphs(attribute.g)
            for sub in attribute.graphs:
                yield from _graphs(sub)


def _strip_nodes(nodes: Any) -> None:
    for node in nodes:
        del node.metadata_props[:]
        node.doc_string = ""


def strip(proto: Any) -> None:
    """Remove the weights and the provenance from an ONNX ``ModelProto``, in place."""
    initializers = {tensor.name for tensor in proto.graph.initializer}
    initializers |= {tensor.values.name for tensor in proto.graph.sparse_initializer}
    del proto.graph.initializer[:]
    del proto.graph.sparse_initializer[:]
    kept = [value for value in proto.graph.input if value.name not in initializers]
    del proto.graph.input[:]
    proto.graph.input.extend(kept)
    del proto.metadata_props[:]
    proto.doc_string = ""
    for graph in _graphs(proto.graph):
        del graph.metadata_props[:]
        graph.doc_string = ""
        for value in (*graph.input, *graph.output, *graph.value_info):
            value.doc_string = ""
            del value.metadata_props[:]
        _strip_nodes(graph.node)
    for function in proto.functions:
        del function.metadata_props[:]
        function.doc_string = ""
        _strip_nodes(function.node)
        for value in function.value_info:
            value.doc_string = ""
            del value.metadata_props[:]


def onnx_figures(entry: Any, optimize: bool) -> dict[str, Any]:
    import onnx.printer
    import torch

    model = entry.build()
    args, kwargs = entry.args_kwargs()
    with quiet():
        program, elapsed = timed(lambda: torch.onnx.export(model, args, kwargs=kwargs, dynamo=True, optimize=optimize))
    proto = program.model_proto
    as_exported = len(proto.SerializeToString())
    graph_nodes = len(proto.graph.node)
    subgraph_nodes = sum(len(graph.node) for graph in _graphs(proto.graph)) - graph_nodes
    function_nodes = sum(len(graph.node) for function in proto.functions for graph in _function_graphs(function))
    strip(proto)
    data = proto.SerializeToString()
    return {
        "graph_nodes": graph_nodes,
        "all_nodes": graph_nodes + subgraph_nodes + function_nodes,
        "functions": len(proto.functions),
        "value_infos": len(proto.graph.value_info),
        "stripped_bytes": len(data),
        "stripped_gzip_bytes": len(gzip.compress(data, 9)),
        "stripped_text_lines": len(onnx.printer.to_text(proto).splitlines()),
        "exported_bytes": as_exported,
        "export_s": elapsed,
    }


def _function_graphs(function: Any) -> Iterator[Any]:
    """A function's body as a graph-like object, and the subgraphs inside its nodes."""
    yield function
    for node in function.node:
        for attribute in node.attribute:
            if attribute.HasField("g"):
                yield from _graphs(attribute.g)
            for sub in attribute.graphs:
                yield from _graphs(sub)


def export_figures(entry: Any) -> dict[str, Any]:
    import torch

    model = entry.build()
    args, kwargs = entry.args_kwargs()
    with quiet():
        program, elapsed = timed(lambda: torch.export.export(model, args, kwargs, strict=False))
    text = program.graph_module.print_readable(print_output=False)
    lines = text.splitlines()
    code = [line for line in lines if line.strip() and not line.strip().startswith("#")]
    return {"lines": len(lines), "code_lines": len(code), "export_s": elapsed}


# --------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------


def warm_up() -> None:
    """Export a throwaway ``nn.Linear`` with both torch exporters, so that their one-time setup
    (imports, the compiler stack) is not billed to the first model's times."""
    import torch

    linear, x = torch.nn.Linear(4, 4).eval(), torch.randn(2, 4)
    with quiet(), contextlib.suppress(Exception):
        torch.export.export(linear, (x,), strict=False)
        torch.onnx.export(linear, (x,), dynamo=True)


def measure(entry: Any, folder: Path, optimize: bool) -> dict[str, Any]:
    """One zoo entry through the three exporters; each failure is recorded, none is raised."""
    result: dict[str, Any] = {"model": entry.name, "library": entry.library}
    exporters: dict[str, Callable[[], dict[str, Any]]] = {
        "trama": lambda: trama_figures(entry, folder),
        "onnx": lambda: onnx_figures(entry, optimize),
        "torch_export": lambda: export_figures(entry),
    }
    for key, figures in exporters.items():
        try:
            result[key] = figures()
        except Exception as exc:  # any exporter's failure is a finding, not a crash
            result[key] = {"error": first_line(exc)}
    return result


def _count(value: Any) -> str:
    return "-" if value is None else f"{value:,}"


def _div(numerator: Any, denominator: Any) -> str:
    return ratio(numerator / denominator) if numerator is not None and denominator else "-"


def row(result: dict[str, Any]) -> list[str]:
    t, o, e = result["trama"], result["onnx"], result["torch_export"]
    if "error" in o:
        onnx_nodes = onnx_bytes = "failed"
    else:
        onnx_nodes = f"{o['graph_nodes']:,} / {o['all_nodes']:,}"
        onnx_bytes = _count(o["stripped_bytes"])
    return [
        result["model"],
        "failed" if "error" in t else _count(t["nodes"]),
        "failed" if "error" in t else _count(t["json_bytes"]),
        "failed" if "error" in t else _count(t["ssa_lines"]),
        onnx_nodes,
        onnx_bytes,
        "failed" if "error" in e else _count(e["lines"]),
        _div(t.get("json_bytes"), o.get("stripped_bytes")),
        _div(t.get("ssa_lines"), e.get("lines")),
    ]


HEADERS = [
    "model",
    "trama nodes",
    "trama JSON bytes",
    "trama ssa lines",
    "ONNX nodes (graph / with functions)",
    "ONNX bytes stripped",
    "print_readable lines",
    "trama bytes ÷ ONNX bytes",
    "ssa lines ÷ print_readable lines",
]


def markdown(headers: list[str], rows: list[list[str]]) -> str:
    """A markdown table: the first column left-aligned, the figures right-aligned."""
    lines = ["| " + " | ".join(headers) + " |", "|---|" + "---:|" * (len(headers) - 1)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines)


def failures(results: list[dict[str, Any]]) -> list[str]:
    return [
        f"{result['model']}: {LABELS[key]}: {result[key]['error']}"
        for result in results
        for key in LABELS
        if "error" in result[key]
    ]


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def deeper(name: str) -> Any:
    """The zoo entry ``DEEPER[name]`` names, built with that many layers (``num_hidden_layers``)."""
    import dataclasses

    from realworld.models import by_name

    base_name, layers = DEEPER[name]
    base = by_name(base_name)

    def build() -> Any:
        model = base.build()
        config = model.config
        config.num_hidden_layers = layers
        with torch_seed():
            return type(model)(config).eval()

    return dataclasses.replace(base, name=name, build=build)


def depth_growth(results: list[dict[str, Any]]) -> list[str]:
    """How each deeper entry's structure compares with its base's: trama's JSON bytes and
    ONNX's stripped bytes, deeper ÷ base, and trama's bytes ÷ ONNX's at depth."""
    by_model = {result["model"]: result for result in results}
    lines = []
    for name, (base_name, layers) in DEEPER.items():
        deep, base = by_model.get(name), by_model.get(base_name)
        if deep is None or base is None:
            continue
        try:
            trama_growth = deep["trama"]["json_bytes"] / base["trama"]["json_bytes"]
            onnx_growth = deep["onnx"]["stripped_bytes"] / base["onnx"]["stripped_bytes"]
            share = deep["trama"]["json_bytes"] / deep["onnx"]["stripped_bytes"]
        except (KeyError, TypeError, ZeroDivisionError):
            continue
        lines.append(
            f"{name} ({layers} layers) against {base_name}: trama JSON {trama_growth:.2f}x, "
            f"ONNX stripped {onnx_growth:.2f}x; trama/ONNX at {layers} layers {share:.2f}"
        )
    return lines


@contextlib.contextmanager
def torch_seed() -> Iterator[None]:
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        yield


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--models", nargs="+", metavar="NAME", help=f"zoo entries (default: {' '.join(DEFAULT_MODELS)})"
    )
    parser.add_argument("--all", action="store_true", help="every model of the zoo")
    parser.add_argument(
        "--no-onnx-optimize",
        dest="onnx_optimize",
        action="store_false",
        help="export ONNX with optimize=False (no constant folding, no Conv+BatchNormalization fusion)",
    )
    parser.add_argument("--json", type=Path, default=OUT_DIR / "review.json", help="where to write the results")
    options = parser.parse_args(argv)

    info = machine_info()
    info["libraries"] = {name: _version(name) for name in LIBRARIES}
    print(describe_machine(info))
    print("libraries: " + ", ".join(f"{name} {version}" for name, version in info["libraries"].items() if version))

    from realworld.models import ZOO, by_name, ensure_torchvision_importable

    ensure_torchvision_importable()  # before anything imports torchvision, transformers or timm
    if options.all:
        entries = list(ZOO)
    else:
        try:
            entries = [deeper(name) if name in DEEPER else by_name(name) for name in options.models or DEFAULT_MODELS]
        except KeyError as exc:
            parser.error(str(exc.args[0]))

    warm_up()
    results: list[dict[str, Any]] = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-review-") as tmp:
        for index, entry in enumerate(entries, 1):
            try:
                result = measure(entry, Path(tmp), options.onnx_optimize)
            except Exception as exc:  # building the model itself failed
                error = {"error": first_line(exc)}
                result = {"model": entry.name, "library": entry.library, "trama": error, "onnx": error}
                result["torch_export"] = error
            results.append(result)
            spent = ", ".join(f"{label} {seconds(result[key].get('export_s'))} s" for key, label in LABELS.items())
            print(f"[{index}/{len(entries)}] {entry.name}: {spent}", flush=True)

    rows = [row(result) for result in results]
    text = markdown(HEADERS, rows)
    print()
    print(text)
    growth = depth_growth(results)
    if growth:
        print()
        print("\n".join(growth))
    errors = failures(results)
    if errors:
        print("\nfailures:")
        print("\n".join(f"  {line}" for line in errors))
    data = {"machine": info, "onnx_optimize": options.onnx_optimize, "models": results, "table": text}
    data["depth_growth"] = growth
    data["seconds"] = time.perf_counter() - start
    target = options.json.resolve()
    if target.parent == OUT_DIR.resolve():
        path = write_json(target.name, data)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(data, indent=2) + "\n")
        path = target
    print(f"\nresults written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
