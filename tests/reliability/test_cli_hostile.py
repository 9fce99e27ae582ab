"""The command line on every hostile file of the catalogue: an exit status and one line.

Every command that reads a document (``validate``, ``ssa``, ``info``, ``run``, ``profile``) runs
on every case of :mod:`reliability.hostile_files`, ``run`` also on ``torch:cpu`` and
``jax:cpu`` for the cases aimed at a framework, and ``validate -`` reads each file from standard
input. Then the hostile command lines (:data:`~reliability.hostile_files.FLAG_CASES`): ``--input``
files and ``--output`` targets. Each runs as the installed command does, in a child process
bounded in memory and time (:mod:`reliability.forkrun`: forks of one warm worker, so that the
few hundred runs take seconds). What every run must show:

* no signal, no timeout, no traceback;
* the exit status a correct trama gives (the case says whether its document is valid and
  whether it runs; 1 for a refused file, 2 for a wrong command line);
* a refusal is one line: on stderr for ``ssa``, ``info``, ``run`` and ``profile``; on stdout
  for ``validate``, whose report is its output, one ``FILE: problem`` line per problem;
* nothing a file holds reaches the terminal raw: no control character but newlines in any
  output, so that a name cannot forge a line or drive the terminal.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reliability import hostile_files
from reliability.forkrun import CLI_PRELOAD, FRAMEWORK_PRELOAD, CliJob, run_cli_batch
from reliability.fuzzing import RAW_CONTROL
from reliability.hostile_files import CASES, DOCUMENT_COMMANDS, FLAG_CASES, FlagCase, Hostile
from reliability.isolation import Outcome, run_cli

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork (POSIX)")

FRAMEWORK_RUNTIMES = ("torch:cpu", "jax:cpu")
#: The most bytes a case read from standard input may have (``Hostile.stdin``).
STDIN_SIZE = 256 << 10


def _shown(text: str) -> str:
    """A name as the command line prints it: what is not printable, escaped."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else ascii(char)[1:-1] for char in text)


@dataclass(frozen=True)
class Run:
    """One command on one case: its job and the exit status it must give."""

    case: str
    command: str
    job: CliJob
    status: int
    document: str
    mentions: str | None = None


def _available(needs: str | None) -> bool:
    return hostile_files.available(needs)


def _plan(root: Path) -> list[Run]:
    runs: list[Run] = []
    for case in CASES:
        if not _available(case.needs):
            continue
        folder = root / case.name
        folder.mkdir()
        path = case.build(folder)
        run_args = case.run_args(folder) if case.run_args is not None else []
        for command in DOCUMENT_COMMANDS:
            argv = [command, str(path), *(run_args if command in ("run", "profile") else [])]
            runs.append(
                Run(
                    case.name,
                    command,
                    CliJob(argv, memory_mb=case.memory_mb, timeout_s=case.timeout_s),
                    case.expected_status(command),
                    str(path),
                    case.mentions,
                )
            )
        if case.frameworks:
            for runtime in FRAMEWORK_RUNTIMES:
                argv = ["run", str(path), "--runtime", runtime, *run_args]
                runs.append(
                    Run(
                        case.name,
                        f"run:{runtime}",
                        CliJob(argv, memory_mb=max(case.memory_mb, 4_000), timeout_s=case.timeout_s),
                        case.expected_status("run"),
                        str(path),
                        case.mentions,
                    )
                )
        if case.stdin:
            if not path.is_file() or path.is_symlink() or path.stat().st_size > STDIN_SIZE:
                raise AssertionError(f"{case.name}: stdin=True wants a small regular file, not {path}")
            runs.append(
                Run(
                    case.name,
                    "validate-stdin",
                    CliJob(
                        ["validate", "-"],
                        stdin=str(path),
                        cwd=str(path.parent),
                        memory_mb=case.memory_mb,
                        timeout_s=case.timeout_s,
                    ),
                    case.expected_status("validate"),
                    "<stdin>",
                    case.mentions,
                )
            )
    return runs


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], tuple[Run, Outcome]]]:
    """Every planned run's outcome, by (case, command): all run in one batch of forks."""
    root = tmp_path_factory.mktemp("hostile")
    runs = _plan(root)
    results = run_cli_batch([run.job for run in runs], preload=(*CLI_PRELOAD, *FRAMEWORK_PRELOAD))
    yield {(run.case, run.command): (run, outcome) for run, outcome in zip(runs, results, strict=True)}
    shutil.rmtree(root, ignore_errors=True)


def _labels() -> list[tuple[str, str]]:
    labels = []
    for case in CASES:
        commands = list(DOCUMENT_COMMANDS)
        if case.frameworks:
            commands += [f"run:{runtime}" for runtime in FRAMEWORK_RUNTIMES]
        if case.stdin:
            commands.append("validate-stdin")
        labels += [(case.name, command) for command in commands]
    return labels


def _check_streams(outcome: Outcome, *, status: int, report_on_stdout: bool, prefix: str) -> None:
    """The exit status, and a refusal that is one line (or one line per problem) on the right
    stream; nothing raw in either stream."""
    assert not outcome.crashed, outcome.describe()
    assert not outcome.traceback, outcome.describe()
    assert "Traceback" not in outcome.stdout, outcome.describe()
    assert outcome.returncode == status, outcome.describe()
    for stream in (outcome.stdout, outcome.stderr):
        raw = RAW_CONTROL.search(stream)
        assert raw is None, f"raw {raw.group()!r} in the output\n{outcome.describe()}"
    if status == 0:
        assert outcome.stderr == "", outcome.describe()
        return
    if report_on_stdout:  # validate: one 'FILE: problem' line per problem, nothing else
        assert outcome.stderr == "", outcome.describe()
        lines = outcome.stdout.splitlines()
        assert lines, outcome.describe()
        assert outcome.stdout.endswith("\n"), outcome.describe()
        assert all(line.startswith(f"{prefix}: ") for line in lines), outcome.describe()
    else:
        assert outcome.stdout == "", outcome.describe()
        assert outcome.stderr.endswith("\n"), outcome.describe()
        assert outcome.stderr.count("\n") == 1, outcome.describe()


def _known(outcomes: dict[tuple[str, str], tuple[Run, Outcome]], case: str, command: str) -> tuple[Run, Outcome]:
    if (case, command) not in outcomes:
        pytest.skip("this platform lacks what the case needs (a FIFO, a symbolic link)")
    return outcomes[(case, command)]


@pytest.mark.parametrize(("case", "command"), _labels(), ids=[f"{c}-{m}" for c, m in _labels()])
def test_command_on_hostile_file(case: str, command: str, outcomes: dict[tuple[str, str], tuple[Run, Outcome]]) -> None:
    run, outcome = _known(outcomes, case, command)
    prefix = _shown(run.document)
    _check_streams(outcome, status=run.status, report_on_stdout=command.startswith("validate"), prefix=prefix)
    if run.status != 0 and run.mentions is not None:
        assert re.search(run.mentions, outcome.stdout + outcome.stderr, re.IGNORECASE), outcome.describe()


@pytest.mark.parametrize(
    ("case", "command"),
    [("dev_zero", "validate"), ("op_ansi", "ssa"), ("metadata_ansi", "info"), ("facts_huge", "run")],
)
def test_a_forked_run_is_what_the_installed_command_does(
    case: str, command: str, outcomes: dict[tuple[str, str], tuple[Run, Outcome]]
) -> None:
    """The fork runner stands for the real command: the same run in a fresh interpreter
    (``isolation.run_cli``) gives the same status and output."""
    run, forked = _known(outcomes, case, command)
    real = run_cli(*run.job.argv, memory_mb=run.job.memory_mb, timeout_s=run.job.timeout_s)
    assert (real.returncode, real.stdout, real.stderr) == (forked.returncode, forked.stdout, forked.stderr)


def test_the_catalogue_covers_the_issue() -> None:
    """Every kind of attack the issue lists has at least one case (names are the catalogue's)."""
    names = {case.name for case in CASES}
    for required in (
        "calls_doubling_40",
        "calls_chain_1mb",
        "fifo_external",
        "link_file_out",
        "link_dir_out",
        "link_root",
        "path_nul",
        "path_surrogate",
        "facts_huge",
        "facts_beyond_int64",
        "gru_layers_1e9",
        "arange_huge",
        "full_huge",
        "int64_as_float64",
        "deep_600",
        "deep_1500",
        "schema_heavy_1_6mb",
        "op_newline",
        "op_ansi",
        "data_0xff_long",
        "data_newline_long",
        "data_nul_long",
        "st_offsets_beyond",
        "dev_zero",
        "directory",
        # format 1.3's blocks and classes
        "blocks_bomb_12",
        "block_uses_itself",
        "block_instance_missing_tensor",
        "relative_class_top",
    ):
        assert required in names
    flags = {case.name for case in FLAG_CASES}
    assert {"npy_huge_header", "output_directory", "output_missing_folder"} <= flags
    assert len(names) == len(CASES)
    assert len(flags) == len(FLAG_CASES)


def test_valid_cases_are_valid_documents_when_built(tmp_path: Path) -> None:
    """The cases that say 'valid' are (else a test of them would prove nothing): trama loads
    them in-process. The hostile part of each is in what running them costs, not in the text."""
    import trama

    for case in CASES:
        if not case.valid or not _available(case.needs):
            continue
        folder = tmp_path / case.name
        folder.mkdir()
        trama.load(case.build(folder))


# --- hostile command lines ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def flag_outcomes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[FlagCase, Path, Outcome]]]:
    root = tmp_path_factory.mktemp("flags")
    planned: list[tuple[FlagCase, Path, CliJob]] = []
    for case in FLAG_CASES:
        if not _available(case.needs):
            continue
        folder = root / case.name
        folder.mkdir()
        document = hostile_files._trama_linear(folder)
        argv = case.build(folder, document)
        # 3 GB of address space on top of the worker's: `run` naming an unknown runtime lists the
        # available ones, which imports torch and JAX (about 1.8 GB of address space between
        # them), and a thread started near the limit aborts in glibc instead of raising.
        planned.append((case, folder, CliJob(argv, cwd=str(folder), memory_mb=3_000, timeout_s=60.0)))
    results = run_cli_batch([job for _, _, job in planned])
    yield {case.name: (case, folder, outcome) for (case, folder, _), outcome in zip(planned, results, strict=True)}
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("name", [case.name for case in FLAG_CASES])
def test_hostile_command_line(name: str, flag_outcomes: dict[str, tuple[FlagCase, Path, Outcome]]) -> None:
    if name not in flag_outcomes:
        pytest.skip("this platform lacks what the case needs")
    case, folder, outcome = flag_outcomes[name]
    assert not outcome.crashed, outcome.describe()
    assert not outcome.traceback, outcome.describe()
    assert outcome.returncode == case.status, outcome.describe()
    for stream in (outcome.stdout, outcome.stderr):
        assert RAW_CONTROL.search(stream) is None, outcome.describe()
    if case.status == 2:  # argparse's usage line, then its error line
        assert outcome.stdout == "", outcome.describe()
        assert "error:" in outcome.stderr.splitlines()[-1] or "can be given only once" in outcome.stderr
    elif case.status == 1:
        assert outcome.stdout == "", outcome.describe()
        assert outcome.stderr.endswith("\n"), outcome.describe()
        assert outcome.stderr.count("\n") == 1, outcome.describe()
    else:
        assert outcome.stderr == "", outcome.describe()
        assert outcome.stdout.count("\n") == 1, outcome.describe()
    if case.mentions is not None:
        assert re.search(case.mentions, outcome.stderr, re.IGNORECASE), outcome.describe()
    if case.output_created:
        written = [path for path in folder.iterdir() if path.suffix == ".npz"]
        assert len(written) == 1, sorted(folder.iterdir())
    special = folder / "out.npz"
    if case.name == "output_fifo":
        assert stat.S_ISFIFO(special.lstat().st_mode), "the FIFO named by --output was replaced"
    leftovers = [path.name for path in folder.iterdir() if path.name.startswith(".") and "tmp" in path.name]
    assert leftovers == [], "a failed --output left temporary files behind"


def test_hostile_case_names_match_the_catalogue() -> None:
    """Each case name is a plain identifier (they become test ids and folder names)."""
    for name in [case.name for case in CASES] + [case.name for case in FLAG_CASES]:
        assert re.fullmatch(r"[a-z0-9_]+", name), name
    assert isinstance(hostile_files.by_name("dev_zero"), Hostile)
