/**
 * Contract test: a TypeScript client generated from the committed openapi.json drives a live
 * dexlite server.
 *
 * `schema.d.ts` is generated next to this file by openapi-typescript on every run (it is not
 * committed), then `tsc --strict` checks this file against it, and Node's test runner runs it
 * against the server named by DEXLITE_URL. The checks are in the types as much as in the
 * assertions: every call destructures `{ data, error, response }`, and the error branch reads
 * `error.code` (and `lockKey`, `position`, `errors[].location`, ...) without a cast, so the
 * document must describe every error response as the Problem schema for this file to compile.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import createClient from "openapi-fetch";

import type { components, paths } from "./schema.js";

type Problem = components["schemas"]["Problem"];
type ValidationErrorItem = components["schemas"]["ValidationErrorItem"];

const baseUrl = process.env["DEXLITE_URL"];
if (!baseUrl) {
  throw new Error("DEXLITE_URL must name the server under test, e.g. http://127.0.0.1:8000");
}

const client = createClient<paths>({ baseUrl });

/** A prefix unique to this run, so the Flow IDs never collide with an earlier run's. */
const RUN = `contract-${randomUUID().slice(0, 8)}`;

/** Return a Flow ID unique to this run. */
function flowIdFor(name: string): string {
  return `${RUN}-${name}`;
}

/** Fail the test with the Problem the server answered where a success was expected. */
function unexpected(call: string, response: Response, error: Problem): never {
  assert.fail(`${call} answered ${response.status} ${error.code}: ${error.detail}`);
}

/** Assert that a failed call answered `status` with an application/problem+json body. */
function assertProblemResponse(response: Response, status: number, problem: Problem): void {
  assert.equal(response.status, status, `expected ${status}, got ${JSON.stringify(problem)}`);
  assert.equal(problem.status, status);
  assert.match(response.headers.get("content-type") ?? "", /^application\/problem\+json/);
  assert.ok(problem.type.length > 0 && problem.title.length > 0 && problem.detail.length > 0);
}

/** Call `attempt` every 50 ms until it returns a value; fail after `seconds`. */
async function until<T>(
  what: string,
  seconds: number,
  attempt: () => Promise<T | undefined>,
): Promise<T> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const value = await attempt();
    if (value !== undefined) {
      return value;
    }
    if (Date.now() > deadline) {
      assert.fail(`${what} did not happen within ${seconds} s`);
    }
    await sleep(50);
  }
}

/** Start a CounterFlow through the engine API with the counter at 0; return its run ID. */
async function startCounter(flowId: string): Promise<string> {
  const { data, error, response } = await client.POST("/api/v1/flows", {
    body: {
      flowType: "CounterFlow",
      flowId,
      options: {
        initialAttributes: { counter: 0 },
        // Only one option: the others are optional (the document states request defaults in
        // words, so openapi-typescript does not make them required).
        idReusePolicy: "REJECT_DUPLICATE",
      },
    },
  });
  if (error) {
    unexpected("startFlow", response, error);
  }
  assert.equal(response.status, 201);
  assert.equal(data.flowId, flowId);
  assert.equal(data.started, true);
  return data.runId;
}

/** Invoke `rpcName` on `flowId` through the engine API and return its output. */
async function invoke(flowId: string, rpcName: string, input?: number): Promise<unknown> {
  const { data, error, response } = await client.POST("/api/v1/flows/{flowId}/rpcs/{rpcName}", {
    params: { path: { flowId, rpcName } },
    ...(input === undefined ? {} : { body: { input } }),
  });
  if (error) {
    unexpected(`invokeRpc ${rpcName}`, response, error);
  }
  assert.equal(response.status, 200);
  return data.output;
}

describe("the Sequentially Chunked AttributeMap pattern", () => {
  const base = "/patterns/sequentially-chunked-attribute-map";

  test("three registrations are listed newest first on one page", async () => {
    const flowId = flowIdFor("subscribers");
    const query = { flowId };

    const started = await client.POST(`${base}/start`, { params: { query } });
    if (started.error) {
      unexpected("startChunkedSubscriberFlow", started.response, started.error);
    }
    assert.equal(started.response.status, 201);
    assert.equal(started.data.flowId, flowId);
    assert.equal(started.data.started, true);

    const again = await client.POST(`${base}/start`, { params: { query } });
    if (again.error) {
      unexpected("startChunkedSubscriberFlow", again.response, again.error);
    }
    assert.equal(again.response.status, 200);
    assert.equal(again.data.started, false);
    assert.equal(again.data.runId, started.data.runId);

    const people = [
      { email: "ada@example.com", name: "Ada" },
      { email: "grace@example.com", name: "Grace" },
      { email: "edsger@example.com", name: "Edsger" },
    ];
    for (const [index, person] of people.entries()) {
      const { data, error, response } = await client.POST(`${base}/register`, {
        params: { query },
        body: person,
      });
      if (error) {
        unexpected("registerSubscriber", response, error);
      }
      assert.equal(response.status, 201);
      assert.equal(data.sequence, index + 1);
      assert.equal(data.email, person.email);
      assert.equal(data.name, person.name);
      assert.ok(!Number.isNaN(Date.parse(data.registeredAt)), data.registeredAt);
    }

    const { data, error, response } = await client.GET(`${base}/subscribers`, {
      params: { query },
    });
    if (error) {
      unexpected("listSubscribers", response, error);
    }
    assert.deepEqual(
      data.subscribers.map((record) => [record.sequence, record.email, record.name]),
      [
        [3, "edsger@example.com", "Edsger"],
        [2, "grace@example.com", "Grace"],
        [1, "ada@example.com", "Ada"],
      ],
    );
    assert.equal(data.nextPageToken, "");

    const current = await client.GET(`${base}/subscribers`, {
      params: { query: { flowId, pageToken: "current" } },
    });
    if (current.error) {
      unexpected("listSubscribers", current.response, current.error);
    }
    assert.deepEqual(current.data, data);
  });

  test("a full chunk is archived and the pages follow nextPageToken to the oldest", async () => {
    const flowId = flowIdFor("chunks");
    const query = { flowId };
    const started = await client.POST(`${base}/start`, { params: { query } });
    if (started.error) {
      unexpected("startChunkedSubscriberFlow", started.response, started.error);
    }
    const total = 101; // one full archived chunk of 100, and one record in `current`
    for (let sequence = 1; sequence <= total; sequence++) {
      const { data, error, response } = await client.POST(`${base}/register`, {
        params: { query },
        body: { email: `user${sequence}@example.com`, name: `User ${sequence}` },
      });
      if (error) {
        unexpected("registerSubscriber", response, error);
      }
      assert.equal(data.sequence, sequence);
    }

    const tokens: string[] = [];
    const sequences: number[] = [];
    let pageToken = "current";
    while (pageToken !== "") {
      assert.ok(tokens.length < 5, `too many pages: ${tokens.join(", ")}`);
      tokens.push(pageToken);
      const { data, error, response } = await client.GET(`${base}/subscribers`, {
        params: { query: { flowId, pageToken } },
      });
      if (error) {
        unexpected("listSubscribers", response, error);
      }
      sequences.push(...data.subscribers.map((record) => record.sequence));
      pageToken = data.nextPageToken;
    }
    assert.deepEqual(tokens, ["current", "00000000000000000001"]);
    assert.deepEqual(
      sequences,
      Array.from({ length: total }, (_, index) => total - index),
    );
  });

  test("errors are typed Problems", async () => {
    const flowId = flowIdFor("subscriber-errors");
    const notStarted = await client.POST(`${base}/register`, {
      params: { query: { flowId } },
      body: { email: "ada@example.com", name: "Ada" },
    });
    assert.ok(notStarted.error, "registerSubscriber before start must fail");
    assertProblemResponse(notStarted.response, 404, notStarted.error);
    assert.equal(notStarted.error.code, "FLOW_NOT_ACTIVE_OR_NOT_FOUND");
    assert.equal(notStarted.error.flowId, flowId);

    const started = await client.POST(`${base}/start`, { params: { query: { flowId } } });
    if (started.error) {
      unexpected("startChunkedSubscriberFlow", started.response, started.error);
    }

    const badEmail = await client.POST(`${base}/register`, {
      params: { query: { flowId } },
      body: { email: "not-an-email", name: "Ada" },
    });
    assert.ok(badEmail.error, "registerSubscriber with a bad email must fail");
    assertProblemResponse(badEmail.response, 422, badEmail.error);
    assert.equal(badEmail.error.code, "VALIDATION_ERROR");
    const items: ValidationErrorItem[] = badEmail.error.errors ?? [];
    assert.deepEqual(
      items.map((item) => item.location),
      ["body.email"],
    );

    const malformed = await client.GET(`${base}/subscribers`, {
      params: { query: { flowId, pageToken: "garbage" } },
    });
    assert.ok(malformed.error, "a malformed page token must fail");
    assertProblemResponse(malformed.response, 400, malformed.error);
    assert.equal(malformed.error.code, "INVALID_PAGE_TOKEN");
    assert.equal(malformed.error.field, "pageToken");

    const missing = await client.GET(`${base}/subscribers`, {
      params: { query: { flowId, pageToken: "00000000000000000101" } },
    });
    assert.ok(missing.error, "a page token with no stored chunk must fail");
    assertProblemResponse(missing.response, 404, missing.error);
    assert.equal(missing.error.code, "PAGE_NOT_FOUND");
  });
});

describe("the engine API", () => {
  test("health and readiness", async () => {
    // healthz documents no error response, so `error` is never set there.
    const { data, error, response } = await client.GET("/healthz");
    if (error) {
      unexpected("health", response, error);
    }
    assert.equal(response.status, 200);
    assert.equal(data.status, "ok");

    const ready = await client.GET("/readyz");
    if (ready.error) {
      unexpected("ready", ready.response, ready.error);
    }
    assert.equal(ready.response.status, 200);
    assert.equal(typeof ready.data.status, "string");
  });

  test("a Schedule: create, describe, trigger, a conflict, delete", async () => {
    const scheduleId = flowIdFor("schedule");
    const body = { scheduleId, flowType: "CounterFlow", everySeconds: 3600 };
    const created = await client.POST("/api/v1/schedules", { body });
    if (created.error) {
      unexpected("createSchedule", created.response, created.error);
    }
    assert.equal(created.response.status, 201);
    assert.equal(created.data.overlap, "SKIP");
    assert.equal(created.data.nextActionTimes.length, 5);

    const again = await client.POST("/api/v1/schedules", { body });
    assert.ok(again.error, "a second create must fail");
    assert.equal(again.error.code, "SCHEDULE_ALREADY_EXISTS");

    const path = { params: { path: { scheduleId } } };
    const triggered = await client.POST("/api/v1/schedules/{scheduleId}/trigger", path);
    if (triggered.error) {
      unexpected("triggerSchedule", triggered.response, triggered.error);
    }
    assert.equal(triggered.data.started, true);
    assert.ok(triggered.data.flowId.startsWith(`${scheduleId}-`), triggered.data.flowId);

    const described = await client.GET("/api/v1/schedules/{scheduleId}", path);
    if (described.error) {
      unexpected("describeSchedule", described.response, described.error);
    }
    assert.deepEqual(described.data.running, [triggered.data.flowId]);

    const deleted = await client.DELETE("/api/v1/schedules/{scheduleId}", path);
    assert.equal(deleted.response.status, 204);
    const gone = await client.GET("/api/v1/schedules/{scheduleId}", path);
    assert.ok(gone.error, "a deleted Schedule must be gone");
    assert.equal(gone.error.code, "SCHEDULE_NOT_FOUND");
  });

  test("listFlowTypes names the bundled examples and their RPCs", async () => {
    const { data, error, response } = await client.GET("/api/v1/flow-types");
    if (error) {
      unexpected("listFlowTypes", response, error);
    }
    const names = data.flowTypes.map((flowType) => flowType.flowType);
    assert.ok(names.includes("ChunkedSubscriberFlow"), names.join(", "));
    const counter = data.flowTypes.find((flowType) => flowType.flowType === "CounterFlow");
    assert.ok(counter, `no CounterFlow among ${names.join(", ")}`);
    assert.equal(counter.startStep, null);
    const rpcs = new Map(counter.rpcs.map((rpc) => [rpc.name, rpc]));
    for (const name of ["increment", "read_counter", "hold_counter_lock", "finish"]) {
      assert.ok(rpcs.has(name), `CounterFlow has no RPC ${name}`);
    }
    const increment = rpcs.get("increment");
    assert.ok(increment);
    assert.equal(increment.inputSchema["type"], "integer");
    assert.ok(increment.lockAttributes.length > 0, "increment locks the counter");
    assert.deepEqual(rpcs.get("read_counter")?.lockAttributes, []);
  });

  test("a CounterFlow: start, describe, RPCs, attributes, history, result, stop", async () => {
    const flowId = flowIdFor("counter");
    const runId = await startCounter(flowId);

    const described = await client.GET("/api/v1/flows/{flowId}", {
      params: { path: { flowId } },
    });
    if (described.error) {
      unexpected("describeFlow", described.response, described.error);
    }
    assert.equal(described.data.flowId, flowId);
    assert.equal(described.data.runId, runId);
    assert.equal(described.data.flowType, "CounterFlow");
    assert.equal(described.data.status, "RUNNING");
    assert.equal(described.data.closedAt, null);
    assert.equal(described.data.parentFlowId, null);
    assert.equal(described.data.parentRunId, null);
    assert.ok(!Number.isNaN(Date.parse(described.data.startedAt)));

    assert.equal(await invoke(flowId, "increment", 2), 2);
    assert.equal(await invoke(flowId, "increment", 3), 5);
    assert.equal(await invoke(flowId, "read_counter"), 5);

    const attributes = await client.GET("/api/v1/flows/{flowId}/attributes", {
      params: { path: { flowId }, query: { name: ["counter"] } },
    });
    if (attributes.error) {
      unexpected("getAttributes", attributes.response, attributes.error);
    }
    assert.equal(attributes.data.runId, runId);
    assert.deepEqual(attributes.data.values, { counter: 5 });

    const unknownName = await client.GET("/api/v1/flows/{flowId}/attributes", {
      params: { path: { flowId }, query: { name: ["counter", "no_such_attribute"], runId } },
    });
    assert.ok(unknownName.error, "an unknown Attribute name must fail");
    assertProblemResponse(unknownName.response, 400, unknownName.error);
    assert.equal(unknownName.error.code, "INVALID_ARGUMENT");

    // History, one event a page, following nextPageToken.
    const events: { eventId: number; eventType: string }[] = [];
    let pageToken = "";
    for (let page = 0; ; page++) {
      assert.ok(page < 10, "history paging did not end");
      const { data, error, response } = await client.GET("/api/v1/flows/{flowId}/history", {
        params: { path: { flowId }, query: { pageSize: 1, pageToken } },
      });
      if (error) {
        unexpected("getFlowHistory", response, error);
      }
      assert.equal(data.runId, runId);
      assert.ok(data.events.length <= 1);
      events.push(...data.events.map(({ eventId, eventType }) => ({ eventId, eventType })));
      if (data.nextPageToken === "") {
        break;
      }
      pageToken = data.nextPageToken;
    }
    assert.deepEqual(
      events.map((event) => event.eventType),
      ["FLOW_STARTED", "RPC_COMMITTED", "RPC_COMMITTED"],
    );
    const ids = events.map((event) => event.eventId);
    assert.deepEqual(ids, [...ids].sort((a, b) => a - b));

    const running = await client.GET("/api/v1/flows/{flowId}/result", {
      params: { path: { flowId }, query: { waitSeconds: 0 } },
    });
    if (running.error) {
      unexpected("waitForFlow", running.response, running.error);
    }
    assert.equal(running.data.status, "RUNNING");
    assert.deepEqual(running.data.completions, []);

    const stopped = await client.POST("/api/v1/flows/{flowId}/stop", {
      params: { path: { flowId } },
      body: { type: "CANCEL", reason: "the contract test is done with it" },
    });
    if (stopped.error) {
      unexpected("stopFlow", stopped.response, stopped.error);
    }
    assert.equal(stopped.response.status, 202);
    assert.equal(stopped.data.flowId, flowId);
    assert.equal(stopped.data.runId, runId);

    const closed = await client.GET("/api/v1/flows/{flowId}/result", {
      params: { path: { flowId }, query: { waitSeconds: 10 } },
    });
    if (closed.error) {
      unexpected("waitForFlow", closed.response, closed.error);
    }
    assert.equal(closed.data.runId, runId);
    assert.equal(closed.data.status, "CANCELED");
    assert.equal(closed.data.errorMessage, "the contract test is done with it");

    // A locked RPC needs an active run; the read-only read_counter still answers.
    const afterStop = await client.POST("/api/v1/flows/{flowId}/rpcs/{rpcName}", {
      params: { path: { flowId, rpcName: "increment" } },
      body: { input: 1 },
    });
    assert.ok(afterStop.error, "increment on a stopped Flow must fail");
    assertProblemResponse(afterStop.response, 404, afterStop.error);
    assert.equal(afterStop.error.code, "FLOW_NOT_ACTIVE_OR_NOT_FOUND");
    assert.equal(afterStop.error.flowId, flowId);
    assert.equal(await invoke(flowId, "read_counter"), 5);

    const stopAgain = await client.POST("/api/v1/flows/{flowId}/stop", {
      params: { path: { flowId } },
    });
    assert.ok(stopAgain.error, "stopping a closed Flow must fail");
    assertProblemResponse(stopAgain.response, 404, stopAgain.error);
    assert.equal(stopAgain.error.code, "FLOW_NOT_ACTIVE_OR_NOT_FOUND");
  });

  test("finish completes a CounterFlow with its count", async () => {
    const flowId = flowIdFor("finish");
    const runId = await startCounter(flowId);
    assert.equal(await invoke(flowId, "increment", 7), 7);
    assert.equal(await invoke(flowId, "finish"), runId);

    const { data, error, response } = await client.GET("/api/v1/flows/{flowId}/result", {
      params: { path: { flowId }, query: { runId, waitSeconds: 30 } },
    });
    if (error) {
      unexpected("waitForFlow", response, error);
    }
    assert.equal(data.status, "COMPLETED");
    assert.deepEqual(
      data.completions.map((completion) => [completion.stepType, completion.output]),
      [["FinishCounting", 7]],
    );
    assert.equal(data.errorType, null);
  });

  test("searchFlows filters, orders and pages", async () => {
    const prefix = flowIdFor("search-");
    const flowIds = [`${prefix}a`, `${prefix}b`, `${prefix}c`];
    for (const flowId of flowIds) {
      await startCounter(flowId);
    }
    const query =
      `FlowType = 'CounterFlow' AND FlowId STARTS_WITH '${prefix}' ORDER BY FlowId DESC`;
    const found: string[] = [];
    let pageToken = "";
    for (let page = 0; ; page++) {
      assert.ok(page < 10, "search paging did not end");
      const { data, error, response } = await client.GET("/api/v1/flows", {
        params: { query: { query, pageSize: 2, pageToken } },
      });
      if (error) {
        unexpected("searchFlows", response, error);
      }
      assert.ok(data.flows.length <= 2);
      for (const flow of data.flows) {
        assert.equal(flow.flowType, "CounterFlow");
        assert.equal(flow.status, "RUNNING");
        found.push(flow.flowId);
      }
      if (data.nextPageToken === "") {
        break;
      }
      pageToken = data.nextPageToken;
    }
    assert.deepEqual(found, [...flowIds].reverse());
  });
});

describe("engine API errors are typed Problems", () => {
  test("describeFlow of an unknown Flow is 404 FLOW_NOT_FOUND", async () => {
    const flowId = flowIdFor("never-started");
    const { data, error, response } = await client.GET("/api/v1/flows/{flowId}", {
      params: { path: { flowId } },
    });
    assert.equal(data, undefined);
    assert.ok(error, "describeFlow of an unknown Flow must fail");
    assertProblemResponse(response, 404, error);
    assert.equal(error.code, "FLOW_NOT_FOUND");
    assert.equal(error.flowId, flowId);
  });

  test("reads of an unknown Flow are 404 FLOW_NOT_FOUND", async () => {
    const flowId = flowIdFor("never-started");
    const path = { flowId };
    const attributes = await client.GET("/api/v1/flows/{flowId}/attributes", {
      params: { path, query: { name: ["counter"] } },
    });
    assert.ok(attributes.error, "getAttributes of an unknown Flow must fail");
    assertProblemResponse(attributes.response, 404, attributes.error);
    assert.equal(attributes.error.code, "FLOW_NOT_FOUND");

    const history = await client.GET("/api/v1/flows/{flowId}/history", { params: { path } });
    assert.ok(history.error, "getFlowHistory of an unknown Flow must fail");
    assertProblemResponse(history.response, 404, history.error);
    assert.equal(history.error.code, "FLOW_NOT_FOUND");

    const result = await client.GET("/api/v1/flows/{flowId}/result", {
      params: { path, query: { waitSeconds: 0 } },
    });
    assert.ok(result.error, "waitForFlow of an unknown Flow must fail");
    assertProblemResponse(result.response, 404, result.error);
    assert.equal(result.error.code, "FLOW_NOT_FOUND");
  });

  test("startFlow of an unknown Flow type is 404 FLOW_TYPE_NOT_FOUND", async () => {
    const { error, response } = await client.POST("/api/v1/flows", {
      body: { flowType: "NoSuchFlowType", flowId: flowIdFor("no-such-type") },
    });
    assert.ok(error, "startFlow of an unknown type must fail");
    assertProblemResponse(response, 404, error);
    assert.equal(error.code, "FLOW_TYPE_NOT_FOUND");
  });

  test("a second start under REJECT_DUPLICATE is 409 FLOW_ALREADY_STARTED", async () => {
    const flowId = flowIdFor("duplicate");
    const runId = await startCounter(flowId);
    const { error, response } = await client.POST("/api/v1/flows", {
      body: {
        flowType: "CounterFlow",
        flowId,
        options: { idReusePolicy: "REJECT_DUPLICATE" },
      },
    });
    assert.ok(error, "a duplicate start must fail");
    assertProblemResponse(response, 409, error);
    assert.equal(error.code, "FLOW_ALREADY_STARTED");
    assert.equal(error.flowId, flowId);
    assert.equal(error.runId, runId);
  });

  test("startFlow without flowType is 422 VALIDATION_ERROR", async () => {
    const { error, response } = await client.POST("/api/v1/flows", {
      // The generated type requires flowType: this line must not compile without the directive.
      // @ts-expect-error flowType is missing on purpose
      body: { flowId: flowIdFor("no-type") },
    });
    assert.ok(error, "a body without flowType must fail");
    assertProblemResponse(response, 422, error);
    assert.equal(error.code, "VALIDATION_ERROR");
    const items: ValidationErrorItem[] = error.errors ?? [];
    assert.ok(items.length > 0, "a validation Problem lists its errors");
    for (const item of items) {
      assert.equal(typeof item.location, "string");
      assert.equal(typeof item.message, "string");
      assert.equal(typeof item.type, "string");
    }
    assert.ok(
      items.some((item) => item.location === "body.flowType"),
      JSON.stringify(items),
    );
  });

  test("invokeRpc of an unknown RPC is 404 RPC_NOT_FOUND", async () => {
    const flowId = flowIdFor("unknown-rpc");
    await startCounter(flowId);
    const { error, response } = await client.POST("/api/v1/flows/{flowId}/rpcs/{rpcName}", {
      params: { path: { flowId, rpcName: "no_such_rpc" } },
      body: { input: 1 },
    });
    assert.ok(error, "an unknown RPC must fail");
    assertProblemResponse(response, 404, error);
    assert.equal(error.code, "RPC_NOT_FOUND");
  });

  test("searchFlows with a bad query is 400 INVALID_QUERY with its position", async () => {
    const { error, response } = await client.GET("/api/v1/flows", {
      params: { query: { query: "FlowType = = 'CounterFlow'" } },
    });
    assert.ok(error, "a bad query must fail");
    assertProblemResponse(response, 400, error);
    assert.equal(error.code, "INVALID_QUERY");
    assert.equal(error.field, "query");
    assert.equal(typeof error.position, "number");
  });

  test("searchFlows with a garbage page token is 400 INVALID_PAGE_TOKEN", async () => {
    const { error, response } = await client.GET("/api/v1/flows", {
      params: { query: { pageToken: "garbage" } },
    });
    assert.ok(error, "a garbage page token must fail");
    assertProblemResponse(response, 400, error);
    assert.equal(error.code, "INVALID_PAGE_TOKEN");
    assert.equal(error.field, "pageToken");
  });

  test("an out-of-range history pageSize is 400 INVALID_ARGUMENT", async () => {
    const flowId = flowIdFor("history-page-size");
    await startCounter(flowId);
    const { error, response } = await client.GET("/api/v1/flows/{flowId}/history", {
      params: { path: { flowId }, query: { pageSize: 0 } },
    });
    assert.ok(error, "pageSize 0 must fail");
    assertProblemResponse(response, 400, error);
    assert.equal(error.code, "INVALID_ARGUMENT");
  });
});

describe("the RPC primitive's lock", () => {
  test("increment while HoldCounterLock holds the lock is 409 RPC_LOCK_CONFLICT", async () => {
    const flowId = flowIdFor("lock");
    const query = { flowId };
    const started = await client.POST("/primitives/rpc/start", { params: { query } });
    if (started.error) {
      unexpected("startCounterFlow", started.response, started.error);
    }
    assert.equal(started.response.status, 201);

    const hold = await client.POST("/primitives/rpc/hold", {
      params: { query },
      body: { seconds: 15 },
    });
    if (hold.error) {
      unexpected("holdCounterLock", hold.response, hold.error);
    }
    assert.equal(hold.data.seconds, 15);

    // The Step takes the lock once a worker claims it: increments succeed until then.
    const conflict = await until("an increment conflicting with the hold", 10, async () => {
      const { error, response } = await client.POST("/api/v1/flows/{flowId}/rpcs/{rpcName}", {
        params: { path: { flowId, rpcName: "increment" } },
        body: { input: 1 },
      });
      if (!error) {
        return undefined;
      }
      if (response.status !== 409) {
        unexpected("invokeRpc increment", response, error);
      }
      return { error, response };
    });
    assertProblemResponse(conflict.response, 409, conflict.error);
    assert.equal(conflict.error.code, "RPC_LOCK_CONFLICT");
    assert.equal(conflict.error.flowId, flowId);
    assert.equal(conflict.error.lockKey, "counter");
    const retryAfter = conflict.response.headers.get("retry-after");
    assert.ok(retryAfter !== null && /^\d+$/.test(retryAfter), `Retry-After: ${retryAfter}`);
    assert.ok(Number(retryAfter) >= 1);

    // The example's own route does not retry either: the conflict reaches the caller.
    const routed = await client.POST("/primitives/rpc/increment", {
      params: { query },
      body: { by: 1 },
    });
    assert.ok(routed.error, "incrementCounter while the lock is held must fail");
    assertProblemResponse(routed.response, 409, routed.error);
    assert.equal(routed.error.code, "RPC_LOCK_CONFLICT");
    assert.equal(routed.error.lockKey, "counter");
    assert.match(routed.response.headers.get("retry-after") ?? "", /^\d+$/);

    // A read takes no lock, so it answers during the hold.
    const read = await client.GET("/primitives/rpc/counter", { params: { query } });
    if (read.error) {
      unexpected("readCounter", read.response, read.error);
    }
    assert.equal(typeof read.data.counter, "number");

    const stopped = await client.POST("/api/v1/flows/{flowId}/stop", {
      params: { path: { flowId } },
      body: { type: "TERMINATE", reason: "lock conflict seen" },
    });
    if (stopped.error) {
      unexpected("stopFlow", stopped.response, stopped.error);
    }
    assert.equal(stopped.response.status, 202);
  });
});
