// The history timeline of one run: each Step execution is a bar on a time axis, split into
// running and waiting segments and coloured by how it ended; RPC commits are marks on the run's
// own lane, timer firings and failed attempts marks on the Step's bar.
//
// How the bars are derived. The history has no "Step started" event, so a bar is built from
// the events that name or create an execution:
// - Creation. Execution IDs are `<StepType>-<n>`, n counting the run's executions of that type
//   in creation order, and the events that create executions list their Step types in that
//   order: FLOW_STARTED creates the Flow type's start Step (from listFlowTypes), STEP_CLOSED
//   and RPC_COMMITTED create `nextSteps`. Counting them gives each execution's ID and its
//   creation time, where its bar begins. An execution first met in another event (its start
//   Step unknown) begins there.
// - Running. From creation the execution is queued or running (the history cannot tell the
//   two apart): drawn as running.
// - Waiting. STEP_WAITING starts a waiting segment. With `dueAt` (a timer: RFC 3339, or epoch
//   microseconds in events written before times became strings) it ends at that time, which is
//   also drawn as a timer firing. Without it (a wait on Channels or SubFlows) it ends at the
//   CHANNEL_CONSUMED that meets it, else at the last SUBFLOW_CLOSED of that execution, else at
//   its STEP_CLOSED.
// - Retries. STEP_ATTEMPT_FAILED marks a failed attempt and starts a back-off segment (not a
//   wait: the Step asked for nothing) until its `retryAt` (either form too), where the retry is
//   marked.
// - End. STEP_CLOSED ends the bar: failed when its decision is FAILED or FORCE_FAIL, completed
//   otherwise. An execution in the `canceledSteps` of a STEP_CLOSED or RPC_COMMITTED ends there
//   as canceled, and so does every execution still open at FLOW_CLOSED (closing a run cancels
//   its active Steps). One still open when the loaded events end is drawn up to now (the whole
//   history loaded and the run RUNNING) or to the last loaded event.
// Only the loaded pages are drawn; they are the oldest events, so what is drawn stays true as
// more pages load.

import { $, durationText, el, plural, timeOf } from "./lib.js";
import { toMs } from "./time.js";

// A run with thousands of Step executions gets a readable timeline of its first ones.
const MAX_LANES = 300;
const FAILED_DECISIONS = new Set(["FAILED", "FORCE_FAIL"]);

// Return the Step type of an execution ID: everything before its last "-<n>".
const typeOf = (id) => id.replace(/-\d+$/, "");

// Derive the timeline's model from history events (oldest first): the span, the executions
// with their segments and marks, and the run's own marks.
export function deriveTimeline(events, { startStep = null, status = "RUNNING", complete = true,
                                         now = Date.now() } = {}) {
  const execs = new Map();
  const counters = new Map();
  const runMarks = [];
  let start = events.length ? Date.parse(events[0].at) : now;
  let closedAt = null;

  // Return the execution with this ID, starting its bar at `t` when it is new.
  const execution = (id, type, t, eventId) => {
    let x = execs.get(id);
    if (!x) {
      x = { id, type, createdAt: t, createdBy: eventId, segments: [], marks: [], state: "running",
            phase: "running", since: t, until: null, lastChildClosed: null, end: null,
            open: true, eventIds: new Set() };
      execs.set(id, x);
      // Keep counting after an ID met before its creation event was seen.
      const n = Number(/-(\d+)$/.exec(id)?.[1] ?? 0);
      if (n > (counters.get(type) ?? 0)) counters.set(type, n);
    }
    return x;
  };
  // Create the next execution of a Step type at `t`.
  const create = (type, t, eventId) => {
    const n = (counters.get(type) ?? 0) + 1;
    counters.set(type, n);
    return execution(`${type}-${n}`, type, t, eventId);
  };
  // End a timed wait or back-off whose due time has passed by `t`: it runs again from then.
  const settle = (x, t) => {
    if ((x.phase !== "waiting" && x.phase !== "backoff") || x.until === null || x.until > t) {
      return;
    }
    const due = Math.max(x.until, x.since);
    push(x, due);
    x.marks.push(x.retry ? { kind: "retry", at: due, label: `Attempt ${x.retry} began` }
      : { kind: "timer", at: due, label: "Timer fired" });
    x.phase = "running";
    x.since = due;
    x.until = null;
  };
  // Close the execution's current segment at `t`.
  const push = (x, t) => {
    if (t > x.since) x.segments.push({ phase: x.phase, from: x.since, to: t });
  };
  // Move an open execution into `phase` at `t`; `until` is a timed wait's due time, `retry`
  // the number of the attempt a back-off leads to (0: none).
  const moveTo = (x, phase, t, until = null, retry = 0) => {
    settle(x, t);
    push(x, t);
    Object.assign(x, { phase, since: Math.max(t, x.since), until, retry });
  };
  // End an open execution at `t` as completed, failed or canceled.
  const finish = (x, state, t) => {
    if (!x.open) return;
    settle(x, t);
    push(x, t);
    Object.assign(x, { state, end: t, open: false, phase: null });
  };
  // Cancel the named executions at `t`, by the event `eventId`.
  const cancel = (ids, t, eventId) => {
    for (const id of ids ?? []) {
      const x = execs.get(id);
      if (!x?.open) continue;
      finish(x, "canceled", t);
      x.eventIds.add(eventId);
    }
  };

  for (const ev of events) {
    const t = Date.parse(ev.at);
    const d = ev.details ?? {};
    const id = d.stepExecutionId;
    const x = id ? execution(id, d.stepType ?? typeOf(id), t, ev.eventId) : null;
    if (x) x.eventIds.add(ev.eventId);
    switch (ev.eventType) {
      case "FLOW_STARTED":
        start = t;
        if (startStep) create(startStep, t, ev.eventId);
        break;
      case "STEP_WAITING":
        if (x?.open) moveTo(x, "waiting", t, toMs(d.dueAt));
        break;
      case "STEP_ATTEMPT_FAILED":
        if (!x?.open) break;
        x.marks.push({ kind: "attempt", at: t,
                       label: `Attempt ${d.attempt ?? "?"} failed: ${d.errorType ?? "error"}` });
        moveTo(x, "backoff", t, toMs(d.retryAt), (d.attempt ?? 0) + 1);
        break;
      case "CHANNEL_CONSUMED":
        if (x?.open && x.phase === "waiting") moveTo(x, "running", t);
        break;
      case "SUBFLOW_CLOSED":
        if (x) x.lastChildClosed = t;
        break;
      case "STEP_CLOSED":
        if (x?.open) {
          if (x.phase === "waiting" && x.until === null && x.lastChildClosed !== null) {
            moveTo(x, "running", x.lastChildClosed);
          }
          const failed = FAILED_DECISIONS.has(d.decision);
          finish(x, failed ? "failed" : "completed", t);
          Object.assign(x, { decision: d.decision, errorType: d.errorType ?? null });
        }
        cancel(d.canceledSteps, t, ev.eventId);
        for (const type of d.nextSteps ?? []) create(type, t, ev.eventId);
        break;
      case "RPC_COMMITTED":
        runMarks.push({ kind: "rpc", at: t, label: `RPC ${d.rpc ?? ""} committed`,
                        eventId: ev.eventId });
        cancel(d.canceledSteps, t, ev.eventId);
        for (const type of d.nextSteps ?? []) create(type, t, ev.eventId);
        break;
      case "FLOW_CLOSED":
        closedAt = t;
        cancel([...execs.values()].filter((e) => e.open).map((e) => e.id), t, ev.eventId);
        break;
      default:
        break;
    }
  }

  const last = events.length ? Date.parse(events[events.length - 1].at) : start;
  const end = closedAt ?? (complete && status === "RUNNING" ? Math.max(now, last) : last);
  for (const x of execs.values()) {
    if (!x.open) continue;
    settle(x, end);
    push(x, end);
    Object.assign(x, { state: x.phase, end });
  }
  return { start, end, closed: closedAt !== null, executions: [...execs.values()], runMarks };
}

// Return tick spacing (ms) giving about `count` ticks over `span`: 1, 2 or 5 times a power of 10.
function tickStep(span, count = 5) {
  const raw = span / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * power).find((step) => step >= raw) ?? raw;
}

// Return an execution's waiting time in milliseconds.
const waitingMs = (x) =>
  x.segments.filter((s) => s.phase === "waiting").reduce((sum, s) => sum + s.to - s.from, 0);

// Describe one execution in words (the bar's accessible name and tooltip).
function barText(x) {
  const wait = waitingMs(x);
  const state = x.state === "running" || x.state === "waiting" ? `${x.state} (open)`
    : x.state === "backoff" ? "waiting to retry (open)" : x.state;
  const ended = x.errorType ? ` with ${x.errorType}` : "";
  const due = x.open && x.until !== null ? `, its timer due at ${timeOf(iso(x.until))}` : "";
  return `${x.id}: ${state}${ended}, ${durationText(x.end - x.createdAt)}` +
    (wait ? `, waiting ${durationText(wait)}` : "") + due +
    `, from ${timeOf(iso(x.createdAt))}`;
}

// Draw the model into `root`: an axis, the run's lane with its RPC marks, one lane per Step
// execution (a button each, pressing it calls `onSelect(id)`), a legend and a summary line.
export function renderTimeline(root, model, { status, selected = "", onSelect, more = false }) {
  const span = Math.max(model.end - model.start, 1);
  // A time's position on the axis, and a span's width, in percent.
  const pct = (t) => `${Math.min(Math.max(((t - model.start) / span) * 100, 0), 100)}%`;
  const widthPct = (from, to) => `${Math.max(((to - from) / span) * 100, 0)}%`;

  const axis = el("div", { class: "tl-axis", "aria-hidden": "true" });
  // About one tick per 160 px of timeline, so their labels never overlap.
  const step = tickStep(span, Math.min(Math.max(Math.round(root.clientWidth / 160), 2), 6));
  for (let at = 0; at <= span + step / 1000; at += step) {
    axis.append(el("span", { class: "tl-tick", style: `left:${(at / span) * 100}%` },
                   at ? `+${durationText(at)}` : "0"));
  }

  const rows = el("ol", { class: "tl-rows" });
  const runTrack = el("div", { class: "tl-track" },
    el("span", { class: `tl-run st-${String(status).toLowerCase()}`,
                 style: `left:0;width:${widthPct(model.start, model.end)}` }));
  for (const mark of model.runMarks) runTrack.append(markEl(mark, pct));
  rows.append(el("li", { class: "tl-row tl-run-row" },
    el("span", { class: "tl-label" }, "Run"), runTrack));

  const lanes = model.executions.slice(0, MAX_LANES);
  for (const x of lanes) {
    const barSpan = Math.max(x.end - x.createdAt, 1);
    const bar = el("button", {
      type: "button", class: `tl-bar st-${x.state}${x.open ? " open" : ""}`,
      "data-exec": x.id, "aria-pressed": String(selected === x.id), "aria-label": barText(x),
      title: barText(x),
      style: `left:${pct(x.createdAt)};width:${widthPct(x.createdAt, x.end)}`,
    });
    for (const s of x.segments) {
      bar.append(el("span", {
        class: `tl-seg seg-${s.phase}`,
        style: `left:${((s.from - x.createdAt) / barSpan) * 100}%;` +
               `width:${((s.to - s.from) / barSpan) * 100}%`,
      }));
    }
    bar.addEventListener("click", () => onSelect?.(selected === x.id ? "" : x.id));
    const track = el("div", { class: "tl-track" }, bar);
    for (const mark of x.marks) track.append(markEl(mark, pct));
    rows.append(el("li", { class: "tl-row", "data-exec": x.id },
      el("code", { class: "tl-label", title: x.id }, x.id), track));
  }

  // How many marks of a kind the executions carry.
  const count = (kind) => model.executions.reduce(
    (n, x) => n + x.marks.filter((m) => m.kind === kind).length, 0);
  const parts = [plural(model.executions.length, "Step execution"),
                 plural(model.runMarks.length, "RPC commit"), plural(count("timer"), "timer firing")];
  const failures = count("attempt");
  const retries = count("retry");
  if (failures) {
    parts.push(plural(failures, "failed attempt"), `${retries} ${retries === 1 ? "retry" : "retries"}`);
  }
  let summary = `${parts.join(" · ")} over ${durationText(model.end - model.start)} ` +
    `from ${timeOf(iso(model.start))}.`;
  if (lanes.length < model.executions.length) summary += ` Drawing the first ${lanes.length}.`;
  if (more) summary += " Drawn from the events loaded so far.";
  root.replaceChildren(
    el("p", { id: "fx-timeline-summary", class: "muted small-text" }, summary),
    el("div", { class: "tl", role: "group", "aria-label": "Timeline of Step executions" },
       axis, rows),
    legend());
}

// A mark (RPC commit, timer firing, failed attempt) at its time on a track.
function markEl(mark, pct) {
  return el("span", { class: `tl-mark mk-${mark.kind}`, style: `left:${pct(mark.at)}`,
                      role: "img", "aria-label": `${mark.label} at ${timeOf(iso(mark.at))}`,
                      title: `${mark.label} at ${iso(mark.at)}` });
}

// The ISO form of a millisecond timestamp.
const iso = (ms) => new Date(ms).toISOString();

// The key to the colours and marks.
function legend() {
  // A colour swatch, and a mark, with its meaning.
  const item = (cls, text) => el("li", {}, el("span", { class: `tl-key ${cls}` }), text);
  const mark = (cls, text) => el("li", {}, el("span", { class: `tl-mark ${cls}` }), text);
  return el("ul", { class: "tl-legend", "aria-label": "Timeline key" },
    item("key-waiting", "waiting"), item("key-running", "running (open)"),
    item("key-completed", "completed"), item("key-failed", "failed"),
    item("key-canceled", "canceled"), item("key-backoff", "retry back-off"),
    mark("mk-rpc", "RPC commit"), mark("mk-timer", "timer fired"),
    mark("mk-attempt", "failed attempt"), mark("mk-retry", "retry began"));
}

// Show only the selected execution's events in the list (the events that name or create it).
export function eventsOf(model, id) {
  const x = model.executions.find((e) => e.id === id);
  if (!x) return null;
  const ids = new Set(x.eventIds);
  if (x.createdBy !== undefined) ids.add(x.createdBy);
  return ids;
}

// Move the keyboard to a lane's bar after a redraw (the pressed button was replaced).
export function focusBar(id) {
  $("fx-timeline").querySelector(`.tl-bar[data-exec="${CSS.escape(id)}"]`)?.focus();
}
