// The explorer's Schedules view: the list at "#/schedules" (listSchedules, by ID) and the page
// of one Schedule at "#/schedules/<scheduleId>" (schedule-page.js). While either is shown it is
// read again every REFRESH_MS (one timer at most, armed when a read has ended, none while the
// browser tab is hidden), and after each action.

import { $, el, enc, getJSON, plural, problemText } from "./lib.js";
import { initSchedulePage, loadSchedule, stateBadge, timesText } from "./schedule-page.js";
import { relTime } from "./time.js";

const REFRESH_MS = 3000;
const PAGE_SIZE = 50;

// What is shown: "" (nothing), "list" or the Schedule ID; the pages of the list read so far.
const view = { shown: "", seq: 0, timer: 0, tokens: [""], drawn: "" };

// Return what a hash names when it is a Schedules address: {view: "schedules"} or
// {view: "schedule", scheduleId}; null otherwise.
export function parseSchedules(hash) {
  if (hash === "/schedules" || hash.startsWith("/schedules?")) return { view: "schedules" };
  if (!hash.startsWith("/schedules/") || hash.length === "/schedules/".length) return null;
  const raw = hash.slice("/schedules/".length).split("?")[0];
  let scheduleId = raw;
  try { scheduleId = decodeURIComponent(raw); } catch { /* a hand-typed "%": as it is */ }
  return { view: "schedule", scheduleId };
}

// Show the list, or a Schedule's page ("" shows the list).
export function showSchedules(scheduleId = "") {
  const key = scheduleId || "list";
  if (key !== view.shown) {
    view.tokens = [""];
    view.drawn = "";
  }
  view.shown = key;
  $("sc-list-view").hidden = Boolean(scheduleId);
  $("sc-view").hidden = !scheduleId;
  return read();
}

// Leave the view: no more reads, and a read in flight is dropped.
export function leaveSchedules() {
  clearTimeout(view.timer);
  Object.assign(view, { shown: "", timer: 0, seq: view.seq + 1, drawn: "" });
}

// Read what is shown now, draw it, and arm the next read.
async function read() {
  clearTimeout(view.timer);
  view.timer = 0;
  const seq = ++view.seq;
  const shown = view.shown;
  if (!shown) return;
  const stale = () => seq !== view.seq || shown !== view.shown;
  if (shown === "list") await loadList(stale);
  else await loadSchedule(shown, stale, read);
  if (stale()) return;
  if (!document.hidden) view.timer = setTimeout(read, REFRESH_MS);
}

// Read the pages of the list read so far, and draw them when they changed.
async function loadList(stale) {
  const schedules = [];
  let next = "";
  let problem = null;
  for (const token of view.tokens) {
    const qs = new URLSearchParams({ pageSize: String(PAGE_SIZE) });
    if (token) qs.set("pageToken", token);
    const res = await getJSON(`/api/v1/schedules?${qs}`);
    if (stale()) return;
    if (!res.ok) {
      problem = res;
      break;
    }
    schedules.push(...res.data.schedules);
    next = res.data.nextPageToken ?? "";
  }
  const key = JSON.stringify([schedules, next, problem && problemText(problem)]);
  if (key === view.drawn) return;
  view.drawn = key;
  $("sc-list-note").textContent = problem ? problemText(problem)
    : schedules.length ? `${plural(schedules.length, "Schedule")}, by ID.`
    : "No Schedule yet: create one with POST /api/v1/schedules or `dexlite schedules create`.";
  $("sc-list-note").className = problem ? "error-text" : "muted";
  $("sc-table").hidden = !schedules.length;
  $("sc-body").replaceChildren(...schedules.map(row));
  $("sc-more").hidden = !next;
  $("sc-more").onclick = () => {
    view.tokens.push(next);
    read();
  };
}

// One Schedule of the list.
function row(s) {
  const link = el("a", { href: `#/schedules/${enc(s.scheduleId)}`, class: "fx-flow-link" },
                  s.scheduleId);
  return el("tr", { "data-schedule-id": s.scheduleId },
    cell("Schedule ID", link),
    cell("Flow type", s.flowType),
    cell("Times", ...timesText(s)),
    cell("Overlap", el("code", {}, s.overlap)),
    cell("State", stateBadge(s),
         s.note ? el("span", { class: "sc-row-note muted small-text" }, s.note) : null),
    cell("Next time", s.nextActionTimes.length ? relTime(s.nextActionTimes[0])
      : el("span", { class: "muted" }, s.paused ? "none while paused" : "none")),
    cell("Running", String(s.running.length)),
    cell("Skipped", String(s.skipped)));
}

// A table cell that names its column, for the stacked layout of narrow screens.
const cell = (label, ...children) =>
  el("td", { "data-label": label }, el("div", { class: "cell" }, ...children));

// Wire the view's fixed buttons once; a hidden browser tab stops reading, and reads when shown.
export function initSchedules() {
  initSchedulePage();
  $("sc-list-refresh").addEventListener("click", () => read());
  $("sc-refresh").addEventListener("click", () => read());
  document.addEventListener("visibilitychange", () => {
    if (document.hidden) {
      clearTimeout(view.timer);
      view.timer = 0;
    } else if (view.shown && !view.timer) read();
  });
}
