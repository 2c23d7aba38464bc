// Package clientaddr reads client addresses the way switchboard's limiters count them: one
// spelling per address, and one bucket per subscriber.
package clientaddr

import (
	"net/netip"
	"strings"
)

// Parse reads an address as a peer or a proxy writes it: 192.0.2.1, 2001:db8::1, with or
// without a port (192.0.2.1:5000, [2001:db8::1]:5000). The zone is dropped and an IPv4-mapped
// IPv6 address becomes IPv4, so that one client has one spelling. The zero Addr: not an address.
func Parse(s string) netip.Addr {
	var addr netip.Addr
	// Pick the parser by shape rather than by trying one then the other: a failed parse
	// allocates its error, and a peer's address always has a port.
	if strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1 {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return netip.Addr{}
		}
		addr = ap.Addr()
	} else {
		var err error
		if addr, err = netip.ParseAddr(s); err != nil {
			return netip.Addr{}
		}
	}
	return addr.WithZone("").Unmap()
}

// Bucket is the address a client's attempts are counted under: its own for IPv4, its /64 for
// IPv6, the block one subscriber is usually given, so that hopping between the addresses of
// one's own block buys nothing.
func Bucket(addr netip.Addr) netip.Addr {
	if addr.Is6() {
		if p, err := addr.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return addr
}
