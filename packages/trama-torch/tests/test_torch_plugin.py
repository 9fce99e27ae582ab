"""trama-torch's plugin: cheap to discover, and its deferred table is the real one."""

from __future__ import annotations

import json
import subprocess
import sys

import trama
from trama.catalog import standard_specs
from trama_torch.factories import implementations


def test_the_real_table_implements_exactly_the_catalog() -> None:
    assert set(implementations()) == {spec.name for spec in standard_specs()}


def test_listing_plugins_runtimes_and_the_torch_table_does_not_import_torch() -> None:
    probe = (
        "import json, sys, trama\n"
        "from trama.extension._plugins import plugin_host\n"
        "plugin_host().plugins()\n"
        "names = trama.registry('torch').names()\n"
        "print(json.dumps({'ops': len(names), 'torch': 'torch' in sys.modules}))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    facts = json.loads(result.stdout)
    assert facts == {"ops": len(trama.registry("torch").names()), "torch": False}


def test_the_first_build_loads_torch_and_gives_a_real_module() -> None:
    import torch

    model = trama.export_model(torch.nn.Linear(3, 2), inputs=["x"], outputs=["y"])
    assert isinstance(trama.import_model(model, registry=trama.registry("torch")), torch.nn.Linear)
