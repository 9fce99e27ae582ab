"""The progress line of long loads and dumps (:mod:`trama.format._progress`): drawn on a
terminal for large work, never into a pipe or a file, never when the caller says no, and
erased when the work ends."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import trama
from trama.format import _progress
from trama.format._progress import PROGRESS_THRESHOLD, progress_line


class Terminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_large_work_is_drawn_on_a_terminal_and_erased_at_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr(_progress, "REDRAW_SECONDS", 0.0)
    out = Terminal()
    with progress_line(None, "reading m.trama.json", PROGRESS_THRESHOLD, out) as line:
        assert line.shown
        line.advance(PROGRESS_THRESHOLD // 2)
        assert out.getvalue().endswith("reading m.trama.json: 50 of 100 MB (50%)")
        line.advance(PROGRESS_THRESHOLD)  # more than announced: shown as all of it
        assert out.getvalue().endswith("100 of 100 MB (100%)")
    assert out.getvalue().endswith("\r\x1b[K")


def test_nothing_is_drawn_into_a_pipe_for_small_work_or_when_the_caller_says_no(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr(_progress, "REDRAW_SECONDS", 0.0)
    cases = [
        (None, PROGRESS_THRESHOLD, io.StringIO()),  # not a terminal
        (True, PROGRESS_THRESHOLD, io.StringIO()),  # not a terminal, even when asked
        (None, PROGRESS_THRESHOLD - 1, Terminal()),  # small
        (False, PROGRESS_THRESHOLD, Terminal()),  # the caller says no
    ]
    for setting, total, out in cases:
        with progress_line(setting, "work", total, out) as line:
            line.advance(total)
        assert not line.shown
        assert out.getvalue() == ""
    out = Terminal()
    with progress_line(True, "work", 10, out) as line:  # asked for: drawn whatever the size
        line.advance(5)
    assert "work: 0 of 0 MB (50%)" in out.getvalue()


def test_a_dumb_terminal_gets_no_escape_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "dumb")
    out = Terminal()
    with progress_line(True, "work", 10, out) as line:
        line.advance(5)
    assert out.getvalue() == ""


def test_redraws_are_rate_limited(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm")
    out = Terminal()
    with progress_line(True, "work", 1000, out) as line:
        start = time.monotonic()
        for _ in range(10_000):
            line.advance(0)
        elapsed = time.monotonic() - start
    draws = out.getvalue().count("\r\x1b[Kwork")
    assert 1 <= draws <= 2 + elapsed / _progress.REDRAW_SECONDS


# --- through load, dump and the command line, in a real terminal ---------------------------------

SCRIPT = """
import sys
import numpy as np
import trama
sys.path.insert(0, {tests!r})
from reliability.models import linear_model
model = linear_model(np.ones((512, 512), np.float32))
trama.dump(model, {path!r}, progress={progress})
trama.dump(model, {external!r}, weights="external", progress={progress})
loaded = trama.load({path!r}, progress={progress})
sys.stderr.write("END")
"""
TESTS = str(Path(__file__).resolve().parent)


def _stderr_in_a_terminal(argv: list[str]) -> str:
    """Run ``argv`` with standard error on a pseudo-terminal; what it wrote there."""
    controller, terminal = pty.openpty()
    env = {**os.environ, "TERM": "xterm"}
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=terminal, env=env)
    os.close(terminal)
    chunks = []
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the terminal closed: the process is gone
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=120)
    os.close(controller)
    assert proc.returncode == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode()


def test_load_and_dump_draw_progress_in_a_terminal_when_asked(tmp_path: Path) -> None:
    path, external = tmp_path / "m.trama.json", tmp_path / "e.trama.json"
    code = SCRIPT.format(tests=TESTS, path=str(path), external=str(external), progress=True)
    shown = _stderr_in_a_terminal([sys.executable, "-c", code])
    # 1 MiB of float32: 1.3 MiB as base64. Redraws are rate-limited: the first is at the start.
    assert re.search(r"writing m\.trama\.json: \d+ of 1 MB \(\d+%\)", shown)
    assert re.search(r"writing e\.trama\.json: \d+ of 1 MB \(\d+%\)", shown)
    assert re.search(r"reading m\.trama\.json: \d+ of 1 MB \(\d+%\)", shown)
    assert shown.endswith("\r\x1b[KEND")  # each line erased when its work ended


def test_small_work_and_pipes_stay_silent(tmp_path: Path) -> None:
    path, external = tmp_path / "m.trama.json", tmp_path / "e.trama.json"
    code = SCRIPT.format(tests=TESTS, path=str(path), external=str(external), progress=None)
    assert _stderr_in_a_terminal([sys.executable, "-c", code]) == "END"  # 1 MB: under the threshold
    code = SCRIPT.format(tests=TESTS, path=str(path), external=str(external), progress=True)
    piped = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert piped.stderr == "END"  # asked for, but standard error is not a terminal


def test_the_command_line_shows_progress_on_large_files_unless_quiet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A threshold of one byte stands in for a file of 100 MB (the child reads it from the
    environment through a sitecustomize-free hook: the module constant, patched in a wrapper)."""
    from reliability.models import linear_model

    path = tmp_path / "m.trama.json"
    trama.dump(linear_model(np.ones((600, 600), np.float32)), path)  # read as a large file (1 MiB+)
    wrapper = (
        "import sys\nfrom trama.format import _progress\n_progress.PROGRESS_THRESHOLD = 1\n"
        "from trama.tools.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    )
    shown = _stderr_in_a_terminal([sys.executable, "-c", wrapper, "validate", str(path)])
    assert re.search(r"reading m\.trama\.json: \d+ of 2 MB \(\d+%\)", shown)
    assert re.search(r"checking tensors: \d+ of 1 MB \(\d+%\)", shown)
    quiet = _stderr_in_a_terminal([sys.executable, "-c", wrapper, "validate", "--quiet", str(path)])
    assert "reading" not in quiet
    assert "checking" not in quiet
