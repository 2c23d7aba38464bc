package clientaddr

import (
	"net/netip"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct{ in, want string }{
		{"192.0.2.1", "192.0.2.1"},
		{"192.0.2.1:5000", "192.0.2.1"},
		{"2001:db8::1", "2001:db8::1"},
		{"[2001:db8::1]:5000", "2001:db8::1"},
		{"[fe80::1%eth0]:5000", "fe80::1"},
		{"::ffff:192.0.2.1", "192.0.2.1"},
		{"[::ffff:192.0.2.1]:80", "192.0.2.1"},
		{"2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"},
		{"not an address", ""},
		{"192.0.2.1:port", ""},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got := Parse(tt.in)
			if tt.want == "" {
				if got.IsValid() {
					t.Fatalf("Parse(%q) = %s, want none", tt.in, got)
				}
				return
			}
			if got.String() != tt.want {
				t.Fatalf("Parse(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestBucket(t *testing.T) {
	tests := []struct{ in, want string }{
		{"192.0.2.1", "192.0.2.1"},
		{"192.0.2.2", "192.0.2.2"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::"},
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::"},
		{"2001:db8:1:3::1", "2001:db8:1:3::"},
		{"::1", "::"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := Bucket(netip.MustParseAddr(tt.in)); got.String() != tt.want {
				t.Fatalf("Bucket(%s) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

// TestFrom: the client address /v1 and the panel's sign-in limiter count by. X-Forwarded-For is
// believed from trusted peers only, read right to left past trusted hops; a hop that is no
// address ends the walk.
func TestFrom(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	tests := []struct {
		name, peer string
		xff        []string
		trusted    []netip.Prefix
		want       string
	}{
		{"no proxies configured", "10.1.1.1", []string{"1.2.3.4"}, nil, "10.1.1.1"},
		{"untrusted peer: header ignored", "192.0.2.1", []string{"1.2.3.4"}, trusted, "192.0.2.1"},
		{"trusted peer", "10.1.1.1", []string{"1.2.3.4"}, trusted, "1.2.3.4"},
		{"rightmost untrusted wins over a spoofed left", "10.1.1.1", []string{"6.6.6.6, 1.2.3.4"}, trusted, "1.2.3.4"},
		{"trusted hops skipped", "10.1.1.1", []string{"1.2.3.4, 10.2.2.2,10.3.3.3"}, trusted, "1.2.3.4"},
		{"several values", "10.1.1.1", []string{"6.6.6.6", "1.2.3.4, 10.9.9.9"}, trusted, "1.2.3.4"},
		{"all trusted: leftmost", "10.1.1.1", []string{"10.2.2.2, 10.3.3.3"}, trusted, "10.2.2.2"},
		{"no header from a trusted peer", "10.1.1.1", nil, trusted, "10.1.1.1"},
		{"IPv6 peer", "::1", []string{"2001:db8::1"}, trusted, "2001:db8::1"},
		{"empty entries", "10.1.1.1", []string{" , 1.2.3.4 , "}, trusted, "1.2.3.4"},
		{"hop with a port", "10.1.1.1", []string{"1.2.3.4:6000"}, trusted, "1.2.3.4"},
		{"IPv4-mapped IPv6 hop", "10.1.1.1", []string{"::ffff:1.2.3.4"}, trusted, "1.2.3.4"},
		{"garbage hop", "10.1.1.1", []string{"1.2.3.4, unknown"}, trusted, "10.1.1.1"},
		{"garbage behind a trusted hop", "10.1.1.1", []string{"1.2.3.4, bogus, 10.2.2.2"}, trusted, "10.2.2.2"},
		{"garbage left of the client", "10.1.1.1", []string{"bogus, 1.2.3.4"}, trusted, "1.2.3.4"},
		{"unreadable peer", "", []string{"1.2.3.4"}, trusted, "invalid IP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := From(Parse(tt.peer), tt.xff, tt.trusted).String(); got != tt.want {
				t.Errorf("From = %q, want %q", got, tt.want)
			}
		})
	}
	peer, xff := netip.MustParseAddr("10.0.0.1"), []string{"1.2.3.4, 10.0.0.2"}
	if allocs := testing.AllocsPerRun(1000, func() { From(peer, xff, trusted) }); allocs != 0 {
		t.Errorf("From allocates %v times per call", allocs)
	}
}
