"""Discovery: the op registries that installed packages contribute through entry points.

``pip install trama-torch`` (or someone's ``trama-lenses``) and their ops are there: every
distribution that names a module in the entry-point group ``trama`` is loaded into one pluggy
plugin manager, and :func:`registry` merges what the plugins say for one framework. The core's
own standard catalog is a plugin like any other (registered directly, so it works from a source
tree too).

One broken plugin never takes the others down. Whatever goes wrong with a plugin is recorded
against its distribution (``trama plugins`` lists it, and it is raised as a
:class:`PluginLoadWarning`), and only what is wrong is left out:

* a plugin that fails to import or to register contributes nothing;
* a hook that raises, or returns something that is not what the hook returns (an ``int`` where
  a list of specs goes, a generator that fails half way, more than
  :data:`~trama.extension._contracts.MAX_HOOK_ITEMS` items), contributes nothing from that call;
* an item of a well-formed return value that breaks the contract (a spec that is not an
  :class:`OpSpec` or has bad names, a factory that is not callable, a spec in a namespace that
  another distribution owns) is dropped alone, and the rest of that return value still counts.

Two distributions that give one op different specifications, or implement one op twice for one
framework, cannot be told apart by guessing: that op is left out (no spec, or a factory that says
why when a node of it is built) and reported under both, and every other op keeps working.

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
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import importlib_metadata
import pluggy

from trama.errors import RegistryError
from trama.extension import hookspecs
from trama.extension._contracts import (
    ContractError,
    checked_callable,
    checked_factory,
    checked_framework,
    checked_op_name,
    checked_opset_version,
    checked_runtime,
    checked_spec,
    clean_message,
    describe_exception,
    mapping_pairs,
    sequence_items,
    type_name,
)
from trama.format._names import shown_name
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
#: What a plugin may not raise without stopping the process: ``KeyboardInterrupt`` (the user
#: asked). Anything else it raises is its failure, reported as such: an error, ``SystemExit`` (a
#: module that calls ``sys.exit()``), ``GeneratorExit``, pytest's ``Skipped`` (an
#: ``importorskip`` at import), a ``BaseException`` of its own. Each handler below re-raises
#: these first, then takes ``BaseException``.
_NOT_ISOLATED = (KeyboardInterrupt,)


class PluginLoadWarning(UserWarning):
    """A plugin could not be loaded, or part of what it declared was refused."""


@dataclass(frozen=True, slots=True)
class PluginInfo:
    """What ``trama plugins`` shows for one plugin. Each error names the hook it comes from
    (``trama_op_specs: item 2 refused: ...``), except those found while loading the plugin."""

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


class _Plugin:
    """One plugin as discovery loaded it (or failed to): its names, its module, what went wrong.

    A plain class, not a dataclass: generating one costs about a millisecond at import, which
    every program using trama would pay for a private record."""

    __slots__ = ("_version", "distribution", "errors", "module", "name", "read_version", "trusted")

    def __init__(
        self,
        name: str,
        distribution: str,
        read_version: Callable[[], str],
        module: Any = None,
        *,
        trusted: bool = False,
    ) -> None:
        self.name = name
        self.distribution = distribution
        #: Reads the distribution's version: only listings and warnings show it, and reading it
        #: parses the distribution's metadata, which discovery need not pay for.
        self.read_version = read_version
        self.module = module
        self.errors: list[str] = []
        self._version: str | None = None
        #: trama's own catalog: its specs are built by trama, and a test holds each of them to
        #: what :func:`checked_spec` would return, so they are used as they are (:func:`_own_spec`).
        self.trusted = trusted

    @property
    def version(self) -> str:
        if self._version is None:
            self._version = self.read_version()
        return self._version

    def report(self, problem: str) -> None:
        """Record a problem against this plugin (once) and warn about it."""
        problem = clean_message(problem)
        if problem not in self.errors:
            self.errors.append(problem)
            _warn(self, problem)


def _own_spec(value: object) -> OpSpec:
    """A spec of trama's own catalog, as it is: a plain :class:`OpSpec` without a factory, which
    :func:`checked_spec` would copy field for field (checking the catalog's two hundred specs
    costs nearly a tenth of discovery). Anything else is checked like any plugin's."""
    if type(value) is OpSpec and value.factory is None:
        return value
    return checked_spec(value)


class _Refused:
    """The marker of an item that failed its check (``None`` may be a valid value)."""


_REFUSED = _Refused()


class _AmbiguousFactory:
    """Stands for the factory of an op that two distributions implement for one framework:
    building a node of it says so, while every other op of that framework still builds."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message

    def __call__(self, node: Any, *, children: Mapping[str, Any], parameters: Mapping[str, Any]) -> Any:
        raise RegistryError(self.message, node_id=getattr(node, "id", None))

    def __repr__(self) -> str:
        return f"<no factory: {self.message}>"


class _DiscoveredRegistry(OpRegistry):
    """A registry built from the plugins, which knows why an op it lacks was left out (two
    distributions disagreed on its spec), so that an unknown op says that rather than "unknown"."""

    def __init__(self, specs: Iterable[OpSpec], *, framework: str | None, left_out: Mapping[str, str]) -> None:
        super().__init__(specs, framework=framework)
        self._left_out = dict(left_out)

    def unknown_op_message(self, name: str) -> str:
        why = self._left_out.get(name)
        return why if why is not None else super().unknown_op_message(name)


def _listed(names: Iterable[str], *, both: bool = False) -> str:
    """``'a' and 'b'`` (``both 'a' and 'b'``), or ``'a', 'b' and 'c'``."""
    quoted = [repr(name) for name in dict.fromkeys(names)]
    if len(quoted) == 2:
        return f"{'both ' if both else ''}{quoted[0]} and {quoted[1]}"
    return f"{', '.join(quoted[:-1])} and {quoted[-1]}" if len(quoted) > 1 else "".join(quoted)


def _origins(plugins: list[_Plugin]) -> list[str]:
    """The distributions of ``plugins``, or their entry points when one distribution is all."""
    distributions = list(dict.fromkeys(plugin.distribution for plugin in plugins))
    if len(distributions) > 1:
        return distributions
    return [f"{plugin.distribution} ({plugin.name})" for plugin in plugins]


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
        #: Ops no registry has, and why (two distributions gave them different specs).
        self._left_out: dict[str, str] = {}
        self._frameworks: list[str] | None = None
        self._opsets: dict[str, int] | None = None
        self._namespace_owners: dict[str, str] = {}
        self._runtimes: list[Any] | None = None
        self._collecting: set[str] = set()
        self._lock = threading.RLock()
        if include_core:
            core_plugin = importlib.import_module(CORE_PLUGIN)

            core = _Plugin("catalog", CORE_DISTRIBUTION, lambda: _version(CORE_DISTRIBUTION), core_plugin, trusted=True)
            self._add(core)
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
            names = {_normalized(_entry_name(entry)), _normalized(_distribution_name(entry))} & wanted
            if names:
                matched |= names
                self._load(entry)
            else:
                skipped.append((_entry_name(entry), _distribution_name(entry)))
        unmatched = tuple(name for name in allowed if _normalized(name) not in matched)
        return PluginSelection(allowed, tuple(skipped), unmatched)

    def selection(self) -> PluginSelection:
        """What ``TRAMA_PLUGINS`` (or the ``selection`` argument) let in and left out."""
        return self._selection

    def _load(self, entry: Any) -> None:
        plugin = _Plugin(_entry_name(entry), _distribution_name(entry), lambda: _distribution_version(entry))
        if isinstance(entry, _UnreadableEntryPoints):
            plugin.report(f"its entry points could not be read: {entry.reason}; nothing of it is loaded")
            self._plugins.append(plugin)
            return
        try:
            plugin.module = entry.load()
        except _NOT_ISOLATED:
            raise
        except BaseException as exc:  # a broken plugin must not take the others down
            plugin.report(f"import failed: {describe_exception(exc)}")
            self._plugins.append(plugin)
            return
        self._add(plugin)

    def _add(self, plugin: _Plugin) -> None:
        try:
            self._manager.register(plugin.module, name=f"{plugin.distribution}:{plugin.name}")
        except _NOT_ISOLATED:
            raise
        except BaseException as exc:  # pluggy refuses malformed hook implementations
            plugin.report(f"registration failed: {describe_exception(exc)}")
        else:
            names = set(self._hook_names(plugin))
            unknown = sorted(names - _HOOK_NAMES)
            if unknown:  # most likely a misspelling, which would otherwise be silently ignored
                plugin.report(f"implements unknown hook(s) {unknown}; the hooks are {sorted(_HOOK_NAMES)}")
            wrappers = sorted(hook for hook, impl in self._hook_impls(plugin) if impl.hookwrapper or impl.wrapper)
            if wrappers:
                plugin.report(
                    f"hook wrapper(s) {wrappers} refused: trama asks each plugin's hooks itself, so a wrapper "
                    "would never see the call; mark the function with a plain @hookimpl"
                )
            if not names:
                plugin.report(
                    f"implements no hook: the entry point names {type_name(plugin.module)}, which has no "
                    f"function marked with @hookimpl named after one of {sorted(_HOOK_NAMES)}"
                )
        self._plugins.append(plugin)

    def _hook_impls(self, plugin: _Plugin) -> list[tuple[str, Any]]:
        """The pluggy hook implementations registered for ``plugin``, with their hooks' names."""
        if plugin.module is None:
            return []
        try:
            if not self._manager.is_registered(plugin.module):
                return []
            return [
                (caller.name, impl)
                for caller in self._manager.get_hookcallers(plugin.module) or []
                for impl in caller.get_hookimpls()
                if impl.plugin is plugin.module
            ]
        except _NOT_ISOLATED:
            raise
        except BaseException:  # an object whose attributes fail when pluggy looks at them
            return []

    def _hook_names(self, plugin: _Plugin) -> list[str]:
        if plugin.module is None:
            return []
        try:
            if not self._manager.is_registered(plugin.module):
                return []
            return [caller.name for caller in (self._manager.get_hookcallers(plugin.module) or [])] + [
                name
                for name in dir(plugin.module)
                if name.startswith("trama_") and self._manager.parse_hookimpl_opts(plugin.module, name) is not None
            ]
        except _NOT_ISOLATED:
            raise
        except BaseException:
            return []

    def _impl(self, plugin: _Plugin, hook: str) -> Any:
        """``plugin``'s implementation of ``hook`` (wrappers never count), or ``None``."""
        if plugin.module is None or not self._manager.is_registered(plugin.module):
            return None
        for impl in getattr(self._manager.hook, hook).get_hookimpls():
            if impl.plugin is plugin.module and not (impl.hookwrapper or impl.wrapper):
                return impl
        return None

    def _ask(
        self,
        plugin: _Plugin,
        hook: str,
        read: Callable[[object, str], list[Any]],
        expected: str,
        *,
        framework: str | None = None,
    ) -> list[Any]:
        """Call one plugin's implementation of ``hook`` and read what it returned with ``read``
        (:func:`sequence_items` or :func:`mapping_pairs`): its items, or none when the plugin
        has no such hook, the call failed, or what it returned is not ``expected`` (reported).
        ``None`` says "nothing for this framework" only from the hooks that take a framework."""
        impl = self._impl(plugin, hook)
        if impl is None:
            return []
        where = hook if framework is None else f"{hook} for {framework!r}"
        kwargs = {"framework": framework} if "framework" in impl.argnames else {}
        try:
            value = impl.function(**kwargs)
        except _NOT_ISOLATED:
            raise
        except BaseException as exc:
            plugin.report(f"{where} failed: {describe_exception(exc)}")
            return []
        if value is None and framework is not None:
            return []
        try:
            return read(value, expected)
        except ContractError as exc:
            plugin.report(f"{where} {exc}; nothing it returned is used")
        except _NOT_ISOLATED:
            raise
        except BaseException as exc:  # a generator or a mapping that fails while it is read
            plugin.report(
                f"{where} returned {type_name(value)}, which failed while read: {describe_exception(exc)}; "
                "nothing it returned is used"
            )
        return []

    @staticmethod
    def _checked(plugin: _Plugin, where: str, what: str, check: Callable[[Any], Any], value: Any) -> Any:
        """``check(value)``, or :data:`_REFUSED` after reporting why the item is left out."""
        try:
            return check(value)
        except ContractError as exc:
            plugin.report(f"{where}: {what} refused: {exc}")
        except _NOT_ISOLATED:
            raise
        except BaseException as exc:  # the item's own code failed while it was looked at
            plugin.report(f"{where}: {what} refused: looking at it raised {describe_exception(exc)}")
        return _REFUSED

    @contextmanager
    def _collecting_once(self, what: str) -> Iterator[None]:
        """Guard against a hook that asks for what its own answer is being collected for
        (``trama.registry()`` inside ``trama_op_specs``): that call fails, naming the cause,
        instead of recursing without end."""
        if what in self._collecting:
            raise RegistryError(
                f"a plugin hook asked for the {what} while trama was collecting them from the plugins; "
                "hooks must not use trama.registry() or the plugin host"
            )
        self._collecting.add(what)
        try:
            yield
        finally:
            self._collecting.discard(what)

    def plugins(self) -> list[PluginInfo]:
        """Every plugin with the hooks it implements and any error, in load order."""
        with self._lock:
            # Exercise every hook once, so that what each plugin got wrong is in its errors.
            for framework in (None, *self.frameworks()):
                self.registry(framework)
            self.runtimes()
            return [
                PluginInfo(
                    plugin.name,
                    plugin.distribution,
                    plugin.version,
                    tuple(sorted(set(self._hook_names(plugin)) & _HOOK_NAMES)),
                    tuple(plugin.errors),
                )
                for plugin in self._plugins
            ]

    def frameworks(self) -> list[str]:
        """Every framework some plugin implements ops for, sorted."""
        with self._lock:
            if self._frameworks is None:
                with self._collecting_once("frameworks"):
                    names: set[str] = set()
                    for plugin in self._plugins:
                        for index, item in enumerate(
                            self._ask(plugin, "trama_frameworks", sequence_items, "a sequence of framework names")
                        ):
                            name = self._checked(plugin, "trama_frameworks", f"item {index}", checked_framework, item)
                            if name is not _REFUSED:
                                names.add(name)
                    self._frameworks = sorted(names)
            return list(self._frameworks)

    def opsets(self) -> dict[str, int]:
        """Opset versions by namespace. A namespace belongs to one distribution: a second one
        declaring it (the catalog's ``trama`` included) is refused and reported."""
        with self._lock:
            if self._opsets is None:
                with self._collecting_once("opsets"):
                    self._opsets, self._namespace_owners = self._collect_opsets()
            return dict(self._opsets)

    def _collect_opsets(self) -> tuple[dict[str, int], dict[str, str]]:
        versions: dict[str, int] = {}
        owners: dict[str, str] = {}
        hook = "trama_opsets"
        for plugin in self._plugins:
            for key, version in self._ask(plugin, hook, mapping_pairs, "a mapping of namespaces to opset versions"):
                namespace = self._checked(
                    plugin, hook, f"key {shown_name(key)}", lambda k: checked_op_name(k, "namespace"), key
                )
                if namespace is _REFUSED:
                    continue
                owner = owners.get(namespace, plugin.distribution)
                if owner != plugin.distribution:
                    plugin.report(f"{hook}: opset {namespace!r} refused: it belongs to {owner!r}")
                    continue
                version = self._checked(plugin, hook, f"opset {namespace!r}", checked_opset_version, version)
                if version is not _REFUSED:
                    owners[namespace] = plugin.distribution
                    versions[namespace] = version
        return versions, owners

    def _all_specs(self) -> dict[str, tuple[OpSpec, str]]:
        """Every plugin's specs by name, with the distribution that gave each."""
        with self._lock:
            if self._specs is None:
                self.opsets()  # namespace owners
                with self._collecting_once("op specifications"):
                    self._specs = self._collect_specs()
            return self._specs

    def _collect_specs(self) -> dict[str, tuple[OpSpec, str]]:
        owners = self._namespace_owners
        hook = "trama_op_specs"
        given: dict[str, list[tuple[OpSpec, _Plugin]]] = {}
        for plugin in self._plugins:
            own: dict[str, OpSpec] = {}
            twice: set[str] = set()
            check = _own_spec if plugin.trusted else checked_spec
            for index, item in enumerate(self._ask(plugin, hook, sequence_items, "a sequence of OpSpec")):
                spec = self._checked(plugin, hook, f"item {index}", check, item)
                if spec is _REFUSED:
                    continue
                if "." not in spec.name and plugin.distribution != CORE_DISTRIBUTION:
                    plugin.report(
                        f"{hook}: op {spec.name!r} refused: names without a namespace belong to the standard "
                        "catalog; name it '<namespace>.<Op>'"
                    )
                    continue
                namespace = op_namespace(spec.name)
                owner = owners.get(namespace, plugin.distribution)
                if owner != plugin.distribution:
                    plugin.report(f"{hook}: op {spec.name!r} refused: the namespace {namespace!r} belongs to {owner!r}")
                    continue
                earlier = own.setdefault(spec.name, spec)
                if earlier != spec and spec.name not in twice:
                    twice.add(spec.name)
                    plugin.report(f"{hook}: op {spec.name!r} refused: it is given twice, with different specifications")
            for name in twice:
                del own[name]
            for name, spec in own.items():
                given.setdefault(name, []).append((spec, plugin))
        specs: dict[str, tuple[OpSpec, str]] = {}
        for name, candidates in given.items():
            first, plugin = candidates[0]
            if all(spec == first for spec, _ in candidates):
                specs[name] = (first, plugin.distribution)
                continue
            origins = _origins([each for _, each in candidates])
            message = (
                f"op {name!r} is specified differently by {_listed(origins)}, so it is left out of every "
                "registry (uninstall one, or ask their authors to agree)"
            )
            self._left_out[name] = message
            for _, each in candidates:
                each.report(f"{hook}: {message}")
        return specs

    def registry(self, framework: str | None) -> OpRegistry:
        """The specs of every plugin, with ``framework``'s implementations and exporters.

        ``framework=None`` gives the specs and every framework's exporters but no factories:
        enough to export and validate, not to import.
        """
        with self._lock:
            cached = self._registries.get(framework)
            if cached is None:
                with self._collecting_once("registry" if framework is None else f"{framework} registry"):
                    cached = self._registries[framework] = self._build_registry(framework)
            return cached

    def _build_registry(self, framework: str | None) -> OpRegistry:
        specs = self._all_specs()
        if framework is not None and framework not in self.frameworks() and framework not in STANDARD_FRAMEWORKS:
            known = ", ".join(self.frameworks()) or "none: install a framework package such as trama-torch"
            raise RegistryError(f"no installed plugin implements ops for framework {framework!r} (known: {known})")
        factories = self._implementations(framework, specs) if framework is not None else {}
        result = _DiscoveredRegistry(
            (
                dataclasses.replace(spec, factory=factories[name]) if name in factories else spec
                for name, (spec, _) in specs.items()
            ),
            framework=framework,
            left_out=self._left_out,
        )
        if framework is not None:
            result.sized = self._sized_leaf(framework)
        frameworks = [framework] if framework is not None else self.frameworks()
        for plugin in self._by_priority("trama_exporters"):
            for each in frameworks:
                where = f"trama_exporters for {each!r}"
                exporters = self._ask(
                    plugin, "trama_exporters", sequence_items, "a sequence of exporters", framework=each
                )
                for index, item in enumerate(exporters):
                    exporter = self._checked(
                        plugin, where, f"item {index}", lambda value: checked_callable(value, "exporter"), item
                    )
                    if exporter is not _REFUSED:
                        result.add_exporter(exporter)
        return result

    def _sized_leaf(self, framework: str) -> Any:
        """The first answer to ``trama_sized_leaf`` for ``framework`` that can be called."""
        hook = "trama_sized_leaf"
        for plugin in self._by_priority(hook):
            implementation = getattr(plugin.module, hook, None)
            if implementation is None:
                continue
            try:
                answer = implementation(framework=framework)
            except _NOT_ISOLATED:
                raise
            except BaseException as exc:
                plugin.report(f"{hook} for {framework!r} failed: {describe_exception(exc)}")
                continue
            if answer is None:
                continue
            if not callable(answer):
                plugin.report(f"{hook} for {framework!r} gave {type(answer).__name__}, which cannot be called")
                continue
            return answer
        return None

    def _implementations(self, framework: str, specs: Mapping[str, tuple[OpSpec, str]]) -> dict[str, Any]:
        """The factory of each op for ``framework``, checked, adapted, and with a factory that
        refuses to build where two distributions implement one op."""
        hook = "trama_op_implementations"
        where = f"{hook} for {framework!r}"
        factories: dict[str, tuple[Any, _Plugin]] = {}
        implementers: dict[str, list[_Plugin]] = {}
        for plugin in self._plugins:
            pairs = self._ask(plugin, hook, mapping_pairs, "a mapping of op names to factories", framework=framework)
            for key, value in pairs:
                name = self._checked(plugin, where, f"key {shown_name(key)}", checked_op_name, key)
                if name is _REFUSED or name in self._left_out:
                    continue
                if name not in specs:
                    plugin.report(f"{where}: implements {name!r}, but no plugin specifies that op; it is ignored")
                    continue
                factory = self._checked(plugin, where, f"op {name!r}", checked_factory, value)
                if factory is _REFUSED:
                    continue
                others = implementers.setdefault(name, [])
                if not any(other is plugin for other in others):  # a mapping may repeat a key
                    others.append(plugin)
                factories.setdefault(name, (factory, plugin))
        ambiguous: dict[str, _AmbiguousFactory] = {}
        for name, plugins in implementers.items():
            if len(plugins) > 1:
                del factories[name]
                message = (
                    f"op {name!r} is implemented for {framework} by {_listed(_origins(plugins), both=True)}, so it "
                    f"cannot be built with {framework} (uninstall one, or leave one out with {SELECTION_VARIABLE})"
                )
                ambiguous[name] = _AmbiguousFactory(message)
                for plugin in plugins:
                    plugin.report(f"{hook}: {message}")
        adapted = self._adapted(framework, factories)
        return {**{name: factory for name, (factory, _) in adapted.items()}, **ambiguous}

    def _by_priority(self, hook: str) -> list[_Plugin]:
        """The plugins in the order their ``hook`` is asked: ``tryfirst`` implementations, then
        plain ones, then ``trylast`` ones, each tier in discovery order (a stable sort)."""
        tiers: dict[int, int] = {}
        for impl in getattr(self._manager.hook, hook).get_hookimpls():
            tiers[id(impl.plugin)] = 0 if impl.tryfirst else 2 if impl.trylast else 1
        return sorted(self._plugins, key=lambda plugin: tiers.get(id(plugin.module), 1))

    def _adapted(self, framework: str, factories: dict[str, tuple[Any, _Plugin]]) -> dict[str, tuple[Any, _Plugin]]:
        """Every factory for ``framework`` passed through the adapters that plugins declare for it
        (``trama_factory_adapters``), so that a pack's factories take the framework's own path.
        An adapter that fails, or turns a factory into something that cannot be called, is left
        out whole: the factories stay as they were before it."""
        hook = "trama_factory_adapters"
        where = f"{hook} for {framework!r}"
        for plugin in self._by_priority(hook):
            adapters = self._ask(plugin, hook, sequence_items, "a sequence of factory adapters", framework=framework)
            for index, item in enumerate(adapters):
                adapter = self._checked(
                    plugin, where, f"item {index}", lambda value: checked_callable(value, "factory adapter"), item
                )
                if adapter is _REFUSED:
                    continue
                adapted: dict[str, tuple[Any, _Plugin]] = {}
                try:
                    for name, (factory, owner) in factories.items():
                        result = adapter(factory)
                        try:
                            checked_factory(result)
                        except ContractError as exc:
                            raise ContractError(f"what it made of the factory of {name!r} is unusable: {exc}") from None
                        adapted[name] = (result, owner)
                except ContractError as exc:
                    plugin.report(f"{where}: adapter {index} refused: {exc}; the factories are used without it")
                except _NOT_ISOLATED:
                    raise
                except BaseException as exc:
                    plugin.report(f"{where}: a factory adapter failed: {describe_exception(exc)}")
                else:
                    factories = adapted
        return factories

    def coverage(self) -> dict[str, frozenset[str]]:
        """For each framework, the names of the ops it has implementations for (an op that two
        distributions implement for a framework has none there: it cannot be built)."""
        return {
            framework: frozenset(
                spec.name
                for spec in self.registry(framework)
                if spec.factory is not None and not isinstance(spec.factory, _AmbiguousFactory)
            )
            for framework in self.frameworks()
        }

    def runtimes(self) -> list[Any]:
        """Every runtime any plugin provides, in load order. Each is a :class:`trama.Runtime`
        whose names no earlier runtime answers to (a later one is refused and reported)."""
        with self._lock:
            if self._runtimes is None:
                with self._collecting_once("runtimes"):
                    self._runtimes = self._collect_runtimes()
            return list(self._runtimes)

    def _collect_runtimes(self) -> list[Any]:
        hook = "trama_runtimes"
        found: list[Any] = []
        taken: dict[str, _Plugin] = {}
        for plugin in self._plugins:
            for index, item in enumerate(self._ask(plugin, hook, sequence_items, "a sequence of trama.Runtime")):
                names = self._checked(plugin, hook, f"item {index}", checked_runtime, item)
                if names is _REFUSED:
                    continue
                clash = next((name for name in names if name in taken), None)
                if clash is not None:
                    # Which of the two is right cannot be told: both are told, and the runtime
                    # that answered to the name first keeps it, as runtime_for_name always did.
                    holder = taken[clash]
                    message = (
                        f"the runtime name {clash!r} is claimed by {_listed(_origins([holder, plugin]))}; the "
                        f"runtime of {holder.distribution!r} keeps it and {names[0]!r} of "
                        f"{plugin.distribution!r} is left out"
                    )
                    holder.report(f"{hook}: {message}")
                    plugin.report(f"{hook}: {message}")
                    continue
                taken.update(dict.fromkeys(names, plugin))
                found.append(item)
        return found


class _UnreadableEntryPoints:
    """Stands for a distribution whose entry points cannot be read (its ``entry_points.txt`` is
    not UTF-8, say), so that it is reported like a plugin that fails to import instead of
    making discovery fail for every distribution."""

    name = "(entry points unreadable)"

    def __init__(self, dist: Any, reason: str) -> None:
        self.dist = dist
        self.reason = reason


def _trama_entry_points() -> list[Any]:
    """The entry points of the group ``trama``, read one distribution at a time: one whose
    metadata is broken is reported and the others still load. As ``importlib.metadata`` does,
    the first distribution of a name on ``sys.path`` hides any later one."""
    found: list[Any] = []
    seen: set[str] = set()
    for dist in importlib_metadata.distributions():
        try:
            key = _name_key(dist)
            if key is not None and key in seen:
                continue
            if key is not None:
                seen.add(key)
            if _may_have_entry_points(dist):
                found.extend(dist.entry_points.select(group=ENTRY_POINT_GROUP))
        except _NOT_ISOLATED:
            raise
        except BaseException as exc:
            found.append(_UnreadableEntryPoints(dist, describe_exception(exc)))
    return found


def _may_have_entry_points(dist: Any) -> bool:
    """Whether ``dist`` may declare entry points in the group ``trama``: not when its
    ``entry_points.txt`` does not even contain the word. Most distributions have no such file or
    list only scripts and other tools' plugins (setuptools some fifty), and parsing every one's
    into entry point objects costs discovery more than the trama plugins do. A file that cannot
    be read raises here, as it would when parsed."""
    read = getattr(dist, "read_text", None)
    if not callable(read):
        return True
    text = read("entry_points.txt")
    return not isinstance(text, str) or ENTRY_POINT_GROUP in text


def _name_key(dist: Any) -> str | None:
    """The name ``dist`` is told apart from others by, normalized; ``None`` when it has none.

    Read as ``importlib.metadata`` reads it for its own ``entry_points()``: from the name of the
    ``.dist-info`` folder where that says it, which costs nothing, else from the metadata, which
    costs a parse. An environment holds a hundred distributions and a few are trama plugins:
    parsing every one's metadata would be most of the time discovery takes.
    """
    name = getattr(dist, "_normalized_name", None)
    if not isinstance(name, str):
        name = dist.name
    return _normalized(name) if isinstance(name, str) else None


def _entry_name(entry: Any) -> str:
    name = getattr(entry, "name", None)
    return name if isinstance(name, str) else "(unnamed entry point)"


def _metadata_field(dist: Any, header: str) -> str | None:
    """The value of the one-line ``header`` (``Name``, ``Version``) of ``dist``'s core metadata,
    or ``None`` where it cannot be read this way (the caller then asks ``dist`` itself).

    Read from the metadata file's header lines: ``dist.name`` would import and run the ``email``
    package's parser (its import alone takes several milliseconds, a sizeable part of discovery)
    for two fields that the core metadata specification writes on one line each
    (``Name: trama-lenses``)."""
    read = getattr(dist, "read_text", None)
    if not callable(read):
        return None
    text = read("METADATA") or read("PKG-INFO")
    if not isinstance(text, str):
        return None
    prefix = f"{header.lower()}:"
    for line in text.splitlines():
        if not line.strip():
            break  # the headers end at the first blank line
        if line[: len(prefix)].lower() == prefix:
            return line[len(prefix) :].strip() or None
    return None


def _distribution_name(entry: Any) -> str:
    try:
        dist = getattr(entry, "dist", None)
        name = None if dist is None else _metadata_field(dist, "Name") or dist.name
    except _NOT_ISOLATED:
        raise
    except BaseException:  # broken metadata
        name = None
    if isinstance(name, str) and name:
        return name
    path = getattr(getattr(entry, "dist", None), "_path", None)  # a PathDistribution's folder, to find it
    return f"(unknown distribution at {path})" if path is not None else "(unknown distribution)"


def _distribution_version(entry: Any) -> str:
    try:
        dist = getattr(entry, "dist", None)
        version = None if dist is None else _metadata_field(dist, "Version") or dist.version
    except _NOT_ISOLATED:
        raise
    except BaseException:
        version = None
    return version if isinstance(version, str) and version else "?"


def _version(distribution: str) -> str:
    try:
        return importlib_metadata.version(distribution)
    except importlib_metadata.PackageNotFoundError:
        return "0+unknown"


def _warn(plugin: _Plugin, message: str) -> None:
    warnings.warn(
        f"trama plugin {plugin.name!r} from {plugin.distribution} {plugin.version}: {message}",
        PluginLoadWarning,
        stacklevel=3,
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
