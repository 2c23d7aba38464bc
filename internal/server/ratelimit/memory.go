package ratelimit

import (
	"context"
	"hash/maphash"
	"maps"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Memory keeps budgets in this process: each replica of the server limits each key on its own.
// A client that stays under its limit is never refused, whichever replica it reaches; a client
// spread over N replicas may get up to N times its limit. Redis makes the limit exact.
//
// Dividing the limit by the number of ready replicas (read from the Service's EndpointSlices)
// was considered and rejected: API clients keep their connections alive, so one client's
// requests usually all reach one replica, and that replica would refuse it at 1/N of its
// limit. Per replica, a limit is never stricter than the tenant asked.
type Memory struct {
	clock  clock.PassiveClock
	seed   maphash.Seed
	shards [memoryShards]memoryShard
}

// memoryShards splits the budgets so that concurrent requests of different keys rarely wait
// for one another.
const memoryShards = 32

type memoryShard struct {
	mu      sync.Mutex
	tat     map[string]int64          // Policy.ID → theoretical arrival time, unix nanoseconds
	credits map[string]*memoryCredits // Policy.creditsID → the key's credit record
}

// memoryCredits is a credit record and when Sweep forgets it.
type memoryCredits struct {
	creditRecord
	expires int64 // unix nanoseconds; 0 for never (a grant that never expires)
}

// NewMemory returns an empty store that reads the time from c.
func NewMemory(c clock.PassiveClock) *Memory {
	m := &Memory{clock: c, seed: maphash.MakeSeed()}
	for i := range m.shards {
		m.shards[i].tat = map[string]int64{}
		m.shards[i].credits = map[string]*memoryCredits{}
	}
	return m
}

// Allow decides one request of p's key costing cost credits, rate and credits under one lock.
// It never fails.
func (m *Memory) Allow(_ context.Context, p *Policy, cost int64) (Result, error) {
	now := m.clock.Now()
	if p.Credits != nil {
		return m.creditShard(p).allowWithCredits(p, cost, now, nil), nil
	}
	s := &m.shards[maphash.String(m.seed, p.ID)%memoryShards]
	s.mu.Lock()
	tat, res := decide(s.tat[p.ID], now.UnixNano(), p.Limit)
	if res.Allowed {
		s.tat[p.ID] = tat
	}
	s.mu.Unlock()
	return res, nil
}

// creditShard is the shard of p's key, which has credits: its counter's, so that keys sharing a
// counter share a lock. The key's TAT is kept there too.
func (m *Memory) creditShard(p *Policy) *memoryShard {
	return &m.shards[maphash.String(m.seed, p.creditsID)%memoryShards]
}

// allowWithCredits decides at now; at, when set, is the period to charge instead of now's (a
// test's late request).
func (s *memoryShard) allowWithCredits(p *Policy, cost int64, now time.Time, at *Period) Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	tat, res := decide(s.tat[p.ID], now.UnixNano(), p.Limit)
	stored := s.credits[p.creditsID]
	var rec creditRecord
	if stored != nil {
		rec = stored.creditRecord
	}
	rec, period := p.settle(rec, now, at)
	enough, remaining, ch := p.take(&rec, period, cost, now, res.Allowed)
	res = p.withCredits(res, enough, remaining, period, now)
	if res.Allowed {
		res.Credits.Charged = ch
		s.tat[p.ID] = tat
		if stored == nil {
			stored = &memoryCredits{}
			s.credits[p.creditsID] = stored
		}
		p.forgetGrants(&rec, now)
		stored.creditRecord = rec
		stored.expires = 0
		if d, forever := p.keep(period, now); !forever {
			stored.expires = now.Add(d).UnixNano()
		}
	}
	return res
}

// Refund gives back what ch, a charge of p's key, took. It never fails.
func (m *Memory) Refund(_ context.Context, p *Policy, ch Charge) error {
	s := m.creditShard(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if stored := s.credits[p.creditsID]; stored != nil && stored.kind == p.creditsKind {
		p.refund(&stored.creditRecord, ch)
	}
	return nil
}

// record reads the credit record of p's key in this process. It never fails.
func (m *Memory) record(_ context.Context, p *Policy) (creditRecord, error) {
	s := m.creditShard(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	stored := s.credits[p.creditsID]
	if stored == nil {
		return creditRecord{}, nil
	}
	rec := stored.creditRecord
	rec.grants = maps.Clone(rec.grants)
	return rec, nil
}

// Sweep forgets the keys whose budget is whole again: a TAT in the past decides exactly as no
// TAT does, so memory holds only the keys used within their last burst's worth of time; and the
// credit records kept past their period (Policy.keep) and no longer needed.
func (m *Memory) Sweep() {
	now := m.clock.Now().UnixNano()
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		for id, tat := range s.tat {
			if tat <= now {
				delete(s.tat, id)
			}
		}
		for key, rec := range s.credits {
			if rec.expires != 0 && rec.expires <= now {
				delete(s.credits, key)
			}
		}
		s.mu.Unlock()
	}
}

// Len is how many budgets and credit counts the store remembers.
func (m *Memory) Len() int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		n += len(s.tat) + len(s.credits)
		s.mu.Unlock()
	}
	return n
}
