"""CustomerProfileFlow: customer profiles spread by email hash over AttributeMap instances.

``CustomerProfilesByEmailPartition[pNN]`` maps each normalized email whose partition is NN to
its profile. The caller names the one instance a call needs (:func:`lookup_options`,
:func:`upsert_options`), so a read loads one partition and an upsert locks and loads one: upserts
to different partitions never conflict, and upserts to one partition serialize.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from engine import AttributeMap, Context, Flow, NotFoundError, RPCInvokeOptions, rpc
from patterns._rules import matches

#: Partitions of the map. Part of the persisted layout: changing it moves most profiles to
#: another instance, so existing Flows would no longer find them.
PARTITION_COUNT = 16
PARTITION_PATTERN = r"^p[0-9]{2}$"
MAX_EMAIL_LENGTH = 320
MAX_DISPLAY_NAME_LENGTH = 200

# The email rule: one "@", a dot in the domain, no ASCII space or control character inside,
# optional surrounding whitespace (normalization strips it). Written with explicit ranges
# rather than \s so that pydantic's regex engine, Python's and a JSON Schema client's agree.
_ADDRESS_CHAR = r"[^@\x00-\x20\x7f]"
_ADDRESS = rf"{_ADDRESS_CHAR}+@{_ADDRESS_CHAR}+\.{_ADDRESS_CHAR}+"
EMAIL_PATTERN = rf"^[ \t\r\n]*{_ADDRESS}[ \t\r\n]*$"
_NORMALIZED_EMAIL = re.compile(_ADDRESS)


class ProfileNotFoundError(NotFoundError):
    """No customer profile has that (normalized) email."""

    code = "PROFILE_NOT_FOUND"


def normalize_email(email: str) -> str:
    """Return ``email`` stripped and lower-cased: the key of its profile."""
    return email.strip().lower()


def partition_number(email: str) -> int:
    """Return the partition of ``email``: sha256 of its normalized UTF-8 form, mod 16."""
    digest = hashlib.sha256(normalize_email(email).encode("utf-8")).hexdigest()
    return int(digest, 16) % PARTITION_COUNT


def partition_name(number: int) -> str:
    """Return the AttributeMap instance of partition ``number``: ``p00`` ... ``p15``."""
    if not 0 <= number < PARTITION_COUNT:
        raise ValueError(f"partition {number} is outside 0..{PARTITION_COUNT - 1}")
    return f"p{number:02d}"


#: Every partition's instance name, in order.
PARTITIONS = tuple(partition_name(n) for n in range(PARTITION_COUNT))


def partition_of(email: str) -> str:
    """Return the AttributeMap instance that holds the profile of ``email``."""
    return partition_name(partition_number(email))


def _normalized(email: str) -> str:
    normalized = normalize_email(email)
    # The pattern allows only ASCII whitespace around the address, but strip() also removes
    # other whitespace, which could leave the address without a domain suffix.
    if not _NORMALIZED_EMAIL.fullmatch(normalized):
        raise ValueError("the email is not a valid address once stripped")
    return normalized


EmailAddress = Annotated[
    str,
    Field(
        max_length=MAX_EMAIL_LENGTH,
        json_schema_extra={"pattern": EMAIL_PATTERN},
        description="An email address (one @, a dot in the domain); surrounding whitespace "
        "and case are ignored.",
    ),
    matches(
        EMAIL_PATTERN,
        "must be an email address: one @, a dot in the domain, and no space or control "
        "character inside (spaces around it are ignored)",
    ),
    AfterValidator(_normalized),
]
"""An email address, validated and normalized (stripped, lower-cased) as it is parsed."""

DisplayName = Annotated[str, Field(min_length=1, max_length=MAX_DISPLAY_NAME_LENGTH)]
"""A profile's display name: 1 to 200 characters."""


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class CustomerProfile(_Model):
    """One customer's profile, as stored in its partition."""

    email: str
    display_name: str
    partition: str = Field(pattern=PARTITION_PATTERN)
    #: How many upserts the profile has had (1 once created): a lost update would show.
    revision: int = Field(ge=1)
    updated_at: datetime


PartitionProfiles = dict[str, CustomerProfile]
"""The value of one partition instance: normalized email to profile."""


class UpsertProfileInput(_Model):
    """The profile to create or replace."""

    email: EmailAddress
    display_name: DisplayName


class GetProfileInput(_Model):
    """Whose profile to read."""

    email: EmailAddress


class CustomerProfileFlow(Flow[None]):
    """RPC-only Flow holding customer profiles in 16 hash partitions of an AttributeMap."""

    profiles: AttributeMap[PartitionProfiles] = AttributeMap(
        "CustomerProfilesByEmailPartition", PartitionProfiles
    )

    # Neither RPC declares a load or a lock: which instance a call needs depends on its input,
    # so the caller adds it with RPCInvokeOptions.
    @rpc
    def upsert_profile(self, context: Context, input: UpsertProfileInput) -> CustomerProfile:
        """Create or replace the profile of ``input.email`` in its partition.

        A read-modify-write of one instance: invoke it with :func:`upsert_options`, whose load
        lets the handler read the partition and whose lock keeps a concurrent upsert to the
        same partition from overwriting this one.
        """
        partition = partition_of(input.email)
        stored = self.profiles.get(context, partition) or {}
        previous = stored.get(input.email)
        profile = CustomerProfile(
            email=input.email,
            display_name=input.display_name,
            partition=partition,
            revision=previous.revision + 1 if previous else 1,
            updated_at=datetime.now(UTC),
        )
        self.profiles.set(context, partition, {**stored, input.email: profile})
        return profile

    @rpc
    def get_profile(self, context: Context, input: GetProfileInput) -> CustomerProfile:
        """Return the profile of ``input.email``; invoke it with :func:`lookup_options`.

        Raises:
            ProfileNotFoundError: No profile has that email.
        """
        profile = (self.profiles.get(context, partition_of(input.email)) or {}).get(input.email)
        if profile is None:
            raise ProfileNotFoundError(f"no profile has email {input.email}", field="email")
        return profile


def lookup_options(email: str) -> RPCInvokeOptions:
    """Return the options of a lookup of ``email``: an exact load of its partition, no lock."""
    partition = partition_of(email)
    return RPCInvokeOptions(
        load_attribute_map_instances=(CustomerProfileFlow.profiles.load(partition),)
    )


def upsert_options(email: str) -> RPCInvokeOptions:
    """Return the options of an upsert of ``email``: lock and load exactly its partition."""
    partition = partition_of(email)
    return RPCInvokeOptions(
        lock_attribute_map_instances=(CustomerProfileFlow.profiles.lock(partition),),
        load_attribute_map_instances=(CustomerProfileFlow.profiles.load(partition),),
    )
