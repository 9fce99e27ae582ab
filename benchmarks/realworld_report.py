"""How far trama's capture gets on real models: the zoo of tests/realworld/, model by model.

For every zoo entry (torchvision, transformers, timm, diffusers and torch.nn models, small and randomly
initialised; see tests/realworld/README.md) this builds the model and

* times ``torch.export.export(model, args, kwargs, strict=False)`` on the entry's example inputs;
* tries ``trama.export_model(model, inputs=..., outputs=..., example_inputs=...)``, the capture
  through torch.export (docs/torch.md, "Capture with example inputs"), and records whether it
  succeeds, the catalog op it is missing if not (the op named in the error), how long it took and
  how many nodes the document has, and how many of them are torch decompositions of an op the
  catalog lacks (``Graph`` nodes marked ``decomposed``); where it succeeds, the document goes through JSON text and back
  to torch (``trama.import_model``): are the outputs equal (``torch.equal``) and the ``state_dict``
  keys the original's, and how far are numpy, torch:cpu and jax:cpu from the original's outputs;
* tries ``trama.export_model(model, inputs=..., outputs=...)`` without example inputs, the one-level
  torch.fx path, as before.

It prints one table and the summary lines, then every capture failure's first line in full, and
writes everything to ``benchmarks/out/realworld.json``. A report, not a test: nothing is asserted,
and a failure of any exporter is a row, not a crash.

All models run in one process (a fresh process per model would spend most of its time importing
torch and the model libraries). Before the first model a throwaway ``nn.Linear`` is exported, so
torch.export's one-time setup is not billed to whichever model comes first. Each model is built
afresh for each exporter, so none sees what another left on the module.

    .venv/bin/python benchmarks/realworld_report.py [--models NAME ...] [--width 100] [--dynamic]

``--dynamic`` passes each sequence model's ``dynamic_axes`` as ``dynamic_shapes`` to the capture.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import traceback
import warnings
from importlib import metadata
from typing import Any

from _common import REPO, describe_machine, machine_info, write_json

sys.path.insert(0, str(REPO / "tests"))

LIBRARIES = ("torch", "torchvision", "transformers", "timm", "diffusers", "trama", "trama-torch")


def first_line(exc: BaseException) -> str:
    """``Type: first line of the message``, the way the table shows a failure."""
    message = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {message[0]}" if message else type(exc).__name__


def clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def measure(entry: Any, dynamic: bool) -> dict[str, Any]:
    """One zoo entry through every exporter; every failure is recorded, none is raised."""
    import torch

    import trama

    row: dict[str, Any] = {"model": entry.name, "library": entry.library}
    try:
        model = entry.build()
    except Exception as exc:  # a broken zoo entry is a row too
        row["build_error"] = first_line(exc)
        return row
    row["parameters"] = sum(p.numel() for p in model.parameters())
    args, kwargs = entry.args_kwargs()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        try:
            program = torch.export.export(model, args, kwargs, strict=False)
        except Exception as exc:
            row["torch_export_error"] = first_line(exc)
        else:
            row["torch_export_s"] = time.perf_counter() - start
            row["torch_export_nodes"] = len(program.graph.nodes)
    row["torch_export_warnings"] = sorted({clip(str(w.message).splitlines()[0], 160) for w in caught})

    capture(entry, row, dynamic)

    model = entry.build()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        try:
            document = trama.export_model(model, inputs=list(entry.input_names), outputs=list(entry.output_names))
        except trama.TramaError as exc:
            row["trama_error"] = first_line(exc)
        except Exception as exc:  # not a trama error: worth knowing where it came from
            row["trama_error"] = first_line(exc)
            row["trama_error_is_raw"] = True
            row["trama_traceback"] = traceback.format_exc(limit=-3)
        else:
            row["trama_s"] = time.perf_counter() - start
            row["trama_nodes"] = len(document.nodes)
    row["trama_warnings"] = sorted({clip(str(w.message).splitlines()[0], 160) for w in caught})
    return row


#: How a capture error names the op the catalog lacks.
MISSING = re.compile(r"(aten\.[\w.]+|operator\.\w+|torch\.autocast)[^:]*? has no catalog op")


def capture(entry: Any, row: dict[str, Any], dynamic: bool) -> None:
    """``export_model`` with example inputs, then JSON, import and the three runtimes."""
    import numpy as np
    import torch

    import trama

    model = entry.build()
    args, kwargs = entry.args_kwargs()
    examples = kwargs if kwargs else args
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        try:
            document = trama.export_model(
                model,
                inputs=list(entry.input_names),
                outputs=list(entry.output_names),
                example_inputs=examples,
                dynamic_shapes=entry.dynamic_axes if dynamic else None,
            )
        except Exception as exc:
            row["capture_error"] = first_line(exc)
            row["capture_error_is_raw"] = not isinstance(exc, trama.TramaError)
            found = MISSING.search(str(exc))
            if found:
                row["capture_missing"] = found.group(1)
            if row["capture_error_is_raw"]:
                row["capture_traceback"] = traceback.format_exc(limit=-3)
            return
        row["capture_s"] = time.perf_counter() - start
        row["capture_nodes"] = len(document.nodes)
        row["capture_decomposed"] = trama_summary(document).decomposed
    row["capture_warnings"] = sorted({clip(str(w.message).splitlines()[0], 160) for w in caught})
    inputs = [kwargs[name] for name in entry.input_names] if kwargs else list(args)
    try:
        with torch.no_grad():
            expected = model(*args, **kwargs)
        wanted = list(expected.values()) if isinstance(expected, dict) else _tensors(expected)
        document = trama.loads(trama.dumps(document))
        back = trama.import_model(document, registry=trama.registry("torch"))
        with torch.no_grad():
            got = _tensors(back(*inputs))
        row["import_exact"] = len(got) == len(wanted) and all(
            torch.equal(a, b) for a, b in zip(got, wanted, strict=True)
        )
        row["state_keys_kept"] = set(back.state_dict()) == set(model.state_dict())
    except Exception as exc:
        row["import_error"] = first_line(exc)
        return
    row["runtimes"] = {}
    for name in ("numpy", "torch:cpu", "jax:cpu"):
        try:
            outputs = trama.runtime_for_name(name).prepare(document).run([value.numpy() for value in inputs])
            row["runtimes"][name] = max(
                float(np.max(np.abs(np.asarray(have) - want.numpy())) / max(1.0, float(want.abs().max())))
                for have, want in zip(outputs, wanted, strict=True)
            )
        except Exception as exc:
            row["runtimes"][name] = first_line(exc)


def trama_summary(document: Any) -> Any:
    from trama.tools._summary import summarize

    return summarize(document)


def _tensors(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [item for part in value for item in _tensors(part)]
    if isinstance(value, dict):
        return [item for part in value.values() for item in _tensors(part)]
    return [value]


def table(headers: list[str], rows: list[list[str]], left: set[int]) -> str:
    """A plain-text table: the ``left`` columns (names, text) left-aligned, figures right-aligned."""
    cells = [headers, *rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        padded = (c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        return "  ".join(padded).rstrip()

    return "\n".join([line(headers), "  ".join("-" * w for w in widths), *(line(row) for row in rows)])


def capture_cells(row: dict[str, Any], width: int) -> list[str]:
    """The capture's cells: status and time, nodes, import exact, keys kept, runtimes."""
    if "capture_s" not in row:
        missing = row.get("capture_missing")
        status = (
            f"needs {missing}"
            if missing
            else clip(("RAW " if row.get("capture_error_is_raw") else "") + row["capture_error"], width)
        )
        return [status, "-", "-", "-", "-", "-"]
    status = f"ok {row['capture_s']:.2f}s"
    decomposed = str(sum(row.get("capture_decomposed", {}).values()))
    if "import_error" in row:
        return [status, str(row["capture_nodes"]), decomposed, clip(row["import_error"], 40), "-", "-"]
    worst: list[str] = []
    for name, value in row["runtimes"].items():
        worst.append(
            f"{name.split(':')[0]} {value:.0e}" if isinstance(value, float) else f"{name.split(':')[0]} FAILED"
        )
    return [
        status,
        str(row["capture_nodes"]),
        decomposed,
        "yes" if row["import_exact"] else "NO",
        "yes" if row["state_keys_kept"] else "NO",
        ", ".join(worst),
    ]


def table_row(row: dict[str, Any], width: int) -> list[str]:
    if "build_error" in row:
        return [
            row["model"],
            row["library"],
            "-",
            "build failed",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            clip(row["build_error"], width),
        ]
    torch_cell = f"ok {row['torch_export_s']:.2f}s" if "torch_export_s" in row else "FAILED"
    if "trama_s" in row:
        fx_cell = f"ok {row['trama_s']:.2f}s"
    else:
        fx_cell = "RAW error" if row.get("trama_error_is_raw") else "error"
    params = f"{row['parameters'] / 1e6:.2f}M"
    return [row["model"], row["library"], params, torch_cell, *capture_cells(row, width), fx_cell]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="*", help="only these zoo entries (default: all)")
    parser.add_argument("--width", type=int, default=100, help="characters of an error shown in the table")
    parser.add_argument("--out", default="realworld.json")
    parser.add_argument("--dynamic", action="store_true", help="capture with each entry's dynamic_axes")
    args = parser.parse_args(argv)

    info = machine_info()
    print(describe_machine(info))
    versions: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    print("         " + ", ".join(f"{name} {version}" for name, version in versions.items() if version))

    import torch
    from realworld.models import ZOO

    entries = [entry for entry in ZOO if not args.models or entry.name in args.models]
    unknown = set(args.models or ()) - {entry.name for entry in entries}
    if unknown:
        parser.error(f"no zoo model named {', '.join(sorted(unknown))}")

    torch.export.export(torch.nn.Linear(2, 2), (torch.randn(1, 2),), strict=False)  # one-time setup
    rows = []
    for entry in entries:
        rows.append(measure(entry, args.dynamic))
        print(f"  {entry.name}: done", file=sys.stderr, flush=True)

    headers = [
        "model",
        "library",
        "params",
        "torch.export",
        "trama capture",
        "nodes",
        "decomposed",
        "exact",
        "keys",
        "runtimes (max rel. diff)",
        "fx path",
    ]
    print()
    print(table(headers, [table_row(row, args.width) for row in rows], left={0, 1, 4, 9, 10}))
    captured = sum("torch_export_s" in row for row in rows)
    trama_captured = [row for row in rows if "capture_s" in row]
    print()
    print(f"torch.export: {captured} of {len(rows)}")
    print(f"trama capture: {len(trama_captured)} of {len(rows)}", end="")
    exact = sum(bool(row.get("import_exact")) for row in trama_captured)
    print(f" ({exact} imported back exactly)")
    decomposed: dict[str, int] = {}
    for row in trama_captured:
        for op, count in row.get("capture_decomposed", {}).items():
            decomposed[op] = decomposed.get(op, 0) + count
    if decomposed:
        print("decomposed by torch's tables: " + ", ".join(f"{op} ×{n}" for op, n in sorted(decomposed.items())))
    print(f"trama fx path (no example inputs): {sum('trama_s' in row for row in rows)} of {len(rows)}")
    blockers: dict[str, list[str]] = {}
    for row in rows:
        if "capture_missing" in row:
            blockers.setdefault(row["capture_missing"], []).append(row["model"])
    if blockers:
        print("\nMissing catalog ops that block a capture (first one met per model):")
        for op, models in sorted(blockers.items(), key=lambda item: (-len(item[1]), item[0])):
            print(f"  {op}: {len(models)} ({', '.join(models)})")
    failures = [row for row in rows if "capture_error" in row or "build_error" in row]
    if failures:
        print("\nFirst lines of the capture failures:")
        for row in failures:
            print(f"  {row['model']}: {row.get('build_error') or row['capture_error']}")
    path = write_json(args.out, {"machine": info, "versions": versions, "rows": rows})
    print(f"\nresults written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
