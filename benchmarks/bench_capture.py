"""What capture with example inputs costs beyond ``torch.export`` itself.

``trama.export_model(model, ..., example_inputs=...)`` runs ``torch.export.export(strict=False)``
once, with a forward hook pair on every module (trama_torch.capture.tree), and then writes the
document from the program. Its time is therefore ``torch.export``'s plus trama's own part; this
measures both, in one run, on two models of ``--layers`` (24) layers each, in eval mode:

* ``nn.TransformerEncoder`` of ``TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
  dropout=0, batch_first=True)`` on an input ``[2, 10, 64]``: torch's own layer, few modules per
  layer;
* transformers' ``LlamaForCausalLM`` (``LlamaConfig(vocab_size=128, hidden_size=64,
  intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
  attn_implementation="eager", use_cache=False)``) on ``input_ids`` and ``attention_mask`` of
  ``[2, 8]``, the ``logits`` out: a model as people run it, with many more modules per layer
  (attention, MLP, two RMSNorms, the rotary embedding) and the library's own Python around them
  (mask building, ``ModelOutput``), so trama's per-module work and torch.export's tracing of
  that Python both weigh more than in the first. Built the way the real-model zoo of
  ``tests/realworld/`` builds its ``hf_llama`` (``ensure_torchvision_importable`` first, since
  transformers imports torchvision), only deeper and wider;

and reports for each:

* ``torch.export``: ``torch.export.export(model, args, kwargs, strict=False)`` alone;
* ``trama capture``: the whole ``trama.export_model`` with ``example_inputs``;
* ``trama's part``: the difference, and its ratio to ``torch.export``;
* for reference, ``trama fx``: the same model exported without example inputs (the torch.fx
  path, which runs nothing; a failure is shown as such: torch.fx cannot trace every model).

Each figure is the best of ``--repeat`` runs in this process, after one warm-up of each exporter
on each model (torch.export's first call in a process imports and sets up the compiler stack); the
exporters take turns, each run after a ``gc.collect()``, and every run's time is in the JSON.
Where trama's own part is small (the encoder: 25 nodes, each layer one catalog op), it is within
the run-to-run spread of ``torch.export`` itself and may come out negative.
A report, not a test: nothing is asserted. Results go to ``benchmarks/out/capture.json``.

    .venv/bin/python benchmarks/bench_capture.py [--layers 24] [--d-model 64] [--repeat 5]

``--d-model`` sets the encoder's width only; ``--layers`` applies to both models.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from _common import REPO, describe_machine, machine_info, ratio, seconds, table, write_json

sys.path.insert(0, str(REPO / "tests"))


@dataclass(frozen=True)
class Case:
    """One model to capture: what to call it, the module, its example inputs, trama's names."""

    name: str
    model: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    inputs: list[str]
    outputs: list[str]


def timings(fns: dict[str, Callable[[], Any]], repeat: int) -> dict[str, list[float]]:
    """Every run's time of each function, the functions taking turns (so that the machine's
    drift hits all alike), each run after a full garbage collection (so that none pays for
    collecting the previous one's program)."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            gc.collect()
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return times


def first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def encoder_case(layers: int, d_model: int) -> Case:
    import torch
    from torch import nn

    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model, 4, 2 * d_model, dropout=0.0, batch_first=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # enable_nested_tensor's advice about batch_first
        model = nn.TransformerEncoder(layer, num_layers=layers).eval()
    x = torch.randn(2, 10, d_model)
    name = f"nn.TransformerEncoder, {layers} layers, d_model {d_model}"
    return Case(name, model, (x,), {}, ["src"], ["y"])


def llama_case(layers: int) -> Case:
    import torch
    from realworld.models import ensure_torchvision_importable

    ensure_torchvision_importable()  # before transformers imports torchvision
    transformers: Any = importlib.import_module("transformers")  # untyped in part: kept as Any
    config = transformers.LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        attn_implementation="eager",
        use_cache=False,  # forward returns the logits alone (no key/value cache to export)
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    generator = torch.Generator().manual_seed(0)
    kwargs = {
        "input_ids": torch.randint(3, 128, (2, 8), generator=generator),
        "attention_mask": torch.ones(2, 8, dtype=torch.long),
    }
    name = f"transformers LlamaForCausalLM, {layers} layers, hidden 64"
    return Case(name, model, (), kwargs, ["input_ids", "attention_mask"], ["logits"])


def measure(case: Case, repeat: int) -> dict[str, Any]:
    """The three exporters on one model, each warmed up once, then the best of ``repeat``."""
    import torch

    import trama

    example = case.kwargs if case.kwargs else case.args

    def torch_export() -> Any:
        return torch.export.export(case.model, case.args, case.kwargs, strict=False)

    def trama_capture() -> Any:
        return trama.export_model(case.model, inputs=case.inputs, outputs=case.outputs, example_inputs=example)

    def trama_fx() -> Any:
        return trama.export_model(case.model, inputs=case.inputs, outputs=case.outputs)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the libraries' deprecation notices, once per call
        torch_export()
        document = trama_capture()
        try:
            trama_fx()
        except Exception as exc:  # torch.fx's symbolic tracing cannot follow every model
            fx_error: str | None = first_line(exc)
        else:
            fx_error = None
        fns = {"torch_export": torch_export, "trama_capture": trama_capture}
        if fx_error is None:
            fns["trama_fx"] = trama_fx
        runs = timings(fns, repeat)
    exported, captured = min(runs["torch_export"]), min(runs["trama_capture"])
    traced = min(runs["trama_fx"]) if "trama_fx" in runs else None
    return {
        "model": case.name,
        "nodes": len(document.nodes),
        "torch_export_s": exported,
        "trama_capture_s": captured,
        "trama_own_s": captured - exported,
        "trama_fx_s": traced,
        "trama_fx_error": fx_error,
        "all_times_s": runs,
    }


def rows(result: dict[str, Any]) -> list[list[str]]:
    exported, captured, own = result["torch_export_s"], result["trama_capture_s"], result["trama_own_s"]
    traced = result["trama_fx_s"]
    fx = [seconds(traced), ratio(traced / exported)] if traced is not None else ["failed", "-"]
    return [
        ["torch.export (strict=False)", seconds(exported), "1.00"],
        ["trama capture (example_inputs)", seconds(captured), ratio(captured / exported)],
        ["  of which trama's own part", seconds(own), ratio(own / exported)],
        ["trama fx (no example_inputs)", *fx],
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=24, help="layers of both models")
    parser.add_argument("--d-model", type=int, default=64, help="the encoder's width")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)

    info = machine_info()
    print(describe_machine(info))
    results = []
    builders: list[Callable[[], Case]] = [
        lambda: encoder_case(args.layers, args.d_model),
        lambda: llama_case(args.layers),
    ]
    for build in builders:
        case = build()
        result = measure(case, args.repeat)
        results.append(result)
        print(f"\n{case.name}: {result['nodes']} nodes")
        print(table(["exporter", "best time", "× torch.export"], rows(result)))
        if result["trama_fx_error"]:
            print(f"trama fx failed: {result['trama_fx_error']}")
    path = write_json(
        "capture.json",
        {
            "machine": info,
            "layers": args.layers,
            "d_model": args.d_model,
            "repeat": args.repeat,
            "models": results,
        },
    )
    print(f"\nresults written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
