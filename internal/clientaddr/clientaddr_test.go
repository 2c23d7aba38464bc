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
