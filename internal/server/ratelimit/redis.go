package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"k8s.io/utils/clock"
)

// Redis keeps budgets in Redis, so that every replica of the server shares them and a limit
// holds exactly across replicas. Each decision is one script run (redis_rate's GCRA, on Redis's
// own clock, so that replicas' clocks do not matter), atomic in Redis; a key's entry expires
// once its budget is whole again.
type Redis struct {
	client  *redis.Client
	limiter *redis_rate.Limiter
	// clock chooses the period of credits (Redis's clock runs the GCRA).
	clock clock.PassiveClock
}

// RedisOptions configure the connection to Redis.
type RedisOptions struct {
	// URL is redis://[user@]host:port[/db], or rediss:// for TLS.
	URL string
	// Password, when set, replaces the URL's, so that the password can come from a Secret
	// rather than from a flag or a value anyone reading the Deployment sees.
	Password string
	// Timeout bounds each decision (dial, write, read), as the Limiter's context does.
	Timeout time.Duration
	// Logger receives go-redis's own lines (dial failures, …) at verbosity 1; the Limiter
	// writes the line that matters, rate-limited.
	Logger logr.Logger
	// Clock chooses the period of credits; the real clock when nil.
	Clock clock.PassiveClock
}

// redisKeyPrefix keeps switchboard's entries apart in a shared Redis; redis_rate adds
// redisRateKeyPrefix to a TAT's.
const (
	redisKeyPrefix     = "switchboard:"
	redisRateKeyPrefix = "rate:"
)

// NewRedis returns a store on the Redis at o.URL. It does not connect: the first decision does,
// so that a server starts, and serves with per-replica limits, while Redis is down.
func NewRedis(o RedisOptions) (*Redis, error) {
	opts, err := redis.ParseURL(o.URL)
	if err != nil {
		// net/url's errors quote the whole URL, password included: keep only what went wrong.
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		return nil, fmt.Errorf("the rate-limit Redis URL is not a redis:// or rediss:// URL: %w", err)
	}
	if o.Password != "" {
		opts.Password = o.Password
	}
	if o.Timeout <= 0 {
		return nil, fmt.Errorf("the rate-limit Redis timeout must be positive, not %s", o.Timeout)
	}
	// One attempt per decision, bounded by Timeout: a request waits for Redis that long at most
	// and then is decided in memory (Limiter). Retrying would only make it wait longer.
	opts.MaxRetries = -1
	opts.DialerRetries = 1
	opts.ContextTimeoutEnabled = true
	opts.DialTimeout = max(o.Timeout, time.Second)
	opts.ReadTimeout = o.Timeout
	opts.WriteTimeout = o.Timeout
	opts.PoolTimeout = o.Timeout
	// Neither CLIENT SETINFO nor maintenance notifications: fewer round trips on connect, and
	// nothing a plain Redis (or Valkey) answers with an error.
	opts.DisableIdentity = true
	opts.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	// go-redis has one logger for the process; switchboard has one Redis client.
	redis.SetLogger(redisLogger{o.Logger})
	client := redis.NewClient(opts)
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &Redis{client: client, limiter: redis_rate.NewLimiter(client), clock: o.Clock}, nil
}

// Allow decides one request of p's key in Redis: one script run, its credits' too.
func (r *Redis) Allow(ctx context.Context, p *Policy, cost int64) (Result, error) {
	if p.Credits != nil {
		return r.allowWithCredits(ctx, p, cost)
	}
	res, err := r.limiter.Allow(ctx, redisKeyPrefix+p.ID, redis_rate.Limit{
		Rate:   int(p.Requests),
		Burst:  int(p.Burst),
		Period: p.Period,
	})
	if err != nil {
		return Result{}, err
	}
	return Result{
		Allowed:    res.Allowed > 0,
		Remaining:  int64(res.Remaining),
		RetryAfter: max(res.RetryAfter, 0),
		ResetAfter: max(res.ResetAfter, 0),
	}, nil
}

// redisLogger hands go-redis's lines to logr, at debug verbosity: they repeat with every failed
// dial, which the Limiter already reports once.
type redisLogger struct{ log logr.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	if log := l.log.V(1); log.Enabled() {
		log.Info(fmt.Sprintf(format, v...))
	}
}

// Ping checks that Redis answers.
func (r *Redis) Ping(ctx context.Context) error { return r.client.Ping(ctx).Err() }

// Close closes the connections.
func (r *Redis) Close() error { return r.client.Close() }
