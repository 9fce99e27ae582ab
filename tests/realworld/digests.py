"""Print a digest of every zoo model's exported bytes, one JSON line per model.

Run as a script by ``test_zoo_bytes.py``, twice, in two processes with other hash seeds: the
same model, weights and example inputs must give the same bytes, inline and with external
weights (the document and its weights file). Each line is
``{"model": name, "inline": sha256, "external": sha256}``, or ``{"model": name, "error": ...}``.

    python tests/realworld/digests.py [NAME ...]
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from realworld.models import ZOO, by_name, ensure_torchvision_importable

ensure_torchvision_importable()

import trama  # noqa: E402
from realworld.captures import export  # noqa: E402


def digest(name: str, folder: Path) -> dict[str, str]:
    entry = by_name(name)
    try:
        document = export(entry, entry.build())
    except trama.ExportError as exc:
        return {"model": name, "error": str(exc)}
    inline = hashlib.sha256(trama.dumps(document).encode("utf-8")).hexdigest()
    target = folder / f"{name}.trama.json"
    trama.dump(document, target, weights="external")
    external = hashlib.sha256()
    for path in sorted(folder.glob(f"{name}.*")):
        external.update(path.name.encode("utf-8") + b"\0" + path.read_bytes())
        path.unlink()
    return {"model": name, "inline": inline, "external": external.hexdigest()}


def main(names: list[str]) -> int:
    with tempfile.TemporaryDirectory() as folder:
        for name in names or [entry.name for entry in ZOO]:
            print(json.dumps(digest(name, Path(folder))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
