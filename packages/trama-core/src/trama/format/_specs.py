"""Op specifications and the registry that holds them (discovered ones: :func:`trama.registry`).

Ops are opaque to the format: a node says ``"op": "Linear"`` and nothing more. What ``Linear``
takes and gives, and how to build a runtime object for it, lives in an :class:`OpSpec` held by
an :class:`OpRegistry`. The same registry checks a document against the specs
(:func:`trama.validate`) and drives :func:`trama.import_model`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trama.errors import RegistryError
from trama.format._lazy import is_tensor
from trama.format._sizes import SizeExpr

if TYPE_CHECKING:
    from trama.format._model import Node, Parameter

__all__ = [
    "CATALOG_NAMESPACE",
    "NO_DEFAULT",
    "PARAMETER_TYPES",
    "Exporter",
    "OpRegistry",
    "OpSpec",
    "ParameterSchema",
    "op_namespace",
    "value_type",
]

#: The value types a parameter slot may declare.
PARAMETER_TYPES = frozenset({"tensor", "int", "float", "bool", "string", "list", "null", "any"})

#: Turns a framework object into a node fragment, or returns ``None`` if it does not handle it.
#: Called as ``exporter(obj, ctx)``; see :class:`trama.ExportContext`.
Exporter = Callable[[Any, Any], Any]


def value_type(value: Any) -> str:
    """The parameter type name of a value (``bool`` is not an ``int`` here)."""
    if is_tensor(value):
        return "tensor"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, SizeExpr):
        return "size"
    return type(value).__name__


class _NoDefault:
    """The type of :data:`NO_DEFAULT`."""

    _instance: _NoDefault | None = None

    def __new__(cls) -> _NoDefault:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_DEFAULT"

    def __reduce__(self) -> str:
        return "NO_DEFAULT"


#: A slot's :attr:`ParameterSchema.default` when the op says nothing of the value an absent
#: slot means (``None`` is a default like any other: ``padding_idx=None``).
NO_DEFAULT: Any = _NoDefault()


@dataclass(frozen=True, slots=True)
class ParameterSchema:
    """One parameter slot of an op: its name, accepted value types and whether it may be absent.

    ``types`` lists accepted :data:`PARAMETER_TYPES`; an ``int`` is accepted where ``float`` is.
    ``learnable`` is ``None`` when either is fine, else what the entry's flag must be.
    ``default`` (new in 0.4) is the value an optional slot means when it is absent, as data (a
    JSON value), for tools that show a node's settings and leave out the defaults
    (``trama ssa``); :data:`NO_DEFAULT` where the op does not say. It never changes validation.
    """

    name: str
    types: tuple[str, ...] = ("any",)
    optional: bool = False
    learnable: bool | None = None
    doc: str = ""
    default: Any = NO_DEFAULT

    def __post_init__(self) -> None:
        types: Any = self.types
        if isinstance(types, str):  # a lone string is forgiven: ("tensor",) was meant
            object.__setattr__(self, "types", (types,))
        unknown = set(self.types) - PARAMETER_TYPES
        if unknown:
            raise ValueError(f"slot {self.name!r}: unknown parameter types {sorted(unknown)}")

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` has one of the declared types."""
        if "any" in self.types:
            return True
        kind = value_type(value)
        if kind == "size":  # a number once the input sizes are known
            return "int" in self.types or "float" in self.types
        return kind in self.types or (kind == "int" and "float" in self.types)


@dataclass(frozen=True, slots=True)
class OpSpec:
    """What an op takes and gives: its signature, and optionally how to build it.

    ``factory`` builds a runtime object from a node during import: either a class with a
    ``from_node`` classmethod (the :class:`trama.ImportableOp` protocol) or a plain callable
    with the same keyword signature ``(node, *, children, parameters)``.
    """

    name: str
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    parameters: tuple[ParameterSchema, ...] = ()
    composite: bool = False
    factory: Any = field(default=None, compare=False)
    #: Input ports that may be left unconnected.
    optional_inputs: tuple[str, ...] = ()
    #: Whether a node may declare input ports / outputs beyond the ones listed.
    variadic_inputs: bool = False
    variadic_outputs: bool = False
    doc: str = field(default="", compare=False)
    #: The opset of the op's namespace that introduced it, or ``None`` where its package does not
    #: say. An exporter records, for each namespace, the highest ``since`` among the ops a document
    #: uses, so a document that needs nothing newer keeps reading as the older opset; any op whose
    #: ``since`` is unknown makes it record the namespace's installed opset instead.
    since: int | None = None
    #: A pack's settings check, ``check(node, parameters)``, framework-neutral: it raises a
    #: :class:`~trama.RegistryError` (or ``ValueError``/``TypeError``) saying what is wrong with
    #: the node's settings. trama runs it before any factory of the op is called, and ``trama
    #: validate`` runs it on every node of the op, so that a document import would refuse is
    #: refused when it is validated, with the pack's message. (The catalog's ops have theirs
    #: built in.) Keep it cheap, and free of framework imports.
    check: Callable[[Node, Mapping[str, Parameter]], None] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        for attr in ("inputs", "outputs", "parameters", "optional_inputs"):
            value = getattr(self, attr)
            if type(value) is not tuple:  # already one when built by the catalog: a few hundred specs
                object.__setattr__(self, attr, tuple(value))
        slots = [p.name for p in self.parameters]
        if len(set(slots)) != len(slots):
            raise ValueError(f"op {self.name!r} declares a parameter slot twice")

    def slot(self, name: str) -> ParameterSchema | None:
        for schema in self.parameters:
            if schema.name == name:
                return schema
        return None


class OpRegistry:
    """A set of :class:`OpSpec` by name, plus exporters that turn framework objects into nodes."""

    def __init__(self, specs: Iterable[OpSpec] = (), *, framework: str | None = None) -> None:
        #: The framework whose implementations the factories are (``None`` for a neutral or
        #: hand-made registry); used to say what is missing when an op has no factory.
        self.framework = framework
        #: How this framework runs a leaf whose settings depend on the input sizes: a callable
        #: that wraps a :class:`~trama.conversion.SizedNode` in the framework's kind of object
        #: (``None``: it cannot; see :func:`trama.conversion.build_node`).
        self.sized: Any = None
        self._specs: dict[str, OpSpec] = {}
        self._exporters: list[Exporter] = []
        for spec in specs:
            self.register(spec)

    def register(self, spec: OpSpec) -> None:
        """Add a spec; registering a different spec under a taken name is an error."""
        existing = self._specs.get(spec.name)
        if existing is not None and existing != spec:
            raise RegistryError(f"op {spec.name!r} is already registered with another specification")
        self._specs[spec.name] = spec

    def add_exporter(self, exporter: Exporter) -> None:
        """Add an exporter, tried in the order added for objects without ``to_node``."""
        self._exporters.append(exporter)

    @property
    def exporters(self) -> tuple[Exporter, ...]:
        return tuple(self._exporters)

    def get(self, name: str) -> OpSpec | None:
        """The spec for ``name``, or ``None``."""
        return self._specs.get(name)

    def __getitem__(self, name: str) -> OpSpec:
        spec = self._specs.get(name)
        if spec is None:
            raise RegistryError(self.unknown_op_message(name))
        return spec

    def unknown_op_message(self, name: str) -> str:
        import difflib  # only for this message: discovery builds registries and never needs it

        close = difflib.get_close_matches(name, self._specs, n=3)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        return f"unknown op {name!r} ({len(self._specs)} ops registered){hint}"

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[OpSpec]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def names(self) -> list[str]:
        """Registered op names, sorted."""
        return sorted(self._specs)

    def __repr__(self) -> str:
        framework = f", framework {self.framework!r}" if self.framework else ""
        return f"OpRegistry({len(self._specs)} ops, {len(self._exporters)} exporters{framework})"


#: The namespace of the standard catalog's ops, which are written without a prefix (``Linear``).
CATALOG_NAMESPACE = "trama"


def op_namespace(op: str) -> str:
    """The namespace an op name belongs to: the part before its last dot, the catalog's if none."""
    return op.rpartition(".")[0] or CATALOG_NAMESPACE
