// The Flow page's summary card (status, type, run, times, input, result or error, parent and
// SubFlows) and its list of the runs of the Flow ID.

import { $, durationText, el, flowHref, plural, problemText, statusBadge } from "./lib.js";
import { tracebackBlock } from "./events.js";
import { bothTimes, elapsed, relTime } from "./time.js";

// How many runs the page lists, and child runs the summary reads (flow-page.js reads them).
export const RUNS_SHOWN = 20;
export const CHILDREN_SHOWN = 50;

// List the runs of the Flow ID, newest first, the shown one marked.
export function renderRuns(data, shown) {
  const list = $("fx-runs");
  list.replaceChildren(...data.flows.map((run) => {
    const link = el("a", { href: flowHref(run.flowId, run.runId), class: "run-link",
                           "aria-current": run.runId === shown.runId ? "page" : undefined },
                    el("code", {}, run.runId), " ", statusBadge(run.status));
    return el("li", {}, link, " ", el("span", { class: "muted small-text" },
                                      "started ", relTime(run.startedAt)));
  }));
  $("fx-runs-note").textContent = `${plural(data.flows.length, "run")}` +
    (data.nextPageToken ? `: the newest ${RUNS_SHOWN} are listed.` : ", newest first.");
}

// Fill the summary: status, type, run, times, input, result or error, parent and children.
export function renderSummary(run, result, children, input, traceback) {
  const rows = [];
  // Add one term and its value to the list.
  const add = (term, ...value) => rows.push(el("dt", {}, term), el("dd", {}, ...value));
  add("Status", statusBadge(run.status));
  add("Flow type", el("code", {}, run.flowType));
  add("Run ID", el("code", {}, run.runId));
  add("Started", bothTimes(run.startedAt));
  add("Closed", run.closedAt ? bothTimes(run.closedAt) : "— (running)");
  const begun = Date.parse(run.startedAt);
  if (run.closedAt) add("Duration", durationText(Date.parse(run.closedAt) - begun));
  else add("Running for", elapsed(begun));
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
