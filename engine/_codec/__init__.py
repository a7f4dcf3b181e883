"""Encode and decode durable values as JSON text.

Values are validated against their declared type with pydantic. Bytes have no JSON form, so they
travel as ``{"$bytes": "<base64>"}``, which means bytes only where the declared type may hold
bytes; everything else uses pydantic's JSON mode, with datetimes at whole-minute UTC offsets.

``encoding`` writes values, ``decoding`` reads and validates them, ``markers`` reads the bytes
marker, ``plans`` holds what is decided once per declared type (its ``Plan``),
``marker_schemas`` finds where a type may hold bytes, ``datetimes`` moves UTC offsets with
seconds.
"""

from engine._codec.decoding import decode, decode_data, validate, validate_client_value
from engine._codec.encoding import INT64_MAX, INT64_MIN, encode, to_jsonable
from engine._codec.markers import BYTES_MARKER, from_jsonable, read_marker
from engine._codec.plans import Plan, adapter_for, plan_for

__all__ = [
    "BYTES_MARKER",
    "INT64_MAX",
    "INT64_MIN",
    "Plan",
    "adapter_for",
    "decode",
    "decode_data",
    "encode",
    "from_jsonable",
    "plan_for",
    "read_marker",
    "to_jsonable",
    "validate",
    "validate_client_value",
]
