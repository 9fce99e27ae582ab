"""The ``trama`` command, and the classic ``tramaschema`` and ``tramassa`` scripts.

Subcommands live in one table, :data:`COMMANDS`, filled by :func:`register`; the parser is built
from the table, so adding ``run`` or ``profile`` later is one
``register(Command(...))`` call and touches nothing else here.

Files given on the command line are untrusted: a malformed document is reported as one line
(``FILE: location: message``) and an exit status, never as a traceback. Only :class:`TramaError`
and :class:`OSError` are caught at this boundary; anything else is a bug in trama and is allowed
to surface with its traceback.

Exit statuses: 0 success, 1 a file is invalid or unreadable, 2 the command line is wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np

from trama.codec import decode_document, parse_format_version
from trama.errors import TramaError
from trama.external import make_resolver
from trama.jsontext import ParsedText, gc_paused, parse_json
from trama.model import Model
from trama.opregistry import OpSpec
from trama.schema import json_schema
from trama.serialization import load
from trama.ssa import to_ssa
from trama.summary import render_summary, summarize
from trama.tensor import Tensor
from trama.validation import collect_errors
from trama.version import FORMAT_MAJOR, FORMAT_MINOR, FORMAT_VERSION, __version__

__all__ = [
    "COMMANDS",
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


@dataclass(frozen=True, slots=True)
class Command:
    """One subcommand: its name and help, how it adds its arguments, and what it runs.

    ``run`` gets the parsed arguments and returns the exit status.
    """

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    description: str | None = None


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
    try:
        status = command.run(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # Point stdout at /dev/null so the interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_INVALID
    return status


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
        sub = subparsers.add_parser(command.name, help=command.help, description=command.description or command.help)
        command.add_arguments(sub)
        sub.set_defaults(command_spec=command)
    return parser


def _run_alone(name: str, prog: str, argv: list[str] | None) -> int:
    """Run one subcommand as a standalone program, so its usage and errors name ``prog``."""
    command = COMMANDS[name]
    parser = argparse.ArgumentParser(prog=prog, description=command.description or command.help)
    parser.add_argument("--version", action="version", version=_version_text())
    command.add_arguments(parser)
    return _run(command, parser.parse_args(argv))


def _version_text() -> str:
    return f"trama {__version__} (format {FORMAT_VERSION})"


# --- schema -------------------------------------------------------------------------------


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    """For commands that take no arguments."""


def _run_schema(args: argparse.Namespace) -> int:
    print(json.dumps(json_schema(), indent=2))
    return EXIT_OK


# --- validate -----------------------------------------------------------------------------


def _validate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", type=Path, help="trama documents (.trama.json)")
    parser.add_argument(
        "--no-schema",
        dest="schema",
        action="store_false",
        help="skip the JSON Schema check, which dominates the time on very large files; the decoder "
        "still checks every field, but stops at its first problem",
    )


def _run_validate(args: argparse.Namespace) -> int:
    """Print ``FILE: ok`` or one line per problem, on stdout (the report is the output)."""
    status = EXIT_OK
    for file in args.files:
        problems = find_problems(file, schema=args.schema)
        for problem in problems or ["ok"]:
            print(f"{file}: {problem}")
        if problems:
            status = EXIT_INVALID
    return status


def find_problems(path: Path, *, schema: bool = True) -> list[str]:
    """Every problem in the document at ``path``, one ``location: message`` string each;
    empty when the document is valid.

    Stages run in order, and a stage that cannot proceed ends the list: reading, JSON parsing,
    the format version, the JSON Schema (current format only, and only with ``schema``),
    decoding. Past decoding nothing blocks, so structural errors and every corrupt tensor are
    all reported together.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        return [f"cannot read the file: {exc.strerror or exc}"]
    try:
        parsed = parse_json(data)
        major, minor = parse_format_version(parsed.data)
    except TramaError as exc:
        return [_one_line(exc)]
    # A newer minor may add fields this reader ignores but this schema would refuse, and older
    # majors have their own shape (upgraded on decoding), so the schema speaks for exact 1.x only.
    if schema and major == FORMAT_MAJOR and minor <= FORMAT_MINOR:
        violations = schema_problems(parsed)
        if violations:
            return violations
    try:
        with gc_paused():
            model = decode_document(parsed.data, resolve_external=make_resolver(path.parent), blobs=parsed.blobs)
    except TramaError as exc:
        return [_one_line(exc)]
    return [_one_line(error) for error in collect_errors(model)] + _tensor_problems(model)


def schema_problems(parsed: ParsedText) -> list[str]:
    """Every JSON Schema violation in a parsed document, with its JSON Pointer location, in
    document order (the validator's own order depends on set iteration, so it varies by run)."""
    validator = _schema_validator(parsed.blobs)(json_schema())
    errors = [leaf for error in validator.iter_errors(parsed.data) for leaf in _specific_errors(error)]
    errors.sort(key=_document_order(parsed.data))
    return [_clip(f"{_pointer(error.absolute_path)}: {error.message}") for error in errors]


def _schema_validator(blobs: dict[str, memoryview]) -> Any:
    """The 2020-12 validator, taught that the parser's blob placeholders stand for their text.

    :func:`trama.jsontext.parse_json` replaces long base64 ``data`` strings by placeholders to
    save memory; the ``pattern`` keyword checks the original bytes instead, with no copy.
    """
    base = jsonschema.Draft202012Validator
    if not blobs:
        return base
    plain_pattern = base.VALIDATORS["pattern"]

    def pattern(validator: Any, regex: str, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
        blob = blobs.get(instance) if isinstance(instance, str) else None
        if blob is None:
            yield from plain_pattern(validator, regex, instance, schema)
        elif re.search(regex.encode("ascii"), blob) is None:
            yield jsonschema.ValidationError(f"the {len(blob)}-character string does not match {regex!r}")

    return jsonschema.validators.extend(base, {"pattern": pattern})  # type: ignore[no-untyped-call]


def _specific_errors(error: jsonschema.ValidationError) -> list[jsonschema.ValidationError]:
    """For an ``anyOf`` failure, the errors of the branch the document evidently meant.

    "is not valid under any of the given schemas" does not say what to fix. A branch whose type
    does not fit the value is out; of the rest, the one that got furthest into the value, then
    the one with the fewest errors, is the intended one (a tensor with a bad dtype reads "not
    one of the dtypes", not "not a boolean"). When two branches tie, none is singled out.
    """
    if not error.context:
        return [error]
    branches: dict[Any, list[jsonschema.ValidationError]] = {}
    for sub in error.context:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    ranked = sorted(
        (_branch_rank(subs), key) for key, subs in branches.items() if not any(_wrong_type(sub) for sub in subs)
    )
    if not ranked or (len(ranked) > 1 and ranked[0][0] == ranked[1][0]):
        return [error]
    return [leaf for sub in branches[ranked[0][1]] for leaf in _specific_errors(sub)]


def _wrong_type(error: jsonschema.ValidationError) -> bool:
    return error.validator == "type" and not error.relative_path


def _branch_rank(errors: list[jsonschema.ValidationError]) -> tuple[int, int]:
    return -max(len(error.relative_path) for error in errors), len(errors)


def _document_order(data: Any) -> Callable[[jsonschema.ValidationError], list[int]]:
    """A sort key: the position of an error's location in the document, as one index per level
    (objects keep their text order, so a key's index in its object is its place in the file)."""
    key_indexes: dict[int, dict[str, int]] = {}

    def position(error: jsonschema.ValidationError) -> list[int]:
        place: list[int] = []
        value = data
        for token in error.absolute_path:
            if isinstance(value, dict):
                index = key_indexes.get(id(value))
                if index is None:
                    index = key_indexes[id(value)] = {key: k for k, key in enumerate(value)}
                place.append(index.get(str(token), -1))
                value = value.get(str(token))
            elif isinstance(value, list) and isinstance(token, int) and 0 <= token < len(value):
                place.append(token)
                value = value[token]
            else:
                break
        return place

    return position


def _pointer(path: Any) -> str:
    """A JSON Pointer (RFC 6901); the document root reads ``/`` as elsewhere in trama."""
    tokens = [str(token).replace("~", "~0").replace("/", "~1") for token in path]
    return "/" + "/".join(tokens)


def _tensor_problems(model: Model) -> list[str]:
    """Decode every tensor once, so corrupt base64, bad bool bytes or a changed external file
    are found now rather than when the model is first run."""
    problems = []
    for entry in model.parameters.values():
        if isinstance(entry.value, Tensor):
            try:
                np.asarray(entry.value)
            except TramaError as exc:
                problems.append(_one_line(exc))
    return problems


def _one_line(error: TramaError) -> str:
    return _clip(str(error))


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_WIDTH else text[: _MESSAGE_WIDTH - 3] + "..."


# --- ssa and info -------------------------------------------------------------------------


def _file_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", type=Path, help="a trama document (.trama.json)")


def _info_arguments(parser: argparse.ArgumentParser) -> None:
    _file_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def _run_ssa(args: argparse.Namespace) -> int:
    return _with_model(args.file, to_ssa)


def _run_info(args: argparse.Namespace) -> int:
    def render(model: Model) -> str:
        summary = summarize(model)
        return json.dumps(summary.to_dict(), indent=2) + "\n" if args.json else render_summary(summary)

    return _with_model(args.file, render)


def _with_model(path: Path, render: Callable[[Model], str]) -> int:
    """Load and validate ``path``, print ``render(model)``; a bad file is one line on stderr."""
    try:
        model = load(path)
    except TramaError as exc:
        more = len(exc.all_errors) - 1
        suffix = f" (and {more} more: run 'trama validate {path}')" if more > 0 else ""
        print(f"{path}: {_one_line(exc)}{suffix}", file=sys.stderr)
        return EXIT_INVALID
    except OSError as exc:  # load reports unreadable files itself; this is the safety net
        print(f"{path}: {_clip(str(exc))}", file=sys.stderr)
        return EXIT_INVALID
    sys.stdout.write(render(model))
    return EXIT_OK


# --- plugins and ops ------------------------------------------------------------------------


def _run_plugins(args: argparse.Namespace) -> int:
    """One block per plugin: distribution, version, hooks, and any load error. Exit 1 if any
    plugin reported an error, so a CI step can catch a broken install."""
    from trama.plugins import PluginLoadWarning, plugin_host

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PluginLoadWarning)  # shown in the listing instead
        infos = plugin_host().plugins()
    for info in infos:
        print(f"{info.distribution} {info.version}  (entry point {info.name!r})")
        print(f"  hooks: {', '.join(info.hooks) or 'none'}")
        for error in info.errors:
            print(f"  error: {_clip(error)}")
    return EXIT_INVALID if any(info.errors for info in infos) else EXIT_OK


def _ops_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--framework", help="show only whether this framework implements each op")


def _run_ops(args: argparse.Namespace) -> int:
    """Every op with its signature and, per installed framework, whether it is implemented."""
    from trama.plugins import PluginLoadWarning, plugin_host

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PluginLoadWarning)
        host = plugin_host()
        try:
            frameworks = [args.framework] if args.framework else host.frameworks()
            specs = list(host.registry(None))
            coverage = {name: {s.name for s in host.registry(name) if s.factory is not None} for name in frameworks}
        except TramaError as exc:
            print(f"trama ops: {_one_line(exc)}", file=sys.stderr)
            return EXIT_INVALID
    width = max((len(spec.name) for spec in specs), default=0)
    header = "  ".join(frameworks)
    print(f"{'op':<{width}}  {header}  signature" if frameworks else f"{'op':<{width}}  signature")
    for spec in sorted(specs, key=lambda s: ("." in s.name, s.name.lower())):
        marks = "  ".join(f"{'yes' if spec.name in coverage[f] else '-':<{len(f)}}" for f in frameworks)
        print(f"{spec.name:<{width}}  {marks + '  ' if frameworks else ''}{_signature(spec)}")
    return EXIT_OK


def _signature(spec: OpSpec) -> str:
    """``(x, other?) -> (y) {weight: tensor, bias?: tensor}`` — optional parts marked ``?``."""
    ports = [*spec.inputs, *(f"{p}?" for p in spec.optional_inputs)]
    if spec.variadic_inputs:
        ports.append("...")
    outputs = [*spec.outputs, *(["..."] if spec.variadic_outputs else [])]
    slots = ", ".join(f"{p.name}{'?' if p.optional else ''}: {'|'.join(p.types)}" for p in spec.parameters)
    kind = "composite " if spec.composite else ""
    return f"{kind}({', '.join(ports)}) -> ({', '.join(outputs)})" + (f" {{{slots}}}" if slots else "")


# --- run and profile -----------------------------------------------------------------------


def _run_arguments(parser: argparse.ArgumentParser) -> None:
    _file_argument(parser)
    parser.add_argument(
        "--runtime", default="default", help="runtime name (default: %(default)s; see trama.runtimes())"
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
    from trama.runtime import runtime_for_name

    try:
        inputs = _read_inputs(args.input)
        runnable = runtime_for_name(args.runtime).prepare(load(args.file))
        return runnable, action(runnable, inputs)
    except TramaError as exc:
        print(f"{args.file}: {_one_line(exc)}", file=sys.stderr)
        return None


def _read_inputs(specs: list[str]) -> dict[str, np.ndarray]:
    """``NAME=FILE.npy`` arguments as arrays (never unpickling: a file runs no code)."""
    inputs: dict[str, np.ndarray] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise TramaError(f"--input takes NAME=FILE.npy, got {spec!r}")
        try:
            inputs[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise TramaError(f"cannot read input {name!r} from {path!r}: {exc}") from None
    return inputs


def _run_run(args: argparse.Namespace) -> int:
    done = _execute(args, lambda runnable, inputs: runnable.run(inputs))
    if done is None:
        return EXIT_INVALID
    runnable, outputs = done
    names = [f"{ref.node}.{ref.output}" for ref in runnable.model.outputs]
    arrays = {name: np.asarray(value) for name, value in zip(names, outputs, strict=True)}
    if args.output is not None:
        from trama.serialization import atomic_file

        savez: Any = np.savez  # its stub types **arrays as its own keyword flags
        with atomic_file(args.output) as handle:
            savez(handle, **arrays)
        print(f"wrote {len(arrays)} output(s) to {args.output}")
        return EXIT_OK
    for name, array in arrays.items():
        print(f"{name}: {array.dtype}{list(array.shape)}")
    return EXIT_OK


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


register(Command("schema", "print the JSON Schema of the current format", _no_arguments, _run_schema))
register(
    Command(
        "validate",
        "check documents and list every problem",
        _validate_arguments,
        _run_validate,
        description="Check trama documents: JSON syntax, the JSON Schema (current format), decoding, the "
        "structural rules, and every tensor's data. Prints 'FILE: ok' or one 'FILE: location: message' line "
        "per problem. Exit status 0 when all files are valid, 1 otherwise.",
    )
)
register(Command("ssa", "print a document as SSA text, for review", _file_argument, _run_ssa))
register(Command("info", "summarize a document: nodes, ops, parameter sizes", _info_arguments, _run_info))
register(Command("run", "run a document on a runtime and print or save its outputs", _run_run_arguments, _run_run))
register(
    Command(
        "profile", "run once and show time, parameters and multiply-adds per node", _profile_arguments, _run_profile
    )
)
register(Command("plugins", "list installed plugins, their hooks and load errors", _no_arguments, _run_plugins))
register(
    Command("ops", "list known ops, their signatures and which frameworks implement them", _ops_arguments, _run_ops)
)
