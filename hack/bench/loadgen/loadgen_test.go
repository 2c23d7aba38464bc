package loadgen

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	r := Result{Latencies: []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}
	tests := []struct {
		q    float64
		want time.Duration
	}{{0, 1}, {0.5, 5}, {0.9, 9}, {0.99, 10}, {1, 10}}
	for _, tt := range tests {
		if got := r.Percentile(tt.q); got != tt.want {
			t.Errorf("Percentile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if (Result{}).Percentile(0.5) != 0 {
		t.Error("an empty result has no latency")
	}
}

func TestClosedLoopCountsStatuses(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		if r.Header.Get("X-Want") != "yes" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer srv.Close()
	ok, err := ClosedLoop(context.Background(), Target{URL: srv.URL, Header: http.Header{"X-Want": {"yes"}}, WantStatus: 200}, 2, 10*time.Millisecond, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if ok.Requests == 0 || ok.Errors != 0 || len(ok.Latencies) != ok.Requests || ok.RPS() <= 0 {
		t.Fatalf("unexpected result: %d ok, %d errors, %d latencies", ok.Requests, ok.Errors, len(ok.Latencies))
	}
	bad, err := ClosedLoop(context.Background(), Target{URL: srv.URL, WantStatus: 200}, 1, 0, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if bad.Requests != 0 || bad.Errors == 0 {
		t.Fatalf("401s must count as errors: %d ok, %d errors", bad.Requests, bad.Errors)
	}
}

func TestOpenLoopKeepsTheRate(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served.Add(1) }))
	defer srv.Close()
	r, err := OpenLoop(context.Background(), Target{URL: srv.URL, WantStatus: 200}, 2, 200, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// 200/s for 0.5 s is 100 requests; scheduling is exact, so only the last one or two may miss.
	if r.Requests < 95 || r.Requests > 100 || r.Errors != 0 {
		t.Fatalf("want about 100 requests at 200/s for 0.5 s, got %d (%d errors)", r.Requests, r.Errors)
	}
}

func TestOpenLoopMeasuresFromTheSchedule(t *testing.T) {
	var first atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		if first.CompareAndSwap(false, true) {
			time.Sleep(200 * time.Millisecond) // one stall delays every request queued behind it
		}
	}))
	defer srv.Close()
	r, err := OpenLoop(context.Background(), Target{URL: srv.URL, WantStatus: 200}, 1, 100, 400*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// With one connection, the ~20 of 40 requests scheduled during the stall all waited for it,
	// so measured from their schedule the upper half is slow; measured from sending, only one is.
	if p := r.Percentile(0.75); p < 50*time.Millisecond {
		t.Fatalf("the stall was hidden: p75 = %v", p)
	}
}

func TestBadArguments(t *testing.T) {
	if _, err := ClosedLoop(context.Background(), Target{URL: "http://127.0.0.1:1"}, 0, 0, time.Second); err == nil {
		t.Error("zero connections must be refused")
	}
	if _, err := OpenLoop(context.Background(), Target{URL: "http://127.0.0.1:1"}, 1, 0, time.Second); err == nil {
		t.Error("zero rate must be refused")
	}
}
