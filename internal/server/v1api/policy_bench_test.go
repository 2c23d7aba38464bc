//go:build !unit

package v1api

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/keycheck"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex/keyindextest"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// withPolicy gives the handler's key (the last of memoryHandler's) a policy.
func withPolicy(tb testing.TB, a *api, rl *switchboardv1alpha1.APIKeyRateLimit, ranges ...switchboardv1alpha1.CIDR) {
	tb.Helper()
	for _, k := range a.index.Keys() {
		if k.Name != "uid-0" {
			continue
		}
		ak := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name, UID: k.UID}}
		ak.Spec.RateLimit, ak.Spec.AllowedSourceRanges = rl, ranges
		if err := keyindextest.PutAPIKey(a.index, ak); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkServePolicy measures GET /v1/connections (10 items, cached body) for a key without a
// policy, with 4 source ranges, and with a rate limit decided in memory or in a real Redis on
// loopback. The limit (a million a second) is never reached, so every request is a 200. For
// Redis it also reports the p50 and p99 of the whole request.
func BenchmarkServePolicy(b *testing.B) {
	perSecond := &switchboardv1alpha1.APIKeyRateLimit{Requests: switchboardv1alpha1.RateLimitMaxRequests, Period: metav1.Duration{Duration: time.Second}}
	ranges := []switchboardv1alpha1.CIDR{"10.0.0.0/8", "172.16.0.0/12", "2001:db8::/32", "192.0.2.0/24"}
	b.Run("policy=none", func(b *testing.B) {
		a, key := memoryHandler(b, 1, 10, nil)
		serve(b, a, httptest.NewRequest(http.MethodGet, "/v1/connections", nil), key)
	})
	b.Run("policy=sources", func(b *testing.B) {
		a, key := memoryHandler(b, 1, 10, nil)
		withPolicy(b, a, nil, ranges...)
		serve(b, a, httptest.NewRequest(http.MethodGet, "/v1/connections", nil), key)
	})
	b.Run("policy=rate/store=memory", func(b *testing.B) {
		a, key := memoryHandlerWith(b, 1, 10, nil, clock.RealClock{})
		withPolicy(b, a, perSecond)
		serve(b, a, httptest.NewRequest(http.MethodGet, "/v1/connections", nil), key)
	})
	b.Run("policy=rate/store=redis", func(b *testing.B) {
		srv := testenv.StartRedis(b)
		a, key := memoryHandlerWith(b, 1, 10, nil, clock.RealClock{})
		ready := &atomic.Bool{}
		ready.Store(true)
		checker, err := keycheck.New(keycheck.Config{Index: a.index, Ready: ready, KeyPrefix: "sb",
			RateLimitRedis: srv.URL(), RateLimitRedisTimeout: keycheck.DefaultRedisTimeout, Logger: logr.Discard()})
		if err != nil {
			b.Fatal(err)
		}
		a.checker = checker
		withPolicy(b, a, perSecond)
		r := httptest.NewRequest(http.MethodGet, "/v1/connections", nil)
		r.Header.Set("Authorization", "Bearer "+key)
		w := &discardWriter{h: http.Header{}}
		h := instrument(a, logr.Discard())
		durations := make([]time.Duration, 0, 1<<16)
		b.ReportAllocs()
		for b.Loop() {
			clear(w.h)
			start := time.Now()
			h.ServeHTTP(w, r)
			durations = append(durations, time.Since(start))
		}
		if checker.Degraded() {
			b.Fatal("Redis failed during the benchmark: the figures are memory's")
		}
		slices.Sort(durations)
		b.ReportMetric(float64(durations[len(durations)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(durations[len(durations)*99/100].Microseconds()), "p99-µs")
	})
}
