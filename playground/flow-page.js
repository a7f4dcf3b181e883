// The explorer's Flow page, at "#/flows/<flowId>?runId=<runId>" (no runId: the latest run): a
// summary (status, times, result or error, parent and SubFlows), the pending Step executions,
// the runs of the Flow ID, the history as a timeline with the event list below it (paged, never
// read whole), Attributes (AttributeMap instances on demand), Channels, live Streams, and the
// actions. The latest run can time travel from here: from a Step bar (before its WaitFor or its
// Execute), from an event of the list, or to its beginning (travel.js asks for confirmation).
// While the run is RUNNING the page reads it again every few seconds (live.js): a read of the
// run already shown keeps the selected bar, the focus and the scroll positions, adds only the
// new events, and leaves alone the cards whose data did not change.

import {
  $, el, enc, flowHref, flowPath, flowTypes, getJSON, plural, problemText, queryString,
  searchRuns, statusBadge, token,
} from "./lib.js";
import { renderActions, report } from "./actions.js";
import { eventRow } from "./events.js";
import {
  loadChannels, renderAttributes, renderChannels, renderMapLoaders,
} from "./flow-state.js";
import { CHILDREN_SHOWN, RUNS_SHOWN, renderRuns, renderSummary } from "./flow-summary.js";
import { armLive, initLive, stopLive } from "./live.js";
import { loadPending, renderPending } from "./pending.js";
import { StreamFollower } from "./stream.js";
import { deriveTimeline, eventsOf, focusBar, renderTimeline } from "./timeline.js";
import { initTravel, openTravel, stepPoints } from "./travel.js";

const HISTORY_PAGE_SIZE = 100;

// What the page shows: the Flow and run, the loaded history pages (`lastToken` read the last
// of them, which began at `events[lastStart]`), the selected Step bar, the Flow ID's latest
// run (only it can time travel), the page a travel's result is carried to, the event rows
// built (by event ID, for one run and travel ability) and what each card was last drawn from.
const page = { flowId: "", runId: "", run: null, typeInfo: null, events: [], nextToken: "",
               lastToken: "", lastStart: 0, selected: "", model: null, seq: 0, streamsKey: "",
               followers: [], latestRunId: "", carry: "", rows: new Map(), rowsKey: "",
               drawn: new Map() };

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

// Leave the Flow page: live updates and Stream followers stop, its forms go, any load in flight
// is dropped, and the next visit reads everything afresh.
export function leaveFlow() {
  stopLive();
  follow("", null);
  $("fx-actions").replaceChildren();
  $("fx-maps").replaceChildren();
  page.drawn.clear();
  Object.assign(page, { flowId: "", runId: "", run: null, events: [], seq: page.seq + 1 });
}

// Return whether a card's data differs from what it was last drawn from (and note it as drawn).
function changed(card, data) {
  const key = JSON.stringify(data);
  if (page.drawn.get(card) === key) return false;
  page.drawn.set(card, key);
  return true;
}

// Read everything the page shows, then render it; `auto` is a live update's read.
async function load({ auto = false } = {}) {
  const seq = ++page.seq;
  const { flowId, runId } = page;
  if (!auto) $("flow-view").setAttribute("aria-busy", "true");
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
  if (!run && auto && !runs.ok) {
    // A live update that failed keeps what is shown, and tries again.
    armLive(reload, true, problemText(runs));
    return;
  }
  $("fx-body").hidden = !run;
  $("fx-status").replaceChildren(run ? statusBadge(run.status) : "");
  if (!run) {
    $("fx-note").textContent = !runs.ok ? problemText(runs)
      : runId ? `Flow ${flowId} has no run ${runId}.` : `No Flow with the ID ${flowId}.`;
    follow("", null);
    armLive(reload, false);
    return;
  }
  $("fx-note").textContent = "";
  // The run already shown: only the last page of its history can have new events.
  const same = page.run?.runId === run.runId && page.events.length > 0;
  page.typeInfo = types.get(run.flowType) ?? null;
  const r = enc(run.runId);
  const [result, attrs, channels, children, history, pending] = await Promise.all([
    getJSON(flowPath(flowId, `/result?runId=${r}&waitSeconds=0`)),
    getJSON(flowPath(flowId, `/attributes?runId=${r}`)),
    loadChannels(flowId, run.runId),
    getJSON(`/api/v1/flows?${new URLSearchParams({
      query: `ParentRunId = ${queryString(run.runId)}`, pageSize: String(CHILDREN_SHOWN) })}`),
    readHistory(flowId, run.runId, same),
    loadPending(flowId, run),
  ]);
  if (seq !== page.seq) return;
  const view = same ? saveView() : null;
  page.run = run;
  // Runs are listed newest first: the first is the latest.
  page.latestRunId = runs.data.flows[0]?.runId ?? run.runId;
  if (changed("runs", [runs.data, run.runId])) renderRuns(runs.data, run);
  mergeHistory(history);
  // The run's input is in its first event, FLOW_STARTED.
  const started = page.events.find((e) => e.eventType === "FLOW_STARTED");
  // A failed run's traceback: its last Step's, kept with the STEP_CLOSED that failed it.
  const failed = [...page.events].reverse().find(
    (e) => e.eventType === "STEP_CLOSED" && e.details.traceback);
  const summary = [run, result, children, started?.details.input, failed?.details.traceback];
  if (changed("summary", summary)) renderSummary(...summary);
  if (changed("pending", [pending, run.runId])) {
    renderPending(pending, selectStep, { flowId, runId: run.runId, done: load });
  }
  if (changed("attributes", attrs)) renderAttributes(attrs);
  if (changed("maps", [flowId, run.runId, page.typeInfo?.attributes])) {
    renderMapLoaders(page.typeInfo, flowId, () => page.run);
  }
  if (changed("channels", channels)) renderChannels(channels);
  renderHistory();
  follow(flowId, run);
  const channelNames = channels.ok ? [...new Set(channels.queues.map((q) => q.name))] : [];
  renderActions({ flowId, run, typeInfo: page.typeInfo, channelNames, done: load });
  renderTravel();
  if (view) restoreView(view);
  armLive(reload, run.status === "RUNNING");
}

// A live update: the same read, marked as one.
const reload = () => load({ auto: true });

// Read the history of the run: the first page of a run not shown yet; for the run shown, its
// last loaded page again, where new events land (nothing while more pages are unread: new
// events come after them). Resolves null when nothing is read.
async function readHistory(flowId, runId, same) {
  if (same && page.nextToken) return null;
  const [pageToken, start] = same ? [page.lastToken, page.lastStart] : ["", 0];
  const res = await historyPage(flowId, runId, pageToken);
  return { res, pageToken, start, same };
}

// Take a history read into the page: the events before the page read, then the page. A read
// of the run shown that failed keeps the events already loaded.
function mergeHistory(read) {
  if (read === null) return;
  const { res, pageToken, start, same } = read;
  $("fx-history-note").textContent = res.ok ? "" : problemText(res);
  if (!res.ok) {
    if (!same) Object.assign(page, { events: [], nextToken: "", lastToken: "", lastStart: 0 });
    return;
  }
  Object.assign(page, { events: [...page.events.slice(0, start), ...res.data.events],
                        nextToken: res.data.nextPageToken, lastToken: pageToken,
                        lastStart: start });
}

// Note what a redraw would lose: the page's and the timeline's scroll positions and a focused
// Step bar.
function saveView() {
  const active = document.activeElement;
  return { x: window.scrollX, y: window.scrollY,
           rows: $("fx-timeline").querySelector(".tl-rows")?.scrollTop ?? 0,
           bar: active?.matches?.("#fx-timeline .tl-bar") ? active.dataset.exec : "" };
}

// Put back what saveView noted.
function restoreView(view) {
  const rows = $("fx-timeline").querySelector(".tl-rows");
  if (rows) rows.scrollTop = view.rows;
  if (view.bar) {
    $("fx-timeline").querySelector(`.tl-bar[data-exec="${CSS.escape(view.bar)}"]`)
      ?.focus({ preventScroll: true });
  }
  if (window.scrollX !== view.x || window.scrollY !== view.y) window.scrollTo(view.x, view.y);
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

// Load the next page of history and redraw the timeline and the events with it (a load in
// flight is dropped: it began before this page).
async function loadMore() {
  const seq = ++page.seq;
  const pageToken = page.nextToken;
  const res = await historyPage(page.flowId, page.run.runId, pageToken);
  if (seq !== page.seq) return;
  if (res.ok) {
    Object.assign(page, { lastStart: page.events.length, lastToken: pageToken });
    page.events = [...page.events, ...res.data.events];
    page.nextToken = res.data.nextPageToken;
    renderHistory();
  } else $("fx-history-note").textContent = problemText(res);
  // The newest page may not end the history: the next live update reads it again.
  armLive(reload, page.run.status === "RUNNING");
  $("fx-more-events").focus();
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

// Select a Step execution's bar (or none), show only its events, and keep the keyboard on it.
function selectStep(id) {
  const pressed = id || page.selected;
  page.selected = id;
  renderHistory();
  focusBar(pressed);
}

// Draw the timeline of the loaded events and list them (only the selected bar's, if any).
function renderHistory() {
  const complete = !page.nextToken;
  page.model = deriveTimeline(page.events, { startStep: page.typeInfo?.startStep ?? null,
                                             status: page.run.status, complete });
  renderTimeline($("fx-timeline"), page.model, {
    status: page.run.status, selected: page.selected, more: !complete, onSelect: selectStep,
  });
  const only = page.selected ? eventsOf(page.model, page.selected) : null;
  const shown = only ? page.events.filter((ev) => only.has(ev.eventId)) : page.events;
  renderStepTravel();
  $("fx-filter").hidden = !only;
  $("fx-filter-text").textContent = only
    ? `Showing the ${plural(shown.length, "event")} of ${page.selected}.` : "";
  keepChildren($("fx-events"), shown.map(eventItem));
  $("fx-events-note").textContent = `${plural(page.events.length, "event")} loaded` +
    (complete ? ": the whole history." : ", oldest first; more follow.");
  $("fx-more-events").hidden = complete;
}

// Make `nodes` the children of `list`, moving only what is out of place: rows already there
// keep their open disclosures, focus and the list's scroll position.
function keepChildren(list, nodes) {
  nodes.forEach((node, i) => {
    if (list.children[i] !== node) list.insertBefore(node, list.children[i] ?? null);
  });
  while (list.children.length > nodes.length) list.lastElementChild.remove();
}

// The row of a history event (built once per run shown), with a button that travels to it on
// the latest run.
function eventItem(ev) {
  const key = `${page.run.runId}\n${canTravel()}`;
  if (page.rowsKey !== key) Object.assign(page, { rows: new Map(), rowsKey: key });
  let row = page.rows.get(ev.eventId);
  if (row) return row;
  let button = null;
  if (canTravel()) {
    button = el("button", { type: "button", class: "small ev-travel",
                            title: `Travel to event #${ev.eventId}` }, "Travel to this event…");
    button.addEventListener("click", () => travel({
      to: { kind: "EVENT", eventId: ev.eventId }, label: `to event #${ev.eventId}`, event: ev,
      how: "the commit that wrote it",
    }));
  }
  row = eventRow(ev, page.flowId, button);
  page.rows.set(ev.eventId, row);
  return row;
}

// Wire the page's fixed buttons once.
export function initFlowPage() {
  initTravel();
  initLive();
  $("fx-refresh").addEventListener("click", () => load());
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
