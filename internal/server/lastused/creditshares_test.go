package lastused

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex/keyindextest"
	"github.com/switchboard-dev/switchboard/internal/server/ratelimit"
)

// TestCreditKeysGauge: switchboard_api_credit_keys counts the keys whose balance the writer
// wrote by the share of their period used, one series per share whatever the number of keys;
// a key without credits is not counted, a key whose period ended is not either (until a balance
// of its new period is written), and neither is a key gone from the index.
func TestCreditKeysGauge(t *testing.T) {
	now := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	end := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	used := map[string]int64{"idle": 0, "half": 50, "most": 85, "nearly": 95, "all": 100, "more": 10}
	idx := keyindex.New()
	for _, name := range []string{"idle", "half", "most", "nearly", "all", "more", "plain"} {
		ak := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
		if name != "plain" {
			ak.Spec.Credits = &switchboardv1alpha1.APIKeyCredits{Amount: 100, Refill: switchboardv1alpha1.CreditsMonthly}
		}
		if err := keyindextest.PutAPIKey(idx, ak); err != nil {
			t.Fatal(err)
		}
	}
	clock := clocktesting.NewFakePassiveClock(now)
	w := testWriter(now, 1000)
	w.index, w.clock = idx, clock
	w.write = func(context.Context, *keyindex.Key, time.Time, keyindex.PreviousUse, *switchboardv1alpha1.APIKeyCreditsStatus, *switchboardv1alpha1.APIKeyBindingStatus) error {
		return nil
	}
	w.balance = func(_ context.Context, p *ratelimit.Policy) (ratelimit.Balance, bool, error) {
		if p == nil || p.Credits == nil {
			return ratelimit.Balance{}, false, nil
		}
		for _, k := range idx.Keys() {
			if k.RateLimit == p {
				return ratelimit.Balance{Period: ratelimit.Period{ID: "M1", End: end}, Used: used[k.Name], Remaining: 100 - used[k.Name]}, true, nil
			}
		}
		t.Fatalf("a policy of no key")
		return ratelimit.Balance{}, false, nil
	}
	gauge := func() map[string]float64 {
		out := map[string]float64{}
		for _, s := range usedShares {
			out[s] = testutil.ToFloat64(creditKeys.WithLabelValues(s))
		}
		return out
	}
	check := func(when string, want map[string]float64) {
		t.Helper()
		got := gauge()
		for _, s := range usedShares {
			if got[s] != want[s] {
				t.Errorf("%s: switchboard_api_credit_keys = %v, want %v", when, got, want)
				return
			}
		}
	}
	for _, k := range idx.Keys() {
		k.Usage().Touch(now.Add(-time.Second))
	}
	w.flush(context.Background(), nil)
	check("after the writes", map[string]float64{"0-50": 2, "50-80": 1, "80-90": 1, "90-100": 1, "exhausted": 1})
	if got := testutil.CollectAndCount(creditKeys); got != len(usedShares) {
		t.Errorf("%d series, want %d", got, len(usedShares))
	}
	if problems, err := testutil.CollectAndLint(creditKeys); err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}

	idx.DeleteAPIKey(types.UID("uid-more"))
	clock.SetTime(now.Add(time.Minute))
	w.flush(context.Background(), nil)
	check("a key gone", map[string]float64{"0-50": 1, "50-80": 1, "80-90": 1, "90-100": 1, "exhausted": 1})

	clock.SetTime(end)
	w.flush(context.Background(), nil)
	check("the period ended", map[string]float64{})
}
