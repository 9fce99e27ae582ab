"""``trama.diff`` and ``trama diff``: what a reviewer reads about a model change.

The changes are made where they are made in practice: in the model's own library (a wider MLP
and one more layer of a transformers Llama, built from its config), in torch (one Linear's
weight nudged, as a fine-tuning run does; a module attribute renamed), and in the document
(a tensor cast to float16). Each must come out as the one line a reviewer expects, with the
same change in every repeated layer said once.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from realworld.captures import export
from realworld.models import RealModel, by_name, ensure_torchvision_importable
from torch import nn

import trama
from trama import Model, Parameter, Tensor
from trama.tools import cli
from trama.tools._diff import (
    CHANGE_KINDS,
    DIFF_HELP,
    Change,
    ModelDiff,
    diff,
    diff_arguments,
    load_for_diff,
    render_diff,
    run_diff,
)

ensure_torchvision_importable()  # transformers imports torchvision (see tests/realworld/models.py)

LAYERS = "root.model.layers"


# --- the models -----------------------------------------------------------------------------


class Llama:
    """The zoo's tiny Llama, and variants of it that keep its weights where shapes allow."""

    def __init__(self) -> None:
        self.entry: RealModel = by_name("hf_llama")
        self.module = self.entry.build()
        self.model = export(self.entry, self.module)

    def variant(self, **config: Any) -> Model:
        """The Llama built from its config with ``config`` changed; every weight the two share
        (by name and shape) copied from the base, so only the change itself differs."""
        settings = copy.deepcopy(self.module.config)
        for key, value in config.items():
            setattr(settings, key, value)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(1)
            module = type(self.module)(settings).eval()
        own = self.module.state_dict()
        state = module.state_dict()
        module.load_state_dict(
            {key: own[key] if key in own and own[key].shape == value.shape else value for key, value in state.items()}
        )
        return export(self.entry, module)


@pytest.fixture(scope="module")
def llama() -> Llama:
    return Llama()


@pytest.fixture(scope="module")
def wider(llama: Llama) -> Model:
    return llama.variant(intermediate_size=128)


@pytest.fixture(scope="module")
def deeper(llama: Llama) -> Model:
    return llama.variant(num_hidden_layers=3)


@pytest.fixture(scope="module")
def tuned(llama: Llama) -> tuple[Model, float]:
    """The Llama with one projection's weight nudged, as fine-tuning does, and the largest
    change made to it."""
    module = copy.deepcopy(llama.module)
    weight = module.model.layers[1].self_attn.q_proj.weight
    with torch.no_grad():
        nudge = 0.01 * torch.randn(weight.shape, generator=torch.Generator().manual_seed(3))
        before = weight.detach().clone()
        weight.add_(nudge)
        largest = float((weight - before).abs().max())
    return export(llama.entry, module), largest


def copy_of(model: Model) -> Model:
    return trama.loads(trama.dumps(model))


def with_entry(model: Model, name: str, edit: Callable[[Parameter], Parameter]) -> Model:
    changed = copy_of(model)
    changed.parameters[name] = edit(changed.parameters[name])
    return changed


def lines(result: ModelDiff) -> list[str]:
    """The change lines of the report (no header, no summary)."""
    return [change.line for change in result.changes]


# --- the diff --------------------------------------------------------------------------------


def test_two_exports_of_one_model_are_equal(llama: Llama) -> None:
    again = export(llama.entry, llama.entry.build())
    result = diff(llama.model, again)
    assert result.equal, render_diff(result)
    assert result.changes == ()
    assert render_diff(result) == "A: A, B: B\nno differences\n"
    assert diff(llama.model, copy_of(llama.model)).equal  # a round trip through the text changes nothing


def test_a_wider_mlp_is_said_once_for_all_layers(llama: Llama, wider: Model) -> None:
    result = diff(llama.model, wider)
    gate = [c for c in result.changes if c.kind == "setting" and c.subtree and c.subtree.endswith("gate_proj")]
    assert [c.line for c in gate] == [f"~ {LAYERS}.0–1.mlp.gate_proj  setting out_features: 64 → 128 in each"]
    assert gate[0].nodes == (f"{LAYERS}.0.mlp.gate_proj", f"{LAYERS}.1.mlp.gate_proj")
    assert (gate[0].slot, gate[0].old, gate[0].new) == ("out_features", 64, 128)
    # Every change is said once for both layers: none names one layer alone.
    assert all(c.subtree is not None and c.subtree.startswith(f"{LAYERS}.0–1.mlp.") for c in result.changes)
    assert lines(result) == [
        f"~ {LAYERS}.0–1.mlp.gate_proj  setting out_features: 64 → 128 in each",
        f"~ {LAYERS}.0–1.mlp.gate_proj  tensor weight: f32[64, 32] → f32[128, 32] in each",
        f"~ {LAYERS}.0–1.mlp.up_proj  setting out_features: 64 → 128 in each",
        f"~ {LAYERS}.0–1.mlp.up_proj  tensor weight: f32[64, 32] → f32[128, 32] in each",
        f"~ {LAYERS}.0–1.mlp.down_proj  setting in_features: 64 → 128 in each",
        f"~ {LAYERS}.0–1.mlp.down_proj  tensor weight: f32[32, 64] → f32[32, 128] in each",
    ]
    assert render_diff(result).splitlines()[-1] == "6 differences: 6 changed"
    # The report says each projection's edit in one line: the setting and the weight it sizes.
    wider_weight = "tensor weight: f32[64, 32] → f32[128, 32] in each"
    assert render_diff(result).splitlines()[1:-1] == [
        f"~ {LAYERS}.0–1.mlp.gate_proj  setting out_features: 64 → 128; {wider_weight}",
        f"~ {LAYERS}.0–1.mlp.up_proj  setting out_features: 64 → 128; {wider_weight}",
        f"~ {LAYERS}.0–1.mlp.down_proj  setting in_features: 64 → 128; tensor weight: f32[32, 64] → f32[32, 128]"
        " in each",
    ]


def test_an_added_layer_is_one_line(llama: Llama, deeper: Model) -> None:
    result = diff(llama.model, deeper)
    added = [c for c in result.changes if c.kind == "added"]
    assert len(added) == 1
    assert added[0].line.startswith(f"+ {LAYERS}.2  added LlamaDecoderLayer (")
    assert added[0].nodes == (f"{LAYERS}.2",)
    assert added[0].new["class"] == "transformers.models.llama.modeling_llama.LlamaDecoderLayer"
    # The only other change: the stack's output now comes from the new layer.
    assert [c.line for c in result.changes if c.kind != "added"] == [f"~ {LAYERS}  output y: layers.1.y → layers.2.y"]
    assert not diff(deeper, llama.model).equal
    assert [c.kind for c in diff(deeper, llama.model).changes] == ["ports", "removed"]


def test_a_fine_tuned_layer_is_one_line_with_its_largest_change(llama: Llama, tuned: tuple[Model, float]) -> None:
    model, largest = tuned
    result = diff(llama.model, model)
    assert len(result.changes) == 1
    (change,) = result.changes
    assert (change.kind, change.subtree, change.slot) == ("values", f"{LAYERS}.1.self_attn.q_proj", "weight")
    assert change.max_abs_diff == pytest.approx(largest, rel=1e-6)
    assert change.changed_values == 32 * 32
    assert change.line == (
        f"* {LAYERS}.1.self_attn.q_proj  weight values changed (1,024 of 1,024; max |Δ| {largest:.3g})"
    )
    # Without values: found all the same, but not measured.
    (quick,) = diff(llama.model, model, values=False).changes
    assert (quick.kind, quick.max_abs_diff, quick.text) == ("values", None, "weight values changed")


def test_the_same_values_change_in_every_layer_is_one_line(llama: Llama) -> None:
    changed = copy_of(llama.model)
    for layer in (0, 1):
        name = f"{LAYERS}.{layer}.mlp.up_proj.weight"
        entry = changed.parameters[name]
        array = np.asarray(entry.value).copy()
        array[0, : layer + 1] += 0.5 * (layer + 1)
        changed.parameters[name] = Parameter(Tensor.from_array(array), entry.learnable)
    (change,) = diff(llama.model, changed).changes
    assert change.line == f"* {LAYERS}.0–1.mlp.up_proj  weight values changed in each (3 of 4,096; max |Δ| 1)"
    assert change.nodes == (f"{LAYERS}.0.mlp.up_proj", f"{LAYERS}.1.mlp.up_proj")


def test_a_constant_that_changed(llama: Llama) -> None:
    def widen(entry: Parameter) -> Parameter:  # the causal mask, as a sliding window changes it
        mask = np.asarray(entry.value).copy()
        mask[..., 0, :] = True
        return Parameter(Tensor.from_array(mask), entry.learnable)

    (change,) = diff(llama.model, with_entry(llama.model, "root.model.and_1.value", widen)).changes
    assert change.line == "* root.model.and_1  values changed (7 of 64; max |Δ| 1)"


def test_a_tensor_cast_to_float16_is_one_line(llama: Llama) -> None:
    name = f"{LAYERS}.0.self_attn.k_proj.weight"

    def half(entry: Parameter) -> Parameter:
        return Parameter(Tensor.from_array(np.asarray(entry.value).astype(np.float16)), entry.learnable)

    result = diff(llama.model, with_entry(llama.model, name, half))
    (change,) = result.changes
    assert change.kind == "tensor"
    assert change.line.startswith(f"~ {LAYERS}.0.self_attn.k_proj  tensor weight: f32[16, 32] → f16[16, 32] (max |Δ| ")
    assert change.line.endswith(" after the cast)")
    assert change.old == {"dtype": "float32", "shape": [16, 32]}
    assert change.new == {"dtype": "float16", "shape": [16, 32]}
    assert change.max_abs_diff is not None
    assert 0 < change.max_abs_diff < 1e-3


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x)) + x


class Tail(nn.Module):
    def __init__(self, head: nn.Module) -> None:
        super().__init__()
        self.head = head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.head(x))


class Net(nn.Module):
    """A stem, a block under the attribute ``body`` (or another name), a head (in a ``Tail``
    with ``wrapped``)."""

    def __init__(self, body: str = "body", *, wrapped: bool = False, extra: bool = False) -> None:
        super().__init__()
        self.body_name = body
        self.stem = nn.Linear(4, 8)
        setattr(self, body, Block())
        head = nn.Linear(8, 2)
        self.wrapped = wrapped
        if wrapped:
            self.tail = Tail(head)
        else:
            self.head = head
        self.extra = nn.Linear(8, 8) if extra else None  # made last: the others' weights stay

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.stem(x)
        if self.extra is not None:
            hidden = self.extra(hidden)
        hidden = getattr(self, self.body_name)(hidden)
        return self.tail(hidden) if self.wrapped else self.head(hidden)


def small(body: str = "body", *, wrapped: bool = False, extra: bool = False) -> Model:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        module = Net(body, wrapped=wrapped, extra=extra).eval()
    return trama.export_model(module, inputs=["x"], outputs=["y"], example_inputs=(torch.ones(2, 4),))


@pytest.fixture(scope="module")
def net() -> Model:
    return small()


def test_a_renamed_module_is_one_renamed_line(net: Model) -> None:
    result = diff(net, small("trunk"))
    assert lines(result) == ["→ root.body  renamed to root.trunk"]
    (change,) = result.changes
    assert (change.kind, change.old, change.new) == ("renamed", "root.body", "root.trunk")
    assert render_diff(result).splitlines()[-1] == "1 difference: 1 renamed"


def test_a_rename_next_to_an_insertion(net: Model) -> None:
    result = diff(net, small("trunk", extra=True))
    assert lines(result) == [
        "→ root.body  renamed to root.trunk",
        "~ root.body  input x: stem.y → extra.y",
        "+ root.extra  added Linear (72 values)",
    ]


def test_a_module_moved_into_a_new_one(net: Model) -> None:
    result = diff(net, small(wrapped=True))
    assert "→ root.head  moved to root.tail.head" in lines(result)
    added = [c.line for c in result.changes if c.kind == "added"]
    assert added == ["+ root.tail  added Tail (2 nodes)"]  # its tanh; the head moved in
    assert not [c for c in result.changes if c.kind == "removed"]


def test_settings_learnable_sharing_and_metadata(net: Model) -> None:
    changed = copy_of(net)
    changed.parameters["root.body.fc.in_features"] = Parameter(8.0)  # an int became a float: a change
    weight = changed.parameters["root.stem.weight"]
    changed.parameters["root.stem.weight"] = Parameter(weight.value, learnable=False)
    changed.node("root.head").parameters["bias"] = "root.stem.bias"  # tied to the stem's (of another shape)
    changed.parameters.pop("root.head.bias")
    changed.node("root.body").metadata = {**(changed.node("root.body").metadata or {}), "note": "edited"}
    changed.metadata["producer"] = {"name": "elsewhere", "version": "9"}
    result = diff(net, changed, values=False)
    assert lines(result) == [
        "~ (document)  metadata producer: trama " + trama.__version__ + " → elsewhere 9",
        "~ root.stem  weight learnable: true → false",
        "~ root.stem  bias now shared with root.head.bias",
        "~ root.body  metadata note: (none) → edited",
        "~ root.body.fc  setting in_features: 8 → 8.0",
        "~ root.head  tensor bias: f32[2] → f32[8]",
    ]
    assert [c.kind for c in result.changes] == ["metadata", "learnable", "sharing", "metadata", "setting", "tensor"]
    assert result.changes[0].subtree is None
    assert result.changes[0].old == {"name": "trama", "version": trama.__version__}


def test_model_inputs_facts_and_symbols(net: Model) -> None:
    changed = copy_of(net)
    assert changed.input_facts is not None
    changed.input_facts = [trama.ValueFact("float32", ("batch", 4))]
    changed.symbols = {"batch": trama.SymbolRange(min=1, max=64)}
    result = diff(net, changed)
    assert lines(result) == [
        "~ (document)  input x: f32[2, 4] → f32[batch, 4]",
        "~ (document)  symbol batch: any size → 1 <= size <= 64",
    ]
    assert all(c.kind == "model" for c in result.changes)


@pytest.mark.parametrize(
    ("names", "text"),
    [
        (("5",), "5"),
        (("0", "1"), "0–1"),
        (("0", "1", "2", "3", "7", "9", "10"), "{0–3,7,9–10}"),
        (("q_proj", "k_proj"), "{q_proj,k_proj}"),
        (("01", "1"), "{01,1}"),  # not numbers as numbers write them: listed as names
    ],
)
def test_repeated_siblings_are_named_by_ranges_or_lists(names: tuple[str, ...], text: str) -> None:
    from trama.tools._diff import _names_text

    assert _names_text(names) == text


def test_the_json_form_is_stable_and_complete(llama: Llama, wider: Model) -> None:
    result = diff(llama.model, wider, names=("a.trama.json", "b.trama.json"))
    data = json.loads(json.dumps(result.to_json()))
    assert set(data) == {"equal", "a", "b", "changes", "counts", "notes"}
    assert data["equal"] is False
    assert data["a"] == {"name": "a.trama.json", "format_version": None}
    assert data["counts"] == {"setting": 3, "tensor": 3}
    first = data["changes"][0]
    assert first == {
        "kind": "setting",
        "subtree": f"{LAYERS}.0–1.mlp.gate_proj",
        "nodes": [f"{LAYERS}.0.mlp.gate_proj", f"{LAYERS}.1.mlp.gate_proj"],
        "text": "setting out_features: 64 → 128 in each",
        "slot": "out_features",
        "old": 64,
        "new": 128,
        "max_abs_diff": None,
        "changed_values": None,
    }
    assert data["changes"][1]["old"] == {"dtype": "float32", "shape": [64, 32]}
    assert all(change["kind"] in CHANGE_KINDS for change in data["changes"])
    assert all(isinstance(change, Change) for change in result.changes)


# --- files, the command and git ---------------------------------------------------------------


@pytest.fixture
def diff_command(monkeypatch: pytest.MonkeyPatch) -> Callable[..., int]:
    """``trama diff`` as cli.py registers it, for the test (the command table is restored)."""
    command = cli.Command("diff", "compare two documents", diff_arguments, run_diff, epilog=DIFF_HELP)
    monkeypatch.setitem(cli.COMMANDS, "diff", command)

    def run(*arguments: str | Path) -> int:
        return cli.main(["diff", *map(str, arguments)])

    return run


@pytest.fixture(scope="module")
def files(llama: Llama, tuned: tuple[Model, float], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The Llama and its fine-tuned copy on disk: with external weights, and inline."""
    folder = tmp_path_factory.mktemp("diff")
    paths = {
        "base": folder / "base.trama.json",
        "tuned": folder / "tuned.trama.json",
        "inline": folder / "inline.trama.json",
    }
    trama.dump(llama.model, paths["base"], weights="external")
    trama.dump(tuned[0], paths["tuned"], weights="external")
    trama.dump(tuned[0], paths["inline"])
    return paths


def test_command_exit_status_and_report(diff_command: Callable[..., int], files: dict[str, Path], capsys: Any) -> None:
    assert diff_command(files["base"], files["base"]) == 0
    assert capsys.readouterr().out == f"A: {files['base']}, B: {files['base']}\nno differences\n"
    assert diff_command(files["base"], files["tuned"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"A: {files['base']}, B: {files['tuned']}"
    assert out[1].startswith(f"* {LAYERS}.1.self_attn.q_proj  weight values changed (1,024 of 1,024; max |Δ| ")
    assert out[2:] == ["1 difference: 1 with new values"]
    # An inline document against an external one: the same model, the same answer.
    assert diff_command(files["tuned"], files["inline"]) == 0


def test_command_json(diff_command: Callable[..., int], files: dict[str, Path], capsys: Any) -> None:
    assert diff_command("--json", files["base"], files["tuned"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["equal"] is False
    assert data["counts"] == {"values": 1}
    assert data["changes"][0]["max_abs_diff"] > 0
    assert diff_command("--json", files["base"], files["base"]) == 0
    assert json.loads(capsys.readouterr().out)["equal"] is True


def test_command_reads_standard_input(
    diff_command: Callable[..., int], files: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(files["inline"].read_bytes())))
    assert diff_command("-", files["tuned"]) == 0
    assert capsys.readouterr().out == f"A: <stdin>, B: {files['tuned']}\nno differences\n"
    assert diff_command("-", "-") == 2


def test_command_trouble_is_one_line_and_status_2(
    diff_command: Callable[..., int], files: dict[str, Path], tmp_path: Path, capsys: Any
) -> None:
    missing = tmp_path / "nowhere.trama.json"
    assert diff_command(files["base"], missing) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith(f"{missing}: cannot read")
    broken = tmp_path / "broken.trama.json"
    broken.write_text('{"format_version": "1.3", "nodes": [')
    assert diff_command(broken, files["base"]) == 2
    assert capsys.readouterr().err.startswith(f"{broken}: line 1 column ")
    assert diff_command(files["base"]) == 2
    assert "give two documents" in capsys.readouterr().err


@pytest.mark.parametrize("format_version", ["1.3", "1.2"])
def test_a_missing_weights_file_compares_by_checksum(
    files: dict[str, Path], llama: Llama, tmp_path: Path, format_version: str
) -> None:
    alone = tmp_path / "alone.trama.json"
    trama.dump(llama.model, alone, weights="external", format_version=format_version)
    trama.weights_path(alone).unlink()  # the document without its weights file, as git's old side
    with pytest.raises(trama.WeightsFileError):
        trama.load(alone)
    old = load_for_diff(alone)
    result = diff(old, load_for_diff(files["tuned"]))
    assert result.notes == (
        f"A's weights file {trama.weights_path(alone).name} is not at hand: its tensors are compared by checksum only",
    )
    (change,) = result.changes
    assert change.line == f"* {LAYERS}.1.self_attn.q_proj  weight values changed (by checksum)"
    assert diff(old, load_for_diff(files["base"])).changes == ()
    assert diff(load_for_diff(files["inline"]), old).changes[0].text == "weight values changed (by checksum)"
    assert diff(old, llama.model).equal  # in memory: its bytes hashed to match the checksum


def git_arguments(path: str, old: Path | str, new: Path | str) -> list[str]:
    return [path, str(old), "1" * 40, "100644", str(new), "0" * 40, "100644"]


def test_git_driver_arguments(
    diff_command: Callable[..., int], files: dict[str, Path], tmp_path: Path, capsys: Any
) -> None:
    old = tmp_path / "XyZ12_model.trama.json"
    shutil.copy(files["base"], old)
    arguments = git_arguments("model.trama.json", old, files["tuned"])
    for form in (["--git", *arguments], arguments):  # seven arguments are git's even without --git
        assert diff_command(*form) == 0  # git stops at any status but 0
        out = capsys.readouterr().out.splitlines()
        assert out[0] == "A: a/model.trama.json (1111111111), B: b/model.trama.json (working tree)"
        assert out[1].startswith("note: A's weights file ")
        assert out[2:] == [
            f"* {LAYERS}.1.self_attn.q_proj  weight values changed (by checksum)",
            "1 difference: 1 with new values",
        ]
    # A file git adds: the old side is /dev/null.
    assert diff_command("--git", "new.trama.json", "/dev/null", ".", ".", files["base"], "2" * 40, "100644") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "A: a/new.trama.json (none), B: b/new.trama.json (2222222222)"
    assert "~ (document)  model inputs () → (input_ids, attention_mask)" in out
    assert [line for line in out if line.startswith("+")] == [
        "+ root  added LlamaForCausalLM (166 nodes, 26,875 values)"
    ]
    assert diff_command("--git", "model.trama.json") == 0
    assert capsys.readouterr().out == "model.trama.json: unmerged, not compared\n"
    assert diff_command("--git", files["base"], files["tuned"]) == 2


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    folder = tmp_path / "repo"
    folder.mkdir()

    def git(*arguments: str) -> None:
        subprocess.run(["git", *arguments], cwd=folder, check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "test@example.com")
    git("config", "user.name", "test")
    # What the docs recipe says, with this interpreter and the command registered the way
    # cli.py registers it (so the test does not depend on the installed script).
    runner = (
        "import sys; from trama.tools import cli; from trama.tools._diff import DIFF_HELP, diff_arguments, run_diff; "
        "cli.register(cli.Command('diff', 'compare', diff_arguments, run_diff, epilog=DIFF_HELP)); "
        "sys.exit(cli.main(['diff', *sys.argv[1:]]))"
    )
    git("config", "diff.trama.command", f"'{sys.executable}' -c \"{runner}\" --git")
    (folder / ".gitattributes").write_text("*.trama.json diff=trama\n")
    return folder


def test_git_uses_it_as_a_diff_driver(repository: Path, llama: Llama, tuned: tuple[Model, float]) -> None:
    document = repository / "llama.trama.json"
    trama.dump(llama.model, document, weights="external")
    subprocess.run(["git", "add", "-A"], cwd=repository, check=True)
    subprocess.run(["git", "commit", "-qm", "base"], cwd=repository, check=True)
    trama.dump(tuned[0], document, weights="external")  # a new weights file; the old one is retired
    git_diff = ["git", "diff", "--", document.name]
    report = subprocess.run(git_diff, cwd=repository, check=True, capture_output=True, text=True).stdout.splitlines()
    assert report[0].startswith("A: a/llama.trama.json (")
    assert report[0].endswith(", B: b/llama.trama.json (working tree)")
    assert report[1].startswith("note: A's weights file llama.")
    assert report[1].endswith("compared by checksum only")
    assert report[2:] == [
        f"* {LAYERS}.1.self_attn.q_proj  weight values changed (by checksum)",
        "1 difference: 1 with new values",
    ]


def test_arguments_parse_as_documented() -> None:
    parser = argparse.ArgumentParser()
    diff_arguments(parser)
    args = parser.parse_args(["a", "b", "--json", "--no-values"])
    assert (args.files, args.json, args.values, args.git) == (["a", "b"], True, False, False)
