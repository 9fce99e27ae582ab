"""An op pack written against trama 0.3.0 keeps working on 0.4 with DeprecationWarnings only, and
the same pack moved to the 0.4 names works with none.

``tests/fixtures/legacy_pack/acme`` is a small pack (``acme.Scale``, ``acme.Clip``; numpy, torch
and JAX) written exactly as trama 0.3.0's docs/plugins.md taught: ``trama.hookspecs.hookimpl``,
``trama.deferred.deferred_factories``, ``trama.plugins.reset_plugins``/``plugin_host``,
``trama.cli.main``, ``trama_jax.kernel.JaxKernel`` and a JAX factory wrapped in
``trama_jax.model.bind_kernel`` whose result its tests call directly. ``acme_updated`` is the same
pack after "Migrating from 0.3 to 0.4". Each runs its own tests, unmodified, in a child pytest.

The pack is "installed" without building anything: its package copied into a scratch folder
with a ``.dist-info`` holding its metadata and its ``trama`` entry point, that folder on
``PYTHONPATH`` — what discovery reads from a real install. Its pyproject sets pytest's
``filterwarnings = ["error"]``, as the 0.3 docs advised, so every warning fails its tests; the
legacy run lets through exactly trama's deprecations (``-W always:trama:DeprecationWarning``,
the message must start with ``trama``) and the updated run turns every DeprecationWarning into
an error.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

PACKS = Path(__file__).resolve().parent / "fixtures" / "legacy_pack"
TESTS = 16

#: The old paths the legacy pack uses; each must warn, naming where it went.
EXPECTED = {
    "trama.plugins": "trama.extension",
    "trama.hookspecs": "trama.extension",
    "trama.deferred": "trama.extension",
    "trama.cli": "trama.tools.cli",
    "trama.serialization": "trama.format",
    "trama_jax.model.bind_kernel": "trama_factory_adapters",
}


def _install(pack: Path, scratch: Path) -> tuple[Path, Path]:
    tree = scratch / "pack"
    shutil.copytree(pack, tree, ignore=shutil.ignore_patterns("__pycache__", ".*"))
    site = scratch / "site"
    shutil.copytree(tree / "src" / "trama_acme", site / "trama_acme")
    info = site / "trama_acme-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: trama-acme\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[trama]\nacme = trama_acme.plugin\n")
    (info / "top_level.txt").write_text("trama_acme\n")
    shutil.rmtree(tree / "src")  # the tests must find the pack where it is installed
    return tree, site


def _run_pack_tests(pack: Path, scratch: Path, *warning_options: str) -> subprocess.CompletedProcess[str]:
    tree, site = _install(pack, scratch)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("PYTEST_") and key not in ("TRAMA_PLUGINS", "PYTHONPATH", "PYTHONWARNINGS")
    }
    env["PYTHONPATH"] = str(site)
    env["PYTHONNOUSERSITE"] = "1"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rw", *warning_options]
    return subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=540, check=False)


def _warnings(output: str) -> list[tuple[str, str]]:
    """(category, message) of each warning in pytest's warnings summary."""
    summary = output.partition("warnings summary")[2].partition("-- Docs:")[0]
    return re.findall(r"^\s+\S+:\d+: (\w+): (.*)$", summary, flags=re.M)


def test_the_0_3_pack_passes_unmodified_with_deprecation_warnings_only(tmp_path: Path) -> None:
    done = _run_pack_tests(PACKS / "acme", tmp_path, "-W", "always:trama:DeprecationWarning")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert re.search(rf"\b{TESTS} passed\b", output), output[-3000:]
    found = _warnings(output)
    assert found, output[-3000:]
    assert {category for category, _ in found} == {"DeprecationWarning"}
    assert all("is deprecated since trama 0.4.0 and will be removed in 0.5.0" in message for _, message in found)
    for old, home in EXPECTED.items():
        assert any(message.startswith(f"{old} is deprecated") and home in message for _, message in found), (
            old,
            found,
        )


def test_the_pack_moved_to_the_0_4_names_passes_with_no_warning(tmp_path: Path) -> None:
    done = _run_pack_tests(PACKS / "acme_updated", tmp_path, "-W", "error::DeprecationWarning")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert re.search(rf"\b{TESTS} passed\b", output), output[-3000:]
    assert _warnings(output) == []
    assert "warnings summary" not in output


def _files(root: Path) -> set[Path]:
    """The pack's own files, without caches (``__pycache__``, ``.ruff_cache``...)."""
    found = {path.relative_to(root) for path in root.rglob("*") if path.is_file()}
    return {path for path in found if not any(part.startswith((".", "__pycache__")) for part in path.parts)}


def test_the_two_copies_differ_only_where_the_migration_guide_says() -> None:
    """The updated copy is the legacy one with its imports and the JAX factory contract changed:
    the same files, the same tests."""
    legacy, updated = _files(PACKS / "acme"), _files(PACKS / "acme_updated")
    assert legacy == updated
    old_imports = re.compile(
        r"from (trama\.(plugins|hookspecs|deferred|cli|serialization|export)|trama_jax\.(kernel|model))\b"
    )
    for path in sorted(updated):
        if path.suffix == ".py":
            assert not old_imports.search((PACKS / "acme_updated" / path).read_text()), path
    assert "bind_kernel" not in (PACKS / "acme_updated" / "src" / "trama_acme" / "plugin.py").read_text()
