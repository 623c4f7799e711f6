-- take: one consume step, atomically. Moves the due delayed messages of the consumer's
-- queues into their streams, reclaims (when asked) messages that dead consumers left
-- pending, then reads up to max_items new messages, the highest lane first.
--
-- KEYS[2i-1]  the delayed sorted set of (queue, lane) pair i (score: due epoch ms)
-- KEYS[2i]    the stream of pair i; pairs come ordered by lane, high lanes first
-- KEYS[2n+1..] the wake streams of the queues (only their newest id is read)
-- ARGV[1] group  ARGV[2] consumer  ARGV[3] now (epoch ms)  ARGV[4] max_items
-- ARGV[5] n, the number of pairs  ARGV[6] messages moved per set at most
-- ARGV[7] min idle ms of a pending message before it is reclaimed (0: no reclaim now)
-- ARGV[8] idle ms after which a consumer with nothing pending is removed from the group
--         (on reclaim passes only; a live one is added back by its next read)
--
-- Returns {taken, next_due, newest}:
--   taken     flat (pair index, entry id, message) triples, reclaimed ones first
--   next_due  the earliest due score still waiting in the sets, -1 if none
--   newest    only when nothing was taken: the newest entry id of every wake stream
--             ('0-0' if empty), so a blocking XREAD wakes on anything newer (new messages
--             in the streams wake a blocking XREADGROUP of one consumer instead)

local group, consumer = ARGV[1], ARGV[2]
local now, want, n = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local move_limit, min_idle, forget_idle = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local taken = {}

local function ensure_group(stream)
  local reply = redis.pcall('XGROUP', 'CREATE', stream, group, '0', 'MKSTREAM')
  if type(reply) == 'table' and reply.err and not string.find(reply.err, 'BUSYGROUP') then
    error(reply)
  end
end

-- A command on the group, creating the group first if it is missing (a new queue, or
-- Redis was flushed or restarted empty).
local function on_group(stream, ...)
  local reply = redis.pcall(...)
  if type(reply) == 'table' and reply.err then
    if not string.find(reply.err, 'NOGROUP') then error(reply) end
    ensure_group(stream)
    reply = redis.call(...)
  end
  return reply
end

local function message_of(fields)
  for j = 1, #fields, 2 do
    if fields[j] == 'm' then return fields[j + 1] end
  end
  return ''
end

local function keep(i, entries)
  for _, entry in ipairs(entries) do
    taken[#taken + 1] = i
    taken[#taken + 1] = entry[1]
    taken[#taken + 1] = message_of(entry[2])
  end
end

local function room() return want - #taken / 3 end

local next_due = -1
for i = 1, n do
  local delayed, stream = KEYS[2 * i - 1], KEYS[2 * i]
  local due = redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, move_limit)
  for _, message in ipairs(due) do
    redis.call('XADD', stream, '*', 'm', message)
  end
  if #due > 0 then redis.call('ZREM', delayed, unpack(due)) end
  local first = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')
  if first[2] then
    local score = tonumber(first[2])
    if next_due < 0 or score < next_due then next_due = score end
  end
end

-- Consumers of stopped workers would otherwise stay listed in the group for ever.
local function forget_idle_consumers(stream)
  local consumers = redis.pcall('XINFO', 'CONSUMERS', stream, group)
  if consumers.err then return end
  for _, fields in ipairs(consumers) do
    local info = {}
    for j = 1, #fields, 2 do info[fields[j]] = fields[j + 1] end
    if info['pending'] == 0 and info['idle'] > forget_idle and info['name'] ~= consumer then
      redis.call('XGROUP', 'DELCONSUMER', stream, group, info['name'])
    end
  end
end

if min_idle > 0 then
  for i = 1, n do forget_idle_consumers(KEYS[2 * i]) end
  for i = 1, n do
    if room() <= 0 then break end
    local reply = on_group(KEYS[2 * i], 'XAUTOCLAIM', KEYS[2 * i], group, consumer, min_idle, '0-0',
      'COUNT', room())
    keep(i, reply[2])
  end
end

for i = 1, n do
  if room() <= 0 then break end
  local reply = on_group(KEYS[2 * i], 'XREADGROUP', 'GROUP', group, consumer, 'COUNT', room(),
    'STREAMS', KEYS[2 * i], '>')
  if reply then keep(i, reply[1][2]) end
end

local newest = {}
if #taken == 0 then
  for j = 2 * n + 1, #KEYS do
    local last = redis.call('XREVRANGE', KEYS[j], '+', '-', 'COUNT', 1)
    newest[#newest + 1] = last[1] and last[1][1] or '0-0'
  end
end

return {taken, next_due, newest}
