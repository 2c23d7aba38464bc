//go:build !unit

package server

import (
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
)

// TestCreditPools: through the real API server, two keys naming an APIKeyCreditPool of 3
// credits get 3 answers between them, then 429 API_KEY_CREDITS_EXHAUSTED; a key of another
// namespace naming a pool of that name gets nothing from it (429 saying its pool does not
// exist, Retry-After 60, as the OpenAPI document describes); a key's status.credits is the
// pool's balance, whoever spent it; the pool deleted and created again
// under the same name is a new count (its UID's), whole again.
func TestCreditPools(t *testing.T) {
	doc := loadDocument(t)
	ns, other := env.Namespace(t, "pools"), env.Namespace(t, "pools-other")
	newConnection(t, ns, "a", "conn_a", nil)
	pool := func() *switchboardv1alpha1.APIKeyCreditPool {
		return &switchboardv1alpha1.APIKeyCreditPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gold"},
			Spec: switchboardv1alpha1.APIKeyCreditPoolSpec{Credits: switchboardv1alpha1.APIKeyCredits{Amount: 3, Refill: switchboardv1alpha1.CreditsMonthly}}}
	}
	gold := pool()
	if err := env.Client.Create(ctx(t), gold); err != nil {
		t.Fatal(err)
	}
	spec := rateLimited(100, time.Hour)
	spec.CreditPool = "gold"
	k1, k2 := newKey(t, ns, "one", spec), newKey(t, ns, "two", spec)
	stranger := newKey(t, other, "stranger", spec)
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC))
	lastUsed := configv1alpha1.LastUsed{Interval: &metav1.Duration{Duration: time.Second}}
	s := startServer(t, nil, noFailureLimit(&sc{LastUsed: lastUsed}), Deps{Clock: clk, LastUsedFlush: 200 * time.Millisecond}, true)

	// Until the server knows the pool, the keys are refused for it, spending nothing.
	const policy = `"apikey";q=100;w=3600, "credits";q=3;w=2592000`
	eventually(t, "key one spends the pool", func() bool { return s.get(t, "/v1/connections", k1.Key).Status == http.StatusOK })
	eventually(t, "key two spends the pool", func() bool { return s.get(t, "/v1/connections", k2.Key).Status == http.StatusOK })
	wantLimit(t, "the 3rd credit, by key one", s.get(t, "/v1/connections", k1.Key), http.StatusOK, policy, `"apikey";r=98;t=36, "credits";r=0;t=7200`)
	for name, k := range map[string]*keyFixture{"one": k1, "two": k2} {
		resp := s.get(t, "/v1/connections", k.Key)
		if resp.Status != http.StatusTooManyRequests || resp.errorCode(t) != apicode.KeyCreditsExhausted || resp.Header.Get("Retry-After") != "7200" {
			t.Errorf("key %s past the pool: %d %s, Retry-After %q", name, resp.Status, resp.Body, resp.Header.Get("Retry-After"))
		}
	}

	// Another namespace's key naming "gold": its own namespace has no such pool.
	resp := firstAnswer(t, s, stranger.Key, nil)
	const missing = `The key's credit pool "gold" does not exist in the key's namespace, so the key has no credits to spend.`
	if resp.Status != http.StatusTooManyRequests || resp.errorCode(t) != apicode.KeyCreditsExhausted || errorMessage(t, resp) != missing || resp.Header.Get("Retry-After") != "60" {
		t.Errorf("a key of another namespace: %d %s, Retry-After %q; want 429 %q, 60", resp.Status, resp.Body, resp.Header.Get("Retry-After"), missing)
	}
	if err := doc.checkResponse("/v1/connections", "GET", resp); err != nil {
		t.Error(err)
	}

	// A third key of the pool, first used now: its status.credits is the pool's balance, all
	// spent by the two others.
	third := newKey(t, ns, "three", spec)
	if resp := firstAnswer(t, s, third.Key, nil); resp.errorCode(t) != apicode.KeyCreditsExhausted {
		t.Errorf("a third key of the spent pool: %d %s", resp.Status, resp.Body)
	}
	eventually(t, "the third key's status.credits to show the pool's balance", func() bool {
		var ak switchboardv1alpha1.APIKey
		if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(third.APIKey), &ak); err != nil {
			t.Fatal(err)
		}
		c := ak.Status.Credits
		return c != nil && c.Used == 3 && c.Remaining == 0 && c.PeriodEnd.Time.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	})

	// Deleted and created again under the same name: a new UID, a whole new count.
	if err := env.Client.Delete(ctx(t), gold); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pool's deletion followed", func() bool { return errorMessage(t, s.get(t, "/v1/connections", k1.Key)) == missing })
	if err := env.Client.Create(ctx(t), pool()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pool created again is whole", func() bool { return s.get(t, "/v1/connections", k2.Key).Status == http.StatusOK })
}
