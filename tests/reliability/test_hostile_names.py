"""Free-form strings of a document never become code, and never change what is computed.

Issue 22: a 1.3 KB document ran Python of its own choosing on ``trama.import_model`` with the
torch registry. Node metadata's ``torch_name`` (the torch attribute name an exporter had to
escape) became the attribute a child was held under in the imported ``GraphModule``, and fx
writes attribute names unescaped into the ``forward`` it generates and ``exec``\\ s. The same
metadata also changed results on torch alone: two ``Sequential`` children with one
``torch_name`` collapsed into one entry, and a ``constant`` named ``fc.bias`` became the bias of
a ``Linear`` declared without one.

The rule these tests hold trama to: the only document text that reaches generated code is what
the format restricts to ``[A-Za-z0-9_]`` (node names, ports); metadata is data. Each hostile
string goes into every place a document carries free-form text (node metadata, the
``torch_name`` of modules, of ``Sequential`` children and of constants, the ``torch_aliases``
of scopes, the ``class`` name, document metadata), and the model is then imported with every
registry, prepared and run on every runtime and through ``trama run``: no payload runs, each
runtime computes what numpy
computes, and the generated code of every imported scope contains none of the strings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import trama
from reliability.isolation import run_cli, run_isolated
from trama.execution import runtime_for_name

RUNTIMES = ("numpy", "torch:cpu", "jax:cpu")

#: Strings that would be code if fx wrote them into ``forward``: each tries to create the file
#: ``PWNED`` in the working folder (dot-free, because a dotted ``torch_name`` is a state path).
PAYLOADS = (
    'a"); open("PWNED", "w"); ("',
    "a'); open('PWNED', 'w'); ('",
    'a")\nopen("PWNED", "w")\n#',
    'x" if open("PWNED", "w") else "',
    'a\\"); open("PWNED", "w"); #',
    "getattr(self, 'x'); open('PWNED', 'w')  #",
    "a.b.c",
    "x.__class__.__init__",
    "x.training",
    "x.forward.y",
    "seq.0.weight.x",
    "self",
    "forward",
    "_modules",
    "training",
    "__class__",
    "state_dict",
    "code",
    "if",
    "0",
    "",
    "ﬁ",  # NFKC-folds to "fi" in Python source
    "fi",
    "a\u202eb",  # a bidi override
    "a\u2028b",  # a line separator
    "x" * 10_000,
)


class Net(nn.Module):
    """Linear layers in a captured scope, a Sequential, a parameter read directly, and a
    Linear without a bias (the target of the ``fc.bias`` attack)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4, bias=False)
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))
        self.scale = nn.Parameter(torch.full((4,), 2.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.seq(self.b(self.a(x))) * self.scale


X = np.linspace(-1.0, 1.0, 8, dtype=np.float32).reshape(2, 4)


@pytest.fixture(scope="module")
def exported() -> dict[str, Any]:
    """``Net`` exported with ``example_inputs``, as the JSON tree a file would hold."""
    torch.manual_seed(0)
    document = trama.export_model(
        Net().eval(), inputs=["x"], outputs=["y"], example_inputs=(torch.from_numpy(X.copy()),)
    )
    tree: dict[str, Any] = json.loads(trama.dumps(document, format_version="1.2"))
    return tree


def _with_metadata(tree: dict[str, Any], metadata: dict[str, dict[str, Any]]) -> trama.Model:
    """A copy of ``tree`` whose nodes (by id) get these metadata members, loaded."""
    tree = json.loads(json.dumps(tree))
    for node in tree["nodes"]:
        if node["id"] in metadata:
            node["metadata"] = {**(node.get("metadata") or {}), **metadata[node["id"]]}
    return trama.loads(json.dumps(tree))


def _scopes(module: nn.Module) -> Iterator[torch.fx.GraphModule]:
    for sub in module.modules():
        if isinstance(sub, torch.fx.GraphModule):
            yield sub


def _reference(model: trama.Model) -> np.ndarray:
    (y,) = runtime_for_name("numpy").prepare(model).run({"x": X})
    return np.asarray(y)


def _check_every_runtime(model: trama.Model, hostile: list[str]) -> None:
    """Import with every registry and run on every runtime: same values as numpy's, and
    no hostile string in any generated ``forward``."""
    expected = _reference(model)
    imported = trama.import_model(model, registry=trama.registry("torch"))
    for scope in _scopes(imported):
        assert scope.code.isascii()
        for text in hostile:
            if re.fullmatch(r"[A-Za-z0-9_.]*", text) is None:  # words ("self", "if") occur in code anyway
                assert text not in scope.code, f"{text!r} reached the generated code"
    with torch.no_grad():
        got = imported(torch.from_numpy(X.copy()))
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-6)
    jax_model = trama.import_model(model, registry=trama.registry("jax"))
    np.testing.assert_allclose(np.asarray(jax_model(X)), expected, rtol=1e-5, atol=1e-6)
    for name in RUNTIMES:
        (y,) = runtime_for_name(name).prepare(model).run({"x": X})
        np.testing.assert_allclose(np.asarray(y), expected, rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda text: repr(text[:24]))
def test_a_hostile_torch_name_is_data_everywhere(
    exported: dict[str, Any], payload: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    targets = ("root", "root.a", "root.b", "root.seq", "root.seq.0", "root.seq.2", "root.scale", "root.mul")
    model = _with_metadata(
        exported,
        {
            node: {
                "torch_name": payload,
                "class": payload,
                "torch_aliases": {payload: "a", "a": payload, f"x.{payload}": "seq.0", "extra": "seq"},
                payload[:200] or "k": payload,
            }
            for node in targets
        },
    )
    model.metadata = {**(model.metadata or {}), "note": payload}
    _check_every_runtime(model, [payload])
    assert not (tmp_path / "PWNED").exists()


def test_state_dict_keys_keep_an_escaped_torch_name_as_data(exported: dict[str, Any]) -> None:
    """A torch name that is no Python identifier still names the keys (RegNet's ``block1-0``,
    or one with a quote): the module is held under its node name, the keys carry the name."""
    model = _with_metadata(exported, {"root.a": {"torch_name": 'blo"ck-1'}, "root.seq.0": {"torch_name": "x-0"}})
    imported = trama.import_model(model, registry=trama.registry("torch"))
    keys = list(imported.state_dict())
    assert 'blo"ck-1.weight' in keys
    assert "seq.x-0.weight" in keys
    assert "a.weight" not in keys
    assert keys.index('blo"ck-1.weight') < keys.index("b.weight"), "renamed keys keep their place"
    # load_state_dict reads the same keys back, strictly
    state = {key: torch.zeros_like(value) for key, value in imported.state_dict().items()}
    imported.load_state_dict(state, strict=True)
    assert not imported.get_submodule("a").weight.detach().any()


def test_two_sequential_children_claiming_one_torch_name_both_stay(exported: dict[str, Any]) -> None:
    """Before: one replaced the other, and torch computed with a layer missing."""
    model = _with_metadata(exported, {"root.seq.0": {"torch_name": "dup"}, "root.seq.2": {"torch_name": "dup"}})
    imported = trama.import_model(model, registry=trama.registry("torch"))
    assert len(imported.get_submodule("seq")) == 3
    _check_every_runtime(model, ["dup"])


def test_a_torch_name_cannot_take_a_sibling_s_place(exported: dict[str, Any]) -> None:
    model = _with_metadata(exported, {"root.a": {"torch_name": "b"}, "root.seq.0": {"torch_name": "2"}})
    imported = trama.import_model(model, registry=trama.registry("torch"))
    keys = set(imported.state_dict())
    assert {"a.weight", "b.weight", "seq.0.weight", "seq.2.weight"} <= keys
    _check_every_runtime(model, [])


@pytest.mark.parametrize("path", ["b.bias", "a.bias", "a.weight", "seq.0.bias", "b.weight", "seq.bias"])
def test_a_constant_s_torch_path_never_changes_a_built_module(exported: dict[str, Any], path: str) -> None:
    """``root.b`` is a ``Linear`` declared without a bias: a constant whose ``torch_name`` is
    ``b.bias`` must not become its bias (before: torch computed ``x W + 2``, numpy ``x W``)."""
    model = _with_metadata(exported, {"root.scale": {"torch_name": path}})
    imported = trama.import_model(model, registry=trama.registry("torch"))
    assert imported.get_submodule("b").bias is None
    _check_every_runtime(model, [])


def _many_siblings(count: int) -> str:
    """A Sequential of ``count`` ReLUs that all claim one ``torch_name`` (about 1.9 MB at 10,000)."""
    nodes = [
        {
            "id": "net",
            "parent": None,
            "op": "Sequential",
            "inputs": {"x": {"node": "%input", "output": "x"}},
            "outputs": ["y"],
            "parameters": {},
        },
    ]
    for index in range(count):
        nodes.append(
            {
                "id": f"net.r{index}",
                "parent": "net",
                "op": "ReLU",
                "parameters": {},
                "output_bindings": None,
                "inputs": {"x": {"node": "%input", "output": "x"}},
                "outputs": ["y"],
                "metadata": {"torch_name": "same"},
            }
        )
    nodes[0]["output_bindings"] = {"y": {"node": f"net.r{count - 1}", "output": "y"}}
    document = {
        "format_version": "1.2",
        "inputs": ["x"],
        "outputs": [{"node": "net", "output": "y"}],
        "nodes": nodes,
        "parameters": {},
    }
    return json.dumps(document)


def test_ten_thousand_children_sharing_one_torch_name_prepare_promptly(tmp_path: Path) -> None:
    """Before: torch:cpu's prepare ran for minutes (a name grown one ``_`` at a time)."""
    path = tmp_path / "many.trama.json"
    path.write_text(_many_siblings(10_000))
    np.save(tmp_path / "x.npy", X)
    outcome = run_cli("run", str(path), "--runtime", "torch:cpu", "--input", f"x={tmp_path / 'x.npy'}", timeout_s=90)
    assert not outcome.crashed, outcome.stderr[-2000:]
    assert outcome.returncode == 0, outcome.stderr[-2000:]
    code = f"""
        import json, trama
        model = trama.load({str(path)!r})
        module = trama.import_model(model, registry=trama.registry("torch"))
        print(len(module), len(set(dict(module.named_children()))))
    """
    outcome = run_isolated(code, timeout_s=90)
    assert outcome.returncode == 0, outcome.stderr[-2000:]
    assert outcome.stdout.split() == ["10000", "10000"]


def test_trama_run_on_a_hostile_file_runs_no_code(exported: dict[str, Any], tmp_path: Path) -> None:
    payload = PAYLOADS[0]
    model = _with_metadata(exported, {"root.a": {"torch_name": payload}, "root.scale": {"torch_name": payload}})
    path = tmp_path / "hostile.trama.json"
    trama.dump(model, path)
    np.save(tmp_path / "x.npy", X)
    expected = _reference(model)
    for runtime in RUNTIMES:
        out = tmp_path / f"y-{runtime.replace(':', '-')}.npz"
        outcome = run_cli(
            "run",
            str(path),
            "--runtime",
            runtime,
            "--input",
            f"x={tmp_path / 'x.npy'}",
            "--output",
            str(out),
            cwd=tmp_path,
        )
        assert outcome.returncode == 0, outcome.stderr[-2000:]
        with np.load(out) as saved:
            np.testing.assert_allclose(saved[saved.files[0]], expected, rtol=1e-5, atol=1e-6)
    validated = run_cli("validate", str(path), cwd=tmp_path)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert not (tmp_path / "PWNED").exists()


def test_a_hand_built_node_with_a_name_outside_the_format_is_refused() -> None:
    """The guard at the one place a name becomes code, for a node never validated (a model
    built in Python: ``trama.load`` and validation refuse such an id before this)."""
    from trama import INPUT, Node, Ref
    from trama_torch.wiring import scope_module

    bad = Node('a"); open("PWNED", "w"); ("', "relu", {"x": Ref(INPUT, "x")}, ["y"], {})
    with pytest.raises(trama.errors.ImportModelError, match="not a name the format allows"):
        scope_module(
            inputs=["x"], children=[(bad, nn.ReLU())], outputs=[Ref(bad.id, "y")], always_tuple=False, class_name="G"
        )
