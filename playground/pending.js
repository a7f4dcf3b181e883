// The Flow page's "Pending Steps" card: each pending Step execution of the run shown
// (listPendingSteps), with the method it runs next, its attempt, when it runs, and what its
// Wait waits on: Timers (when they fire), Channels and SubFlows (which ones). A closed run has
// none, so it is not asked.

import { $, el, enc, flowHref, flowPath, getJSON, plural, problemText } from "./lib.js";
import { clockTime, relTime, toMs } from "./time.js";

// What a phase means, in the words of the authoring API.
const PHASES = {
  WAIT_FOR: ["WaitFor next", "WAIT_FOR: its wait_for runs next"],
  WAITING: ["Waiting", "WAITING: the conditions of its Wait are not met yet"],
  EXECUTE: ["Execute next", "EXECUTE: its execute runs next"],
};

// Read the pending Step executions of a run ({ok, steps} or a problem answer).
export async function loadPending(flowId, run) {
  if (run.status !== "RUNNING") return { ok: true, closed: true, steps: [] };
  const res = await getJSON(flowPath(flowId, `/pending-steps?runId=${enc(run.runId)}`));
  return res.ok ? { ok: true, steps: res.data.steps ?? [] } : { ...res, steps: [] };
}

// A time both ways: relative ("in 3 min"), then the time of day, each with the absolute one in
// its tooltip.
const when = (value) => [relTime(value), " (", clockTime(value), ")"];

// Say when a pending execution runs next: a retry's back-off, a Timer, its Wait, or now.
function dueLine(step) {
  const due = toMs(step.dueAt);
  const past = due !== null && due <= Date.now();
  if (step.attempt > 1 && due !== null) {
    return [`Attempt ${step.attempt} retries after its back-off, `, ...when(step.dueAt)];
  }
  if (step.phase === "WAITING") return ["Runs once its Wait is met:"];
  if (due !== null && step.timers?.length) {
    return [past ? "Its Timer fired " : "Its Timer fires ", ...when(step.dueAt)];
  }
  if (due !== null) return [past ? "Was due " : "Due ", ...when(step.dueAt)];
  return ["Ready now: queued or running."];
}

// List what a waiting execution waits on: Timers, Channels, SubFlows (an execute due at its
// Timers says when in its due line).
function waitsOn(step) {
  if (step.phase !== "WAITING") return null;
  const rows = [];
  // Add one kind of condition with its items.
  const add = (label, items) => {
    if (items.length) rows.push(el("li", { class: `pw-${label.toLowerCase()}` }, `${label}: `,
                                   ...items.flatMap((item, i) => (i ? [", ", item] : [item]))));
  };
  add("Timers", (step.timers ?? []).map((at) => el("span", { class: "pw-timer" }, ...when(at))));
  add("Channels", (step.channels ?? []).map((name) => el("code", {}, name)));
  add("SubFlows", (step.subFlows ?? []).map((id) => el("a", { href: flowHref(id) }, id)));
  return rows.length ? el("ul", { class: "pending-waits", "aria-label": "Waits on" }, ...rows)
    : null;
}

// One pending execution: its ID, phase and attempt, when it runs, what it waits on, since
// when it is pending, and a button that shows its events.
function stepItem(step, onSelect) {
  const [phase, means] = PHASES[step.phase] ?? [step.phase, ""];
  const show = el("button", { type: "button", class: "small pending-show",
                              "aria-label": `Show the events of ${step.stepExecutionId}` },
                  "Events");
  show.addEventListener("click", () => onSelect(step.stepExecutionId));
  return el("li", { class: "pending-step", "data-exec": step.stepExecutionId },
    el("p", { class: "pending-head" },
      el("code", { class: "pending-id" }, step.stepExecutionId),
      el("span", { class: `phase ph-${step.phase.toLowerCase()}`, title: means }, phase),
      el("span", { class: `pending-attempt${step.attempt > 1 ? " retry" : ""}` },
         `attempt ${step.attempt}`),
      show),
    el("p", { class: "pending-due" }, ...dueLine(step)),
    waitsOn(step),
    el("p", { class: "muted small-text" }, "Pending since ", relTime(step.createdAt)));
}

// Show the pending executions, or why there are none; `onSelect(id)` selects a timeline bar.
export function renderPending(result, onSelect) {
  const { steps } = result;
  $("fx-pending-note").textContent = !result.ok ? problemText(result)
    : result.closed ? "None: the run is closed."
    : steps.length ? `${plural(steps.length, "pending Step execution")}, oldest first.`
    : "None: no Step execution is pending.";
  $("fx-pending").replaceChildren(...steps.map((step) => stepItem(step, onSelect)));
}
