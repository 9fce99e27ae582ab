"""Reading under memory pressure: a trama error, never a signal (an audit's finding).

A document with one 300 MiB metadata string, read under an address-space limit (``RLIMIT_AS``,
as :func:`reliability.isolation.run_isolated` sets), killed ``trama.load`` with SIGSEGV, and
``trama info``/``trama ssa`` on a 1.1 GB file did the same. msgspec, which the typed reader
parses with, does not check two of its allocations: a decoded string's (``PyUnicode_New``,
whose result it copies into unchecked) and, in ``encode``, its output buffer's growth (a failed
``_PyBytes_Resize`` leaves it releasing a NULL buffer). Under lighter pressure the failure was a
raw ``MemoryError`` with a traceback. Now the typed reader is given a text only where all the
memory its decoding may take can be had (:mod:`trama.format._memory`), it counts colons with
``encode_into`` (which raises), and a ``MemoryError`` while reading is a trama error.

The child below lowers its own soft limit step by step, each step some headroom above what it
already uses, and reads a document holding a 64 MiB string at each: before the fix, the lowest
steps were a raw ``MemoryError`` and the next ones a SIGSEGV. A signal ends the child, which the
test sees; anything but a model or a one-line trama error fails it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import trama
from trama.format import _typed, _typed_nested
from trama.format._jsontext import lift_text
from trama.format._typed import decode_typed
from trama.format._typed_nested import decode_nested

from .isolation import run_isolated
from .models import linear_model

#: The string's size, and the headroom (beyond what the child uses) of each step, in MiB.
STRING_MIB = 32
STEPS_MIB = (16, 40, 64, 88, 224)
#: The formats read: the nested one ``dump`` writes (read fast by ``_typed_nested``) and the flat
#: one every trama still reads (read fast by ``_typed``).
FORMATS = ("1.3", "1.2")


def document_with_a_long_string(path: Path, mib: int, format_version: str = "1.3") -> None:
    """A valid document whose metadata holds a string of ``mib`` MiB, written a MiB at a time."""
    model = linear_model(np.ones((2, 3), dtype=np.float32))
    model.metadata["long"] = "@"
    before, after = trama.dumps(model, format_version=format_version).encode().split(b'"@"')
    block = b"a" * (1 << 20)
    with path.open("wb") as handle:
        handle.write(before + b'"')
        for _ in range(mib):
            handle.write(block)
        handle.write(b'"' + after)


CHILD = """
import contextlib, io, json, resource, sys
import trama
from trama.tools.cli import main

path, steps = sys.argv[1], json.loads(sys.argv[2])
_, hard = resource.getrlimit(resource.RLIMIT_AS)

def used():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * resource.getpagesize()

def bounded(extra_mib, call):
    resource.setrlimit(resource.RLIMIT_AS, (used() + (extra_mib << 20), hard))
    try:
        return call()
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))

def load():
    try:
        model = trama.load(path)
    except trama.TramaError as exc:
        return "error: " + str(exc)
    except BaseException as exc:
        return "other: " + type(exc).__name__
    return "loaded " + str(len(model.metadata["long"]))

def command(*args):
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(list(args))
    except BaseException as exc:
        return ["other: " + type(exc).__name__, out.getvalue(), err.getvalue()]
    return [status, out.getvalue(), err.getvalue()]

results = []
for extra in steps:
    results.append({"extra": extra, "load": bounded(extra, load)})
    for name in ("info", "validate"):
        results[-1][name] = bounded(extra, lambda: command(name, path))
print(json.dumps(results))
"""


@pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")
@pytest.mark.parametrize("format_version", FORMATS)
def test_reading_under_memory_pressure_is_a_trama_error_never_a_signal(tmp_path: Path, format_version: str) -> None:
    path = tmp_path / "long.trama.json"
    document_with_a_long_string(path, STRING_MIB, format_version)
    code = f"import sys\nsys.argv[1:] = [{str(path)!r}, {json.dumps(STEPS_MIB)!r}]\n" + CHILD
    outcome = run_isolated(code, memory_mb=16_000, timeout_s=180)
    assert not outcome.crashed, outcome.describe()  # a SIGSEGV ends the child here
    assert outcome.returncode == 0, outcome.describe()
    assert not outcome.traceback, outcome.describe()
    results = json.loads(outcome.stdout)
    assert [result["extra"] for result in results] == list(STEPS_MIB)
    for result in results:
        loaded = result["load"]
        assert loaded == f"loaded {STRING_MIB << 20}" or loaded.startswith("error: not enough memory"), result
        for name in ("info", "validate"):
            status, out, err = result[name]
            assert status in (0, 1), result
            if status == 1:
                stream = out if name == "validate" else err
                assert "not enough memory" in stream, result
                assert len(stream.splitlines()) == 1, result
                assert "Traceback" not in out + err, result
    # The pressure was real: the lowest step cannot read the document, the highest can.
    assert results[0]["load"].startswith("error: not enough memory"), results[0]
    assert results[-1]["load"] == f"loaded {STRING_MIB << 20}", results[-1]


def _read_fast(format_version: str, lifted: object) -> trama.Model | None:
    """The fast reader of ``format_version``'s model of ``lifted``, or ``None`` where it leaves
    the text to the careful reader."""
    if format_version == "1.2":
        typed = decode_typed(lifted, None)  # type: ignore[arg-type]
        return None if typed is None else typed[0]
    return decode_nested(lifted, None)  # type: ignore[arg-type]


@pytest.mark.parametrize("format_version", FORMATS)
def test_the_typed_reader_asks_first_for_what_decoding_may_take(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, format_version: str
) -> None:
    """Where allocations may fail, the typed reader (of either format) asks for all the memory
    decoding may take, elsewhere for its largest allocation only; refused, it leaves the text to
    the careful reader."""
    reader = _typed if format_version == "1.2" else _typed_nested
    path = tmp_path / "long.trama.json"
    document_with_a_long_string(path, 1, format_version)
    lifted = lift_text(path.read_bytes(), None, decode=True)
    size = len(lifted.text)
    asked: list[int] = []

    def refuse(nbytes: int) -> bool:
        asked.append(nbytes)
        return False

    monkeypatch.setattr(reader, "can_reserve", refuse)
    for may_fail, expected in ((True, _typed.MEMORY_PER_BYTE * size), (False, size)):
        monkeypatch.setattr(reader, "allocations_may_fail", lambda may_fail=may_fail: may_fail)
        assert _read_fast(format_version, lifted) is None
        assert asked.pop() == expected
        assert len(trama.load(path).metadata["long"]) == 1 << 20  # read the careful way
    monkeypatch.setattr(reader, "can_reserve", lambda nbytes: True)
    typed = _read_fast(format_version, lifted)
    assert typed is not None
    assert len(typed.metadata["long"]) == 1 << 20


def test_a_command_that_runs_out_of_memory_says_so_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command line's safety net: a ``MemoryError`` outside the readers (here in rendering a
    summary) is one line on standard error and exit status 1, not a traceback."""
    from trama.tools import cli

    path = tmp_path / "small.trama.json"
    trama.dump(linear_model(np.ones((2, 3), dtype=np.float32)), path)

    def exhausted(*args: object, **kwargs: object) -> None:
        raise MemoryError

    monkeypatch.setattr(cli, "summarize", exhausted)
    assert cli.main(["info", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("trama info: not enough memory to finish the command")
    assert len(err.splitlines()) == 1
