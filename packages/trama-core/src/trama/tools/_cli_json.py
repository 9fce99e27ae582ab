"""The ``--json`` output of ``trama validate``, ``plugins``, ``ops`` and ``runtimes``.

Scripts depend on these shapes, so they live in one place, next to the text that documents
them in each command's ``--help`` (the ``*_HELP`` strings below). The rules, the same for every
command: keys are sorted; lists keep their order where it means something (files in
command-line order, problems in the order found, ports and slots in signature order, plugins
and runtimes in load order, which decides who wins a contested name); other lists are sorted.
Output is ASCII (``json.dumps``' escapes), so no terminal or pipe can fail to encode it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trama.catalog import op_namespace
from trama.extension._plugins import SELECTION_VARIABLE, PluginInfo, PluginSelection
from trama.format._specs import OpSpec

__all__ = [
    "OPS_HELP",
    "PLUGINS_HELP",
    "RUNTIMES_HELP",
    "VALIDATE_HELP",
    "RuntimeListing",
    "dumps",
    "ops_json",
    "plugins_json",
    "runtimes_json",
    "validate_json",
]

VALIDATE_HELP = """\
--json prints one object; keys are sorted, files keep the command line's order
and problems the order they were found in:
  {"ok": BOOL,
   "files": [{"file": NAME, "ok": BOOL,
              "problems": [{"location": POINTER | "line L column C" | null,
                            "node": ID | null, "message": TEXT}]}]}
"file" is the name as given ("<stdin>" for -). Messages are cut at 300
characters, as in the text report. The exit status is the same as without it."""

PLUGINS_HELP = """\
--json prints one object; keys are sorted, plugins keep their load order:
  {"plugins": [{"name": ENTRY-POINT, "distribution": NAME, "version": TEXT,
                "hooks": [HOOK, ...], "errors": [TEXT, ...]}],
   "selection": {"variable": "TRAMA_PLUGINS", "allowed": [NAME, ...] | null,
                 "skipped": [{"name": ENTRY-POINT, "distribution": NAME}],
                 "unmatched": [NAME, ...]}}
"allowed" is null when TRAMA_PLUGINS is unset (every plugin loads). The exit
status is 1 when a plugin has errors, as without it."""

OPS_HELP = """\
--json prints one object; keys are sorted, ops are listed as in the table
(catalog ops first, then by name), ports and slots keep their order:
  {"frameworks": [NAME, ...],
   "ops": [{"name": NAME, "namespace": NAME, "signature": TEXT,
            "composite": BOOL, "doc": TEXT,
            "inputs": [PORT, ...], "optional_inputs": [PORT, ...],
            "variadic_inputs": BOOL,
            "outputs": [PORT, ...], "variadic_outputs": BOOL,
            "parameters": [{"name": SLOT, "types": [TYPE, ...],
                            "optional": BOOL, "learnable": BOOL | null,
                            "doc": TEXT}],
            "implemented": {FRAMEWORK: BOOL, ...}}]}
"learnable": null accepts either. "frameworks" and "implemented" cover the
--framework given, or else every installed framework."""

RUNTIMES_HELP = """\
--json prints one object; keys are sorted, runtimes keep the order in which
"cuda" and "gpu" pick one:
  {"runtimes": [{"name": NAME, "aliases": [NAME, ...],
                 "framework": NAME, "device": NAME,
                 "available": BOOL, "unavailable_reason": TEXT | null,
                 "distribution": NAME | null, "version": TEXT | null}]}
"distribution" is the installed package the runtime's code belongs to (null
when none is known)."""


def dumps(data: Any) -> str:
    """The text printed for ``data``: indented, keys sorted, ASCII, ending in a newline."""
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def validate_json(files: Sequence[tuple[str, Sequence[Mapping[str, str | None]], Sequence[str]]]) -> dict[str, Any]:
    """``trama validate --json`` for ``(file name, problems, unchecked ops)`` triples: the ops
    no installed package knows, whose settings import would check and validate could not."""
    reports = [
        {"file": name, "ok": not problems, "problems": [dict(p) for p in problems], "unchecked_ops": list(unchecked)}
        for name, problems, unchecked in files
    ]
    return {"ok": all(report["ok"] for report in reports), "files": reports}


def plugins_json(infos: Sequence[PluginInfo], selection: PluginSelection) -> dict[str, Any]:
    """``trama plugins --json``."""
    return {
        "selection": {
            "variable": SELECTION_VARIABLE,
            "allowed": None if selection.allowed is None else list(selection.allowed),
            "skipped": [{"name": name, "distribution": dist} for name, dist in selection.skipped],
            "unmatched": list(selection.unmatched),
        },
        "plugins": [
            {
                "name": info.name,
                "distribution": info.distribution,
                "version": info.version,
                "hooks": sorted(info.hooks),
                "errors": list(info.errors),
            }
            for info in infos
        ],
    }


def ops_json(
    specs: Sequence[OpSpec],
    frameworks: Sequence[str],
    coverage: Mapping[str, set[str]],
    signature: Callable[[OpSpec], str],
) -> dict[str, Any]:
    """``trama ops --json``: ``specs`` in the order to list them, ``coverage`` the names each
    framework implements, ``signature`` the text form of one op's signature."""
    return {
        "frameworks": sorted(frameworks),
        "ops": [
            {
                "name": spec.name,
                "namespace": op_namespace(spec.name),
                "signature": signature(spec),
                "inputs": list(spec.inputs),
                "optional_inputs": list(spec.optional_inputs),
                "variadic_inputs": spec.variadic_inputs,
                "outputs": list(spec.outputs),
                "variadic_outputs": spec.variadic_outputs,
                "composite": spec.composite,
                "doc": spec.doc,
                "parameters": [
                    {
                        "name": slot.name,
                        "types": list(slot.types),
                        "optional": slot.optional,
                        "learnable": slot.learnable,
                        "doc": slot.doc,
                    }
                    for slot in spec.parameters
                ],
                "implemented": {framework: spec.name in coverage[framework] for framework in frameworks},
            }
            for spec in specs
        ],
    }


@dataclass(frozen=True, slots=True)
class RuntimeListing:
    """One row of ``trama runtimes``: what :class:`trama.RuntimeInfo` says, plus why a runtime
    is unavailable and which installed package provides it."""

    name: str
    aliases: tuple[str, ...]
    framework: str
    device: str
    available: bool
    unavailable_reason: str | None
    distribution: str | None
    version: str | None


def runtimes_json(rows: Sequence[RuntimeListing]) -> dict[str, Any]:
    """``trama runtimes --json``."""
    return {
        "runtimes": [
            {
                "name": row.name,
                "aliases": sorted(row.aliases),
                "framework": row.framework,
                "device": row.device,
                "available": row.available,
                "unavailable_reason": row.unavailable_reason,
                "distribution": row.distribution,
                "version": row.version,
            }
            for row in rows
        ]
    }
