// The Flow page's actions on a running run, each confirmed in a dialog first: stop it (CANCEL,
// TERMINATE or FAIL with a reason), invoke an RPC of its Flow type with an input built from the
// RPC's input schema, and publish a message to one of its Channels.

import { $, callJSON, el, enc, flowPath, problemText } from "./lib.js";
import { schemaForm } from "./schema-form.js";

const STOP_TYPES = [
  ["CANCEL", "Close the run as CANCELED."],
  ["TERMINATE", "Close the run as TERMINATED at once."],
  ["FAIL", "Close the run as FAILED."],
];

// Ask for confirmation in the modal dialog; resolves true when the user confirms.
export function confirmAction({ title, text, body, ok }) {
  const dialog = $("confirm-dialog");
  $("confirm-title").textContent = title;
  $("confirm-text").textContent = text;
  $("confirm-body").hidden = body === undefined;
  $("confirm-body").textContent = body === undefined ? "" : JSON.stringify(body, null, 2);
  $("confirm-ok").textContent = ok;
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
  });
}

// Show what an action answered, in the box that survives the page's refresh (and, after a time
// travel, the move to the new run's page).
export function report(res, success) {
  const box = $("fx-action-result");
  box.hidden = false;
  box.className = `action-result ${res.ok ? "ok" : "err"}`;
  box.replaceChildren(res.ok ? success : `Refused: ${problemText(res)}`);
}

// What the forms were built for: a refresh of the same running run keeps them (and what the
// user typed or the last RPC answered).
let builtFor = "";

// Render the actions for this run; `done()` refreshes the page after an action succeeded.
export function renderActions({ flowId, run, typeInfo, channelNames, done }) {
  const root = $("fx-actions");
  const key = JSON.stringify([flowId, run.runId, run.status, typeInfo?.flowType, channelNames]);
  if (key === builtFor && root.childElementCount) return;
  builtFor = key;
  const open = run.status === "RUNNING";
  $("fx-actions-note").textContent = open
    ? `They act on run ${run.runId}.`
    : `This run is ${run.status}: only a running run takes a stop, an RPC or a message.`;
  if (!open) {
    root.replaceChildren();
    return;
  }
  root.replaceChildren(stopForm(flowId, run, done), rpcForm(flowId, run, typeInfo, done),
                       publishForm(flowId, run, channelNames, done));
}

// The stop form: a stop type, a reason and a confirmed POST .../stop.
function stopForm(flowId, run, done) {
  const form = el("form", { class: "action", id: "fx-stop-form" });
  const types = el("fieldset", { class: "stop-types" }, el("legend", {}, "Stop type"));
  for (const [type, help] of STOP_TYPES) {
    const id = `fx-stop-${type.toLowerCase()}`;
    const radio = el("input", { type: "radio", name: "stopType", id, value: type,
                                checked: type === "CANCEL" ? "" : undefined });
    types.append(el("div", { class: "radio" }, radio,
      el("label", { for: id }, el("strong", {}, type), " ", el("span", { class: "muted" }, help))));
  }
  const reason = el("input", { id: "fx-stop-reason", type: "text", autocomplete: "off",
                               maxlength: "4096" });
  form.append(el("h4", {}, "Stop the run"), types,
    el("div", { class: "field" }, el("label", { for: "fx-stop-reason" }, "Reason"), reason),
    el("div", { class: "actions" },
       el("button", { type: "submit", class: "danger" }, "Stop…")));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const type = form.querySelector("input[name=stopType]:checked")?.value ?? "CANCEL";
    const body = { type, reason: reason.value.trim() || null };
    const confirmed = await confirmAction({
      title: `${type} ${flowId}?`,
      text: `Run ${run.runId} closes now, and its running Steps are canceled.`,
      body, ok: `${type[0]}${type.slice(1).toLowerCase()} the run`,
    });
    if (!confirmed) return;
    const res = await callJSON("POST", flowPath(flowId, `/stop?runId=${enc(run.runId)}`), body);
    report(res, `Stopped with ${type}.`);
    if (res.ok) done();
  });
  return form;
}

// The RPC form: an RPC of the Flow type, its input from its schema, a confirmed invoke.
function rpcForm(flowId, run, typeInfo, done) {
  const rpcs = typeInfo?.rpcs ?? [];
  const form = el("form", { class: "action", id: "fx-rpc-form" }, el("h4", {}, "Invoke an RPC"));
  if (!rpcs.length) {
    form.append(el("p", { class: "muted" }, `${run.flowType} declares no RPC.`));
    return form;
  }
  const select = el("select", { id: "fx-rpc" },
                    ...rpcs.map((rpc) => el("option", { value: rpc.name }, rpc.name)));
  const fields = el("div", { id: "fx-rpc-fields" });
  const preview = el("pre", { class: "json", id: "fx-rpc-preview", "aria-live": "polite" });
  const output = el("pre", { class: "json", id: "fx-rpc-output", hidden: "" });
  let built = null;
  // Show the selected RPC's form and the input it makes.
  const build = () => {
    const rpc = rpcs.find((r) => r.name === select.value) ?? rpcs[0];
    built = schemaForm(rpc.inputSchema, "fx-rpc-in");
    fields.replaceChildren(built.node);
    built.onInput(update);
    update();
  };
  // Show the input JSON the fields make now (or why they make none).
  const update = () => {
    try { preview.textContent = JSON.stringify(built.read(), null, 2); } catch (err) {
      preview.textContent = `Not JSON yet: ${err.message}`;
    }
  };
  select.addEventListener("change", build);
  form.append(
    el("div", { class: "field" }, el("label", { for: "fx-rpc" }, "RPC"), select), fields,
    el("p", { class: "help" }, "Input JSON"), preview,
    el("div", { class: "actions" }, el("button", { type: "submit" }, "Invoke…")), output);
  build();
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    let input;
    try { input = built.read(); } catch (err) {
      preview.textContent = `Not JSON yet: ${err.message}`;
      return;
    }
    const body = { input, runId: run.runId };
    const confirmed = await confirmAction({
      title: `Invoke ${select.value} on ${flowId}?`,
      text: "The RPC runs and commits its effects on this run.", body, ok: "Invoke",
    });
    if (!confirmed) return;
    const res = await callJSON("POST", flowPath(flowId, `/rpcs/${enc(select.value)}`), body);
    report(res, `RPC ${select.value} answered.`);
    output.hidden = false;
    output.textContent = JSON.stringify(res.ok ? res.data : res.data ?? null, null, 2);
    if (res.ok) done();
  });
  return form;
}

// The publish form: a Channel (names the run has listed, or any other), an optional ChannelMap
// instance and a JSON value, then a confirmed POST .../channels/{channel}/messages.
function publishForm(flowId, run, channelNames, done) {
  const form = el("form", { class: "action", id: "fx-publish-form" },
                  el("h4", {}, "Publish to a Channel"));
  const channel = el("input", { id: "fx-publish-channel", type: "text", autocomplete: "off",
                                list: "fx-channel-list", spellcheck: "false" });
  channel.value = channelNames[0] ?? "";
  const list = el("datalist", { id: "fx-channel-list" },
                  ...channelNames.map((name) => el("option", { value: name })));
  const instance = el("input", { id: "fx-publish-instance", type: "text", autocomplete: "off",
                                 spellcheck: "false" });
  const value = el("textarea", { id: "fx-publish-value", rows: "3", spellcheck: "false" });
  value.value = '""';
  const note = el("p", { class: "help", id: "fx-publish-help" },
    "The value is JSON: a string needs quotes. A ChannelMap needs its instance.");
  value.setAttribute("aria-describedby", "fx-publish-help");
  form.append(
    el("div", { class: "field" }, el("label", { for: "fx-publish-channel" }, "Channel"),
       channel, list),
    el("div", { class: "field" },
       el("label", { for: "fx-publish-instance" }, "Instance ",
          el("span", { class: "muted" }, "(ChannelMap only)")), instance),
    el("div", { class: "field" }, el("label", { for: "fx-publish-value" }, "Message (JSON)"),
       value, note),
    el("div", { class: "actions" }, el("button", { type: "submit" }, "Publish…")));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    let parsed;
    try { parsed = JSON.parse(value.value); } catch (err) {
      note.textContent = `The value is not JSON: ${err.message}`;
      value.focus();
      return;
    }
    const name = channel.value.trim();
    if (!name) {
      channel.focus();
      return;
    }
    const body = { value: parsed, instance: instance.value.trim() || null };
    const confirmed = await confirmAction({
      title: `Publish to ${name}?`, text: `The message joins the queue of run ${run.runId}.`,
      body, ok: "Publish",
    });
    if (!confirmed) return;
    const res = await callJSON("POST", flowPath(flowId, `/channels/${enc(name)}/messages`), body);
    report(res, `Published message ${res.data?.messageId ?? ""} to ${name}.`);
    if (res.ok) done();
  });
  return form;
}
