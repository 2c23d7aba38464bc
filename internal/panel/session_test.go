package panel

import (
	"errors"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestSessionStoreExpiry(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	store := newSessionStore(clk, 30*time.Minute, 2*time.Hour, 100, 10)
	s, _, err := store.create("alice", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.id) < 43 || len(s.csrf) < 43 || s.id == s.csrf {
		t.Fatalf("session id and CSRF token must be distinct 256-bit values: %q %q", s.id, s.csrf)
	}
	// Used every 20 minutes, the session outlives its idle timeout but not its maximum age.
	for range 5 {
		clk.Step(20 * time.Minute)
		if _, ok := store.get(s.id); !ok {
			t.Fatalf("session ended at %s although used every 20 minutes", clk.Now())
		}
	}
	clk.Step(20 * time.Minute) // 2 hours after sign-in
	if _, ok := store.get(s.id); ok {
		t.Fatal("session outlived its maximum age")
	}

	idle, _, _ := store.create("bob", "", nil)
	clk.Step(31 * time.Minute)
	if _, ok := store.get(idle.id); ok {
		t.Fatal("session outlived its idle timeout")
	}
	if _, ok := store.get("unknown"); ok {
		t.Fatal("an unknown id found a session")
	}
}

func TestSessionStoreSweepsOnCreate(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	store := newSessionStore(clk, time.Minute, time.Hour, 100, 100)
	for range 10 {
		if _, _, err := store.create("u", "", nil); err != nil {
			t.Fatal(err)
		}
	}
	clk.Step(2 * time.Minute)
	if _, _, err := store.create("u", "", nil); err != nil {
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
	first, evicted, err := store.create("mallory", "", nil)
	if err != nil || evicted {
		t.Fatal(err, evicted)
	}
	clk.Step(time.Second)
	second, _, _ := store.create("mallory", "", nil)
	clk.Step(time.Second)
	store.get(first.id) // first is now used more recently than second
	clk.Step(time.Second)
	for i := range 50 {
		_, evicted, err := store.create("mallory", "", nil)
		if err != nil || !evicted {
			t.Fatalf("sign-in %d of a user at the cap: evicted %v, %v", i, evicted, err)
		}
		clk.Step(time.Second)
	}
	if n := countOf(store, "mallory"); n != 2 {
		t.Fatalf("one user holds %d sessions, want the cap of 2", n)
	}
	if _, ok := store.get(second.id); ok {
		t.Fatal("the least recently used session survived the flood")
	}

	alice, _, err := store.create("alice", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	store.create("bob", "", nil)   //nolint:errcheck // fills the store: 5 of 5
	store.create("carol", "", nil) //nolint:errcheck
	if _, _, err := store.create("dave", "", nil); !errors.Is(err, errTooManySessions) {
		t.Fatalf("a sign-in past the global cap: %v, want errTooManySessions", err)
	}
	if len(store.entries) != 5 {
		t.Fatalf("the store holds %d sessions, want its cap of 5", len(store.entries))
	}
	if _, ok := store.get(alice.id); !ok {
		t.Fatal("a refused sign-in ended someone else's session")
	}
	// Once sessions end, sign-ins work again.
	clk.Step(2 * time.Hour)
	if _, _, err := store.create("dave", "", nil); err != nil {
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
