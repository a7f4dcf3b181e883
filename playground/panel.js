// The examples view's Flow state panel: the Attributes, history, SubFlows, Channels and live
// Streams of the Flow the form names.
//
// What it reads comes from the example's catalog entry (`flow`, see catalog.js): `attributes`
// lists the names it reads (empty: every plain Attribute). `streams` names the Streams of that
// Flow the "Live stream" box follows (stream.js), from the oldest retained message on.
// `channels` makes the "Channels" box show the Flow's queues: their sizes (listChannels) and
// pending messages, oldest first (listChannelMessages); `true` shows every Channel and
// non-empty ChannelMap instance, a list only those Channel or ChannelMap names, in its order.
// `messageIdParam` names the param that a pending message's "Use ID" button fills, on the
// routes that have it.
//
// For every Flow it shows, the "SubFlows" box names the parent and lists the children
// (SearchFlows on ParentFlowId); their buttons open that Flow in the panel, in place of the
// form's Flow, until the form's Flow changes or is called.

import {
  $, el, enc, flowHref, flowPath, getJSON, plural, problemText, queryString, searchRuns,
  timeOf, token, valueText,
} from "./lib.js";
import { currentFlowId, setParam, state } from "./examples-state.js";
import { StreamFollower } from "./stream.js";

// The newest events are the interesting ones, but history is served oldest first in pages,
// so the panel reads a bounded number of pages and shows the tail.
const HISTORY_PAGE_SIZE = 1000;
const HISTORY_MAX_PAGES = 10;
const HISTORY_SHOWN = 50;
// A queue can outgrow any page too: the Channels box shows its oldest pending messages only.
const CHANNEL_MESSAGES_SHOWN = 20;
// A fan-out can outgrow any page too: the SubFlows box reads one page of child runs.
const SUBFLOWS_PAGE_SIZE = 100;
const NO_FLOW = "No Flow with this ID yet. Run the example's start route.";

// Read a bounded number of history pages of the Flow's latest run.
async function loadHistory(flowId) {
  const events = [];
  let pageToken = "";
  for (let page = 0; page < HISTORY_MAX_PAGES; page++) {
    const qs = new URLSearchParams({ pageSize: String(HISTORY_PAGE_SIZE) });
    if (pageToken) qs.set("pageToken", pageToken);
    const res = await getJSON(flowPath(flowId, `/history?${qs}`));
    if (!res.ok) return { ...res, events };
    events.push(...(res.data.events ?? []));
    pageToken = res.data.nextPageToken;
    if (!pageToken) return { ok: true, events, complete: true };
  }
  return { ok: true, events, complete: false };
}

// Refresh the whole panel for the Flow it shows (the form's, or one opened from the panel).
export async function refreshState() {
  const seq = ++state.refreshSeq;
  const formFlowId = currentFlowId();
  const flowId = state.panelFlowId || formFlowId;
  // The catalog's Attributes, Streams and Channels describe the form's Flow only.
  const own = flowId === formFlowId;
  $("state-flow-id").textContent = flowId || "—";
  $("state-opened").hidden = own;
  $("state-explore").hidden = !flowId;
  if (flowId) $("state-explore").href = flowHref(flowId);
  followStreams(own ? flowId : "");
  const wantsChannels = Boolean(own && flowId && state.example.flow.channels);
  $("channels-box").hidden = !wantsChannels;
  if (!wantsChannels) $("channels").replaceChildren();
  if (!flowId) {
    // An example without a Flow must not keep showing the previous example's state.
    showNoRun("This example names no Flow.", "");
    return;
  }
  // Search first: a Flow ID with no run yet is an empty page there, where every read below
  // would answer 404.
  const found = await searchRuns(flowId);
  if (seq !== state.refreshSeq) return;
  const latest = found.ok ? found.data.flows[0] : null;
  if (!latest) {
    const note = found.ok ? NO_FLOW : problemText(found);
    showNoRun(note, note);
    if (wantsChannels) {
      $("channels").replaceChildren();
      $("channels-note").textContent = note;
    }
    return;
  }
  const names = new URLSearchParams();
  // Another Flow type need not have the example's Attributes: no names reads all of its own.
  if (own) for (const name of state.example.flow.attributes ?? []) names.append("name", name);
  const [attrs, history, channels, children] = await Promise.all([
    getJSON(flowPath(flowId, `/attributes?${names}`)),
    loadHistory(flowId),
    wantsChannels ? loadChannels(flowId, state.example.flow.channels) : null,
    loadChildren(flowId),
  ]);
  if (seq !== state.refreshSeq) return;
  if (channels) renderChannels(channels);
  renderFamily(flowId, latest, children);
  renderAttributes(attrs);
  renderHistory(history);
}

// Show a panel with no run to read: the notes say why.
function showNoRun(attributesNote, historyNote) {
  $("attributes-note").textContent = attributesNote;
  $("attributes").parentElement.hidden = true;
  $("history-note").textContent = historyNote;
  $("history").replaceChildren();
  $("subflows-box").hidden = true;
}

// Show the Attribute values read, or the problem.
function renderAttributes(attrs) {
  // Unset Attributes are absent from values, so an empty object needs saying in words.
  const empty = attrs.ok && !Object.keys(attrs.data.values ?? {}).length;
  $("attributes-note").textContent = !attrs.ok ? problemText(attrs)
    : `Run ID ${attrs.data.runId}${empty ? ". No Attribute is set yet." : ""}`;
  $("attributes").textContent = attrs.ok ? JSON.stringify(attrs.data.values, null, 2) : "";
  $("attributes").parentElement.hidden = !attrs.ok;
}

// Show the newest HISTORY_SHOWN events, newest first.
function renderHistory(history) {
  const list = $("history");
  list.replaceChildren();
  if (!history.ok) {
    $("history-note").textContent = problemText(history);
    return;
  }
  const shown = history.events.slice(-HISTORY_SHOWN).reverse();
  const total = `${history.events.length}${history.complete ? "" : "+"}`;
  $("history-note").textContent = shown.length < history.events.length || !history.complete
    ? `Showing ${shown.length} of ${total} events.`
    : `${plural(shown.length, "event")}.`;
  for (const ev of shown) {
    const item = el("li", { class: "event" },
      el("span", { class: "ev-id" }, `#${ev.eventId}`),
      el("span", { class: "ev-type" }, ev.eventType),
      el("time", { datetime: ev.at, title: ev.at }, timeOf(ev.at)));
    if (ev.details && Object.keys(ev.details).length) {
      item.append(el("code", { class: "ev-details" }, JSON.stringify(ev.details)));
    }
    list.append(item);
  }
}

// ---------- SubFlows ----------

// Follow the form's Flow again (after a call, or when its Flow ID changes).
export function showFormFlow() {
  state.panelFlowId = "";
  refreshState();
}

// Show another Flow in the panel: a parent or a SubFlow of the Flow shown now.
function openInPanel(flowId) {
  state.panelFlowId = flowId === currentFlowId() ? "" : flowId;
  refreshState();
  // The pressed button is about to be replaced; keep the keyboard in the panel.
  $("state-title").focus();
}

// Search the Flow's children. SearchFlows returns every run of a child Flow ID, newest first
// here, so the first run of each ID is the one to list.
async function loadChildren(flowId) {
  const qs = new URLSearchParams({
    query: `ParentFlowId = ${queryString(flowId)} ORDER BY StartTime DESC`,
    pageSize: String(SUBFLOWS_PAGE_SIZE),
  });
  const found = await getJSON(`/api/v1/flows?${qs}`);
  const children = [];
  const seen = new Set();
  for (const run of (found.ok ? found.data.flows : null) ?? []) {
    if (seen.has(run.flowId)) continue;
    seen.add(run.flowId);
    children.push(run);
  }
  // A SubFlow's ID ends with its index in the Wait: numeric order puts -2 before -10.
  children.sort((a, b) => a.flowId.localeCompare(b.flowId, "en", { numeric: true }));
  return { found, children, more: Boolean(found.ok && found.data.nextPageToken) };
}

// Show the parent of the Flow's latest run and its children, with buttons that open them.
function renderFamily(flowId, latest, { found, children, more }) {
  const parentId = latest.parentFlowId || "";
  const runId = latest.runId;
  const parent = $("subflow-parent");
  parent.hidden = !parentId;
  parent.replaceChildren();
  if (parentId) {
    const open = el("button", { type: "button", class: "small",
                                "aria-label": `Open parent Flow ${parentId}` }, "Open parent");
    open.addEventListener("click", () => openInPanel(parentId));
    parent.append("SubFlow of ", el("code", { class: "sf-parent-id" }, parentId), " ", open);
  }
  const list = $("subflows");
  list.replaceChildren();
  list.setAttribute("aria-label", `SubFlows of ${flowId}`);
  for (const child of children) {
    const open = el("button", { type: "button", class: "small sf-open",
                                "aria-label": `Open SubFlow ${child.flowId}` }, "Open");
    open.addEventListener("click", () => openInPanel(child.flowId));
    const item = el("li", { class: "subflow", "data-flow-id": child.flowId },
      el("code", { class: "sf-id" }, child.flowId),
      el("span", { class: `sf-status st-${child.status.toLowerCase()}` }, child.status), open);
    // With ATTACH, or after a parent run that started fewer children, a child's latest run
    // may belong to an earlier run of this Flow.
    if (child.parentRunId !== runId) {
      item.append(el("span", { class: "sf-earlier muted small-text" }, "from an earlier run"));
    }
    list.append(item);
  }
  list.hidden = !children.length;
  let note = "";
  if (!found.ok) note = problemText(found);
  else if (children.length) {
    const counts = new Map();
    for (const child of children) counts.set(child.status, (counts.get(child.status) ?? 0) + 1);
    const byStatus = [...counts].map(([status, n]) => `${n} ${status}`).join(", ");
    note = `${plural(children.length, "SubFlow")}: ${byStatus}.`;
    if (more) note += ` Read from the newest ${SUBFLOWS_PAGE_SIZE} child runs only.`;
  }
  $("subflows-note").textContent = note;
  $("subflows-note").hidden = !note;
  // A Flow with neither a parent nor children has nothing to show here.
  $("subflows-box").hidden = !parentId && !children.length && found.ok;
}

// ---------- Channels ----------

// Read the queues the catalog asks for, then the pending messages of every non-empty one. Sizes
// and messages are separate reads, so a message may move in between: the box says what it saw.
async function loadChannels(flowId, wanted) {
  const base = flowPath(flowId, "/channels");
  const listed = await getJSON(base);
  if (!listed.ok) return { ...listed, queues: [] };
  let queues = listed.data.channels ?? [];
  if (Array.isArray(wanted)) {
    queues = wanted.flatMap((name) => queues.filter((q) => q.name === name));
  }
  await Promise.all(queues.map(async (queue) => {
    queue.messages = [];
    if (!queue.size) return;
    const qs = new URLSearchParams({ pageSize: String(CHANNEL_MESSAGES_SHOWN) });
    if (queue.instance) qs.set("instance", queue.instance);
    const page = await getJSON(`${base}/${enc(queue.name)}/messages?${qs}`);
    if (page.ok) queue.messages = page.data.messages ?? [];
    else queue.problem = problemText(page);
  }));
  return { ok: true, queues };
}

// Show each queue's size and pending messages, with "Use ID" buttons where the route takes one.
function renderChannels(result) {
  const root = $("channels");
  root.replaceChildren();
  if (!result.ok) {
    $("channels-note").textContent = problemText(result);
    return;
  }
  const pending = result.queues.reduce((sum, queue) => sum + queue.size, 0);
  $("channels-note").textContent = !result.queues.length ? "This Flow has no such Channel."
    : `${plural(pending, "pending message")}.`;
  const { example, route } = state;
  const idParam = example.flow.messageIdParam;
  // A "Use ID" button only where the selected route takes a message ID.
  const takesId = Boolean(idParam) && (route.params ?? []).some((p) => p.name === idParam);
  for (const queue of result.queues) {
    const label = queue.instance ? `${queue.name}/${queue.instance}` : queue.name;
    const size = el("span", { class: "channel-size" }, `${queue.size} pending`);
    const node = el("div", { class: "channel", "data-channel": label },
      el("p", { class: "channel-head" }, el("code", {}, label), " ", size));
    const list = el("ol", { class: "channel-messages",
                            "aria-label": `Pending messages of ${label}` });
    for (const message of queue.messages) {
      const item = el("li", { class: "channel-message", "data-message-id": message.messageId },
        el("span", { class: "cm-value" }, valueText(message.value)));
      if (takesId) {
        const use = el("button", { type: "button", class: "small cm-use",
                                   "aria-label": `Use message ID ${message.messageId}` }, "Use ID");
        use.addEventListener("click", () => {
          setParam(idParam, message.messageId);
          $(`param-${idParam}`)?.focus();
        });
        item.append(use);
      }
      item.append(el("span", { class: "cm-meta" },
        el("code", { class: "cm-id", title: "message ID" }, message.messageId),
        el("time", { datetime: message.publishedAt, title: message.publishedAt },
           timeOf(message.publishedAt))));
      list.append(item);
    }
    if (queue.messages.length) node.append(list);
    const shown = queue.messages.length;
    let note = "";
    if (queue.problem) note = queue.problem;
    else if (!queue.size) note = "No pending message.";
    else if (shown < queue.size) note = `Showing the oldest ${shown} of ${queue.size}.`;
    if (note) node.append(el("p", { class: "muted small-text" }, note));
    root.append(node);
  }
}

// ---------- live Stream view ----------

// What the live box follows now; a new example, Flow ID or token replaces every follower.
const live = { key: "", followers: [] };

// Follow the example's Streams of this Flow ID ("" closes every follower).
function followStreams(flowId) {
  const streams = (flowId && state.example?.flow?.streams) || [];
  const bearer = token();
  const key = JSON.stringify([state.example?.id ?? "", flowId, bearer, streams]);
  if (key === live.key) return;
  for (const follower of live.followers) follower.close();
  live.key = key;
  live.followers = streams.map((stream) => new StreamFollower(stream, flowId, bearer));
  $("streams").replaceChildren(...live.followers.map((follower) => follower.node));
  $("live-stream").hidden = !live.followers.length;
  for (const follower of live.followers) follower.start();
}

// Close the live box's followers (the examples view is leaving the screen).
export function stopFollowing() {
  followStreams("");
}

// Wire the panel's buttons once.
export function initPanel() {
  $("refresh").addEventListener("click", refreshState);
  $("state-back").addEventListener("click", showFormFlow);
  // A new token must reach the live Stream view, which connects with it.
  $("token").addEventListener("change", () => {
    if (!$("view-examples").hidden) refreshState();
  });
}
