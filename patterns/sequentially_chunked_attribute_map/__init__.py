"""The Sequentially Chunked AttributeMap pattern: an append-only, insertion-ordered log whose
append cost stays flat however long it grows."""
