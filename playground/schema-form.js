// A form built from a JSON Schema (an RPC's inputSchema from listFlowTypes): one field per
// property of an object, one field for a string, number, integer or boolean, none for null,
// and a JSON text box for anything else. read() returns the value the fields make.

import { el, plural } from "./lib.js";

// Resolve a local "$ref" (#/$defs/Name) against the schema's root.
function resolve(schema, root) {
  let s = schema ?? {};
  for (let hops = 0; s.$ref && hops < 10; hops++) {
    const path = String(s.$ref).replace(/^#\//, "").split("/");
    s = path.reduce((node, key) => node?.[key], root) ?? {};
  }
  return s;
}

// Unwrap "X or null" (how optional fields are written) to X, saying it may be null.
function unwrapNullable(schema, root) {
  const s = resolve(schema, root);
  const options = s.anyOf ?? s.oneOf;
  if (Array.isArray(options)) {
    const rest = options.filter((o) => resolve(o, root).type !== "null");
    if (rest.length === 1 && rest.length < options.length) {
      return { ...resolve(rest[0], root), nullable: true, description: s.description,
               default: s.default, title: s.title ?? rest[0].title };
    }
  }
  return s;
}

// Return the schema's one type name ("string", "integer", ...), or "" when it has several.
function typeName(s) {
  if (Array.isArray(s.type)) {
    const types = s.type.filter((t) => t !== "null");
    return types.length === 1 ? types[0] : "";
  }
  return s.type ?? (s.enum ? "enum" : s.properties ? "object" : "");
}

// Return a starting value for a JSON text box: the default, else an empty value of the type.
function skeleton(s, root, depth = 0) {
  if (s.default !== undefined) return s.default;
  if (s.examples?.length) return s.examples[0];
  const t = typeName(s);
  if (t === "object" && depth < 3) {
    const out = {};
    for (const key of s.required ?? []) {
      out[key] = skeleton(unwrapNullable(s.properties?.[key], root), root, depth + 1);
    }
    return out;
  }
  return { array: [], string: "", integer: 0, number: 0, boolean: false }[t] ?? null;
}

// Build one field for a scalar or complex schema; returns {node, read(), empty()}.
function field(id, labelText, s, root, { required = false } = {}) {
  const t = typeName(s);
  const label = el("label", { for: id }, labelText, " ",
                   el("span", { class: "where" }, s.enum ? "enum" : t || "JSON"));
  if (required) label.append(" ", el("span", { class: "required" }, "required"));
  const hints = [s.description,
                 s.minLength !== undefined && `at least ${plural(s.minLength, "character")}`,
                 s.maxLength !== undefined && `at most ${plural(s.maxLength, "character")}`,
                 s.minimum !== undefined && `≥ ${s.minimum}`,
                 s.maximum !== undefined && `≤ ${s.maximum}`,
                 s.nullable && "may be null"].filter(Boolean);
  let input;
  let read;
  let empty;
  if (s.enum) {
    input = el("select", { id }, ...s.enum.map((v, i) => el("option", { value: String(i) },
                                                            JSON.stringify(v))));
    if (s.default !== undefined) input.value = String(Math.max(s.enum.indexOf(s.default), 0));
    read = () => s.enum[Number(input.value)];
    empty = () => false;
  } else if (t === "boolean") {
    input = el("input", { id, type: "checkbox" });
    input.checked = Boolean(s.default);
    read = () => input.checked;
    empty = () => false;
  } else if (t === "string" || t === "integer" || t === "number") {
    input = el("input", { id, type: "text", spellcheck: "false", autocomplete: "off" });
    if (t !== "string") input.inputMode = "decimal";
    if (s.default !== undefined && s.default !== null) input.value = String(s.default);
    // A number that does not parse is sent as typed: the server's 422 says what is wrong.
    read = () => {
      if (t === "string") return input.value;
      const n = Number(input.value);
      return input.value.trim() !== "" && Number.isFinite(n) ? n : input.value;
    };
    empty = () => input.value === "";
  } else {
    input = el("textarea", { id, rows: "4", spellcheck: "false" });
    input.value = JSON.stringify(skeleton(s, root), null, 2);
    read = () => JSON.parse(input.value);  // throws on bad JSON: the form says so
    empty = () => input.value.trim() === "";
  }
  const node = el("div", { class: "field" }, label, input);
  if (hints.length) {
    input.setAttribute("aria-describedby", `${id}-help`);
    node.append(el("p", { id: `${id}-help`, class: "help" }, hints.join("; ")));
  }
  return { node, input, read, empty };
}

// Build the form of a schema under the ID prefix `prefix`. Returns {node, read, onInput}:
// read() returns the input value (throws a SyntaxError on a JSON box that does not parse).
export function schemaForm(schema, prefix) {
  const root = schema ?? {};
  const s = unwrapNullable(root, root);
  const t = typeName(s);
  if (t === "null") {
    return { node: el("p", { class: "muted" }, "This RPC takes no input (null)."),
             read: () => null, onInput: () => {} };
  }
  const props = s.properties ?? {};
  if (t === "object" && Object.keys(props).length) {
    const required = new Set(s.required ?? []);
    const fields = Object.entries(props).map(([key, sub]) => [key, field(
      `${prefix}-${key}`, key, unwrapNullable(sub, root), root, { required: required.has(key) })]);
    const node = el("div", { class: "fields" }, ...fields.map(([, f]) => f.node));
    if (s.description) node.prepend(el("p", { class: "help" }, s.description));
    // An optional field left empty is left out, so the server applies its default.
    const read = () => Object.fromEntries(fields
      .filter(([key, f]) => required.has(key) || !f.empty())
      .map(([key, f]) => [key, f.read()]));
    return { node, read, onInput: (fn) => node.addEventListener("input", fn) };
  }
  const one = field(`${prefix}-value`, "input", s, root, { required: true });
  return { node: el("div", { class: "fields" }, one.node), read: one.read,
           onInput: (fn) => one.node.addEventListener("input", fn) };
}
