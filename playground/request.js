// A catalog route's call as the examples view sends it: the form's values turned into exactly
// what fetch sends, and the same request written as one curl command line.

// Turn the form into exactly what fetch sends, so the curl line cannot drift from it.
export function buildRequest(route, values, bearer) {
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
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
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

// Write the request as one curl command line.
export function curlLine(req) {
  const parts = ["curl", "-i"];
  if (req.method !== "GET") parts.push("-X", req.method);
  parts.push(shellQuote(req.url));
  for (const [name, value] of Object.entries(req.headers)) {
    parts.push("-H", shellQuote(`${name}: ${value}`));
  }
  if (req.body !== undefined) parts.push("--data-raw", shellQuote(req.body));
  return parts.join(" ");
}
