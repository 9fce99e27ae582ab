"""trama-jax's plugin: cheap to discover, and its deferred table is the real one."""

from __future__ import annotations

import json
import subprocess
import sys

from trama.catalog import standard_specs
from trama_jax._registry import implementations


def test_the_real_table_implements_exactly_the_catalog() -> None:
    assert set(implementations()) == {spec.name for spec in standard_specs()}


def test_listing_plugins_and_the_jax_table_does_not_import_jax() -> None:
    probe = (
        "import json, sys, trama\n"
        "from trama.plugins import plugin_host\n"
        "plugin_host().plugins()\n"
        "names = trama.registry('jax').names()\n"
        "print(json.dumps({'ops': len(names), 'jax': 'jax' in sys.modules}))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    facts = json.loads(result.stdout)
    assert facts["jax"] is False
    assert facts["ops"] >= len(standard_specs())
