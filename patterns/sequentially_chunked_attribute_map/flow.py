"""ChunkedSubscriberFlow: subscribers appended to bounded chunks of an AttributeMap.

``SubscriberChunks[current]`` is the only mutable chunk. When it already holds CHUNK_SIZE
records, the registration that finds it full archives it, in the same commit, to an immutable
instance named by its first sequence (20 digits, zero-padded), and starts a new ``current``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from engine import (
    Attribute,
    AttributeMap,
    Context,
    Flow,
    InvalidPageTokenError,
    NotFoundError,
    rpc,
)
from patterns._rules import matches

#: Records per chunk. Part of the persisted layout: archive tokens are chunk boundaries.
CHUNK_SIZE = 100
CURRENT = "current"
TOKEN_DIGITS = 20
_TOKEN = re.compile(r"[0-9]{20}")
SUBSCRIBER_EMAIL_PATTERN = r"^[^@\s]+@[^@\s]+$"

SubscriberEmail = Annotated[
    str,
    Field(min_length=3, max_length=320, json_schema_extra={"pattern": SUBSCRIBER_EMAIL_PATTERN}),
    matches(
        SUBSCRIBER_EMAIL_PATTERN,
        "must be an email address: text, one @, more text, and no space anywhere",
    ),
]
"""A subscriber's email: one @ with text on both sides, no whitespace."""


class PageNotFoundError(NotFoundError):
    """A well-formed archive token names no stored chunk."""

    code = "PAGE_NOT_FOUND"


class _Model(BaseModel):
    # Frozen: a record or state is never changed in place, only replaced, so the engine may
    # hand the values one registration set straight to the next (engine/_sharing.py).
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)


class SubscriberRecord(_Model):
    """One registered subscriber."""

    sequence: int
    email: str
    name: str
    registered_at: datetime


class SubscriberArchiveState(_Model):
    """The next sequence to hand out and the newest archived chunk's token."""

    next_sequence: int = 1
    newest_archived_token: str = ""


class RegisterSubscriberInput(_Model):
    """Who registers."""

    email: SubscriberEmail
    name: str = Field(min_length=1, max_length=200)


class GetSubscriberPageInput(_Model):
    """Which chunk to read: ``current`` or an archive token."""

    page_token: str


class SubscriberPage(_Model):
    """A chunk's records, newest first, and the next older chunk's token ("" after the oldest)."""

    subscribers: list[SubscriberRecord]
    next_page_token: str


def archive_token(first_sequence: int) -> str:
    """Return the token of the chunk whose first record has ``first_sequence``."""
    return str(first_sequence).zfill(TOKEN_DIGITS)


def check_page_token(token: str) -> str:
    """Return ``token`` if it is ``current`` or a chunk-boundary archive token.

    Raises InvalidPageTokenError otherwise: anything but exactly 20 decimal digits naming a
    sequence n >= 1 with (n - 1) % CHUNK_SIZE == 0.
    """
    if token == CURRENT:
        return token
    if not _TOKEN.fullmatch(token):
        raise InvalidPageTokenError(
            f"pageToken must be 'current' or exactly {TOKEN_DIGITS} decimal digits",
            field="pageToken",
        )
    first = int(token)
    if first < 1 or (first - 1) % CHUNK_SIZE:
        raise InvalidPageTokenError(
            f"pageToken {token} is not a chunk boundary (1, {CHUNK_SIZE + 1}, "
            f"{2 * CHUNK_SIZE + 1}, ...)",
            field="pageToken",
        )
    return token


class ChunkedSubscriberFlow(Flow[None]):
    """RPC-only Flow holding an append-only subscriber log in bounded chunks."""

    archive_state: Attribute[SubscriberArchiveState] = Attribute(
        "SubscriberArchiveState", SubscriberArchiveState
    )
    subscriber_chunks: AttributeMap[list[SubscriberRecord]] = AttributeMap(
        "SubscriberChunks", list[SubscriberRecord]
    )

    @rpc(
        lock_attributes=(archive_state.lock(), subscriber_chunks.lock(CURRENT)),
        load_attribute_map_instances=(subscriber_chunks.load(CURRENT),),
    )
    async def register_subscriber(
        self, context: Context, input: RegisterSubscriberInput
    ) -> SubscriberRecord:
        """Append one subscriber; archive ``current`` first when it is full.

        ``async def`` although it awaits nothing: it does no I/O, so it runs on the event loop
        rather than hopping to a thread while this Flow's registrations wait for its locks.
        """
        state = self.archive_state.get(context) or SubscriberArchiveState()
        current = self.subscriber_chunks.get(context, CURRENT) or []
        record = SubscriberRecord(
            sequence=state.next_sequence,
            email=input.email,
            name=input.name,
            registered_at=datetime.now(UTC),
        )
        if len(current) >= CHUNK_SIZE:
            token = archive_token(current[0].sequence)
            self.subscriber_chunks.set(context, token, current)
            current = [record]
            newest = token
        else:
            current = [*current, record]
            newest = state.newest_archived_token
        self.subscriber_chunks.set(context, CURRENT, current)
        self.archive_state.set(
            context,
            SubscriberArchiveState(
                next_sequence=state.next_sequence + 1, newest_archived_token=newest
            ),
        )
        return record

    @rpc
    def get_subscriber_page(
        self, context: Context, input: GetSubscriberPageInput
    ) -> SubscriberPage:
        """Return one chunk newest first; the caller loads exactly that instance."""
        token = check_page_token(input.page_token)
        chunk = self.subscriber_chunks.get(context, token)
        if token == CURRENT:
            state = self.archive_state.get(context) or SubscriberArchiveState()
            return SubscriberPage(
                subscribers=list(reversed(chunk or [])),
                next_page_token=state.newest_archived_token,
            )
        if chunk is None:
            raise PageNotFoundError(f"no stored chunk has page token {token}", field="pageToken")
        first = int(token)
        older = archive_token(first - CHUNK_SIZE) if first > CHUNK_SIZE else ""
        return SubscriberPage(subscribers=list(reversed(chunk)), next_page_token=older)
