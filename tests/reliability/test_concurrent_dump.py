"""Several processes dumping different models to one path at once leave one writer's model, whole.

Each writer process dumps its own model (its tensors and a scalar ``n`` derived from its number)
to the same path over and over, alternating external and inline weights, for about two seconds.
Meanwhile the test process loads the path again and again: every load must succeed and be
exactly one writer's model, the JSON and the weights of the same writer. At the end, the
document is one writer's model and the folder holds nothing else but the weights file it names:
no temporary file and no other writer's weights file.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trama
from reliability.isolation import Outcome, run_isolated

WRITERS = 3
SECONDS = 2.0

MODELS = """
import numpy as np
import trama

def model(n):
    rng = np.random.default_rng(n)
    values = {
        "a": trama.Tensor.from_array(rng.standard_normal((64, 32)).astype(np.float32)),
        "b": trama.Tensor.from_array(rng.integers(0, 100, 50).astype(np.int32)),
        "n": n,
    }
    names = {slot: f"bag.{slot}" for slot in values}
    return trama.Model(
        inputs=["x"],
        outputs=[trama.Ref("bag", "y")],
        nodes=[trama.Node("bag", "Bag", {"x": trama.Ref(trama.INPUT, "x")}, ["y"], names)],
        parameters={names[s]: trama.Parameter(v, learnable=True) for s, v in values.items()},
    )
"""

WRITER = """
import json, sys, time
n, path, start, seconds = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
mine = model(n)
while time.time() < start:
    time.sleep(0.001)
dumps = 0
while time.time() < start + seconds or dumps < 5:
    trama.dump(mine, path, weights="external" if dumps % 3 else "inline")
    dumps += 1
print(json.dumps(dumps))
"""


def models() -> dict[int, trama.Model]:
    scope: dict[str, Any] = {}
    exec(MODELS, scope)
    return {n: scope["model"](n) for n in range(WRITERS + 1)}


def identify(path: Path, candidates: dict[int, trama.Model]) -> int:
    """The writer whose model the document at ``path`` is, every tensor read and verified."""
    loaded = trama.load(path)
    n = loaded.parameters["bag.n"].value
    assert isinstance(n, int), n
    assert n in candidates, n
    for name, entry in loaded.parameters.items():
        if isinstance(entry.value, trama.Tensor):
            assert np.asarray(entry.value).tobytes() == np.asarray(candidates[n].parameters[name].value).tobytes()
    assert loaded.parameters == candidates[n].parameters
    return n


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="POSIX file locks")
def test_concurrent_writers_leave_one_writers_model_at_every_instant(tmp_path: Path) -> None:
    candidates = models()
    path = tmp_path / "model.trama.json"
    trama.dump(candidates[WRITERS], path, weights="external")  # the model before any writer (n = WRITERS)
    start = time.time() + 4.0  # the writers import trama first, then start together
    outcomes: dict[int, Outcome] = {}

    def writer(n: int) -> None:
        code = f"import sys\nsys.argv[1:] = {[str(n), str(path), repr(start), repr(SECONDS)]!r}\n"
        outcomes[n] = run_isolated(code + MODELS + WRITER, timeout_s=60, memory_mb=3_000)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    seen: dict[int, int] = {}
    while any(thread.is_alive() for thread in threads):
        n = identify(path, candidates)
        if time.time() >= start:
            seen[n] = seen.get(n, 0) + 1
    for thread in threads:
        thread.join()
    for n, outcome in outcomes.items():
        assert outcome.returncode == 0, f"writer {n}: {outcome.describe()}"
    dumps = {n: json.loads(outcome.stdout) for n, outcome in outcomes.items()}
    assert all(count >= 5 for count in dumps.values()), dumps
    # Sampled while they wrote: more than one writer's model was seen, each one whole.
    assert sum(seen.values()) >= 10, seen
    assert len([n for n in seen if n < WRITERS]) >= 2, seen

    last = identify(path, candidates)
    assert last < WRITERS
    expected = {path.name}
    document = json.loads(path.read_text())
    if "weights" in document:  # format 1.3 names its weights file once, when it has one
        expected.add(trama.weights_path(path).name)
    assert {p.name for p in tmp_path.iterdir()} == expected
