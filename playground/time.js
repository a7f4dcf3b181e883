// Times for people: relative ("12 s ago", "in 3 min") with the absolute time one hover away,
// kept current by one ticker for the whole page, and the two wire forms of a time in history
// details (RFC 3339 strings, or the microseconds since the epoch older events carry).

import { el } from "./lib.js";

// How often relative times and running durations are rewritten.
const TICK_MS = 1000;

// Return a wire time as milliseconds since the epoch, or null: an RFC 3339 string, or a number
// of microseconds since the epoch (history details written before times became strings).
export function toMs(value) {
  if (value === null || value === undefined || value === "") return null;
  if (typeof value === "number") return Number.isFinite(value) ? value / 1000 : null;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? null : ms;
}

// Show a span rounded to its largest units: "12 s", "3 min", "2 h 5 min", "3 d 4 h".
function spanText(ms) {
  const s = Math.round(Math.abs(ms) / 1000);
  if (s < 60) return `${s} s`;
  const min = Math.round(s / 60);
  if (min < 60) return `${min} min`;
  const h = Math.floor(min / 60);
  if (h < 24) return `${h} h${min % 60 ? ` ${min % 60} min` : ""}`;
  const d = Math.floor(h / 24);
  return `${d} d${h % 24 ? ` ${h % 24} h` : ""}`;
}

// Show a time relative to now: "12 s ago", "in 3 min", "now" within a second.
function relativeText(ms, now = Date.now()) {
  const diff = ms - now;
  if (Math.abs(diff) < 1000) return "now";
  return diff < 0 ? `${spanText(diff)} ago` : `in ${spanText(diff)}`;
}

// Show the absolute time in UTC, as the API gives it: "2027-01-15 08:00:01.250 UTC".
function absoluteText(ms) {
  return `${new Date(ms).toISOString().replace("T", " ").replace("Z", "")} UTC`;
}

// Show the time of day in UTC, with its date when it is not the day of `ref`: "14:03:07", or
// "2027-01-16 14:03:07".
function clockText(ms, ref = Date.now()) {
  const [date, rest] = new Date(ms).toISOString().split("T");
  const time = rest.slice(0, 8);
  return date === new Date(ref).toISOString().slice(0, 10) ? time : `${date} ${time}`;
}

// A <time> showing a wire time relative to now (rewritten as time passes), its absolute time
// in the tooltip; "—" for none.
export function relTime(value, { cls = "" } = {}) {
  const ms = toMs(value);
  return ms === null ? el("span", { class: "muted" }, "—") : relTimeMs(ms, cls);
}

// relTime of a time in milliseconds since the epoch.
function relTimeMs(ms, cls = "") {
  ensureTicker();
  return el("time", { class: `rel ${cls}`.trim(), datetime: new Date(ms).toISOString(),
                      title: absoluteText(ms), "data-rel": String(ms) }, relativeText(ms));
}

// A <time> showing a wire time of day (UTC), its absolute time in the tooltip.
export function clockTime(value, { ref = Date.now(), cls = "" } = {}) {
  const ms = toMs(value);
  if (ms === null) return el("span", { class: "muted" }, "—");
  return el("time", { class: `clock ${cls}`.trim(), datetime: new Date(ms).toISOString(),
                      title: absoluteText(ms) }, clockText(ms, ref));
}

// Both forms side by side: "5 min ago (2027-01-15 08:00:01 UTC)".
export function bothTimes(value) {
  const ms = toMs(value);
  if (ms === null) return el("span", { class: "muted" }, "—");
  const seconds = absoluteText(ms).replace(/\.\d+ /, " ");
  return el("span", { class: "both-times" }, relTimeMs(ms), " ",
            el("span", { class: "muted small-text" }, `(${seconds})`));
}

// A span showing how long it has been since `ms`, rewritten as time passes ("Running for").
export function elapsed(ms) {
  ensureTicker();
  return el("span", { class: "elapsed", "data-since": String(ms) }, spanText(Date.now() - ms));
}

let ticker = 0;
// Start the one ticker that keeps every relative time and running duration current.
function ensureTicker() {
  if (!ticker) ticker = setInterval(tick, TICK_MS);
}

// Rewrite the relative times and durations whose text changed (not the others: a selection in
// the page stays put).
function tick() {
  const now = Date.now();
  for (const node of document.querySelectorAll("time[data-rel]")) {
    const text = relativeText(Number(node.dataset.rel), now);
    if (node.textContent !== text) node.textContent = text;
  }
  for (const node of document.querySelectorAll(".elapsed[data-since]")) {
    const text = spanText(now - Number(node.dataset.since));
    if (node.textContent !== text) node.textContent = text;
  }
}
