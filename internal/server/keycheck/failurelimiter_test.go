package keycheck

import (
	"net/netip"
	"strconv"
	"testing"
	"time"
)

func TestFailureLimiter(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	l := newFailureLimiter(1, 3, 32)
	for i := range 3 {
		if blocked, _ := l.blocked(a, now); blocked {
			t.Fatalf("blocked after %d failures", i)
		}
		l.fail(a, now)
	}
	blocked, wait := l.blocked(a, now)
	if !blocked || wait <= 0 || wait > time.Second {
		t.Fatalf("after the burst: blocked=%v wait=%v, want blocked for up to 1s", blocked, wait)
	}
	if blocked, _ := l.blocked(b, now); blocked {
		t.Error("another address is blocked")
	}
	if blocked, _ := l.blocked(a, now.Add(time.Second)); blocked {
		t.Error("still blocked after a token refilled")
	}
	// An IPv6 client is limited by its /64: hopping within it buys nothing, leaving it does.
	for i := range 3 {
		l.fail(netip.MustParseAddr("2001:db8:1:2::"+strconv.Itoa(i+1)), now)
	}
	if blocked, _ := l.blocked(netip.MustParseAddr("2001:db8:1:2:ffff::9"), now); !blocked {
		t.Error("another address of the same /64 is not blocked")
	}
	if blocked, _ := l.blocked(netip.MustParseAddr("2001:db8:1:3::1"), now); blocked {
		t.Error("another /64 is blocked")
	}
	// The LRU forgets the oldest addresses rather than grow without bound.
	for i := range 1000 {
		l.fail(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), now)
	}
	n := 0
	for i := range l.shards {
		n += len(l.shards[i].entries)
	}
	if n > 32+limiterShards {
		t.Errorf("the limiter remembers %d addresses, bound is about 32", n)
	}
	if newFailureLimiter(-1, 3, 32) != nil {
		t.Error("a negative rate must disable the limiter")
	}
}
