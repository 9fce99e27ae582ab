"""Graph size: loading and dumping a chain of 100,000 and 200,000 nodes, side by side with trama 0.2.0.

The graph: a root ``Sequential`` composite (input ``x``, output ``y``) with N ``ReLU`` leaves
``root.relu_0`` .. ``root.relu_{N-1}``, each fed by the previous one, no parameters.

Cases, for each N:

* ``trama``             our ``trama.load(path)`` (parse, decode, structural validation) on a file in
                        our current format (1.3, nested), written by ``trama.dump``
* ``trama, 1.2 file``   our ``trama.load`` on the same graph written in the flat format 1.2
                        (``trama.dump(..., format_version="1.2")``): the reader before 1.3
* ``trama, 0.2 file``   our ``trama.load`` on the same graph in the 0.2 format (we read 0.2 files)
* ``trama 0.2.0``       reference: the old PyPI release's ``trama.load`` on the 0.2 file, in
                        .venv-ref (see setup_reference.sh)

Each ``trama`` load process also times the standard library's ``json.loads`` of the same bytes,
interleaved with ``trama.load``: the target is our load at most 1.3x that (``json.loads`` as a
program calls it; with the cycle collector paused, as trama pauses it, for information). A 1.3
text is about a quarter of the 1.2 text of the same graph and holds one small object per node, so
``json.loads`` of it is some six times faster than of the 1.2 text, faster than any reader can
build the model's 100,000 nodes: the target that says "no slower than before" is the second one,
our load of the 1.3 file at most our load of the 1.2 file (1.0x), with our 1.3 load against
``json.loads`` of the 1.2 text for information.

Our load is also broken into phases with the library's internal functions, as ``trama.loads``
runs them (with the cycle collector paused): read the file, lift the long base64 runs
(``lift_text``), then the fast reader (``trama.format._typed.decode_typed``) or, where it
declines (a 0.2 file), the careful one: parse (``parse_json``), decode (``decode_document``),
validate (``structural_errors``).

Dump: ``trama.dump(model, path)`` of the exported chain against trama 0.2.0's ``dump`` of its own
export of the same chain (each writer's export is not counted), and ours broken into phases:
prove (``trama.format._validation.StructureProof``: the rules checked before the nodes and, once
they are written, those that need every node declared), text (the document's text in pieces, as
``dump`` makes it: ``trama.format._serialization._inline_pieces``, which runs ``encode_document``
for the document's other members and ``trama.format._writer`` for the nodes, proving each node's
rules as it writes it), write (UTF-8, write, fsync).

Every load and every dump runs in a fresh process, repeated (best of ``--repeat``). The 0.2 file
is written by the old library when .venv-ref exists, else by writing the same JSON directly.

    .venv/bin/python benchmarks/bench_graph.py                    # 100k and 200k (~2 minutes)
    .venv/bin/python benchmarks/bench_graph.py --sizes 10000      # a quick smoke run
    .venv/bin/python benchmarks/bench_graph.py --profile 100000   # cProfile our dump and load

Results: a table on stdout, and benchmarks/out/graph.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import (
    MB,
    REF_PYTHON,
    REF_SCRIPT,
    RESULT_MARK,
    Probe,
    best_of,
    describe_machine,
    machine_info,
    maybe_phase,
    profile_call,
    ratio,
    reference_available,
    reference_missing_message,
    run_worker,
    seconds,
    table,
    verdict,
    write_json,
    write_text,
)

SIZES = (100_000, 200_000)
CASES = ("trama", "trama, 1.2 file", "trama, 0.2 file", "trama 0.2.0")
TARGETS = {
    "load vs json.loads": 1.3,
    "load vs 1.2 load": 1.0,
    "speedup over 0.2.0": 6.0,
    "200k/100k": 2.2,
    "dump vs 0.2.0": 1.0,
}
OURS_FILE = "chain.trama.json"
FLAT_FILE = "chain-v1.2.trama.json"
V02_FILE = "chain-v0.2.trama.json"


# --------------------------------------------------------------------------------------------
# Workers (fresh processes)
# --------------------------------------------------------------------------------------------


class ReLU:
    def to_node(self, ctx: Any) -> Any:
        from trama import NodeFragment

        return NodeFragment(op="ReLU", outputs=["y"])


class Sequential:
    """A composite whose children are chained; ids ``root.relu_i`` as in the 0.2 file."""

    def __init__(self, count: int) -> None:
        self.layers = [ReLU() for _ in range(count)]

    def to_node(self, ctx: Any) -> Any:
        from trama import NodeFragment

        ref = ctx.input("x")
        for i, layer in enumerate(self.layers):
            ref = ctx.child(f"relu_{i}", layer, inputs={"x": ref}, outputs=["y"])["y"]
        return NodeFragment(op="Sequential", outputs=["y"], output_bindings={"y": ref})


def _export_and_dump(count: int, path: Path, probe: Probe | None, format_version: str | None = None) -> None:
    import trama

    with maybe_phase(probe, "export"):
        model = trama.export_model(Sequential(count), inputs=["x"], outputs=["y"])
    # trama imports its reader and writer on first use, trama 0.2.0 at ``import trama``: both
    # are imported before the dump is timed.
    dump = trama.dump
    with maybe_phase(probe, "dump"):
        if format_version is None:
            dump(model, path)
        else:
            dump(model, path, format_version=format_version)


def worker_write(count: int, path: Path, format_version: str | None = None) -> None:
    import trama  # noqa: F401

    probe = Probe()
    _export_and_dump(count, path, probe, format_version)
    probe.extra["file_bytes"] = path.stat().st_size
    probe.emit()


def _timed_proof() -> Any:
    """``StructureProof`` whose ``finish`` (run by the writer as the nodes' text ends) keeps
    its time apart (``finishing``)."""
    import time

    from trama.format._validation import StructureProof

    class TimedProof(StructureProof):
        __slots__ = ("finishing",)

        def __init__(self, model: Any) -> None:
            super().__init__(model)
            self.finishing = 0.0

        def finish(self) -> None:
            begun = time.perf_counter()
            super().finish()
            self.finishing += time.perf_counter() - begun

    return TimedProof


def worker_dump_phases(count: int, path: Path) -> None:
    """Our ``trama.dump`` of the chain, phase by phase, as ``dump`` runs them: the proof's
    checks before the nodes (``StructureProof``), then the text and the write, interleaved as
    ``dump`` interleaves them (each piece of the text is written as it comes) and timed apart:
    text = making the pieces (``_inline_pieces``: the document's data but its nodes, and the
    nodes' text written straight from the model, each node's rules proven as it is written),
    write = UTF-8 + write, then fsync; the proof's last checks (``finish``, the bindings, calls
    and parameter table, run as the node text ends) are counted in "prove". Like ``dump``, with
    the cycle collector paused."""
    import os
    import time

    from _common import maxrss_bytes

    import trama
    from trama.format import _serialization
    from trama.format._jsontext import gc_paused

    TimedProof = _timed_proof()  # a class

    model = trama.export_model(Sequential(count), inputs=["x"], outputs=["y"])
    probe = Probe()
    clock = time.perf_counter
    with gc_paused():
        start = clock()
        proof = TimedProof(model)
        proving = clock() - start
        times = {"text": 0.0, "write": 0.0}
        pieces = _serialization._inline_pieces(model, proof)
        with path.open("wb") as handle:
            while True:
                start = clock()
                piece = next(pieces, None)
                made = clock()
                times["text"] += made - start
                if piece is None:
                    break
                handle.write(_serialization._utf8(piece) if isinstance(piece, str) else piece)
                times["write"] += clock() - made
            proof.finish()  # as dump does before it commits (already done: nothing to do)
            start = clock()
            handle.flush()
            os.fsync(handle.fileno())
            times["write"] += clock() - start
    if not proof.settled:
        raise SystemExit("the proof did not settle: the dump would not have committed")
    times["text"] -= proof.finishing  # finish ran while the text's pieces were made
    peak = maxrss_bytes() - probe.baseline  # text and write together
    times = {"prove": proving + proof.finishing, **times}
    for name, seconds_taken in times.items():
        probe.times[name] = seconds_taken
        probe.peaks[name] = peak
    probe.emit()


def v02_chain_text(count: int) -> str:
    """The 0.2 document of the chain, as trama 0.2.0's ``dump`` writes it (indent 2, fields in
    its schema order, no final newline); used when the reference environment is absent."""

    def ref(node: str, output: str) -> dict[str, str]:
        return {"node": node, "output": output}

    nodes: list[dict[str, Any]] = [
        {
            "id": "root",
            "parent": None,
            "op": "Sequential",
            "inputs": {"x": ref("%input", "x")},
            "outputs": ["y"],
            "parameters": {},
            "output_bindings": {"y": ref(f"root.relu_{count - 1}", "y")},
        }
    ]
    previous = ref("%input", "x")
    for i in range(count):
        node_id = f"root.relu_{i}"
        nodes.append(
            {
                "id": node_id,
                "parent": "root",
                "op": "ReLU",
                "inputs": {"x": previous},
                "outputs": ["y"],
                "parameters": {},
                "output_bindings": None,
            }
        )
        previous = ref(node_id, "y")
    doc = {"format_version": "0.2", "inputs": ["x"], "outputs": [ref("root", "y")], "nodes": nodes, "parameters": {}}
    return json.dumps(doc, indent=2)


def worker_write_v02(count: int, path: Path) -> None:
    probe = Probe()
    with probe.phase("dump"):
        path.write_text(v02_chain_text(count))
    probe.extra["file_bytes"] = path.stat().st_size
    probe.emit()


def worker_load(path: Path) -> None:
    """``trama.load`` side by side with the standard library's ``json.loads`` of the same file's
    bytes, in this one process. Our load first, alone ("load": its time and peak memory as a fresh
    process sees them, compared with trama 0.2.0's in its own fresh process); then ``json.loads``
    and ``trama.load`` again ("load, same process"), interleaved twice, each kind reporting its
    best time: these are compared with each other. ``json.loads`` as a program
    calls it (the cycle collector on, as it is by default), and, for information, with the
    collector paused around it, as ``trama.load`` pauses it."""
    import gc
    import time

    import trama

    load = trama.load  # its modules are imported here, outside the timing, as the reference's are
    probe = Probe()
    with probe.phase("load"):
        model = load(path)
    probe.extra["nodes"] = len(model.nodes)
    del model
    text = path.read_bytes()
    best: dict[str, float] = {}

    def timed(name: str, call: Any, *, paused: bool = False) -> None:
        if paused:
            gc.disable()
        start = time.perf_counter()
        result = call()
        elapsed = time.perf_counter() - start
        gc.enable()
        del result
        gc.collect()
        best[name] = min(best.get(name, elapsed), elapsed)

    for _ in range(2):
        timed("json.loads", lambda: json.loads(text))
        timed("json.loads, gc paused", lambda: json.loads(text), paused=True)
        timed("load, same process", lambda: load(path))
    probe.times.update(best)
    probe.emit()


def worker_phases(path: Path) -> None:
    """Our load, phase by phase, in the order ``trama.load``/``trama.loads`` runs them.

    read the file; lift (:func:`trama.format._jsontext.lift_text`: long base64 runs out of the
    text); then either the fast reader (``typed``: :func:`trama.format._typed.decode_typed`,
    which parses, decodes and proves the structure in one go) or, where it declines (a 0.2
    file), the careful one: parse (``parse_json``), decode (``decode_document``) and validate
    (``structural_errors``). ``trama.loads`` pauses the cycle collector while it builds objects;
    "gc" is what re-enabling it costs. Last, the parsed JSON is dropped ("free").
    """
    from trama.format import structural_errors
    from trama.format._codec import decode_document
    from trama.format._external import make_resolver
    from trama.format._jsontext import gc_paused, lift_text, parse_json
    from trama.format._typed import decode_typed
    from trama.format._typed_nested import decode_nested

    probe = Probe()
    with probe.phase("read"):
        data = path.read_bytes()
    pause = gc_paused()
    pause.__enter__()
    resolver = make_resolver(path.parent)
    with probe.phase("lift"):
        lifted = lift_text(data)
    with probe.phase("typed"):
        typed = decode_typed(lifted, resolver)
    if typed is None:
        with probe.phase("nested"):
            nested = decode_nested(lifted, resolver)
        typed = None if nested is None else (nested, True)
    parsed = None
    if typed is None:
        with probe.phase("parse"):
            parsed = parse_json(lifted)
        with probe.phase("decode"):
            model = decode_document(parsed.data, resolve_external=resolver, blobs=parsed.blobs)
        with probe.phase("validate"):
            errors = structural_errors(model)
    else:
        model, sound = typed
        errors = [] if sound else structural_errors(model)
        probe.extra["sound"] = sound
    with probe.phase("gc"):
        pause.__exit__(None, None, None)
    with probe.phase("free"):
        del parsed, lifted
    if errors:
        raise SystemExit(f"unexpected validation errors: {errors[:3]}")
    probe.extra["nodes"] = len(model.nodes)
    probe.emit()


def worker_profile(count: int, folder: Path) -> None:
    import trama

    path = folder / OURS_FILE
    _, dump_report = profile_call(lambda: _export_and_dump(count, path, None))
    _, load_report = profile_call(lambda: trama.load(path))
    print(f"=== {count} nodes: export + dump ===\n{dump_report}\n=== {count} nodes: trama.load ===\n{load_report}")
    Probe().emit()


# --------------------------------------------------------------------------------------------
# Orchestrator
# --------------------------------------------------------------------------------------------


def _ours(*args: str) -> list[str]:
    return [sys.executable, __file__, "--worker", *args]


def measure_size(count: int, repeat: int, folder: Path, with_reference: bool) -> dict[str, Any]:
    ours_path, v02_path, flat_path = folder / OURS_FILE, folder / V02_FILE, folder / FLAT_FILE
    writes: dict[str, list[dict[str, Any]]] = {"trama": [], "1.2": [], "0.2": []}
    for r in range(repeat):  # each writer exports and dumps in a fresh process, interleaved
        print(f"  .. {count} nodes, run {r + 1}/{repeat}: writing the files", file=sys.stderr, flush=True)
        writes["trama"].append(run_worker(_ours("write", str(count), str(ours_path))))
        writes["1.2"].append(run_worker(_ours("write", str(count), str(flat_path), "1.2")))
        if with_reference:
            ref = [str(REF_PYTHON), str(REF_SCRIPT), "chain-write", str(count), str(v02_path)]
            writes["0.2"].append(run_worker(ref))
        elif r == 0:
            writes["0.2"].append(run_worker(_ours("write-v02", str(count), str(v02_path))))
    written = {name: best_of(runs) for name, runs in writes.items()}
    written["0.2"]["writer"] = (
        "trama 0.2.0 (export_model + dump)"
        if with_reference
        else "bench_graph.v02_chain_text (the same JSON, written directly)"
    )
    phase_runs = []
    for r in range(repeat):
        print(f"  .. {count} nodes, run {r + 1}/{repeat}: our dump by phase", file=sys.stderr, flush=True)
        phase_runs.append(run_worker(_ours("dump-phases", str(count), str(folder / "phases.trama.json"))))
    dump_phases = best_of(phase_runs)

    commands = {
        "trama": _ours("load", str(ours_path)),
        "trama, 1.2 file": _ours("load", str(flat_path)),
        "trama, 0.2 file": _ours("load", str(v02_path)),
        "phases": _ours("phases", str(ours_path)),
        "phases, 0.2 file": _ours("phases", str(v02_path)),
    }
    if with_reference:
        commands["trama 0.2.0"] = [str(REF_PYTHON), str(REF_SCRIPT), "chain-load", str(v02_path)]
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in commands}
    for r in range(repeat):
        for name, argv in commands.items():
            print(f"  .. {count} nodes, run {r + 1}/{repeat}: {name}", file=sys.stderr, flush=True)
            result = run_worker(argv)
            if result["nodes"] != count + 1:
                raise RuntimeError(f"{name}: loaded {result['nodes']} nodes, expected {count + 1}")
            runs[name].append(result)
    return {
        "nodes": count + 1,
        "files": {
            name: {
                "bytes": written[name]["file_bytes"],
                **({"writer": written[name]["writer"]} if name == "0.2" else {}),
                **written[name]["times"],
                "all_times": written[name]["all_times"],
            }
            for name in ("trama", "1.2", "0.2")
        },
        "dump_phases": dump_phases["times"],
        "results": {name: best_of(case_runs) for name, case_runs in runs.items()},
    }


def summarise(sizes: dict[int, dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "load vs json.loads": {},
        "load vs 1.2 load": {},
        "speedup over 0.2.0": {},
        "scaling": {},
        "dump vs 0.2.0": {},
        "dump text + write vs 0.2.0": {},
    }
    for count, data in sizes.items():
        ours = data["results"]["trama"]["times"]
        summary["load vs json.loads"][count] = {
            "json.loads": ours["load, same process"] / ours["json.loads"],
            "json.loads, gc paused": ours["load, same process"] / ours["json.loads, gc paused"],
        }
        flat = data["results"]["trama, 1.2 file"]["times"]
        summary["load vs 1.2 load"][count] = {
            "load": data["results"]["trama"]["times"]["load"] / flat["load"],
            "json.loads of the 1.2 text": ours["load, same process"] / flat["json.loads"],
        }
        files = data["files"]
        if "trama 0.2.0" in data["results"]:  # the 0.2 file was written by trama 0.2.0's dump
            summary["dump vs 0.2.0"][count] = files["trama"]["dump"] / files["0.2"]["dump"]
            phases = data["dump_phases"]
            summary["dump text + write vs 0.2.0"][count] = (phases["text"] + phases["write"]) / files["0.2"]["dump"]
        res = data["results"]
        if "trama 0.2.0" in res:
            ref = res["trama 0.2.0"]["times"]["load"]
            summary["speedup over 0.2.0"][count] = {
                "trama": ref / res["trama"]["times"]["load"],
                "trama, 0.2 file": ref / res["trama, 0.2 file"]["times"]["load"],
            }
    counts = sorted(sizes)
    for small, large in itertools.pairwise(counts):
        key = f"{large}/{small}"
        summary["scaling"][key] = {
            case: sizes[large]["results"][case]["times"]["load"] / sizes[small]["results"][case]["times"]["load"]
            for case in CASES
            if case in sizes[small]["results"] and case in sizes[large]["results"]
        }
    return summary


def report(info: dict[str, Any], repeat: int, sizes: dict[int, dict[str, Any]], summary: dict[str, Any]) -> str:
    lines = [
        f"Graph size: a Sequential root with N chained ReLU leaves. Load seconds, best of {repeat} "
        "(each run a fresh process); peak = ru_maxrss rise over the process's baseline",
        "",
    ]
    rows = []
    for count, data in sizes.items():
        res = data["results"]
        ref = res.get("trama 0.2.0")
        for case in CASES:
            if case not in res:
                continue
            load = res[case]["times"]["load"]
            file_key = {"trama": "trama", "trama, 1.2 file": "1.2"}.get(case, "0.2")
            rows.append(
                [
                    f"{count:,}",
                    case,
                    f"{data['files'][file_key]['bytes'] / MB:.1f}",
                    seconds(load),
                    f"{res[case]['peaks']['load'] / MB:.0f}",
                    ratio(ref["times"]["load"] / load, 1) if ref else "-",
                ]
            )
    lines.append(table(["N", "case", "file MB", "load s", "peak MB", "speedup vs 0.2.0"], rows))

    lines += ["", "Targets:"]
    target_rows = []
    for count, ratios in summary["load vs json.loads"].items():
        value = ratios["json.loads"]
        target = TARGETS["load vs json.loads"]
        target_rows.append(
            [
                f"{count:,} nodes: our load / json.loads (same process)",
                ratio(value),
                f"<= {target:g}x",
                verdict(value, target),
            ]
        )
        paused = ratios["json.loads, gc paused"]
        target_rows.append([f"  (information: / json.loads with the collector paused: {paused:.2f}x)", "", "", ""])
    for count, ratios in summary["load vs 1.2 load"].items():
        value = ratios["load"]
        target = TARGETS["load vs 1.2 load"]
        target_rows.append(
            [
                f"{count:,} nodes: our load of the 1.3 file / of the 1.2 file",
                ratio(value),
                f"<= {target:g}x",
                verdict(value, target),
            ]
        )
        flat_json = ratios["json.loads of the 1.2 text"]
        target_rows.append(
            [f"  (information: our 1.3 load / json.loads of the 1.2 text: {flat_json:.2f}x)", "", "", ""]
        )
    for count, speedups in summary["speedup over 0.2.0"].items():
        value = speedups["trama"]
        target = TARGETS["speedup over 0.2.0"]
        met = verdict(value, target, at_most=False)
        target_rows.append([f"{count:,} nodes: 0.2.0 load / our load", ratio(value, 1), f">= {target:g}x", met])
    for count, value in summary["dump vs 0.2.0"].items():
        target = TARGETS["dump vs 0.2.0"]
        target_rows.append(
            [f"{count:,} nodes: our dump / 0.2.0 dump", ratio(value), f"<= {target:g}x", verdict(value, target)]
        )
        less = summary["dump text + write vs 0.2.0"][count]
        target_rows.append(
            [f"  (information: our phases text (node rules proven) + write / 0.2.0 dump: {less:.2f}x)", "", "", ""]
        )
    for key, scaling in summary["scaling"].items():
        value = scaling.get("trama")
        target = TARGETS["200k/100k"]
        target_rows.append([f"our load time, {key} nodes", ratio(value), f"<= {target}x", verdict(value, target)])
        others = ", ".join(f"{case} {v:.2f}x" for case, v in scaling.items() if case != "trama")
        if others:
            target_rows.append([f"  (same ratio for {others})", "", "", ""])
    lines.append(table(["", "measured", "target", ""], target_rows))
    if not summary["speedup over 0.2.0"]:
        lines += ["", reference_missing_message()]

    lines += [
        "",
        "Our load by phase (seconds, best of each): read the file, lift (long base64 runs out of the text),",
        "typed = the fast 1.2 reader, nested = the fast 1.3 reader (each: parse + decode + structural proof in",
        "one, or declines: the 1.2 one declines a 1.3 file, both a 0.2 file), where both decline",
        "parse_json, decode_document and structural_errors; gc = re-enabling the paused cycle collector;",
        "free = dropping what was parsed. Phases add up to about the whole trama.load.",
    ]
    phase_rows = []
    names = ("read", "lift", "typed", "nested", "parse", "decode", "validate", "gc", "free")
    for count, data in sizes.items():
        for name, case in (("phases", "trama"), ("phases, 0.2 file", "trama, 0.2 file")):
            t = data["results"][name]["times"]
            total = sum(t.get(p, 0.0) for p in names)
            row = [f"{count:,}", case, *(seconds(t.get(p)) for p in names), seconds(total)]
            phase_rows.append([*row, seconds(data["results"][case]["times"]["load"])])
    lines.append(table(["N", "file", *names, "sum", "trama.load"], phase_rows))
    json_rows = []
    for count, data in sizes.items():
        t = data["results"]["trama"]["times"]
        same = t["load, same process"]
        json_rows.append(
            [
                f"{count:,}",
                seconds(t["json.loads"]),
                seconds(t["json.loads, gc paused"]),
                seconds(same),
                ratio(same / t["json.loads"]),
                ratio(same / t["json.loads, gc paused"]),
            ]
        )
    lines += [
        "",
        "json.loads and trama.load of the same file in one process (best of 2 interleaved, best over the processes):",
    ]
    headers = ["N", "json.loads", "json.loads, gc paused", "trama.load", "/ json.loads", "/ gc paused"]
    lines.append(table(headers, json_rows))

    lines += ["", f"Writing the files (each writer exports, then dumps; best of {repeat}, fresh processes):"]
    write_rows = []
    for count, data in sizes.items():
        ours, old = data["files"]["trama"], data["files"]["0.2"]
        write_rows.append([f"{count:,}", "trama export_model + dump", seconds(ours["export"]), seconds(ours["dump"])])
        write_rows.append([f"{count:,}", old["writer"], seconds(old.get("export")), seconds(old["dump"])])
    lines.append(table(["N", "writer", "export s", "dump s"], write_rows))
    lines += [
        "",
        f"Our dump by phase (seconds, best of {repeat}, fresh processes): prove = the rules checked before",
        "and after the nodes (StructureProof), text = the document's text in pieces (encode_document for",
        "all but the nodes, trama.format._writer for the nodes, proving each node's rules as it writes it),",
        "write = UTF-8 + write + fsync.",
    ]
    dump_names = ("prove", "text", "write")
    dump_rows = []
    for count, data in sizes.items():
        times = data["dump_phases"]
        total = sum(times[p] for p in dump_names)
        dump_rows.append(
            [f"{count:,}", *(seconds(times[p]) for p in dump_names), seconds(total), seconds(total - times["prove"])]
        )
    lines.append(table(["N", *dump_names, "sum", "text + write"], dump_rows))
    lines += ["", describe_machine(info)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="runs per case; the best is reported (default 3)")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="chain lengths (default 100k 200k)")
    parser.add_argument("--tmp", help="folder for the temporary files (default: the system's)")
    parser.add_argument("--out", default="graph.json", help="results file name in benchmarks/out/")
    parser.add_argument("--profile", type=int, metavar="N", help="cProfile our export+dump and load of N nodes")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        mode, *rest = args.worker
        if mode == "write":
            worker_write(int(rest[0]), Path(rest[1]), *rest[2:])
        elif mode == "write-v02":
            worker_write_v02(int(rest[0]), Path(rest[1]))
        elif mode == "load":
            worker_load(Path(rest[0]))
        elif mode == "phases":
            worker_phases(Path(rest[0]))
        elif mode == "dump-phases":
            worker_dump_phases(int(rest[0]), Path(rest[1]))
        elif mode == "profile":
            worker_profile(int(rest[0]), Path(rest[1]))
        return 0

    folder = Path(tempfile.mkdtemp(prefix="trama-bench-graph-", dir=args.tmp))
    try:
        if args.profile:
            proc = subprocess.run(
                _ours("profile", str(args.profile), str(folder)), capture_output=True, text=True, check=False
            )
            text = "\n".join(line for line in proc.stdout.splitlines() if not line.startswith(RESULT_MARK))
            print(text + proc.stderr[-3000:])
            print(f"(also in {write_text(f'profile-graph-{args.profile}.txt', text)})")
            return proc.returncode
        with_reference = reference_available()
        if not with_reference:
            print(reference_missing_message(), file=sys.stderr)
        info = machine_info()
        sizes = {}
        for count in sorted(args.sizes):
            sizes[count] = measure_size(count, args.repeat, folder, with_reference)
            for path in folder.iterdir():
                path.unlink()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    summary = summarise(sizes)
    print(report(info, args.repeat, sizes, summary))
    out = write_json(
        args.out,
        {
            "benchmark": "graph",
            "machine": info,
            "config": {"sizes": sorted(args.sizes), "repeat": args.repeat},
            "sizes": {str(count): data for count, data in sizes.items()},
            "summary": summary,
            "targets": TARGETS,
            "reference_skipped": not with_reference,
        },
    )
    print(f"\nresults written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
