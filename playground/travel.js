// Time travel from the Flow page (DESIGN.md §13): the points a Step execution offers, and the
// dialog that names a point, shows the Attributes as that point would restore them beside the
// current ones (the differences marked), takes a reason, "skip writes reapply" and an optional
// Flow ID to fork to, and POSTs .../time-travel once confirmed.
//
// The values shown for a point are an as-of read (GET .../attributes?asOfEventId=N): the values
// right after the commit that wrote history event N. Each point is shown as of the event that
// marks it in the history, and the dialog names that event:
// - the beginning: event 1 (FLOW_STARTED), the run's first commit;
// - an event: that event;
// - before a Step execution's WaitFor: the event of the commit that queued it (FLOW_STARTED,
//   or the STEP_CLOSED or RPC_COMMITTED whose nextSteps created it);
// - before its Execute: the commit that moved it to Execute, as the history shows it: its
//   STEP_WAITING when the WaitFor went straight to Execute (no Channel or SubFlow to wait for),
//   the CHANNEL_CONSUMED that met its wait, the last SUBFLOW_CLOSED before it closed (a wait on
//   SubFlows), or the commit that queued it when it has no WaitFor (or its WaitFor returned
//   without writing or waiting). When the history shows none of these, the execution has not
//   reached Execute as far as the page can tell, and the point is not offered.

import { $, callJSON, el, enc, flowPath, getJSON, plural, problemText, timeOf } from "./lib.js";

// The events of one execution that name it, oldest first.
function namedEvents(x, byId) {
  return [...x.eventIds].sort((a, b) => a - b).map((id) => byId.get(id))
    .filter((ev) => ev && ev.details?.stepExecutionId === x.id);
}

// Return the points a Step execution offers: {waitFor, execute}, each {event, how} or null.
// `x` is an execution of the timeline's model, `byId` the loaded events by ID, `stepInfo` its
// Step type from listFlowTypes (or null when the registry does not list it).
export function stepPoints(x, byId, stepInfo = null) {
  const created = byId.get(x.createdBy) ?? null;
  const waitFor = created && { event: created, how: "the commit that queued it" };
  const named = namedEvents(x, byId);
  // The first event of a type naming it, after event `after`.
  const first = (type, after = 0) =>
    named.find((ev) => ev.eventType === type && ev.eventId > after);
  const closed = first("STEP_CLOSED");
  // A Step's execute phase decided how it closed, unless its attempts ran out (FAILED), which
  // a WaitFor can do as well.
  const executed = closed && closed.details.decision !== "FAILED";
  let execute = null;
  const waiting = first("STEP_WAITING");
  if (stepInfo && !stepInfo.hasWaitFor) {
    execute = created && { event: created, how: "the commit that queued it (it has no WaitFor)" };
  } else if (waiting && !Array.isArray(waiting.details.channels)) {
    execute = { event: waiting, how: "the commit that moved it to Execute" };
  } else if (waiting) {
    const consumed = first("CHANNEL_CONSUMED", waiting.eventId - 1);
    const children = named.filter((ev) => ev.eventType === "SUBFLOW_CLOSED"
                                   && (!closed || ev.eventId < closed.eventId));
    if (consumed) {
      execute = { event: consumed, how: "the commit that met its wait and moved it to Execute" };
    } else if (executed && children.length) {
      execute = { event: children[children.length - 1],
                  how: "the last SubFlow close before it closed, where its wait ended" };
    }
  } else if (executed && created) {
    execute = {
      event: created,
      how: "the commit that queued it (its WaitFor returned without writing or waiting)",
    };
  }
  return { waitFor, execute };
}

// The dialog's state: what it travels, the reads in flight (`seq`), and a POST in flight.
const state = { ctx: null, seq: 0, busy: false };

// Describe an event in a few words: "#3 RPC_COMMITTED at 18:40:27.759".
const eventText = (ev) => `#${ev.eventId} ${ev.eventType} at ${timeOf(ev.at)}`;

// Open the dialog for a point of the run shown. `point` is {to, label, event, how}: the body's
// `to`, words for the point ("to before the WaitFor of X"), the history event that marks it
// and how that event marks it. `done(res, point)` is called once a travel succeeded.
export function openTravel({ flowId, run, typeInfo, point, done }) {
  const seq = ++state.seq;
  state.ctx = { flowId, run, point, done };
  $("travel-title").textContent = `Travel ${flowId} ${point.label}?`;
  const rows = [];
  // Add one term and its description to the point's summary.
  const add = (term, ...value) => rows.push(el("dt", {}, term), el("dd", {}, ...value));
  add("Point", point.label.replace(/^to /, ""));
  add("Marked by", `event ${eventText(point.event)}: ${point.how}`);
  add("From run", el("code", {}, run.runId), ` (${run.status})`);
  $("travel-point").replaceChildren(...rows);
  $("travel-fields").replaceChildren(...fields());
  $("travel-problem").hidden = true;
  $("travel-status").textContent = "";
  $("travel-ok").disabled = false;
  $("travel-values-caption").textContent =
    `At the point: the values right after event ${eventText(point.event)}.`;
  $("travel-values-note").textContent = "Reading the Attributes…";
  $("travel-values").hidden = true;
  $("travel-values-body").replaceChildren();
  updateBody();
  $("travel-dialog").showModal();
  $("travel-dialog").scrollTop = 0;
  readValues(seq, flowId, run.runId, point.event.eventId, hardDeleteNames(typeInfo));
}

// The dialog's fields, empty: a reason, "skip writes reapply" and a Flow ID to fork to. They are
// in the page only while the dialog is open (the stop form has a "Reason" of its own).
function fields() {
  // An input that shows the request body as it changes.
  const input = (attrs) => {
    const node = el("input", attrs);
    node.addEventListener("input", updateBody);
    return node;
  };
  return [
    el("div", { class: "field" },
       el("label", { for: "travel-reason" }, "Reason ",
          el("span", { class: "muted" }, "(optional)")),
       input({ id: "travel-reason", type: "text", autocomplete: "off", maxlength: "1000" })),
    el("div", { class: "check" },
       input({ id: "travel-skip", type: "checkbox", "aria-describedby": "travel-skip-help" }),
       el("label", { for: "travel-skip" }, "Skip writes reapply"),
       el("p", { id: "travel-skip-help", class: "help" },
          "Leave out what RPCs and clients wrote, published and deleted after the point.")),
    el("div", { class: "field" },
       el("label", { for: "travel-fork" }, "Fork to Flow ID ",
          el("span", { class: "muted" }, "(optional)")),
       input({ id: "travel-fork", type: "text", autocomplete: "off", spellcheck: "false",
               maxlength: "256", "aria-describedby": "travel-fork-help" }),
       el("p", { id: "travel-fork-help", class: "help" },
          "Start the new run under this Flow ID instead and leave this one untouched.")),
  ];
}

// The names of the Flow type's hard-delete Attributes: a travel neither restores nor reapplies
// them, and an as-of read leaves them out.
function hardDeleteNames(typeInfo) {
  return new Set((typeInfo?.attributes ?? [])
    .filter((a) => a.kind === "Attribute" && a.hardDeleteOnNull).map((a) => a.name));
}

// Read the Attributes as of the point's event and as they are now, then compare them.
async function readValues(seq, flowId, runId, eventId, hardDelete) {
  const r = enc(runId);
  const [then, now] = await Promise.all([
    getJSON(flowPath(flowId, `/attributes?runId=${r}&asOfEventId=${eventId}`)),
    getJSON(flowPath(flowId, `/attributes?runId=${r}`)),
  ]);
  if (seq !== state.seq) return;
  if (!then.ok || !now.ok) {
    $("travel-values-note").textContent = problemText(then.ok ? now : then);
    return;
  }
  renderValues(then.data.values ?? {}, now.data.values ?? {}, hardDelete);
}

// One value in a cell: compact JSON, or "unset".
const valueCell = (values, name) => (name in values
  ? el("code", { class: "tt-value" }, JSON.stringify(values[name]))
  : el("span", { class: "muted" }, "unset"));

// Fill the table: one row per Attribute set at the point or now, the differing ones marked.
function renderValues(then, now, hardDelete) {
  const names = [...new Set([...Object.keys(then), ...Object.keys(now)])]
    .sort((a, b) => a.localeCompare(b));
  let differ = 0;
  const rows = names.map((name) => {
    const hard = hardDelete.has(name) && !(name in then);
    const same = hard || JSON.stringify(then[name]) === JSON.stringify(now[name]);
    if (!same) differ++;
    const flag = hard ? el("span", { class: "tt-flag tt-kept" }, "hard-delete: not restored")
      : same ? null : el("span", { class: "tt-flag" }, "differs");
    return el("tr", { class: same ? "tt-same" : "tt-diff", "data-attribute": name },
      el("th", { scope: "row", "data-label": "Attribute" },
         el("span", {}, el("code", {}, name), " ", flag)),
      el("td", { class: "tt-then", "data-label": "At the point" },
         hard ? el("span", { class: "muted" }, "kept as it is") : valueCell(then, name)),
      el("td", { class: "tt-now", "data-label": "Now" }, valueCell(now, name)));
  });
  $("travel-values-body").replaceChildren(...rows);
  $("travel-values").hidden = !names.length;
  const verb = differ === 1 ? "differs" : "differ";
  $("travel-values-note").textContent = !names.length ? "No plain Attribute is set, then or now."
    : differ ? `${plural(differ, "Attribute")} of ${names.length} ${verb} from now.`
    : `The ${plural(names.length, "Attribute")} had the same values then as now.`;
}

// Return the POST body the dialog's fields make now.
function body() {
  const { run, point } = state.ctx;
  const fork = $("travel-fork").value.trim();
  return { runId: run.runId, to: point.to, reason: $("travel-reason").value.trim(),
           skipWritesReapply: $("travel-skip").checked, forkToFlowId: fork || null };
}

// Show the body that Confirm sends, and what it does to the run.
function updateBody() {
  if (!state.ctx) return;
  const sent = body();
  const { flowId, run } = state.ctx;
  $("travel-body").textContent = JSON.stringify(sent, null, 2);
  $("travel-run").textContent = sent.forkToFlowId
    ? `A new run of Flow ID ${sent.forkToFlowId} starts from the point; ${flowId} and its run ` +
      `${run.runId} are left as they are.`
    : run.status === "RUNNING"
      ? `Run ${run.runId} is open: it closes as TERMINATED, its running Steps are canceled, ` +
        "and a new run starts from the point."
      : `Run ${run.runId} is ${run.status} and stays so; a new run starts from the point.`;
}

// POST the travel; on success close the dialog and hand over to `done`, else show the problem.
async function confirmTravel() {
  const ctx = state.ctx;
  if (!ctx || state.busy) return;
  const sent = body();
  state.busy = true;
  $("travel-ok").disabled = true;
  $("travel-cancel").disabled = true;
  $("travel-problem").hidden = true;
  $("travel-status").textContent = "Traveling…";
  const res = await callJSON("POST", flowPath(ctx.flowId, "/time-travel"), sent);
  state.busy = false;
  $("travel-ok").disabled = false;
  $("travel-cancel").disabled = false;
  $("travel-status").textContent = "";
  if (!res.ok) {
    const d = res.data ?? {};
    $("travel-problem-code").textContent = d.code ?? String(res.status || "NETWORK_ERROR");
    $("travel-problem-detail").textContent = d.detail ?? problemText(res);
    $("travel-problem-field").textContent = d.field ? `Field: ${d.field}` : "";
    $("travel-problem").hidden = false;
    return;
  }
  $("travel-dialog").close("ok");
  ctx.done(res, ctx.point);
}

// Wire the dialog's controls once.
export function initTravel() {
  const dialog = $("travel-dialog");
  // Confirm is a plain button: Enter in a field must not travel.
  $("travel-form").addEventListener("submit", (event) => event.preventDefault());
  $("travel-ok").addEventListener("click", confirmTravel);
  $("travel-cancel").addEventListener("click", () => dialog.close("cancel"));
  // Escape closes the dialog, except while the travel is being sent: its answer must be shown.
  dialog.addEventListener("cancel", (event) => {
    if (state.busy) event.preventDefault();
  });
  dialog.addEventListener("close", () => {
    state.seq++;
    state.ctx = null;
    $("travel-fields").replaceChildren();
  });
}
