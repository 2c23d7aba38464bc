package server

import (
	"container/list"
	"hash/maphash"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// failureLimiter throttles failed authentications per client address (OWASP API2:2023). Only
// failures take tokens; an address whose bucket is empty gets 429 for every /v1 request until
// it refills, so that guessing gains nothing, while other addresses are untouched. Buckets live
// in a bounded LRU, split into shards so that concurrent requests rarely share a lock.
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
	entries  map[string]*list.Element
	lru      list.List // front = most recently failed
}

type limiterEntry struct {
	addr string
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
		l.shards[i].entries = map[string]*list.Element{}
	}
	return l
}

func (l *failureLimiter) shard(addr string) *limiterShard {
	return &l.shards[maphash.String(l.seed, addr)%limiterShards]
}

// blocked reports whether addr has no failure left, and how long until it has one.
func (l *failureLimiter) blocked(addr string, now time.Time) (bool, time.Duration) {
	if l == nil {
		return false, 0
	}
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
func (l *failureLimiter) fail(addr string, now time.Time) {
	if l == nil {
		return
	}
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
		// The address is copied: it may be a substring of a header that outlives nothing.
		addr = strings.Clone(addr)
		e = s.lru.PushFront(&limiterEntry{addr: addr, lim: rate.NewLimiter(l.limit, l.burst)})
		s.entries[addr] = e
	}
	e.Value.(*limiterEntry).lim.AllowN(now, 1)
}

// clientAddress finds the address of the client. X-Forwarded-For is believed only when the
// peer is a trusted proxy; it is then read right to left, skipping trusted proxies, and the first
// other address is the client (the one a trusted proxy saw). It does not allocate.
func clientAddress(r *http.Request, trusted []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if len(trusted) == 0 || !isTrusted(host, trusted) {
		return host
	}
	values := r.Header["X-Forwarded-For"]
	client := host
	for i := len(values) - 1; i >= 0; i-- {
		v := values[i]
		for v != "" {
			j := strings.LastIndexByte(v, ',')
			hop := strings.TrimSpace(v[j+1:])
			if j < 0 {
				v = ""
			} else {
				v = v[:j]
			}
			if hop == "" {
				continue
			}
			client = hop
			if !isTrusted(hop, trusted) {
				return hop
			}
		}
	}
	return client
}

func isTrusted(host string, trusted []netip.Prefix) bool {
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	for _, p := range trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
