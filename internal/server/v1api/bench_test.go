package v1api

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/server/keycheck"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex/keyindextest"
)

var benchNow = time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)

// memoryHandler is the API handler over an index filled in memory: keys keys (the last one is
// returned) and conns Connections in the key's namespace, selector applied when given; its
// checker judges keys on a clock stopped at benchNow.
func memoryHandler(tb testing.TB, keys, conns int, sel *metav1.LabelSelector) (*api, string) {
	tb.Helper()
	return memoryHandlerWith(tb, keys, conns, sel, clocktesting.NewFakePassiveClock(benchNow))
}

// memoryHandlerWith is memoryHandler on clk, which also paces keys' rate limits.
func memoryHandlerWith(tb testing.TB, keys, conns int, sel *metav1.LabelSelector, clk clock.PassiveClock) (*api, string) {
	tb.Helper()
	idx := keyindex.New()
	var key string
	for i := range keys {
		var err error
		if key, err = apikey.Generate("sb"); err != nil {
			tb.Fatal(err)
		}
		uid := types.UID(fmt.Sprintf("uid-%d", i))
		ak := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: string(uid), UID: uid}}
		ak.Spec.ConnectionSelector = sel
		if err := keyindextest.PutKey(idx, ak, key); err != nil {
			tb.Fatal(err)
		}
	}
	for i := range conns {
		c := &switchboardv1alpha1.Connection{
			ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: fmt.Sprintf("c%05d", i), CreationTimestamp: metav1.NewTime(benchNow),
				Labels: map[string]string{"team": "data"}},
			Spec:   switchboardv1alpha1.ConnectionSpec{DisplayName: "Warehouse", Provider: "postgres", Metadata: map[string]switchboardv1alpha1.MetadataValue{"region": "eu-west-1"}},
			Status: switchboardv1alpha1.ConnectionStatus{ID: fmt.Sprintf("conn_%05d", i)},
		}
		setConnection(tb, idx, c)
	}
	ready := &atomic.Bool{}
	ready.Store(true)
	checker, err := keycheck.New(keycheck.Config{Index: idx, Ready: ready, KeyPrefix: "sb", Clock: clk,
		FailureRate: 1, FailureBurst: 20, FailureClients: 1024})
	if err != nil {
		tb.Fatal(err)
	}
	return &api{checker: checker, index: idx}, key
}

// setConnection puts c into idx as the server's informer would: encoded once, with its id.
func setConnection(tb testing.TB, idx *keyindex.Index, c *switchboardv1alpha1.Connection) {
	tb.Helper()
	raw, err := EncodeConnection(c)
	if err != nil {
		tb.Fatal(err)
	}
	idx.SetConnection(c.Namespace, &keyindex.Conn{ID: c.Status.ID, Name: c.Name, Labels: labels.Set(c.Labels), Encoded: raw})
}

// discardWriter is a ResponseWriter that keeps nothing but the headers.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}

// BenchmarkServeConnections measures the whole handler for GET /v1/connections: the body
// cached for the namespace (no selector) or for the key's selector, and a page, whose matching
// pre-encoded items are concatenated per request.
func BenchmarkServeConnections(b *testing.B) {
	for _, n := range []int{10, 1000} {
		for _, sel := range []*metav1.LabelSelector{nil, {MatchLabels: map[string]string{"team": "data"}}} {
			name := fmt.Sprintf("items=%d/cached", n)
			if sel != nil {
				name = fmt.Sprintf("items=%d/selector", n)
			}
			b.Run(name, func(b *testing.B) {
				h, key := memoryHandler(b, 1, n, sel)
				serve(b, h, httptest.NewRequest(http.MethodGet, "/v1/connections", nil), key)
			})
		}
	}
	b.Run("items=1000/page=100", func(b *testing.B) {
		h, key := memoryHandler(b, 1, 1000, nil)
		serve(b, h, httptest.NewRequest(http.MethodGet, "/v1/connections?limit=100", nil), key)
	})
}

func serve(b *testing.B, a *api, r *http.Request, key string) {
	r.Header.Set("Authorization", "Bearer "+key)
	w := &discardWriter{h: http.Header{}}
	h := instrument(a, logr.Discard())
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, r)
	}
}
