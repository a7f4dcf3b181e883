"""Where a declared type may hold bytes, read from its pydantic core schema.

Bytes travel in JSON as ``{"$bytes": "<base64>"}``, which means bytes only where the declared
type may hold bytes (a ``dict[str, str]`` may have that key). ``marker_checker`` builds a
validator from a copy of the schema in which such positions pass a marker through a function
first; the codec uses it to find those markers and to check a client's JSON strictly with its
bytes in place. pydantic-core validates a complete model with the model's own prebuilt
validator, whatever schema names it, so in the copy models and dataclasses construct a
stand-in: the copy checks and finds, and the declared type's own validator builds the value.
``only_bytes_take_markers`` says when that pass can be skipped. The walks over core schemas
here serve ``datetimes`` too.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from typing import Any, Literal

from pydantic_core import SchemaValidator

#: Keys of a core schema node that hold the schemas of what it validates.
CHILD_KEYS = (
    "schema",
    "items_schema",
    "keys_schema",
    "values_schema",
    "choices",
    "fields",
    "definitions",
    "extras_schema",
    "extras_keys_schema",
    "lax_schema",
    "strict_schema",
    "json_schema",
    "python_schema",
    "steps",
    "arguments_schema",
    "var_args_schema",
    "var_kwargs_schema",
)
#: Node types whose children under these keys take the very data the node takes.
SAME_POSITION = {
    "nullable": ("schema",),
    "default": ("schema",),
    "function-before": ("schema",),
    "function-after": ("schema",),
    "function-wrap": ("schema",),
    "custom-error": ("schema",),
    "definitions": ("schema",),
    "model": ("schema",),
    "dataclass": ("schema",),
    "lax-or-strict": ("lax_schema", "strict_schema"),
    "json-or-python": ("json_schema", "python_schema"),
    "union": ("choices",),
    "tagged-union": ("choices",),
    "chain": ("steps",),
}
#: Node types whose validator may take bytes from anywhere in its data (as ``Any`` does).
_OPAQUE = frozenset({"any", "function-plain"})
#: Node types that build an instance of a class.
_INSTANCES = frozenset({"model", "dataclass"})

#: The labels of the two ways through a position that may hold bytes in a checking copy: the
#: reader's, which refuses anything but a marker, and the data's own (they show in errors).
MARKER_CHOICE = "$bytes"
AS_SENT_CHOICE = "$json"

Kind = Literal["bytes", "any"]
Schema = dict[str, Any]


def same_position_keys(node: Schema) -> tuple[str, ...]:
    """Return the keys of ``node`` whose schemas validate the very data ``node`` does."""
    return SAME_POSITION.get(node["type"], ())


def is_schema(value: Any) -> bool:
    """Return True for a schema node (not a mapping of fields or of a union's choices)."""
    return isinstance(value, dict) and isinstance(value.get("type"), str)


def schemas_in(value: Any) -> list[Schema]:
    """Return the schema nodes in a child value: a node, or a union's list, tuples or mapping."""
    if is_schema(value):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list | tuple):
        return [node for item in value for node in schemas_in(item)]
    return []


def refs_in(node: Any, found: dict[str, Schema]) -> dict[str, Schema]:
    """Collect every schema node that carries a ``ref``, by that ref."""
    for inner in schemas_in(node):
        if isinstance(inner.get("ref"), str):
            found[inner["ref"]] = inner
        for key in CHILD_KEYS:
            if key in inner:
                refs_in(inner[key], found)
    return found


def _kind_here(
    node: Schema, refs: dict[str, Schema], seen: frozenset[str] = frozenset()
) -> Kind | None:
    """Return what a marker at the position ``node`` validates may stand for: "any" where the
    data may hold bytes anywhere, "bytes" where the data itself may be bytes, else None."""
    kind = node["type"]
    if kind == "bytes":
        return "bytes"
    if kind in _OPAQUE:
        return "any"
    if kind == "definition-ref":
        ref = node["schema_ref"]
        target = refs.get(ref)
        return None if target is None or ref in seen else _kind_here(target, refs, seen | {ref})
    found = {
        _kind_here(inner, refs, seen)
        for key in same_position_keys(node)
        for inner in schemas_in(node[key])
    }
    return "any" if "any" in found else "bytes" if "bytes" in found else None


class _StandIn:
    """What a model or dataclass becomes in a checking copy of a schema."""


class _Checking:
    """Builds the checking copy of one schema (see ``marker_checker``)."""

    def __init__(self, schema: Any, read_here: Callable[..., Any], read_all: Callable[..., Any]):
        self.refs = refs_in(schema, {})
        self.readers = {"bytes": read_here, "any": read_all}
        self.wrapped = False
        self.schema = self.copy(schema, False)

    def copy(self, node: Any, handled: bool) -> Any:
        """Copy ``node``; ``handled`` says an enclosing node at the same position reads markers."""
        if isinstance(node, list | tuple):
            return type(node)(self.copy(item, handled) for item in node)
        if not isinstance(node, dict):
            return node
        if not is_schema(node):  # a mapping of fields, or of a union's choices
            return {key: self.copy(value, handled) for key, value in node.items()}
        # A reference is read where its definition is, which carries the wrapper; definitions
        # hold the schema that is read; a field's default must stay the field's outer schema.
        unwrapped = handled or node["type"] in ("definition-ref", "definitions", "default")
        kind = None if unwrapped else _kind_here(node, self.refs)
        same = same_position_keys(node)
        copied = dict(node)
        # A Json[...] field holds JSON text in a string: markers in it were never ours.
        for key in () if node["type"] == "json" else CHILD_KEYS:
            if key in node:
                copied[key] = self.copy(node[key], (handled or kind is not None) and key in same)
        copied = self.for_checking(copied)
        return copied if kind is None else self.wrap(copied, kind)

    def wrap(self, node: Schema, kind: Kind) -> Schema:
        """Return ``node`` behind the reader of ``kind`` (which gets the validation context)."""
        self.wrapped = True
        ref = node.pop("ref", None)
        read: Schema = {
            "type": "function-before",
            "function": {"type": "with-info", "function": self.readers[kind]},
            "schema": node,
        }
        if kind == "bytes":
            # Data after a function is Python data, so JSON's own forms (text for a datetime,
            # say) would no longer pass a strict check: only a marker takes the reader's way.
            read = {
                "type": "union",
                "mode": "left_to_right",
                "choices": [(read, MARKER_CHOICE), (node, AS_SENT_CHOICE)],
            }
        if ref is not None:  # a definition is looked up by its ref: it must name the wrapper
            read["ref"] = ref
        return read

    def for_checking(self, node: Schema) -> Schema:
        """Adapt a copied node for checking.

        A model or dataclass builds a ``_StandIn``, so that pydantic-core validates with the
        copy rather than the class's prebuilt validator, and runs none of the user code that
        needs the real instance (``__post_init__``, ``model_post_init``, a custom
        ``__init__``). After and wrap validators of data that holds one are left out, as they
        would get stand-ins. The declared type's own validator runs them all.
        """
        if node["type"] == "model":
            node.pop("post_init", None)
            node.update(cls=_StandIn, custom_init=False)
        elif node["type"] == "dataclass":
            node.pop("generic_origin", None)
            node.update(cls=_StandIn, post_init=False)
        elif node["type"] in ("function-after", "function-wrap") and declares(
            node["schema"], _INSTANCES, self.refs
        ):
            inner: Schema = node["schema"]
            if "ref" in node:  # a definition is looked up by its ref: it must name what is left
                inner["ref"] = node["ref"]
            return inner
        return node


def marker_checker(
    schema: Any, read_here: Callable[..., Any], read_all: Callable[..., Any]
) -> SchemaValidator | None:
    """Return a validator of a checking copy of ``schema``, or None when no position of it may
    hold bytes.

    In the copy, a position whose declared type may be bytes passes a marker through
    ``read_here`` first (which must raise a ValueError or PydanticCustomError for anything
    else, that then goes its own way), and one that may hold anything (``Any``, a plain
    validator function) passes its data through ``read_all``; both are pydantic with-info
    validator functions, which get the validation context. Models and dataclasses come out as
    stand-ins, so the copy's result only says whether the data is valid.
    """
    checking = _Checking(schema, read_here, read_all)
    return SchemaValidator(checking.schema) if checking.wrapped else None


#: Node types that take no JSON object, or one only as their children (checked too) do.
_NO_OBJECTS = frozenset(
    {
        "any",
        "function-plain",
        "none",
        "bool",
        "int",
        "float",
        "decimal",
        "complex",
        "str",
        "bytes",
        "date",
        "time",
        "datetime",
        "timedelta",
        "literal",
        "enum",
        "uuid",
        "url",
        "multi-host-url",
        "is-instance",
        "is-subclass",
        "callable",
        "json",
        "list",
        "tuple",
        "set",
        "frozenset",
        "generator",
        "nullable",
        "default",
        "union",
        "tagged-union",
        "lax-or-strict",
        "json-or-python",
        "custom-error",
        "definitions",
        "definition-ref",
        "function-after",
        "model",
        "model-field",
        "dataclass",
        "dataclass-field",
        "typed-dict-field",
    }
)


def only_bytes_take_markers(schema: Any, marker: str) -> bool:
    """Return True when an object whose one key is ``marker`` is valid data of ``schema`` only
    where bytes (or anything) may stand: then reading every marker as bytes, as for ``Any``,
    reads what the declared type says, without a checking pass.

    Conservative: a dict, a before or wrap validator, a model, TypedDict or dataclass that
    needs no key but the marker, or a node type not known here answer False.
    """
    return all(_takes_no_marker(node, marker) for node in _nodes(schema))


def _nodes(node: Any) -> Iterator[Schema]:
    """Yield every schema node in ``node``, definitions included."""
    for inner in schemas_in(node):
        yield inner
        for key in CHILD_KEYS:
            if key in inner:
                yield from _nodes(inner[key])


def _takes_no_marker(node: Schema, marker: str) -> bool:
    """Return True when ``node`` itself takes no object whose one key is ``marker``."""
    if node["type"] in ("model-fields", "typed-dict", "dataclass-args"):
        fields = node["fields"]
        items = fields.items() if isinstance(fields, dict) else [(f["name"], f) for f in fields]
        return any(_needs_a_key_but(name, field, marker) for name, field in items)
    return node["type"] in _NO_OBJECTS


def _needs_a_key_but(name: str, field: Schema, marker: str) -> bool:
    """Return True when ``field`` is required and found under no key but ``marker``."""
    optional = (
        field["schema"]["type"] == "default"
        or field.get("required") is False
        or field.get("init") is False
    )
    alias = field.get("validation_alias")
    paths = alias if isinstance(alias, list) and alias and isinstance(alias[0], list) else [alias]
    keys = {name} | {p[0] if isinstance(p, list) and p else p for p in paths if p is not None}
    return not optional and marker not in keys


def declares(
    node: Any, kinds: Collection[str], refs: dict[str, Schema], seen: frozenset[str] = frozenset()
) -> bool:
    """Return True when a node of one of ``kinds`` is anywhere in the schema ``node``."""
    for inner in schemas_in(node):
        if inner["type"] in kinds:
            return True
        ref = inner.get("schema_ref") if inner["type"] == "definition-ref" else None
        if ref in refs and ref not in seen and declares(refs[ref], kinds, refs, seen | {ref}):
            return True
        if any(declares(inner[k], kinds, refs, seen) for k in CHILD_KEYS if k in inner):
            return True
    return False
