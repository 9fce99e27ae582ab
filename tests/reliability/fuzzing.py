"""What the two fuzzers share: JSON trees that can say what ``json`` cannot, generic mutations
of them, the verdict on one case, and the command line that runs many cases and reports.

**Trees.** A document is mutated as the Python value ``json.loads`` gives, plus two markers for
what a hostile text holds and a Python value cannot: :class:`Raw` (text written as it is: ``1e400``,
``NaN``, a 5000-digit number, brackets nested a million deep) and :class:`Pairs` (an object that
repeats a key). :func:`render` writes a tree back as JSON text, without recursion.

**Verdicts.** Each case ends ``accepted`` (every stage passed), ``refused`` (a stage raised a
:class:`~trama.errors.TramaError` with a message: trama saw the problem and said so) or
``other`` (anything else: another exception, an empty message, a crash, a hang, a silently
wrong value). The fuzz tests assert that no case is ``other``.

**Running.** :func:`main` runs cases ``0 .. N-1`` of a seed in forked children of one process
(:func:`reliability.forkrun.run_cases`: a crash or a hang costs one case, never the run), then
prints the counts and every ``other`` with the command that replays it alone. Case *i* of seed
*s* is the same mutation on every machine: its random stream is seeded with ``"s/i"``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "EXTREME_NUMBERS",
    "HOSTILE_STRINGS",
    "RAW_CONTROL",
    "VALUES",
    "Pairs",
    "Raw",
    "Slot",
    "Verdict",
    "deep",
    "describe_others",
    "fuzz_cases",
    "fuzz_main",
    "fuzz_seed",
    "mutate_json",
    "mutate_text",
    "random_string",
    "render",
    "slots",
    "verdict_of",
]


@dataclass(frozen=True)
class Raw:
    """JSON text written as it is (a literal no Python value renders)."""

    text: str


class Pairs(list[tuple[str, Any]]):
    """A JSON object as its list of members: a key may repeat."""


# --- rendering ----------------------------------------------------------------------------------


def render(value: Any, *, ascii_only: bool = True) -> bytes:
    """``value`` as JSON text, UTF-8 (lone surrogates as the bytes ``surrogatepass`` gives when
    not ``ascii_only``; as ``\\uXXXX`` escapes otherwise). Iterative: a tree of any depth."""
    out: list[str] = []
    # A stack of things to emit: values, or literal text (str in a 1-tuple).
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if type(item) is tuple:
            out.append(item[0])
            continue
        if isinstance(item, Raw):
            out.append(item.text)
        elif isinstance(item, (dict, Pairs)):
            members = list(item.items()) if isinstance(item, dict) else list(item)
            stack.append(("}",))
            for k, (key, member) in reversed(list(enumerate(members))):
                stack.append(member)
                stack.append((_string(str(key), ascii_only) + ": ",))
                if k:
                    stack.append((", ",))
            stack.append(("{",))
        elif isinstance(item, list):
            stack.append(("]",))
            for k, member in reversed(list(enumerate(item))):
                stack.append(member)
                if k:
                    stack.append((", ",))
            stack.append(("[",))
        elif isinstance(item, str):
            out.append(_string(item, ascii_only))
        elif isinstance(item, bool) or item is None:
            out.append(json.dumps(item))
        elif isinstance(item, int):
            out.append(_integer(item))
        elif isinstance(item, float):
            out.append(json.dumps(item))  # inf and nan come out as Infinity / NaN: hostile too
        else:
            raise TypeError(f"cannot render {type(item).__name__}")
    return "".join(out).encode("utf-8", "surrogatepass")


def _string(text: str, ascii_only: bool) -> str:
    return json.dumps(text, ensure_ascii=ascii_only)


def _integer(value: int) -> str:
    """An int's digits, however many (``str`` refuses more than 4300 digits)."""
    try:
        return str(value)
    except ValueError:  # past sys.get_int_max_str_digits(): lift the limit for this one
        limit = sys.get_int_max_str_digits()
        sys.set_int_max_str_digits(0)
        try:
            return str(value)
        finally:
            sys.set_int_max_str_digits(limit)


# --- walking ------------------------------------------------------------------------------------


@dataclass
class Slot:
    """A place in a tree: ``container[key]`` (a Pairs position is its index), and the path of
    keys from the root, for descriptions."""

    container: Any
    key: Any
    path: tuple[Any, ...]

    @property
    def value(self) -> Any:
        if isinstance(self.container, Pairs):
            return self.container[self.key][1]
        return self.container[self.key]

    def set(self, value: Any) -> None:
        if isinstance(self.container, Pairs):
            self.container[self.key] = (self.container[self.key][0], value)
        else:
            self.container[self.key] = value

    def delete(self) -> None:
        del self.container[self.key]

    def where(self) -> str:
        return "/" + "/".join(str(part) for part in self.path)


def slots(root: dict[str, Any]) -> Iterator[Slot]:
    """Every place in the tree under ``root["doc"]`` (the wrapper lets the top be replaced),
    parents before children, without recursion."""
    stack = [Slot(root, "doc", ())]
    while stack:
        slot = stack.pop()
        yield slot
        value = slot.value
        if isinstance(value, dict):
            stack.extend(Slot(value, key, (*slot.path, key)) for key in reversed(list(value)))
        elif isinstance(value, Pairs):
            stack.extend(Slot(value, k, (*slot.path, value[k][0])) for k in reversed(range(len(value))))
        elif isinstance(value, list):
            stack.extend(Slot(value, k, (*slot.path, k)) for k in reversed(range(len(value))))


# --- generic mutations ----------------------------------------------------------------------------

#: Numbers at and past every edge: int64 and double limits, the digits Python refuses to parse,
#: literals JSON forbids, and the small cases (0, -1, -0).
EXTREME_NUMBERS: tuple[Any, ...] = (
    0,
    -1,
    1,
    2,
    -0.0,
    0.5,
    2**31,
    2**32,
    2**53 + 1,
    2**62,
    2**63 - 1,
    2**63,
    2**64,
    -(2**63) - 1,
    10**30,
    10**400,
    1e308,
    -1e308,
    5e-324,
    Raw("1e400"),
    Raw("-1e400"),
    Raw("1e-400"),
    Raw("1E+309"),
    Raw("NaN"),
    Raw("Infinity"),
    Raw("-Infinity"),
    Raw("9" * 5000),
    Raw("-" + "9" * 4301),
    Raw("1e99999999999999999999"),
    Raw("0.0000000000000000000000000000000000001e-99999"),
    Raw("-0"),
    Raw("01"),
    Raw("1."),
    Raw(".5"),
    Raw("+1"),
    Raw("0x10"),
    True,
    False,
    None,
    "1",
    [],
)

#: Strings that forge, escape, break or overflow: control characters, bidirectional overrides,
#: a byte order mark, lone surrogates, NULs, names of other things in the format.
HOSTILE_STRINGS: tuple[str, ...] = (
    "",
    " ",
    "x",
    "y",
    "%input",
    "root",
    "a.b",
    "a..b",
    ".a",
    "a.",
    "x\ny",
    "\n%forged = relu(%x)",
    "\x1b[2J\x1b[31m",
    "\x1b]0;title\x07",
    "\u202eevil",
    "\ufeff",
    "\x00",
    "a\x00b",
    "\ud800",
    "\udc80",
    "\ud83d\ude00",
    "é",
    "e\u0301",
    "\u2028",
    "\x85",
    "\\",
    '"',
    "../x",
    "/etc/passwd",
    "k" * 300,
    "k" * 70_000,
    "Linear",
    "Graph",
    "Sequential",
    "relu",
    "calls",
    "checksum",
    "external",
    "__metadata__",
    "float32",
    "int64",
    "%x",
    "%",
    "use",
    "ref",
    ".Rel",
)

#: Values of every JSON kind, and the small objects of the format, to retype a place with.
VALUES: tuple[Any, ...] = (
    None,
    True,
    False,
    0,
    1,
    -1,
    2.5,
    "",
    "x",
    "%input",
    [],
    {},
    [1, 2],
    ["x"],
    [[1], [2]],
    {"a": 1},
    {"node": "%input", "output": "x"},
    {"name": "x"},
    {"value": 1, "learnable": False},
    {"dtype": "float32", "shape": [1], "data": "AAAAAA=="},
    {"dtype": "float32", "shape": [], "data": "AACAPw=="},
    {"dtype": "bool", "shape": [2], "data": "AQI="},
    {"dtype": "float32", "shape": [2], "external": {"path": "w.safetensors", "key": "w", "checksum": "xxh3-64:0"}},
    # format 1.3's: a reference string, a table reference, tensors, a block instance
    "%x",
    "a.y",
    {"ref": "x"},
    {"shape": [1], "data": "AAAAAA=="},
    {"shape": [2], "checksum": "0" * 16},
    {"shape": [2]},
    {"name": "x", "use": "x", "in": "%x"},
)


def random_string(rng: random.Random) -> str:
    """A short string from every corner of Unicode: ASCII, controls, surrogates, astral."""
    pieces = []
    for _ in range(rng.randint(0, 12)):
        kind = rng.random()
        if kind < 0.4:
            pieces.append(chr(rng.randint(0x20, 0x7E)))
        elif kind < 0.55:
            pieces.append(chr(rng.randint(0, 0x1F)))
        elif kind < 0.65:
            pieces.append(chr(rng.randint(0xD800, 0xDFFF)))
        elif kind < 0.8:
            pieces.append(chr(rng.randint(0x80, 0xFFFF)))
        else:
            pieces.append(chr(rng.randint(0x10000, 0x10FFFF)))
    return "".join(pieces)


def deep(rng: random.Random) -> Raw:
    """A list or object nested past every limit (or just up to one)."""
    depth = rng.choice((63, 64, 65, 99, 100, 101, 256, 257, 1000, 20_000, 200_000))
    if rng.random() < 0.5:
        return Raw("[" * depth + rng.choice(("1", "", '"x"')) + "]" * depth)
    return Raw('{"a": ' * depth + "1" + "}" * depth)


def _pick(rng: random.Random, places: list[Slot], test: Callable[[Slot], bool]) -> Slot | None:
    chosen = [slot for slot in places if test(slot)]
    return rng.choice(chosen) if chosen else None


def mutate_json(root: dict[str, Any], rng: random.Random) -> str:
    """One generic mutation of the tree under ``root["doc"]``, in place; what was done, in words.
    Knows nothing of trama: deletes, duplicates, retypes, renames, nests, garbles a string, or
    sets a number to an extreme."""
    places = list(slots(root))
    inner = places[1:] or places
    kind = rng.choice(("delete", "duplicate", "retype", "rename", "nest", "string", "number", "number", "swap"))
    if kind == "delete":
        slot = _pick(rng, inner, lambda s: True)
        if slot is not None:
            slot.delete()
            return f"delete {slot.where()}"
    if kind == "duplicate":
        slot = _pick(rng, places, lambda s: isinstance(s.value, dict) and bool(s.value))
        if slot is not None:
            members = Pairs(slot.value.items())
            key, value = rng.choice(members)
            # A copy of the value from VALUES: a later mutation of the case changes it in place, and
            # the table is shared by every case a forked child runs.
            fresh = json.loads(json.dumps(rng.choice(VALUES)))
            members.insert(rng.randint(0, len(members)), (key, rng.choice((value, fresh))))
            slot.set(members)
            return f"repeat key {key!a} in {slot.where()}"
    if kind == "retype":
        slot = rng.choice(inner)
        slot.set(json.loads(json.dumps(rng.choice(VALUES))) if rng.random() < 0.9 else rng.choice(EXTREME_NUMBERS))
        return f"retype {slot.where()}"
    if kind == "rename":
        slot = _pick(rng, inner, lambda s: isinstance(s.container, dict) and s.container is not root)
        if slot is not None:
            keys = [s.key for s in places if isinstance(s.key, str)]
            new = rng.choice((rng.choice(HOSTILE_STRINGS), rng.choice(keys), random_string(rng), str(slot.key) + "_"))
            value = slot.value
            slot.delete()
            slot.container[new] = value
            return f"rename {slot.where()} to {new[:40]!a}"
    if kind == "nest":
        slot = rng.choice(inner)
        slot.set(deep(rng))
        return f"nest deep at {slot.where()}"
    if kind == "string":
        slot = _pick(rng, inner, lambda s: isinstance(s.value, str))
        if slot is not None:
            old: str = slot.value
            if rng.random() < 0.5:
                at = rng.randint(0, len(old))
                slot.set(old[:at] + rng.choice((rng.choice(HOSTILE_STRINGS), random_string(rng))) + old[at:])
            else:
                slot.set(rng.choice((rng.choice(HOSTILE_STRINGS), random_string(rng))))
            return f"garble string {slot.where()}"
    if kind == "number":
        slot = _pick(rng, inner, lambda s: type(s.value) in (int, float))
        if slot is not None:
            slot.set(rng.choice(EXTREME_NUMBERS))
            return f"extreme number at {slot.where()}"
    if kind == "swap":
        a, b = rng.choice(inner), rng.choice(inner)
        if a.path[: len(b.path)] != b.path and b.path[: len(a.path)] != a.path:  # neither inside the other
            va, vb = a.value, b.value
            a.set(vb)
            b.set(va)
            return f"swap {a.where()} and {b.where()}"
    slot = rng.choice(inner)
    slot.set(None)
    return f"null at {slot.where()}"


# --- text mutations --------------------------------------------------------------------------------

_INTERESTING_BYTES = (
    b"\x00",
    b"\xff",
    b"\n",
    b'"',
    b"\\",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"\x80",
    b"\xc0",
    b"\xed",
)
_INSERTS = (
    b"\xef\xbb\xbf",
    b"\x00",
    b"\xff\xfe",
    b"\\u0000",
    b"\\ud800",
    b"]]]]",
    b"{{{{",
    b" " * 10_000,
    b"\xed\xa0\x80",
    b'"a": 1, ',
    b"NaN",
    b"/*",
)


def mutate_text(text: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One byte-level mutation of a document's text: cut it, flip bytes, insert bytes, repeat a
    slice, swap a number for a huge one, or re-encode the whole."""
    if not text:
        return b"{", "empty -> {"
    kind = rng.choice(("cut", "flip", "insert", "repeat", "number", "encoding"))
    at = rng.randrange(len(text))
    if kind == "cut":
        return text[:at], f"cut at byte {at}"
    if kind == "flip":
        data = bytearray(text)
        for _ in range(rng.randint(1, 4)):
            position = rng.randrange(len(data))
            data[position : position + 1] = rng.choice((*_INTERESTING_BYTES, bytes([rng.randrange(256)])))
        return bytes(data), "flip bytes"
    if kind == "insert":
        return text[:at] + rng.choice(_INSERTS) + text[at:], f"insert bytes at {at}"
    if kind == "repeat":
        end = min(len(text), at + rng.randint(1, 400))
        where = rng.randrange(len(text))
        return text[:where] + text[at:end] + text[where:], f"repeat bytes {at}..{end}"
    if kind == "number":
        match = next(re.compile(rb"-?\d+(\.\d+)?([eE][-+]?\d+)?").finditer(text, at), None)
        if match is not None:
            huge = rng.choice((b"9" * 5000, b"1e400", b"-1E+309", b"1" + b"0" * 30, b"NaN"))
            return text[: match.start()] + huge + text[match.end() :], f"number at byte {match.start()} -> huge"
    if rng.random() < 0.5:
        return b"\xef\xbb\xbf" + text, "byte order mark"
    return text.decode("utf-8", "surrogatepass").encode("utf-16", "surrogatepass"), "utf-16"


# --- verdicts -------------------------------------------------------------------------------------

#: A character no listing may print raw (a control character but the newline and the tab, C1
#: controls, bidirectional overrides, a byte order mark): a name would forge the review view.
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


@dataclass
class Verdict:
    """How a case ended: ``outcome`` (accepted / refused / other), the ``stage`` that decided it,
    and a ``detail`` (the error line, or what went wrong)."""

    outcome: str
    stage: str
    detail: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"outcome": self.outcome, "stage": self.stage, "detail": self.detail[:600]}


def verdict_of(error: BaseException, stage: str) -> Verdict:
    """A trama error with a message is a refusal; anything else (with where it came from) is
    ``other``."""
    from trama.errors import TramaError

    if isinstance(error, TramaError) and str(error).strip():
        return Verdict("refused", stage, str(error)[:300])
    frames = traceback.extract_tb(error.__traceback__)
    inside = [f for f in frames if "/trama" in f.filename.replace("\\", "/")] or frames
    origin = f"{os.path.basename(inside[-1].filename)}:{inside[-1].lineno}" if inside else "?"
    kind = type(error).__name__ + (" (empty message)" if isinstance(error, TramaError) else "")
    return Verdict("other", stage, f"{kind} at {origin}: {str(error)[:300]}")


# --- the command line -------------------------------------------------------------------------------


def fuzz_main(
    name: str,
    argv: list[str] | None,
    *,
    prepare: Callable[[argparse.Namespace], Callable[[int], dict[str, Any]]],
    describe: Callable[[argparse.Namespace, int], str],
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
    cleanup: Callable[[], None] | None = None,
) -> int:
    """``python -m reliability.NAME``: run cases and report. ``prepare(args)`` builds what the
    cases need (seed documents) and returns the function of one case; ``describe(args, i)``
    replays case *i* in this process, printing what it did, for ``--case``; ``cleanup()``
    removes what ``prepare`` wrote, after a run."""
    parser = argparse.ArgumentParser(prog=f"python -m reliability.{name}", description=__doc__)
    parser.add_argument("--seed", type=int, default=0, help="the seed of the random streams (default 0)")
    parser.add_argument("--cases", type=int, default=2_000, help="how many cases to run (default 2000)")
    parser.add_argument("--first", type=int, default=0, help="the index of the first case (default 0)")
    parser.add_argument("--case", type=int, help="replay one case in this process and show what it does")
    parser.add_argument("--json", action="store_true", help="print the counts and the others as JSON")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds a case may take (default 20)")
    parser.add_argument("--memory", type=int, default=3_000, help="MB a case may add (default 3000)")
    parser.add_argument("--progress", action="store_true", help="print a dot per 100 cases on stderr")
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args(argv)
    if args.case is not None:  # its files are kept, to look at
        print(describe(args, args.case))
        return 0
    try:
        return _run_and_report(name, args, prepare(args))
    finally:
        if cleanup is not None:
            cleanup()


def _run_and_report(name: str, args: argparse.Namespace, case: Callable[[int], dict[str, Any]]) -> int:
    from reliability.forkrun import run_cases

    started = time.monotonic()
    done = 0

    def progress(index: int, result: dict[str, Any]) -> None:
        nonlocal done
        done += 1
        if args.progress and done % 100 == 0:
            print(".", end="" if done % 5000 else "\n", file=sys.stderr, flush=True)

    results = run_cases(
        case,
        range(args.first, args.first + args.cases),
        case_timeout_s=args.timeout,
        memory_mb=args.memory,
        on_result=progress,
    )
    seconds = time.monotonic() - started
    counts = Counter(result["outcome"] for result in results.values())
    stages = Counter(f"{result['outcome']}@{result['stage']}" for result in results.values())
    others = {index: result for index, result in sorted(results.items()) if result["outcome"] == "other"}
    report = {
        "fuzz": name,
        "seed": args.seed,
        "first": args.first,
        "cases": len(results),
        "seconds": round(seconds, 1),
        "accepted": counts["accepted"],
        "refused": counts["refused"],
        "other": counts["other"],
        "stages": dict(sorted(stages.items())),
        "others": {str(index): result for index, result in others.items()},
    }
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(
        f"{name}: seed {args.seed}, cases {args.first}..{args.first + len(results) - 1}, {seconds:.1f} s: "
        f"accepted {counts['accepted']}, refused {counts['refused']}, other {counts['other']}"
    )
    for stage, count in sorted(stages.items()):
        print(f"  {stage:40} {count}")
    for index, result in others.items():
        print(f"other: case {index} ({result.get('seed', '')}) {result['stage']}: {result['detail']}")
        print(f"       mutations: {'; '.join(result.get('mutations', []))}")
        print(f"       replay: python -m reliability.{name} --seed {args.seed} --case {index}")
    return 0


def describe_others(module: str, report: dict[str, Any]) -> str:
    """Every ``other`` of a :func:`fuzz_main` JSON report, with the command that replays it."""
    lines = [f"{report['other']} case(s) neither accepted nor refused with a trama error:"]
    for index, result in report["others"].items():
        lines.append(f"  case {index} ({result.get('seed', '')}) at {result['stage']}: {result['detail']}")
        lines.append(f"    mutations: {'; '.join(result.get('mutations', []))}")
        lines.append(f"    replay: cd tests && python -m reliability.{module} --seed {report['seed']} --case {index}")
    return "\n".join(lines)


def fuzz_cases(default: int) -> int:
    """The number of cases a fuzz test runs: ``TRAMA_FUZZ_CASES`` when set, else ``default``."""
    return int(os.environ.get("TRAMA_FUZZ_CASES", default))


def fuzz_seed() -> int:
    """The seed a fuzz test runs: ``TRAMA_FUZZ_SEED`` when set, else 0."""
    return int(os.environ.get("TRAMA_FUZZ_SEED", 0))
