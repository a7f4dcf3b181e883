"""Initial Attributes that reproduce the state N sequential registrations leave behind."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from patterns.sequentially_chunked_attribute_map.flow import CHUNK_SIZE, CURRENT, archive_token

_EPOCH = datetime(2025, 1, 1, tzinfo=UTC)


def record(sequence: int) -> dict[str, Any]:
    """Return the JSON form of subscriber ``sequence`` (about 110 bytes, like a real one)."""
    at = _EPOCH + timedelta(seconds=sequence)
    return {
        "sequence": sequence,
        "email": f"subscriber{sequence}@bench.example",
        "name": f"Subscriber {sequence}",
        "registeredAt": at.isoformat(),
    }


def chunked_state(count: int) -> dict[str, Any]:
    """Return ChunkedSubscriberFlow initial Attributes holding ``count`` records.

    Registration archives ``current`` lazily (when a new record finds it full), so after
    ``count`` registrations ``current`` holds the last 1..100 records and every earlier full
    chunk is an archive instance named by its first sequence.
    """
    if count <= 0:
        return {
            "SubscriberArchiveState": {"nextSequence": 1, "newestArchivedToken": ""},
            f"SubscriberChunks/{CURRENT}": [],
        }
    archived = (count - 1) // CHUNK_SIZE
    values: dict[str, Any] = {}
    for chunk in range(archived):
        first = chunk * CHUNK_SIZE + 1
        values[f"SubscriberChunks/{archive_token(first)}"] = [
            record(s) for s in range(first, first + CHUNK_SIZE)
        ]
    values[f"SubscriberChunks/{CURRENT}"] = [
        record(s) for s in range(archived * CHUNK_SIZE + 1, count + 1)
    ]
    newest = archive_token((archived - 1) * CHUNK_SIZE + 1) if archived else ""
    values["SubscriberArchiveState"] = {"nextSequence": count + 1, "newestArchivedToken": newest}
    return values


def naive_state(count: int) -> dict[str, Any]:
    """Return NaiveSubscriberFlow initial Attributes holding ``count`` records in one list."""
    return {"Subscribers": [record(s) for s in range(1, count + 1)]}


def archived_by(first: int, last: int) -> int:
    """Return how many of the registrations with sequences ``first``..``last`` archived a chunk.

    The registration of sequence s finds ``current`` full, and archives it (a third Attribute
    write besides ``current`` and the archive state), when s > 1 and (s - 1) % CHUNK_SIZE == 0.
    """
    return sum(1 for s in range(max(first, 2), last + 1) if (s - 1) % CHUNK_SIZE == 0)
