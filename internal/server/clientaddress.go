package server

import (
	"net/http"
	"net/netip"
	"strings"

	"github.com/switchboard-dev/switchboard/internal/clientaddr"
)

// The client's address, as the failure limiter and the keys' source ranges judge it.

// clientAddress finds the address of the client. X-Forwarded-For is believed only when the
// peer is a trusted proxy; it is then read right to left, skipping trusted proxies, and the first
// other address is the client (the one a trusted proxy saw). A hop that is not an address ends
// the walk at the last address believed: what lies left of it was written by someone no trusted
// proxy vouches for. The zero Addr means the peer's address itself could not be read. It does
// not allocate for IPv4 and for IPv6 without a zone.
func clientAddress(r *http.Request, trusted []netip.Prefix) netip.Addr {
	return clientFrom(clientaddr.Parse(r.RemoteAddr), r.Header["X-Forwarded-For"], trusted)
}

// clientFrom is clientAddress from the peer's address and the X-Forwarded-For values, however
// the protocol carried them (Envoy's ext_authz gives the address its own peer had).
func clientFrom(peer netip.Addr, values []string, trusted []netip.Prefix) netip.Addr {
	if len(trusted) == 0 || !isTrusted(peer, trusted) {
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
			addr := clientaddr.Parse(hop)
			if !addr.IsValid() {
				return client
			}
			client = addr
			if !isTrusted(addr, trusted) {
				return addr
			}
		}
	}
	return client
}

func isTrusted(addr netip.Addr, trusted []netip.Prefix) bool {
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
