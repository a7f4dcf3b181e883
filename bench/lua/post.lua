-- wrk script for the dexlite benchmarks: POSTs JSON, counts response statuses per thread,
-- and prints one "WRKJSON {...}" line when done.
--
-- BENCH_MODE=register   POST {"email", "name"} to the URL's path, unique email per request.
-- BENCH_MODE=rotate     POST BENCH_BODY to BENCH_PREFIX .. n .. BENCH_SUFFIX, where n cycles
--                       over this thread's own slice of BENCH_TARGETS targets, so concurrent
--                       connections rarely hit the same target at once. BENCH_OFFSET (default
--                       0) starts each thread that far into its slice, so successive runs can
--                       go on where the last one stopped.
-- BENCH_MODE=start      POST a start of a BENCH_FLOW_TYPE Flow to the URL's path: this thread's
--                       k-th request starts Flow ID BENCH_PREFIX .. n with
--                       n = (BENCH_OFFSET + k) * threads + thread, while n < BENCH_TARGETS, and
--                       GETs /healthz after that. Each start carries the request ID "start-n"
--                       and ignoreAlreadyStarted, so a start sent again (the next run goes on
--                       from a little before where this one stopped) answers 200, no new run.

local mode = os.getenv("BENCH_MODE") or "register"
local prefix = os.getenv("BENCH_PREFIX") or "/"
local suffix = os.getenv("BENCH_SUFFIX") or ""
local body = os.getenv("BENCH_BODY") or "{}"
local targets = tonumber(os.getenv("BENCH_TARGETS") or "1")
local thread_count = tonumber(os.getenv("BENCH_THREADS") or "1")
local offset = tonumber(os.getenv("BENCH_OFFSET") or "0")
local flow_type = os.getenv("BENCH_FLOW_TYPE") or "CounterFlow"

local threads = {}
local next_tid = 0

function setup(thread)
  thread:set("tid", next_tid)
  next_tid = next_tid + 1
  table.insert(threads, thread)
end

local counter = 0
local slice_start = 0
local slice_size = 1
statuses = {}
sequences = {}
issued = 0   -- starts sent (start mode), requests made (rotate mode)
started = 0  -- start replies received (start mode)

function init(args)
  local per = math.floor(targets / thread_count)
  if per < 1 then per = 1 end
  slice_size = per
  slice_start = (tid * per) % targets
end

local headers = { ["Content-Type"] = "application/json" }

function request()
  counter = counter + 1
  if mode == "start" then
    -- wrk calls request() once on the first thread to check the script and drops what it
    -- returns: that call must not use up a Flow ID.
    if tid == 0 and counter == 1 then
      return wrk.format("GET", "/healthz")
    end
    local n = (offset + issued) * thread_count + tid
    if n >= targets then
      return wrk.format("GET", "/healthz")
    end
    issued = issued + 1
    local payload = string.format(
      '{"flowType":"%s","flowId":"%s%d","input":null,' ..
      '"options":{"requestId":"start-%d","ignoreAlreadyStarted":true}}',
      flow_type, prefix, n, n)
    return wrk.format("POST", nil, headers, payload)
  end
  if mode == "register" then
    local payload = string.format('{"email":"w%d-%d@bench.example","name":"Bench %d-%d"}',
                                  tid, counter, tid, counter)
    return wrk.format("POST", nil, headers, payload)
  end
  issued = counter
  local n = slice_start + ((offset + counter) % slice_size)
  return wrk.format("POST", prefix .. n .. suffix, headers, body)
end

function response(status, hdrs, resp_body)
  statuses[status] = (statuses[status] or 0) + 1
  if mode == "start" and string.find(resp_body, '"runId"', 1, true) then
    started = started + 1
  end
  if mode == "register" and status == 201 then
    local seq = string.match(resp_body, '"sequence":(%d+)')
    if seq then table.insert(sequences, tonumber(seq)) end
  end
end

function done(summary, latency, requests)
  local merged = {}
  local seen = {}
  local issued_by, started_by = {}, {}
  local acknowledged, distinct, duplicates, max_seq = 0, 0, 0, 0
  for _, thread in ipairs(threads) do
    table.insert(issued_by, tostring(thread:get("issued")))
    table.insert(started_by, tostring(thread:get("started")))
    local counts = thread:get("statuses")
    for status, count in pairs(counts) do
      merged[status] = (merged[status] or 0) + count
    end
    for _, seq in ipairs(thread:get("sequences")) do
      acknowledged = acknowledged + 1
      if seen[seq] then duplicates = duplicates + 1 else seen[seq] = true; distinct = distinct + 1 end
      if seq > max_seq then max_seq = seq end
    end
  end
  local parts = {}
  local ok = 0
  for status, count in pairs(merged) do
    table.insert(parts, string.format('"%d":%d', status, count))
    if status >= 200 and status < 300 then ok = ok + count end
  end
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"duration_us":%d,"ok":%d,"statuses":{%s},' ..
    '"socket_errors":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%d,' ..
    '"sequences":{"acknowledged":%d,"distinct":%d,"duplicates":%d,"max":%d},' ..
    '"issued":[%s],"started":[%s]}\n',
    summary.requests, summary.duration, ok, table.concat(parts, ","),
    e.connect + e.read + e.write + e.timeout, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    latency.mean, acknowledged, distinct, duplicates, max_seq,
    table.concat(issued_by, ","), table.concat(started_by, ",")))
end
