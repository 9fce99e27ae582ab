"""Discovery: the op registries that installed packages contribute through entry points.

``pip install trama-torch`` (or someone's ``trama-lenses``) and their ops are there: every
distribution that names a module in the entry-point group ``trama`` is loaded into one pluggy
plugin manager, and :func:`registry` merges what the plugins say for one framework. The core's
own standard catalog is a plugin like any other (registered directly, so it works from a source
tree too).

Loading is forgiving where it can be and strict where guessing would be wrong: a plugin that
fails to import is reported (with its distribution and the reason) and the others still load;
two distributions that give one op name different specifications, or implement one op twice for
a framework, make :func:`registry` fail with an error naming both.

The environment variable ``TRAMA_PLUGINS`` restricts which entry points are loaded (as llm's
``LLM_LOAD_PLUGINS`` does): unset, every one; set, a comma-separated allowlist of entry-point or
distribution names (case-insensitive, ``-`` and ``_`` alike); set but empty, none. The standard
catalog is part of trama itself and always there. Entry points left out are never imported.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
import threading
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import importlib_metadata
import pluggy

from trama.errors import RegistryError
from trama.extension import hookspecs
from trama.format._specs import OpRegistry, OpSpec, op_namespace

__all__ = [
    "ENTRY_POINT_GROUP",
    "SELECTION_VARIABLE",
    "PluginHost",
    "PluginInfo",
    "PluginLoadWarning",
    "PluginSelection",
    "implementation_coverage",
    "plugin_host",
    "registry",
    "reset_plugins",
]

ENTRY_POINT_GROUP = "trama"
#: The default of ``PluginHost(selection=...)``: read ``TRAMA_PLUGINS``.
_FromEnvironment = Literal["environment"]
#: The environment variable that restricts which entry points are loaded (see the module doc).
SELECTION_VARIABLE = "TRAMA_PLUGINS"
_HOOK_NAMES = frozenset(name for name in hookspecs.__all__ if name.startswith("trama_"))
#: Frameworks that always have a registry, implemented or not, so that asking for one before its
#: package is installed says which op lacks an implementation rather than that the name is unknown.
STANDARD_FRAMEWORKS = ("numpy", "torch", "jax")
#: Op names without a namespace belong to the standard catalog, shipped by this distribution.
CORE_DISTRIBUTION = "trama"
#: The standard catalog's plugin module, loaded by name like any entry point's (the catalog
#: is a layer above this one).
CORE_PLUGIN = "trama.catalog.plugin"


class PluginLoadWarning(UserWarning):
    """A plugin could not be loaded, or part of what it declared was refused."""


@dataclass(frozen=True, slots=True)
class PluginInfo:
    """What ``trama plugins`` shows for one plugin."""

    name: str
    distribution: str
    version: str
    hooks: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PluginSelection:
    """Which entry points ``TRAMA_PLUGINS`` let in, for ``trama plugins`` to show.

    ``allowed`` is ``None`` when the variable is unset (everything loads), else the names it
    lists (empty: none). ``skipped`` holds ``(entry point, distribution)`` of what was left out,
    ``unmatched`` the listed names that match no installed entry point (likely a typo).
    """

    allowed: tuple[str, ...] | None = None
    skipped: tuple[tuple[str, str], ...] = ()
    unmatched: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return self.allowed is not None


def selection_from_environment(environ: Mapping[str, str] | None = None) -> tuple[str, ...] | None:
    """The allowlist ``TRAMA_PLUGINS`` states: ``None`` when unset, names otherwise."""
    value = (os.environ if environ is None else environ).get(SELECTION_VARIABLE)
    if value is None:
        return None
    return tuple(name.strip() for name in value.split(",") if name.strip())


def _normalized(name: str) -> str:
    """Names compare as package names do (PEP 503): case-insensitive, ``-``, ``_``, ``.`` alike."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(slots=True)
class _Plugin:
    name: str
    distribution: str
    version: str
    module: Any = None
    errors: list[str] = field(default_factory=list)


class PluginHost:
    """One plugin manager and everything derived from it, computed once and cached.

    ``entry_points`` replaces discovery (tests); by default every installed distribution's
    entry points in the group ``trama`` are loaded. ``selection`` is the allowlist of entry-point
    or distribution names to load (``None``: all); by default, what ``TRAMA_PLUGINS`` says.
    """

    def __init__(
        self,
        entry_points: Iterable[Any] | None = None,
        *,
        include_core: bool = True,
        selection: Iterable[str] | _FromEnvironment | None = "environment",
    ) -> None:
        self._manager = pluggy.PluginManager(hookspecs.PROJECT)
        self._manager.add_hookspecs(hookspecs)
        self._plugins: list[_Plugin] = []
        self._registries: dict[str | None, OpRegistry] = {}
        self._specs: dict[str, tuple[OpSpec, str]] | None = None
        self._frameworks: list[str] | None = None
        self._opsets: dict[str, int] | None = None
        self._namespace_owners: dict[str, str] = {}
        self._conflicts: set[str] = set()  # registry-wide errors, kept for `trama plugins`
        self._spec_error: RegistryError | None = None
        self._lock = threading.RLock()
        if include_core:
            core_plugin = importlib.import_module(CORE_PLUGIN)

            self._add(_Plugin("catalog", CORE_DISTRIBUTION, _version(CORE_DISTRIBUTION), core_plugin))
        allowed = selection_from_environment() if selection == "environment" else selection
        self._selection = self._select(
            list(_trama_entry_points() if entry_points is None else entry_points),
            None if allowed is None else tuple(allowed),
        )

    def _select(self, entries: list[Any], allowed: tuple[str, ...] | None) -> PluginSelection:
        """Load the entries the allowlist names (all without one) and record what it left out."""
        if allowed is None:
            for entry in entries:
                self._load(entry)
            return PluginSelection()
        wanted = {_normalized(name) for name in allowed}
        matched: set[str] = set()
        skipped: list[tuple[str, str]] = []
        for entry in entries:
            names = {_normalized(entry.name), _normalized(_distribution_name(entry))} & wanted
            if names:
                matched |= names
                self._load(entry)
            else:
                skipped.append((entry.name, _distribution_name(entry)))
        unmatched = tuple(name for name in allowed if _normalized(name) not in matched)
        return PluginSelection(allowed, tuple(skipped), unmatched)

    def selection(self) -> PluginSelection:
        """What ``TRAMA_PLUGINS`` (or the ``selection`` argument) let in and left out."""
        return self._selection

    def _load(self, entry: Any) -> None:
        dist = getattr(entry, "dist", None)
        version = dist.version if dist is not None else "?"
        plugin = _Plugin(entry.name, _distribution_name(entry), version)
        try:
            plugin.module = entry.load()
        except Exception as exc:  # a broken plugin must not take the others down
            plugin.errors.append(f"import failed: {type(exc).__name__}: {exc}")
            self._plugins.append(plugin)
            _warn(plugin, plugin.errors[-1])
            return
        self._add(plugin)

    def _add(self, plugin: _Plugin) -> None:
        try:
            self._manager.register(plugin.module, name=f"{plugin.distribution}:{plugin.name}")
        except Exception as exc:  # pluggy refuses malformed hook implementations
            plugin.errors.append(f"registration failed: {type(exc).__name__}: {exc}")
            _warn(plugin, plugin.errors[-1])
        else:
            unknown = sorted(set(self._hook_names(plugin)) - _HOOK_NAMES)
            if unknown:  # most likely a misspelling, which would otherwise be silently ignored
                plugin.errors.append(f"implements unknown hook(s) {unknown}; the hooks are {sorted(_HOOK_NAMES)}")
                _warn(plugin, plugin.errors[-1])
        self._plugins.append(plugin)

    def _hook_names(self, plugin: _Plugin) -> list[str]:
        if plugin.module is None or not self._manager.is_registered(plugin.module):
            return []
        return [impl.name for impl in (self._manager.get_hookcallers(plugin.module) or [])] + [
            name
            for name in dir(plugin.module)
            if name.startswith("trama_") and self._manager.parse_hookimpl_opts(plugin.module, name) is not None
        ]

    def _call(self, plugin: _Plugin, hook: str, **kwargs: Any) -> Any:
        """Call one plugin's implementation of ``hook``; ``None`` if it has none or it failed."""
        if plugin.module is None or not self._manager.is_registered(plugin.module):
            return None
        for impl in getattr(self._manager.hook, hook).get_hookimpls():
            if impl.plugin is plugin.module:
                try:
                    return impl.function(**kwargs)
                except Exception as exc:
                    plugin.errors.append(f"{hook} failed: {type(exc).__name__}: {exc}")
                    _warn(plugin, plugin.errors[-1])
                    return None
        return None

    def plugins(self) -> list[PluginInfo]:
        """Every plugin with the hooks it implements and any error, in load order."""
        # Exercise every hook once, so that what each plugin got wrong is in its errors.
        for framework in (None, *self.frameworks()):
            try:
                self.registry(framework)
            except RegistryError as exc:
                self._conflicts.add(str(exc.message))
        infos = []
        for plugin in self._plugins:
            hooks = tuple(sorted(set(self._hook_names(plugin)) & _HOOK_NAMES))
            errors = list(plugin.errors)
            errors.extend(c for c in sorted(self._conflicts) if repr(plugin.distribution) in c)
            infos.append(PluginInfo(plugin.name, plugin.distribution, plugin.version, hooks, tuple(errors)))
        return infos

    def frameworks(self) -> list[str]:
        """Every framework some plugin implements ops for, sorted."""
        if self._frameworks is None:
            names: set[str] = set()
            for plugin in self._plugins:
                names.update(self._call(plugin, "trama_frameworks") or ())
            self._frameworks = sorted(names)
        return list(self._frameworks)

    def opsets(self) -> dict[str, int]:
        """Opset versions by namespace. A namespace belongs to one distribution: a second one
        declaring it (the catalog's ``trama`` included) is refused and reported."""
        if self._opsets is None:
            versions: dict[str, int] = {}
            owners: dict[str, str] = {}
            for plugin in self._plugins:
                for namespace, version in (self._call(plugin, "trama_opsets") or {}).items():
                    owner = owners.get(namespace, plugin.distribution)
                    if owner != plugin.distribution:
                        plugin.errors.append(f"opset {namespace!r} refused: it belongs to {owner!r}")
                        _warn(plugin, plugin.errors[-1])
                    elif type(version) is not int or version < 1:
                        plugin.errors.append(f"opset {namespace!r} refused: version {version!r} is not a positive int")
                        _warn(plugin, plugin.errors[-1])
                    else:
                        owners[namespace] = plugin.distribution
                        versions[namespace] = version
            self._opsets = versions
            self._namespace_owners = owners
        return dict(self._opsets)

    def _all_specs(self) -> dict[str, tuple[OpSpec, str]]:
        """Every plugin's specs by name, with the distribution that gave each."""
        if self._spec_error is not None:  # collected once: its hooks are not called again
            raise self._spec_error
        if self._specs is None:
            try:
                self._specs = self._collect_specs()
            except RegistryError as exc:
                self._spec_error = exc
                raise
        return self._specs

    def _collect_specs(self) -> dict[str, tuple[OpSpec, str]]:
        self.opsets()  # namespace owners
        owners = self._namespace_owners
        specs: dict[str, tuple[OpSpec, str]] = {}
        conflicts: list[str] = []
        for plugin in self._plugins:
            for spec in self._call(plugin, "trama_op_specs") or ():
                if not isinstance(spec, OpSpec):
                    plugin.errors.append(f"trama_op_specs gave {type(spec).__name__}, not an OpSpec")
                    _warn(plugin, plugin.errors[-1])
                    continue
                if "." not in spec.name and plugin.distribution != CORE_DISTRIBUTION:
                    plugin.errors.append(
                        f"op {spec.name!r} refused: names without a namespace belong to the standard "
                        "catalog; name it '<namespace>.<Op>'"
                    )
                    _warn(plugin, plugin.errors[-1])
                    continue
                namespace = op_namespace(spec.name)
                owner = owners.get(namespace, plugin.distribution)
                if owner != plugin.distribution:
                    plugin.errors.append(f"op {spec.name!r} refused: the namespace {namespace!r} belongs to {owner!r}")
                    _warn(plugin, plugin.errors[-1])
                    continue
                spec = dataclasses.replace(spec, factory=None)
                known = specs.get(spec.name)
                if known is None:
                    specs[spec.name] = (spec, plugin.distribution)
                elif known[0] != spec:
                    conflicts.append(
                        f"op {spec.name!r} is specified differently by {known[1]!r} and {plugin.distribution!r}"
                    )
        if conflicts:
            raise RegistryError("; ".join(conflicts) + " (uninstall one, or ask their authors to agree)")
        return specs

    def registry(self, framework: str | None) -> OpRegistry:
        """The specs of every plugin, with ``framework``'s implementations and exporters.

        ``framework=None`` gives the specs and every framework's exporters but no factories:
        enough to export and validate, not to import.
        """
        with self._lock:
            cached = self._registries.get(framework)
            if cached is None:
                cached = self._registries[framework] = self._build_registry(framework)
            return cached

    def _build_registry(self, framework: str | None) -> OpRegistry:
        specs = self._all_specs()
        if framework is not None and framework not in self.frameworks() and framework not in STANDARD_FRAMEWORKS:
            known = ", ".join(self.frameworks()) or "none: install a framework package such as trama-torch"
            raise RegistryError(f"no installed plugin implements ops for framework {framework!r} (known: {known})")
        factories: dict[str, tuple[Any, str]] = {}
        problems: list[str] = []
        for plugin in self._plugins if framework is not None else ():
            for name, factory in (self._call(plugin, "trama_op_implementations", framework=framework) or {}).items():
                if name not in specs:
                    plugin.errors.append(f"implements {name!r} for {framework}, but no plugin specifies that op")
                    _warn(plugin, plugin.errors[-1])
                elif name in factories:
                    problems.append(
                        f"op {name!r} is implemented for {framework} by both {factories[name][1]!r} "
                        f"and {plugin.distribution!r}"
                    )
                else:
                    factories[name] = (factory, plugin.distribution)
        if problems:
            raise RegistryError("; ".join(problems))
        if framework is not None:
            factories = self._adapted(framework, factories)
        result = OpRegistry(
            (
                dataclasses.replace(spec, factory=factories[name][0] if name in factories else None)
                for name, (spec, _) in specs.items()
            ),
            framework=framework,
        )
        frameworks = [framework] if framework is not None else self.frameworks()
        for plugin in self._by_priority("trama_exporters"):
            for each in frameworks:
                for exporter in self._call(plugin, "trama_exporters", framework=each) or ():
                    result.add_exporter(exporter)
        return result

    def _by_priority(self, hook: str) -> list[_Plugin]:
        """The plugins in the order their ``hook`` is asked: ``tryfirst`` implementations, then
        plain ones, then ``trylast`` ones, each tier in discovery order (a stable sort)."""
        tiers: dict[int, int] = {}
        for impl in getattr(self._manager.hook, hook).get_hookimpls():
            tiers[id(impl.plugin)] = 0 if impl.tryfirst else 2 if impl.trylast else 1
        return sorted(self._plugins, key=lambda plugin: tiers.get(id(plugin.module), 1))

    def _adapted(self, framework: str, factories: dict[str, tuple[Any, str]]) -> dict[str, tuple[Any, str]]:
        """Every factory for ``framework`` passed through the adapters that plugins declare for it
        (``trama_factory_adapters``), so that a pack's factories take the framework's own path."""
        for plugin in self._by_priority("trama_factory_adapters"):
            for adapter in self._call(plugin, "trama_factory_adapters", framework=framework) or ():
                try:
                    factories = {name: (adapter(factory), dist) for name, (factory, dist) in factories.items()}
                except Exception as exc:
                    plugin.errors.append(f"a factory adapter failed: {type(exc).__name__}: {exc}")
                    _warn(plugin, plugin.errors[-1])
        return factories

    def coverage(self) -> dict[str, frozenset[str]]:
        """For each framework, the names of the ops it has implementations for."""
        return {
            framework: frozenset(spec.name for spec in self.registry(framework) if spec.factory is not None)
            for framework in self.frameworks()
        }

    def runtimes(self) -> list[Any]:
        """Every runtime any plugin provides."""
        found: list[Any] = []
        for plugin in self._plugins:
            found.extend(self._call(plugin, "trama_runtimes") or ())
        return found


def _trama_entry_points() -> Iterable[Any]:
    return importlib_metadata.entry_points(group=ENTRY_POINT_GROUP)


def _distribution_name(entry: Any) -> str:
    dist = getattr(entry, "dist", None)
    return str(dist.name) if dist is not None else "(unknown distribution)"


def _version(distribution: str) -> str:
    try:
        return importlib_metadata.version(distribution)
    except importlib_metadata.PackageNotFoundError:
        return "0+unknown"


def _warn(plugin: _Plugin, message: str) -> None:
    warnings.warn(
        f"trama plugin {plugin.name!r} from {plugin.distribution} {plugin.version}: {message}",
        PluginLoadWarning,
        stacklevel=4,
    )


_host: PluginHost | None = None
_host_lock = threading.Lock()


def plugin_host() -> PluginHost:
    """The process-wide plugin host, created on first use."""
    global _host
    with _host_lock:
        if _host is None:
            _host = PluginHost()
        return _host


def reset_plugins(host: PluginHost | None = None) -> None:
    """Forget what was discovered (or install ``host`` instead): for tests and for programs
    that install packages while running."""
    global _host
    with _host_lock:
        _host = host


def registry(framework: str | None = None) -> OpRegistry:
    """The :class:`~trama.OpRegistry` for ``framework`` (``"numpy"``, ``"torch"``, ``"jax"``...):
    the specifications of every installed plugin plus that framework's implementations."""
    return plugin_host().registry(framework)


def implementation_coverage() -> dict[str, frozenset[str]]:
    """For each installed framework, the ops it implements (the ``docs/ops.md`` matrix)."""
    return plugin_host().coverage()
