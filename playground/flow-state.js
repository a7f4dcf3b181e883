// The Flow page's state cards: the run's plain Attributes with a loader per AttributeMap (its
// instances are read on demand only), and its Channels with their oldest pending messages.

import { $, el, enc, flowPath, getJSON, plural, problemText, valueText } from "./lib.js";
import { relTime } from "./time.js";

const CHANNEL_MESSAGES_SHOWN = 20;

// Show the run's plain Attributes.
export function renderAttributes(attrs) {
  const values = attrs.ok ? attrs.data.values ?? {} : {};
  $("fx-attributes-note").textContent = !attrs.ok ? problemText(attrs)
    : Object.keys(values).length ? `${plural(Object.keys(values).length, "Attribute")} set.`
    : "No plain Attribute is set.";
  $("fx-attributes").textContent = JSON.stringify(values, null, 2);
  $("fx-attributes").hidden = !attrs.ok || !Object.keys(values).length;
}

// Show a loader per AttributeMap of the Flow type, reading instances of run `run()` (a function:
// the forms outlive a refresh, which may bring a newer description of the same run).
export function renderMapLoaders(typeInfo, flowId, run) {
  const maps = (typeInfo?.attributes ?? []).filter((a) => a.kind === "AttributeMap");
  $("fx-maps").replaceChildren(...maps.map((map) => mapLoader(map.name, flowId, run)));
}

// A form that reads one instance of an AttributeMap.
function mapLoader(name, flowId, run) {
  const id = `fx-map-${name.replace(/[^A-Za-z0-9_-]/g, "_")}`;
  const input = el("input", { id, type: "text", autocomplete: "off", spellcheck: "false",
                              placeholder: "instance" });
  const out = el("pre", { class: "json", hidden: "" });
  const form = el("form", { class: "map-loader", "data-map": name },
    el("label", { for: id }, "Instance of ", el("code", {}, name)),
    el("div", { class: "inline" }, input, el("button", { type: "submit", class: "small" }, "Read")),
    out);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = `${name}/${input.value.trim()}`;
    const qs = new URLSearchParams({ name: key, runId: run().runId });
    const res = await getJSON(flowPath(flowId, `/attributes?${qs}`));
    out.hidden = false;
    out.textContent = !res.ok ? problemText(res)
      : key in res.data.values ? JSON.stringify(res.data.values[key], null, 2) : `${key} is unset.`;
  });
  return form;
}

// Read the run's Channels and the oldest pending messages of the non-empty ones.
export async function loadChannels(flowId, runId) {
  const base = flowPath(flowId, "/channels");
  const listed = await getJSON(`${base}?runId=${enc(runId)}`);
  if (!listed.ok) return { ...listed, queues: [] };
  const queues = listed.data.channels ?? [];
  await Promise.all(queues.filter((q) => q.size).map(async (queue) => {
    const qs = new URLSearchParams({ runId, pageSize: String(CHANNEL_MESSAGES_SHOWN) });
    if (queue.instance) qs.set("instance", queue.instance);
    const res = await getJSON(`${base}/${enc(queue.name)}/messages?${qs}`);
    queue.messages = res.ok ? res.data.messages : [];
    if (!res.ok) queue.problem = problemText(res);
  }));
  return { ok: true, queues };
}

// Show each Channel's size and pending messages.
export function renderChannels(result) {
  $("fx-channels-note").textContent = !result.ok ? problemText(result)
    : result.queues.length ? "" : "No Channel (a ChannelMap instance shows once non-empty).";
  $("fx-channels").replaceChildren(...result.queues.map((queue) => {
    const label = queue.instance ? `${queue.name}/${queue.instance}` : queue.name;
    const node = el("div", { class: "channel", "data-channel": label },
      el("p", { class: "channel-head" }, el("code", {}, label), " ",
         el("span", { class: "channel-size" }, `${queue.size} pending`)));
    const messages = queue.messages ?? [];
    if (messages.length) {
      const named = { class: "channel-messages", "aria-label": `Pending messages of ${label}` };
      node.append(el("ol", named,
        ...messages.map((m) => el("li", { class: "channel-message" },
          el("span", { class: "cm-value" }, valueText(m.value)),
          el("span", { class: "cm-meta" }, el("code", { class: "cm-id" }, m.messageId),
             relTime(m.publishedAt))))));
    }
    if (queue.problem) node.append(el("p", { class: "error-text small-text" }, queue.problem));
    else if (messages.length < queue.size) {
      node.append(el("p", { class: "muted small-text" },
                     `Showing the oldest ${messages.length} of ${queue.size}.`));
    }
    return node;
  }));
}
