// Package loadgen drives HTTP load at a server on loopback, for switchboard's benchmarks: a
// closed loop that finds the maximum throughput, and an open loop at a fixed rate that measures
// latency from each request's intended start, so a stalled server cannot hide its stall
// (coordinated omission).
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Target is one kind of request to send.
type Target struct {
	// URL is requested with GET.
	URL string
	// Header is added to every request.
	Header http.Header
	// WantStatus is the status every response must have; others count as errors.
	WantStatus int
}

// Result summarises one run.
type Result struct {
	// Requests is the number of responses with the wanted status.
	Requests int
	// Errors counts transport errors and unexpected statuses.
	Errors int
	// Elapsed is the measured duration.
	Elapsed time.Duration
	// Latencies holds every successful request's latency, sorted.
	Latencies []time.Duration
}

// RPS is successful requests per second.
func (r Result) RPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// Percentile returns the latency at quantile q in [0, 1] (nearest rank).
func (r Result) Percentile(q float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	i := int(q*float64(len(r.Latencies)) + 0.5)
	i = min(max(i-1, 0), len(r.Latencies)-1)
	return r.Latencies[i]
}

// newClient returns a client whose connections are kept alive and reused; each worker has its
// own so that the number of connections equals the number of workers.
func newClient() *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        1,
			MaxIdleConnsPerHost: 1,
			MaxConnsPerHost:     1,
			DisableCompression:  true,
			ForceAttemptHTTP2:   false,
		},
	}
}

type worker struct {
	client    *http.Client
	req       *http.Request
	want      int
	latencies []time.Duration
	ok, bad   int
}

func newWorker(t Target) (*worker, error) {
	req, err := http.NewRequest(http.MethodGet, t.URL, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range t.Header {
		req.Header[k] = v
	}
	return &worker{client: newClient(), req: req, want: t.WantStatus}, nil
}

// do sends one request and records its latency measured from start.
func (w *worker) do(ctx context.Context, start time.Time) {
	resp, err := w.client.Do(w.req.WithContext(ctx))
	if err != nil {
		if ctx.Err() == nil {
			w.bad++
		}
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != w.want {
		w.bad++
		return
	}
	w.ok++
	w.latencies = append(w.latencies, time.Since(start))
}

// newWorkers returns n workers for t, each with its own connection.
func newWorkers(t Target, n int) ([]*worker, error) {
	workers := make([]*worker, n)
	for i := range workers {
		w, err := newWorker(t)
		if err != nil {
			return nil, err
		}
		workers[i] = w
	}
	return workers, nil
}

func collect(workers []*worker, elapsed time.Duration) Result {
	r := Result{Elapsed: elapsed}
	for _, w := range workers {
		r.Requests += w.ok
		r.Errors += w.bad
		r.Latencies = append(r.Latencies, w.latencies...)
		w.client.CloseIdleConnections()
	}
	slices.Sort(r.Latencies)
	return r
}

// drive runs loop on each of connections workers, each with its own connection, from begin, the
// instant all are ready, and collects what they measured over d.
func drive(ctx context.Context, t Target, connections int, d time.Duration, loop func(ctx context.Context, begin time.Time, i int, w *worker)) (Result, error) {
	workers, err := newWorkers(t, connections)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	begin := time.Now()
	for i, w := range workers {
		wg.Go(func() { loop(ctx, begin, i, w) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	return collect(workers, d), nil
}

// ClosedLoop sends requests back to back on the given number of keep-alive connections for d,
// after a warm-up of warm, and returns what it measured.
func ClosedLoop(ctx context.Context, t Target, connections int, warm, d time.Duration) (Result, error) {
	if connections < 1 || d <= 0 {
		return Result{}, errors.New("loadgen: connections and duration must be positive")
	}
	return drive(ctx, t, connections, d, func(ctx context.Context, begin time.Time, _ int, w *worker) {
		startAt, stopAt := begin.Add(warm), begin.Add(warm+d)
		for time.Now().Before(startAt) && ctx.Err() == nil {
			w.do(ctx, time.Now())
		}
		w.ok, w.bad, w.latencies = 0, 0, w.latencies[:0]
		for time.Now().Before(stopAt) && ctx.Err() == nil {
			w.do(ctx, time.Now())
		}
	})
}

// OpenLoop sends rate requests per second for d, spread over the given number of connections,
// each request's latency measured from the instant it was scheduled to start.
func OpenLoop(ctx context.Context, t Target, connections int, rate float64, d time.Duration) (Result, error) {
	if connections < 1 || rate <= 0 || d <= 0 {
		return Result{}, errors.New("loadgen: connections, rate and duration must be positive")
	}
	interval := time.Duration(float64(time.Second) / rate * float64(connections))
	if interval <= 0 {
		return Result{}, fmt.Errorf("loadgen: rate %.0f/s is too high for %d connections", rate, connections)
	}
	return drive(ctx, t, connections, d, func(ctx context.Context, begin time.Time, i int, w *worker) {
		// Stagger the workers so that requests arrive evenly, not in bursts of len(workers).
		offset := time.Duration(i) * interval / time.Duration(connections)
		end := begin.Add(d)
		for next := begin.Add(offset); next.Before(end) && ctx.Err() == nil; next = next.Add(interval) {
			start := next
			if wait := time.Until(next); wait > 0 {
				time.Sleep(wait)
				// The connection was free before its turn, so the server held nothing up:
				// count from when the sleep ended. Go's timers can wake up to a
				// millisecond late when the process idles, and that is the load
				// generator's delay, not the server's.
				start = time.Now()
			}
			w.do(ctx, start)
		}
	})
}
