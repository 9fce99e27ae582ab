"""Reading documents written by the trama 0.1.0 and 0.2.0 releases.

Both are upgraded, as parsed JSON, to the shape of the current format before decoding, so the
rest of the library knows only one format.

* 0.2 already has the current structure minus the optional fields added in 1.0; it allowed
  the ``parameters`` table to be left out (empty) and an entry's ``learnable`` flag to be left
  out (false), which the upgrade fills in.
* 0.1 has no parameter table: each node slot holds its ``{"value", "learnable"}`` entry inline.
  Each becomes a table entry named ``<node id>.<slot>`` (renamed if that name is a node id),
  so 0.1 documents never share entries.
"""

from __future__ import annotations

from typing import Any

from trama.errors import SchemaError

__all__ = ["upgrade_legacy"]


def upgrade_legacy(raw: dict[str, Any], version: str) -> dict[str, Any]:
    """Return ``raw`` in the current document shape (``raw`` itself is not modified)."""
    if version == "0.1":
        raw = _upgrade_0_1(raw)
    elif "parameters" not in raw:
        raw = {**raw, "parameters": {}}
    table = raw.get("parameters")
    if type(table) is dict and any(type(e) is dict and "learnable" not in e for e in table.values()):
        raw = {**raw, "parameters": {k: _with_learnable(e) for k, e in table.items()}}
    return raw


def _with_learnable(entry: Any) -> Any:
    return {**entry, "learnable": False} if type(entry) is dict and "learnable" not in entry else entry


def _upgrade_0_1(raw: dict[str, Any]) -> dict[str, Any]:
    nodes = raw.get("nodes")
    if type(nodes) is not list:
        return raw  # the decoder reports the wrong type with its location
    if "parameters" in raw:
        raise SchemaError("format 0.1 has no top-level parameter table", location="/parameters")
    node_ids = {node.get("id") for node in nodes if type(node) is dict and type(node.get("id")) is str}
    table: dict[str, Any] = {}
    upgraded_nodes = []
    for i, node in enumerate(nodes):
        slots = node.get("parameters") if type(node) is dict else None
        if type(slots) is not dict:
            upgraded_nodes.append(node)
            continue
        refs = {}
        for slot, entry in slots.items():
            name = _entry_name(f"{node.get('id')}.{slot}", node_ids, table)
            if type(entry) is not dict:
                raise SchemaError(
                    'a format 0.1 parameter is {"value": ..., "learnable": boolean}',
                    location=f"/nodes/{i}/parameters/{slot}",
                )
            table[name] = entry
            refs[slot] = {"name": name}
        upgraded_nodes.append({**node, "parameters": refs})
    return {**raw, "nodes": upgraded_nodes, "parameters": table}


def _entry_name(name: str, node_ids: set[Any], table: dict[str, Any]) -> str:
    candidate, n = name, 1
    while candidate in node_ids or candidate in table:
        candidate, n = f"{name}_{n}", n + 1
    return candidate
