package leakreceiver

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/internal/apikey"
)

var t0 = time.Date(2026, 11, 27, 20, 0, 0, 0, time.UTC)

// TestClientBudgets: each address has its own burst, spent by unverified requests only and
// refilled at the rate; an IPv6 client counts by its /64; a refilled bucket is forgotten.
func TestClientBudgets(t *testing.T) {
	type step struct {
		at      time.Duration // after t0
		addr    string
		charges int
		blocked bool
		wait    time.Duration // when blocked
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"within the burst", []step{{0, "192.0.2.1", 2, false, 0}}},
		{"the burst spent", []step{{0, "192.0.2.1", 3, true, time.Second}}},
		{"another address is not charged", []step{{0, "192.0.2.1", 3, true, time.Second}, {0, "192.0.2.2", 0, false, 0}}},
		{"refilled at the rate", []step{{0, "192.0.2.1", 3, true, time.Second}, {time.Second, "192.0.2.1", 0, false, 0}}},
		{"half refilled", []step{{0, "192.0.2.1", 3, true, time.Second}, {500 * time.Millisecond, "192.0.2.1", 0, true, 500 * time.Millisecond}}},
		{"an IPv6 /64 is one client", []step{{0, "2001:db8:1:2::1", 3, true, time.Second}, {0, "2001:db8:1:2:ffff::9", 0, true, time.Second},
			{0, "2001:db8:1:3::1", 0, false, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newClientBudgets(1, 3, 100)
			for i, s := range tt.steps {
				addr := netip.MustParseAddr(s.addr)
				now := t0.Add(s.at)
				for range s.charges {
					b.charge(addr, now)
				}
				blocked, wait := b.blocked(addr, now)
				if blocked != s.blocked || (blocked && (wait < s.wait-time.Millisecond || wait > s.wait+time.Millisecond)) {
					t.Errorf("step %d (%s): blocked %v for %v, want %v for %v", i, s.addr, blocked, wait, s.blocked, s.wait)
				}
			}
		})
	}
}

// TestClientBudgetsAreBounded: however many addresses send, the buckets remembered stay within
// the bound, and a bucket refilled to its burst is dropped when next looked at.
func TestClientBudgetsAreBounded(t *testing.T) {
	b := newClientBudgets(1, 3, 100)
	for i := range 10000 {
		b.charge(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), t0)
	}
	if n := b.len(); n != 100 {
		t.Fatalf("%d addresses remembered after 10,000 sent, want the bound, 100", n)
	}
	last := netip.AddrFrom4([4]byte{10, 0, 39, 15}) // the 9,999th: still remembered
	if blocked, _ := b.blocked(last, t0.Add(10*time.Second)); blocked || b.len() != 99 {
		t.Fatalf("a refilled bucket: blocked %v, %d remembered; want it not blocked and forgotten (99)", blocked, b.len())
	}
}

// TestReplays: an alert's answer and a recorded key are remembered for the TTL, and no longer;
// the memory holds at most its bound, the least recently used going first.
func TestReplays(t *testing.T) {
	h1, h2 := apikey.Sum("one"), apikey.Sum("two")
	tests := []struct {
		name      string
		remember  func(m *replays)
		at        time.Duration
		alert     string
		wantAlert string
		key       apikey.Hash
		wantKey   bool
	}{
		{"an alert within the TTL", func(m *replays) { m.rememberAlert("octo/app#1", resultRecorded, t0) }, time.Hour, "octo/app#1", resultRecorded, h1, false},
		{"a false positive within the TTL", func(m *replays) { m.rememberAlert("octo/app#1", resultFalsePositive, t0) }, time.Minute, "octo/app#1", resultFalsePositive, h1, false},
		{"an alert at the TTL", func(m *replays) { m.rememberAlert("octo/app#1", resultRecorded, t0) }, 2 * time.Hour, "octo/app#1", "", h1, false},
		{"another alert", func(m *replays) { m.rememberAlert("octo/app#1", resultRecorded, t0) }, 0, "octo/app#2", "", h1, false},
		{"an alert of another repository", func(m *replays) { m.rememberAlert("octo/app#1", resultRecorded, t0) }, 0, "octo/ap#1", "", h1, false},
		{"a key within the TTL", func(m *replays) { m.rememberKey(h1, t0) }, time.Hour, "", "", h1, true},
		{"a key past the TTL", func(m *replays) { m.rememberKey(h1, t0) }, 3 * time.Hour, "", "", h1, false},
		{"another key", func(m *replays) { m.rememberKey(h1, t0) }, 0, "", "", h2, false},
		{"the least recently used goes first", func(m *replays) {
			m.rememberKey(h1, t0)
			m.rememberAlert("octo/app#1", resultRecorded, t0)
			m.key(h1, t0) // used: the alert is now the least recently used
			m.rememberKey(h2, t0)
		}, 0, "octo/app#1", "", h1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newReplays(2, 2*time.Hour)
			tt.remember(m)
			now := t0.Add(tt.at)
			if got, ok := m.alert(tt.alert, now); got != tt.wantAlert || ok != (tt.wantAlert != "") {
				t.Errorf("alert(%q) = %q, %v; want %q", tt.alert, got, ok, tt.wantAlert)
			}
			if got := m.key(tt.key, now); got != tt.wantKey {
				t.Errorf("key() = %v, want %v", got, tt.wantKey)
			}
		})
	}
	m := newReplays(100, time.Hour)
	for i := range 1000 {
		m.rememberAlert(fmt.Sprintf("octo/app#%d", i), resultRecorded, t0)
		m.rememberKey(apikey.Sum(fmt.Sprint(i)), t0)
	}
	if n := m.len(); n != 100 {
		t.Errorf("%d answers remembered, want the bound, 100", n)
	}
}
