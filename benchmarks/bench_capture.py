"""What capture with example inputs costs beyond ``torch.export`` itself.

``trama.export_model(model, ..., example_inputs=...)`` runs ``torch.export.export(strict=False)``
once, with a forward hook pair on every module (trama_torch.capture.tree), and then writes the
document from the program. Its time is therefore ``torch.export``'s plus trama's own part; this
measures both on one model, ``nn.TransformerEncoder`` of ``--layers`` (24)
``TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0, batch_first=True)``
in eval mode on an input ``[2, 10, 64]``, and reports:

* ``torch.export``: ``torch.export.export(model, (x,), strict=False)`` alone;
* ``trama capture``: the whole ``trama.export_model`` with ``example_inputs``;
* ``trama's part``: the difference, and its ratio to ``torch.export``;
* for reference, ``trama fx``: the same model exported without example inputs (the torch.fx
  path, which runs nothing).

Each figure is the best of ``--repeat`` runs in this process, after one warm-up of each exporter
(torch.export's first call in a process imports and sets up the compiler stack). A report, not a
test: nothing is asserted. Results go to ``benchmarks/out/capture.json``.

    .venv/bin/python benchmarks/bench_capture.py [--layers 24] [--repeat 5]
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable
from typing import Any

from _common import describe_machine, machine_info, ratio, seconds, table, write_json


def best(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)

    info = machine_info()
    print(describe_machine(info))
    import torch
    from torch import nn

    import trama

    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(args.d_model, 4, 2 * args.d_model, dropout=0.0, batch_first=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # enable_nested_tensor's advice about batch_first
        model = nn.TransformerEncoder(layer, num_layers=args.layers).eval()
    x = torch.randn(2, 10, args.d_model)

    def torch_export() -> Any:
        return torch.export.export(model, (x,), strict=False)

    def trama_capture() -> Any:
        return trama.export_model(model, inputs=["src"], outputs=["y"], example_inputs=(x,))

    def trama_fx() -> Any:
        return trama.export_model(model, inputs=["src"], outputs=["y"])

    for warm in (torch_export, trama_capture, trama_fx):
        warm()
    exported = best(torch_export, args.repeat)
    captured = best(trama_capture, args.repeat)
    traced = best(trama_fx, args.repeat)
    own = captured - exported
    document = trama_capture()
    rows = [
        ["torch.export (strict=False)", seconds(exported), "1.00"],
        ["trama capture (example_inputs)", seconds(captured), ratio(captured / exported)],
        ["  of which trama's own part", seconds(own), ratio(own / exported)],
        ["trama fx (no example_inputs)", seconds(traced), ratio(traced / exported)],
    ]
    print(f"\nnn.TransformerEncoder, {args.layers} layers, d_model {args.d_model}: {len(document.nodes)} nodes")
    print(table(["exporter", "best time", "× torch.export"], rows))
    path = write_json(
        "capture.json",
        {
            "machine": info,
            "layers": args.layers,
            "d_model": args.d_model,
            "repeat": args.repeat,
            "torch_export_s": exported,
            "trama_capture_s": captured,
            "trama_own_s": own,
            "trama_fx_s": traced,
            "nodes": len(document.nodes),
        },
    )
    print(f"\nresults written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
