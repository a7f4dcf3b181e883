// The dexlite playground. It reads catalog.json, renders a form for the chosen example route,
// sends the call with fetch, and shows the request as curl, the response, and the Flow's
// Attributes and history. Plain ES module: no build step and no network beyond this app.
//
// Catalog format (catalog.json), so new examples need only a new entry and no code here:
//   {version: 1, examples: [Example, ...]}
//   Example  {id, kind: "pattern" | "primitive", title, description,
//             flow: {flowIdParam, defaultFlowId, attributes: ["Name" or "Map/instance", ...],
//                    streams?: [{flowType, name}, ...], channels?: true | ["name", ...],
//                    messageIdParam?},
//             routes: [Route, ...]}
//   Route    {id, title, method, path, description, params: [Param, ...],
//             nextPage?: {responseField, param}}
//   Param    {name, in: "path" | "query" | "body", default, description?, required?,
//             type?: "string" (default) | "integer" | "number" | "boolean" | "json"}
// `path` may hold `{name}` placeholders filled from path params. `flow.flowIdParam` names the
// param whose value is the Flow the state panel follows; `flow.attributes` lists the names it
// reads (empty: every plain Attribute). `flow.streams` names the Streams of that Flow the panel
// follows live in its "Live stream" box, through GET /api/v1/streams/{flowType}/{flowId}/{name}/
// events (Server-Sent Events), from the oldest retained message on. `flow.channels` makes the
// panel's "Channels" box show the Flow's queues: their sizes (GET /api/v1/flows/{flowId}/
// channels) and pending messages, oldest first (GET .../channels/{name}/messages); `true` shows
// every Channel and non-empty ChannelMap instance, a list only those Channel or ChannelMap
// names, in its order. `flow.messageIdParam` names the param that a pending message's "Use ID"
// button fills, on the routes that have it. `nextPage` says which response field holds the next
// page token and which param it fills.
//
// For every Flow it shows, the panel's "SubFlows" box names the parent (describeFlow's
// parentFlowId) and lists the children (SearchFlows on ParentFlowId); their buttons open that
// Flow in the panel, in place of the form's Flow, until the form's Flow changes or is called.

const $ = (id) => document.getElementById(id);

// The newest events are the interesting ones, but history is served oldest first in pages,
// so the panel reads a bounded number of pages and shows the tail.
const HISTORY_PAGE_SIZE = 1000;
const HISTORY_MAX_PAGES = 10;
const HISTORY_SHOWN = 50;
// A queue can outgrow any page too: the Channels box shows its oldest pending messages only.
const CHANNEL_MESSAGES_SHOWN = 20;
// A fan-out can outgrow any page too: the SubFlows box reads one page of child runs.
const SUBFLOWS_PAGE_SIZE = 100;
// A Stream can outgrow any page: the live box keeps the newest messages only.
const STREAM_SHOWN = 200;
// Retry a refused or broken follow after this long, doubling up to the maximum.
const STREAM_RETRY_MS = 1000;
const STREAM_MAX_RETRY_MS = 15000;

const REASONS = {
  200: "OK", 201: "Created", 202: "Accepted", 204: "No Content", 400: "Bad Request",
  401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed", 409: "Conflict",
  413: "Payload Too Large", 422: "Unprocessable Content", 429: "Too Many Requests",
  500: "Internal Server Error", 503: "Service Unavailable", 504: "Gateway Timeout",
};

const state = {
  examples: [],
  example: null,
  route: null,
  // Edits are kept per route so that switching routes and back does not lose them.
  values: new Map(),
  // Each refresh gets a number; a slower, older refresh must not overwrite a newer one.
  refreshSeq: 0,
  // A Flow opened from the panel (a parent or a SubFlow); empty: the form's Flow.
  panelFlowId: "",
};

const routeKey = (example, route) => `${example.id}/${route.id}`;

function paramValues(example, route) {
  const key = routeKey(example, route);
  if (!state.values.has(key)) {
    const defaults = {};
    for (const p of route.params ?? []) defaults[p.name] = defaultText(p);
    state.values.set(key, defaults);
  }
  return state.values.get(key);
}

function defaultText(param) {
  const d = param.default;
  // For a JSON param, null is a value worth sending, not an absent default.
  if (param.type === "json") return d === undefined ? "" : JSON.stringify(d, null, 2);
  if (d === undefined || d === null) return param.type === "boolean" ? false : "";
  return param.type === "boolean" ? Boolean(d) : String(d);
}

// ---------- catalog and navigation ----------

async function loadCatalog() {
  const status = $("catalog-status");
  try {
    const res = await fetch("catalog.json", { cache: "no-cache" });
    if (!res.ok) throw new Error(`catalog.json answered ${res.status}`);
    const catalog = await res.json();
    state.examples = catalog.examples ?? [];
  } catch (err) {
    status.textContent = `Could not load the catalog: ${err.message}`;
    status.classList.add("error-text");
    return;
  }
  status.textContent = "";
  status.hidden = true;
  renderCatalog();
  selectFromHash(false);
  window.addEventListener("hashchange", () => selectFromHash(true));
}

function renderCatalog() {
  const root = $("examples");
  root.replaceChildren();
  for (const example of state.examples) {
    const section = el("section", { class: "example" });
    const head = el("h3", {}, example.title);
    if (example.kind) head.append(" ", el("span", { class: "kind" }, example.kind));
    section.append(head);
    const list = el("ul", { class: "routes" });
    for (const route of example.routes ?? []) {
      const link = el("a", { href: `#${routeKey(example, route)}`, class: "route-link",
                             "data-route": routeKey(example, route) });
      link.append(methodBadge(route.method), el("span", { class: "route-title" }, route.title),
                  el("span", { class: "route-path" }, route.path));
      list.append(el("li", {}, link));
    }
    section.append(list);
    root.append(section);
  }
}

function methodBadge(method) {
  return el("span", { class: `method m-${method.toLowerCase()}` }, method);
}

function selectFromHash(userAction) {
  let hash = location.hash.slice(1);
  try { hash = decodeURIComponent(hash); } catch { /* a hand-typed "%": use it as it is */ }
  const [exampleId, routeId] = hash.split("/");
  const known = state.examples.find((e) => e.id === exampleId);
  // A hash that names no example (a hand-edited URL) keeps the current route, if there is one.
  if (!known && state.route) return;
  const example = known ?? state.examples[0];
  if (!example) return;
  const route = example.routes.find((r) => r.id === routeId) ?? example.routes[0];
  selectRoute(example, route);
  // On a narrow screen the form sits below the list; moving focus there brings it into view
  // and tells a screen reader where the user went. Not on page load, where it would surprise.
  if (userAction) $("call").focus();
}

function selectRoute(example, route) {
  state.example = example;
  state.route = route;
  for (const link of document.querySelectorAll(".route-link")) {
    if (link.dataset.route === routeKey(example, route)) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  $("route-example").textContent = example.title;
  $("route-title").replaceChildren(methodBadge(route.method), " ", route.title);
  $("route-description").textContent = route.description ?? "";
  $("example-about").hidden = !example.description;
  $("example-description").textContent = example.description ?? "";
  renderFields();
  state.panelFlowId = "";
  $("route-form").hidden = false;
  // A result belongs to the route that produced it; hide it rather than mislead.
  $("request-card").hidden = true;
  $("response-card").hidden = true;
  refreshState();
}

// ---------- the form ----------

function renderFields() {
  const { example, route } = state;
  const values = paramValues(example, route);
  const fields = $("fields");
  fields.replaceChildren();
  if (!(route.params ?? []).length) {
    fields.append(el("p", { class: "muted" }, "This route takes no parameters."));
  }
  for (const p of route.params ?? []) {
    const id = `param-${p.name}`;
    const field = el("div", { class: "field" });
    const label = el("label", { for: id }, p.name, " ",
                     el("span", { class: `where w-${p.in}` }, p.in));
    if (p.required) label.append(" ", el("span", { class: "required" }, "required"));
    let input;
    if (p.type === "json") {
      input = el("textarea", { id, rows: "4", spellcheck: "false" });
      input.value = values[p.name];
    } else if (p.type === "boolean") {
      input = el("input", { id, type: "checkbox" });
      input.checked = values[p.name];
    } else {
      input = el("input", { id, type: "text", spellcheck: "false", autocomplete: "off" });
      if (p.type === "integer" || p.type === "number") input.inputMode = "decimal";
      input.value = values[p.name];
    }
    input.name = p.name;
    if (p.description) {
      input.setAttribute("aria-describedby", `${id}-help`);
    }
    input.addEventListener("input", () => {
      values[p.name] = input.type === "checkbox" ? input.checked : input.value;
      if (p.name === example.flow?.flowIdParam) shareFlowId(input.value);
    });
    // The state panel follows the Flow ID field, so show the newly named Flow at once.
    if (p.name === example.flow?.flowIdParam) input.addEventListener("change", showFormFlow);
    field.append(label, input);
    if (p.description) field.append(el("p", { id: `${id}-help`, class: "help" }, p.description));
    fields.append(field);
  }
}

// One example's routes act on one Flow: a Flow ID typed for start is the one register and
// list should use too.
function shareFlowId(value) {
  const { example } = state;
  const name = example.flow?.flowIdParam;
  for (const route of example.routes) {
    if ((route.params ?? []).some((p) => p.name === name)) paramValues(example, route)[name] = value;
  }
}

function setParam(name, value) {
  paramValues(state.example, state.route)[name] = value;
  const input = $(`param-${name}`);
  if (input) input.value = value;
}

// ---------- building and sending the request ----------

// Turn the form into exactly what fetch sends, so the curl line cannot drift from it.
function buildRequest(route, values, token) {
  let path = route.path;
  const query = new URLSearchParams();
  let body;
  for (const p of route.params ?? []) {
    const value = values[p.name];
    if (p.in === "path") {
      path = path.replace(`{${p.name}}`, encodeURIComponent(value));
    } else if (p.in === "query") {
      // An empty optional query param is left out so the server applies its default.
      if (value !== "" && value !== false) query.append(p.name, String(value));
    } else if (p.in === "body") {
      body ??= {};
      body[p.name] = typed(p, value);
    }
  }
  const qs = query.toString();
  const url = `${location.origin}${path}${qs ? `?${qs}` : ""}`;
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (token) headers.Authorization = `Bearer ${token}`;
  return {
    method: route.method, url, headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  };
}

// Values that do not parse are sent as typed text: the server's 422 is the useful lesson.
function typed(param, value) {
  if (param.type === "integer" || param.type === "number") {
    const n = Number(value);
    return value.trim() !== "" && Number.isFinite(n) ? n : value;
  }
  if (param.type === "json") {
    try { return JSON.parse(value); } catch { return value; }
  }
  return value;
}

// Single quotes keep the shell from expanding anything; a quote inside is closed, escaped and
// reopened.
const shellQuote = (s) => `'${String(s).replaceAll("'", `'\\''`)}'`;

function curlLine(req) {
  const parts = ["curl", "-i"];
  if (req.method !== "GET") parts.push("-X", req.method);
  parts.push(shellQuote(req.url));
  for (const [name, value] of Object.entries(req.headers)) {
    parts.push("-H", shellQuote(`${name}: ${value}`));
  }
  if (req.body !== undefined) parts.push("--data-raw", shellQuote(req.body));
  return parts.join(" ");
}

async function send(event) {
  event?.preventDefault();
  const { example, route } = state;
  const values = paramValues(example, route);
  const req = buildRequest(route, values, $("token").value.trim());
  $("curl").textContent = curlLine(req);
  $("copy-status").textContent = "";
  $("request-card").hidden = false;

  // Clear the last result first, so an identical answer to a repeated call is still visibly new.
  const button = $("send");
  button.disabled = true;
  $("response-card").setAttribute("aria-busy", "true");
  $("status").className = "status";
  $("status").textContent = "Sending…";
  $("problem").hidden = true;
  $("next-page-bar").hidden = true;
  $("body").textContent = "";
  $("response-card").hidden = false;
  const started = performance.now();
  try {
    const res = await fetch(req.url, { method: req.method, headers: req.headers, body: req.body });
    const text = await res.text();
    renderResponse(route, res, text, Math.round(performance.now() - started));
  } catch (err) {
    renderNetworkError(err);
  } finally {
    button.disabled = false;
    $("response-card").removeAttribute("aria-busy");
  }
  // The call acted on the form's Flow, so that is the state worth seeing now.
  showFormFlow();
}

function renderResponse(route, res, text, ms) {
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { /* not JSON: shown as text */ }
  const ok = res.ok;
  const status = $("status");
  status.className = `status ${ok ? "ok" : "err"}`;
  status.textContent = `${res.status} ${res.statusText || REASONS[res.status] || ""}`.trim();
  status.append(el("span", { class: "muted small-text" }, ` · ${ms} ms`));

  // Errors are problem+json; their code and detail matter more than the rest of the body.
  const isProblem = (res.headers.get("content-type") ?? "").includes("problem+json")
    || (!ok && data && typeof data === "object" && "code" in data);
  $("problem").hidden = !isProblem;
  if (isProblem) {
    $("problem-code").textContent = data?.code ?? `HTTP ${res.status}`;
    $("problem-detail").textContent = data?.detail ?? data?.title ?? "";
  }

  $("body").textContent = data === null ? (text || "(empty body)") : JSON.stringify(data, null, 2);

  const next = route.nextPage;
  const token = ok && next && data ? data[next.responseField] : "";
  $("next-page-bar").hidden = !(typeof token === "string" && token);
  if (token) {
    $("next-page-token").textContent = `${next.param}=${token}`;
    $("next-page").onclick = () => { setParam(next.param, token); send(); };
  }
  $("response-card").hidden = false;
}

function renderNetworkError(err) {
  const status = $("status");
  status.className = "status err";
  status.textContent = "No response";
  $("problem").hidden = false;
  $("problem-code").textContent = "NETWORK_ERROR";
  $("problem-detail").textContent = `${err.message}. Is the server running?`;
  $("body").textContent = "";
  $("next-page-bar").hidden = true;
  $("response-card").hidden = false;
}

async function copyCurl() {
  const text = $("curl").textContent;
  const note = $("copy-status");
  try {
    // The Clipboard API exists only in secure contexts (https or localhost).
    await navigator.clipboard.writeText(text);
    note.textContent = "Copied.";
  } catch {
    const range = document.createRange();
    range.selectNodeContents($("curl"));
    getSelection().removeAllRanges();
    getSelection().addRange(range);
    note.textContent = "Selected: press Ctrl+C (⌘C) to copy.";
  }
}

// ---------- Flow state panel ----------

function currentFlowId() {
  const { example, route } = state;
  const flow = example?.flow;
  if (!flow) return "";
  const value = paramValues(example, route)[flow.flowIdParam];
  return (typeof value === "string" && value.trim()) || flow.defaultFlowId || "";
}

async function getJSON(path) {
  const headers = { Accept: "application/json" };
  const token = $("token").value.trim();
  if (token) headers.Authorization = `Bearer ${token}`;
  try {
    const res = await fetch(path, { headers });
    const data = await res.json().catch(() => null);
    return { ok: res.ok, status: res.status, data };
  } catch (err) {
    return { ok: false, status: 0, data: { code: "NETWORK_ERROR", detail: err.message } };
  }
}

async function loadHistory(flowId) {
  const events = [];
  let pageToken = "";
  for (let page = 0; page < HISTORY_MAX_PAGES; page++) {
    const qs = new URLSearchParams({ pageSize: String(HISTORY_PAGE_SIZE) });
    if (pageToken) qs.set("pageToken", pageToken);
    const res = await getJSON(`/api/v1/flows/${encodeURIComponent(flowId)}/history?${qs}`);
    if (!res.ok) return { ...res, events };
    events.push(...(res.data.events ?? []));
    pageToken = res.data.nextPageToken;
    if (!pageToken) return { ok: true, events, complete: true };
  }
  return { ok: true, events, complete: false };
}

function problemNote(res) {
  if (res.status === 404) return "No Flow with this ID yet. Run the example's start route.";
  const d = res.data ?? {};
  return `${res.status || "No response"} ${d.code ?? ""}: ${d.detail ?? ""}`;
}

async function refreshState() {
  const seq = ++state.refreshSeq;
  const formFlowId = currentFlowId();
  const flowId = state.panelFlowId || formFlowId;
  // The catalog's Attributes, Streams and Channels describe the form's Flow only.
  const own = flowId === formFlowId;
  $("state-flow-id").textContent = flowId || "—";
  $("state-opened").hidden = own;
  followStreams(own ? flowId : "");
  const wantsChannels = Boolean(own && flowId && state.example.flow.channels);
  $("channels-box").hidden = !wantsChannels;
  if (!wantsChannels) $("channels").replaceChildren();
  if (!flowId) {
    // An example without a Flow must not keep showing the previous example's state.
    $("attributes-note").textContent = "This example names no Flow.";
    $("attributes").parentElement.hidden = true;
    $("history-note").textContent = "";
    $("history").replaceChildren();
    $("subflows-box").hidden = true;
    return;
  }
  const names = new URLSearchParams();
  // Another Flow type need not have the example's Attributes: no names reads all of its own.
  if (own) for (const name of state.example.flow.attributes ?? []) names.append("name", name);
  const [attrs, history, channels, family] = await Promise.all([
    getJSON(`/api/v1/flows/${encodeURIComponent(flowId)}/attributes?${names}`),
    loadHistory(flowId),
    wantsChannels ? loadChannels(flowId, state.example.flow.channels) : null,
    loadFamily(flowId),
  ]);
  if (seq !== state.refreshSeq) return;
  if (channels) renderChannels(channels);
  renderFamily(flowId, family);

  // Unset Attributes are absent from values, so an empty object needs saying in words.
  const empty = attrs.ok && !Object.keys(attrs.data.values ?? {}).length;
  $("attributes-note").textContent = !attrs.ok ? problemNote(attrs)
    : `Run ID ${attrs.data.runId}${empty ? ". No Attribute is set yet." : ""}`;
  $("attributes").textContent = attrs.ok ? JSON.stringify(attrs.data.values, null, 2) : "";
  $("attributes").parentElement.hidden = !attrs.ok;

  const list = $("history");
  list.replaceChildren();
  if (!history.ok) {
    $("history-note").textContent = problemNote(history);
    return;
  }
  const shown = history.events.slice(-HISTORY_SHOWN).reverse();
  const total = `${history.events.length}${history.complete ? "" : "+"}`;
  $("history-note").textContent = shown.length < history.events.length || !history.complete
    ? `Showing ${shown.length} of ${total} events.`
    : `${shown.length} event${shown.length === 1 ? "" : "s"}.`;
  for (const ev of shown) {
    const item = el("li", { class: "event" },
      el("span", { class: "ev-id" }, `#${ev.eventId}`),
      el("span", { class: "ev-type" }, ev.eventType),
      el("time", { datetime: ev.at, title: ev.at }, timeOf(ev.at)));
    if (ev.details && Object.keys(ev.details).length) {
      item.append(el("code", { class: "ev-details" }, JSON.stringify(ev.details)));
    }
    list.append(item);
  }
}

// ---------- SubFlows ----------

// Follow the form's Flow again (after a call, or when its Flow ID changes).
function showFormFlow() {
  state.panelFlowId = "";
  refreshState();
}

// Show another Flow in the panel: a parent or a SubFlow of the Flow shown now.
function openInPanel(flowId) {
  state.panelFlowId = flowId === currentFlowId() ? "" : flowId;
  refreshState();
  // The pressed button is about to be replaced; keep the keyboard in the panel.
  $("state-title").focus();
}

// A SearchFlows string literal: a backslash or quote in the Flow ID must not end it.
const queryString = (text) => `'${text.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`;

// Describe the Flow (its parent) and search its children. SearchFlows returns every run of a
// child Flow ID, newest first here, so the first run of each ID is the one to list.
async function loadFamily(flowId) {
  const qs = new URLSearchParams({
    query: `ParentFlowId = ${queryString(flowId)} ORDER BY StartTime DESC`,
    pageSize: String(SUBFLOWS_PAGE_SIZE),
  });
  const [info, found] = await Promise.all([
    getJSON(`/api/v1/flows/${encodeURIComponent(flowId)}`),
    getJSON(`/api/v1/flows?${qs}`),
  ]);
  const children = [];
  const seen = new Set();
  for (const run of (found.ok ? found.data.flows : null) ?? []) {
    if (seen.has(run.flowId)) continue;
    seen.add(run.flowId);
    children.push(run);
  }
  // A SubFlow's ID ends with its index in the Wait: numeric order puts -2 before -10.
  children.sort((a, b) => a.flowId.localeCompare(b.flowId, "en", { numeric: true }));
  return { info, found, children, more: Boolean(found.ok && found.data.nextPageToken) };
}

function renderFamily(flowId, { info, found, children, more }) {
  const parentId = (info.ok && info.data.parentFlowId) || "";
  const runId = info.ok ? info.data.runId : "";
  const parent = $("subflow-parent");
  parent.hidden = !parentId;
  parent.replaceChildren();
  if (parentId) {
    const open = el("button", { type: "button", class: "small",
                                "aria-label": `Open parent Flow ${parentId}` }, "Open parent");
    open.addEventListener("click", () => openInPanel(parentId));
    parent.append("SubFlow of ", el("code", { class: "sf-parent-id" }, parentId), " ", open);
  }
  const list = $("subflows");
  list.replaceChildren();
  list.setAttribute("aria-label", `SubFlows of ${flowId}`);
  for (const child of children) {
    const open = el("button", { type: "button", class: "small sf-open",
                                "aria-label": `Open SubFlow ${child.flowId}` }, "Open");
    open.addEventListener("click", () => openInPanel(child.flowId));
    const item = el("li", { class: "subflow", "data-flow-id": child.flowId },
      el("code", { class: "sf-id" }, child.flowId),
      el("span", { class: `sf-status st-${child.status.toLowerCase()}` }, child.status), open);
    // With ATTACH, or after a parent run that started fewer children, a child's latest run
    // may belong to an earlier run of this Flow.
    if (runId && child.parentRunId !== runId) {
      item.append(el("span", { class: "sf-earlier muted small-text" }, "from an earlier run"));
    }
    list.append(item);
  }
  list.hidden = !children.length;
  let note = "";
  if (!found.ok) note = problemNote(found);
  else if (children.length) {
    const counts = new Map();
    for (const child of children) counts.set(child.status, (counts.get(child.status) ?? 0) + 1);
    const byStatus = [...counts].map(([status, n]) => `${n} ${status}`).join(", ");
    note = `${children.length} SubFlow${children.length === 1 ? "" : "s"}: ${byStatus}.`;
    if (more) note += ` Read from the newest ${SUBFLOWS_PAGE_SIZE} child runs only.`;
  }
  $("subflows-note").textContent = note;
  $("subflows-note").hidden = !note;
  // A Flow with neither a parent nor children has nothing to show here.
  $("subflows-box").hidden = !parentId && !children.length && (found.ok || !info.ok);
}

// ---------- Channels ----------

// Read the queues the catalog asks for, then the pending messages of every non-empty one. Sizes
// and messages are separate reads, so a message may move in between: the box says what it saw.
async function loadChannels(flowId, wanted) {
  const enc = encodeURIComponent;
  const base = `/api/v1/flows/${enc(flowId)}/channels`;
  const listed = await getJSON(base);
  if (!listed.ok) return { ...listed, queues: [] };
  let queues = listed.data.channels ?? [];
  if (Array.isArray(wanted)) {
    queues = wanted.flatMap((name) => queues.filter((q) => q.name === name));
  }
  await Promise.all(queues.map(async (queue) => {
    queue.messages = [];
    if (!queue.size) return;
    const qs = new URLSearchParams({ pageSize: String(CHANNEL_MESSAGES_SHOWN) });
    if (queue.instance) qs.set("instance", queue.instance);
    const page = await getJSON(`${base}/${enc(queue.name)}/messages?${qs}`);
    if (page.ok) queue.messages = page.data.messages ?? [];
    else queue.problem = problemNote(page);
  }));
  return { ok: true, queues };
}

function renderChannels(result) {
  const root = $("channels");
  root.replaceChildren();
  if (!result.ok) {
    $("channels-note").textContent = problemNote(result);
    return;
  }
  const pending = result.queues.reduce((sum, queue) => sum + queue.size, 0);
  $("channels-note").textContent = !result.queues.length ? "This Flow has no such Channel."
    : `${pending} pending message${pending === 1 ? "" : "s"}.`;
  const { example, route } = state;
  const idParam = example.flow.messageIdParam;
  // A "Use ID" button only where the selected route takes a message ID.
  const takesId = Boolean(idParam) && (route.params ?? []).some((p) => p.name === idParam);
  for (const queue of result.queues) {
    const label = queue.instance ? `${queue.name}/${queue.instance}` : queue.name;
    const size = el("span", { class: "channel-size" }, `${queue.size} pending`);
    const node = el("div", { class: "channel", "data-channel": label },
      el("p", { class: "channel-head" }, el("code", {}, label), " ", size));
    const list = el("ol", { class: "channel-messages", "aria-label": `Pending messages of ${label}` });
    for (const message of queue.messages) {
      const value = typeof message.value === "string" ? message.value
        : JSON.stringify(message.value);
      const item = el("li", { class: "channel-message", "data-message-id": message.messageId },
        el("span", { class: "cm-value" }, value ?? ""));
      if (takesId) {
        const use = el("button", { type: "button", class: "small cm-use",
                                   "aria-label": `Use message ID ${message.messageId}` }, "Use ID");
        use.addEventListener("click", () => {
          setParam(idParam, message.messageId);
          $(`param-${idParam}`)?.focus();
        });
        item.append(use);
      }
      item.append(el("span", { class: "cm-meta" },
        el("code", { class: "cm-id", title: "message ID" }, message.messageId),
        el("time", { datetime: message.publishedAt, title: message.publishedAt },
           timeOf(message.publishedAt))));
      list.append(item);
    }
    if (queue.messages.length) node.append(list);
    const shown = queue.messages.length;
    let note = "";
    if (queue.problem) note = queue.problem;
    else if (!queue.size) note = "No pending message.";
    else if (shown < queue.size) note = `Showing the oldest ${shown} of ${queue.size}.`;
    if (note) node.append(el("p", { class: "muted small-text" }, note));
    root.append(node);
  }
}

// Show wall-clock time to the millisecond; the full timestamp is in the tooltip.
function timeOf(iso) {
  const match = /T(\d\d:\d\d:\d\d(?:\.\d{1,3})?)/.exec(iso ?? "");
  return match ? match[1] : String(iso);
}

// ---------- live Stream view ----------

// What the live box follows now; a new example, Flow ID or token replaces every follower.
const live = { key: "", followers: [] };

function followStreams(flowId) {
  const streams = (flowId && state.example?.flow?.streams) || [];
  const token = $("token").value.trim();
  const key = JSON.stringify([state.example?.id ?? "", flowId, token, streams]);
  if (key === live.key) return;
  for (const follower of live.followers) follower.close();
  live.key = key;
  live.followers = streams.map((stream) => new StreamFollower(stream, flowId, token));
  $("streams").replaceChildren(...live.followers.map((follower) => follower.node));
  $("live-stream").hidden = !live.followers.length;
  for (const follower of live.followers) follower.start();
}

function streamProblem(res) {
  const d = res.data ?? {};
  return `${res.status || "No response"} ${d.code ?? ""}: ${d.detail ?? d.title ?? ""}`;
}

// Follows one Stream of one Flow ID and appends each message to its list. Without a token it
// uses EventSource, which reconnects by itself with Last-Event-ID; EventSource cannot send an
// Authorization header, so with a token it reads the same events from a fetch body instead.
class StreamFollower {
  constructor({ flowType, name }, flowId, token) {
    const enc = encodeURIComponent;
    this.path = `/api/v1/streams/${enc(flowType)}/${enc(flowId)}/${enc(name)}`;
    this.token = token;
    this.lastId = "";
    this.count = 0;
    this.closed = false;
    this.retryMs = STREAM_RETRY_MS;
    this.source = null;
    this.controller = null;
    this.pause = null;
    this.status = el("span", { class: "stream-state muted small-text", role: "status" },
                     "Connecting…");
    this.empty = el("p", { class: "stream-empty muted small-text" }, "No message yet.");
    this.list = el("ol", { class: "stream-messages", "aria-label": `Stream ${name}` });
    this.node = el("div", { class: "stream", "data-stream": `${flowType}/${name}` },
      el("p", { class: "stream-head" }, el("code", {}, name), " ", this.status),
      this.empty, this.list);
  }

  // Resume after the last message shown, so a reconnect neither repeats nor skips one.
  url() {
    const qs = this.lastId ? `?${new URLSearchParams({ resumeToken: this.lastId })}` : "";
    return `${this.path}/events${qs}`;
  }

  start() {
    if (this.token) this.readWithFetch();
    else this.openEventSource();
  }

  close() {
    this.closed = true;
    this.source?.close();
    this.controller?.abort();
    this.pause?.wake();
  }

  setStatus(text) {
    const shown = this.count ? ` · ${this.count} message${this.count === 1 ? "" : "s"}` : "";
    this.status.textContent = `${text}${shown}`;
  }

  openEventSource() {
    const source = new EventSource(this.url());
    this.source = source;
    source.onopen = () => {
      this.retryMs = STREAM_RETRY_MS;
      this.setStatus("Following live");
    };
    source.onmessage = (event) => this.receive(event.data, event.lastEventId);
    source.onerror = async () => {
      if (this.closed || source !== this.source) return;
      if (source.readyState !== EventSource.CLOSED) {
        this.setStatus("Reconnecting…");  // EventSource retries by itself
        return;
      }
      // A problem response makes EventSource give up without saying why: ask the Stream's
      // readStream route, which answers the same problem as JSON, then retry by hand.
      source.close();
      const probe = await getJSON(`${this.path}/next?waitSeconds=0`);
      if (this.closed) return;
      this.setStatus(`${probe.ok ? "Disconnected." : streamProblem(probe)} Retrying…`);
      if (await this.backoff()) this.openEventSource();
    };
  }

  async readWithFetch() {
    while (!this.closed) {
      this.controller = new AbortController();
      let ended = false;
      try {
        const res = await fetch(this.url(), {
          headers: { Accept: "text/event-stream", Authorization: `Bearer ${this.token}` },
          signal: this.controller.signal,
          cache: "no-store",
        });
        if (!res.ok) {
          const data = await res.json().catch(() => null);
          this.setStatus(`${streamProblem({ status: res.status, data })} Retrying…`);
        } else {
          this.retryMs = STREAM_RETRY_MS;
          this.setStatus("Following live");
          await this.readEvents(res.body);
          ended = true;
        }
      } catch (err) {
        if (this.closed) return;
        this.setStatus(`Disconnected (${err.message}). Retrying…`);
      }
      if (this.closed) return;
      // The server ends each response after its time limit; carry on where it stopped.
      if (ended) this.setStatus("Reconnecting…");
      if (!(await this.backoff(ended ? this.serverRetryMs ?? STREAM_RETRY_MS : undefined))) return;
    }
  }

  // Parse Server-Sent Events: blocks end with a blank line; `data:` lines join with "\n".
  async readEvents(body) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      // A "\r" at the end may be the first half of "\r\n": keep it until the next chunk.
      const cut = buffer.endsWith("\r") ? buffer.length - 1 : buffer.length;
      const lines = buffer.slice(0, cut).replace(/\r\n?/g, "\n");
      const last = lines.lastIndexOf("\n\n");
      if (last < 0) continue;
      for (const block of lines.slice(0, last).split("\n\n")) this.dispatch(block);
      buffer = lines.slice(last + 2) + buffer.slice(cut);
    }
  }

  dispatch(block) {
    const data = [];
    let id = null;
    for (const line of block.split("\n")) {
      if (!line || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "data") data.push(value);
      else if (field === "id") id = value;
      else if (field === "retry" && /^\d+$/.test(value)) this.serverRetryMs = Number(value);
    }
    if (data.length) this.receive(data.join("\n"), id ?? "");
    else if (id !== null) this.lastId = id;
  }

  receive(text, id) {
    if (this.closed) return;
    if (id) this.lastId = id;
    let message;
    try { message = JSON.parse(text); } catch { message = { value: text }; }
    const list = this.list;
    // Keep following the newest message unless the reader scrolled up to an older one.
    const atBottom = list.scrollTop + list.clientHeight >= list.scrollHeight - 4;
    const value = typeof message.value === "string" ? message.value
      : JSON.stringify(message.value);
    list.append(el("li", { class: "stream-message" },
      el("span", { class: "sm-value" }, value ?? ""),
      el("code", { class: "sm-source", title: "source" }, message.source ?? ""),
      el("time", { datetime: message.createdAt ?? "", title: message.createdAt ?? "" },
         timeOf(message.createdAt ?? ""))));
    while (list.children.length > STREAM_SHOWN) list.firstElementChild.remove();
    if (atBottom) list.scrollTop = list.scrollHeight;
    this.empty.hidden = true;
    this.count += 1;
    this.setStatus("Following live");
  }

  // Wait before the next attempt (close() cuts it short); resolves false once closed.
  backoff(ms) {
    const delay = ms ?? this.retryMs;
    if (ms === undefined) this.retryMs = Math.min(this.retryMs * 2, STREAM_MAX_RETRY_MS);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(!this.closed), delay);
      this.pause = { wake: () => { clearTimeout(timer); resolve(false); } };
    });
  }
}

// ---------- small DOM helper ----------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  // Text goes in as text nodes, never as HTML, because it comes from responses.
  node.append(...children);
  return node;
}

// The skip link moves focus without touching the hash, which names the selected route.
document.querySelector(".skip").addEventListener("click", (event) => {
  event.preventDefault();
  $("call").focus();
});
$("route-form").addEventListener("submit", send);
$("reset").addEventListener("click", () => {
  state.values.delete(routeKey(state.example, state.route));
  renderFields();
  const flowParam = state.example.flow?.flowIdParam;
  const fresh = paramValues(state.example, state.route)[flowParam];
  if (fresh !== undefined) shareFlowId(fresh);
  showFormFlow();
});
$("copy").addEventListener("click", copyCurl);
$("refresh").addEventListener("click", refreshState);
$("state-back").addEventListener("click", showFormFlow);
// A new token must reach the live Stream view, which connects with it.
$("token").addEventListener("change", refreshState);
loadCatalog();
