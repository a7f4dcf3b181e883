-- wrk script for the dexlite benchmarks: POSTs JSON, counts response statuses per thread,
-- and prints one "WRKJSON {...}" line when done.
--
-- BENCH_MODE=register   POST {"email", "name"} to the URL's path, unique email per request.
-- BENCH_MODE=rotate     POST BENCH_BODY to BENCH_PREFIX .. n .. BENCH_SUFFIX, where n cycles
--                       over this thread's own slice of BENCH_TARGETS targets, so concurrent
--                       connections rarely hit the same target at once.

local mode = os.getenv("BENCH_MODE") or "register"
local prefix = os.getenv("BENCH_PREFIX") or "/"
local suffix = os.getenv("BENCH_SUFFIX") or ""
local body = os.getenv("BENCH_BODY") or "{}"
local targets = tonumber(os.getenv("BENCH_TARGETS") or "1")
local thread_count = tonumber(os.getenv("BENCH_THREADS") or "1")

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

function init(args)
  local per = math.floor(targets / thread_count)
  if per < 1 then per = 1 end
  slice_size = per
  slice_start = (tid * per) % targets
end

local headers = { ["Content-Type"] = "application/json" }

function request()
  counter = counter + 1
  if mode == "register" then
    local payload = string.format('{"email":"w%d-%d@bench.example","name":"Bench %d-%d"}',
                                  tid, counter, tid, counter)
    return wrk.format("POST", nil, headers, payload)
  end
  local n = slice_start + (counter % slice_size)
  return wrk.format("POST", prefix .. n .. suffix, headers, body)
end

function response(status, hdrs, resp_body)
  statuses[status] = (statuses[status] or 0) + 1
  if mode == "register" and status == 201 then
    local seq = string.match(resp_body, '"sequence":(%d+)')
    if seq then table.insert(sequences, tonumber(seq)) end
  end
end

function done(summary, latency, requests)
  local merged = {}
  local seen = {}
  local acknowledged, distinct, duplicates, max_seq = 0, 0, 0, 0
  for _, thread in ipairs(threads) do
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
    '"sequences":{"acknowledged":%d,"distinct":%d,"duplicates":%d,"max":%d}}\n',
    summary.requests, summary.duration, ok, table.concat(parts, ","),
    e.connect + e.read + e.write + e.timeout, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    latency.mean, acknowledged, distinct, duplicates, max_seq))
end
