"""The ``trama`` command follows the conventions users know from other tools: ``-`` reads the
document from standard input, ``--json`` gives the data behind a listing in a documented shape,
``trama ops`` fits the terminal, ``trama runtimes`` says what can run here, and names that the
output encoding cannot hold are escaped instead of crashing the listing."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import importlib_metadata
import numpy as np
import pytest
import test_cli
from test_cli import toy_mlp
from test_plugins import FakeEntryPoint, acme_plugin
from test_runtime import FakeRuntime, mlp_model

import trama
from trama.execution import Runtime
from trama.extension import PluginHost, PluginLoadWarning, hookimpl, plugin_host, reset_plugins
from trama.format import OpSpec, ParameterSchema
from trama.tools import cli, main, to_ssa

BIN = Path(sys.executable).parent
CHUNK = 1 << 20  # how much the CLI reads from standard input at a time


#: The same valid document on disk as test_cli's, by the same fixture name.
good = test_cli.good


@pytest.fixture
def stdin(monkeypatch: pytest.MonkeyPatch) -> Callable[[bytes], None]:
    """Replace standard input by the given bytes."""

    def feed(data: bytes) -> None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))

    return feed


@pytest.fixture
def install() -> Iterator[Callable[..., PluginHost]]:
    """Make a host of the given entry points the process-wide one for the test."""

    def use(*entry_points: Any, include_core: bool = True) -> PluginHost:
        host = PluginHost(list(entry_points), include_core=include_core)
        reset_plugins(host)
        return host

    yield use
    reset_plugins()


def broken_refs(path: Path) -> Path:
    """A copy of the document at ``path``, in the flat form (format 1.2, whose nodes are listed
    by id), with two broken references, beside it."""
    doc = json.loads(trama.dumps(trama.load(path), format_version="1.2"))
    doc["nodes"][2]["inputs"]["x"] = {"node": "root.nowhere", "output": "y"}
    doc["nodes"][3]["inputs"]["x"] = {"node": "root.layers_0", "output": "nope"}
    broken = path.with_name("refs.trama.json")
    broken.write_text(json.dumps(doc, indent=1))
    return broken


# --- '-' reads standard input ---------------------------------------------------------------


def test_validate_reads_stdin(good: Path, stdin: Callable[[bytes], None], capsys: Any) -> None:
    stdin(good.read_bytes())
    assert main(["validate", "-"]) == 0
    assert capsys.readouterr().out == "<stdin>: ok\n"


@pytest.mark.parametrize("command", ["ssa", "info"])
def test_ssa_and_info_read_stdin_and_print_what_they_print_for_the_file(
    command: str, good: Path, stdin: Callable[[bytes], None], capsys: Any
) -> None:
    assert main([command, str(good)]) == 0
    from_file = capsys.readouterr().out
    stdin(good.read_bytes())
    assert main([command, "-"]) == 0
    assert capsys.readouterr().out == from_file
    if command == "ssa":
        assert from_file == to_ssa(trama.load(good))


def test_stdin_among_files_is_named_stdin(
    good: Path, tmp_path: Path, stdin: Callable[[bytes], None], capsys: Any
) -> None:
    stdin(b'{"format_version": "1.0", "nodes": [')
    assert main(["validate", str(good), "-", str(good)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{good}: ok",
        "<stdin>: line 1 column 37: Expecting value",
        f"{good}: ok",
    ]


def test_stdin_can_be_given_once(stdin: Callable[[bytes], None], capsys: Any) -> None:
    stdin(b"{}")
    assert main(["validate", "-", "-"]) == 2
    assert "can be given only once" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["ssa", "info"])
def test_bad_stdin_is_one_line_naming_stdin(
    command: str, good: Path, stdin: Callable[[bytes], None], capsys: Any
) -> None:
    stdin(b'{"format_version": "1.0", "nodes": [')
    assert main([command, "-"]) == 1
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "<stdin>: line 1 column 37: Expecting value\n")

    stdin(broken_refs(good).read_bytes())
    assert main([command, "-"]) == 1
    assert capsys.readouterr().err == (
        "<stdin>: /nodes/2/inputs/x (node 'root.layers_1'): refers to unknown node 'root.nowhere' "
        "(and 1 more: run 'trama validate -' on it)\n"
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00", "line 1 column 1: the file is not UTF-8 text"),
        (b"[1, 2]", "a trama document is a JSON object, got an array"),
        (b"", "line 1 column 1: Expecting value"),
    ],
)
def test_unparsable_stdin_gives_one_line(
    content: bytes, message: str, stdin: Callable[[bytes], None], capsys: Any
) -> None:
    stdin(content)
    assert main(["validate", "-"]) == 1
    assert capsys.readouterr().out == f"<stdin>: {message}\n"


def test_a_file_called_dash_is_dot_slash_dash(
    good: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    (tmp_path / "-").write_bytes(good.read_bytes())
    monkeypatch.chdir(tmp_path)
    unread = Endless(b"", b"x")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(unread)))
    assert main(["validate", "./-"]) == 0
    assert capsys.readouterr().out == "-: ok\n"
    assert unread.served == 0


def test_no_stdin_at_all_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.setattr(sys, "stdin", None)
    assert main(["info", "-"]) == 1
    assert capsys.readouterr().err == "<stdin>: there is no standard input to read the document from\n"


class Endless(io.RawIOBase):
    """A stream that serves ``head`` and then ``fill`` for ever, counting what it served. (For
    ever is 64 MiB: a reader that does not stop then fails its test instead of the machine.)"""

    def __init__(self, head: bytes, fill: bytes) -> None:
        self._pending = head
        self._fill = fill
        self.served = 0
        self._cap = 64 * CHUNK

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        size = min(len(buffer), self._cap - self.served)
        data = self._pending[:size]
        self._pending = self._pending[size:]
        data += self._fill * ((size - len(data)) // len(self._fill))
        buffer[: len(data)] = data
        self.served += len(data)
        return len(data)


@pytest.fixture
def endless_stdin(monkeypatch: pytest.MonkeyPatch) -> Callable[[bytes, bytes], Endless]:
    def use(head: bytes, fill: bytes) -> Endless:
        raw = Endless(head, fill)
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(raw)))
        return raw

    return use


def test_binary_garbage_on_stdin_is_not_read_past_the_first_piece(
    endless_stdin: Callable[[bytes, bytes], Endless], capsys: Any
) -> None:
    raw = endless_stdin(b'{"nodes": "', b"\xff\xfe")
    assert main(["validate", "-"]) == 1
    assert capsys.readouterr().out == "<stdin>: line 1 column 12: the file is not UTF-8 text\n"
    assert raw.served <= 2 * CHUNK


def test_text_that_is_no_document_is_not_read_past_the_first_piece(
    endless_stdin: Callable[[bytes, bytes], Endless], capsys: Any
) -> None:
    raw = endless_stdin(b"\n\n  ", b"y\n")  # `yes | trama validate -`, after some blank space
    assert main(["validate", "-"]) == 1
    assert capsys.readouterr().out == (
        "<stdin>: line 3 column 3: a trama document is a JSON object, but standard input starts with 'y'\n"
    )
    assert raw.served <= 2 * CHUNK


def test_stdin_is_read_no_further_than_the_limit(
    endless_stdin: Callable[[bytes, bytes], Endless], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setattr(cli, "STDIN_LIMIT", 3 * CHUNK)
    raw = endless_stdin(b"{", b" ")  # a document that never ends
    assert main(["info", "-"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("<stdin>: standard input goes on past 3,145,728 bytes; save the document to a file")
    assert len(err.splitlines()) == 1
    assert raw.served <= 4 * CHUNK + io.DEFAULT_BUFFER_SIZE


def test_external_weights_of_a_document_on_stdin_are_found_in_the_current_directory(
    tmp_path: Path, stdin: Callable[[bytes], None], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    path = folder / "ext.trama.json"
    for version in ("1.2", "1.3"):
        trama.dump(toy_mlp(), path, weights="external", format_version=version)
        text = path.read_bytes()

        monkeypatch.chdir(folder)
        stdin(text)
        assert main(["validate", "-"]) == 0
        assert capsys.readouterr().out == "<stdin>: ok\n"

        monkeypatch.chdir(tmp_path)  # the weights are not here
        stdin(text)
        assert main(["validate", "-"]) == 1
        out = capsys.readouterr().out
        if version == "1.2":
            assert out.startswith("<stdin>: /parameters/root.layers_0.weight/value/external/path: ")
        assert ": cannot open weights file" in out
        assert repr(str(tmp_path / trama.weights_path(path).name)) in out


@pytest.mark.parametrize("command", ["validate", "ssa", "info", "run", "profile"])
def test_help_says_what_dash_means(command: str, capsys: Any) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "or - to read standard input (named <stdin> in messages;" in help_text
    assert "external weights files such a document names are looked up in the current directory" in help_text


@pytest.fixture
def fake_runtime(install: Callable[..., PluginHost]) -> None:
    @hookimpl
    def trama_runtimes() -> Sequence[Any]:
        return [FakeRuntime()]

    install(FakeEntryPoint("fake", "trama-fake", type("Plugin", (), {"trama_runtimes": staticmethod(trama_runtimes)})))


@pytest.mark.usefixtures("fake_runtime")
def test_run_and_profile_read_stdin(tmp_path: Path, stdin: Callable[[bytes], None], capsys: Any) -> None:
    np.save(tmp_path / "x.npy", np.ones((5, 3)))
    text = trama.dumps(mlp_model()).encode()
    stdin(text)
    assert main(["run", "-", "--runtime", "test:cpu", "--input", f"x={tmp_path / 'x.npy'}"]) == 0
    assert capsys.readouterr().out == "fc.y: float64[5, 4]\n"
    stdin(text)
    assert main(["profile", "-", "--runtime", "test:cpu", "--input", f"x={tmp_path / 'x.npy'}", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"]["macs"] == 60
    stdin(b"{")
    assert main(["run", "-", "--runtime", "test:cpu"]) == 1
    assert capsys.readouterr().err.startswith("<stdin>: line 1 column 2: ")


def test_the_installed_script_reads_pipes_and_redirected_files(tmp_path: Path) -> None:
    """Real standard input: a pipe, and a regular file large enough to be read a block at a time."""
    path = tmp_path / "big.trama.json"
    trama.dump(toy_mlp([64, 512, 512, 3]), path)
    assert path.stat().st_size > CHUNK  # over trama.format._serialization.MMAP_THRESHOLD

    def trama_cli(*argv: str, **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([str(BIN / "trama"), *argv], capture_output=True, timeout=120, check=False, **kwargs)

    expected = trama_cli("ssa", str(path)).stdout
    with path.open("rb") as handle:
        redirected = trama_cli("ssa", "-", stdin=handle)
    piped = trama_cli("ssa", "-", input=path.read_bytes())
    assert (redirected.returncode, redirected.stdout) == (0, expected)
    assert (piped.returncode, piped.stdout) == (0, expected)
    with path.open("rb") as handle:
        assert trama_cli("validate", "-", stdin=handle).stdout == b"<stdin>: ok\n"
    garbage = trama_cli("validate", "-", input=b"\xff" + os.urandom(3 * CHUNK))  # more than it reads
    assert garbage.returncode == 1
    assert garbage.stdout.startswith(b"<stdin>: line 1 column 1: ")
    assert b"Traceback" not in garbage.stderr


# --- names the output encoding cannot hold -----------------------------------------------------


@pytest.fixture
def surrogate_doc(tmp_path: Path, make_doc: Callable[[], dict[str, Any]]) -> Path:
    """A valid document whose metadata key and one symbolic input dimension hold a lone surrogate
    (the JSON escape "\\ud800" parses to one). Op names cannot: they are dotted identifiers."""
    doc = make_doc()
    doc["metadata"] = {"note\ud800": "value\udcff"}
    doc["input_facts"] = [{"shape": ["batch\ud800", 2]}]
    path = tmp_path / "odd.trama.json"
    path.write_text(json.dumps(doc))  # ensure_ascii: the surrogates are written as escapes
    return path


@pytest.mark.parametrize("command", ["ssa", "info"])
def test_lone_surrogates_in_a_document_print_escaped(command: str, surrogate_doc: Path, capsys: Any) -> None:
    errors_before = sys.stdout.errors
    assert main([command, str(surrogate_doc)]) == 0
    out = capsys.readouterr().out
    assert "\\ud800" in out
    assert sys.stdout.errors == errors_before  # put back for whoever called main()


def test_the_installed_script_escapes_lone_surrogates(surrogate_doc: Path) -> None:
    result = subprocess.run(
        [str(BIN / "trama"), "ssa", str(surrogate_doc)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "?[batch\\ud800, 2]" in result.stdout


def test_a_file_name_that_is_not_utf8_prints_escaped(good: Path, tmp_path: Path, capsys: Any) -> None:
    odd = tmp_path / os.fsdecode(b"odd\xff.trama.json")
    try:
        odd.write_bytes(good.read_bytes())
    except (OSError, UnicodeEncodeError):
        pytest.skip("this file system refuses names that are not UTF-8")
    assert main(["validate", str(odd)]) == 0
    assert capsys.readouterr().out == f"{tmp_path}/odd\\udcff.trama.json: ok\n"


# --- validate --json --------------------------------------------------------------------------


def test_validate_json_reports_each_file_with_located_problems(
    good: Path, tmp_path: Path, stdin: Callable[[bytes], None], capsys: Any
) -> None:
    broken = broken_refs(good)
    missing = tmp_path / "missing.trama.json"
    argv = ["validate", str(good), str(broken), str(missing), "-"]
    stdin(b'{"format_version": "1.0", "nodes": [')
    assert main(argv) == 1
    text_lines = capsys.readouterr().out.splitlines()
    stdin(b'{"format_version": "1.0", "nodes": [')
    assert main([*argv, "--json"]) == 1
    out = capsys.readouterr().out
    report = json.loads(out)
    assert out == json.dumps(report, indent=2, sort_keys=True) + "\n"  # stable: keys sorted
    assert report == {
        "ok": False,
        "files": [
            {"file": str(good), "ok": True, "problems": [], "unchecked_ops": []},
            {
                "file": str(broken),
                "ok": False,
                "problems": [
                    {
                        "location": "/nodes/2/inputs/x",
                        "node": "root.layers_1",
                        "message": "refers to unknown node 'root.nowhere'",
                    },
                    {
                        "location": "/nodes/3/inputs/x",
                        "node": "root.layers_2",
                        "message": "node 'root.layers_0' has no output 'nope'",
                    },
                ],
                "unchecked_ops": [],
            },
            {
                "file": str(missing),
                "ok": False,
                "problems": [
                    {"location": None, "node": None, "message": "cannot read the file: No such file or directory"}
                ],
                "unchecked_ops": [],
            },
            {
                "file": "<stdin>",
                "ok": False,
                "problems": [{"location": "line 1 column 37", "node": None, "message": "Expecting value"}],
                "unchecked_ops": [],
            },
        ],
    }
    # The text report is the same problems, one line each.
    rebuilt = []
    for entry in report["files"]:
        for problem in entry["problems"] or [None]:
            if problem is None:
                rebuilt.append(f"{entry['file']}: ok")
                continue
            where = problem["location"] or ""
            if problem["node"]:
                where += f" (node {problem['node']!r})"
            rebuilt.append(f"{entry['file']}: {where + ': ' if where else ''}{problem['message']}")
    assert rebuilt == text_lines


def test_validate_json_of_valid_files_exits_0(good: Path, capsys: Any) -> None:
    assert main(["validate", "--json", str(good)]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "ok": True,
        "files": [{"file": str(good), "ok": True, "problems": [], "unchecked_ops": []}],
    }


@pytest.mark.parametrize("version", ["1.2", "1.3"])
def test_schema_problems_in_json_carry_their_pointer(good: Path, capsys: Any, version: str) -> None:
    doc = json.loads(trama.dumps(trama.load(good), format_version=version))
    if version == "1.2":
        doc["nodes"][1]["op"] = ""
        where = "/nodes/1/op"
    else:  # the first layer, nested in the root composite
        doc["nodes"][0]["nodes"][0]["op"] = ""
        where = "/nodes/0/nodes/0/op"
    good.write_text(json.dumps(doc))
    assert main(["validate", "--json", str(good)]) == 1
    (problem,) = json.loads(capsys.readouterr().out)["files"][0]["problems"]
    assert problem == {"location": where, "node": None, "message": "'' should be non-empty"}


# --- plugins --json ---------------------------------------------------------------------------


def test_plugins_json_lists_each_plugin_and_exits_1_on_errors(install: Callable[..., PluginHost], capsys: Any) -> None:
    with pytest.warns(PluginLoadWarning):
        install(
            FakeEntryPoint("acme", "trama-acme", acme_plugin()),
            FakeEntryPoint("broken", "trama-broken", ImportError("nope"), version="0.9"),
            include_core=False,
        )
    assert main(["plugins", "--json"]) == 1
    out = capsys.readouterr().out
    assert out == json.dumps(json.loads(out), indent=2, sort_keys=True) + "\n"
    assert json.loads(out) == {
        "plugins": [
            {
                "name": "acme",
                "distribution": "trama-acme",
                "version": "1.2.3",
                "hooks": [
                    "trama_exporters",
                    "trama_frameworks",
                    "trama_op_implementations",
                    "trama_op_specs",
                    "trama_opsets",
                ],
                "errors": [],
            },
            {
                "name": "broken",
                "distribution": "trama-broken",
                "version": "0.9",
                "hooks": [],
                "errors": ["import failed: ImportError: nope"],
            },
        ],
        "selection": {"variable": "TRAMA_PLUGINS", "allowed": None, "skipped": [], "unmatched": []},
    }


def test_plugins_json_of_a_healthy_install_exits_0(install: Callable[..., PluginHost], capsys: Any) -> None:
    install(FakeEntryPoint("acme", "trama-acme", acme_plugin()))
    assert main(["plugins", "--json"]) == 0
    plugins = json.loads(capsys.readouterr().out)["plugins"]
    assert [(p["distribution"], p["errors"]) for p in plugins] == [("trama", []), ("trama-acme", [])]


# --- ops --json and the width of the table ------------------------------------------------------


def beta_plugin() -> Any:
    """Specs the 'numpy' framework of acme does not implement: optional and variadic ports, a
    composite, and slots with every flag."""

    @hookimpl
    def trama_op_specs() -> Sequence[OpSpec]:
        return [
            OpSpec(
                "beta.Mix",
                inputs=("x",),
                outputs=("y",),
                optional_inputs=("mask",),
                variadic_inputs=True,
                variadic_outputs=True,
                composite=True,
                parameters=(
                    ParameterSchema("weight", ("tensor",), learnable=True, doc="the mixing weights"),
                    ParameterSchema("mode", ("string", "null"), optional=True, learnable=False),
                ),
                doc="Mixes.",
            )
        ]

    @hookimpl
    def trama_opsets() -> Mapping[str, int]:
        return {"beta": 1}

    return type(
        "Beta", (), {"trama_op_specs": staticmethod(trama_op_specs), "trama_opsets": staticmethod(trama_opsets)}
    )


def test_ops_json_gives_every_field_of_every_op(install: Callable[..., PluginHost], capsys: Any) -> None:
    install(
        FakeEntryPoint("acme", "trama-acme", acme_plugin()),
        FakeEntryPoint("beta", "trama-beta", beta_plugin()),
        include_core=False,
    )
    assert main(["ops", "--json"]) == 0
    out = capsys.readouterr().out
    assert out == json.dumps(json.loads(out), indent=2, sort_keys=True) + "\n"
    assert json.loads(out) == {
        "frameworks": ["numpy"],
        "ops": [
            {
                "name": "acme.Scale",
                "namespace": "acme",
                "signature": "(x) -> (y) {factor: float}",
                "inputs": ["x"],
                "optional_inputs": [],
                "variadic_inputs": False,
                "outputs": ["y"],
                "variadic_outputs": False,
                "composite": False,
                "doc": "",
                "parameters": [{"name": "factor", "types": ["float"], "optional": False, "learnable": None, "doc": ""}],
                "implemented": {"numpy": True},
            },
            {
                "name": "beta.Mix",
                "namespace": "beta",
                "signature": "composite (x, mask?, ...) -> (y, ...) {weight: tensor, mode?: string|null}",
                "inputs": ["x"],
                "optional_inputs": ["mask"],
                "variadic_inputs": True,
                "outputs": ["y"],
                "variadic_outputs": True,
                "composite": True,
                "doc": "Mixes.",
                "parameters": [
                    {
                        "name": "weight",
                        "types": ["tensor"],
                        "optional": False,
                        "learnable": True,
                        "doc": "the mixing weights",
                    },
                    {"name": "mode", "types": ["string", "null"], "optional": True, "learnable": False, "doc": ""},
                ],
                "implemented": {"numpy": False},
            },
        ],
    }
    assert main(["ops", "--json", "--framework", "torch"]) == 0  # a standard framework, nothing installed
    assert [op["implemented"] for op in json.loads(capsys.readouterr().out)["ops"]] == [{"torch": False}] * 2


def ops_json(capsys: Any) -> dict[str, Any]:
    assert main(["ops", "--json"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def test_ops_json_covers_the_installed_registry(capsys: Any) -> None:
    reset_plugins()
    data = ops_json(capsys)
    host = plugin_host()
    assert [op["name"] for op in data["ops"]] == sorted(
        (spec.name for spec in host.registry(None)), key=lambda name: ("." in name, name.lower(), name)
    )
    assert data["frameworks"] == host.frameworks()
    for framework in host.frameworks():
        implemented = {spec.name for spec in host.registry(framework) if spec.factory is not None}
        assert {op["name"] for op in data["ops"] if op["implemented"][framework]} == implemented


@pytest.mark.parametrize("columns", [60, 80, 100, 132])
def test_ops_fits_the_terminal_one_line_per_op(columns: int, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    reset_plugins()
    ops = ops_json(capsys)["ops"]
    longest = max(ops, key=lambda op: len(op["signature"]))
    assert len(longest["signature"]) > 1000  # the table has something to cut
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(["ops"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= columns
    signature_column = lines[0].find("signature")  # -1 where the signatures go below their rows
    rows = [line for line in lines[1:] if not line.startswith(" ")]
    assert [row.split()[0] for row in rows] == [op["name"] for op in ops]  # every op, in order
    per_op = (len(lines) - 1) // len(ops)
    assert per_op * len(ops) == len(lines) - 1
    for k, op in enumerate(ops):
        shown = lines[1 + per_op * k + per_op - 1]
        shown = shown.strip() if per_op == 2 else shown[signature_column:]
        if shown.endswith("...") and shown != op["signature"]:
            assert op["signature"].startswith(shown[:-3])
        else:
            assert shown == op["signature"]
    assert per_op == (2 if columns == 60 else 1)  # too narrow a column: the signature goes below
    assert (signature_column == -1) == (per_op == 2)  # ...and its title is not in the header


@pytest.mark.parametrize("columns", [60, 100])
def test_ops_full_wraps_whole_signatures_to_the_width(
    columns: int, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    reset_plugins()
    ops = ops_json(capsys)["ops"]
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(["ops", "--full"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= columns
    groups: list[list[str]] = []
    for line in lines[1:]:
        if line.startswith(" "):
            groups[-1].append(line)
        else:
            groups.append([line])
    assert len(groups) == len(ops)
    for group, op in zip(groups, ops, strict=True):
        marks = ["yes" if op["implemented"][f] else "-" for f in sorted(op["implemented"])]
        words = "".join(group).split()
        assert words[: 1 + len(marks)] == [op["name"], *marks]
        assert "".join(words[1 + len(marks) :]) == "".join(op["signature"].split())


def test_a_long_op_name_puts_the_signature_below_it(
    install: Callable[..., PluginHost], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    name = "acme." + "VeryLong" * 5
    install(FakeEntryPoint("acme", "trama-acme", acme_plugin(scale_spec_named(name))), include_core=False)
    monkeypatch.setenv("COLUMNS", "60")
    assert main(["ops"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == [name, "-"]
    assert lines[2] == "    (x) -> (y) {factor: float}"


def scale_spec_named(name: str) -> OpSpec:
    return OpSpec(name, inputs=("x",), outputs=("y",), parameters=(ParameterSchema("factor", ("float",)),))


def test_ops_fits_100_columns_when_the_output_is_not_a_terminal(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
    result = subprocess.run(
        [str(BIN / "trama"), "ops"], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert max(len(line) for line in result.stdout.splitlines()) == cli.DEFAULT_WIDTH == 100


@pytest.mark.parametrize("command", ["validate", "plugins", "ops", "runtimes"])
def test_help_documents_the_json_shape(command: str, capsys: Any) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "--json prints one object; keys are sorted" in out
    key = {"validate": '"problems"', "plugins": '"hooks"', "ops": '"implemented"', "runtimes": '"unavailable_reason"'}
    assert key[command] in out


# --- runtimes ----------------------------------------------------------------------------------


class MissingFramework(FakeRuntime):
    framework = "no_such_framework_for_trama_tests"

    def is_available(self) -> bool:
        return False


class AbsentDevice(FakeRuntime):
    device = "tpu"
    aliases = ("t", "a")

    def is_available(self) -> bool:
        return False


class OldDriver(FakeRuntime):
    device = "cuda"

    def is_available(self) -> bool:
        return False

    def unavailable_reason(self) -> str | None:
        return "the driver is older than 545"


def runtimes_plugin(runtimes: Sequence[Runtime]) -> Any:
    @hookimpl
    def trama_runtimes() -> Sequence[Any]:
        return list(runtimes)

    return type("Runtimes", (), {"trama_runtimes": staticmethod(trama_runtimes)})


@pytest.fixture
def some_runtimes(install: Callable[..., PluginHost]) -> list[Runtime]:
    numpy_runtime = pytest.importorskip("trama_numpy.runtime").NumpyRuntime()
    listed: list[Runtime] = [numpy_runtime, FakeRuntime(), MissingFramework(), AbsentDevice(), OldDriver()]
    install(FakeEntryPoint("fake", "trama-fake", runtimes_plugin(listed)), include_core=False)
    return listed


@pytest.mark.usefixtures("some_runtimes")
def test_runtimes_json_says_what_can_run_here_and_why_not(capsys: Any) -> None:
    assert main(["runtimes", "--json"]) == 0
    out = capsys.readouterr().out
    assert out == json.dumps(json.loads(out), indent=2, sort_keys=True) + "\n"
    numpy_version = importlib_metadata.version("trama-numpy")

    def entry(name: str, framework: str, device: str, reason: str | None, aliases: list[str] | None = None) -> Any:
        return {
            "name": name,
            "aliases": aliases or [],
            "framework": framework,
            "device": device,
            "available": reason is None,
            "unavailable_reason": reason,
            "distribution": None,  # the test classes belong to no installed package
            "version": None,
        }

    assert json.loads(out) == {
        "runtimes": [
            {
                **entry("numpy", "numpy", "cpu", None, ["default"]),
                "distribution": "trama-numpy",
                "version": numpy_version,
            },
            entry("test:cpu", "test", "cpu", None),
            entry(
                "no_such_framework_for_trama_tests:cpu",
                "no_such_framework_for_trama_tests",
                "cpu",
                "no_such_framework_for_trama_tests is not installed",
            ),
            entry("test:tpu", "test", "tpu", "no tpu device here", ["a", "t"]),
            entry("test:cuda", "test", "cuda", "the driver is older than 545"),
        ]
    }
    assert [info.name for info in trama.runtimes()] == [entry["name"] for entry in json.loads(out)["runtimes"]]


@pytest.mark.usefixtures("some_runtimes")
def test_runtimes_table(capsys: Any) -> None:
    assert main(["runtimes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    headers = ["runtime", "aliases", "framework", "device", "package", "available"]
    assert lines[0].split() == headers
    starts = [lines[0].index(header) for header in headers]

    def cells(line: str) -> list[str]:
        return [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]

    numpy_version = importlib_metadata.version("trama-numpy")
    assert [cells(line) for line in lines[1:]] == [
        ["numpy", "default", "numpy", "cpu", f"trama-numpy {numpy_version}", "yes"],
        ["test:cpu", "-", "test", "cpu", "?", "yes"],
        [
            "no_such_framework_for_trama_tests:cpu",
            "-",
            "no_such_framework_for_trama_tests",
            "cpu",
            "?",
            "no: no_such_framework_for_trama_tests is not installed",
        ],
        ["test:tpu", "a, t", "test", "tpu", "?", "no: no tpu device here"],
        ["test:cuda", "-", "test", "cuda", "?", "no: the driver is older than 545"],
    ]


def test_runtimes_without_any(install: Callable[..., PluginHost], capsys: Any) -> None:
    install(include_core=False)
    assert main(["runtimes"]) == 0
    assert capsys.readouterr().out == "no runtimes are installed: install trama-numpy for the default one\n"
    assert main(["runtimes", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"runtimes": []}


class BrokenCheck(FakeRuntime):
    device = "npu"

    def is_available(self) -> bool:
        raise ImportError("libnpu.so: cannot open shared object file")


def test_a_runtime_whose_availability_check_raises_is_listed_unavailable(
    install: Callable[..., PluginHost], capsys: Any
) -> None:
    numpy_runtime = pytest.importorskip("trama_numpy.runtime").NumpyRuntime()
    install(FakeEntryPoint("fake", "trama-fake", runtimes_plugin([BrokenCheck(), numpy_runtime])), include_core=False)
    assert main(["runtimes", "--json"]) == 0
    listed = {entry["name"]: entry for entry in json.loads(capsys.readouterr().out)["runtimes"]}
    assert listed["test:npu"]["available"] is False
    assert listed["test:npu"]["unavailable_reason"] == (
        "its availability check failed: ImportError: libnpu.so: cannot open shared object file"
    )
    assert listed["numpy"]["available"] is True
    # Choosing a runtime passes over the broken one instead of failing with it.
    assert trama.runtime_for_name("default").name() == "numpy"
    assert [info.available for info in trama.runtimes()] == [False, True]


def test_the_default_reason_asks_the_runtime_whether_it_is_available() -> None:
    assert FakeRuntime().unavailable_reason() is None
    assert MissingFramework().unavailable_reason() == "no_such_framework_for_trama_tests is not installed"
    assert AbsentDevice().unavailable_reason() == "no tpu device here"


def test_a_warning_during_a_command_is_one_escaped_line(capsys: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        with cli._one_line_warnings():
            warnings.warn("plugin 'acme' failed:\nforged: ok \x1b[2J", PluginLoadWarning, stacklevel=1)
    assert capsys.readouterr().err == "trama: warning: plugin 'acme' failed: forged: ok \\x1b[2J\n"
