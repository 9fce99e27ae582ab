"""One broken plugin must not take the others down (issue 14).

A plugin's hooks return untrusted values: an ``int`` for specs, a list where a mapping goes, a
generator that raises or never ends, ``None``, objects of the wrong class inside a correct
container, names that are no names, factories that cannot be called, more items than anyone
needs. Each case below installs such a plugin next to a good one ("trama-acme", whose op
``acme.Double`` runs on numpy) and trama-numpy, and checks the promise of docs/plugins.md,
section 11:

* the bad plugin is reported: its distribution, the hook, and what was wrong (``PluginInfo``,
  the warning, and ``trama plugins``, which exits 1 and prints no traceback);
* only the bad part is left out: the good plugin's op and the catalog still resolve,
  ``trama.registry("numpy")`` works, and a model using both runs on the numpy runtime.

Most cases use fake entry points in this process (as tests/test_plugins.py does). The cases
that need real installed distributions (an entry point that names nothing, a module that exits
at import, an unreadable ``entry_points.txt``) write ``.dist-info`` folders to a temporary
folder put on ``PYTHONPATH``, and run the command line in a bounded child process.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import re
import textwrap
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from test_plugins import FakeEntryPoint

import trama
from trama import INPUT, Model, Node, OpSpec, Parameter, ParameterSchema, Ref, Tensor, TramaError
from trama.extension import PluginHost, PluginLoadWarning, hookimpl, reset_plugins
from trama.extension._contracts import MAX_HOOK_ITEMS, RUNTIME_CLASS
from trama.tools import main

from .isolation import run_cli, run_isolated

trama_numpy_plugin = pytest.importorskip("trama_numpy.plugin")

# --- the good plugins --------------------------------------------------------------------------


def build_double(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Any:
    """acme.Double's numpy factory: a kernel ``y = 2 x``."""

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        return {"y": inputs["x"] * 2}

    return kernel


DOUBLE = OpSpec("acme.Double", inputs=("x",), outputs=("y",))


def acme_plugin() -> Any:
    @hookimpl
    def trama_op_specs() -> Sequence[OpSpec]:
        return [DOUBLE]

    @hookimpl
    def trama_opsets() -> Mapping[str, int]:
        return {"acme": 1}

    @hookimpl
    def trama_frameworks() -> Sequence[str]:
        return ["numpy"]

    @hookimpl
    def trama_op_implementations(framework: str) -> Mapping[str, Any] | None:
        return {"acme.Double": build_double} if framework == "numpy" else None

    return SimpleNamespace(
        trama_op_specs=trama_op_specs,
        trama_opsets=trama_opsets,
        trama_frameworks=trama_frameworks,
        trama_op_implementations=trama_op_implementations,
    )


WEIGHT = np.array([[1.0, -2.0], [0.5, 4.0]], dtype=np.float32)
BIAS = np.array([0.25, -0.75], dtype=np.float32)
X = np.array([[1.0, 2.0], [-3.0, 0.5]], dtype=np.float32)


def two_plugin_model() -> Model:
    """A catalog Linear (implemented by trama-numpy) feeding acme.Double (by trama-acme)."""
    return Model(
        inputs=["x"],
        outputs=[Ref("double", "y")],
        nodes=[
            Node(
                "linear",
                "Linear",
                {"x": Ref(INPUT, "x")},
                ["y"],
                {"in_features": "n", "out_features": "n", "weight": "linear.weight", "bias": "linear.bias"},
            ),
            Node("double", "acme.Double", {"x": Ref("linear", "y")}, ["y"]),
        ],
        parameters={
            "n": Parameter(2),
            "linear.weight": Parameter(Tensor.from_array(WEIGHT), learnable=True),
            "linear.bias": Parameter(Tensor.from_array(BIAS), learnable=True),
        },
    )


def expected_output() -> np.ndarray:
    return (X @ WEIGHT.T + BIAS) * 2


# --- the bad plugins ---------------------------------------------------------------------------


def plugin_with(**hooks: Callable[..., Any]) -> Any:
    """A plugin module whose hooks are these functions (marked with ``hookimpl``)."""
    return SimpleNamespace(**{name: hookimpl(function) for name, function in hooks.items()})


def returning(value: Any) -> Callable[..., Any]:
    """A hook that returns ``value`` (a fresh one each call when ``value`` is a function)."""

    def hook(framework: str = "numpy") -> Any:
        return value() if callable(value) and not isinstance(value, type) else value

    return hook


def failing_generator() -> Iterator[Any]:
    yield DOUBLE_ELSEWHERE
    raise ValueError("the generator broke half way")


#: How many items the "endless" generator below gave: trama must stop reading just past the limit.
ENDLESS_READ: list[int] = []


def endless() -> Iterator[Any]:
    """Endless as far as trama can tell (it stops, failing, long after any sane reader would,
    so that a regression fails here instead of hanging the suite)."""
    ENDLESS_READ.clear()
    for count in itertools.count(1):
        ENDLESS_READ.append(count)
        if count > 100 * MAX_HOOK_ITEMS:
            raise AssertionError("trama read the endless generator far past its limit")
        yield DOUBLE_ELSEWHERE


DOUBLE_ELSEWHERE = OpSpec("bad.Double", inputs=("x",), outputs=("y",))


def spec_with(**changes: Any) -> OpSpec:
    """An OpSpec whose fields were changed after it was made (the dataclass is frozen, but a
    plugin can still do it): what ``OpSpec(...)`` itself would have refused, or never checks."""
    spec = OpSpec("bad.Op", inputs=("x",), outputs=("y",), parameters=(ParameterSchema("k", ("int",)),))
    for name, value in changes.items():
        object.__setattr__(spec, name, value)
    return spec


class ExplodingSpec(OpSpec):
    """An OpSpec subclass one of whose fields cannot be read."""

    def __getattribute__(self, name: str) -> Any:
        if name == "doc":
            raise RuntimeError("no docs for you")
        return super().__getattribute__(name)


class UnreadableMapping(Mapping[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        raise OSError("the mapping is on a network drive that went away")

    def __len__(self) -> int:
        return 1


class NotCallableFromNode:
    from_node = 42


class ImpostorRuntime(trama.Runtime):
    """A runtime that answers to trama-numpy's name."""

    framework = "numpy"
    aliases = ("default",)

    def name(self) -> str:
        return "numpy"

    def prepare(self, model: Model, placement: Mapping[str, str] | None = None) -> Any:
        raise AssertionError("the impostor must never be used")


class NamelessRuntime(trama.Runtime):
    framework = "bad"

    def name(self) -> str:
        raise RuntimeError("who am I")

    def prepare(self, model: Model, placement: Mapping[str, str] | None = None) -> Any:
        raise AssertionError("never used")


class StringAliasesRuntime(trama.Runtime):
    framework = "bad"
    aliases = "default"  # type: ignore[assignment]  # a string, not a tuple: every letter would be an alias

    def prepare(self, model: Model, placement: Mapping[str, str] | None = None) -> Any:
        raise AssertionError("never used")


def adapter_to_none(factory: Any) -> Any:
    return None


def adapter_that_raises(factory: Any) -> Any:
    raise ZeroDivisionError("adapters cannot divide")


def calls_the_registry() -> Sequence[OpSpec]:
    trama.registry(None)  # a hook must not do this: the registry is being built from it
    return [DOUBLE_ELSEWHERE]


class HostileMessage(Exception):
    def __str__(self) -> str:
        return "line one\nerror: forged line\x1b[2J" + "x" * 5000


class UnprintableMessage(Exception):
    def __str__(self) -> str:
        raise RuntimeError("cannot print myself")


def raises(exc: BaseException) -> Callable[[], Any]:
    def hook() -> Any:
        raise exc

    return hook


@dataclass(frozen=True)
class Case:
    """A bad plugin: its hooks, and what its report must say (a regex on one of its errors,
    which starts with ``hook``)."""

    id: str
    hooks: dict[str, Callable[..., Any]]
    hook: str
    reason: str
    #: Load the bad plugin after the good ones (by default it comes first, so that it sees
    #: everything first). The first distribution to claim a namespace or a runtime name keeps it.
    last: bool = False
    #: Whether the good plugins are told too (a runtime name claimed twice is reported under both).
    shared: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


HUGE = 10 * MAX_HOOK_ITEMS

CASES = [
    # trama_op_specs: a sequence of OpSpec
    Case("specs-int", {"trama_op_specs": returning(5)}, "trama_op_specs", r"returned int, not a sequence of OpSpec"),
    Case("specs-none", {"trama_op_specs": returning(None)}, "trama_op_specs", r"returned None, not a sequence"),
    Case("specs-str", {"trama_op_specs": returning("acme.Double")}, "trama_op_specs", r"returned str, not a sequence"),
    Case("specs-dict", {"trama_op_specs": returning({"bad.Op": DOUBLE})}, "trama_op_specs", r"returned dict, not"),
    Case(
        "specs-generator-raises",
        {"trama_op_specs": returning(failing_generator)},
        "trama_op_specs",
        r"returned generator, which failed while read: ValueError: the generator broke half way; nothing it",
    ),
    Case(
        "specs-endless",
        {"trama_op_specs": returning(endless)},
        "trama_op_specs",
        rf"returned more than the {MAX_HOOK_ITEMS} items allowed",
        extra={"read_at_most": MAX_HOOK_ITEMS + 1},
    ),
    Case(
        "specs-huge-list",
        {"trama_op_specs": returning(lambda: [DOUBLE_ELSEWHERE] * HUGE)},
        "trama_op_specs",
        rf"returned {HUGE} items, more than the {MAX_HOOK_ITEMS} allowed",
    ),
    Case(
        "specs-wrong-class-item",
        {"trama_op_specs": returning(lambda: [{"name": "bad.Op"}, DOUBLE_ELSEWHERE])},
        "trama_op_specs",
        r"item 0 refused: it is dict, not an OpSpec",
        extra={"kept_spec": "bad.Double"},  # the good item of the same list still counts
    ),
    Case(
        "specs-name-not-a-string",
        {"trama_op_specs": returning(lambda: [spec_with(name=5)])},
        "trama_op_specs",
        r"item 0 refused: the op name 5 is not a string",
    ),
    Case(
        "specs-name-forges-lines",
        {"trama_op_specs": returning(lambda: [spec_with(name="bad.Op\n\x1b[31mLinear")])},
        "trama_op_specs",
        r"item 0 refused: the op name 'bad.Op\\n\\x1b\[31mLinear' is not a dotted identifier",
    ),
    Case(
        "specs-port-not-a-name",
        {"trama_op_specs": returning(lambda: [spec_with(inputs=("x y",))])},
        "trama_op_specs",
        r"op 'bad.Op': input name 'x y' is not a name",
    ),
    Case(
        "specs-ports-a-list",
        {"trama_op_specs": returning(lambda: [spec_with(outputs=["y"])])},
        "trama_op_specs",
        r"op 'bad.Op': output is list, not a tuple of names",
    ),
    Case(
        "specs-too-many-ports",
        {"trama_op_specs": returning(lambda: [spec_with(inputs=tuple(f"x{i}" for i in range(HUGE)))])},
        "trama_op_specs",
        rf"input has {HUGE} names, more than the {MAX_HOOK_ITEMS} allowed",
    ),
    Case(
        "specs-flag-not-a-bool",
        {"trama_op_specs": returning(lambda: [spec_with(composite="yes")])},
        "trama_op_specs",
        r"op 'bad.Op': composite is str, not a bool",
    ),
    Case(
        "specs-slot-not-a-schema",
        {"trama_op_specs": returning(lambda: [spec_with(parameters=(ParameterSchema("k"), "k"))])},
        "trama_op_specs",
        r"op 'bad.Op': a parameter is str, not a ParameterSchema",
    ),
    Case(
        "specs-since-not-an-int",
        {"trama_op_specs": returning(lambda: [spec_with(since="1")])},
        "trama_op_specs",
        r"op 'bad.Op': since version '1' is not an int",
    ),
    Case(
        "specs-fields-raise",
        {"trama_op_specs": returning(lambda: [ExplodingSpec("bad.Op")])},
        "trama_op_specs",
        r"item 0 refused: looking at it raised RuntimeError: no docs for you",
    ),
    Case(
        "specs-given-twice-differently",
        {"trama_op_specs": returning(lambda: [DOUBLE_ELSEWHERE, OpSpec("bad.Double", inputs=("z",))])},
        "trama_op_specs",
        r"op 'bad.Double' refused: it is given twice, with different specifications",
    ),
    Case(
        "specs-in-a-namespace-it-does-not-own",
        {"trama_op_specs": returning(lambda: [OpSpec("acme.Double", inputs=("evil",))])},
        "trama_op_specs",
        r"op 'acme.Double' refused: the namespace 'acme' belongs to 'trama-acme'",
        last=True,
    ),
    Case(
        "specs-in-the-catalog",
        {"trama_op_specs": returning(lambda: [OpSpec("Linear", inputs=("evil",))])},
        "trama_op_specs",
        r"op 'Linear' refused: names without a namespace belong to the standard catalog",
    ),
    Case("specs-raises-systemexit", {"trama_op_specs": raises(SystemExit(3))}, "trama_op_specs", r"failed: SystemExit"),
    Case(
        "specs-asks-for-the-registry",
        {"trama_op_specs": calls_the_registry},
        "trama_op_specs",
        r"failed: RegistryError: a plugin hook asked for the op specifications while trama was collecting them",
    ),
    # trama_opsets: a mapping of namespace to version
    Case(
        "opsets-list",
        {"trama_opsets": returning(lambda: [("bad", 1)])},
        "trama_opsets",
        r"returned list, not a mapping of namespaces to opset versions",
    ),
    Case(
        "opsets-version-a-string",
        {"trama_opsets": returning(lambda: {"bad": "1"})},
        "trama_opsets",
        r"opset 'bad' refused: version '1' is not an int from 1",
    ),
    Case(
        "opsets-version-a-bool",
        {"trama_opsets": returning(lambda: {"bad": True})},
        "trama_opsets",
        r"opset 'bad' refused: version True is not an int",
    ),
    Case(
        "opsets-version-huge",
        {"trama_opsets": returning(lambda: {"bad": 10**5000})},
        "trama_opsets",
        r"opset 'bad' refused: version a huge int is not an int from 1 to 2147483647",
    ),
    Case(
        "opsets-key-not-a-string",
        {"trama_opsets": returning(lambda: {5: 1})},
        "trama_opsets",
        r"key 5 refused: the namespace 5 is not a string",
    ),
    Case(
        "opsets-someone-elses",
        {"trama_opsets": returning(lambda: {"acme": 7, "trama": 9})},
        "trama_opsets",
        r"opset 'acme' refused: it belongs to 'trama-acme'",
        last=True,
    ),
    Case(
        "opsets-mapping-unreadable",
        {"trama_opsets": returning(lambda: UnreadableMapping())},
        "trama_opsets",
        r"returned .*UnreadableMapping, which failed while read: OSError: the mapping is on a network drive",
    ),
    # trama_frameworks: a sequence of names
    Case(
        "frameworks-a-string",
        {"trama_frameworks": returning("numpy")},
        "trama_frameworks",
        r"returned str, not a sequence of framework names",
    ),
    Case(
        "frameworks-none",
        {"trama_frameworks": returning(None)},
        "trama_frameworks",
        r"returned None, not a sequence of framework names",
    ),
    Case(
        "frameworks-not-names",
        {"trama_frameworks": returning(lambda: [5, "bad fw\n"])},
        "trama_frameworks",
        r"item 1 refused: 'bad fw\\n' is not a framework name",
    ),
    # trama_op_implementations: a mapping of op names to factories, or None
    Case(
        "implementations-a-list",
        {"trama_op_implementations": returning(lambda: ["acme.Double"])},
        "trama_op_implementations",
        r"for 'numpy' returned list, not a mapping of op names to factories",
    ),
    Case(
        "implementations-an-int",
        {"trama_op_implementations": returning(7)},
        "trama_op_implementations",
        r"for 'numpy' returned int, not a mapping",
    ),
    Case(
        "implementations-not-callable",
        {"trama_op_implementations": returning(lambda: {"acme.Double": 42})},
        "trama_op_implementations",
        r"for 'numpy': op 'acme.Double' refused: its factory is int, which is not callable",
    ),
    Case(
        "implementations-from-node-not-callable",
        {"trama_op_implementations": returning(lambda: {"acme.Double": NotCallableFromNode})},
        "trama_op_implementations",
        r"op 'acme.Double' refused: its factory's from_node is int, which is not callable",
    ),
    Case(
        "implementations-key-not-a-name",
        {"trama_op_implementations": returning(lambda: {("acme", "Double"): build_double})},
        "trama_op_implementations",
        r"key \('acme', 'Double'\) refused: the op name .* is not a string",
    ),
    Case(
        "implementations-huge",
        {"trama_op_implementations": returning(lambda: {f"bad.Op{i}": build_double for i in range(HUGE)})},
        "trama_op_implementations",
        rf"returned {HUGE} entries, more than the {MAX_HOOK_ITEMS} allowed",
    ),
    # trama_exporters: a sequence of callables, or None
    Case(
        "exporters-an-int",
        {"trama_exporters": returning(3)},
        "trama_exporters",
        r"for 'numpy' returned int, not a sequence of exporters",
    ),
    Case(
        "exporters-not-callable",
        {"trama_exporters": returning(lambda: ["export me"])},
        "trama_exporters",
        r"for 'numpy': item 0 refused: the exporter is str, which is not callable",
    ),
    # trama_factory_adapters: a sequence of callables, each giving a factory, or None
    Case(
        "adapters-a-mapping",
        {"trama_factory_adapters": returning(lambda: {"numpy": adapter_to_none})},
        "trama_factory_adapters",
        r"for 'numpy' returned dict, not a sequence of factory adapters",
    ),
    Case(
        "adapters-make-nothing",
        {"trama_factory_adapters": returning(lambda: [adapter_to_none])},
        "trama_factory_adapters",
        r"for 'numpy': adapter 0 refused: what it made of the factory of '.*' is unusable: its factory is None",
    ),
    Case(
        "adapters-raise",
        {"trama_factory_adapters": returning(lambda: [adapter_that_raises])},
        "trama_factory_adapters",
        r"for 'numpy': a factory adapter failed: ZeroDivisionError: adapters cannot divide",
    ),
    # trama_runtimes: a sequence of trama.Runtime
    Case("runtimes-an-int", {"trama_runtimes": returning(1)}, "trama_runtimes", r"returned int, not a sequence of"),
    Case(
        "runtimes-not-runtimes",
        {"trama_runtimes": returning(lambda: [object()])},
        "trama_runtimes",
        r"item 0 refused: it is object, not a trama.Runtime",
    ),
    Case(
        "runtimes-name-raises",
        {"trama_runtimes": returning(lambda: [NamelessRuntime()])},
        "trama_runtimes",
        r"item 0 refused: looking at it raised RuntimeError: who am I",
    ),
    Case(
        "runtimes-aliases-a-string",
        {"trama_runtimes": returning(lambda: [StringAliasesRuntime()])},
        "trama_runtimes",
        r"runtime 'bad:cpu': its aliases are str, not a tuple of strings",
    ),
    Case(
        "runtimes-take-numpys-name",
        {"trama_runtimes": returning(lambda: [ImpostorRuntime()])},
        "trama_runtimes",
        r"the runtime name 'numpy' is claimed by 'trama-numpy' and 'trama-bad'; the runtime of 'trama-numpy' keeps it",
        last=True,
        shared=True,
    ),
    # failures whose messages are hostile
    Case(
        "message-forges-lines",
        {"trama_frameworks": raises(HostileMessage())},
        "trama_frameworks",
        r"failed: HostileMessage: line one\\x0aerror: forged line\\x1b\[2Jxxx+\.\.\.$",
    ),
    Case(
        "message-unprintable",
        {"trama_frameworks": raises(UnprintableMessage())},
        "trama_frameworks",
        r"failed: UnprintableMessage: <the exception's message could not be printed>",
    ),
]


class PluginsOwnBaseException(BaseException):
    """A plugin's own exception that is not an ``Exception``."""


#: What a plugin may raise that is not an ``Exception`` (each is the plugin's failure, reported
#: like any other, while ``KeyboardInterrupt`` still stops): made afresh for each use, with the
#: end of the report it gets. ``Skipped`` is what ``pytest.importorskip`` raises.
BASE_EXCEPTIONS: dict[str, tuple[Callable[[], BaseException], str]] = {
    "skipped": (lambda: pytest.skip.Exception("could not import 'scipy'"), r"Skipped: could not import 'scipy'$"),
    "generator-exit": (lambda: GeneratorExit("closed"), r"GeneratorExit: closed$"),
    "system-exit": (lambda: SystemExit(4), r"SystemExit: 4$"),
    "own": (lambda: PluginsOwnBaseException("mine"), r"PluginsOwnBaseException: mine$"),
}
HOOKS = (
    "trama_op_specs",
    "trama_opsets",
    "trama_frameworks",
    "trama_op_implementations",
    "trama_exporters",
    "trama_factory_adapters",
    "trama_runtimes",
)


def raising(make: Callable[[], BaseException]) -> Callable[[], Any]:
    def hook() -> Any:
        raise make()

    return hook


BASE_CASES = [
    Case(f"{hook}-{kind}", {hook: raising(make)}, hook, r"failed: " + reason)
    for hook in HOOKS
    for kind, (make, reason) in BASE_EXCEPTIONS.items()
]


def install(bad: Any, *, last: bool = False) -> PluginHost:
    """trama-numpy, trama-acme and trama-bad (first, or last), made the process's plugins."""
    good = [
        FakeEntryPoint("numpy", "trama-numpy", trama_numpy_plugin),
        FakeEntryPoint("acme", "trama-acme", acme_plugin()),
    ]
    entry = FakeEntryPoint("bad", "trama-bad", bad)
    host = PluginHost([*good, entry] if last else [entry, *good], selection=None)
    reset_plugins(host)
    return host


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    reset_plugins()
    yield
    reset_plugins()


def cli(*args: str) -> tuple[int, str, str]:
    """``trama ARGS`` in this process: exit status, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(args))
    return status, out.getvalue(), err.getvalue()


def assert_the_others_work(tmp_path: Path) -> None:
    """Every other plugin's contribution resolves, and a model that uses both good plugins
    validates and runs on the numpy runtime, from Python and from the command line."""
    numpy_registry = trama.registry("numpy")
    assert numpy_registry["acme.Double"].factory is build_double
    assert numpy_registry["Linear"].factory is not None
    assert "acme.Double" in trama.registry(None)
    assert trama.extension.plugin_host().opsets()["acme"] == 1
    model = two_plugin_model()
    trama.validate(model, trama.registry(None))
    (y,) = trama.runtime_for_name("numpy").prepare(model).run([X])
    np.testing.assert_allclose(y, expected_output(), rtol=1e-6)
    path = tmp_path / "two.trama.json"
    trama.dump(model, path)
    status, out, err = cli("validate", str(path))
    assert (status, err) == (0, ""), out + err


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_a_bad_return_value_is_reported_and_left_out(case: Case, tmp_path: Path) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        host = install(plugin_with(**case.hooks), last=case.last)
        assert_the_others_work(tmp_path)
        if "kept_spec" in case.extra:
            assert case.extra["kept_spec"] in trama.registry(None)
        if "read_at_most" in case.extra:
            assert len(ENDLESS_READ) <= case.extra["read_at_most"]
        infos = {info.distribution: info for info in host.plugins()}
        status, out, err = cli("plugins")
        json_status, json_out, _ = cli("plugins", "--json")

    # Reported: the distribution, the hook and the reason, in PluginInfo and as a warning.
    bad = infos["trama-bad"]
    assert case.hook in bad.hooks
    matching = [error for error in bad.errors if error.startswith(case.hook) and re.search(case.reason, error)]
    assert matching, bad.errors
    assert all("\n" not in error and "\x1b" not in error for error in bad.errors)
    warned = [str(w.message) for w in caught if issubclass(w.category, PluginLoadWarning)]
    if case.hook != "trama_runtimes":  # the runtime API silences the warnings: `trama plugins` lists them
        prefix = "trama plugin 'bad' from trama-bad 1.2.3: "
        assert any(message.startswith(prefix) and matching[0] in message for message in warned)
    # Nothing else is blamed, unless two plugins claim one thing.
    if not case.shared:
        assert infos["trama-acme"].errors == ()
        assert infos["trama-numpy"].errors == ()
        assert infos["trama"].errors == ()
    # `trama plugins`: the documented status, the bad plugin's block, no traceback.
    assert status == 1
    assert "Traceback" not in err
    assert "Traceback" not in out
    block = out[out.index("trama-bad 1.2.3") :]
    assert f"  error: {case.hook}" in block
    assert json_status == 1
    listed = {plugin["distribution"]: plugin for plugin in json.loads(json_out)["plugins"]}
    assert any(re.search(case.reason, error) for error in listed["trama-bad"]["errors"])


def test_a_plugin_whose_items_are_partly_bad_keeps_its_good_items() -> None:
    def trama_op_implementations(framework: str) -> Mapping[str, Any]:
        return {"acme.Double": 42, "bad.Double": build_double}

    bad = plugin_with(
        trama_op_specs=returning(lambda: [5, DOUBLE_ELSEWHERE]),
        trama_frameworks=returning(lambda: ["numpy", None]),
        trama_op_implementations=trama_op_implementations,
    )
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        host = install(bad)
        numpy_registry = trama.registry("numpy")
        errors = next(info.errors for info in host.plugins() if info.distribution == "trama-bad")
    assert numpy_registry["bad.Double"].factory is build_double  # the good items count
    assert numpy_registry["acme.Double"].factory is build_double  # the bad one is not a rival
    assert host.frameworks() == ["numpy"]
    assert len(errors) == 3


def test_a_lazy_generator_is_read_once_and_accepted() -> None:
    calls = []

    def trama_op_specs() -> Iterator[OpSpec]:
        calls.append(1)
        yield DOUBLE_ELSEWHERE

    host = install(plugin_with(trama_op_specs=trama_op_specs))
    assert "bad.Double" in host.registry(None)
    assert "bad.Double" in host.registry("numpy")
    assert calls == [1]
    assert next(info for info in host.plugins() if info.distribution == "trama-bad").errors == ()


def test_a_hook_may_leave_out_its_framework_argument() -> None:
    """pluggy lets an implementation take fewer arguments than its hook; trama calls it so."""

    def trama_op_implementations() -> Mapping[str, Any]:
        return {"bad.Double": build_double}

    host = install(
        plugin_with(
            trama_op_specs=returning(lambda: [DOUBLE_ELSEWHERE]), trama_op_implementations=trama_op_implementations
        )
    )
    assert host.registry("numpy")["bad.Double"].factory is build_double


def test_two_plugins_implementing_one_op_leave_the_rest_of_numpy_working(tmp_path: Path) -> None:
    """A pack that implements the catalog's Linear for numpy too: Linear cannot be built with
    numpy (which one is right cannot be told), everything else can, and both are told."""

    def build_linear(node: Node, **_: Any) -> Any:
        raise AssertionError("never built")

    bad = plugin_with(trama_op_implementations=returning(lambda: {"Linear": build_linear}))
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        host = install(bad)
        numpy_registry = trama.registry("numpy")
        relu = Model(["x"], [Ref("relu", "y")], [Node("relu", "ReLU", {"x": Ref(INPUT, "x")}, ["y"])], {})
        (y,) = trama.runtime_for_name("numpy").prepare(relu).run([X])
        np.testing.assert_array_equal(y, np.maximum(X, 0))
        both = r"op 'Linear' is implemented for numpy by both 'trama-bad' and 'trama-numpy'"
        with pytest.raises(TramaError, match=both):
            trama.runtime_for_name("numpy").prepare(two_plugin_model()).run([X])
        assert numpy_registry["acme.Double"].factory is build_double
        assert "Linear" not in host.coverage()["numpy"]
        infos = {info.distribution: info for info in host.plugins()}
    for distribution in ("trama-bad", "trama-numpy"):
        assert any(re.search(both, error) for error in infos[distribution].errors)


def test_a_factory_that_builds_no_kernel_fails_its_own_node_only() -> None:
    """A factory of the wrong kind (it returns 42, not a kernel) cannot be told at discovery:
    running a model with that op fails with a trama error naming the node; others still run."""
    spec = OpSpec("bad.Wrong", inputs=("x",), outputs=("y",))
    bad = plugin_with(
        trama_op_specs=returning(lambda: [spec]),
        trama_op_implementations=returning(lambda: {"bad.Wrong": lambda node, **_: 42}),
    )
    host = install(bad)
    assert next(info for info in host.plugins() if info.distribution == "trama-bad").errors == ()
    wrong = Model(["x"], [Ref("w", "y")], [Node("w", "bad.Wrong", {"x": Ref(INPUT, "x")}, ["y"])], {})
    with pytest.raises(TramaError) as caught:
        trama.runtime_for_name("numpy").prepare(wrong).run([X])
    assert caught.value.node_id == "w"
    (y,) = trama.runtime_for_name("numpy").prepare(two_plugin_model()).run([X])
    np.testing.assert_allclose(y, expected_output(), rtol=1e-6)


@pytest.mark.parametrize(
    ("plugin", "reason"),
    [
        (SystemExit(2), r"^import failed: SystemExit: 2$"),
        (ImportError("No module named 'scipy'"), r"^import failed: ImportError: No module named 'scipy'$"),
        (42, r"^implements no hook: the entry point names int"),
        ({"trama_op_specs": 1}, r"^implements no hook: the entry point names dict"),
        (
            SimpleNamespace(trama_op_specs=hookimpl(lambda fw: [])),
            r"^registration failed: PluginValidationError: .*Argument\(s\) \{'fw'\} are declared in the hookimpl",
        ),
    ],
    ids=["exits", "import-error", "no-hooks", "a-mapping", "extra-argument"],
)
def test_a_plugin_that_cannot_be_loaded_is_reported(plugin: Any, reason: str, tmp_path: Path) -> None:
    entry = FakeEntryPoint("bad", "trama-bad", plugin)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        host = PluginHost(
            [
                entry,
                FakeEntryPoint("numpy", "trama-numpy", trama_numpy_plugin),
                FakeEntryPoint("acme", "trama-acme", acme_plugin()),
            ],
            selection=None,
        )
        reset_plugins(host)
        assert_the_others_work(tmp_path)
        infos = {info.distribution: info for info in host.plugins()}
    assert any(re.search(reason, error) for error in infos["trama-bad"].errors), infos["trama-bad"].errors


@contextlib.contextmanager
def nothing_escapes() -> Iterator[None]:
    """Fail the test when a plugin's ``BaseException`` gets through trama: pytest would
    otherwise take an escaped ``Skipped`` for a skip and an escaped ``SystemExit`` for an exit."""
    try:
        yield
    except (pytest.skip.Exception, GeneratorExit, SystemExit, PluginsOwnBaseException) as exc:
        pytest.fail(f"the plugin's {type(exc).__name__} got through trama: {exc!r}")


@pytest.mark.parametrize("case", BASE_CASES, ids=[case.id for case in BASE_CASES])
def test_a_hook_raising_a_base_exception_is_reported_and_left_out(case: Case, tmp_path: Path) -> None:
    with nothing_escapes():
        test_a_bad_return_value_is_reported_and_left_out(case, tmp_path)


@pytest.mark.parametrize("kind", BASE_EXCEPTIONS)
def test_a_plugin_raising_a_base_exception_at_import_is_reported(kind: str, tmp_path: Path) -> None:
    make, reason = BASE_EXCEPTIONS[kind]
    with nothing_escapes():
        test_a_plugin_that_cannot_be_loaded_is_reported(make(), r"^import failed: " + reason, tmp_path)


@pytest.mark.parametrize("where", ["import", *HOOKS])
def test_a_keyboard_interrupt_still_stops(where: str) -> None:
    """Ctrl-C is the user's, not the plugin's failure: it goes through."""
    bad = KeyboardInterrupt() if where == "import" else plugin_with(**{where: raising(KeyboardInterrupt)})

    def everything() -> None:
        host = install(bad)
        host.plugins()
        trama.registry("numpy")
        host.runtimes()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(KeyboardInterrupt):
            everything()


def test_a_hook_wrapper_is_refused() -> None:
    def trama_op_specs() -> Iterator[None]:
        yield  # a wrapper would see the other plugins' results; trama never calls it

    bad = SimpleNamespace(trama_op_specs=hookimpl(wrapper=True)(trama_op_specs))
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        host = install(bad)
        assert "acme.Double" in host.registry("numpy")
        errors = next(info.errors for info in host.plugins() if info.distribution == "trama-bad")
    assert any(error.startswith("hook wrapper(s) ['trama_op_specs'] refused") for error in errors)


def test_the_runtime_class_named_for_checks_is_trama_runtime() -> None:
    """The extension layer recognises runtimes by their class's name (it may not import the
    runtime API above it): that name must stay the one of trama.Runtime."""
    assert (trama.Runtime.__module__, trama.Runtime.__qualname__) == RUNTIME_CLASS


# --- real installed distributions, in a child process ------------------------------------------

#: run_cli forks (its child sets resource limits before exec); when an earlier test of the run
#: imported JAX, JAX warns about forking a multithreaded process. The child execs at once.
forks_after_jax = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")

GOOD_MODULE = """
from trama import OpSpec
from trama.extension import hookimpl

def build_double(node, *, children, parameters):
    return lambda inputs: {"y": inputs["x"] * 2}

@hookimpl
def trama_op_specs():
    return [OpSpec("acme.Double", inputs=("x",), outputs=("y",))]

@hookimpl
def trama_opsets():
    return {"acme": 1}

@hookimpl
def trama_frameworks():
    return ["numpy"]

@hookimpl
def trama_op_implementations(framework):
    return {"acme.Double": build_double} if framework == "numpy" else None
"""

BAD_RETURNS_MODULE = """
from trama.extension import hookimpl

@hookimpl
def trama_op_specs():
    return 5

@hookimpl
def trama_opsets():
    return ["acme"]

@hookimpl
def trama_frameworks():
    def names():
        yield "numpy"
        raise RuntimeError("lazy and broken")
    return names()

@hookimpl
def trama_op_implementations(framework):
    return {"acme.Double": "not callable"}
"""


BASE_EXCEPTIONS_MODULE = """
import pytest
from trama.extension import hookimpl

class PluginsOwnBaseException(BaseException):
    pass

@hookimpl
def trama_op_specs():
    raise PluginsOwnBaseException("mine")

@hookimpl
def trama_opsets():
    raise GeneratorExit("closed")

@hookimpl
def trama_frameworks():
    pytest.importorskip("trama_no_such_module_anywhere")

@hookimpl
def trama_op_implementations(framework):
    raise SystemExit(5)

@hookimpl
def trama_runtimes():
    raise PluginsOwnBaseException("no runtime")
"""


def write_distribution(
    site: Path, name: str, entry_points: str | bytes, modules: Mapping[str, str] | None = None
) -> None:
    """An installed distribution as ``importlib.metadata`` finds it: a ``.dist-info`` folder
    (with ``entry_points.txt`` as given, text or raw bytes) and its modules, in ``site``."""
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    raw = entry_points if isinstance(entry_points, bytes) else textwrap.dedent(entry_points).encode()
    (info / "entry_points.txt").write_bytes(raw)
    for module, source in (modules or {}).items():
        (site / f"{module}.py").write_text(textwrap.dedent(source))


@pytest.fixture(scope="module")
def broken_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of installed distributions: one good pack and every way of being broken that
    needs a real install. Returns the folder, which also holds a model file and its input."""
    site = tmp_path_factory.mktemp("site")
    write_distribution(site, "trama-acme", "[trama]\nacme = acme_good_plugin\n", {"acme_good_plugin": GOOD_MODULE})
    write_distribution(site, "trama-nowhere", "[trama]\nnowhere = trama_no_such_module_anywhere.plugin\n")
    write_distribution(site, "trama-noattr", "[trama]\nnoattr = acme_good_plugin:no_such_attribute\n")
    write_distribution(site, "trama-badref", "[trama]\nbadref = not a valid reference!!\n")
    write_distribution(
        site, "trama-exits", "[trama]\nexits = exits_plugin\n", {"exits_plugin": "import sys\nsys.exit(3)\n"}
    )
    write_distribution(site, "trama-badreturns", "[trama]\nbad = bad_returns\n", {"bad_returns": BAD_RETURNS_MODULE})
    write_distribution(site, "trama-unreadable", b"[trama]\nbroken = caf\xe9:\xff\n")
    # A plugin's BaseExceptions, at import and from each hook.
    write_distribution(
        site,
        "trama-skips",
        "[trama]\nskips = skips_plugin\n",
        {"skips_plugin": "import pytest\npytest.importorskip('trama_no_such_module_anywhere')\n"},
    )
    write_distribution(
        site, "trama-closes", "[trama]\ncloses = closes_plugin\n", {"closes_plugin": "raise GeneratorExit('closed')\n"}
    )
    write_distribution(
        site,
        "trama-own",
        "[trama]\nown = own_plugin\n",
        {"own_plugin": "class Own(BaseException):\n    pass\nraise Own('at import')\n"},
    )
    write_distribution(site, "trama-basehooks", "[trama]\nbase = base_hooks\n", {"base_hooks": BASE_EXCEPTIONS_MODULE})
    trama.dump(two_plugin_model(), site / "two.trama.json")
    np.save(site / "x.npy", X)
    return site


EXPECTED_ERRORS = {
    "trama-nowhere": "import failed: ModuleNotFoundError: No module named 'trama_no_such_module_anywhere'",
    "trama-noattr": "import failed: AttributeError",
    "trama-badref": "import failed: ValueError",
    "trama-exits": "import failed: SystemExit: 3",
    "trama-badreturns": "trama_op_specs returned int, not a sequence of OpSpec",
    "trama-unreadable": "its entry points could not be read: UnicodeDecodeError",
    "trama-skips": "import failed: Skipped: could not import 'trama_no_such_module_anywhere'",
    "trama-closes": "import failed: GeneratorExit: closed",
    "trama-own": "import failed: Own: at import",
    "trama-basehooks": "trama_op_specs failed: PluginsOwnBaseException: mine",
}


@forks_after_jax
def test_trama_plugins_lists_every_broken_install_in_a_fresh_process(broken_site: Path) -> None:
    env = {"PYTHONPATH": str(broken_site)}
    text = run_cli("plugins", env=env, timeout_s=60)
    assert (text.returncode, text.traceback, text.stderr) == (1, False, ""), text.describe()
    for distribution, error in EXPECTED_ERRORS.items():
        assert f"\n{distribution} " in text.stdout, distribution
        assert f"  error: {error}" in text.stdout, (distribution, text.stdout)
    for error in (
        "trama_opsets returned list, not a mapping",
        "trama_frameworks returned generator, which failed while read: RuntimeError: lazy and broken",
        "trama_op_implementations for 'numpy': op 'acme.Double' refused: its factory is str, which is not callable",
        "trama_opsets failed: GeneratorExit: closed",
        "trama_frameworks failed: Skipped: could not import 'trama_no_such_module_anywhere'",
        "trama_op_implementations for 'numpy' failed: SystemExit: 5",
        "trama_runtimes failed: PluginsOwnBaseException: no runtime",
    ):
        assert f"  error: {error}" in text.stdout, text.stdout
    listing = run_cli("plugins", "--json", env=env, timeout_s=60)
    assert listing.returncode == 1, listing.describe()
    plugins = {plugin["distribution"]: plugin for plugin in json.loads(listing.stdout)["plugins"]}
    assert plugins["trama-acme"]["errors"] == []
    assert plugins["trama-numpy"]["errors"] == []
    assert all(plugins[distribution]["errors"] for distribution in EXPECTED_ERRORS)


@forks_after_jax
def test_validate_and_run_work_next_to_broken_installs(broken_site: Path) -> None:
    env = {"PYTHONPATH": str(broken_site)}
    model = str(broken_site / "two.trama.json")
    validated = run_cli("validate", model, env=env, timeout_s=60)
    assert validated.returncode == 0, validated.describe()
    assert not validated.traceback
    ran = run_cli("run", model, "--runtime", "numpy", "--input", f"x={broken_site / 'x.npy'}", env=env, timeout_s=60)
    assert ran.returncode == 0, ran.describe()
    assert not ran.traceback
    assert "double.y: float32[2, 2]" in ran.stdout
    code = f"""
        import warnings, numpy as np, trama
        warnings.simplefilter("ignore")
        model = trama.load({model!r})
        (y,) = trama.runtime_for_name("numpy").prepare(model).run([np.load({str(broken_site / "x.npy")!r})])
        assert trama.registry("numpy")["acme.Double"].factory is not None
        print(np.asarray(y).tolist())
    """
    computed = run_isolated(code, env=env, timeout_s=60)
    assert computed.returncode == 0, computed.describe()
    np.testing.assert_allclose(np.array(json.loads(computed.stdout)), expected_output(), rtol=1e-6)


@forks_after_jax
def test_trama_plugins_can_leave_a_broken_install_out(broken_site: Path) -> None:
    """TRAMA_PLUGINS keeps a broken plugin out without uninstalling it: not even imported."""
    env = {"PYTHONPATH": str(broken_site), "TRAMA_PLUGINS": "acme,numpy"}
    text = run_cli("plugins", env=env, timeout_s=60)
    assert text.returncode == 0, text.describe()
    assert "error:" not in text.stdout
