package ratelimit

import (
	"context"
	"hash/maphash"
	"sync"

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
	mu  sync.Mutex
	tat map[string]int64 // Policy.ID → theoretical arrival time, unix nanoseconds
}

// NewMemory returns an empty store that reads the time from c.
func NewMemory(c clock.PassiveClock) *Memory {
	m := &Memory{clock: c, seed: maphash.MakeSeed()}
	for i := range m.shards {
		m.shards[i].tat = map[string]int64{}
	}
	return m
}

// Allow decides one request of p's key. It never fails.
func (m *Memory) Allow(_ context.Context, p *Policy) (Result, error) {
	now := m.clock.Now().UnixNano()
	s := &m.shards[maphash.String(m.seed, p.ID)%memoryShards]
	s.mu.Lock()
	tat, res := decide(s.tat[p.ID], now, p.Limit)
	if res.Allowed {
		s.tat[p.ID] = tat
	}
	s.mu.Unlock()
	return res, nil
}

// Sweep forgets the keys whose budget is whole again: a TAT in the past decides exactly as no
// TAT does, so memory holds only the keys used within their last burst's worth of time.
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
		s.mu.Unlock()
	}
}

// Len is how many keys the store remembers.
func (m *Memory) Len() int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		n += len(s.tat)
		s.mu.Unlock()
	}
	return n
}
