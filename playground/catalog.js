// The catalog runner: it reads catalog.json, lists every example route, renders a form for the
// chosen one, sends the call with fetch, and shows the request as curl and the response, with
// a link that opens the call's Flow in the Flows explorer.
//
// Catalog format (catalog.json), so new examples need only a new entry and no code here:
//   {version: 1, examples: [Example, ...]}
//   Example  {id, kind: "pattern" | "primitive", flowTypes: ["FlowType", ...], title,
//             description,
//             flow: {flowIdParam, defaultFlowId, attributes: ["Name" or "Map/instance", ...],
//                    streams?: [{flowType, name}, ...], channels?: true | ["name", ...],
//                    messageIdParam?},
//             routes: [Route, ...]}
//   Route    {id, title, method, path, description, params: [Param, ...],
//             nextPage?: {responseField, param}}
//   Param    {name, in: "path" | "query" | "body", default, description?, required?,
//             type?: "string" (default) | "integer" | "number" | "boolean" | "json"}
// `flowTypes` names the Flow types the example's routes start: a server that serves a registry
// of its own (DEXLITE_REGISTRY) lacks some, and the page then leaves the example out.
// `path` may hold `{name}` placeholders filled from path params. `flow.flowIdParam` names the
// param whose value is the Flow the state panel follows (panel.js says what the panel does with
// `attributes`, `streams`, `channels` and `messageIdParam`). `nextPage` says which response
// field holds the next page token and which param it fills.

import { $, el, flowHref } from "./lib.js";
import { currentFlowId, paramValues, routeKey, setParam, state } from "./examples-state.js";
import { refreshState, showFormFlow, stopFollowing } from "./panel.js";
import { buildRequest, curlLine } from "./request.js";

const REASONS = {
  200: "OK", 201: "Created", 202: "Accepted", 204: "No Content", 400: "Bad Request",
  401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed", 409: "Conflict",
  413: "Payload Too Large", 422: "Unprocessable Content", 429: "Too Many Requests",
  500: "Internal Server Error", 503: "Service Unavailable", 504: "Gateway Timeout",
};

// ---------- catalog and navigation ----------

// The catalog's examples the server does not serve, by ID: their titles and the Flow types the
// server lacks.
let unserved = new Map();

// Load catalog.json and list the routes of the examples the server serves (`served`, a promise
// of the Flow type names, or of null when they cannot be read: every example is listed then);
// resolves false (with a note) when it cannot.
export async function loadCatalog(served) {
  const status = $("catalog-status");
  let examples;
  try {
    const res = await fetch("catalog.json", { cache: "no-cache" });
    if (!res.ok) throw new Error(`catalog.json answered ${res.status}`);
    examples = (await res.json()).examples ?? [];
  } catch (err) {
    status.textContent = `Could not load the catalog: ${err.message}`;
    status.classList.add("error-text");
    return false;
  }
  const types = await served;
  const missing = (e) => (types ? (e.flowTypes ?? []).filter((t) => !types.has(t)) : []);
  state.examples = examples.filter((e) => !missing(e).length);
  unserved = new Map(examples.filter((e) => missing(e).length)
    .map((e) => [e.id, { title: e.title, missing: missing(e) }]));
  status.textContent = "";
  status.hidden = true;
  renderCatalog();
  return true;
}

// Explain why a "#<exampleId>/<routeId>" hash shows nothing, or return "" when it names no
// example left out.
export function unservedNote(rawHash) {
  let hash = rawHash;
  try { hash = decodeURIComponent(hash); } catch { /* a hand-typed "%": use it as it is */ }
  const left = unserved.get(hash.split("/")[0]);
  if (!left) return "";
  const types = left.missing.join(", ");
  return `The example “${left.title}” is not served here: this server runs a registry ` +
    `without ${types}, so the example's routes are not there.`;
}

// Render every example with a link per route (the link's hash selects the route).
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

// A coloured HTTP method label.
function methodBadge(method) {
  return el("span", { class: `method m-${method.toLowerCase()}` }, method);
}

// Select the route a "#<exampleId>/<routeId>" hash names (the first route when none does).
export function showExamples(rawHash, userAction) {
  let hash = rawHash;
  try { hash = decodeURIComponent(hash); } catch { /* a hand-typed "%": use it as it is */ }
  const [exampleId, routeId] = hash.split("/");
  const known = state.examples.find((e) => e.id === exampleId);
  const example = known ?? (state.example || state.examples[0]);
  if (!example) return;
  const route = known
    ? example.routes.find((r) => r.id === routeId) ?? example.routes[0]
    : state.route ?? example.routes[0];
  // The same route again (back from the explorer): keep its result, refresh its Flow.
  if (example === state.example && route === state.route) refreshState();
  else selectRoute(example, route);
  setMenuOpen(false);
  // On a narrow screen the form sits below the menu; moving focus there brings it into view
  // and tells a screen reader where the user went. Not on page load, where it would surprise.
  if (userAction) $("call").focus();
}

// Leave the examples view: its live Streams stop until it is shown again.
export function leaveExamples() {
  stopFollowing();
}

// Show a route's form and reset the result cards and the state panel to its Flow.
function selectRoute(example, route) {
  state.example = example;
  state.route = route;
  for (const link of document.querySelectorAll(".route-link")) {
    if (link.dataset.route === routeKey(example, route)) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  $("tab-examples").setAttribute("href", `#${routeKey(example, route)}`);
  $("catalog-current").textContent = `${example.title}: ${route.title}`;
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

// Open or close the narrow screens' menu of examples (wide screens always show the list).
function setMenuOpen(open) {
  $("catalog").classList.toggle("open", open);
  $("catalog-toggle").setAttribute("aria-expanded", String(open));
}

// ---------- the form ----------

// Render one labelled field per param of the selected route, filled with its current value.
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
    if (p.description) input.setAttribute("aria-describedby", `${id}-help`);
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
    const takes = (route.params ?? []).some((p) => p.name === name);
    if (takes) paramValues(example, route)[name] = value;
  }
}

// ---------- building and sending the request ----------

// Send the selected route's request and show it, its answer and the Flow's state after it.
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
  $("open-in-explorer").hidden = true;
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

// Show an answer: status, problem code and detail, body, next-page button, explorer link.
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
  const pageToken = ok && next && data ? data[next.responseField] : "";
  $("next-page-bar").hidden = !(typeof pageToken === "string" && pageToken);
  if (pageToken) {
    $("next-page-token").textContent = `${next.param}=${pageToken}`;
    $("next-page").onclick = () => { setParam(next.param, pageToken); send(); };
  }
  if (ok) showExplorerLink(data);
  $("response-card").hidden = false;
}

// Offer to open the answer's Flow (the one it names, else the form's) in the explorer.
function showExplorerLink(data) {
  const named = data && typeof data === "object" && typeof data.flowId === "string";
  const flowId = named ? data.flowId : currentFlowId();
  if (!flowId) return;
  const runId = named && typeof data.runId === "string" ? data.runId : "";
  const link = $("explorer-link");
  link.href = flowHref(flowId, runId);
  $("explorer-link-id").textContent = flowId;
  $("open-in-explorer").hidden = false;
}

// Show that no answer came at all.
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

// Copy the curl line, or select it where the Clipboard API is missing.
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

// Wire the examples view's controls once.
export function initCatalog() {
  // The skip link moves focus without touching the hash, which names the selected route.
  document.querySelector(".skip").addEventListener("click", (event) => {
    event.preventDefault();
    const onFlowPage = !$("view-flows").hidden && !$("flow-view").hidden;
    const target = !$("view-flows").hidden ? (onFlowPage ? "fx-title" : "flows-heading") : "call";
    $(target).focus();
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
  $("catalog-toggle").addEventListener("click", () => {
    setMenuOpen(!$("catalog").classList.contains("open"));
  });
  // A picked route closes the menu. The route already shown changes no hash, so nothing else
  // moves the keyboard to its form: do it here.
  $("examples").addEventListener("click", (event) => {
    const link = event.target.closest(".route-link");
    if (!link) return;
    setMenuOpen(false);
    if (`#${link.dataset.route}` === location.hash) $("call").focus();
  });
  // Escape closes the open menu and gives the keyboard back to its button.
  $("catalog").addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || !$("catalog").classList.contains("open")) return;
    setMenuOpen(false);
    $("catalog-toggle").focus();
  });
}
