"""The ``trama`` command line: exit statuses, one line per problem, never a traceback."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import toylayers  # lives in demo/, which tests/conftest.py puts on sys.path

import trama
from trama import Model
from trama.tools import COMMANDS, Command, main, register, schema_main, ssa_main, to_ssa

REPO = Path(__file__).resolve().parents[1]
LEGACY = REPO / "tests" / "fixtures" / "legacy"
LEGACY_FILES = sorted(LEGACY.glob("v0_*/*.trama.json"))


def toy_mlp(sizes: list[int] | None = None) -> Model:
    return trama.export_model(
        toylayers.mlp(sizes or [4, 8, 3], seed=1), inputs=["x"], outputs=["y"], registry=toylayers.registry()
    )


def write_doc(tmp_path: Path, name: str, doc: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=1))
    return path


@pytest.fixture
def good(tmp_path: Path) -> Path:
    path = tmp_path / "good.trama.json"
    trama.dump(toy_mlp(), path)
    return path


@pytest.fixture
def doc(tmp_path: Path) -> dict[str, Any]:
    """The parsed JSON of a valid document in the flat form (format 1.2, whose nodes and table
    the tests edit), to break in each test."""
    path = tmp_path / "flat.trama.json"
    trama.dump(toy_mlp(), path, format_version="1.2")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@pytest.fixture
def nested_doc(good: Path) -> dict[str, Any]:
    """The parsed JSON of a valid document as ``dump`` writes it (format 1.3, nested)."""
    data: dict[str, Any] = json.loads(good.read_text())
    assert data["format_version"] == "1.3"
    return data


def out_lines(text: str) -> list[str]:
    return text.splitlines()


# --- schema -------------------------------------------------------------------------------


def test_schema_prints_a_json_schema_that_accepts_dumped_models(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema == trama.json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(json.loads(trama.dumps(toy_mlp())))


def test_tramaschema_prints_the_same(capsys: pytest.CaptureFixture[str]) -> None:
    main(["schema"])
    expected = capsys.readouterr().out
    assert schema_main([]) == 0
    assert capsys.readouterr().out == expected


# --- validate -----------------------------------------------------------------------------


def test_validate_ok(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(good)]) == 0
    assert capsys.readouterr().out == f"{good}: ok\n"


def test_validate_lists_every_broken_reference(tmp_path: Path, doc: dict[str, Any], capsys: Any) -> None:
    doc["nodes"][2]["inputs"]["x"] = {"node": "root.nowhere", "output": "y"}
    doc["nodes"][3]["inputs"]["x"] = {"node": "root.layers_0", "output": "nope"}
    path = write_doc(tmp_path, "refs.trama.json", doc)
    assert main(["validate", str(path)]) == 1
    assert out_lines(capsys.readouterr().out) == [
        f"{path}: /nodes/2/inputs/x (node 'root.layers_1'): refers to unknown node 'root.nowhere'",
        f"{path}: /nodes/3/inputs/x (node 'root.layers_2'): node 'root.layers_0' has no output 'nope'",
    ]


def test_validate_lists_every_broken_reference_of_a_nested_document(
    tmp_path: Path, nested_doc: dict[str, Any], capsys: Any
) -> None:
    layers = nested_doc["nodes"][0]["nodes"]
    layers[1]["in"] = "layers_0.zz"
    layers[2]["in"] = "layers_0.nope"
    path = write_doc(tmp_path, "refs.trama.json", nested_doc)
    assert main(["validate", str(path)]) == 1
    lines = out_lines(capsys.readouterr().out)
    assert len(lines) == 2
    # located in the text as written (the layer's "in"), as trama.load locates them
    for line, (k, output) in zip(lines, [(1, "zz"), (2, "nope")], strict=True):
        assert line.startswith(f"{path}: /nodes/0/nodes/{k}/in"), line
        assert line.endswith(f"(node 'root.layers_{k}'): node 'root.layers_0' has no output '{output}'"), line


def test_validate_lists_every_schema_violation_and_stops_there(
    tmp_path: Path, doc: dict[str, Any], capsys: Any
) -> None:
    doc["extra"] = 1
    doc["nodes"][1]["op"] = ""
    doc["parameters"]["root.layers_0.weight"]["value"]["dtype"] = "float33"
    doc["parameters"]["root.layers_0.in_features"]["learnable"] = "yes"
    doc["nodes"][2]["inputs"]["x"] = {"node": "root.nowhere", "output": "y"}  # structural: not reached
    path = write_doc(tmp_path, "schema.trama.json", doc)
    assert main(["validate", str(path)]) == 1
    lines = out_lines(capsys.readouterr().out)
    assert lines[0] == f"{path}: /: Additional properties are not allowed ('extra' was unexpected)"
    assert lines[1] == f"{path}: /nodes/1/op: '' should be non-empty"
    assert lines[2] == f"{path}: /parameters/root.layers_0.in_features/learnable: 'yes' is not of type 'boolean'"
    assert lines[3].startswith(f"{path}: /parameters/root.layers_0.weight/value/dtype: 'float33' is not one of [")
    assert len(lines) == 4


def test_validate_without_the_schema_reports_the_first_decoding_error(
    tmp_path: Path, doc: dict[str, Any], capsys: Any
) -> None:
    doc["extra"] = 1
    doc["nodes"][1]["op"] = ""
    path = write_doc(tmp_path, "schema.trama.json", doc)
    assert main(["validate", "--no-schema", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"{path}: /: unknown field(s) ['extra']")
    assert len(out_lines(out)) == 1


def test_validate_reports_structural_and_tensor_problems_together(
    tmp_path: Path, doc: dict[str, Any], capsys: Any
) -> None:
    # 12 base64 characters are right for 8 bytes, but "==" padding makes them decode to 7.
    doc["parameters"]["root.layers_2.bias"]["value"] = {"dtype": "float32", "shape": [2], "data": "AAAAAAAAAA=="}
    doc["parameters"]["root.layers_0.bias"]["value"] = {"dtype": "bool", "shape": [2], "data": "AQI="}
    doc["parameters"]["unused"] = {"value": 1, "learnable": False}
    for name in ("root.layers_0.bias", "root.layers_2.bias"):  # edited by hand: no checksum to match
        doc["parameters"][name].pop("checksum")
    path = write_doc(tmp_path, "tensors.trama.json", doc)
    assert main(["validate", str(path)]) == 1
    assert out_lines(capsys.readouterr().out) == [
        f"{path}: /parameters/unused: parameter 'unused' is not referenced by any node",
        f"{path}: /parameters/root.layers_0.bias/value: bool tensor holds bytes other than 0 and 1",
        f"{path}: /parameters/root.layers_2.bias/value: tensor data decodes to 7 bytes but float32[2] needs 8",
    ]


def test_validate_refuses_a_long_data_string_with_a_foreign_character(tmp_path: Path, capsys: Any) -> None:
    """A long ``data`` string that is not pure base64 is not lifted out of the text before parsing,
    so the schema sees it and refuses it as it would a short one (quoting it cut short)."""
    path = tmp_path / "big.trama.json"
    trama.dump(toy_mlp([64, 64, 3]), path, format_version="1.2")  # the flat form: its table's places
    assert main(["validate", str(path)]) == 0
    text = path.read_text()
    start = text.index('"data": "') + len('"data": "') + 100
    path.write_text(text[:start] + "!" + text[start + 1 :])
    assert main(["validate", str(path)]) == 1
    lines = out_lines(capsys.readouterr().out)
    assert lines[0] == f"{path}: ok"
    assert lines[1].startswith(f"{path}: /parameters/root.layers_0.weight/value/data: '")
    assert lines[1].endswith("... does not match '^[A-Za-z0-9+/]*={0,2}$'")
    assert len(lines[1]) < 400
    assert len(lines) == 2


def test_validate_several_files(good: Path, tmp_path: Path, capsys: Any) -> None:
    missing = tmp_path / "missing.trama.json"
    assert main(["validate", str(good), str(missing), str(good)]) == 1
    assert out_lines(capsys.readouterr().out) == [
        f"{good}: ok",
        f"{missing}: cannot read the file: No such file or directory",
        f"{good}: ok",
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"format_version": "1.0", "inputs": [', "line 1 column 38: Expecting value"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "line 1 column 1: the file is not UTF-8 text"),
        (b"hello", "line 1 column 1: Expecting value"),
        (b"[1, 2]", "a trama document is a JSON object, got an array"),
        (b'{"format_version": "9.0"}', "/format_version: this file uses format 9.0"),
    ],
)
def test_validate_unparsable_files_give_one_line(
    tmp_path: Path, content: bytes, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.trama.json"
    path.write_bytes(content)
    assert main(["validate", str(path)]) == 1
    captured = capsys.readouterr()
    assert len(out_lines(captured.out)) == 1
    assert captured.out.startswith(f"{path}: {message}")
    assert "Traceback" not in captured.out + captured.err


def test_validate_truncated_file(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good.write_bytes(good.read_bytes()[:-200])
    assert main(["validate", str(good)]) == 1
    out = capsys.readouterr().out
    assert len(out_lines(out)) == 1
    assert out.startswith(f"{good}: line ")


def test_validate_external_weights(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ext.trama.json"
    trama.dump(toy_mlp(), path, weights="external")
    assert main(["validate", str(path)]) == 0
    weights = trama.weights_path(path)
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # the last tensor: root.layers_2.bias
    weights.write_bytes(bytes(data))
    assert main(["validate", str(path)]) == 1
    lines = out_lines(capsys.readouterr().out)
    assert lines[1].startswith(f"{path}: /nodes/0/nodes/2/set/bias: the tensor's bytes")
    weights.unlink()
    assert main(["validate", str(path)]) == 1
    assert "cannot open weights file" in capsys.readouterr().out


def test_validate_skips_the_schema_for_a_newer_minor(tmp_path: Path, nested_doc: dict[str, Any], capsys: Any) -> None:
    """A newer minor may add fields this reader ignores; this reader's schema would wrongly refuse them."""
    nested_doc["format_version"] = "1.7"
    nested_doc["added_in_1_7"] = {"anything": True}
    path = write_doc(tmp_path, "newer.trama.json", nested_doc)
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: ok\n"


@pytest.mark.parametrize("path", LEGACY_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_legacy_fixtures_validate_and_render(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: ok\n"  # their ops are the old library's: not the catalog's
    assert main(["ssa", str(path)]) == 0
    version = path.parent.name.replace("v", "").replace("_", ".")
    assert capsys.readouterr().out.startswith(f"# trama format {version} (read as {trama.FORMAT_VERSION})\n")
    assert main(["info", str(path)]) == 0
    assert f"format      {version} (this trama writes {trama.FORMAT_VERSION})\n" in capsys.readouterr().out


# --- ssa and info -------------------------------------------------------------------------


def test_ssa(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ssa", str(good)]) == 0
    out = capsys.readouterr().out
    assert out == to_ssa(trama.load(good))
    assert "  %layers_1 = ReLU(%layers_0)\n" in out
    assert "tensors:" not in out.split("\n", 2)[2]  # the table only with --tensors
    assert ssa_main([str(good)]) == 0
    assert capsys.readouterr().out == out


def test_ssa_depth_and_tensors(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = trama.load(good)
    assert main(["ssa", "--depth", "1", "--tensors", str(good)]) == 0
    out = capsys.readouterr().out
    assert out == to_ssa(model, depth=1, tensors=True)
    assert "\n%root = Sequential(x)\n" in out  # depth 1: the top-level node, no body
    assert "Linear" not in out.split("\n\ntensors:")[0]
    assert "\n  root.layers_0.weight  f32[8, 4]  learnable\n" in out
    assert ssa_main(["--depth", "2", str(good)]) == 0
    assert capsys.readouterr().out == to_ssa(model, depth=2)


@pytest.mark.parametrize("depth", ["-1", "two", "1.5"])
def test_ssa_depth_must_be_a_whole_number(good: Path, depth: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["ssa", "--depth", depth, str(good)])
    assert exit_info.value.code == 2
    assert "argument --depth" in capsys.readouterr().err


def test_info(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(good)]) == 0
    out = capsys.readouterr().out
    assert "nodes       4 (3 leaves, 1 composite, depth 2)\n" in out
    assert "learnable   4 entries, 67 elements, 268 B\n" in out


def test_info_json(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "--json", str(good)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["format_version"] == trama.FORMAT_VERSION
    assert data["node_count"] == 4
    assert data["learnable"]["bytes"] == 268


@pytest.mark.parametrize("command", ["ssa", "info"])
def test_bad_file_is_one_line_on_stderr(
    command: str, tmp_path: Path, doc: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    truncated = tmp_path / "truncated.trama.json"
    truncated.write_text('{"format_version": "1.0", "nodes": [')
    assert main([command, str(truncated)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"{truncated}: line 1 column 37: Expecting value\n"

    doc["nodes"][2]["inputs"]["x"] = {"node": "root.nowhere", "output": "y"}
    doc["nodes"][3]["inputs"]["x"] = {"node": "root.layers_0", "output": "nope"}
    broken = write_doc(tmp_path, "refs.trama.json", doc)
    assert main([command, str(broken)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"{broken}: /nodes/2/inputs/x (node 'root.layers_1'): refers to unknown node 'root.nowhere' "
        f"(and 1 more: run 'trama validate {broken}')\n"
    )

    assert main([command, str(tmp_path)]) == 1  # a folder: unreadable
    assert out_lines(capsys.readouterr().err) == [
        f"{tmp_path}: cannot read {str(tmp_path)!r}: it is a folder, not a regular file"
    ]


# --- usage --------------------------------------------------------------------------------


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    err = capsys.readouterr().err
    for name in ("schema", "validate", "ssa", "info"):
        assert name in err


@pytest.mark.parametrize("argv", [["validate"], ["ssa"], ["info"], ["frobnicate"], ["ssa", "a", "b"], ["--bogus"]])
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert "usage: trama" in capsys.readouterr().err


def test_standalone_scripts_name_themselves(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        ssa_main([])
    assert exit_info.value.code == 2
    assert "usage: tramassa" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"trama {trama.__version__} (format {trama.FORMAT_VERSION})\n"


def test_new_subcommands_plug_into_the_table(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--times", type=int, default=1)

    def run(args: argparse.Namespace) -> int:
        print("hello " * args.times)
        return 3

    monkeypatch.setattr("trama.tools.cli.COMMANDS", dict(COMMANDS))
    register(Command("hello", "say hello", add_arguments, run))
    assert main(["hello", "--times", "2"]) == 3
    assert capsys.readouterr().out == "hello hello \n"
    assert main([]) == 2
    assert "say hello" in capsys.readouterr().err


# --- installed scripts --------------------------------------------------------------------


def test_console_scripts_are_installed_and_work(good: Path) -> None:
    bin_dir = Path(sys.executable).parent

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(bin_dir / argv[0]), *argv[1:]], capture_output=True, text=True, timeout=60)

    for script in ("trama", "tramaschema", "tramassa"):
        assert (bin_dir / script).exists(), f"{script} is not installed in {bin_dir}"

    version = run("trama", "--version")
    assert version.returncode == 0
    assert version.stdout.startswith("trama ")
    schema = run("tramaschema")
    assert schema.returncode == 0
    jsonschema.Draft202012Validator.check_schema(json.loads(schema.stdout))
    ssa = run("tramassa", str(good))
    assert ssa.returncode == 0
    assert "%root = Sequential(x):" in ssa.stdout
    validate = run("trama", "validate", str(good))
    assert (validate.returncode, validate.stdout) == (0, f"{good}: ok\n")

    good.write_text("{not json")
    for argv in (("trama", "info", str(good)), ("tramassa", str(good)), ("trama", "validate", str(good))):
        result = run(*argv)
        assert result.returncode == 1
        assert "Traceback" not in result.stderr
        assert len((result.stdout + result.stderr).splitlines()) == 1


@pytest.mark.parametrize("command", ["info", "ssa"])
def test_structure_commands_leave_a_large_documents_tensors_in_its_file(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # info and ssa look at the structure only: a large document's inline tensors are not decoded
    # (trama.load(..., lazy_inline=True)), so the command needs the memory of the structure.
    from trama.format import _jsontext

    model = toy_mlp([600, 600])  # a 600x600 float32 weight: 1.9 MB of base64
    path = tmp_path / "big.trama.json"
    trama.dump(model, path)
    assert path.stat().st_size >= trama.format._serialization.MMAP_THRESHOLD
    decoded: list[bool] = []
    real_lift = _jsontext.lift_text

    def spying(*args: Any, **kwargs: Any) -> Any:
        decoded.append(bool(kwargs.get("decode")))
        return real_lift(*args, **kwargs)

    monkeypatch.setattr(trama.format._serialization, "lift_text", spying)
    assert main([command, str(path)]) == 0
    assert decoded == [False]
    assert capsys.readouterr().out
    # trama.load itself decodes them as it reads the file.
    trama.load(path)
    assert decoded == [False, True]
