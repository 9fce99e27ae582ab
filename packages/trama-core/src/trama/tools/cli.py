"""The ``trama`` command, and the classic ``tramaschema`` and ``tramassa`` scripts.

Subcommands live in one table, :data:`COMMANDS`, filled by :func:`register`; the parser is built
from the table, so adding ``run`` or ``profile`` later is one
``register(Command(...))`` call and touches nothing else here.

Files given on the command line are untrusted: a malformed document is reported as one line
(``FILE: location: message``) and an exit status, never as a traceback. Only :class:`TramaError`
and :class:`OSError` are caught at this boundary; anything else is a bug in trama and is allowed
to surface with its traceback.

The conventions of other command-line tools hold: ``-`` for a document reads standard input
(named ``<stdin>`` in messages), ``--json`` gives the data behind a listing in a documented,
stable shape (:mod:`trama.tools._cli_json`), tables fit the terminal, and text that cannot be encoded
(a lone surrogate in a document's name) is printed as a backslash escape.

Exit statuses: 0 success, 1 a file is invalid or unreadable, 2 the command line is wrong.
"""

from __future__ import annotations

import argparse
import codecs
import functools
import io
import json
import math
import os
import shutil
import stat
import sys
import textwrap
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trama.errors import JSONError, TramaError
from trama.execution._runtime import Runtime, availability
from trama.extension._plugins import PluginSelection
from trama.format._codec import FLAT_VERSION
from trama.format._external import ExternalSource, UnresolvedExternal
from trama.format._files import NotRegularFileError, open_regular
from trama.format._jsontext import DocumentFile, ParsedText
from trama.format._memory import out_of_memory
from trama.format._model import Model
from trama.format._problems import Problem, document_problems, schema_violations
from trama.format._progress import progress_default
from trama.format._schema import json_schema
from trama.format._serialization import MMAP_THRESHOLD, WRITABLE_VERSIONS, document_text, dump, load, loads
from trama.format._serialization import _decode as decode_document_text
from trama.format._specs import OpSpec
from trama.tools import _cli_json
from trama.tools._diff import DIFF_HELP, diff_arguments, run_diff
from trama.tools._lower import lower_arguments, run_lower
from trama.tools._ssa import shown, to_ssa
from trama.tools._summary import render_summary, summarize
from trama.tools._view import run_view, view_arguments
from trama.version import FORMAT_VERSION, __version__

__all__ = [
    "COMMANDS",
    "DEFAULT_WIDTH",
    "STDIN_LIMIT",
    "Command",
    "build_parser",
    "find_problems",
    "main",
    "register",
    "schema_main",
    "schema_problems",
    "ssa_main",
]

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_USAGE = 2

#: Problem messages longer than this are cut: a schema error may quote a whole tensor.
_MESSAGE_WIDTH = 300
#: The width tables are fitted to when standard output is not a terminal (and COLUMNS is unset).
DEFAULT_WIDTH = 100
#: Tables are never fitted narrower than this, however narrow the terminal says it is.
_MIN_WIDTH = 40


@dataclass(frozen=True, slots=True)
class Command:
    """One subcommand: its name and help, how it adds its arguments, and what it runs.

    ``run`` gets the parsed arguments and returns the exit status. ``epilog`` ends the
    command's ``--help``; written with line breaks (a JSON shape), it is printed as written.
    """

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    description: str | None = None
    epilog: str | None = None


#: Every subcommand of ``trama``, by name, in the order ``trama --help`` lists them.
COMMANDS: dict[str, Command] = {}


def register(command: Command) -> Command:
    """Add a subcommand to ``trama`` (replacing one of the same name) and return it."""
    COMMANDS[command.name] = command
    return command


# --- entry points -------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """The ``trama`` command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    command: Command | None = getattr(args, "command_spec", None)
    if command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return _run(command, args)


def _run(command: Command, args: argparse.Namespace) -> int:
    """Run a command; a reader that went away (``trama ssa big.json | head``) is not an error
    worth a traceback."""
    quiet = getattr(args, "quiet", False)
    with _escaped_output(), _one_line_warnings(), progress_default(False if quiet else None):
        try:
            status = command.run(args)
            sys.stdout.flush()
        except BrokenPipeError:
            # Point stdout at /dev/null so the interpreter's final flush does not fail again.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return EXIT_INVALID
        except MemoryError:  # the safety net (readers say so themselves, as a trama error)
            ran_out = True
        else:
            ran_out = False
        if ran_out:  # outside the handler, which let go of what the command held
            print(f"trama {command.name}: {_one_line(out_of_memory('finish the command'))}", file=sys.stderr)
            return EXIT_INVALID
    return status


@contextmanager
def _one_line_warnings() -> Iterator[None]:
    """Print each warning as one line, ``trama: warning: <message>``, on standard error.

    Python's default form is two lines, the second the source line that warned: a plugin that
    fails to load would otherwise put a line of trama's code into every command's output, and
    a message a plugin wrote may hold newlines or escape sequences."""

    def show(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
        print(f"trama: warning: {_clip(str(message))}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


@contextmanager
def _escaped_output() -> Iterator[None]:
    """Print what the output encoding cannot hold as a backslash escape, for the duration.

    Names come from documents and from the file system: a ``"\\ud800"`` escape in a document
    is a lone surrogate once parsed, and a file name that is not UTF-8 holds some too. Either
    would stop a listing halfway with a traceback; ``\\ud800`` in the output says what is
    there. The streams' own setting is put back afterwards, for programs that call :func:`main`.
    """
    changed = []
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors != "backslashreplace":
            changed.append((stream, stream.errors))
            stream.reconfigure(errors="backslashreplace")
    try:
        yield
    finally:
        for stream, errors in changed:
            stream.reconfigure(errors=errors)


def schema_main(argv: list[str] | None = None) -> int:
    """``tramaschema``: the same as ``trama schema``."""
    return _run_alone("schema", "tramaschema", argv)


def ssa_main(argv: list[str] | None = None) -> int:
    """``tramassa FILE``: the same as ``trama ssa FILE``."""
    return _run_alone("ssa", "tramassa", argv)


def build_parser() -> argparse.ArgumentParser:
    """The ``trama`` parser with one subparser per entry of :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="trama", description="Work with trama documents: hierarchical model graphs in JSON."
    )
    parser.add_argument("--version", action="version", version=_version_text())
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    for command in COMMANDS.values():
        sub = subparsers.add_parser(
            command.name,
            help=command.help,
            description=command.description or command.help,
            epilog=command.epilog,
            formatter_class=_HelpFormatter,
        )
        command.add_arguments(sub)
        _add_quiet(sub)
        sub.set_defaults(command_spec=command)
    return parser


def _add_quiet(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress line (shown on a terminal while a file of 100 MB or more is read or written)",
    )


def _run_alone(name: str, prog: str, argv: list[str] | None) -> int:
    """Run one subcommand as a standalone program, so its usage and errors name ``prog``."""
    command = COMMANDS[name]
    parser = argparse.ArgumentParser(
        prog=prog,
        description=command.description or command.help,
        epilog=command.epilog,
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=_version_text())
    command.add_arguments(parser)
    _add_quiet(parser)
    return _run(command, parser.parse_args(argv))


def _version_text() -> str:
    return f"trama {__version__} (format {FORMAT_VERSION})"


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's layout, except that text written with line breaks (the JSON shapes in the
    epilogs) keeps them: refilled, a shape would be unreadable."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" not in text:
            return super()._fill_text(text, width, indent)
        return "".join(indent + line for line in text.splitlines(keepends=True))


# --- documents from files or standard input ------------------------------------------------


class _StandardInput:
    """The document argument ``-``: standard input. It prints as ``<stdin>``, the name error
    lines give it. (A file really called ``-`` is ``./-``, which argparse hands over as a path.)"""

    def __str__(self) -> str:
        return "<stdin>"

    def __repr__(self) -> str:
        return "<standard input>"


#: What a document argument of ``-`` becomes: ``isinstance(document, Path)`` tells them apart.
_STDIN = _StandardInput()
#: The most bytes read from a pipe on standard input. A regular file redirected to standard
#: input (``< model.trama.json``) is read a block at a time like a named file instead, with no limit.
STDIN_LIMIT = 1 << 30
#: Standard input is read in pieces this large, each checked before the next is read.
_STDIN_CHUNK = 1 << 20
_JSON_WHITESPACE = b" \t\r\n"

_Document = Path | _StandardInput

#: How ``--help`` explains ``-``, and where the external weights of such a document are found.
_STDIN_HELP = (
    "- to read standard input (named <stdin> in messages; the external weights files such a "
    "document names are looked up in the current directory)"
)


def _document(text: str) -> _Document:
    """argparse's type for a document argument: ``-`` is standard input, anything else a path."""
    return _STDIN if text == "-" else Path(text)


def _load(document: _Document, *, lazy_inline: bool = False) -> Model:
    """:func:`trama.load` for a path; for standard input, the same with the current directory
    as the document's folder (where its external weights paths are relative to).
    ``lazy_inline`` is for commands that look at the structure only (see :func:`trama.load`)."""
    if isinstance(document, Path):
        return load(document, lazy_inline=lazy_inline)
    data = _read_stdin()
    if isinstance(data, DocumentFile):
        return decode_document_text(
            data, validate=True, registry=None, base_dir=Path.cwd(), mmap_weights=False, lazy_inline=lazy_inline
        )
    return loads(data, base_dir=Path.cwd())


def _load_or_say(document: _Document, *, lazy_inline: bool = False) -> Model | None:
    """:func:`_load`, or ``None`` after saying on stderr, in one line, why the document cannot
    be read (a trama error, or an OS error load did not turn into one)."""
    try:
        return _load(document, lazy_inline=lazy_inline)
    except TramaError as exc:
        print(f"{_name(document)}: {_one_line(exc)}", file=sys.stderr)
    except OSError as exc:
        print(f"{_name(document)}: {_clip(str(exc))}", file=sys.stderr)
    return None


def _read_stdin() -> bytes | DocumentFile:
    """The bytes of standard input, read no further than a document could go.

    A large redirected regular file is read a block at a time, as :func:`trama.load` reads a
    large file (never mapped: a file truncated meanwhile would kill the process). A pipe is read
    in pieces up to :data:`STDIN_LIMIT` bytes, and reading stops early, leaving the rest unread, at the
    first piece that is not UTF-8 or (when more follows) that does not start a JSON object: the
    parser then reports the first problem in what was read, so ``trama validate - <
    /dev/urandom`` says "not UTF-8 text" at once instead of filling memory.
    """
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise TramaError("there is no standard input to read the document from")
    regular = _regular_stdin(stream)
    if regular is not None:
        return regular
    decoder = codecs.getincrementaldecoder("utf-8")()
    chunks: list[bytes] = []
    size = 0
    start = _StartCheck()
    try:
        while chunk := stream.read(_STDIN_CHUNK):
            size += len(chunk)
            if size > STDIN_LIMIT:
                raise TramaError(
                    f"standard input goes on past {STDIN_LIMIT:,} bytes; save the document to a file and name "
                    "the file (or redirect it: < FILE)"
                )
            chunks.append(chunk)
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError:
                break  # the parser says where
            if not start.started:
                start.feed(chunk, more=len(chunk) == _STDIN_CHUNK)
    except OSError as exc:
        raise TramaError(f"cannot read standard input: {exc.strerror or exc}") from None
    data = b"".join(chunks)
    chunks.clear()
    return data


class _StartCheck:
    """Watches the first bytes of standard input for the ``{`` that starts every document,
    piece by piece, counting the lines and columns of any whitespace before it (a stream of
    blank lines is not read to the limit, nor joined again and again)."""

    def __init__(self) -> None:
        self.started = False
        self._line = 1
        self._column = 1
        self._first = True

    def feed(self, piece: bytes, *, more: bool) -> None:
        """Look at the next piece. Raise if the text begins with anything but ``{`` and more
        input follows; with no more input, the parser reports exactly what is wrong instead."""
        if self._first and piece.startswith(b"\xef\xbb\xbf"):
            piece = piece[3:]
        self._first = False
        body = piece.lstrip(_JSON_WHITESPACE)
        gap = piece[: len(piece) - len(body)]
        newlines = gap.count(b"\n")
        self._line += newlines
        self._column = len(gap) - gap.rfind(b"\n") if newlines else self._column + len(gap)
        if not body:
            return
        self.started = True
        if body[:1] != b"{" and more:
            first = body[:4].decode("utf-8", "replace")[:1]
            raise JSONError(
                f"a trama document is a JSON object, but standard input starts with {first!r}",
                line=self._line,
                column=self._column,
            )


def _regular_stdin(stream: Any) -> DocumentFile | None:
    """Standard input as an open file, if it is a large regular file read from its start."""
    try:
        fd = stream.fileno()
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size < MMAP_THRESHOLD or os.lseek(fd, 0, os.SEEK_CUR) != 0:
            return None
        return DocumentFile(os.dup(fd), info.st_size, "<stdin>")
    except (OSError, ValueError):  # no descriptor (a test's stream)
        return None


def _read_path(path: Path) -> bytes | DocumentFile:
    """A named document's text, as :func:`trama.load` reads it (the errors of
    :func:`~trama.format._files.open_regular`)."""
    fd, size = open_regular(path)
    return document_text(fd, size, path.name)


# --- schema -------------------------------------------------------------------------------


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    """For commands that take no arguments."""


def _schema_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format-version",
        choices=WRITABLE_VERSIONS,
        default=FORMAT_VERSION,
        help=f"the schema of this format: {FORMAT_VERSION} (the default, nested) or {FLAT_VERSION} (the flat "
        "form, which also covers 1.0 and 1.1)",
    )


def _run_schema(args: argparse.Namespace) -> int:
    print(json.dumps(json_schema(args.format_version), indent=2))
    return EXIT_OK


# --- validate -----------------------------------------------------------------------------


def _validate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files", nargs="+", metavar="FILE", type=_document, help=f"trama documents (.trama.json), or {_STDIN_HELP}"
    )
    parser.add_argument(
        "--no-schema",
        dest="schema",
        action="store_false",
        help="skip the JSON Schema pass, which explains a document that fails (a valid document of the "
        "current format is proven without it, at the cost of loading it); the decoder still checks every "
        "field, but stops at its first problem",
    )
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object (shape below)")


def _run_validate(args: argparse.Namespace) -> int:
    """Print ``FILE: ok`` or one line per problem, on stdout (the report is the output).

    :func:`~trama.format.document_problems` does the work: a valid document of the current
    format costs what loading it costs, and only a document that fails (or one of another
    format version) goes through the JSON Schema and the careful reader, which explain it."""
    if sum(file is _STDIN for file in args.files) > 1:
        print("trama validate: - (standard input) can be given only once", file=sys.stderr)
        return EXIT_USAGE
    status = EXIT_OK
    reports: list[tuple[str, list[dict[str, str | None]], list[str]]] = []
    for file in args.files:
        unchecked: dict[str, int] = {}
        problems = _problems(file, schema=args.schema, unchecked=unchecked)
        if args.json:
            reports.append((str(file), [_problem_json(problem) for problem in problems], sorted(unchecked)))
        else:  # each file's lines as soon as it is checked
            for line in [_line(problem) for problem in problems] or ["ok" + _unchecked_note(unchecked)]:
                print(f"{_name(file)}: {line}")
        status = EXIT_INVALID if problems else status
    if args.json:
        sys.stdout.write(_cli_json.dumps(_cli_json.validate_json(reports)))
    return status


def _unchecked_note(unchecked: Mapping[str, int]) -> str:
    """What a valid document's ``ok`` adds where some ops could not be checked as import would
    check them: their packages are not installed here."""
    if not unchecked:
        return ""
    names = sorted(unchecked)
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    shown = ", ".join(names[:5]) + more  # op names are dotted identifiers: nothing to escape
    return f" (not checked as import would check them: no installed package defines {shown})"


def _line(problem: Problem) -> str:
    """A problem's line in the report: ``location (node 'id'): message``, clipped."""
    return _clip(str(problem))


def _problem_json(problem: Problem) -> dict[str, str | None]:
    return {"location": problem.location, "node": problem.node, "message": _clip(problem.message)}


def find_problems(path: Path, *, schema: bool = True) -> list[str]:
    """Every problem in the document at ``path``, one ``location: message`` line each; empty
    when the document is valid (:func:`trama.format.document_problems` does the work)."""
    return [_line(problem) for problem in _problems(path, schema=schema)]


def _problems(document: _Document, *, schema: bool, unchecked: dict[str, int] | None = None) -> list[Problem]:
    """:func:`find_problems` for a path or standard input, as structured problems; where
    ``unchecked`` is given, a valid document is also checked as import would check it, with the
    installed packages (:func:`trama.catalog.import_checks`), and the ops none of them knows
    are put in ``unchecked``."""
    try:
        if isinstance(document, Path):
            data: bytes | DocumentFile = _read_path(document)
            folder = document.parent
        else:
            data, folder = _read_stdin(), Path.cwd()
    except NotRegularFileError as exc:
        return [Problem(f"cannot read the file: it is {exc.kind}, not a regular file")]
    except OSError as exc:
        return [Problem(f"cannot read the file: {exc.strerror or exc}")]
    except ValueError as exc:
        return [Problem(f"cannot read the file: {exc}")]
    except TramaError as exc:
        return [Problem.of(exc)]
    then = functools.partial(_import_problems, unchecked) if unchecked is not None else None
    try:
        return document_problems(data, folder, schema=schema, then=then)
    except MemoryError:
        pass
    return [Problem.of(out_of_memory("check the document"))]  # once the failed check let go


def _import_problems(unchecked: dict[str, int], model: Model) -> list[Problem]:
    """What ``trama.import_model`` would refuse in a valid ``model``, with the installed packages.

    A document of the formats 0.1 and 0.2 (the earlier library's) is left alone: its op names
    are that library's, not the catalog's (its ``Embedding`` reads ``ids``)."""
    from trama.catalog import import_checks
    from trama.extension import plugin_host

    if model.source_format_version is not None and model.source_format_version.startswith("0."):
        return []
    found = import_checks(model, plugin_host().registry(None))
    unchecked.update(found.unchecked)
    return [Problem.of(error) for error in found.errors]


def schema_problems(parsed: ParsedText) -> list[str]:
    """Every JSON Schema violation in a parsed document, one line each, in document order."""
    return [_line(problem) for problem in schema_violations(parsed)]


def _one_line(error: TramaError) -> str:
    return _clip(str(error))


def _clip(text: str) -> str:
    """One line of at most :data:`_MESSAGE_WIDTH` characters: runs of whitespace (newlines
    included) become one space, and what is not printable (an ANSI escape a document put in a
    name or a location) is written as its escape, so a message cannot forge a line of output
    or drive the terminal."""
    text = shown(" ".join(text.split()))
    return text if len(text) <= _MESSAGE_WIDTH else text[: _MESSAGE_WIDTH - 3] + "..."


def _name(document: object) -> str:
    """A file name as messages print it: a name may hold a newline or an escape sequence (a
    file unpacked from an archive), which would forge a line of the report; they are escaped."""
    return shown(str(document))


# --- ssa and info -------------------------------------------------------------------------


def _file_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file", metavar="FILE", type=_document, help=f"a trama document (.trama.json), or {_STDIN_HELP}"
    )


def _info_arguments(parser: argparse.ArgumentParser) -> None:
    _file_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


#: How to read ``trama ssa``'s text (its ``--help`` epilog; the module docstring of
#: :mod:`trama.tools._ssa` has every rule).
_SSA_HELP = """how to read it:
  x                      an input of the enclosing scope
  %name, %name.out       node `name` of this scope: its one output `y`, its output `out`
  %h: f32[2, 8, 32]      a value's dtype and shape where the document states them (none is inferred)
  Op(32, 64, bias)(%x)   a leaf op: its settings (catalog defaults left out), then its inputs
  %x[:, :8]              a getitem, as Python writes it
  Block(port=%x, y):     a composite; its body follows, indented, and ends with `return`
  Block#1(...)           a block that repeats: the first one shows its body, the others one line
  slot=@entry            a slot that uses a shared or tied entry (=value for a setting)
  call a.b(...)          runs node a.b again, on these inputs"""


def _depth(text: str) -> int:
    """argparse's type for ``--depth``: a whole number, 0 or more."""
    try:
        depth = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if depth < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {depth}")
    return depth


def _ssa_arguments(parser: argparse.ArgumentParser) -> None:
    _file_argument(parser)
    parser.add_argument(
        "--depth",
        type=_depth,
        metavar="N",
        help="print nodes down to depth N only, a composite at depth N as its one line (the top-level "
        "nodes are depth 1, their children depth 2: a node's depth is the number of segments of its id)",
    )
    parser.add_argument(
        "--tensors",
        action="store_true",
        help="also list the tensors (dtype, shape, learnable) and the shared settings, after the graph",
    )


def _run_ssa(args: argparse.Namespace) -> int:
    return _with_model(args.file, functools.partial(to_ssa, depth=args.depth, tensors=args.tensors))


def _run_info(args: argparse.Namespace) -> int:
    def render(model: Model) -> str:
        summary = summarize(model)
        return json.dumps(summary.to_dict(), indent=2) + "\n" if args.json else render_summary(summary)

    return _with_model(args.file, render)


def _with_model(document: _Document, render: Callable[[Model], str]) -> int:
    """Load and validate ``document``, print ``render(model)``; a bad file is one line on stderr.
    The renderers look at the structure only: a large document's tensors stay in its file."""
    try:
        model = _load(document, lazy_inline=True)
    except TramaError as exc:
        more = len(exc.all_errors) - 1
        again = f"'trama validate {_name(document)}'" if isinstance(document, Path) else "'trama validate -' on it"
        suffix = f" (and {more} more: run {again})" if more > 0 else ""
        print(f"{_name(document)}: {_one_line(exc)}{suffix}", file=sys.stderr)
        return EXIT_INVALID
    except OSError as exc:  # load reports unreadable files itself; this is the safety net
        print(f"{_name(document)}: {_clip(str(exc))}", file=sys.stderr)
        return EXIT_INVALID
    sys.stdout.write(render(model))
    return EXIT_OK


# --- plugins and ops ------------------------------------------------------------------------


def _json_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the listing as one JSON object (shape below)")


def _run_plugins(args: argparse.Namespace) -> int:
    """One block per plugin: distribution, version, hooks, and any load error. Exit 1 if any
    plugin reported an error, so a CI step can catch a broken install. What a plugin gets wrong
    is in its block (the host never raises for it); a TramaError here is trama's own, one line."""
    from trama.extension._plugins import PluginLoadWarning, plugin_host

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PluginLoadWarning)  # shown in the listing instead
        try:
            host = plugin_host()
            infos = host.plugins()
        except TramaError as exc:
            print(f"trama plugins: {_one_line(exc)}", file=sys.stderr)
            return EXIT_INVALID
    status = EXIT_INVALID if any(info.errors for info in infos) else EXIT_OK
    selection = host.selection()
    if args.json:
        sys.stdout.write(_cli_json.dumps(_cli_json.plugins_json(infos, selection)))
        return status
    if selection.active:
        print(_selection_line(selection))
    for info in infos:
        print(f"{info.distribution} {info.version}  (entry point {info.name!r})")
        print(f"  hooks: {', '.join(info.hooks) or 'none'}")
        for error in info.errors:
            print(f"  error: {_clip(error)}")
    return status


def _selection_line(selection: PluginSelection) -> str:
    """What ``TRAMA_PLUGINS`` did, in one line above the listing."""
    from trama.extension._plugins import SELECTION_VARIABLE

    allowed = ", ".join(selection.allowed or ()) or "nothing"
    parts = [f"{SELECTION_VARIABLE} selects {allowed}"]
    if selection.skipped:
        parts.append("left out: " + ", ".join(f"{name} ({dist})" for name, dist in selection.skipped))
    if selection.unmatched:
        parts.append("no installed plugin is called " + ", ".join(map(repr, selection.unmatched)))
    return _clip("; ".join(parts))


def _ops_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--framework", help="show only whether this framework implements each op")
    parser.add_argument(
        "--full",
        action="store_true",
        help="show whole signatures, wrapped onto as many lines as they need (by default each op is one "
        "line, its signature cut to the terminal's width, or to the COLUMNS variable, or to "
        f"{DEFAULT_WIDTH} columns when the output is not a terminal)",
    )
    _json_argument(parser)


def _run_ops(args: argparse.Namespace) -> int:
    """Every op with its signature and, per installed framework, whether it is implemented."""
    from trama.extension._plugins import PluginLoadWarning, plugin_host

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PluginLoadWarning)
        host = plugin_host()
        try:
            frameworks = [args.framework] if args.framework else host.frameworks()
            specs = sorted(host.registry(None), key=lambda s: ("." in s.name, s.name.lower(), s.name))
            coverage = {name: {s.name for s in host.registry(name) if s.factory is not None} for name in frameworks}
        except TramaError as exc:
            print(f"trama ops: {_one_line(exc)}", file=sys.stderr)
            return EXIT_INVALID
    if args.json:
        sys.stdout.write(_cli_json.dumps(_cli_json.ops_json(specs, frameworks, coverage, _signature)))
        return EXIT_OK
    width = max(_terminal_width(), _MIN_WIDTH)
    name_width = max((len(spec.name) for spec in specs), default=0)
    header = f"{'op':<{name_width}}  {'  '.join(frameworks) + '  ' if frameworks else ''}"
    # The signature column's title only where the column is beside the rows (else it goes below).
    print(header + "signature" if width - len(header) >= _MIN_COLUMN else header.rstrip())
    for spec in specs:
        marks = "  ".join(f"{'yes' if spec.name in coverage[f] else '-':<{len(f)}}" for f in frameworks)
        prefix = f"{spec.name:<{name_width}}  {marks + '  ' if frameworks else ''}"
        for line in _fit_row(prefix, _signature(spec), width, full=args.full):
            print(line)
    return EXIT_OK


def _terminal_width() -> int:
    """The columns to fit tables to: COLUMNS if set, else the terminal's width, else
    :data:`DEFAULT_WIDTH` (output to a pipe or a file)."""
    return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns


#: A signature column narrower than this is useless; the signature then goes under its row.
_MIN_COLUMN = 24
_UNDER_INDENT = "    "


def _fit_row(prefix: str, text: str, width: int, *, full: bool) -> list[str]:
    """``prefix`` and ``text`` as lines of at most ``width`` columns: ``text`` cut to one line
    (ending in ``...``), or with ``full`` wrapped onto more lines aligned under its first. When
    the prefix leaves too little room, ``text`` goes on the lines below it, indented. Only a
    prefix wider than ``width`` on its own (an op name that long) makes a longer line."""
    lead = prefix
    lines: list[str] = []
    if width - len(prefix) < _MIN_COLUMN:
        lines.append(prefix.rstrip())
        lead = _UNDER_INDENT
    room = width - len(lead)
    if not full:
        return [*lines, lead + (text if len(text) <= room else text[: room - 3] + "...")]
    pieces = textwrap.wrap(text, room, break_on_hyphens=False) or [""]
    indent = " " * len(lead)
    return [*lines, lead + pieces[0], *(indent + piece for piece in pieces[1:])]


def _signature(spec: OpSpec) -> str:
    """``(x, other?) -> (y) {weight: tensor, bias?: tensor}`` — optional parts marked ``?``."""
    ports = [*spec.inputs, *(f"{p}?" for p in spec.optional_inputs)]
    if spec.variadic_inputs:
        ports.append("...")
    outputs = [*spec.outputs, *(["..."] if spec.variadic_outputs else [])]
    slots = ", ".join(f"{p.name}{'?' if p.optional else ''}: {'|'.join(p.types)}" for p in spec.parameters)
    kind = "composite " if spec.composite else ""
    return f"{kind}({', '.join(ports)}) -> ({', '.join(outputs)})" + (f" {{{slots}}}" if slots else "")


# --- runtimes ------------------------------------------------------------------------------


def _run_runtimes(args: argparse.Namespace) -> int:
    """Every registered runtime: its names, whether it can run here (or why not), and the
    package it comes from, in registration order (the order ``cuda`` and ``gpu`` pick in)."""
    from trama.execution._runtime import _registered

    rows = _runtime_listing(_registered())
    if args.json:
        sys.stdout.write(_cli_json.dumps(_cli_json.runtimes_json(rows)))
        return EXIT_OK
    if not rows:
        print("no runtimes are installed: install trama-numpy for the default one")
        return EXIT_OK
    table = [("runtime", "aliases", "framework", "device", "package", "available")]
    for row in rows:
        package = row.distribution if row.version is None else f"{row.distribution} {row.version}"
        available = "yes" if row.available else f"no: {row.unavailable_reason or 'not on this machine'}"
        table.append(
            (row.name, ", ".join(sorted(row.aliases)) or "-", row.framework, row.device, package or "?", available)
        )
    widths = [max(len(cells[k]) for cells in table) for k in range(len(table[0]))]
    for cells in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip())
    return EXIT_OK


def _runtime_listing(registered: list[Runtime]) -> list[_cli_json.RuntimeListing]:
    """What ``trama runtimes`` shows of each runtime. The package is the installed distribution
    whose code the runtime's class is (the plugin host does not say which plugin gave which
    runtime, and the code's package is the one to upgrade or report to)."""
    import importlib_metadata

    owners = importlib_metadata.packages_distributions()
    rows = []
    for runtime in registered:
        top = type(runtime).__module__.partition(".")[0]
        distribution = min(owners.get(top, []), default=None)
        version = None
        if distribution is not None:
            try:
                version = importlib_metadata.version(distribution)
            except importlib_metadata.PackageNotFoundError:
                version = None
        available, reason = availability(runtime)
        rows.append(
            _cli_json.RuntimeListing(
                name=runtime.name(),
                aliases=tuple(runtime.aliases),
                framework=runtime.framework,
                device=runtime.device,
                available=available,
                unavailable_reason=reason,
                distribution=distribution,
                version=version,
            )
        )
    return rows


# --- run and profile -----------------------------------------------------------------------


def _run_arguments(parser: argparse.ArgumentParser) -> None:
    _file_argument(parser)
    parser.add_argument(
        "--runtime", default="default", help="runtime name or alias (default: %(default)s; 'trama runtimes' lists them)"
    )
    parser.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=FILE.npy",
        help="one model input from a .npy file (repeat for each input)",
    )


def _run_run_arguments(parser: argparse.ArgumentParser) -> None:
    _run_arguments(parser)
    parser.add_argument("--output", type=Path, help="write the outputs to this .npz file instead of printing shapes")


def _profile_arguments(parser: argparse.ArgumentParser) -> None:
    _run_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the raw profile as JSON")


def _execute(args: argparse.Namespace, action: Callable[[Any, dict[str, np.ndarray]], Any]) -> tuple[Any, Any] | None:
    """Read the inputs, load and prepare the file, and apply ``action(runnable, inputs)``.
    Returns the runnable and the action's result, or reports a problem in one line and returns
    None."""
    from trama.execution._runtime import runtime_for_name

    try:
        inputs = _read_inputs(args.input)
        runnable = runtime_for_name(args.runtime).prepare(_load(args.file))
        return runnable, action(runnable, inputs)
    except TramaError as exc:
        print(f"{_name(args.file)}: {_one_line(exc)}", file=sys.stderr)
        return None


def _read_inputs(specs: list[str]) -> dict[str, np.ndarray]:
    """``NAME=FILE.npy`` arguments as arrays (never unpickling: a file runs no code)."""
    inputs: dict[str, np.ndarray] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise TramaError(f"--input takes NAME=FILE.npy, got {spec!r}")
        try:
            inputs[name] = _read_npy(Path(path))
        except NotRegularFileError as exc:
            raise TramaError(
                f"cannot read input {name!r} from {path!r}: it is {exc.kind}, not a regular file"
            ) from None
        except OSError as exc:
            raise TramaError(f"cannot read input {name!r} from {path!r}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise TramaError(f"cannot read input {name!r} from {path!a}: {exc}") from None
    return inputs


def _read_npy(path: Path) -> np.ndarray:
    """A ``.npy`` file's array, its header checked against the file's size before anything is
    allocated (a 200-byte file may claim a [10^6, 10^6] array), never unpickled."""
    fd, size = open_regular(path)
    with os.fdopen(fd, "rb") as handle:
        try:
            version = np.lib.format.read_magic(handle)
            reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _, dtype = reader(handle)
        except ValueError as exc:
            raise ValueError(f"not a .npy file ({exc})") from None
        if dtype.hasobject:
            raise ValueError("the array holds Python objects, which would have to be unpickled")
        needed = math.prod(shape) * dtype.itemsize
        available = size - handle.tell()
        if needed > available:
            raise ValueError(f"its header claims {needed} bytes of data, but the file holds {available}")
        handle.seek(0)
        array: np.ndarray = np.load(handle, allow_pickle=False)
    return array


def _run_run(args: argparse.Namespace) -> int:
    kind = None if args.output is None else _special_file(args.output)
    if kind is not None:  # refused before the run: renaming the outputs over it would destroy it
        message = f"cannot write the outputs to {str(args.output)!r}: it is {kind}, not a regular file"
        print(f"{_name(args.file)}: {message}", file=sys.stderr)
        return EXIT_INVALID
    done = _execute(args, lambda runnable, inputs: runnable.run(inputs))
    if done is None:
        return EXIT_INVALID
    runnable, outputs = done
    names = [f"{ref.node}.{ref.output}" for ref in runnable.model.outputs]
    arrays = {name: np.asarray(value) for name, value in zip(names, outputs, strict=True)}
    if args.output is not None:
        from trama.format._serialization import atomic_file

        savez: Any = np.savez  # its stub types **arrays as its own keyword flags
        try:
            with atomic_file(args.output) as handle:
                savez(handle, **arrays)
        except (OSError, TramaError) as exc:
            reason = (exc.strerror or str(exc)) if isinstance(exc, OSError) else _one_line(exc)
            print(f"{_name(args.file)}: cannot write the outputs to {str(args.output)!r}: {reason}", file=sys.stderr)
            return EXIT_INVALID
        print(f"wrote {len(arrays)} output(s) to {_name(args.output)}")
        return EXIT_OK
    for name, array in arrays.items():
        print(f"{name}: {array.dtype}{list(array.shape)}")
    return EXIT_OK


def _special_file(path: Path) -> str | None:
    """What ``path`` names when it is a special file (a device, a FIFO, a socket; through
    symbolic links), else ``None``. The outputs are written beside the target and renamed over
    it, which would replace ``/dev/stdout`` or a FIFO by a regular file: refused instead. A
    folder is left to the writer, which says so."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):  # absent (the usual case), or unspellable: the writer reports it
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device"


def _run_profile(args: argparse.Namespace) -> int:
    done = _execute(args, lambda runnable, inputs: runnable.profile_json(inputs))
    if done is None:
        return EXIT_INVALID
    profile = done[1]
    if args.json:
        print(json.dumps(profile, indent=2))
        return EXIT_OK
    rows = []
    for row in profile["nodes"]:
        depth = row["id"].count(".")
        macs = "" if row["macs"] is None else f"{row['macs']:,}"
        rows.append(
            (
                "  " * depth + row["id"].rpartition(".")[2],
                row["op"],
                str(row["calls"]),
                f"{1000 * row['seconds']:.3f}",
                f"{row['parameters']:,}",
                macs,
            )
        )
    total = profile["total"]
    headers = ("node", "op", "calls", "ms", "parameters", "multiply-adds")
    widths = [max(len(h), *(len(r[k]) for r in rows)) for k, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    for row_text in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row_text, widths, strict=True)).rstrip())
    complete = "" if total["macs_complete"] else " (ops without a rule not counted)"
    print(
        f"\ntotal: {1000 * total['seconds']:.3f} ms ({1000 * total['node_seconds']:.3f} ms in nodes), "
        f"{total['parameters']:,} parameters ({total['parameter_bytes']:,} bytes), "
        f"{total['macs']:,} multiply-adds{complete}; runtime {profile['runtime']}"
    )
    return EXIT_OK


def _upgrade_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "document", type=_document, help=f"the document to rewrite, in any format trama reads; {_STDIN_HELP}"
    )
    parser.add_argument(
        "-o", "--output", type=Path, required=True, help="where to write it (may be the document itself)"
    )
    parser.add_argument(
        "--format-version",
        choices=WRITABLE_VERSIONS,
        default=FORMAT_VERSION,
        help=f"the format to write: {FORMAT_VERSION} (the default, nested) or {FLAT_VERSION} (flat, for "
        "readers older than 1.3)",
    )
    parser.add_argument(
        "--weights",
        choices=("inline", "external"),
        help="where the tensors go: inline as base64, or a safetensors file beside the output (default: as in "
        "the document read)",
    )


def _run_upgrade(args: argparse.Namespace) -> int:
    try:
        model = _load(args.document)
    except TramaError as exc:
        print(f"{_name(args.document)}: {_one_line(exc)}", file=sys.stderr)
        return EXIT_INVALID
    weights = args.weights
    if weights is None:
        external = any(
            isinstance(getattr(entry.value, "source", None), (ExternalSource, UnresolvedExternal))
            for entry in model.parameters.values()
        )
        weights = "external" if external else "inline"
    try:
        dump(model, args.output, weights=weights, format_version=args.format_version)
    except TramaError as exc:
        print(f"{args.output}: {_one_line(exc)}", file=sys.stderr)
        return EXIT_INVALID
    print(f"{args.output}: format {model.source_format_version} -> {args.format_version} (weights {weights})")
    return EXIT_OK


register(Command("schema", "print the JSON Schema of the current format", _schema_arguments, _run_schema))
register(
    Command(
        "upgrade",
        "rewrite a document in the current format (or the flat 1.2 one)",
        _upgrade_arguments,
        _run_upgrade,
        description="Read a document of any format version trama reads (0.1, 0.2, 1.0-1.3) and write it "
        "again, atomically, in the current format: the same model, every node, setting and tensor equal. "
        "--format-version 1.2 writes the flat form for readers older than 1.3.",
    )
)
register(
    Command(
        "validate",
        "check documents and list every problem",
        _validate_arguments,
        _run_validate,
        description="Check trama documents: JSON syntax, the JSON Schema (current format), decoding, the "
        "structural rules, and every tensor's data. Prints 'FILE: ok' or one 'FILE: location: message' line "
        "per problem. Exit status 0 when all files are valid, 1 otherwise.",
        epilog=_cli_json.VALIDATE_HELP,
    )
)
register(
    Command(
        "ssa",
        "print a document as SSA text, for review",
        _ssa_arguments,
        _run_ssa,
        description="Print a document as SSA text, for review: the model's signature, then each scope's "
        "nodes top-down, one line each with its settings' values and the dtype and shape of each value "
        "where the document states them; a block that repeats is printed once. Lines fit 100 columns.",
        epilog=_SSA_HELP,
    )
)
register(Command("info", "summarize a document: nodes, ops, parameter sizes", _info_arguments, _run_info))
register(
    Command(
        "diff",
        "compare two documents: what was added, removed, renamed or changed",
        diff_arguments,
        run_diff,
        description="Compare two trama documents as models and print what changed, one line each: nodes "
        "added, removed, renamed or moved; ops, classes and metadata; settings (old -> new); ports and "
        "wiring; tensor shapes and dtypes; tensor values, with the largest difference; learnable flags; "
        "model inputs, outputs and symbols. The same change in repeated sibling blocks (the layers of a "
        "stack) is one line. Exit status 0 when the models are the same, 1 when they differ, 2 on trouble.",
        epilog=DIFF_HELP,
    )
)
register(
    Command(
        "lower",
        "lower a document to ONNX (composites as ONNX functions) or a torch.export program, for another runtime",
        lower_arguments,
        run_lower,
        description="Lower a document to an ONNX model with trama-onnx: every op by the catalog's semantics, each "
        "composite an ONNX local function (one per block structure, each instance a call named by its node id), "
        "symbolic sizes as dim_params, the weights inside the model or, with --external-data, beside it. The "
        "result passes onnx.checker's full check; a node that cannot be lowered is one error naming it. "
        "With --to torch-export (or an output ending in .pt2), the document imported into torch and traced by "
        "torch.export, its symbolic sizes dynamic within their ranges, saved with torch.export.save: a program "
        "for ExecuTorch or AOTInductor.",
    )
)
register(
    Command(
        "view",
        "write a document as one self-contained HTML page to browse: tree, settings, wiring, shapes",
        view_arguments,
        run_view,
        description="Write one self-contained HTML page (no network, no server) to browse a document: its tree, "
        "collapsible to any depth, each node's op, class and parameter counts, and for the node selected its "
        "settings, what its inputs read, its outputs, the wiring between its children, and the composites of the "
        "same structure. Types are the document's facts; --shapes runs the model once and shows every node's.",
    )
)
register(Command("run", "run a document on a runtime and print or save its outputs", _run_run_arguments, _run_run))
register(
    Command(
        "profile", "run once and show time, parameters and multiply-adds per node", _profile_arguments, _run_profile
    )
)
register(
    Command(
        "plugins",
        "list installed plugins, their hooks and load errors",
        _json_argument,
        _run_plugins,
        epilog=_cli_json.PLUGINS_HELP,
    )
)
register(
    Command(
        "ops",
        "list known ops, their signatures and which frameworks implement them",
        _ops_arguments,
        _run_ops,
        epilog=_cli_json.OPS_HELP,
    )
)
register(
    Command(
        "runtimes",
        "list runtimes: names, whether each can run here (or why not), and their packages",
        _json_argument,
        _run_runtimes,
        description="List every runtime the installed plugins provide (trama.runtimes()), in the order 'cuda' "
        "and 'gpu' pick from: its name and aliases (what --runtime accepts), framework and device, the "
        "package it comes from, and whether it can run on this machine or why not.",
        epilog=_cli_json.RUNTIMES_HELP,
    )
)


# --- pack: a new op pack from the template (trama.tools.packtemplate) -----------------------------


def _pack_arguments(parser: argparse.ArgumentParser) -> None:
    from trama.tools.packtemplate import add_arguments

    add_arguments(parser)


def _run_pack(args: argparse.Namespace) -> int:
    from trama.tools.packtemplate import run

    return run(args)


register(Command("pack", "start an op pack: 'trama pack new NAME' writes trama-NAME", _pack_arguments, _run_pack))
