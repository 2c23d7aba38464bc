package keycheck

import (
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/clientaddr"
	"github.com/switchboard-dev/switchboard/internal/metrics"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
	"github.com/switchboard-dev/switchboard/internal/server/workload/dpop"
	"github.com/switchboard-dev/switchboard/internal/server/workload/satoken"
)

// A key bound to workloads (APIKey spec.binding, as the operator recorded it in the key's hash
// Secret: keyindex.Binding) is answered only when its request proves it comes from a bound
// workload, by one of:
//
//   - a projected ServiceAccount token of the server's audience (Switchboard-Workload-Token),
//     verified (internal/server/workload/satoken: the cluster's keys, a live pod), issued in the
//     key's namespace to a bound ServiceAccount, or whose workload's SPIFFE ID
//     (spiffe://<trustDomain>/ns/<namespace>/sa/<name>) is bound;
//   - the peer principal a gateway authenticated by mutual TLS, equal to a bound SPIFFE ID: on
//     ext_authz, its attributes (attributes.source.principal, which Istio sets); on /v1 and
//     forward-auth, the SPIFFE ID in the client-certificate header an edge proxy sets, read only
//     when the server is told its name (binding.clientCertHeader) and only from a peer in
//     trustedProxies (clientcert.go). Never from a header a client talking to the server could
//     send. Trusting it is trusting the gateway: whoever can call the ext_authz port can claim
//     any principal, which is why that port is for gateways only (authz.grpc.gateways), and
//     whoever is in trustedProxies can set the header;
//   - a DPoP-shaped proof (the DPoP header) signed by a bound public key, for this method and
//     URL, fresh, never seen before, whose ath is the presented key's SHA-256
//     (internal/server/workload/dpop).
//
// Otherwise mode Enforce refuses the request (403 API_KEY_WRONG_WORKLOAD, whose message never
// says which workloads are bound) and ReportOnly admits it; both count it
// (switchboard_api_binding_total) and record its presenter for status.binding (at most
// MaxBindingPresenters a key, keyindex.BindingUse). The check comes right after
// authentication: a wrong workload learns nothing of the key's policy and spends none of its
// budget or credits. A key without a binding pays one nil check.

// Header names of the proofs a request carries.
const (
	// HeaderWorkloadToken carries a projected ServiceAccount token.
	HeaderWorkloadToken = "Switchboard-Workload-Token"
	// HeaderDPoP carries a DPoP-shaped proof.
	HeaderDPoP = dpop.HeaderName
	// canonicalDPoP is HeaderDPoP as an http.Header keys it (textproto's canonical form).
	canonicalDPoP = "Dpop"
)

// DPoPValues are the values of a request's DPoP field.
func DPoPValues(h http.Header) []string { return h[canonicalDPoP] }

const msgWrongWorkload = "This API key is bound to workloads, and the request carries no proof of its workload, or one the key does not accept: send the workload's ServiceAccount token in the " +
	HeaderWorkloadToken + " header, or a DPoP proof in the DPoP header signed by a key the binding names."

// Proofs are what a request carries that can prove which workload presents it. Each protocol
// reads them from its own request; the decision asks only for a bound key, so a bearer key's
// request never reads them.
type Proofs interface {
	// WorkloadToken is the Switchboard-Workload-Token value ("" when there is not exactly one).
	WorkloadToken() string
	// DPoP is the DPoP value ("" when there is not exactly one).
	DPoP() string
	// URL is the request's URL as the client addressed it (scheme, host, path), which a DPoP
	// proof names; "" when it cannot be known.
	URL() string
	// PeerPrincipal is the principal the gateway authenticated the client as (ext_authz only;
	// "" otherwise).
	PeerPrincipal() string
}

// One is the single value of a header field, or "" when it is absent or repeated: a proof
// carried twice proves nothing.
func One(values []string) string {
	if len(values) != 1 {
		return ""
	}
	return values[0]
}

// HTTPProofs are the proofs of /v1's own request: its headers, and its URL as the client
// addressed it: the request's scheme (https over TLS) and Host, or, from a peer in
// trustedProxies (a TLS-terminating ingress), its X-Forwarded-Proto and X-Forwarded-Host.
type HTTPProofs struct{ Request *http.Request }

// WorkloadToken is Proofs.WorkloadToken.
func (h HTTPProofs) WorkloadToken() string { return One(h.Request.Header[HeaderWorkloadToken]) }

// DPoP is Proofs.DPoP.
func (h HTTPProofs) DPoP() string { return One(DPoPValues(h.Request.Header)) }

// URL is Proofs.URL, without the trusted proxies' word (the decision adds it: forwardedURL).
func (h HTTPProofs) URL() string {
	r := h.Request
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + r.URL.EscapedPath()
}

// PeerPrincipal is Proofs.PeerPrincipal: none over HTTP.
func (HTTPProofs) PeerPrincipal() string { return "" }

// proofURL is the URL a DPoP proof of req must name: for /v1, the one its trusted proxy says
// the client addressed when it says so.
func (c *Checker) proofURL(req *Request) string {
	h, ok := req.Proofs.(HTTPProofs)
	if !ok || !clientaddr.Trusted(clientaddr.Parse(h.Request.RemoteAddr), c.trusted) {
		return req.Proofs.URL()
	}
	proto, host := One(h.Request.Header["X-Forwarded-Proto"]), One(h.Request.Header["X-Forwarded-Host"])
	if proto == "" && host == "" {
		return req.Proofs.URL()
	}
	if proto == "" {
		proto = "http"
		if h.Request.TLS != nil {
			proto = "https"
		}
	}
	if host == "" {
		host = h.Request.Host
	}
	return proto + "://" + host + h.Request.URL.EscapedPath()
}

// TokenVerifier verifies a ServiceAccount token (satoken.Verifier).
type TokenVerifier interface {
	Verify(ctx context.Context, token string) (satoken.Workload, error)
}

// The bindings' decisions, by result and proof, never by key; and why proofs were refused.
var (
	bindingDecisions = metrics.Registered.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_api_binding_total",
		Help: "Requests of keys bound to workloads, by result (proven: a bound workload; reported: none, admitted by mode ReportOnly; refused: none, 403 API_KEY_WRONG_WORKLOAD) and by the proof that identified the presenter (token, peer, dpop, or none).",
	}, []string{"result", "proof"})
	tokenRefusals = metrics.Registered.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_api_binding_token_refusals_total",
		Help: "ServiceAccount tokens presented with bound keys and refused, by reason (disabled: the server verifies no tokens, binding.serviceAccountTokens).",
	}, []string{"reason"})
	dpopRefusals = metrics.Registered.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_api_binding_dpop_refusals_total",
		Help: "DPoP proofs presented with bound keys and refused, by reason.",
	}, []string{"reason"})

	// bindingCounters are bindingDecisions' series, resolved once: [result][proof].
	bindingCounters [3][4]prometheus.Counter
)

// The results and proofs of switchboard_api_binding_total, by index.
var (
	bindingResults = [...]string{"proven", "reported", "refused"}
	bindingProofs  = [...]string{"none", "token", "peer", "dpop"}
)

const (
	resultProven = iota
	resultReported
	resultRefused
)

const tokenDisabled = "disabled"

func init() {
	for i, r := range bindingResults {
		for j, p := range bindingProofs {
			bindingCounters[i][j] = bindingDecisions.WithLabelValues(r, p)
		}
	}
	for _, r := range satoken.Reasons {
		tokenRefusals.WithLabelValues(string(r))
	}
	tokenRefusals.WithLabelValues(tokenDisabled)
	for _, r := range dpop.Reasons {
		dpopRefusals.WithLabelValues(string(r))
	}
}

// bound decides the binding of an authenticated key: the refusal when mode Enforce and nothing
// proves a bound workload (refused true), else nothing to say. It records the presenter.
func (c *Checker) bound(ctx context.Context, auth *authOutcome, req *Request) (Verdict, bool) {
	b, key := auth.binding, auth.key
	var p keyindex.Presenter
	if req.Proofs != nil {
		c.prove(ctx, b, auth, req, &p)
	}
	if client, known := c.clientOf(req); known {
		p.Address = client
	}
	key.Usage().Binding().Record(&p, req.Now)
	switch {
	case p.Bound:
		bindingCounters[resultProven][p.Kind].Inc()
	case !b.Enforce:
		bindingCounters[resultReported][p.Kind].Inc()
	default:
		bindingCounters[resultRefused][p.Kind].Inc()
		return Verdict{auth: *auth, Status: http.StatusForbidden, Code: apicode.KeyWrongWorkload, Message: msgWrongWorkload}, true
	}
	return Verdict{}, false
}

// prove fills p with the first proof of req that shows a bound workload, else with the last
// presenter it identified (not bound), else leaves it empty.
func (c *Checker) prove(ctx context.Context, b *keyindex.Binding, auth *authOutcome, req *Request, p *keyindex.Presenter) {
	proofs := req.Proofs
	if token := proofs.WorkloadToken(); token != "" {
		if c.proveToken(ctx, b, auth.key.Namespace, token, p) {
			return
		}
	}
	peer := proofs.PeerPrincipal()
	if peer == "" && req.HTTP != nil {
		peer = c.forwardedPeer(req.HTTP)
	}
	if peer != "" {
		*p = keyindex.Presenter{Kind: keyindex.PrincipalPeer, A: peer, Bound: b.AllowsSPIFFEID(peer)}
		if p.Bound {
			return
		}
	}
	if len(b.PublicKeys) > 0 {
		if proof := proofs.DPoP(); proof != "" {
			c.proveDPoP(b, auth, req, proof, p)
		}
	}
}

// proveToken verifies token and says whether its workload is bound; an identified workload is
// recorded in p either way.
func (c *Checker) proveToken(ctx context.Context, b *keyindex.Binding, namespace, token string, p *keyindex.Presenter) bool {
	if c.tokens == nil {
		tokenRefusals.WithLabelValues(tokenDisabled).Inc()
		return false
	}
	w, err := c.tokens.Verify(ctx, token)
	if err != nil {
		tokenRefusals.WithLabelValues(string(satoken.ReasonOf(err))).Inc()
		return false
	}
	bound := w.Namespace == namespace &&
		(b.AllowsServiceAccount(w.ServiceAccount) || len(b.SPIFFEIDs) > 0 && b.AllowsSPIFFEID(w.SPIFFEID(c.trustDomain)))
	*p = keyindex.Presenter{Kind: keyindex.PrincipalServiceAccount, A: w.Namespace, B: w.ServiceAccount, Bound: bound}
	return bound
}

// proveDPoP verifies proof against the request and the key's bound public keys.
func (c *Checker) proveDPoP(b *keyindex.Binding, auth *authOutcome, req *Request, proof string, p *keyindex.Presenter) {
	proven, err := c.proofs.Verify(proof, dpop.Request{Method: req.Method, URL: c.proofURL(req),
		KeyHash: apikey.Sum(auth.wellFormed), Thumbprints: b.PublicKeys})
	if err != nil {
		dpopRefusals.WithLabelValues(string(dpop.ReasonOf(err))).Inc()
		return
	}
	*p = keyindex.Presenter{Kind: keyindex.PrincipalPublicKey, A: proven.Thumbprint, Bound: true}
}
