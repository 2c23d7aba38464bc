package keycheck

import (
	"errors"
	"net/http"
	"net/textproto"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/internal/clientaddr"
	"github.com/switchboard-dev/switchboard/internal/metrics"
	"github.com/switchboard-dev/switchboard/internal/server/keycheck/xfcc"
)

// The mesh peer of an HTTP request (/v1, forward-auth), where ext_authz has
// attributes.source.principal: the SPIFFE ID in the client-certificate header an edge proxy
// that terminated mutual TLS sets (Envoy's X-Forwarded-Client-Cert, SANITIZE_SET, with the URI
// SAN). It is read only when the server is told its name (binding.clientCertHeader) and only
// from a peer in trustedProxies, the trust X-Forwarded-For has: a client that reaches the
// server otherwise never claims a principal. Trusting it is trusting every proxy between the
// edge and the server to have replaced a client's copy of the header.

// DefaultClientCertHeader is the header Envoy sets: the usual value of
// Config.ClientCertHeader.
const DefaultClientCertHeader = "X-Forwarded-Client-Cert"

// The reasons a client-certificate header of a bound key's request proved no peer.
const (
	certUntrusted = "untrusted_peer" // sent by a peer not in trustedProxies
	certRepeated  = "repeated"       // the field more than once
	certBounds    = "bounds"         // past the header's bounds (length, elements, pairs)
	certMalformed = "malformed"      // not XFCC
	certNoSPIFFE  = "no_spiffe_id"   // the nearest proxy's element has no single SPIFFE ID
)

var clientCertRefusals = metrics.Registered.NewCounterVec(prometheus.CounterOpts{
	Name: "switchboard_api_binding_client_cert_refusals_total",
	Help: "Client-certificate headers (binding.clientCertHeader) sent with bound keys that proved no peer, by reason (untrusted_peer: from a peer not in trustedProxies).",
}, []string{"reason"})

func init() {
	for _, r := range []string{certUntrusted, certRepeated, certBounds, certMalformed, certNoSPIFFE} {
		clientCertRefusals.WithLabelValues(r)
	}
}

// canonicalHeader is name as http.Header keys it; "" stays "".
func canonicalHeader(name string) string {
	if name == "" {
		return ""
	}
	return textproto.CanonicalMIMEHeaderKey(name)
}

// forwardedPeer is the SPIFFE ID the client-certificate header of req says the edge
// authenticated, when the server reads one and req's peer is a trusted proxy; else "".
func (c *Checker) forwardedPeer(r *http.Request) string {
	if c.clientCertHeader == "" {
		return ""
	}
	values := r.Header[c.clientCertHeader]
	if len(values) == 0 {
		return ""
	}
	if !clientaddr.Trusted(clientaddr.Parse(r.RemoteAddr), c.trusted) {
		clientCertRefusals.WithLabelValues(certUntrusted).Inc()
		return ""
	}
	if len(values) > 1 {
		clientCertRefusals.WithLabelValues(certRepeated).Inc()
		return ""
	}
	id, err := xfcc.SPIFFEID(values[0])
	switch {
	case err == nil:
		return id
	case errors.Is(err, xfcc.ErrNoSPIFFEID):
		clientCertRefusals.WithLabelValues(certNoSPIFFE).Inc()
	case errors.Is(err, xfcc.ErrMalformed):
		clientCertRefusals.WithLabelValues(certMalformed).Inc()
	default:
		clientCertRefusals.WithLabelValues(certBounds).Inc()
	}
	return ""
}
