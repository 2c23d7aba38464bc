package server

import (
	"net/http"
	"net/netip"

	"github.com/switchboard-dev/switchboard/internal/clientaddr"
)

// The client's address, as the failure limiter and the keys' source ranges judge it.

// clientAddress finds the address of the client: clientaddr.From, the rules the panel's sign-in
// limiter and ext_authz share, applied to the request's peer and X-Forwarded-For. The zero Addr
// means the peer's address itself could not be read. It does not allocate for IPv4 and for
// IPv6 without a zone.
func clientAddress(r *http.Request, trusted []netip.Prefix) netip.Addr {
	return clientaddr.From(clientaddr.Parse(r.RemoteAddr), r.Header["X-Forwarded-For"], trusted)
}
