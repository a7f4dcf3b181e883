// The Flow page's "Pending Steps" card: each pending Step execution of the run shown
// (listPendingSteps), with the method it runs next, its attempt, when it runs, and what its
// Wait waits on: Timers (when they fire), Channels and SubFlows (which ones). A closed run has
// none, so it is not asked. An execution whose wait has Timers not fired yet can skip them
// (skipTimers, after a confirmation): they fire now, as if their time had come.

import { confirmAction, report } from "./actions.js";
import { $, callJSON, el, enc, flowHref, flowPath, getJSON, plural, problemText } from "./lib.js";
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

// Whether an execution's wait has Timers not fired yet: Timers listed, or an execute due
// later on its first attempt (its Timer; a retry's back-off is no Timer).
function hasTimers(step) {
  if (step.timers?.length) return true;
  const due = toMs(step.dueAt);
  return step.phase === "EXECUTE" && step.attempt === 1 && due !== null && due > Date.now();
}

// The "Skip timer" button of an execution: after a confirmation its Timers fire now, then the
// page is read again (`ctx.done`); a refusal shows its detail under the button.
function skipButton(step, ctx) {
  const button = el("button", { type: "button", class: "small pending-skip",
                                "aria-label": `Skip the timer of ${step.stepExecutionId}` },
                    "Skip timer");
  button.addEventListener("click", async () => {
    const body = { stepExecutionId: step.stepExecutionId, runId: ctx.runId };
    const confirmed = await confirmAction({
      title: `Skip the timer of ${step.stepExecutionId}?`,
      text: "Its Timers fire now, as if their time had come; the Step goes on at once.",
      body, ok: "Skip timer",
    });
    if (!confirmed) return;
    button.disabled = true;
    const res = await callJSON("POST", flowPath(ctx.flowId, "/timers/skip"), body);
    button.disabled = false;
    const error = button.closest(".pending-step")?.querySelector(".pending-skip-error");
    if (error) {
      error.hidden = res.ok;
      error.textContent = res.ok ? "" : `Refused: ${res.data?.detail ?? problemText(res)}`;
    }
    if (!res.ok) return;
    report(res, `Skipped the timer of ${step.stepExecutionId}: ` +
                `${plural(res.data.fired, "Timer")} fired.`);
    ctx.done?.();
  });
  return button;
}

// One pending execution: its ID, phase and attempt, when it runs, what it waits on, since
// when it is pending, and a button that shows its events (and one that skips its Timers).
function stepItem(step, onSelect, ctx) {
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
      show, hasTimers(step) && ctx ? skipButton(step, ctx) : null),
    el("p", { class: "pending-due" }, ...dueLine(step)),
    el("p", { class: "pending-skip-error error-text small-text", role: "alert", hidden: "" }),
    waitsOn(step),
    el("p", { class: "muted small-text" }, "Pending since ", relTime(step.createdAt)));
}

// Show the pending executions, or why there are none; `onSelect(id)` selects a timeline bar;
// `ctx` ({flowId, runId, done}) names the run, for skipping Timers, and reads the page again.
export function renderPending(result, onSelect, ctx = null) {
  const { steps } = result;
  $("fx-pending-note").textContent = !result.ok ? problemText(result)
    : result.closed ? "None: the run is closed."
    : steps.length ? `${plural(steps.length, "pending Step execution")}, oldest first.`
    : "None: no Step execution is pending.";
  $("fx-pending").replaceChildren(...steps.map((step) => stepItem(step, onSelect, ctx)));
}
