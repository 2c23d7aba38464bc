package panel

import (
	"net/http"
	"net/netip"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/lru"

	"github.com/switchboard-dev/switchboard/internal/clientaddr"
)

// loginLimiter bounds what sign-in attempts can cost: each one is a TokenReview against the
// API server. Every attempt from an address takes a token from that address's bucket, and at
// most maxConcurrentReviews TokenReviews are in flight at once, whatever the addresses. The
// buckets live in a bounded LRU, so an attacker cycling addresses cannot grow it.
type loginLimiter struct {
	limit rate.Limit
	burst int
	addrs *lru.Cache // address -> *rate.Limiter
	// reviews holds one token per TokenReview in flight.
	reviews chan struct{}
}

// loginAddresses bounds how many client addresses the limiter remembers.
const loginAddresses = 8192

// maxConcurrentReviews bounds the TokenReviews the panel makes at once.
const maxConcurrentReviews = 16

func newLoginLimiter(perSecond float64, burst int) *loginLimiter {
	return &loginLimiter{
		limit:   rate.Limit(perSecond),
		burst:   burst,
		addrs:   lru.New(loginAddresses),
		reviews: make(chan struct{}, maxConcurrentReviews),
	}
}

// allow takes a sign-in attempt from addr, or says how long until the next one is allowed.
func (l *loginLimiter) allow(addr string, now time.Time) (bool, time.Duration) {
	var lim *rate.Limiter
	if v, ok := l.addrs.Get(addr); ok {
		lim = v.(*rate.Limiter)
	} else {
		lim = rate.NewLimiter(l.limit, l.burst)
		l.addrs.Add(addr, lim)
	}
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// startReview takes a TokenReview slot, or reports that all are in use.
func (l *loginLimiter) startReview() bool {
	select {
	case l.reviews <- struct{}{}:
		return true
	default:
		return false
	}
}

func (l *loginLimiter) endReview() { <-l.reviews }

// clientBucket is the address sign-in attempts are counted under: the client's address under
// the rules /v1 uses (clientaddr.From: X-Forwarded-For believed from trusted proxies only, read
// right to left past them), an IPv6 client by its /64 (clientaddr.Bucket), so that hopping
// between the addresses of one's own block buys no attempts. Behind a proxy the peer is the
// proxy, whose one bucket would let one client looping on sign-in lock everyone out; a client
// that is not a trusted proxy cannot pick its bucket with a header, which it is free to write.
func clientBucket(r *http.Request, trusted []netip.Prefix) string {
	addr := clientaddr.From(clientaddr.Parse(r.RemoteAddr), r.Header["X-Forwarded-For"], trusted)
	if !addr.IsValid() {
		return r.RemoteAddr
	}
	return clientaddr.Bucket(addr).String()
}
