package keycheck

import (
	"container/list"
	"hash/maphash"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/switchboard-dev/switchboard/internal/clientaddr"
)

// failureLimiter throttles failed authentications per client address (OWASP API2:2023). Only
// failures take tokens, and only failures are refused: an address whose bucket is empty gets
// 429 instead of 401 until it refills, while a valid key from the same address is still served.
// Buckets live in a bounded LRU, split into shards so that concurrent requests rarely share a
// lock. An IPv6 client is limited by its /64, the block one subscriber is usually given, so
// that hopping between its own addresses buys nothing.
type failureLimiter struct {
	limit  rate.Limit
	burst  int
	seed   maphash.Seed
	shards [limiterShards]limiterShard
}

const limiterShards = 16

type limiterShard struct {
	mu       sync.Mutex
	capacity int
	entries  map[netip.Addr]*list.Element
	lru      list.List // front = most recently failed
}

type limiterEntry struct {
	addr netip.Addr
	lim  *rate.Limiter
}

// newFailureLimiter allows burst failures per address, refilled at perSecond; perSecond <= 0
// disables the limiter. clients bounds how many addresses are remembered.
func newFailureLimiter(perSecond float64, burst, clients int) *failureLimiter {
	if perSecond <= 0 {
		return nil
	}
	if burst < 1 {
		burst = 1
	}
	l := &failureLimiter{limit: rate.Limit(perSecond), burst: burst, seed: maphash.MakeSeed()}
	per := max(clients/limiterShards, 1)
	for i := range l.shards {
		l.shards[i].capacity = per
		l.shards[i].entries = map[netip.Addr]*list.Element{}
	}
	return l
}

func (l *failureLimiter) shard(addr netip.Addr) *limiterShard {
	return &l.shards[maphash.Comparable(l.seed, addr)%limiterShards]
}

// blocked reports whether addr has no failure left, and how long until it has one.
func (l *failureLimiter) blocked(addr netip.Addr, now time.Time) (bool, time.Duration) {
	if l == nil {
		return false, 0
	}
	addr = clientaddr.Bucket(addr)
	s := l.shard(addr)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[addr]
	if !ok {
		return false, 0
	}
	tokens := e.Value.(*limiterEntry).lim.TokensAt(now)
	if tokens >= 1 {
		return false, 0
	}
	return true, time.Duration((1 - tokens) / float64(l.limit) * float64(time.Second))
}

// fail records a failed authentication from addr.
func (l *failureLimiter) fail(addr netip.Addr, now time.Time) {
	if l == nil {
		return
	}
	addr = clientaddr.Bucket(addr)
	s := l.shard(addr)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[addr]
	if ok {
		s.lru.MoveToFront(e)
	} else {
		if s.lru.Len() >= s.capacity {
			oldest := s.lru.Back()
			s.lru.Remove(oldest)
			delete(s.entries, oldest.Value.(*limiterEntry).addr)
		}
		e = s.lru.PushFront(&limiterEntry{addr: addr, lim: rate.NewLimiter(l.limit, l.burst)})
		s.entries[addr] = e
	}
	e.Value.(*limiterEntry).lim.AllowN(now, 1)
}
