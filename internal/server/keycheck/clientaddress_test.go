package keycheck

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestClientAddress(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	tests := []struct {
		name, remote string
		xff          []string
		trusted      []netip.Prefix
		want         string
	}{
		{"no proxies configured", "10.1.1.1:5000", []string{"1.2.3.4"}, nil, "10.1.1.1"},
		{"untrusted peer: header ignored", "192.0.2.1:5000", []string{"1.2.3.4"}, trusted, "192.0.2.1"},
		{"trusted peer", "10.1.1.1:5000", []string{"1.2.3.4"}, trusted, "1.2.3.4"},
		{"rightmost untrusted wins over a spoofed left", "10.1.1.1:5000", []string{"6.6.6.6, 1.2.3.4"}, trusted, "1.2.3.4"},
		{"trusted hops skipped", "10.1.1.1:5000", []string{"1.2.3.4, 10.2.2.2,10.3.3.3"}, trusted, "1.2.3.4"},
		{"several headers", "10.1.1.1:5000", []string{"6.6.6.6", "1.2.3.4, 10.9.9.9"}, trusted, "1.2.3.4"},
		{"all trusted: leftmost", "10.1.1.1:5000", []string{"10.2.2.2, 10.3.3.3"}, trusted, "10.2.2.2"},
		{"no header from a trusted peer", "10.1.1.1:5000", nil, trusted, "10.1.1.1"},
		{"IPv6 peer", "[::1]:5000", []string{"2001:db8::1"}, trusted, "2001:db8::1"},
		{"empty entries", "10.1.1.1:5000", []string{" , 1.2.3.4 , "}, trusted, "1.2.3.4"},
		{"remote without port", "10.1.1.1", []string{"1.2.3.4"}, trusted, "1.2.3.4"},
		// Parsed with net/netip: one client has one spelling, whatever a hop looks like.
		{"hop with a port", "10.1.1.1:5000", []string{"1.2.3.4:6000"}, trusted, "1.2.3.4"},
		{"IPv6 hop with a port", "10.1.1.1:5000", []string{"[2001:db8::1]:6000"}, trusted, "2001:db8::1"},
		{"IPv6 hop spelled long", "10.1.1.1:5000", []string{"2001:0db8:0000::0001"}, trusted, "2001:db8::1"},
		{"IPv4-mapped IPv6 hop", "10.1.1.1:5000", []string{"::ffff:1.2.3.4"}, trusted, "1.2.3.4"},
		{"IPv4-mapped trusted peer", "[::ffff:10.1.1.1]:5000", []string{"1.2.3.4"}, trusted, "1.2.3.4"},
		{"hop with a zone", "10.1.1.1:5000", []string{"fe80::1%eth0"}, trusted, "fe80::1"},
		// A hop that is no address ends the walk: nothing left of it is vouched for.
		{"garbage hop", "10.1.1.1:5000", []string{"1.2.3.4, unknown"}, trusted, "10.1.1.1"},
		{"garbage behind a trusted hop", "10.1.1.1:5000", []string{"1.2.3.4, bogus, 10.2.2.2"}, trusted, "10.2.2.2"},
		{"garbage left of the client", "10.1.1.1:5000", []string{"bogus, 1.2.3.4"}, trusted, "1.2.3.4"},
		{"unreadable peer", "@unix", []string{"1.2.3.4"}, trusted, "invalid IP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/v1/connections", nil)
			r.RemoteAddr = tt.remote
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := clientAddress(r, tt.trusted).String(); got != tt.want {
				t.Errorf("clientAddress = %q, want %q", got, tt.want)
			}
		})
	}
}
