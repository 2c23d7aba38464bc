package panel

import (
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestSessionStoreExpiry(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	store := newSessionStore(clk, 30*time.Minute, 2*time.Hour, 100, 10)
	s, _, err := store.create("alice", "", testHost, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.id) < 43 || len(s.csrf) < 43 || s.id == s.csrf {
		t.Fatalf("session id and CSRF token must be distinct 256-bit values: %q %q", s.id, s.csrf)
	}
	// Used every 20 minutes, the session outlives its idle timeout but not its maximum age.
	for range 5 {
		clk.Step(20 * time.Minute)
		if _, ok := store.get(s.id, testHost); !ok {
			t.Fatalf("session ended at %s although used every 20 minutes", clk.Now())
		}
	}
	clk.Step(20 * time.Minute) // 2 hours after sign-in
	if _, ok := store.get(s.id, testHost); ok {
		t.Fatal("session outlived its maximum age")
	}

	idle, _, _ := store.create("bob", "", testHost, nil)
	clk.Step(31 * time.Minute)
	if _, ok := store.get(idle.id, testHost); ok {
		t.Fatal("session outlived its idle timeout")
	}
	if _, ok := store.get("unknown", testHost); ok {
		t.Fatal("an unknown id found a session")
	}
}

func TestSessionStoreSweepsOnCreate(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	store := newSessionStore(clk, time.Minute, time.Hour, 100, 100)
	for range 10 {
		if _, _, err := store.create("u", "", testHost, nil); err != nil {
			t.Fatal(err)
		}
	}
	clk.Step(2 * time.Minute)
	if _, _, err := store.create("u", "", testHost, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(store.entries); n != 1 {
		t.Fatalf("%d sessions kept, want only the live one", n)
	}
}

// TestSessionCaps performs a session flood: one user signing in over and over keeps at most
// their own cap of sessions (the least recently used ends), and many users together cannot
// make the store hold more than its cap (new sign-ins are refused, nobody is signed out).
func TestSessionCaps(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	store := newSessionStore(clk, time.Hour, 8*time.Hour, 5, 2)
	first, evicted, err := store.create("mallory", "", testHost, nil)
	if err != nil || evicted {
		t.Fatal(err, evicted)
	}
	clk.Step(time.Second)
	second, _, _ := store.create("mallory", "", testHost, nil)
	clk.Step(time.Second)
	store.get(first.id, testHost) // first is now used more recently than second
	clk.Step(time.Second)
	for i := range 50 {
		_, evicted, err := store.create("mallory", "", testHost, nil)
		if err != nil || !evicted {
			t.Fatalf("sign-in %d of a user at the cap: evicted %v, %v", i, evicted, err)
		}
		clk.Step(time.Second)
	}
	if n := countOf(store, "mallory"); n != 2 {
		t.Fatalf("one user holds %d sessions, want the cap of 2", n)
	}
	if _, ok := store.get(second.id, testHost); ok {
		t.Fatal("the least recently used session survived the flood")
	}

	alice, _, err := store.create("alice", "", testHost, nil)
	if err != nil {
		t.Fatal(err)
	}
	store.create("bob", "", testHost, nil)   //nolint:errcheck // fills the store: 5 of 5
	store.create("carol", "", testHost, nil) //nolint:errcheck
	if _, _, err := store.create("dave", "", testHost, nil); !errors.Is(err, errTooManySessions) {
		t.Fatalf("a sign-in past the global cap: %v, want errTooManySessions", err)
	}
	if len(store.entries) != 5 {
		t.Fatalf("the store holds %d sessions, want its cap of 5", len(store.entries))
	}
	if _, ok := store.get(alice.id, testHost); !ok {
		t.Fatal("a refused sign-in ended someone else's session")
	}
	// Once sessions end, sign-ins work again.
	clk.Step(2 * time.Hour)
	if _, _, err := store.create("dave", "", testHost, nil); err != nil {
		t.Fatalf("after the others expired: %v", err)
	}
}

func countOf(s *sessionStore, user string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.entries {
		if e.user == user {
			n++
		}
	}
	return n
}

func TestLoginLimiter(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	l := newLoginLimiter(0.5, 3)
	for i := range 3 {
		if ok, _ := l.allow("10.0.0.1", now); !ok {
			t.Fatalf("attempt %d within the burst refused", i)
		}
	}
	ok, wait := l.allow("10.0.0.1", now)
	if ok || wait != 2*time.Second {
		t.Fatalf("attempt past the burst: allowed %v, wait %s; want refused for 2s", ok, wait)
	}
	if ok, _ := l.allow("10.0.0.2", now); !ok {
		t.Fatal("another address was throttled")
	}
	if ok, _ := l.allow("10.0.0.1", now.Add(2*time.Second)); !ok {
		t.Fatal("the address did not regain an attempt")
	}
	for range maxConcurrentReviews {
		if !l.startReview() {
			t.Fatal("a TokenReview slot refused below the cap")
		}
	}
	if l.startReview() {
		t.Fatal("more TokenReviews in flight than the cap")
	}
	l.endReview()
	if !l.startReview() {
		t.Fatal("a freed slot was not reused")
	}
}

func TestValidCSRF(t *testing.T) {
	tests := []struct {
		name, got, want string
		ok              bool
	}{
		{"match", "abc", "abc", true},
		{"mismatch", "abd", "abc", false},
		{"missing", "", "abc", false},
		{"both empty", "", "", false},
		{"prefix", "ab", "abc", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if validCSRF(tt.got, tt.want) != tt.ok {
				t.Fatalf("validCSRF(%q, %q) = %v", tt.got, tt.want, !tt.ok)
			}
		})
	}
}

// testHost is the Host the sessions of these tests are created on.
const testHost = "sb-abcdefghijklmnop.localhost:8083"

// TestSessionBoundToItsHost: a session's id found under another Host is no session, whatever
// the case of the name; under its own it is.
func TestSessionBoundToItsHost(t *testing.T) {
	store := newSessionStore(clocktesting.NewFakeClock(time.Now()), time.Hour, time.Hour, 10, 10)
	s, _, err := store.create("alice", "", testHost, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		host string
		ok   bool
	}{
		{testHost, true},
		{"SB-ABCDEFGHIJKLMNOP.localhost:8083", true},
		{"127.0.0.1:8083", false},
		{"localhost:8083", false},
		{"sb-abcdefghijklmnop.localhost:8084", false},
		{"sb-qrstuvwxyzabcdef.localhost:8083", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			if _, ok := store.get(s.id, tt.host); ok != tt.ok {
				t.Fatalf("get on %q: %t, want %t", tt.host, ok, tt.ok)
			}
		})
	}
}

// TestClientBucket: sign-in attempts are counted per IPv4 address and per IPv6 /64, as /v1
// counts failures; an IPv6 client hopping within its /64 stays in one bucket. Behind a trusted
// proxy the client is the one its X-Forwarded-For names (by /v1's rules, clientaddr.From); from
// any other peer the header is ignored, so that a client cannot pick its bucket.
func TestClientBucket(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	tests := []struct {
		remote  string
		xff     []string
		trusted []netip.Prefix
		want    string
	}{
		{"192.0.2.1:5000", nil, nil, "192.0.2.1"},
		{"192.0.2.2:5000", nil, nil, "192.0.2.2"},
		{"[2001:db8:1:2::1]:5000", nil, nil, "2001:db8:1:2::"},
		{"[2001:db8:1:2:dead:beef:0:7]:6000", nil, nil, "2001:db8:1:2::"},
		{"[2001:db8:1:3::1]:5000", nil, nil, "2001:db8:1:3::"},
		{"[::ffff:192.0.2.1]:5000", nil, nil, "192.0.2.1"},
		{"pipe", nil, nil, "pipe"},
		// No trusted proxies: the header is not believed, whoever sends it.
		{"10.1.1.1:5000", []string{"203.0.113.7"}, nil, "10.1.1.1"},
		// A trusted proxy's clients each have their own bucket.
		{"10.1.1.1:5000", []string{"203.0.113.7"}, proxies, "203.0.113.7"},
		{"10.1.1.1:5000", []string{"203.0.113.8"}, proxies, "203.0.113.8"},
		{"10.1.1.1:5000", []string{"198.51.100.1, 203.0.113.7, 10.2.2.2"}, proxies, "203.0.113.7"},
		{"[fd00::1]:5000", []string{"2001:db8:1:2:dead::1"}, proxies, "2001:db8:1:2::"},
		// A peer that is not a trusted proxy cannot choose its bucket.
		{"192.0.2.1:5000", []string{"203.0.113.7"}, proxies, "192.0.2.1"},
		{"[2001:db8:1:2::1]:5000", []string{"203.0.113.7"}, proxies, "2001:db8:1:2::"},
	}
	for _, tt := range tests {
		t.Run(tt.remote+" "+strings.Join(tt.xff, "|"), func(t *testing.T) {
			r := &http.Request{RemoteAddr: tt.remote, Header: http.Header{}}
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := clientBucket(r, tt.trusted); got != tt.want {
				t.Fatalf("clientBucket(%s, %q) = %s, want %s", tt.remote, tt.xff, got, tt.want)
			}
		})
	}
	// Within one /64, the burst is shared.
	l := newLoginLimiter(0.001, 2)
	now := time.Now()
	for i, remote := range []string{"[2001:db8::1]:1", "[2001:db8::2]:1", "[2001:db8::ffff:3]:1"} {
		ok, _ := l.allow(clientBucket(&http.Request{RemoteAddr: remote}, nil), now)
		if want := i < 2; ok != want {
			t.Fatalf("attempt %d from %s allowed %t, want %t", i+1, remote, ok, want)
		}
	}
}
