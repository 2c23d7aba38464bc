package keycheck

import (
	"net/http"
	"net/netip"

	"github.com/switchboard-dev/switchboard/internal/clientaddr"
)

// The client's address, as the failure limiter and the keys' source ranges judge it.

// ClientAddress is the address of r's client by the checker's trusted proxies, as its
// decisions judge it (and as access logs should show it).
func (c *Checker) ClientAddress(r *http.Request) netip.Addr { return clientAddress(r, c.trusted) }

// ClientAddressFrom is the address of the client whose request came from peer with the
// X-Forwarded-For values forwardedFor, by the checker's trusted proxies: for protocols that
// carry the peer otherwise than in an http.Request (Envoy's ext_authz).
func (c *Checker) ClientAddressFrom(peer netip.Addr, forwardedFor []string) netip.Addr {
	return clientaddr.From(peer, forwardedFor, c.trusted)
}

// clientAddress finds the address of the client: clientaddr.From, the rules the panel's sign-in
// limiter and ext_authz share, applied to the request's peer and X-Forwarded-For. The zero Addr
// means the peer's address itself could not be read. It does not allocate for IPv4 and for
// IPv6 without a zone.
func clientAddress(r *http.Request, trusted []netip.Prefix) netip.Addr {
	return clientaddr.From(clientaddr.Parse(r.RemoteAddr), r.Header["X-Forwarded-For"], trusted)
}
