package leakreceiver

import (
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/lru"

	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/clientaddr"
)

// clientBudgets limit, per client address, the requests that carry no valid signature: each
// such request takes a token of its address's bucket, and an address whose bucket is empty is
// answered 429 before its body is read. A verified request takes nothing, so GitHub, which signs,
// is never limited by them, and a flood spends its own addresses' budgets only. An IPv6 client
// counts by its /64 (clientaddr.Bucket). The buckets live in an LRU of a bounded number of
// addresses; a bucket refilled to its burst is forgotten when next looked at, as it says no more
// than a new one.
type clientBudgets struct {
	limit rate.Limit
	burst int

	mu      sync.Mutex // orders a bucket's creation with its use
	buckets *lru.Cache // netip.Addr → *rate.Limiter
}

func newClientBudgets(perSecond float64, burst, clients int) *clientBudgets {
	return &clientBudgets{limit: rate.Limit(perSecond), burst: burst, buckets: lru.New(clients)}
}

// blocked says whether addr has spent its budget, and how long until it has a request again.
func (b *clientBudgets) blocked(addr netip.Addr, now time.Time) (bool, time.Duration) {
	addr = clientaddr.Bucket(addr)
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.buckets.Get(addr)
	if !ok {
		return false, 0
	}
	tokens := v.(*rate.Limiter).TokensAt(now)
	switch {
	case tokens >= float64(b.burst):
		b.buckets.Remove(addr) // refilled: nothing to remember
		return false, 0
	case tokens >= 1:
		return false, 0
	}
	return true, time.Duration((1 - tokens) / float64(b.limit) * float64(time.Second))
}

// charge takes a token of addr's bucket for a request that was not verified.
func (b *clientBudgets) charge(addr netip.Addr, now time.Time) {
	addr = clientaddr.Bucket(addr)
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.buckets.Get(addr)
	if !ok {
		v = rate.NewLimiter(b.limit, b.burst)
		b.buckets.Add(addr, v)
	}
	v.(*rate.Limiter).AllowN(now, 1)
}

// len is how many addresses are remembered.
func (b *clientBudgets) len() int { return b.buckets.Len() }

// replays remember what was answered to verified requests, so that the same alert or the same
// reported key, delivered again (GitHub's redelivery, the other way of reporting, or anyone
// who captured a signed delivery), is answered as before without a call to GitHub's REST API
// or to the API server. Only what a verified request or the catch-up handled goes in, so
// nobody without GitHub's signature can fill it; it holds a bounded number of entries (least
// recently used out first), each for a bounded time.
type replays struct {
	ttl     time.Duration
	answers *lru.Cache // alertID or apikey.Hash → remembered
}

// alertID is an alert's identity (secretscanning.AlertRef.ID), a key of replays.
type alertID string

// remembered is an answer, and until when it stands.
type remembered struct {
	result string
	until  time.Time
}

func newReplays(entries int, ttl time.Duration) *replays {
	return &replays{ttl: ttl, answers: lru.New(entries)}
}

// alert is the result answered for the alert id, if it was handled within the TTL.
func (m *replays) alert(id string, now time.Time) (string, bool) { return m.get(alertID(id), now) }

// key says whether a report of the key hashed h was recorded within the TTL.
func (m *replays) key(h apikey.Hash, now time.Time) bool {
	_, ok := m.get(h, now)
	return ok
}

// rememberAlert records result as the answer for the alert id.
func (m *replays) rememberAlert(id, result string, now time.Time) {
	m.answers.Add(alertID(id), remembered{result: result, until: now.Add(m.ttl)})
}

// rememberKey records that a report of the key hashed h was recorded.
func (m *replays) rememberKey(h apikey.Hash, now time.Time) {
	m.answers.Add(h, remembered{result: resultRecorded, until: now.Add(m.ttl)})
}

func (m *replays) get(k lru.Key, now time.Time) (string, bool) {
	v, ok := m.answers.Get(k)
	if !ok {
		return "", false
	}
	r := v.(remembered)
	if !now.Before(r.until) {
		m.answers.Remove(k)
		return "", false
	}
	return r.result, true
}

// len is how many answers are remembered.
func (m *replays) len() int { return m.answers.Len() }
