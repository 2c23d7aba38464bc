package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// allowWithCredits is redis_rate's GCRA for one request (the same TAT, in the same key, so a key
// that gains credits keeps its rate budget) and the count of the period's credits, decided in
// one atomic run: the TAT moves and the count grows only when both admit. It answers as
// redis_rate does, {allowed, remaining, retry after, reset after}, the rate's decision as if
// the credits had admitted, followed by the credits spent before the request; the caller
// (Policy.withCredits) turns a refusal for credits into the result. A second script rather
// than a changed first one: keys without credits keep redis_rate's, unchanged, and pay
// nothing for credits.
//
// KEYS: the TAT (seconds since 2017, as redis_rate keeps it), the period's count.
// ARGV: burst, requests, period in seconds, credits per period, when the count expires (Unix
// seconds: the period's end and creditsSlack).
var allowWithCredits = redis.NewScript(`
redis.replicate_commands()

local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local amount = tonumber(ARGV[4])

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
local spent = tonumber(redis.call("GET", KEYS[2]) or "0")

if diff < 0 then
  return {0, 0, tostring(-diff), tostring(tat - now), spent}
end

local reset_after = new_tat - now
if spent < amount then
  redis.call("SET", KEYS[1], new_tat, "EX", math.ceil(reset_after))
  if redis.call("INCR", KEYS[2]) == 1 then
    redis.call("EXPIREAT", KEYS[2], ARGV[5])
  end
end
return {1, diff / emission_interval, "-1", tostring(reset_after), spent}
`)

// allowWithCredits decides one request of p's key, which has credits, in Redis.
func (r *Redis) allowWithCredits(ctx context.Context, p *Policy) (Result, error) {
	now := r.clock.Now()
	period := p.Credits.Schedule.Period(now)
	return r.spendCredit(ctx, p, period, now)
}

// spendCredit decides one request of p's key at now against period's credits, which is the
// period of now except in tests of a late request.
func (r *Redis) spendCredit(ctx context.Context, p *Policy, period Period, now time.Time) (Result, error) {
	v, err := allowWithCredits.Run(ctx, r.client,
		[]string{redisRateKeyPrefix + redisKeyPrefix + p.ID, redisKeyPrefix + p.creditKey(period)},
		p.Burst, p.Requests, p.Period.Seconds(), p.Credits.Amount, period.End.Add(creditsSlack).Unix(),
	).Slice()
	if err != nil {
		return Result{}, err
	}
	res, spent, err := parseCreditsReply(v)
	if err != nil {
		return Result{}, err
	}
	return p.withCredits(res, spent, period, now), nil
}

// Spent reads how many of p's credits period has spent in Redis: one GET.
func (r *Redis) Spent(ctx context.Context, p *Policy, period Period) (int64, error) {
	n, err := r.client.Get(ctx, redisKeyPrefix+p.creditKey(period)).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}

// parseCreditsReply reads the script's answer as redis_rate reads its own.
func parseCreditsReply(v []any) (Result, int64, error) {
	if len(v) == 5 {
		allowed, ok0 := v[0].(int64)
		remaining, ok1 := v[1].(int64)
		retry, ok2 := v[2].(string)
		reset, ok3 := v[3].(string)
		spent, ok4 := v[4].(int64)
		retryAfter, err1 := seconds(retry)
		resetAfter, err2 := seconds(reset)
		if ok0 && ok1 && ok2 && ok3 && ok4 && err1 == nil && err2 == nil {
			return Result{Allowed: allowed == 1, Remaining: remaining, RetryAfter: retryAfter, ResetAfter: resetAfter}, spent, nil
		}
	}
	return Result{}, 0, fmt.Errorf("the credits script answered %v", v)
}

// seconds parses the script's decimal seconds; -1 (none) and other negative values are 0.
func seconds(s string) (time.Duration, error) {
	f, err := strconv.ParseFloat(s, 64)
	return max(time.Duration(f*float64(time.Second)), 0), err
}
