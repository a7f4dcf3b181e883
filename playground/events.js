// History events as rows people read: each event's ID, type, time and one line saying what
// happened ("Ship-1 waits until 14:03:07", "RPC add_note committed"), the raw JSON of its
// details one click away, a failed attempt's traceback folded under it.
//
// What each event type's details carry (engine/_storage): FLOW_STARTED {flowType, input,
// initialAttributes}; FLOW_CLOSED {status, errorType, errorMessage, reason?}; STEP_WAITING
// {stepExecutionId, dueAt, channels? (only a wait on Channels or SubFlows has them),
// attributes}; STEP_ATTEMPT_FAILED {stepExecutionId, attempt, errorType, errorMessage, retryAt,
// traceback}; STEP_CLOSED {stepExecutionId, attempt, decision, errorType, errorMessage,
// nextSteps, canceledSteps, attributes, traceback?}; RPC_COMMITTED {rpc, attributes,
// canceledSteps, nextSteps}; ATTRIBUTES_SET {attributes, erase}; CHANNEL_PUBLISHED and
// CHANNEL_MESSAGE_DELETED {channel, messageId}; CHANNEL_CONSUMED {stepExecutionId, channel,
// messageIds}; SUBFLOW_STARTED and SUBFLOW_ATTACHED {stepExecutionId, index, flowType, flowId,
// runId}; SUBFLOW_CLOSED {..., status}; TIME_TRAVELED {previousRunId, previousFlowId, to,
// reason, skipWritesReapply}; WRITES_REAPPLIED {sourceEventId, attributes, published, deleted}.
// Times in details are RFC 3339 strings (microseconds since the epoch in older events).

import { el, flowHref, plural, valueText } from "./lib.js";
import { clockTime, relTime } from "./time.js";

// How a STEP_CLOSED decision reads.
const CLOSED_AS = {
  GO_TO: "closed, going on",
  GRACEFUL_COMPLETE: "completed",
  FORCE_COMPLETE: "completed the run (force complete)",
  FORCE_FAIL: "failed the run (force fail)",
  DEAD_END: "closed at a dead end",
  FAILED: "failed",
};
// An input or value longer than this is cut in the summary line (the JSON has all of it).
const VALUE_CHARS = 60;

// A Step execution ID or other name, as code.
const code = (text) => el("code", {}, String(text));

// A list of names, each as code, joined by commas.
function names(list) {
  const parts = [];
  list.forEach((name, i) => parts.push(...(i ? [", ", code(name)] : [code(name)])));
  return parts;
}

// A value cut to one short line.
function shortValue(value) {
  const text = valueText(value);
  return text.length > VALUE_CHARS ? `${text.slice(0, VALUE_CHARS - 1)}…` : text;
}

// An error as "Type: message".
const errorText = (d) => [d.errorType, d.errorMessage].filter(Boolean).join(": ");

// The writes, next Steps and canceled Steps a commit made, as trailing clauses.
function effects(d) {
  const parts = [];
  if (d.attributes?.length) parts.push("; wrote ", ...names(d.attributes));
  if (d.nextSteps?.length) parts.push("; next ", ...names(d.nextSteps));
  if (d.canceledSteps?.length) parts.push("; canceled ", ...names(d.canceledSteps));
  return parts;
}

// A SubFlow's Flow ID, linked to its page.
const subFlowLink = (d) => el("a", { href: flowHref(d.flowId, d.runId ?? "") }, d.flowId);

// Describe a time travel's point: "to its beginning", "to event #5", ...
function pointText(to = {}) {
  switch (to.kind) {
    case "BEGINNING": return ["to its beginning"];
    case "EVENT": return [`to event #${to.eventId}`];
    case "TIME": return ["to ", clockTime(to.at)];
    case "STEP_TYPE": return ["to before the first ", code(to.stepType)];
    case "STEP_EXECUTION":
      return [`to before the ${to.method === "WAIT_FOR" ? "WaitFor" : "Execute"} of `,
              code(to.stepExecutionId)];
    default: return [`to ${JSON.stringify(to)}`];
  }
}

// Return the summary of an event of Flow `flowId` as a list of text and nodes.
function summaryParts(ev, flowId = "") {
  const d = ev.details ?? {};
  const step = d.stepExecutionId ? code(d.stepExecutionId) : null;
  const at = Date.parse(ev.at);
  switch (ev.eventType) {
    case "FLOW_STARTED":
      return ["Run started as ", code(d.flowType ?? "?"),
              d.input === null || d.input === undefined ? " with no input"
                : ` with input ${shortValue(d.input)}`,
              ...(d.initialAttributes?.length ? ["; set ", ...names(d.initialAttributes)] : [])];
    case "FLOW_CLOSED": {
      const why = errorText(d) || d.reason || "";
      return [`Run closed ${d.status ?? ""}`, why ? `: ${why}` : ""];
    }
    case "STEP_WAITING":
      if (Array.isArray(d.channels)) {
        const on = d.channels.length ? ["Channel ", ...names(d.channels)] : ["its SubFlows"];
        return [step, " waits for ", ...on, ...effects(d)];
      }
      return d.dueAt
        ? [step, " waits until ", clockTime(d.dueAt, { ref: at }), ...effects(d)]
        : [step, " moves on to Execute", ...effects(d)];
    case "STEP_ATTEMPT_FAILED":
      return [step, ` attempt ${d.attempt ?? "?"} failed: ${errorText(d) || "error"}`,
              ...(d.retryAt ? [", retry at ", clockTime(d.retryAt, { ref: at })] : [])];
    case "STEP_CLOSED": {
      const how = CLOSED_AS[d.decision] ?? `closed (${d.decision})`;
      const error = errorText(d);
      const tries = d.attempt > 1 ? ` after ${plural(d.attempt, "attempt")}` : "";
      return [step, ` ${how}${tries}`, error ? `: ${error}` : "", ...effects(d)];
    }
    case "RPC_COMMITTED":
      return ["RPC ", code(d.rpc ?? "?"), " committed", ...effects(d)];
    case "ATTRIBUTES_SET":
      return d.erase ? ["Erased the hard-delete values of ", ...names(d.attributes ?? [])]
        : ["A client set ", ...names(d.attributes ?? [])];
    case "CHANNEL_PUBLISHED":
      return ["Message ", shortCode(d.messageId), " published to ", code(d.channel)];
    case "CHANNEL_MESSAGE_DELETED":
      return ["Message ", shortCode(d.messageId), " deleted from ", code(d.channel)];
    case "CHANNEL_CONSUMED":
      return [step, ` took ${plural(d.messageIds?.length ?? 0, "message")} from `,
              code(d.channel)];
    case "SUBFLOW_STARTED":
      return [step, " started SubFlow ", subFlowLink(d), d.flowType ? ` (${d.flowType})` : ""];
    case "SUBFLOW_ATTACHED":
      return [step, " attached to the running SubFlow ", subFlowLink(d)];
    case "SUBFLOW_CLOSED":
      return ["SubFlow ", subFlowLink(d), ` of `, step, ` closed ${d.status ?? ""}`];
    case "TIME_TRAVELED":
      return ["Traveled from run ", shortCode(d.previousRunId),
              // A fork names the Flow ID it came from.
              ...(d.previousFlowId && d.previousFlowId !== flowId
                ? [" of ", code(d.previousFlowId)] : []),
              " ", ...pointText(d.to), d.reason ? `: ${d.reason}` : "",
              d.skipWritesReapply ? " (writes not reapplied)" : ""];
    case "WRITES_REAPPLIED":
      return [`Reapplied event #${d.sourceEventId ?? "?"}: `, reapplied(d)];
    default:
      return [shortValue(d)];
  }
}

// What a WRITES_REAPPLIED put back, in words.
function reapplied(d) {
  const parts = [];
  if (d.attributes?.length) parts.push(`wrote ${d.attributes.join(", ")}`);
  if (d.published?.length) parts.push(`published ${plural(d.published.length, "message")}`);
  if (d.deleted?.length) parts.push(`deleted ${plural(d.deleted.length, "message")}`);
  return parts.join(", ") || "nothing";
}

// A run or message ID (a UUID) cut to its start, enough to tell them apart in a line; the
// whole ID in its tooltip.
const shortCode = (id) => el("code", { title: id ?? "" },
                             id && id.length > 13 ? `${id.slice(0, 13)}…` : String(id ?? ""));

// The summary line of an event of Flow `flowId`.
function summaryLine(ev, flowId = "") {
  const parts = summaryParts(ev, flowId).filter((p) => p !== null && p !== "");
  return el("span", { class: "ev-summary" }, ...parts);
}

// One history event of Flow `flowId`: ID, type, time and `extra` (a travel button), its
// summary, the raw JSON of its details in a disclosure, and a failed attempt's traceback folded
// under it.
export function eventRow(ev, flowId, extra = null) {
  const item = el("li", { class: "event", "data-event-id": String(ev.eventId) },
    el("span", { class: "ev-id" }, `#${ev.eventId}`),
    el("span", { class: "ev-type" }, ev.eventType),
    el("span", { class: "ev-when" }, relTime(ev.at), " ", clockTime(ev.at, { cls: "muted" })),
    extra, summaryLine(ev, flowId));
  // A traceback is shown as text to read, not inside the JSON.
  const { traceback, ...details } = ev.details ?? {};
  if (Object.keys(details).length) {
    item.append(el("details", { class: "ev-raw" }, el("summary", {}, "Details (JSON)"),
                   el("pre", { class: "ev-details" }, JSON.stringify(details, null, 2))));
  }
  if (traceback) item.append(tracebackBlock(traceback, false));
  return item;
}

// A traceback, folded under a "Traceback" summary unless `open`.
export function tracebackBlock(text, open) {
  const block = el("details", { class: "traceback" }, el("summary", {}, "Traceback"),
                   el("pre", {}, text));
  block.open = open;
  return block;
}
