package ratelimit

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// allowWithCredits is redis_rate's GCRA for one request (the same TAT, in the same key, so a key
// that gains credits keeps its rate budget) and the key's credit record (a hash: the fields of
// creditRecord), decided in one atomic run: the TAT moves and the record is charged only when
// both admit. It does what Policy.settle and Policy.take do in Go, line for line; the tests run
// both on the same cases. A second script rather than a changed first one: keys without
// credits keep redis_rate's, unchanged, and pay nothing for credits.
//
// KEYS: the TAT (seconds since 2017, as redis_rate keeps it), the credit record.
// ARGV: burst, requests, period in seconds; the schedule's kind, the period's index ("interval":
// the script reckons it from the record's anchor), an interval in ms, now (the replica's clock,
// Unix ms); amount, cap, cost; how long to keep the record beyond its period's end (ms), how
// long for its grants (ms from now), "1" to keep it forever; the period's end (Unix ms, for a
// calendar); the number of grants, then each grant's ID and amount, in the order spent.
//
// It answers {allowed by the rate, rate remaining, retry after, reset after} as redis_rate does
// (the rate's decision as if the credits had admitted), then {1 if too few credits remain,
// credits remaining, period index, anchor, period end}, then, when it charged, what it took
// from the period and from each grant.
var allowWithCredits = redis.NewScript(`
redis.replicate_commands()

local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local period = tonumber(ARGV[3])

local emission_interval = period / rate
local burst_offset = emission_interval * burst

local jan_1_2017 = 1483228800
local now = redis.call("TIME")
now = (now[1] - jan_1_2017) + (now[2] / 1000000)

local tat = redis.call("GET", KEYS[1])
if not tat then
  tat = now
else
  tat = tonumber(tat)
end
tat = math.max(tat, now)

local new_tat = tat + emission_interval
local diff = now - (new_tat - burst_offset)

local kind = ARGV[4]
local now_ms = tonumber(ARGV[7])
local amount = tonumber(ARGV[8])
local cap = tonumber(ARGV[9])
local cost = tonumber(ARGV[10])
local function int(x) return string.format("%d", x) end
local function allowance(carry) return math.min(cap, amount + carry) end

local r = redis.call("HMGET", KEYS[2], "k", "i", "s", "c", "pi", "ps", "pc", "a")
local fresh = r[1] ~= kind
local ci, cs, cc, pi, ps, pc, anchor = 0, 0, 0, 0, 0, 0, 0
if not fresh then
  ci, cs, cc = tonumber(r[2]), tonumber(r[3]), tonumber(r[4])
  pi, ps, pc = tonumber(r[5]), tonumber(r[6]), tonumber(r[7])
  anchor = tonumber(r[8])
end
local idx, end_ms
if ARGV[5] == "interval" then
  local every = tonumber(ARGV[6])
  if anchor == 0 then
    anchor = now_ms
  end
  idx = math.floor((now_ms - anchor) / every)
  end_ms = anchor + (idx + 1) * every
else
  idx = tonumber(ARGV[5])
  end_ms = tonumber(ARGV[14])
end

if fresh then
  ci, cs, cc, pi, ps, pc = idx, 0, 0, idx - 1, 0, 0
elseif idx > ci then
  local first = math.min(cap, amount + math.max(allowance(cc) - cs, 0))
  local gap = idx - ci
  if gap == 1 then
    pi, ps, pc = ci, cs, cc
  else
    pi, ps, pc = idx - 1, 0, math.min(cap, first + (gap - 2) * amount) - amount
  end
  ci, cs, cc = idx, 0, math.min(cap, first + (gap - 1) * amount) - amount
end

local target
if idx == ci then
  target = "c"
elseif idx == pi then
  target = "p"
end
local n = tonumber(ARGV[15])
local fields, left = {}, {}
local from_period, total = 0, 0
if target then
  if target == "c" then
    from_period = math.max(allowance(cc) - cs, 0)
  else
    from_period = math.max(allowance(pc) - ps, 0)
  end
  total = from_period
  if n > 0 then
    for j = 1, n do
      fields[j] = "g:" .. ARGV[14 + 2 * j]
    end
    local spent = redis.call("HMGET", KEYS[2], unpack(fields))
    for j = 1, n do
      left[j] = math.max(tonumber(ARGV[15 + 2 * j]) - tonumber(spent[j] or "0"), 0)
      total = total + left[j]
    end
  end
end

if diff < 0 then
  return {0, 0, tostring(-diff), tostring(tat - now), 0, total, idx, anchor, end_ms}
end
local reset_after = new_tat - now
if total < cost then
  return {1, diff / emission_interval, "-1", tostring(reset_after), 1, total, idx, anchor, end_ms}
end

local took = math.min(cost, from_period)
if target == "c" then
  cs = cs + took
else
  ps = ps + took
end
local reply = {1, diff / emission_interval, "-1", tostring(reset_after), 0, total - cost, idx, anchor, end_ms, took}
local due = cost - took
for j = 1, n do
  local t = math.min(due, left[j])
  if t > 0 then
    redis.call("HINCRBY", KEYS[2], fields[j], t)
    due = due - t
  end
  reply[10 + j] = t
end
redis.call("SET", KEYS[1], new_tat, "EX", math.ceil(reset_after))
redis.call("HSET", KEYS[2], "k", kind, "i", int(ci), "s", int(cs), "c", int(cc), "pi", int(pi), "ps", int(ps), "pc", int(pc), "a", int(anchor))
if redis.call("HLEN", KEYS[2]) > 8 + n then
  -- A grant removed or expired: what it had left goes with it.
  local current = {}
  for j = 1, n do
    current[fields[j]] = true
  end
  for _, f in ipairs(redis.call("HKEYS", KEYS[2])) do
    if string.sub(f, 1, 2) == "g:" and not current[f] then
      redis.call("HDEL", KEYS[2], f)
    end
  end
end
if ARGV[13] == "1" then
  redis.call("PERSIST", KEYS[2])
else
  redis.call("PEXPIRE", KEYS[2], int(math.max(end_ms - now_ms + tonumber(ARGV[11]), tonumber(ARGV[12]), 1)))
end
return reply
`)

// refundCredits gives back what a charge took, as Policy.refund does.
//
// KEYS: the credit record. ARGV: the schedule's kind, the period's index, what the charge took
// from the period, then each grant's field and what it took from it.
var refundCredits = redis.NewScript(`
local r = redis.call("HMGET", KEYS[1], "k", "i", "pi")
if r[1] ~= ARGV[1] then
  return 0
end
local function give(field, n)
  local v = redis.call("HGET", KEYS[1], field)
  if v and n > 0 then
    redis.call("HSET", KEYS[1], field, string.format("%d", math.max(tonumber(v) - n, 0)))
  end
end
local idx = tonumber(ARGV[2])
if tonumber(r[2]) == idx then
  give("s", tonumber(ARGV[3]))
elseif tonumber(r[3]) == idx then
  give("ps", tonumber(ARGV[3]))
end
for j = 4, #ARGV, 2 do
  give(ARGV[j], tonumber(ARGV[j + 1]))
end
return 1
`)

// recordFields are the credit record's fields but its grants', as the scripts name them.
var recordFields = []string{"k", "i", "s", "c", "pi", "ps", "pc", "a"}

// allowWithCredits decides one request of p's key, which has credits, in Redis.
func (r *Redis) allowWithCredits(ctx context.Context, p *Policy, cost int64) (Result, error) {
	return r.spendCredit(ctx, p, cost, r.clock.Now(), nil)
}

// spendCredit decides one request of p's key at now costing cost; at, when set, is the period
// to charge instead of now's (a test's late request).
func (r *Redis) spendCredit(ctx context.Context, p *Policy, cost int64, now time.Time, at *Period) (Result, error) {
	c := p.Credits
	extra, grantsKeep, forever := p.keepBeyond(now)
	var period Period
	index, endMs := "interval", int64(0)
	if at != nil || c.Schedule.Refill != Interval {
		period = c.Schedule.Period(now)
		if at != nil {
			period = *at
		}
		index, endMs = strconv.FormatInt(period.Index, 10), period.End.UnixMilli()
	}
	keepForever := "0"
	if forever {
		keepForever = "1"
	}
	// active maps the grants passed to the script to their place in c.Grants.
	var active [MaxGrants]int
	n := 0
	args := make([]any, 15, 15+2*len(c.Grants))
	for i, g := range c.Grants {
		if g.ExpiresAt.IsZero() || now.Before(g.ExpiresAt) {
			active[n] = i
			n++
			args = append(args, g.ID, g.Amount)
		}
	}
	copy(args, []any{p.Burst, p.Requests, p.Period.Seconds(), p.creditsKind, index, c.Schedule.Every.Milliseconds(), now.UnixMilli(),
		c.Amount, c.Cap, cost, extra.Milliseconds(), grantsKeep.Milliseconds(), keepForever, endMs, n})
	v, err := allowWithCredits.Run(ctx, r.client, []string{redisRateKeyPrefix + redisKeyPrefix + p.ID, redisKeyPrefix + p.creditsID}, args...).Slice()
	if err != nil {
		return Result{}, err
	}
	res, credits, err := parseCreditsReply(v, n)
	if err != nil {
		return Result{}, err
	}
	if index == "interval" {
		period = c.Schedule.intervalPeriod(credits.anchor, credits.index)
	}
	res = p.withCredits(res, !credits.exhausted, credits.remaining, period, now)
	if res.Allowed {
		ch := Charge{Period: credits.index, FromPeriod: credits.fromPeriod}
		for j, took := range credits.fromGrants[:n] {
			if took > 0 {
				if ch.FromGrants == nil {
					ch.FromGrants = new([MaxGrants]int64)
				}
				ch.FromGrants[active[j]] = took
			}
		}
		res.Credits.Charged = ch
	}
	return res, nil
}

// Refund gives back what ch, a charge of p's key, took: one script run.
func (r *Redis) Refund(ctx context.Context, p *Policy, ch Charge) error {
	args := []any{p.creditsKind, ch.Period, ch.FromPeriod}
	if ch.FromGrants != nil {
		for i, g := range p.Credits.Grants {
			if n := ch.FromGrants[i]; n > 0 {
				args = append(args, "g:"+g.ID, n)
			}
		}
	}
	return refundCredits.Run(ctx, r.client, []string{redisKeyPrefix + p.creditsID}, args...).Err()
}

// record reads the credit record of p's key in Redis: one HMGET.
func (r *Redis) record(ctx context.Context, p *Policy) (creditRecord, error) {
	fields := make([]string, 0, len(recordFields)+len(p.Credits.Grants))
	fields = append(fields, recordFields...)
	for _, g := range p.Credits.Grants {
		fields = append(fields, "g:"+g.ID)
	}
	v, err := r.client.HMGet(ctx, redisKeyPrefix+p.creditsID, fields...).Result()
	if err != nil {
		return creditRecord{}, err
	}
	kind, _ := v[0].(string)
	if kind == "" {
		return creditRecord{}, nil
	}
	var n [7]int64
	for i := range n {
		s, _ := v[i+1].(string)
		if n[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return creditRecord{}, fmt.Errorf("the credit record's %s is %q", recordFields[i+1], s)
		}
	}
	rec := creditRecord{kind: kind, cur: creditPeriod{n[0], n[1], n[2]}, prev: creditPeriod{n[3], n[4], n[5]}, anchor: n[6]}
	for i, g := range p.Credits.Grants {
		if s, ok := v[len(recordFields)+i].(string); ok {
			spent, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return creditRecord{}, fmt.Errorf("grant %s's count is %q", g.ID, s)
			}
			if rec.grants == nil {
				rec.grants = map[string]int64{}
			}
			rec.grants[g.ID] = spent
		}
	}
	return rec, nil
}

// creditsReply is the credits' part of the script's answer.
type creditsReply struct {
	exhausted                       bool
	remaining, index, anchor, endMs int64
	fromPeriod                      int64
	fromGrants                      [MaxGrants]int64
}

// parseCreditsReply reads the script's answer, with n grants, as redis_rate reads its own.
func parseCreditsReply(v []any, n int) (Result, creditsReply, error) {
	bad := func() (Result, creditsReply, error) {
		return Result{}, creditsReply{}, fmt.Errorf("the credits script answered %v", v)
	}
	if len(v) != 9 && len(v) != 10+n {
		return bad()
	}
	allowed, ok0 := v[0].(int64)
	remaining, ok1 := v[1].(int64)
	retry, ok2 := v[2].(string)
	reset, ok3 := v[3].(string)
	retryAfter, err1 := seconds(retry)
	resetAfter, err2 := seconds(reset)
	if !ok0 || !ok1 || !ok2 || !ok3 || err1 != nil || err2 != nil {
		return bad()
	}
	var ints [MaxGrants + 6]int64
	for i := 4; i < len(v); i++ {
		var ok bool
		if ints[i-4], ok = v[i].(int64); !ok {
			return bad()
		}
	}
	c := creditsReply{exhausted: ints[0] == 1, remaining: ints[1], index: ints[2], anchor: ints[3], endMs: ints[4], fromPeriod: ints[5]}
	copy(c.fromGrants[:], ints[6:])
	return Result{Allowed: allowed == 1, Remaining: remaining, RetryAfter: retryAfter, ResetAfter: resetAfter}, c, nil
}

// seconds parses the script's decimal seconds; -1 (none) and other negative values are 0.
func seconds(s string) (time.Duration, error) {
	f, err := strconv.ParseFloat(s, 64)
	return max(time.Duration(f*float64(time.Second)), 0), err
}
