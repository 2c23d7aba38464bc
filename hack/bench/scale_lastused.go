package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// keepKeysInUse sends requests with every key in turn, about one round of all keys every 10
// seconds, and measures the server's lastUsedAt writes over d after a warm-up of one round.
func (r *rig) keepKeysInUse(ctx context.Context, keys []string, d time.Duration, meter *cpuMeter, res *scaleResult) error {
	const round = 10 * time.Second
	perSecond := float64(len(keys)) / round.Seconds()
	limit := rate.NewLimiter(rate.Limit(perSecond), 64)
	loadCtx, stop := context.WithCancel(ctx)
	defer stop()
	var next, sent, failed atomic.Int64
	var wg sync.WaitGroup
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 10 * time.Second}
	for range 16 {
		wg.Go(func() {
			for limit.Wait(loadCtx) == nil {
				key := keys[int(next.Add(1)-1)%len(keys)]
				req, _ := http.NewRequestWithContext(loadCtx, http.MethodGet, r.apiURL+"/v1/nothing-here", nil)
				req.Header = bearer(key)
				resp, err := hc.Do(req)
				if err != nil {
					if loadCtx.Err() == nil {
						failed.Add(1)
					}
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusNotFound { // authenticated, then no such route
					failed.Add(1)
				}
				sent.Add(1)
			}
		})
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(round + 2*time.Second):
	}
	srv0, api0, err := r.lastUsedCounters(ctx)
	if err != nil {
		return err
	}
	sent0, start, cpu0 := sent.Load(), time.Now(), meter.read()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
	}
	srv1, api1, err := r.lastUsedCounters(ctx)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	res.lastUsedCPU = meter.read().since(cpu0)
	stop()
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("%d requests with the scale keys failed or were refused", n)
	}
	const writes = "switchboard_api_last_used_writes_total"
	res.lastUsed = lastUsedRun{
		keys: len(keys), elapsed: elapsed, requests: int(sent.Load() - sent0),
		writes:    metricValue(srv1, writes, "result", "ok") - metricValue(srv0, writes, "result", "ok"),
		patches:   api1.calls["PATCH apikeys/status"] - api0.calls["PATCH apikeys/status"],
		backlog:   metricValue(srv1, "switchboard_api_last_used_backlog"),
		staleness: metricValue(srv1, "switchboard_api_last_used_staleness_seconds"),
	}
	fmt.Printf("bench: scale: %d keys in use: %.1f lastUsedAt writes/s\n", len(keys), res.lastUsed.writes/elapsed.Seconds())
	return nil
}

// lastUsedCounters reads the metrics of the rig's server and of the API server, whose changes
// over a while tell what the lastUsedAt writer did.
func (r *rig) lastUsedCounters(ctx context.Context) (map[string]*dtoFamily, apiMetrics, error) {
	srv, err := scrape(ctx, &http.Client{Timeout: 10 * time.Second}, "http://"+r.metricsAddr+"/metrics")
	if err != nil {
		return nil, apiMetrics{}, err
	}
	api, err := scrapeAPIServer(ctx, r.env.Config)
	return srv, api, err
}
