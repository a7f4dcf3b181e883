// What the examples view has selected and typed, shared by the catalog runner (catalog.js) and
// the Flow state panel beside it (panel.js).

import { $ } from "./lib.js";

export const state = {
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

// The hash (and map key) of one route of one example: "<exampleId>/<routeId>".
export const routeKey = (example, route) => `${example.id}/${route.id}`;

// Return the form values of a route, starting from the catalog's defaults.
export function paramValues(example, route) {
  const key = routeKey(example, route);
  if (!state.values.has(key)) {
    const defaults = {};
    for (const p of route.params ?? []) defaults[p.name] = defaultText(p);
    state.values.set(key, defaults);
  }
  return state.values.get(key);
}

// Return a param's default as the form shows it (text, or a boolean for a checkbox).
function defaultText(param) {
  const d = param.default;
  // For a JSON param, null is a value worth sending, not an absent default.
  if (param.type === "json") return d === undefined ? "" : JSON.stringify(d, null, 2);
  if (d === undefined || d === null) return param.type === "boolean" ? false : "";
  return param.type === "boolean" ? Boolean(d) : String(d);
}

// Set one param of the selected route, in the stored values and in its field.
export function setParam(name, value) {
  paramValues(state.example, state.route)[name] = value;
  const input = $(`param-${name}`);
  if (input) input.value = value;
}

// Return the Flow ID the form names (its Flow ID param, else the example's default), or "".
export function currentFlowId() {
  const { example, route } = state;
  const flow = example?.flow;
  if (!flow) return "";
  const value = paramValues(example, route)[flow.flowIdParam];
  return (typeof value === "string" && value.trim()) || flow.defaultFlowId || "";
}
