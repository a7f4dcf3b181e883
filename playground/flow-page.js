// The explorer's Flow page, at "#/flows/<flowId>?runId=<runId>" (no runId: the latest run): a
// summary (status, times, result or error, parent and SubFlows), the runs of the Flow ID, the
// history as a timeline with the event list below it (paged, never read whole), Attributes
// (AttributeMap instances on demand), Channels, live Streams, and the actions. The latest run
// can time travel from here: from a Step bar (before its WaitFor or its Execute), from an event
// of the list, or to its beginning (travel.js asks for confirmation).

import {
  $, dateTimeOf, durationText, el, enc, flowHref, flowPath, flowTypes, getJSON, plural,
  problemText, queryString, searchRuns, statusBadge, timeEl, token, valueText,
} from "./lib.js";
import { renderActions, report } from "./actions.js";
import { StreamFollower } from "./stream.js";
import { deriveTimeline, eventsOf, focusBar, renderTimeline } from "./timeline.js";
import { initTravel, openTravel, stepPoints } from "./travel.js";

const RUNS_SHOWN = 20;
const CHILDREN_SHOWN = 50;
const HISTORY_PAGE_SIZE = 100;
const CHANNEL_MESSAGES_SHOWN = 20;

// What the page shows: the Flow and run, the loaded history pages, the selected Step bar, the
// Flow ID's latest run (only it can time travel), and the page a travel's result is carried to.
const page = { flowId: "", runId: "", run: null, typeInfo: null, events: [], nextToken: "",
               selected: "", model: null, seq: 0, streamsKey: "", followers: [],
               latestRunId: "", carry: "" };

// Show the page of a Flow (and run); a refresh of the same run keeps the selected bar.
export async function showFlow(flowId, runId) {
  $("search-view").hidden = true;
  $("flow-view").hidden = false;
  if (flowId !== page.flowId || runId !== page.runId) {
    page.selected = "";
    // A time travel's result stays in view on the page of the run it made.
    $("fx-action-result").hidden = page.carry !== `${flowId}\n${runId}`;
  }
  page.carry = "";
  Object.assign(page, { flowId, runId });
  $("fx-title").textContent = flowId;
  await load();
}

// Leave the Flow page: its Stream followers stop, its forms go, any load in flight is dropped.
export function leaveFlow() {
  follow("", null);
  $("fx-actions").replaceChildren();
  $("fx-maps").replaceChildren();
  Object.assign(page, { flowId: "", runId: "", seq: page.seq + 1 });
}

// Read everything the page shows, then render it.
async function load() {
  const seq = ++page.seq;
  const { flowId, runId } = page;
  $("flow-view").setAttribute("aria-busy", "true");
  const [runs, types] = await Promise.all([
    searchRuns(flowId, { pageSize: RUNS_SHOWN }), flowTypes()]);
  let run = runs.ok ? runs.data.flows.find((r) => !runId || r.runId === runId) : null;
  if (runs.ok && runId && !run) {
    // An older run than the first page lists.
    const one = await searchRuns(flowId, { extra: `RunId = ${queryString(runId)}` });
    run = one.ok ? one.data.flows[0] : null;
  }
  if (seq !== page.seq) return;
  $("flow-view").removeAttribute("aria-busy");
  $("fx-body").hidden = !run;
  $("fx-status").replaceChildren(run ? statusBadge(run.status) : "");
  if (!run) {
    $("fx-note").textContent = !runs.ok ? problemText(runs)
      : runId ? `Flow ${flowId} has no run ${runId}.` : `No Flow with the ID ${flowId}.`;
    follow("", null);
    return;
  }
  $("fx-note").textContent = "";
  page.run = run;
  page.typeInfo = types.get(run.flowType) ?? null;
  // Runs are listed newest first: the first is the latest.
  page.latestRunId = runs.data.flows[0]?.runId ?? run.runId;
  const r = enc(run.runId);
  const [result, attrs, channels, children, history] = await Promise.all([
    getJSON(flowPath(flowId, `/result?runId=${r}&waitSeconds=0`)),
    getJSON(flowPath(flowId, `/attributes?runId=${r}`)),
    loadChannels(flowId, run.runId),
    getJSON(`/api/v1/flows?${new URLSearchParams({
      query: `ParentRunId = ${queryString(run.runId)}`, pageSize: String(CHILDREN_SHOWN) })}`),
    historyPage(flowId, run.runId, ""),
  ]);
  if (seq !== page.seq) return;
  renderRuns(runs.data, run);
  // The run's input is in its first event, FLOW_STARTED, on the first page of its history.
  const started = history.ok ? history.data.events.find((e) => e.eventType === "FLOW_STARTED")
    : undefined;
  // A failed run's traceback: its last Step's, kept with the STEP_CLOSED that failed it.
  const failed = history.ok ? [...history.data.events].reverse().find(
    (e) => e.eventType === "STEP_CLOSED" && e.details.traceback) : undefined;
  renderSummary(run, result, children, started ? started.details.input : undefined,
                failed?.details.traceback);
  renderAttributes(attrs);
  renderChannels(channels);
  page.events = history.ok ? history.data.events : [];
  page.nextToken = history.ok ? history.data.nextPageToken : "";
  $("fx-history-note").textContent = history.ok ? "" : problemText(history);
  renderHistory();
  follow(flowId, run);
  const channelNames = channels.ok ? [...new Set(channels.queues.map((q) => q.name))] : [];
  renderActions({ flowId, run, typeInfo: page.typeInfo, channelNames, done: load });
  renderTravel();
}

// Whether the run shown can time travel: only a Flow ID's latest run can.
const canTravel = () => page.run !== null && page.run.runId === page.latestRunId;

// Show the Actions card's time travel part: "Travel to beginning", or why this run cannot.
function renderTravel() {
  const run = page.run;
  $("fx-travel").hidden = false;
  $("fx-travel-beginning").hidden = !canTravel() || !page.events.length;
  $("fx-travel-note").replaceChildren(...(canTravel()
    ? ["Take this run back to a point and run again from there: to its beginning, to before ",
       "a Step execution's WaitFor or Execute (select its bar in the timeline), or to an event ",
       "of the list."]
    : [`Only the latest run of a Flow ID travels: run ${run.runId} is an older one. `,
       el("a", { href: flowHref(page.flowId, page.latestRunId) }, "Open the latest run")]));
}

// Open the time travel dialog for a point of the run shown.
function travel(point) {
  openTravel({ flowId: page.flowId, run: page.run, typeInfo: page.typeInfo, point,
               done: traveled });
}

// After a travel: say what it made, then show the new run (its deep link in the address).
function traveled(res, point) {
  const { flowId, runId, previousRunId } = res.data;
  report(res, `Traveled ${point.label}: new run ${runId} of ${flowId}, from run ` +
              `${previousRunId}.`);
  page.carry = `${flowId}\n${runId}`;
  const target = flowHref(flowId, runId);
  if (location.hash === target) load();
  else location.hash = target;
}

// Offer the travels of the selected Step bar: before its WaitFor and, when the history shows
// it reached its execute phase, before its Execute.
function renderStepTravel() {
  const box = $("fx-travel-step");
  const x = page.selected && canTravel()
    ? page.model.executions.find((e) => e.id === page.selected) : null;
  box.hidden = !x;
  if (!x) {
    box.replaceChildren();
    return;
  }
  const byId = new Map(page.events.map((ev) => [ev.eventId, ev]));
  const info = page.typeInfo?.steps?.find((s) => s.stepType === x.type) ?? null;
  const { waitFor, execute } = stepPoints(x, byId, info);
  // A button opening the dialog for one method's point.
  const button = (method, phase, mark) => {
    const b = el("button", { type: "button", class: "small", "data-method": method },
                 `Travel to before ${phase}…`);
    b.addEventListener("click", () => travel({
      to: { kind: "STEP_EXECUTION", stepExecutionId: x.id, method },
      label: `to before the ${phase} of ${x.id}`, event: mark.event, how: mark.how,
    }));
    return b;
  };
  box.replaceChildren(el("span", {}, "Time travel ", el("code", {}, x.id), ":"),
    waitFor ? button("WAIT_FOR", "WaitFor", waitFor)
      : el("span", { class: "muted small-text" }, "its queuing is not in the loaded events."),
    execute ? button("EXECUTE", "Execute", execute)
      : el("span", { class: "muted small-text" }, "it has not reached Execute."));
}

// Read one page of the run's history.
function historyPage(flowId, runId, pageToken) {
  const qs = new URLSearchParams({ runId, pageSize: String(HISTORY_PAGE_SIZE) });
  if (pageToken) qs.set("pageToken", pageToken);
  return getJSON(flowPath(flowId, `/history?${qs}`));
}

// Load the next page of history and redraw the timeline and the events with it.
async function loadMore() {
  const seq = page.seq;
  const res = await historyPage(page.flowId, page.run.runId, page.nextToken);
  if (seq !== page.seq) return;
  if (!res.ok) {
    $("fx-history-note").textContent = problemText(res);
    return;
  }
  page.events = [...page.events, ...res.data.events];
  page.nextToken = res.data.nextPageToken;
  renderHistory();
  $("fx-more-events").focus();
}

// List the runs of the Flow ID, newest first, the shown one marked.
function renderRuns(data, shown) {
  const list = $("fx-runs");
  list.replaceChildren(...data.flows.map((run) => {
    const link = el("a", { href: flowHref(run.flowId, run.runId), class: "run-link",
                           "aria-current": run.runId === shown.runId ? "page" : undefined },
                    el("code", {}, run.runId), " ", statusBadge(run.status));
    return el("li", {}, link, " ", el("span", { class: "muted small-text" },
                                      dateTimeOf(run.startedAt)));
  }));
  $("fx-runs-note").textContent = `${plural(data.flows.length, "run")}` +
    (data.nextPageToken ? `: the newest ${RUNS_SHOWN} are listed.` : ", newest first.");
}

// Fill the summary: status, type, run, times, input, result or error, parent and children.
function renderSummary(run, result, children, input, traceback) {
  const rows = [];
  // Add one term and its value to the list.
  const add = (term, ...value) => rows.push(el("dt", {}, term), el("dd", {}, ...value));
  add("Status", statusBadge(run.status));
  add("Flow type", el("code", {}, run.flowType));
  add("Run ID", el("code", {}, run.runId));
  add("Started", timeEl(run.startedAt, dateTimeOf(run.startedAt)));
  add("Closed", run.closedAt ? timeEl(run.closedAt, dateTimeOf(run.closedAt)) : "— (running)");
  const end = run.closedAt ? Date.parse(run.closedAt) : Date.now();
  add(run.closedAt ? "Duration" : "Running for", durationText(end - Date.parse(run.startedAt)));
  if (input !== undefined) {
    add("Input", input === null ? "null (no input)"
      : el("pre", { class: "json" }, JSON.stringify(input, null, 2)));
  }
  if (!result.ok) add("Result", problemText(result));
  else if (result.data.errorType || result.data.errorMessage) {
    add("Error", el("strong", { class: "error-text" }, result.data.errorType ?? run.status),
        result.data.errorMessage ? `: ${result.data.errorMessage}` : "");
    if (traceback) add("Traceback", tracebackBlock(traceback, true));
  }
  if (result.ok && result.data.completions.length) {
    add(run.closedAt ? "Result" : "Completions so far",
        el("pre", { class: "json" }, JSON.stringify(result.data.completions, null, 2)));
  } else if (result.ok && run.status === "COMPLETED") add("Result", "No Step completion.");
  if (run.parentFlowId) {
    add("Parent", el("a", { href: flowHref(run.parentFlowId, run.parentRunId ?? "") },
                     run.parentFlowId));
  }
  if (!children.ok) add("SubFlows", problemText(children));
  else if (children.data.flows.length) {
    // A SubFlow's ID ends with its index in the Wait: numeric order puts -2 before -10.
    const sorted = [...children.data.flows].sort(
      (a, b) => a.flowId.localeCompare(b.flowId, "en", { numeric: true }));
    const list = el("ul", { class: "fx-children" }, ...sorted.map((c) =>
      el("li", {}, el("a", { href: flowHref(c.flowId, c.runId) }, c.flowId), " ",
         statusBadge(c.status))));
    const more = children.data.nextPageToken ? ` (the first ${CHILDREN_SHOWN})` : "";
    add("SubFlows", `${plural(children.data.flows.length, "child run")}${more}`, list);
  }
  $("fx-summary").replaceChildren(...rows);
}

// Show the run's plain Attributes, and a loader per AttributeMap of its type.
function renderAttributes(attrs) {
  const values = attrs.ok ? attrs.data.values ?? {} : {};
  $("fx-attributes-note").textContent = !attrs.ok ? problemText(attrs)
    : Object.keys(values).length ? `${plural(Object.keys(values).length, "Attribute")} set.`
    : "No plain Attribute is set.";
  $("fx-attributes").textContent = JSON.stringify(values, null, 2);
  $("fx-attributes").hidden = !attrs.ok || !Object.keys(values).length;
  const maps = (page.typeInfo?.attributes ?? []).filter((a) => a.kind === "AttributeMap");
  $("fx-maps").replaceChildren(...maps.map((map) => mapLoader(map.name)));
}

// A form that reads one instance of an AttributeMap (instances are only read on demand).
function mapLoader(name) {
  const id = `fx-map-${name.replace(/[^A-Za-z0-9_-]/g, "_")}`;
  const input = el("input", { id, type: "text", autocomplete: "off", spellcheck: "false",
                              placeholder: "instance" });
  const out = el("pre", { class: "json", hidden: "" });
  const form = el("form", { class: "map-loader", "data-map": name },
    el("label", { for: id }, "Instance of ", el("code", {}, name)),
    el("div", { class: "inline" }, input, el("button", { type: "submit", class: "small" }, "Read")),
    out);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = `${name}/${input.value.trim()}`;
    const qs = new URLSearchParams({ name: key, runId: page.run.runId });
    const res = await getJSON(flowPath(page.flowId, `/attributes?${qs}`));
    out.hidden = false;
    out.textContent = !res.ok ? problemText(res)
      : key in res.data.values ? JSON.stringify(res.data.values[key], null, 2) : `${key} is unset.`;
  });
  return form;
}

// Read the run's Channels and the oldest pending messages of the non-empty ones.
async function loadChannels(flowId, runId) {
  const base = flowPath(flowId, "/channels");
  const listed = await getJSON(`${base}?runId=${enc(runId)}`);
  if (!listed.ok) return { ...listed, queues: [] };
  const queues = listed.data.channels ?? [];
  await Promise.all(queues.filter((q) => q.size).map(async (queue) => {
    const qs = new URLSearchParams({ runId, pageSize: String(CHANNEL_MESSAGES_SHOWN) });
    if (queue.instance) qs.set("instance", queue.instance);
    const res = await getJSON(`${base}/${enc(queue.name)}/messages?${qs}`);
    queue.messages = res.ok ? res.data.messages : [];
    if (!res.ok) queue.problem = problemText(res);
  }));
  return { ok: true, queues };
}

// Show each Channel's size and pending messages.
function renderChannels(result) {
  $("fx-channels-note").textContent = !result.ok ? problemText(result)
    : result.queues.length ? "" : "No Channel (a ChannelMap instance shows once non-empty).";
  $("fx-channels").replaceChildren(...result.queues.map((queue) => {
    const label = queue.instance ? `${queue.name}/${queue.instance}` : queue.name;
    const node = el("div", { class: "channel", "data-channel": label },
      el("p", { class: "channel-head" }, el("code", {}, label), " ",
         el("span", { class: "channel-size" }, `${queue.size} pending`)));
    const messages = queue.messages ?? [];
    if (messages.length) {
      const named = { class: "channel-messages", "aria-label": `Pending messages of ${label}` };
      node.append(el("ol", named,
        ...messages.map((m) => el("li", { class: "channel-message" },
          el("span", { class: "cm-value" }, valueText(m.value)),
          el("span", { class: "cm-meta" }, el("code", { class: "cm-id" }, m.messageId),
             timeEl(m.publishedAt))))));
    }
    if (queue.problem) node.append(el("p", { class: "error-text small-text" }, queue.problem));
    else if (messages.length < queue.size) {
      node.append(el("p", { class: "muted small-text" },
                     `Showing the oldest ${messages.length} of ${queue.size}.`));
    }
    return node;
  }));
}

// Follow the Streams of the run's Flow type live (Streams belong to the Flow ID).
function follow(flowId, run) {
  const streams = (run && page.typeInfo?.streams) || [];
  const key = JSON.stringify([flowId, run?.flowType ?? "", token(), streams.map((s) => s.name)]);
  if (key === page.streamsKey) return;
  for (const follower of page.followers) follower.close();
  page.streamsKey = key;
  page.followers = streams.map((s) => new StreamFollower({ flowType: run.flowType, name: s.name },
                                                        flowId, token()));
  $("fx-streams").replaceChildren(...page.followers.map((f) => f.node));
  $("fx-streams-note").textContent = run && !streams.length
    ? `${run.flowType} declares no Stream.` : "Oldest first, as they are written, for every run.";
  for (const follower of page.followers) follower.start();
}

// Draw the timeline of the loaded events and list them (only the selected bar's, if any).
function renderHistory() {
  const complete = !page.nextToken;
  page.model = deriveTimeline(page.events, { startStep: page.typeInfo?.startStep ?? null,
                                             status: page.run.status, complete });
  renderTimeline($("fx-timeline"), page.model, {
    status: page.run.status, selected: page.selected, more: !complete,
    // The pressed bar is redrawn: the keyboard stays on it.
    onSelect: (id) => {
      const pressed = id || page.selected;
      page.selected = id;
      renderHistory();
      focusBar(pressed);
    },
  });
  const only = page.selected ? eventsOf(page.model, page.selected) : null;
  const shown = only ? page.events.filter((ev) => only.has(ev.eventId)) : page.events;
  renderStepTravel();
  $("fx-filter").hidden = !only;
  $("fx-filter-text").textContent = only
    ? `Showing the ${plural(shown.length, "event")} of ${page.selected}.` : "";
  $("fx-events").replaceChildren(...shown.map(eventItem));
  $("fx-events-note").textContent = `${plural(page.events.length, "event")} loaded` +
    (complete ? ": the whole history." : ", oldest first; more follow.");
  $("fx-more-events").hidden = complete;
}

// One history event: its number, type, time and details; on the latest run, a button that
// travels to it.
function eventItem(ev) {
  const item = el("li", { class: "event", "data-event-id": String(ev.eventId) },
    el("span", { class: "ev-id" }, `#${ev.eventId}`),
    el("span", { class: "ev-type" }, ev.eventType), timeEl(ev.at));
  if (canTravel()) {
    const button = el("button", { type: "button", class: "small ev-travel",
                                  title: `Travel to event #${ev.eventId}` },
                      "Travel to this event…");
    button.addEventListener("click", () => travel({
      to: { kind: "EVENT", eventId: ev.eventId }, label: `to event #${ev.eventId}`, event: ev,
      how: "the commit that wrote it",
    }));
    item.append(button);
  }
  // A failed attempt's traceback is shown as text to read, not inside the JSON.
  const { traceback, ...details } = ev.details ?? {};
  if (Object.keys(details).length) {
    item.append(el("code", { class: "ev-details" }, JSON.stringify(details)));
  }
  if (traceback) item.append(tracebackBlock(traceback, false));
  return item;
}

// A traceback, folded under a "Traceback" summary unless ``open``.
function tracebackBlock(text, open) {
  const block = el("details", { class: "traceback" }, el("summary", {}, "Traceback"),
                   el("pre", {}, text));
  block.open = open;
  return block;
}

// Wire the page's fixed buttons once.
export function initFlowPage() {
  initTravel();
  $("fx-refresh").addEventListener("click", load);
  $("fx-travel-beginning").addEventListener("click", () => {
    const first = page.events[0];
    if (!first) return;
    travel({ to: { kind: "BEGINNING" }, label: "to its beginning", event: first,
             how: "the run's first commit" });
  });
  $("fx-more-events").addEventListener("click", loadMore);
  $("fx-show-all").addEventListener("click", () => {
    const id = page.selected;
    page.selected = "";
    renderHistory();
    focusBar(id);
  });
}
