"""``trama pack new NAME``: a complete, installable op pack to start a new one from.

The pack it writes, ``trama-NAME``, owns the namespace ``NAME`` and defines one small but real
op, ``NAME.Scale`` (``y = x * weight + bias`` over the last axis, with learnable tensors), with
everything a published pack has: its ``pyproject.toml`` and entry point, a README and a license,
the hooks, an implementation for numpy, torch and JAX each, an ONNX lowering (for trama-onnx),
an exporter for its torch module, and a test suite that passes as generated. An author renames
``Scale`` to their own op and keeps the structure; ``docs/plugins.md`` ("Start from the
template") walks through it.

The template ships as package data (``files/``, every file ending in ``.tmpl``), so that it is
exactly what a reader can open and review, not code that prints code. Filling it in is plain
text substitution of a few ``{{token}}`` markers in the text and of ``PACKAGE`` in the paths.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from collections.abc import Iterator
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path, PurePosixPath

from trama.errors import TramaError
from trama.version import __version__

__all__ = ["PackError", "add_arguments", "new_pack", "render_pack", "run", "validate_name"]

#: Every template file ends with this; the suffix is dropped when the file is written. It keeps
#: the template's Python files out of reach of the tools that would treat them as trama's own
#: code (pytest collection, ruff, mypy, setuptools' package finder).
TEMPLATE_SUFFIX = ".tmpl"
#: In the template's paths, stands for the import package ``trama_NAME``: the folder
#: ``src/PACKAGE`` and the tests' shared module ``tests/PACKAGE_support.py``.
PACKAGE_MARK = "PACKAGE"
#: ``trama-NAME`` would be one of trama's own distributions: no pack may take these names.
RESERVED_NAMES = frozenset({"trama", "core", "numpy", "torch", "jax"})
_NAME = re.compile(r"[a-z][a-z0-9_]*")
_MAX_NAME_LENGTH = 40
_TOKEN = re.compile(r"\{\{[a-z_]+\}\}")


class PackError(TramaError):
    """A pack cannot be created: the name is not a valid namespace, or the folder is taken."""


def validate_name(name: str) -> str:
    """Return ``name`` if it can name a pack's namespace, else raise :class:`PackError`.

    The name is used four ways at once, so it must suit all of them: the op namespace
    (``NAME.Scale``), the entry-point name, the import package ``trama_NAME`` and the
    distribution ``trama-NAME``. Lower-case letters, digits and underscores, starting with a
    letter, satisfy every one; a dot (``acme.optics``, allowed in namespaces) does not make an
    importable package, so the template does not offer it.
    """
    if not _NAME.fullmatch(name):
        raise PackError(
            f"{name!r} cannot name a pack: use lower-case letters, digits and underscores, starting with a "
            "letter (for example 'optics'); it becomes the namespace NAME, the package trama_NAME and "
            "the distribution trama-NAME"
        )
    if len(name) > _MAX_NAME_LENGTH:
        raise PackError(f"{name!r} cannot name a pack: at most {_MAX_NAME_LENGTH} characters")
    if name in RESERVED_NAMES:
        raise PackError(
            f"{name!r} cannot name a pack: the namespace 'trama' and the distributions trama-core, trama-numpy, "
            "trama-torch and trama-jax belong to trama itself"
        )
    return name


def _tokens(name: str) -> dict[str, str]:
    """What each ``{{token}}`` of the template stands for."""
    found = re.match(r"(\d+)\.(\d+)", __version__)
    # The generated pack depends on the trama it was generated with (major.minor): its hooks,
    # names and behaviours are those of this version. A source tree without a version says 0.4,
    # the first with everything the template uses.
    minimum = f"{found.group(1)}.{found.group(2)}" if found else "0.4"
    return {
        "name": name,
        "package": f"trama_{name}",
        "distribution": f"trama-{name}",
        "trama_minimum": minimum,
        "year": str(datetime.date.today().year),
    }


def _template_root() -> Traversable:
    return resources.files(__name__).joinpath("files")


def _walk(folder: Traversable, path: PurePosixPath) -> Iterator[tuple[PurePosixPath, Traversable]]:
    for entry in sorted(folder.iterdir(), key=lambda item: item.name):
        if entry.is_dir():
            yield from _walk(entry, path / entry.name)
        elif entry.name.endswith(TEMPLATE_SUFFIX):
            yield path / entry.name, entry


def render_pack(name: str) -> dict[PurePosixPath, str]:
    """The files of the pack ``trama-NAME``, by path inside its folder, with their text.

    Nothing is written: :func:`new_pack` writes what this returns. Raises :class:`PackError` for
    an invalid name.
    """
    validate_name(name)
    tokens = _tokens(name)
    files: dict[PurePosixPath, str] = {}
    for relative, entry in _walk(_template_root(), PurePosixPath()):
        parts = [part.replace(PACKAGE_MARK, tokens["package"]) for part in relative.parts]
        parts[-1] = parts[-1].removesuffix(TEMPLATE_SUFFIX)
        text = entry.read_text(encoding="utf-8")
        for token, value in tokens.items():
            text = text.replace("{{" + token + "}}", value)
        leftover = _TOKEN.search(text)
        if leftover is not None:  # pragma: no cover - a broken template is trama's bug, caught by its tests
            raise RuntimeError(f"the pack template {relative} uses the unknown token {leftover.group()}")
        files[PurePosixPath(*parts)] = text
    if not files:  # pragma: no cover - an installation without its package data
        raise PackError("the pack template is missing from this installation of trama (reinstall trama)")
    return files


def new_pack(name: str, destination: Path) -> Path:
    """Write the op pack ``trama-NAME`` into the folder ``destination`` and return its folder,
    ``destination / "trama-NAME"``.

    ``destination`` is created if needed. An existing ``trama-NAME`` is used only while it is
    empty: a pack is never written over files someone has. Raises :class:`PackError` for an
    invalid name or a folder that is taken, and :class:`OSError` when writing fails.
    """
    files = render_pack(name)  # the name is checked, and the whole pack rendered, before anything is written
    root = Path(destination) / f"trama-{name}"
    if root.exists() and not root.is_dir():
        raise PackError(f"{root} exists and is not a folder; choose another --directory")
    if root.is_dir() and any(root.iterdir()):
        raise PackError(f"{root} already exists and is not empty; remove it or choose another --directory")
    for relative, text in files.items():
        target = root.joinpath(*relative.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8", newline="\n")
    return root


# --- the command line: `trama pack new NAME [--directory DIR]` ------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``trama pack``: one action, ``new``, and its name and folder."""
    actions = parser.add_subparsers(dest="pack_action", metavar="ACTION", required=True)
    new = actions.add_parser(
        "new",
        help="create the op pack trama-NAME from the template",
        description="Create trama-NAME, a complete op pack owning the namespace NAME, with one op (NAME.Scale) "
        "implemented for numpy, torch and JAX and lowered to ONNX, an exporter, and tests that pass as generated. "
        "Edit it into your own ops: see docs/plugins.md, 'Start from the template'.",
    )
    new.add_argument("name", metavar="NAME", help="the namespace: lower-case letters, digits and underscores")
    new.add_argument(
        "--directory",
        "-d",
        type=Path,
        default=Path(),
        metavar="DIR",
        help="the folder to create trama-NAME in (default: the current folder)",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``trama pack new``: exit status 0 when the pack was written, 2 for an invalid name,
    1 when the folder is taken or cannot be written."""
    try:
        validate_name(args.name)
    except PackError as exc:
        print(f"trama pack new: {exc}", file=sys.stderr)
        return 2
    try:
        root = new_pack(args.name, args.directory)
    except (PackError, OSError) as exc:
        print(f"trama pack new: {exc}", file=sys.stderr)
        return 1
    print(f"created {root}")
    print(f'next: pip install -e "{root}[test,torch,jax,onnx]" && cd {root} && pytest')
    return 0
