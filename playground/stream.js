// The Stream follower: follows one Stream of one Flow ID live, over the Server-Sent Events route
// GET /api/v1/streams/{flowType}/{flowId}/{stream}/events, from the oldest retained message on,
// and appends each message to a list. The examples' state panel and the explorer's Flow page
// both use it.

import { el, getJSON, problemText, timeOf } from "./lib.js";

// A Stream can outgrow any page: the list keeps the newest messages only.
const STREAM_SHOWN = 200;
// Retry a refused or broken follow after this long, doubling up to the maximum.
const STREAM_RETRY_MS = 1000;
const STREAM_MAX_RETRY_MS = 15000;

// Follows one Stream of one Flow ID and appends each message to its list. Without a token it
// uses EventSource, which reconnects by itself with Last-Event-ID; EventSource cannot send an
// Authorization header, so with a token it reads the same events from a fetch body instead.
export class StreamFollower {
  // Build the follower's box (name, status line, message list); start() connects it.
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

  // Connect: EventSource without a token, a streamed fetch with one.
  start() {
    if (this.token) this.readWithFetch();
    else this.openEventSource();
  }

  // Stop following for good: close the connection and cut any backoff short.
  close() {
    this.closed = true;
    this.source?.close();
    this.controller?.abort();
    this.pause?.wake();
  }

  // Show the connection state and how many messages arrived.
  setStatus(text) {
    const shown = this.count ? ` · ${this.count} message${this.count === 1 ? "" : "s"}` : "";
    this.status.textContent = `${text}${shown}`;
  }

  // Follow with EventSource; on a refusal, read the problem and retry with backoff.
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
      this.setStatus(`${probe.ok ? "Disconnected." : problemText(probe)} Retrying…`);
      if (await this.backoff()) this.openEventSource();
    };
  }

  // Follow with fetch (to send the token), reconnecting where each response stopped.
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
          this.setStatus(`${problemText({ status: res.status, data })} Retrying…`);
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

  // Handle one event block: its data, id and retry fields.
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

  // Append one message to the list, keeping the newest STREAM_SHOWN.
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
