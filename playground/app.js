// The dexlite playground's entry module: it wires the views and routes the address's hash to
// them. Plain ES modules, no build step and no network beyond this app:
//   catalog.js, panel.js   the examples view: the catalog runner and its Flow state panel
//   request.js             a catalog route's request, and its curl line
//   explorer.js            the Flows explorer's search ("#/flows?query=...")
//   schedules.js           the explorer's Schedules ("#/schedules"), and the page of one
//     schedule-page.js       ("#/schedules/<scheduleId>"): its times, actions and controls
//   flow-page.js           the explorer's Flow page ("#/flows/<flowId>?runId=..."), with
//     flow-summary.js        its summary and runs,
//     pending.js             its pending Step executions,
//     flow-state.js          its Attributes and Channels,
//     events.js              its history events as rows people read,
//     live.js                its live updates while the run is open,
//     actions.js             its stop, RPC and publish actions (schema-form.js),
//     travel.js              its time travel: the points and the dialog
//   timeline.js            the history timeline of Step executions
//   stream.js              the live Stream follower both views use
//   time.js                relative and absolute times, kept current
//   lib.js                 DOM, REST and formatting helpers
//
// The examples view lists only the examples whose Flow types the server serves: a server of a
// registry of its own (DEXLITE_REGISTRY) may serve none, and then the page opens on the
// explorer with no Examples tab.

import {
  initCatalog, leaveExamples, loadCatalog, showExamples, unservedNote,
} from "./catalog.js";
import { state } from "./examples-state.js";
import { initSearch, searchParams, showSearch } from "./explorer.js";
import { initFlowPage, leaveFlow, showFlow } from "./flow-page.js";
import { $, servedFlowTypes } from "./lib.js";
import { initPanel } from "./panel.js";
import {
  initSchedules, leaveSchedules, parseSchedules, showSchedules,
} from "./schedules.js";

// What is on screen: "examples", "search", "flow:<flowId>?<runId>", "schedules" or
// "schedule:<scheduleId>".
let shown = "";
// Whether the examples view has nothing to show: the catalog loaded, and no example of it is
// served (a catalog that failed to load says so in the examples view instead).
let noExamples = false;

// Return what a hash names: {view: "examples", hash} or {view: "search", qs} or
// {view: "flow", flowId, runId} or {view: "schedules"} or {view: "schedule", scheduleId}.
function parse(rawHash) {
  const hash = rawHash.replace(/^#/, "");
  const schedules = parseSchedules(hash);
  if (schedules) return schedules;
  if (hash !== "/flows" && !hash.startsWith("/flows?") && !hash.startsWith("/flows/")) {
    return { view: "examples", hash };
  }
  const rest = hash.slice("/flows".length);
  if (!rest.startsWith("/") || rest.length === 1) {
    return { view: "search", qs: rest.replace(/^\?/, "") };
  }
  const cut = rest.indexOf("?");
  const idPart = cut < 0 ? rest.slice(1) : rest.slice(1, cut);
  let flowId = idPart;
  try { flowId = decodeURIComponent(idPart); } catch { /* a hand-typed "%": as it is */ }
  const runId = new URLSearchParams(cut < 0 ? "" : rest.slice(cut + 1)).get("runId") ?? "";
  return { view: "flow", flowId, runId };
}

// Show the view the hash names; on a user's navigation to another page, move focus to its
// heading, which brings it into view and tells a screen reader where the user went.
function route(userAction) {
  let target = parse(location.hash);
  if (target.view === "examples") {
    // An example the server does not serve, or none at all: say why, and show what there is
    // instead (the first example served, or the explorer) at an address that names it.
    const note = unservedNote(target.hash);
    showNote(note);
    if (note || noExamples) {
      const to = noExamples ? "#/flows" : location.pathname + location.search;
      history.replaceState(history.state, "", to);
      target = parse(location.hash);
    }
  } else if (userAction) showNote("");
  const key = target.view === "flow" ? `flow:${target.flowId}?${target.runId}`
    : target.view === "schedule" ? `schedule:${target.scheduleId}` : target.view;
  const scheduling = target.view === "schedules" || target.view === "schedule";
  const explorer = target.view !== "examples" && !scheduling;
  if (target.view !== "examples" && shown === "examples") leaveExamples();
  if (target.view !== "flow" && shown.startsWith("flow:")) leaveFlow();
  if (!scheduling) leaveSchedules();
  $("view-examples").hidden = target.view !== "examples";
  $("view-flows").hidden = !explorer;
  $("view-schedules").hidden = !scheduling;
  for (const [tab, on] of [[$("tab-examples"), target.view === "examples"],
                           [$("tab-flows"), explorer], [$("tab-schedules"), scheduling]]) {
    if (on) tab.setAttribute("aria-current", "page");
    else tab.removeAttribute("aria-current");
  }
  const moved = userAction && key !== shown;
  shown = key;
  if (target.view === "examples") showExamples(target.hash, userAction);
  else if (target.view === "search") showSearch(searchParams(target.qs));
  else if (target.view === "flow") showFlow(target.flowId, target.runId);
  else showSchedules(target.view === "schedule" ? target.scheduleId : "");
  if (moved && target.view === "search") $("flows-heading").focus();
  if (moved && target.view === "flow") $("fx-title").focus();
  if (moved && target.view === "schedules") $("sc-heading").focus();
  if (moved && target.view === "schedule") $("sc-title").focus();
}

// Show a note above the views ("" hides it).
function showNote(text) {
  $("app-note").textContent = text;
  $("app-note").hidden = !text;
}

// Start the page: wire every view, load the catalog of the examples served, then show what
// the hash names.
async function start() {
  initCatalog();
  initPanel();
  initSearch();
  initFlowPage();
  initSchedules();
  noExamples = (await loadCatalog(servedFlowTypes())) && !state.examples.length;
  $("tab-examples").hidden = noExamples;
  route(false);
  window.addEventListener("hashchange", () => route(true));
  // The explorer reads with the token at each call: a new one reads the page again with it.
  $("token").addEventListener("change", () => {
    if (!$("view-flows").hidden || !$("view-schedules").hidden) route(false);
  });
}

start();
