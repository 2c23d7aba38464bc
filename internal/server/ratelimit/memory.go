package ratelimit

import (
	"context"
	"hash/maphash"
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
	tat     map[string]int64        // Policy.ID → theoretical arrival time, unix nanoseconds
	credits map[string]creditsSpent // Policy.creditKey → the period's count
}

// creditsSpent is the count of one key's credits in one period.
type creditsSpent struct {
	spent int64
	end   int64 // the period's end, unix nanoseconds: when Sweep forgets it
}

// NewMemory returns an empty store that reads the time from c.
func NewMemory(c clock.PassiveClock) *Memory {
	m := &Memory{clock: c, seed: maphash.MakeSeed()}
	for i := range m.shards {
		m.shards[i].tat = map[string]int64{}
		m.shards[i].credits = map[string]creditsSpent{}
	}
	return m
}

// Allow decides one request of p's key, rate and credits under one lock. It never fails.
func (m *Memory) Allow(_ context.Context, p *Policy) (Result, error) {
	now := m.clock.Now()
	s := &m.shards[maphash.String(m.seed, p.shardID())%memoryShards]
	if p.Credits != nil {
		return s.allowWithCredits(p, now), nil
	}
	s.mu.Lock()
	tat, res := decide(s.tat[p.ID], now.UnixNano(), p.Limit)
	if res.Allowed {
		s.tat[p.ID] = tat
	}
	s.mu.Unlock()
	return res, nil
}

func (s *memoryShard) allowWithCredits(p *Policy, now time.Time) Result {
	period := p.Credits.Schedule.Period(now)
	key := p.creditKey(period)
	s.mu.Lock()
	defer s.mu.Unlock()
	tat, res := decide(s.tat[p.ID], now.UnixNano(), p.Limit)
	count := s.credits[key]
	res = p.withCredits(res, count.spent, period, now)
	if res.Allowed {
		s.tat[p.ID] = tat
		s.credits[key] = creditsSpent{spent: count.spent + 1, end: period.End.UnixNano()}
	}
	return res
}

// Spent reads how many of p's credits period has spent in this process. It never fails.
func (m *Memory) Spent(_ context.Context, p *Policy, period Period) (int64, error) {
	s := &m.shards[maphash.String(m.seed, p.shardID())%memoryShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.credits[p.creditKey(period)].spent, nil
}

// Sweep forgets the keys whose budget is whole again: a TAT in the past decides exactly as no
// TAT does, so memory holds only the keys used within their last burst's worth of time; and the
// credit counts of ended periods, which no request reads again.
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
		for key, count := range s.credits {
			if count.end <= now {
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
