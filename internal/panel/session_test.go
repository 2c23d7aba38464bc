package panel

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestSessionStoreExpiry(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	store := newSessionStore(clk, 30*time.Minute, 2*time.Hour)
	s, err := store.create("alice", "", nil)
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

	idle, _ := store.create("bob", "", nil)
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
	store := newSessionStore(clk, time.Minute, time.Hour)
	for range 10 {
		if _, err := store.create("u", "", nil); err != nil {
			t.Fatal(err)
		}
	}
	clk.Step(2 * time.Minute)
	if _, err := store.create("u", "", nil); err != nil {
		t.Fatal(err)
	}
	if n := len(store.entries); n != 1 {
		t.Fatalf("%d sessions kept, want only the live one", n)
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
