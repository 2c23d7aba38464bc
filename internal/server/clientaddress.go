package server

import (
	"net/http"
	"net/netip"

	"github.com/switchboard-dev/switchboard/internal/clientaddr"
)

// The client's address, as the failure limiter and the keys' source ranges judge it.

// clientAddress finds the address of the client: clientaddr.From, the rules the panel's sign-in
// limiter shares, applied to the request's peer and X-Forwarded-For. The zero Addr means the
// peer's address itself could not be read. It does not allocate for IPv4 and for IPv6 without
// a zone.
func clientAddress(r *http.Request, trusted []netip.Prefix) netip.Addr {
	return clientFrom(clientaddr.Parse(r.RemoteAddr), r.Header["X-Forwarded-For"], trusted)
}

// clientFrom is clientAddress from the peer's address and the X-Forwarded-For values, however
// the protocol carried them (Envoy's ext_authz gives the address its own peer had).
func clientFrom(peer netip.Addr, values []string, trusted []netip.Prefix) netip.Addr {
	return clientaddr.From(peer, values, trusted)
}

func isTrusted(addr netip.Addr, trusted []netip.Prefix) bool {
	return clientaddr.Trusted(addr, trusted)
}
