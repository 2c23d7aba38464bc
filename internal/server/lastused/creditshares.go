package lastused

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/metrics"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
)

// How much of their period the keys with credits used, without a label per key: five series
// whatever the number of keys, computed from the balances this replica writes into
// status.credits (no read of its own, nothing on a request's path).

// usedShares are the values of switchboard_api_credit_keys' "used" label, in order: the share
// of the period's credits used, in percent, then none left. Its thresholds are those of the
// credit events (80 %, 90 %).
var usedShares = []string{"0-50", "50-80", "80-90", "90-100", "exhausted"}

var creditKeys = metrics.Registered.NewGaugeVec(prometheus.GaugeOpts{
	Name: "switchboard_api_credit_keys",
	Help: "Keys with credits whose balance this replica last wrote (status.credits) in their current period, by the share of the period's credits used (percent) or exhausted.",
}, []string{"used"})

// Every share is exported from the start, at 0.
func init() {
	for _, s := range usedShares {
		creditKeys.WithLabelValues(s)
	}
}

// usedShare is the index in usedShares of c's share of its period used.
func usedShare(c *switchboardv1alpha1.APIKeyCreditsStatus) int {
	amount := c.Used + c.Remaining // at most 2^41: ×100 does not overflow
	switch {
	case c.Remaining <= 0:
		return 4
	case c.Used*100 >= amount*90:
		return 3
	case c.Used*100 >= amount*80:
		return 2
	case c.Used*100 >= amount*50:
		return 1
	}
	return 0
}

// creditShare is what creditShares keeps of one key: its share at the last write, until when
// that holds (the period's end), and the flush that last found it in the index.
type creditShare struct {
	share int
	until time.Time
	seen  uint64
}

// creditShares are the shares of the keys this replica wrote a balance of. Only the writer's
// goroutine uses it.
type creditShares struct {
	byKey  map[types.UID]*creditShare
	flushN uint64
}

// record keeps the share of the balance c just written for the key of uid.
func (s *creditShares) record(uid types.UID, c *switchboardv1alpha1.APIKeyCreditsStatus) {
	if s.byKey == nil {
		s.byKey = map[types.UID]*creditShare{}
	}
	e := s.byKey[uid]
	if e == nil {
		e = &creditShare{seen: s.flushN}
		s.byKey[uid] = e
	}
	e.share, e.until = usedShare(c), c.PeriodEnd.Time
}

// publish sets switchboard_api_credit_keys from the shares of keys (the index's) at now, and
// forgets the keys gone from the index, without credits now, or whose period ended (a key
// counts again once a balance of its new period is written).
func (s *creditShares) publish(keys []*keyindex.Key, now time.Time) {
	s.flushN++
	var counts [5]int
	for _, k := range keys {
		e := s.byKey[k.UID]
		if e == nil || k.RateLimit == nil || k.RateLimit.Credits == nil || !now.Before(e.until) {
			continue
		}
		e.seen = s.flushN
		counts[e.share]++
	}
	for uid, e := range s.byKey {
		if e.seen != s.flushN {
			delete(s.byKey, uid)
		}
	}
	for i, n := range counts {
		creditKeys.WithLabelValues(usedShares[i]).Set(float64(n))
	}
}
