"""Channels of a Flow: queues and their pending messages, publish, delete by ID."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from app.deps import EngineDep, LimitsDep, PageSizeQuery, PageTokenQuery, RunIdQuery
from app.errors import responses
from app.limits import check_value_size
from app.schemas import (
    ChannelInfoResponse,
    ChannelMessageResponse,
    ChannelMessagesResponse,
    ChannelsResponse,
    PublishBody,
    PublishResponse,
)

router = APIRouter(prefix="/api/v1/flows", tags=["channels"])

InstanceQuery = Annotated[
    str | None,
    Query(min_length=1, max_length=256, description="The instance key, for a ChannelMap."),
]


@router.get(
    "/{flowId}/channels",
    operation_id="listChannels",
    response_model=ChannelsResponse,
    responses=responses(400, 404, 422),
)
async def list_channels(
    flowId: str,
    eng: EngineDep,
    run_id: RunIdQuery = None,
) -> ChannelsResponse:
    """List every Channel and non-empty ChannelMap instance with its pending count."""
    found = await eng.list_channels(flowId, run_id)
    return ChannelsResponse(
        flow_id=found.flow_id,
        run_id=found.run_id,
        channels=[
            ChannelInfoResponse(name=c.name, instance=c.instance, size=c.size)
            for c in found.channels
        ],
    )


@router.get(
    "/{flowId}/channels/{channel}/messages",
    operation_id="listChannelMessages",
    response_model=ChannelMessagesResponse,
    responses=responses(400, 404, 422),
)
async def list_channel_messages(
    flowId: str,
    channel: str,
    eng: EngineDep,
    instance: InstanceQuery = None,
    run_id: RunIdQuery = None,
    page_size: PageSizeQuery = 100,
    page_token: PageTokenQuery = "",
) -> ChannelMessagesResponse:
    """List the pending messages of a Channel (or ChannelMap instance), oldest first."""
    page = await eng.list_channel_messages(
        flowId,
        channel,
        instance=instance,
        run_id=run_id,
        page_size=page_size,
        page_token=page_token,
    )
    return ChannelMessagesResponse(
        flow_id=page.flow_id,
        run_id=page.run_id,
        messages=[ChannelMessageResponse.of(m) for m in page.messages],
        next_page_token=page.next_page_token,
    )


@router.post(
    "/{flowId}/channels/{channel}/messages",
    operation_id="publishToChannel",
    status_code=status.HTTP_201_CREATED,
    response_model=PublishResponse,
    responses=responses(400, 404, 422),
)
async def publish_to_channel(
    flowId: str,
    channel: str,
    body: PublishBody,
    eng: EngineDep,
    limits: LimitsDep,
) -> PublishResponse:
    """Publish a message to a Channel of the Flow's active run; Steps waiting on it see it."""
    check_value_size(limits, body.value, "value")
    message_id = await eng.publish_to_channel(flowId, channel, body.value, instance=body.instance)
    return PublishResponse(message_id=message_id)


@router.delete(
    "/{flowId}/channels/{channel}/messages/{messageId}",
    operation_id="deleteChannelMessage",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=responses(400, 404, 422),
)
async def delete_channel_message(
    flowId: str,
    channel: str,
    messageId: str,
    eng: EngineDep,
    instance: InstanceQuery = None,
) -> Response:
    """Delete a pending message of the Flow's active run by ID (404 when no longer pending)."""
    await eng.delete_channel_message(flowId, channel, messageId, instance=instance)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
