"""How far trama's capture gets on real models: the zoo of tests/realworld/, model by model.

For every zoo entry (torchvision, transformers, timm and torch.nn models, small and randomly
initialised; see tests/realworld/README.md) this builds the model and

* times ``torch.export.export(model, args, kwargs, strict=False)`` on the entry's example inputs,
  the capture trama is moving to;
* tries today's ``trama.export_model(model, inputs=..., outputs=...)``, which traces ``forward``
  with torch.fx and takes no example inputs, and records whether it succeeds, the first line of
  its error if not, how long it took and how many nodes the document has.

It prints one table and the summary line ``trama export: N of M``, then every failure's first
line in full, and writes everything to ``benchmarks/out/realworld.json``. A report, not a test:
nothing is asserted, and a failure of either exporter is a row, not a crash.

All models run in one process (a fresh process per model would spend most of its time importing
torch and the model libraries). Before the first model a throwaway ``nn.Linear`` is exported, so
torch.export's one-time setup is not billed to whichever model comes first. Each model is built
afresh for each exporter, so neither sees what the other left on the module.

    .venv/bin/python benchmarks/realworld_report.py [--models NAME ...] [--width 100]
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
import warnings
from importlib import metadata
from typing import Any

from _common import REPO, describe_machine, machine_info, write_json

sys.path.insert(0, str(REPO / "tests"))

LIBRARIES = ("torch", "torchvision", "transformers", "timm", "trama", "trama-torch")


def first_line(exc: BaseException) -> str:
    """``Type: first line of the message``, the way the table shows a failure."""
    message = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {message[0]}" if message else type(exc).__name__


def clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def measure(entry: Any) -> dict[str, Any]:
    """One zoo entry through both exporters; every failure is recorded, none is raised."""
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


def table(headers: list[str], rows: list[list[str]]) -> str:
    """A plain-text table: names and the error text left-aligned, figures right-aligned."""
    cells = [headers, *rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    left = {0, 1, len(headers) - 1}

    def line(row: list[str]) -> str:
        padded = (c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        return "  ".join(padded).rstrip()

    return "\n".join([line(headers), "  ".join("-" * w for w in widths), *(line(row) for row in rows)])


def table_row(row: dict[str, Any], width: int) -> list[str]:
    if "build_error" in row:
        return [row["model"], row["library"], "-", "build failed", "-", clip(row["build_error"], width), "-"]
    torch_cell = f"ok {row['torch_export_s']:.2f}s" if "torch_export_s" in row else "FAILED"
    if "trama_s" in row:
        trama_cell, nodes = f"ok {row['trama_s']:.2f}s", str(row["trama_nodes"])
    else:
        prefix = "RAW " if row.get("trama_error_is_raw") else ""
        trama_cell, nodes = clip(prefix + row["trama_error"], width), "-"
    params = f"{row['parameters'] / 1e6:.2f}M"
    return [row["model"], row["library"], params, torch_cell, nodes, trama_cell]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="*", help="only these zoo entries (default: all)")
    parser.add_argument("--width", type=int, default=100, help="characters of an error shown in the table")
    parser.add_argument("--out", default="realworld.json")
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
        rows.append(measure(entry))
        print(f"  {entry.name}: done", file=sys.stderr, flush=True)

    headers = ["model", "library", "params", "torch.export", "trama nodes", "trama export"]
    print()
    print(table(headers, [table_row(row, args.width) for row in rows]))
    exported = sum("trama_s" in row for row in rows)
    captured = sum("torch_export_s" in row for row in rows)
    print()
    print(f"torch.export: {captured} of {len(rows)}")
    print(f"trama export: {exported} of {len(rows)}")
    failures = [row for row in rows if "trama_error" in row or "build_error" in row]
    if failures:
        print("\nFirst lines of the failures:")
        for row in failures:
            print(f"  {row['model']}: {row.get('build_error') or row['trama_error']}")
    path = write_json(args.out, {"machine": info, "versions": versions, "rows": rows})
    print(f"\nresults written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
