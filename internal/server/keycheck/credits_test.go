package keycheck

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
)

// TestKeyCredits: a key with credits and no rate is admitted for its credits, then refused with
// 429 API_KEY_CREDITS_EXHAUSTED, the refill's time in the message and Retry-After to it; its
// RateLimit fields announce the credits alone.
func TestKeyCredits(t *testing.T) {
	idx, keys := testIndex(t, switchboardv1alpha1.APIKeySpec{
		Credits: &switchboardv1alpha1.APIKeyCredits{Amount: 2, Refill: switchboardv1alpha1.CreditsDaily, TimeZone: "UTC"}})
	c := testChecker(t, idx)
	admitted, exhausted := testutil.ToFloat64(chargedAdmitted), testutil.ToFloat64(chargedExhausted)
	decide := func() Verdict {
		return c.Decide(context.Background(), &Request{Authorization: bearerOf(keys[0]), Now: testNow})
	}
	// testNow is 04:00 UTC: the day refills in 20 hours.
	for i, want := range []string{`"credits";r=1;t=72000`, `"credits";r=0;t=72000`} {
		v := decide()
		policy, current, ok := v.RateLimitFields()
		if !v.Allowed() || !ok || policy != `"credits";q=2;w=86400` || current != want {
			t.Errorf("credit %d: %d %s, fields %q %q %v; want 200, %q", i+1, v.Status, v.Code, policy, current, ok, want)
		}
	}
	v := decide()
	h := http.Header{}
	v.SetRateLimitHeaders(h)
	v.SetDenialHeaders(h)
	const msg = "The key's credits for this period are spent; they refill at 2026-11-23T00:00:00Z."
	if v.Status != http.StatusTooManyRequests || v.Code != apicode.KeyCreditsExhausted || v.Message != msg ||
		h.Get("Retry-After") != "72000" || h.Get("Ratelimit") != `"credits";r=0;t=72000` {
		t.Errorf("past the credits: %d %s %q, header %v", v.Status, v.Code, v.Message, h)
	}
	if a, e := testutil.ToFloat64(chargedAdmitted)-admitted, testutil.ToFloat64(chargedExhausted)-exhausted; a != 2 || e != 1 {
		t.Errorf("switchboard_api_credits_charged_total counted %v admitted and %v exhausted, want 2 and 1", a, e)
	}
	if problems, err := testutil.CollectAndLint(creditsCharged); err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}
}

// TestKeyCreditsFailClosed: with a Redis that does not answer, a key with credits gets 503
// NOT_READY saying why, without RateLimit fields (nothing was decided), while a key with a rate
// alone is decided in memory as before.
func TestKeyCreditsFailClosed(t *testing.T) {
	idx, keys := testIndex(t,
		switchboardv1alpha1.APIKeySpec{Credits: &switchboardv1alpha1.APIKeyCredits{Amount: 2, Refill: switchboardv1alpha1.CreditsMonthly}},
		switchboardv1alpha1.APIKeySpec{RateLimit: &switchboardv1alpha1.APIKeyRateLimit{Requests: 2, Period: metav1.Duration{Duration: time.Hour}}})
	ready := &atomic.Bool{}
	ready.Store(true)
	// Port 1 on the loopback: refused at once, nothing listens there.
	c, err := New(Config{Index: idx, Ready: ready, KeyPrefix: "sb", Clock: clocktesting.NewFakePassiveClock(testNow),
		RateLimitRedis: "redis://127.0.0.1:1", RateLimitRedisTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	unavailable, admitted := testutil.ToFloat64(chargedUnavailable), testutil.ToFloat64(chargedAdmitted)
	v := c.Decide(context.Background(), &Request{Authorization: bearerOf(keys[0]), Now: testNow})
	h := http.Header{}
	v.SetRateLimitHeaders(h)
	v.SetDenialHeaders(h)
	if v.Status != http.StatusServiceUnavailable || v.Code != apicode.NotReady || v.Message != msgCreditsUnavailable ||
		h.Get("Retry-After") != "1" || h.Get("Ratelimit") != "" {
		t.Errorf("credits without Redis: %d %s %q, header %v; want 503 %s, Retry-After 1, no RateLimit", v.Status, v.Code, v.Message, h, apicode.NotReady)
	}
	if v := c.Decide(context.Background(), &Request{Authorization: bearerOf(keys[1]), Now: testNow}); !v.Allowed() {
		t.Errorf("a rate alone without Redis: %d %s, want decided in memory", v.Status, v.Code)
	}
	// The key with a rate alone has no credits to count.
	if u, a := testutil.ToFloat64(chargedUnavailable)-unavailable, testutil.ToFloat64(chargedAdmitted)-admitted; u != 1 || a != 0 {
		t.Errorf("switchboard_api_credits_charged_total counted %v unavailable and %v admitted, want 1 and 0", u, a)
	}
}
