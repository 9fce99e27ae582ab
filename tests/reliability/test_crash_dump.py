"""A dump killed at any instant, or failing for want of disk, never loses the previous document.

**Killed at every step.** A child process dumps a document over an existing one and is killed
(SIGKILL: no cleanup, no ``finally``) just before the k-th step that changes the folder: each
file creation, write, sync, lock, rename and removal (``trama.format._commit.step_hook`` names
them). k runs from 1 until the dump completes unkilled, so every step is hit once. After each
kill, the folder as the kill left it is copied aside; the test then loads each copy and requires
the old document or the new one, whole, values compared. After the next successful dump over
the wreck, nothing is left but the document and the weights file it names: no temporary file,
no orphaned weights file.

The child forks once per k from one interpreter (importing trama once), so the whole sweep of a
transition takes a second or two.

**The disk gives out.** A child whose file size limit (``RLIMIT_FSIZE``, with SIGXFSZ ignored)
is below the new document's size sees its writes fail with EFBIG, as a full disk fails them
with ENOSPC: the dump raises one ``WriteError``, the previous files are left byte for byte, and
``trama run --output`` says so in one line and exits 1.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trama
from reliability.isolation import run_isolated

pytestmark = pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork (POSIX)")

MODELS = '''
import numpy as np
import trama

def model(seed):
    """A leaf whose tensors (and one scalar) depend on the seed; seed 0 is the old document."""
    rng = np.random.default_rng(seed)
    values = {
        "a": trama.Tensor.from_array(rng.standard_normal((32, 16)).astype(np.float32)),
        "b": trama.Tensor.from_array(rng.integers(-5, 5, 40).astype(np.int64)),
        "c": trama.Tensor.from_array(rng.standard_normal(7)),
        "n": seed,
    }
    names = {slot: f"bag.{slot}" for slot in values}
    return trama.Model(
        inputs=["x"],
        outputs=[trama.Ref("bag", "y")],
        nodes=[trama.Node("bag", "Bag", {"x": trama.Ref(trama.INPUT, "x")}, ["y"], names)],
        parameters={names[s]: trama.Parameter(v, learnable=True) for s, v in values.items()},
    )
'''

SWEEP = (
    MODELS
    + """
import json, os, shutil, signal, sys
from pathlib import Path
import trama.format._commit as commit

args = json.loads(sys.argv[1])
root = Path(args["root"])
work = root / "work"
document = work / "model.trama.json"


def write_old():
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    if args["old"] == "legacy":  # as earlier trama wrote external documents: flat (1.2), model.safetensors
        trama.dump(model(0), document, weights="external", format_version="1.2")
        current = trama.weights_path(document)
        current.rename(work / "model.safetensors")
        document.write_text(document.read_text().replace(current.name, "model.safetensors"))
    else:
        trama.dump(model(0), document, weights=args["old"])


k = 1
kinds = []
while True:
    write_old()
    pid = os.fork()
    if pid == 0:
        count = [0]

        def hook(kind):
            count[0] += 1
            if count[0] == k:
                (root / f"kind-{k}").write_text(kind)
                os.kill(os.getpid(), signal.SIGKILL)

        commit.step_hook = hook
        trama.dump(model(1), document, weights=args["new"])
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    if not killed:
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        break
    kinds.append((root / f"kind-{k}").read_text())
    shutil.copytree(work, root / f"killed-{k}")
    trama.dump(model(2), document, weights=args["new"])  # the next dump, over the wreck
    shutil.copytree(work, root / f"after-{k}")
    k += 1
print(json.dumps(kinds))
"""
)

TRANSITIONS = [
    ("inline", "inline"),
    ("external", "external"),
    ("legacy", "external"),
    ("external", "inline"),
    ("inline", "external"),
]


def models() -> dict[int, trama.Model]:
    scope: dict[str, Any] = {}
    exec(MODELS, scope)  # the very models the child writes
    return {seed: scope["model"](seed) for seed in (0, 1, 2)}


def which(path: Path, candidates: dict[int, trama.Model]) -> int:
    """Which of the candidate models the document at ``path`` is, whole (every tensor read)."""
    loaded = trama.load(path)
    for entry in loaded.parameters.values():
        if isinstance(entry.value, trama.Tensor):
            np.asarray(entry.value)  # verified against its checksum
    matches = [seed for seed, model in candidates.items() if loaded.parameters == model.parameters]
    assert len(matches) == 1, f"{path} is none of the models"
    return matches[0]


def files_of(folder: Path, weights: str) -> list[str]:
    expected = ["model.trama.json"]
    if weights == "external":
        expected.append(trama.weights_path(folder / "model.trama.json").name)
    return sorted(expected)


@pytest.mark.parametrize(("old", "new"), TRANSITIONS, ids=[f"{o}-to-{n}" for o, n in TRANSITIONS])
def test_a_dump_killed_at_every_step_leaves_the_old_or_the_new_document(tmp_path: Path, old: str, new: str) -> None:
    outcome = _sweep(tmp_path, old, new)
    kinds: list[str] = json.loads(outcome.stdout.strip().splitlines()[-1])
    candidates = models()
    seen = []
    for k, kind in enumerate(kinds, start=1):
        killed = tmp_path / f"killed-{k}"
        seen.append(which(killed / "model.trama.json", {0: candidates[0], 1: candidates[1]}))
        after = tmp_path / f"after-{k}"
        assert sorted(p.name for p in after.iterdir()) == files_of(after, new), f"left behind after step {k} ({kind})"
        assert which(after / "model.trama.json", candidates) == 2
    # The sweep crossed the commit: old before it, new after it, never back.
    assert seen[0] == 0, seen
    assert seen[-1] == 1, seen
    assert seen == sorted(seen), seen
    # ...and it really killed the writer at every kind of step.
    assert {"create", "write", "fsync", "lock", "rename", "fsync-folder"} <= set(kinds)
    if old != "inline":
        assert "unlink" in kinds  # the old weights file, collected after the commit


def _sweep(root: Path, old: str, new: str) -> Any:
    code = "import sys\nsys.argv[1:] = [" + repr(json.dumps({"root": str(root), "old": old, "new": new})) + "]\n"
    outcome = run_isolated(code + SWEEP, timeout_s=60, memory_mb=3_000)
    assert outcome.returncode == 0, outcome.describe()
    return outcome


def test_a_killed_dump_leaves_temporaries_the_next_dump_removes(tmp_path: Path) -> None:
    # The 1.1 GiB after 8 kills of the issue: each killed dump leaves its temporary files.
    outcome = _sweep(tmp_path, "external", "external")
    kinds = json.loads(outcome.stdout.strip().splitlines()[-1])
    left = [
        name
        for k in range(1, len(kinds) + 1)
        for name in (p.name for p in (tmp_path / f"killed-{k}").iterdir())
        if name.endswith(".tmp")
    ]
    assert left, "no kill left a temporary file: the sweep did not test their removal"
    assert all(re.fullmatch(r"\.model\.(trama\.json|safetensors)\.[0-9a-f]{12}\.tmp", name) for name in left)


# --------------------------------------------------------------------------------------------
# The disk gives out
# --------------------------------------------------------------------------------------------

LIMITED = """
import resource, signal, sys, json
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
"""


@pytest.mark.parametrize("weights", ["inline", "external"])
def test_a_dump_past_the_file_size_limit_is_one_write_error_and_keeps_the_old_files(
    tmp_path: Path, weights: str
) -> None:
    candidates = models()
    path = tmp_path / "model.trama.json"
    trama.dump(candidates[0], path, weights=weights)  # type: ignore[arg-type]
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    limit = 1000  # far below either form of the new document
    code = (
        f"import sys\nsys.argv[1:] = ['{limit}']\n"
        + LIMITED
        + MODELS
        + f"""
try:
    trama.dump(model(1), {str(path)!r}, weights={weights!r})
except trama.TramaError as exc:
    print(json.dumps([type(exc).__name__, str(exc)]))
"""
    )
    outcome = run_isolated(code, timeout_s=60, memory_mb=3_000)
    assert outcome.returncode == 0, outcome.describe()
    assert not outcome.traceback, outcome.describe()
    kind, message = json.loads(outcome.stdout.strip().splitlines()[-1])
    assert kind == "WriteError"
    assert message.startswith(f"cannot write {str(path)!r}: ")
    assert "File too large" in message
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # nothing lost, nothing left
    assert which(path, {0: candidates[0]}) == 0


def test_trama_run_output_past_the_file_size_limit_is_one_line(tmp_path: Path) -> None:
    weight = trama.Parameter(trama.Tensor.from_array(np.ones((64, 3), dtype=np.float32)), learnable=True)
    slots = {"weight": "lin.weight", "in_features": "lin.in_features", "out_features": "lin.out_features"}
    node = trama.Node("lin", "Linear", {"x": trama.Ref(trama.INPUT, "x")}, ["y"], slots)
    model = trama.Model(
        ["x"],
        [trama.Ref("lin", "y")],
        [node],
        {"lin.weight": weight, "lin.in_features": trama.Parameter(3), "lin.out_features": trama.Parameter(64)},
    )
    document = tmp_path / "lin.trama.json"
    trama.dump(model, document)
    np.save(tmp_path / "x.npy", np.ones((100, 3), dtype=np.float32))
    out = tmp_path / "out.npz"
    out.write_bytes(b"the previous outputs")
    argv = ["run", str(document), "--runtime", "numpy", "--input", f"x={tmp_path / 'x.npy'}", "--output", str(out)]
    code = (
        "import sys\nsys.argv[1:] = ['4096']\n"
        + LIMITED
        + f"from trama.tools.cli import main\nsys.exit(main({argv!r}))\n"
    )
    outcome = run_isolated(code, timeout_s=120, memory_mb=3_000)
    assert outcome.returncode == 1, outcome.describe()
    assert not outcome.traceback
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1, outcome.describe()
    assert lines[0].startswith(f"{document}: cannot write the outputs to {str(out)!r}: ")
    assert "File too large" in lines[0]
    assert out.read_bytes() == b"the previous outputs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lin.trama.json", "out.npz", "x.npy"]
