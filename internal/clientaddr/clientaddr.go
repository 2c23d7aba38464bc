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

// Range is a range of client addresses in their one spelling: masked, and an IPv4-mapped IPv6
// range (::ffff:10.0.0.0/104) written as the IPv4 range it is, as Parse writes the addresses it
// must contain (otherwise it would contain no client).
func Range(p netip.Prefix) netip.Prefix {
	p = p.Masked()
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p
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

// From is the client's address as every limiter of switchboard judges it, from the peer's
// address and the X-Forwarded-For values however the protocol carried them (an HTTP header,
// Envoy's ext_authz attributes). X-Forwarded-For is believed only when the peer is in trusted;
// it is then read right to left, skipping trusted proxies, and the first other address is the
// client (the one a trusted proxy saw). A hop that is not an address ends the walk at the last
// address believed: what lies left of it was written by someone no trusted proxy vouches for.
// It lives here so that /v1 and the panel count one client alike. It does not allocate for
// IPv4 and for IPv6 without a zone.
func From(peer netip.Addr, values []string, trusted []netip.Prefix) netip.Addr {
	if len(trusted) == 0 || !Trusted(peer, trusted) {
		return peer
	}
	client := peer
	for i := len(values) - 1; i >= 0; i-- {
		v := values[i]
		for v != "" {
			j := strings.LastIndexByte(v, ',')
			hop := strings.TrimSpace(v[j+1:])
			if j < 0 {
				v = ""
			} else {
				v = v[:j]
			}
			if hop == "" {
				continue
			}
			addr := Parse(hop)
			if !addr.IsValid() {
				return client
			}
			client = addr
			if !Trusted(addr, trusted) {
				return addr
			}
		}
	}
	return client
}

// Trusted reports whether addr is in one of the trusted prefixes; the zero Addr never is.
func Trusted(addr netip.Addr, trusted []netip.Prefix) bool {
	if !addr.IsValid() {
		return false
	}
	for _, p := range trusted {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}
