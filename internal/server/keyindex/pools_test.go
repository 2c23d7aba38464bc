package keyindex

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/ratelimit"
)

func creditPool(namespace, name string, uid types.UID, amount int64) *switchboardv1alpha1.APIKeyCreditPool {
	return &switchboardv1alpha1.APIKeyCreditPool{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uid},
		Spec: switchboardv1alpha1.APIKeyCreditPoolSpec{Credits: switchboardv1alpha1.APIKeyCredits{Amount: amount, Refill: switchboardv1alpha1.CreditsDaily}}}
}

func putPool(t *testing.T, x *Index, p *switchboardv1alpha1.APIKeyCreditPool) {
	t.Helper()
	pool, err := ReadCreditPool(p)
	if err != nil {
		t.Fatal(err)
	}
	x.PutCreditPool(p.Namespace, p.Name, pool)
}

// TestCreditPools: keys naming a pool spend one count, the pool's, through a real limiter; the
// count is the pool's UID's, so a pool created again starts afresh; a pool's change publishes
// again the keys naming it; a key naming a pool that does not exist, or one of another
// namespace, has no credits (CreditPoolMissing), and gets them when the pool comes.
func TestCreditPools(t *testing.T) {
	x := New()
	limiter := ratelimit.New(ratelimit.Options{Clock: clocktesting.NewFakePassiveClock(time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC))})
	hour := &switchboardv1alpha1.APIKeyRateLimit{Requests: 100, Period: metav1.Duration{Duration: time.Hour}}
	naming := func(namespace string, uid types.UID, pool string) {
		t.Helper()
		if err := putAPIKey(x, apiKey(uid, func(k *switchboardv1alpha1.APIKey) {
			k.Namespace, k.Spec.CreditPool, k.Spec.RateLimit = namespace, pool, hour
		})); err != nil {
			t.Fatal(err)
		}
	}
	key := func(uid types.UID) *Key {
		t.Helper()
		for _, k := range x.Keys() {
			if k.UID == uid {
				return k
			}
		}
		t.Fatalf("no key %s", uid)
		return nil
	}
	admitted := func(uids ...types.UID) (n int) {
		t.Helper()
		for range 5 {
			for _, uid := range uids {
				k := key(uid)
				if k.CreditPoolMissing || k.RateLimit == nil || k.RateLimit.Credits == nil {
					t.Fatalf("key %s spends no pool: %+v", uid, k)
				}
				if limiter.Allow(context.Background(), k.RateLimit, 1).Allowed {
					n++
				}
			}
		}
		return n
	}

	naming("team-a", "k1", "gold")
	naming("team-a", "k2", "gold")
	naming("team-b", "k3", "gold") // another namespace's key, naming the same name
	if k := key("k1"); !k.CreditPoolMissing || k.CreditPool != "gold" || k.RateLimit == nil || k.RateLimit.Credits != nil {
		t.Errorf("before the pool: missing %v, policy %+v; want missing, the rate alone", k.CreditPoolMissing, k.RateLimit)
	}
	putPool(t, x, creditPool("team-a", "gold", "pool-uid-1", 4))
	if got := admitted("k1", "k2"); got != 4 {
		t.Errorf("two keys of a pool of 4, 10 attempts: %d admitted", got)
	}
	if k := key("k3"); !k.CreditPoolMissing {
		t.Error("a key of team-b spends team-a's pool")
	}
	if h := key("k1").RateLimit; !h.HasRate() || h.Requests != 100 {
		t.Errorf("the key's own rate is lost: %+v", h)
	}

	before := key("k1")
	putPool(t, x, creditPool("team-a", "gold", "pool-uid-1", 6)) // upgraded: the count is kept
	if key("k1") == before {
		t.Error("a pool's change modified the published Key instead of replacing it")
	}
	if got := admitted("k1", "k2"); got != 2 {
		t.Errorf("the pool raised from 4 to 6: %d more admitted, want 2", got)
	}

	x.DeleteCreditPool("team-a", "gold")
	if !key("k2").CreditPoolMissing {
		t.Error("after the pool's deletion the key still spends it")
	}
	putPool(t, x, creditPool("team-a", "gold", "pool-uid-2", 3)) // created again: a new UID, a new count
	if got := admitted("k1", "k2"); got != 3 {
		t.Errorf("the pool created again with 3: %d admitted", got)
	}

	putPool(t, x, creditPool("team-b", "gold", "pool-uid-b", 1))
	if got := admitted("k3"); got != 1 {
		t.Errorf("team-b's own pool of 1: %d admitted", got)
	}

	// A key that leaves the pool is published no more by the pool's changes, nor is one deleted.
	naming("team-a", "k1", "")
	x.DeleteAPIKey("k2")
	if n := len(x.pools.keys[objectRef{"team-a", "gold"}]); n != 0 {
		t.Errorf("the pool still records %d keys naming it", n)
	}
	putPool(t, x, creditPool("team-a", "gold", "pool-uid-2", 10))
	if k := key("k1"); k.CreditPoolMissing || k.RateLimit.Credits != nil {
		t.Errorf("a key that named the pool before: %+v", k)
	}
}

// TestCreditPoolReadAsAKeysCredits: a pool's credits mean what a key's do, and what the CRD
// would refuse errs the same way, the error naming the pool.
func TestCreditPoolReadAsAKeysCredits(t *testing.T) {
	p := creditPool("team-a", "gold", "pool-uid", 7)
	p.Spec.Credits.TimeZone = "Mars/Olympus"
	pool, err := ReadCreditPool(p)
	if err == nil || !strings.Contains(err.Error(), "APIKeyCreditPool team-a/gold: credits: ") {
		t.Errorf("error %v, want one naming the pool", err)
	}
	if pool == nil || pool.credits.Amount != 7 || pool.credits.Schedule.Refill != ratelimit.Monthly || pool.credits.Schedule.Zone.String() != "UTC" {
		t.Errorf("pool %+v, want 7 a month in UTC", pool)
	}
}

// TestCreditPoolBesideOwnCredits: a key written past the CRD with both spends the pool alone.
func TestCreditPoolBesideOwnCredits(t *testing.T) {
	x := New()
	putPool(t, x, creditPool("tenant", "gold", "pool-uid", 2))
	err := putAPIKey(x, apiKey("k1", func(k *switchboardv1alpha1.APIKey) {
		k.Spec.CreditPool = "gold"
		k.Spec.Credits = &switchboardv1alpha1.APIKeyCredits{Amount: 1000, Refill: switchboardv1alpha1.CreditsDaily}
	}))
	if err == nil || !strings.Contains(err.Error(), "spending the pool's credits alone") {
		t.Errorf("error %v", err)
	}
	if c := x.Keys()[0].RateLimit.Credits; c == nil || c.Amount != 2 {
		t.Errorf("credits %+v, want the pool's 2", c)
	}
}
