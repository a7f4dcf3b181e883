// The page of one Schedule ("#/schedules/<scheduleId>"): its spec, its next five times, its
// recent actions linked to their Flow pages, the Flows of it still running, and its actions:
// Pause and Unpause (each with a note), Trigger now and Backfill a range of times. An action's
// refusal shows the Problem's code and detail; schedules.js reads the page again every few
// seconds and after each action.

import {
  $, callJSON, dateTimeOf, durationText, el, enc, flowHref, getJSON, plural, problemText,
  queryString, statusBadge,
} from "./lib.js";
import { bothTimes, relTime } from "./time.js";

// The Schedule shown, what it was last drawn from, and how to read it again.
const shown = { id: "", data: null, drawn: "", refresh: null };

// Return the path of a Schedule, or of one of its actions.
const schedulePath = (id, rest = "") => `/api/v1/schedules/${enc(id)}${rest}`;

// Say when a Schedule's times are: "every 1 h", or a cron line and its zone.
export function timesText(s) {
  if (s.everySeconds) return [`every ${durationText(s.everySeconds * 1000)}`];
  return ["cron ", el("code", {}, s.cron ?? "?"), ` in ${s.timezone}`];
}

// A badge saying whether the Schedule is paused.
export function stateBadge(s) {
  return el("span", { class: `badge ${s.paused ? "st-canceled" : "st-running"} sc-badge` },
            s.paused ? "Paused" : "Active");
}

// Read a Schedule and draw it when it changed; `stale()` says the read is no longer wanted,
// `refresh()` reads the page again (after an action).
export async function loadSchedule(id, stale, refresh) {
  if (id !== shown.id) {
    Object.assign(shown, { id, data: null, drawn: "" });
    $("sc-title").textContent = id;
    $("sc-result").hidden = true;
    $("sc-problem").hidden = true;
    $("sc-backfill").reset();
  }
  shown.refresh = refresh;
  const res = await getJSON(schedulePath(id));
  if (stale()) return;
  const key = JSON.stringify([res.status, res.data]);
  if (key === shown.drawn) return;
  shown.drawn = key;
  $("sc-grid").hidden = !res.ok;
  if (!res.ok) {
    // A failed read of a Schedule already shown keeps it on screen, and says why.
    $("sc-grid").hidden = res.status === 404 || !shown.data;
    $("sc-note").textContent = res.status === 404 ? `No Schedule with the ID ${id}: ` +
      `${res.data?.detail ?? ""}` : `The last read failed: ${problemText(res)}`;
    $("sc-note").className = "error-text";
    if (res.status === 404) $("sc-state").replaceChildren();
    return;
  }
  shown.data = res.data;
  $("sc-note").textContent = "";
  $("sc-note").className = "muted";
  draw(res.data);
}

// Draw every part of the page from a description.
function draw(s) {
  $("sc-state").replaceChildren(stateBadge(s),
    s.note ? el("span", { id: "sc-state-note", class: "sc-state-note" }, s.note) : "");
  $("sc-pause").hidden = s.paused;
  $("sc-unpause").hidden = !s.paused;
  const options = s.startOptions;
  const row = (term, ...value) => [el("dt", {}, term), el("dd", {}, ...value)];
  $("sc-spec").replaceChildren(
    ...row("Flow type", el("code", {}, s.flowType)),
    ...row("Times", ...timesText(s)),
    ...row("Overlap", el("code", {}, s.overlap)),
    ...row("Catch-up window", durationText(s.catchupWindowSeconds * 1000)),
    ...row("Input", el("pre", { class: "json" }, JSON.stringify(s.input, null, 2))),
    ...row("Start options", el("pre", { class: "json" }, JSON.stringify(options, null, 2))),
    ...row("State", s.paused ? "Paused" : "Active",
           ...(s.note ? [" — ", el("span", { class: "sc-spec-note" }, s.note)] : [])),
    ...row("Skipped times", String(s.skipped)),
    ...row("Created", bothTimes(s.createdAt)),
    ...row("Updated", bothTimes(s.updatedAt)));
  $("sc-next-note").textContent = s.nextActionTimes.length ? ""
    : s.paused ? "None while paused: it starts nothing on its own." : "None.";
  $("sc-next").replaceChildren(...s.nextActionTimes.map((at) => el("li", {}, bothTimes(at))));
  $("sc-actions-note").textContent = s.recentActions.length
    ? `The last ${plural(s.recentActions.length, "action")}.` : "None yet.";
  $("sc-actions").replaceChildren(...s.recentActions.map(actionItem));
  $("sc-running-note").textContent = s.running.length
    ? `${plural(s.running.length, "Flow")} of its actions still running.` : "None running.";
  $("sc-running").replaceChildren(...s.running.map((flowId) =>
    el("li", {}, el("a", { href: flowHref(flowId), class: "fx-flow-link" }, flowId))));
  const query = `ScheduleId = ${queryString(s.scheduleId)}`;
  $("sc-search").href = `#/flows?${new URLSearchParams({ query })}`;
}

// One recent action: its Flow (linked to the run it started), its run's status, its time.
function actionItem(a) {
  return el("li", { class: "sc-action", "data-flow-id": a.flowId },
    el("a", { href: flowHref(a.flowId, a.runId), class: "fx-flow-link" }, a.flowId), " ",
    statusBadge(a.status),
    el("span", { class: "muted small-text sc-when" }, "for ",
       el("time", { datetime: a.scheduledAt, title: a.scheduledAt }, dateTimeOf(a.scheduledAt)),
       " UTC, started ", relTime(a.startedAt)));
}

// Ask for a note in the modal dialog; resolves the note, or null when the user goes back.
function askNote(title, ok) {
  const dialog = $("sc-note-dialog");
  $("sc-note-title").textContent = title;
  $("sc-note-ok").textContent = ok;
  $("sc-note-input").value = "";
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      resolve(dialog.returnValue === "ok" ? $("sc-note-input").value.trim() : null);
    }, { once: true });
    dialog.showModal();
  });
}

// Show an action's answer: its success (text or nodes), or the Problem's code and detail.
function report(res, ...success) {
  $("sc-problem").hidden = res.ok;
  $("sc-result").hidden = !res.ok;
  if (res.ok) {
    $("sc-result").className = "action-result ok";
    $("sc-result").replaceChildren(...success);
  } else {
    $("sc-problem-code").textContent = res.data?.code ?? `HTTP ${res.status || "—"}`;
    $("sc-problem-detail").textContent = res.data?.detail ?? problemText(res);
  }
}

// Run an action on the Schedule shown (its buttons are off meanwhile), then read it again.
async function act(button, call) {
  const id = shown.id;
  button.disabled = true;
  try {
    await call(id);
  } finally {
    button.disabled = false;
  }
  if (id === shown.id) shown.refresh?.();
}

// Pause or unpause, with the note the user gives.
async function pauseOrUnpause(id, pause) {
  const verb = pause ? "Pause" : "Unpause";
  const note = await askNote(`${verb} ${id}?`, verb);
  if (note === null) return;
  const res = await callJSON("POST", schedulePath(id, pause ? "/pause" : "/unpause"), { note });
  report(res, pause ? "Paused: it starts nothing on its own until unpaused."
    : "Unpaused: it starts its Flows at its times again.");
}

// Start one action now, and say what came of it.
async function trigger(id) {
  const res = await callJSON("POST", schedulePath(id, "/trigger"));
  const d = res.data ?? {};
  const link = res.ok ? el("a", { href: flowHref(d.flowId, d.runId), id: "sc-started" },
                            d.flowId) : null;
  report(res, ...(d.started ? ["Started ", link, "."]
    : ["The overlap policy skipped it: ", el("code", {}, d.flowId ?? ""), " was not started."]));
}

// Turn a datetime-local value into an RFC 3339 time in UTC.
const utc = (value) => `${value.length === 16 ? `${value}:00` : value}Z`;

// Start the actions of the form's range of times.
async function backfill(id) {
  const body = { startAt: utc($("sc-backfill-start").value),
                 endAt: utc($("sc-backfill-end").value) };
  const res = await callJSON("POST", schedulePath(id, "/backfill"), body);
  const started = res.data?.started ?? [];
  const links = started.flatMap((flowId, i) =>
    [i ? ", " : "", el("a", { href: flowHref(flowId) }, flowId)]);
  report(res, `Backfill started ${plural(started.length, "Flow")}`,
         ...(started.length ? [": ", ...links] : []),
         `; ${res.data?.skipped ?? 0} skipped.`);
}

// Wire the page's fixed controls once.
export function initSchedulePage() {
  $("sc-pause").addEventListener("click", (e) =>
    act(e.currentTarget, (id) => pauseOrUnpause(id, true)));
  $("sc-unpause").addEventListener("click", (e) =>
    act(e.currentTarget, (id) => pauseOrUnpause(id, false)));
  $("sc-trigger").addEventListener("click", (e) => act(e.currentTarget, trigger));
  $("sc-backfill").addEventListener("submit", (e) => {
    e.preventDefault();
    act(e.submitter ?? $("sc-backfill").querySelector("button"), backfill);
  });
}
