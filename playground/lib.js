// Small helpers every view of the playground shares: DOM building, calls to the app's REST API
// with the page's bearer token, and the formatting of times, durations and problems.

// Return the element with this ID.
export const $ = (id) => document.getElementById(id);

// Build an element with attributes and children. Text goes in as text nodes, never as HTML,
// because it comes from responses.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== null && value !== false) node.setAttribute(name, value);
  }
  node.append(...children.filter((child) => child !== null && child !== undefined));
  return node;
}

// Return the bearer token typed in the header, or "".
export const token = () => $("token").value.trim();

// Return the headers of a JSON call, with the token when there is one.
export function apiHeaders(body) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const bearer = token();
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  return headers;
}

// Call the app and return {ok, status, data}; a network failure is status 0, never a throw.
export async function callJSON(method, path, body) {
  try {
    const res = await fetch(path, {
      method,
      headers: apiHeaders(body),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const data = await res.json().catch(() => null);
    return { ok: res.ok, status: res.status, data };
  } catch (err) {
    return { ok: false, status: 0, data: { code: "NETWORK_ERROR", detail: err.message } };
  }
}

// GET a JSON resource of the app.
export const getJSON = (path) => callJSON("GET", path);

// Percent-encode one path segment.
export const enc = encodeURIComponent;

// Return "/api/v1/flows/<id><rest>" with the Flow ID encoded.
export const flowPath = (flowId, rest = "") => `/api/v1/flows/${enc(flowId)}${rest}`;

// A SearchFlows string literal: a backslash or quote in the text must not end it.
export const queryString = (text) =>
  `'${String(text).replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`;

// Return the explorer's address of a Flow, or of one of its runs.
export function flowHref(flowId, runId = "") {
  return `#/flows/${enc(flowId)}${runId ? `?runId=${enc(runId)}` : ""}`;
}

// Search the runs of one Flow ID (newest first); `extra` narrows the query further.
export function searchRuns(flowId, { extra = "", pageSize = 1, pageToken = "" } = {}) {
  const query = `FlowId = ${queryString(flowId)}${extra ? ` AND ${extra}` : ""}`;
  const qs = new URLSearchParams({ query, pageSize: String(pageSize) });
  if (pageToken) qs.set("pageToken", pageToken);
  return getJSON(`/api/v1/flows?${qs}`);
}

// Describe a problem answer in one line: status, code and detail.
export function problemText(res) {
  const d = res.data ?? {};
  return `${res.status || "No response"} ${d.code ?? ""}: ${d.detail ?? d.title ?? ""}`.trim();
}

// Show wall-clock time to the millisecond; the full timestamp goes in a tooltip.
export function timeOf(iso) {
  const match = /T(\d\d:\d\d:\d\d(?:\.\d{1,3})?)/.exec(iso ?? "");
  return match ? match[1] : String(iso ?? "");
}

// Show a date and a time to the second, in UTC as the API gives them.
export function dateTimeOf(iso) {
  const match = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)/.exec(iso ?? "");
  return match ? `${match[1]} ${match[2]}` : "—";
}

// Format a duration in milliseconds for people: 850 ms, 1.5 s, 2 min 5 s, 3 h 2 min.
export function durationText(ms) {
  if (!Number.isFinite(ms) || ms < 0) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${trim(ms / 1000)} s`;
  if (ms < 3_600_000) {
    const s = Math.round((ms % 60_000) / 1000);
    return `${Math.floor(ms / 60_000)} min${s ? ` ${s} s` : ""}`;
  }
  const min = Math.round((ms % 3_600_000) / 60_000);
  return `${Math.floor(ms / 3_600_000)} h${min ? ` ${min} min` : ""}`;
}

// Keep at most two decimals and no trailing zeros.
const trim = (n) => String(Math.round(n * 100) / 100);

// Show any JSON value on one line, a string as itself.
export const valueText = (value) =>
  typeof value === "string" ? value : JSON.stringify(value) ?? "";

// A status badge coloured by the run status (RUNNING, COMPLETED, FAILED, ...).
export function statusBadge(status) {
  return el("span", { class: `badge st-${String(status).toLowerCase()}` }, status);
}

// Pluralize a count: plural(2, "event") is "2 events".
export const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

let registry = null;
// Read the registry (listFlowTypes) once per page: {ok, types}, a Map of Flow type to its
// info; a failed read is made again next time.
function readRegistry() {
  if (!registry) {
    registry = getJSON("/api/v1/flow-types").then((res) => {
      if (!res.ok) registry = null;
      const types = (res.ok ? res.data.flowTypes : []).map((info) => [info.flowType, info]);
      return { ok: res.ok, types: new Map(types) };
    });
  }
  return registry;
}

// Return the registry: a Map of Flow type to its info (empty when it cannot be read).
export async function flowTypes() {
  return (await readRegistry()).types;
}

// Return the names of the Flow types the server serves, or null when it cannot tell (a
// bearer token is needed, say).
export async function servedFlowTypes() {
  const { ok, types } = await readRegistry();
  return ok ? new Set(types.keys()) : null;
}
