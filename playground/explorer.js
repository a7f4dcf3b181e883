// The Flows explorer's search view: a SearchFlows query with Flow type and status filters,
// the last queries of this browser session, and the matching runs in a paged table. The view's
// address is "#/flows?query=...&flowType=...&status=...&pageSize=...", so a search can be
// shared and the browser's Back button returns to it.

import {
  $, dateTimeOf, el, flowHref, flowTypes, getJSON, plural, problemText, queryString,
  statusBadge, valueText,
} from "./lib.js";

const STATUSES = ["RUNNING", "COMPLETED", "FAILED", "CANCELED", "TERMINATED", "TIMED_OUT"];
const PAGE_SIZES = ["10", "20", "50", "100"];
const RECENT_KEY = "dexlite.recentSearches";
const RECENT_MAX = 8;

// The search shown: its parameters, the page tokens that led to each page, and its results.
const search = { key: "", params: null, tokens: [""], seq: 0 };

// Return the search parameters a "#/flows?..." hash names.
export function searchParams(qs) {
  const p = new URLSearchParams(qs);
  return {
    query: p.get("query") ?? "",
    flowType: p.get("flowType") ?? "",
    status: STATUSES.includes(p.get("status")) ? p.get("status") : "",
    pageSize: PAGE_SIZES.includes(p.get("pageSize")) ? p.get("pageSize") : "20",
  };
}

// Return the hash of a search.
function searchHash({ query, flowType, status, pageSize }) {
  const p = new URLSearchParams();
  if (query) p.set("query", query);
  if (flowType) p.set("flowType", flowType);
  if (status) p.set("status", status);
  if (pageSize !== "20") p.set("pageSize", pageSize);
  const qs = p.toString();
  return `#/flows${qs ? `?${qs}` : ""}`;
}

// Split a trailing top-level ORDER BY from a query, outside quotes and backticks, so the
// filters can wrap the rest in parentheses: "a = 1 ORDER BY StartTime" -> ["a = 1", "ORDER..."].
export function splitOrderBy(text) {
  let quote = "";
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === "\\" && quote === "'") i++;
      else if (c === quote) quote = "";
      continue;
    }
    if (c === "'" || c === "`") quote = c;
    else if (c === "(") depth++;
    else if (c === ")") depth--;
    else if (depth === 0 && /[Oo]/.test(c) && (i === 0 || /\s/.test(text[i - 1]))
             && /^ORDER\s+BY\b/i.test(text.slice(i))) {
      return [text.slice(0, i).trim(), text.slice(i).trim()];
    }
  }
  return [text.trim(), ""];
}

// Combine the query box and the filters into the one query SearchFlows gets.
export function composeQuery({ query, flowType, status }) {
  const [filter, order] = splitOrderBy(query);
  const parts = [];
  if (flowType) parts.push(`FlowType = ${queryString(flowType)}`);
  if (status) parts.push(`Status = ${queryString(status)}`);
  // A filter of its own is parenthesized, so its OR cannot escape the type and status.
  if (filter) parts.push(parts.length ? `(${filter})` : filter);
  return [parts.join(" AND "), order].filter(Boolean).join(" ");
}

// Show the search view for these parameters and run the search (page one of a new search, the
// same page again when it is the search already shown).
export async function showSearch(params) {
  $("search-view").hidden = false;
  $("flow-view").hidden = true;
  $("search-query").value = params.query;
  $("search-status").value = params.status;
  $("search-size").value = params.pageSize;
  await fillTypes(params.flowType);
  const key = JSON.stringify(params);
  if (key !== search.key) {
    search.key = key;
    search.params = params;
    search.tokens = [""];
  }
  renderRecent();
  // The Flow page's way back, and the Flows tab, return to this search.
  $("fx-back").href = searchHash(params);
  $("tab-flows").href = searchHash(params);
  await runSearch();
}

// List the registry's Flow types in the type filter, selecting `selected`.
async function fillTypes(selected) {
  const select = $("search-type");
  if (select.options.length <= 1) {
    const types = [...(await flowTypes()).keys()].sort();
    select.append(...types.map((name) => el("option", { value: name }, name)));
  }
  // A type no longer registered still filters: keep it as an option.
  if (selected && ![...select.options].some((o) => o.value === selected)) {
    select.append(el("option", { value: selected }, selected));
  }
  select.value = selected;
}

// Read the current page of the search and show it.
async function runSearch() {
  const seq = ++search.seq;
  const { params, tokens } = search;
  const query = composeQuery(params);
  const qs = new URLSearchParams({ pageSize: params.pageSize });
  if (query) qs.set("query", query);
  const pageToken = tokens[tokens.length - 1];
  if (pageToken) qs.set("pageToken", pageToken);
  $("search-results").setAttribute("aria-busy", "true");
  const res = await getJSON(`/api/v1/flows?${qs}`);
  if (seq !== search.seq) return;
  $("search-results").removeAttribute("aria-busy");
  $("search-sent").replaceChildren("Query sent: ", el("code", {}, query || "(every run)"));
  $("search-problem").hidden = res.ok;
  if (!res.ok) {
    $("search-problem-code").textContent = res.data?.code ?? `HTTP ${res.status}`;
    $("search-problem-detail").textContent = res.data?.detail ?? problemText(res);
    renderRows([]);
    $("search-count").textContent = "";
    renderPager("");
    return;
  }
  remember(params);
  renderRows(res.data.flows);
  const page = tokens.length;
  const count = res.data.flows.length;
  $("search-count").textContent = count || page > 1
    ? `Page ${page}: ${plural(count, "run")}.` : "No run matches.";
  renderPager(res.data.nextPageToken);
}

// Fill the results table: one row per run.
function renderRows(flows) {
  const body = $("results-body");
  body.replaceChildren();
  for (const run of flows) {
    const link = el("a", { href: flowHref(run.flowId, run.runId), class: "fx-flow-link" },
                    run.flowId);
    const attrs = Object.entries(run.indexedAttributes ?? {}).map(
      ([key, value]) => el("code", { class: "chip" }, `${key}=${valueText(value)}`));
    body.append(el("tr", { "data-flow-id": run.flowId, "data-run-id": run.runId },
      cell("Flow ID", link, el("code", { class: "run-id", title: run.runId },
                                 `run ${run.runId.slice(0, 13)}…`)),
      cell("Type", run.flowType),
      cell("Status", statusBadge(run.status)),
      cell("Started", el("time", { datetime: run.startedAt, title: run.startedAt },
                         dateTimeOf(run.startedAt))),
      cell("Closed", run.closedAt ? el("time", { datetime: run.closedAt, title: run.closedAt },
                                       dateTimeOf(run.closedAt)) : "—"),
      cell("Attributes", ...(attrs.length ? attrs : ["—"]))));
  }
  $("results-table").hidden = !flows.length;
}

// A table cell that names its column, for the stacked layout of narrow screens.
const cell = (label, ...children) =>
  el("td", { "data-label": label }, el("div", { class: "cell" }, ...children));

// Enable Previous when there is an earlier page and Next when the answer has a next token.
function renderPager(nextToken) {
  $("search-prev").disabled = search.tokens.length <= 1;
  $("search-next").disabled = !nextToken;
  $("search-next").onclick = () => {
    search.tokens.push(nextToken);
    runSearch();
  };
}

// ---------- recent searches (this browser session) ----------

// Return the remembered searches, newest first.
function recent() {
  try { return JSON.parse(sessionStorage.getItem(RECENT_KEY) ?? "[]"); } catch { return []; }
}

// Remember a search that ran, newest first, without repeats (not the search of every run).
function remember({ query, flowType, status }) {
  if (!query && !flowType && !status) return;
  const entry = { query, flowType, status };
  const key = JSON.stringify(entry);
  const list = [entry, ...recent().filter((e) => JSON.stringify(e) !== key)].slice(0, RECENT_MAX);
  try { sessionStorage.setItem(RECENT_KEY, JSON.stringify(list)); } catch { /* storage off */ }
  renderRecent();
}

// List the remembered searches as buttons that run them again, and offer their queries as
// suggestions in the query box.
function renderRecent() {
  const list = recent();
  $("recent-box").hidden = !list.length;
  $("recent-searches").replaceChildren(...list.map((entry) => {
    const text = composeQuery(entry) || "(every run)";
    const button = el("button", { type: "button", class: "small recent-search" }, text);
    button.addEventListener("click", () => {
      location.hash = searchHash({ ...entry, pageSize: $("search-size").value });
    });
    return el("li", {}, button);
  }));
  const queries = [...new Set(list.map((e) => e.query).filter(Boolean))];
  $("recent-queries").replaceChildren(...queries.map((q) => el("option", { value: q })));
}

// Wire the search form once.
export function initSearch() {
  const status = $("search-status");
  status.append(...STATUSES.map((s) => el("option", { value: s }, s)));
  $("search-size").append(...PAGE_SIZES.map((n) => el("option", { value: n }, n)));
  $("search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const params = {
      query: $("search-query").value.trim(), flowType: $("search-type").value,
      status: status.value, pageSize: $("search-size").value,
    };
    const hash = searchHash(params);
    // Searching again for what is shown reads page one afresh; the hash does not change.
    search.key = "";
    if (location.hash === hash) showSearch(params);
    else location.hash = hash;
  });
  $("search-prev").addEventListener("click", () => {
    if (search.tokens.length > 1) search.tokens.pop();
    runSearch();
  });
}
