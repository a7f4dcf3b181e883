"""The RPC primitive: Attribute locks, a read-modify-write counter and a read-only RPC."""
