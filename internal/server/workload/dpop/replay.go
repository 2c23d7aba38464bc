package dpop

import (
	"hash/maphash"
	"sync"
	"time"
)

// ReplayOptions bound a replay cache.
type ReplayOptions struct {
	// MaxEntries caps the places held, all keys together: one a key, one a proof id (each a
	// few hundred bytes at most); 65,536 when zero.
	MaxEntries int
	// PerKey caps the ids remembered for one bound key; 1,024 when zero, and never more than a
	// shard holds.
	PerKey int
}

const (
	defaultMaxEntries = 1 << 16
	defaultPerKey     = 1 << 10
	// replayShards spreads keys over locks; a key's ids all live in one shard.
	replayShards = 16
)

// ReplayCache remembers the proof ids accepted, by bound key, until their proof's iat leaves
// the window, so that a proof is accepted once.
//
// Its memory is bounded without ever forgetting an id it would still need: each key has a
// budget of PerKey ids, and a shard a cap of MaxEntries/16 places (one a key, one an id). An id is evicted before it expires
// only when its key's budget is spent (the key's oldest goes) or its shard is full (the oldest
// of the key holding the most goes), and then the key's floor rises to that id's iat: every
// later proof of the key issued at or before the floor is refused as stale. So a replay is
// never accepted, whatever the pressure; what pressure costs is that a key making more than
// PerKey proofs within one second (iat counts seconds) has the surplus refused, and a flood of
// distinct ids from one client spends its own budget and raises its own floor, not its
// neighbours' (they keep their ids, since the shard evicts from the key holding the most).
// Sharding keeps the lock of one busy key from serializing every other.
type ReplayCache struct {
	window time.Duration
	perKey int
	seed   maphash.Seed
	shards [replayShards]replayShard
}

type replayShard struct {
	mu      sync.Mutex
	keys    map[string]*keyIDs
	entries int // places held: one a key and one an id, all keys of the shard together
	max     int
}

// keyIDs are one bound key's ids, in the order accepted, and its floor.
type keyIDs struct {
	ids   map[string]int64 // id to iat, unix seconds
	order []idAt           // a FIFO: order[head:] are live
	head  int
	floor int64 // proofs with iat at or before it are refused; 0 when none was evicted early
}

type idAt struct {
	id  string
	iat int64
}

// NewReplayCache returns an empty cache whose ids expire window after their proof's iat.
func NewReplayCache(window time.Duration, o ReplayOptions) *ReplayCache {
	if o.MaxEntries <= 0 {
		o.MaxEntries = defaultMaxEntries
	}
	if o.PerKey <= 0 {
		o.PerKey = defaultPerKey
	}
	perShard := max(2, o.MaxEntries/replayShards)
	c := &ReplayCache{window: window, perKey: min(o.PerKey, perShard-1), seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i] = replayShard{keys: map[string]*keyIDs{}, max: perShard}
	}
	return c
}

// Add records id for the key of thumbprint, for a proof issued at iat and seen at now, or
// refuses it: ReasonReplayed when it was recorded before and has not expired, ReasonStale when
// iat is at or before the key's floor.
func (c *ReplayCache) Add(thumbprint, id string, iat, now time.Time) error {
	s := &c.shards[maphash.String(c.seed, thumbprint)%replayShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	expired := now.Add(-c.window).Unix() // ids of proofs issued before it are refused by time alone
	k := s.keys[thumbprint]
	if k != nil {
		s.expire(k, expired)
		if iat.Unix() <= k.floor {
			return refuse(ReasonStale, "iat is older than the replay cache holds for this key")
		}
		if _, seen := k.ids[id]; seen {
			return refuse(ReasonReplayed, "the proof's id was accepted before")
		}
		if len(k.ids) >= c.perKey {
			s.evictOldest(k)
		}
	}
	places := 1 // the id, and the key's own place when it is new
	if k == nil {
		places = 2
	}
	for s.entries+places > s.max {
		if !s.makeRoom(expired, k) {
			// Every place holds a key's floor the window still needs: forgetting one could
			// let a replay in, so the proof waits for the window to move on.
			return refuse(ReasonStale, "the replay cache is full of keys it cannot forget yet")
		}
	}
	if k == nil {
		k = &keyIDs{ids: map[string]int64{}}
		s.keys[thumbprint] = k
		s.entries++
	}
	k.ids[id] = iat.Unix()
	k.order = append(k.order, idAt{id: id, iat: iat.Unix()})
	s.entries++
	return nil
}

// Len returns the places held: one a key and one an id.
func (c *ReplayCache) Len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += s.entries
		s.mu.Unlock()
	}
	return n
}

// expire drops k's ids, oldest accepted first, while their proof was issued before expired.
// An id accepted after a younger one waits behind it: at most PerKey ids are held regardless.
func (s *replayShard) expire(k *keyIDs, expired int64) {
	for k.head < len(k.order) && k.order[k.head].iat < expired {
		s.drop(k)
	}
}

// evictOldest drops k's oldest id before it expires and raises k's floor to its iat.
func (s *replayShard) evictOldest(k *keyIDs) {
	k.floor = max(k.floor, k.order[k.head].iat)
	s.drop(k)
}

// drop forgets k's oldest id, compacting its FIFO once half of it is spent.
func (s *replayShard) drop(k *keyIDs) {
	delete(k.ids, k.order[k.head].id)
	k.order[k.head] = idAt{}
	k.head++
	s.entries--
	if k.head > len(k.order)/2 {
		k.order = append(k.order[:0], k.order[k.head:]...)
		k.head = 0
	}
}

// makeRoom frees places in a full shard, and says whether it freed any: first whatever
// expired, and keys with nothing left to remember (no id, and a floor the window alone now
// enforces) but keep; if that freed nothing, the oldest id of the key holding the most. It walks
// the shard's keys, a bounded number (at most its cap).
func (s *replayShard) makeRoom(expired int64, keep *keyIDs) bool {
	before := s.entries
	var biggest *keyIDs
	for t, k := range s.keys {
		s.expire(k, expired)
		if len(k.ids) == 0 && k.floor < expired && k != keep {
			delete(s.keys, t)
			s.entries--
			continue
		}
		if biggest == nil || len(k.ids) > len(biggest.ids) {
			biggest = k
		}
	}
	if s.entries < before {
		return true
	}
	if biggest == nil || len(biggest.ids) == 0 {
		return false
	}
	s.evictOldest(biggest)
	return true
}
