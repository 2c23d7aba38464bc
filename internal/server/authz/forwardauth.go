package authz

import (
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
	"github.com/switchboard-dev/switchboard/internal/server/apierror"
	"github.com/switchboard-dev/switchboard/internal/server/keycheck"
)

// The forward-auth endpoints: the decision for gateways that ask another server before
// proxying (Traefik forwardAuth, Caddy forward_auth, NGINX auth_request). They have a listener
// of their own (--authz-http-listen), never the API's. The path must be exactly one of the two
// below: Envoy's HTTP ext_authz appends the client's path to its prefix, which would let a
// client choose the audience of a route configured without one, so Envoy uses gRPC.
//
//	/authz/<audience>        200 allowed; else the /v1 status (401, 403, 429, 503) and JSON error
//	/authz/nginx/<audience>  the same, but every denial other than 401 is 403: NGINX's
//	                         auth_request turns any other status into 500
//
// The audience is in the URL the gateway is configured with, never in anything the client
// sends; /authz (no audience) is a route that names none, which only keys without audiences
// may use. The gateway forwards the client's Authorization (every one of them does by
// default) and, with --trusted-proxies covering the gateway, its X-Forwarded-For; for keys with
// permissions, the original request's method and URI (originalRequest).
//
// An allowed request is answered with the key's identity, for the gateway to copy upstream:
// HeaderKey (namespace/name), HeaderKeyUID and HeaderKeyHint. A denial carries HeaderCode, so
// that a gateway that replaces the body (NGINX) can still say which.
const (
	// ForwardAuthPath is the forward-auth endpoints' path prefix; ForwardAuthNginxPath is
	// NGINX's compatibility mode.
	ForwardAuthPath      = "/authz"
	ForwardAuthNginxPath = "/authz/nginx"
)

// ForwardAuth serves the forward-auth endpoints.
type ForwardAuth struct {
	checker *keycheck.Checker
	log     logr.Logger
}

// NewForwardAuth returns the forward-auth endpoints of checker's decision; log receives a line
// per check at verbosity 1.
func NewForwardAuth(checker *keycheck.Checker, log logr.Logger) *ForwardAuth {
	return &ForwardAuth{checker: checker, log: log}
}

// headerNoSniff is the X-Content-Type-Options value of every answer. It must not be modified.
var headerNoSniff = []string{"nosniff"}

func (f *ForwardAuth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	audience, nginx, ok := forwardAuthRoute(r.URL.Path)
	if !ok {
		apierror.Write(w, http.StatusNotFound, apicode.NotFound, "There is nothing at this path. The forward-auth endpoints are "+ForwardAuthPath+"/<audience> and "+ForwardAuthNginxPath+"/<audience>, where <audience> is a DNS label.")
		return
	}
	req := keycheck.Request{Authorization: r.Header["Authorization"], HTTP: r, Audience: audience, Now: f.checker.Now(start)}
	req.Method, req.Path = originalRequest(r.Header, nginx)
	if nginx {
		req.Proofs = nginxProofs{r}
	} else {
		req.Proofs = forwardedProofs{r}
	}
	v := f.checker.Decide(r.Context(), &req)
	h := w.Header()
	h["X-Content-Type-Options"] = headerNoSniff
	v.SetRateLimitHeaders(h)
	if v.Allowed() {
		key := v.Key()
		h.Set(HeaderKey, key.Namespace+"/"+key.Name)
		h.Set(HeaderKeyUID, string(key.UID))
		h.Set(HeaderKeyHint, asciiField(v.Hint()))
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
	} else {
		h.Set(HeaderCode, v.Code)
		if nginx && v.Status != http.StatusUnauthorized {
			v.Status = http.StatusForbidden
		}
		v.SetDenialHeaders(h)
		if rule, text, ok := v.PermissionRule(); ok {
			h.Set(HeaderPermissionRule, rule)
			h.Set(HeaderPermissionRuleText, asciiField(text))
		}
		apierror.Write(w, v.Status, v.Code, v.Message)
	}
	countCheck(protocolHTTP, &v, time.Since(start))
	if log := f.log.V(1); log.Enabled() {
		log.Info("check", "audience", audience, "status", v.Status, "code", v.Code, "key", v.Hint(),
			"client", f.checker.ClientAddress(r).String())
	}
}

// originalRequest is the method and URI of the request the gateway checks, as it tells them:
// Traefik and Caddy set X-Forwarded-Method and X-Forwarded-Uri; NGINX forwards the client's own
// header fields in its subrequest, so in its mode only what its configuration sets is read,
// X-Original-Method and X-Original-URI (docs/gateways.md). Empty when the gateway tells neither.
func originalRequest(h http.Header, nginx bool) (method, uri string) {
	if nginx {
		return h.Get("X-Original-Method"), h.Get("X-Original-Uri")
	}
	return h.Get("X-Forwarded-Method"), h.Get("X-Forwarded-Uri")
}

// forwardAuthRoute reads the audience of a forward-auth path, and whether it is NGINX's mode.
// /authz/nginx is the audience "nginx"; /authz/nginx/ is NGINX's mode for a route without one.
func forwardAuthRoute(path string) (audience string, nginx, ok bool) {
	rest, found := strings.CutPrefix(path, ForwardAuthPath)
	switch {
	case !found || rest != "" && rest[0] != '/':
		return "", false, false
	case rest == "" || rest == "/":
		return "", false, true
	}
	rest = rest[1:]
	if r, isNginx := strings.CutPrefix(rest, "nginx/"); isNginx {
		if r == "" {
			return "", true, true
		}
		nginx, rest = true, r
	}
	if !switchboardv1alpha1.ValidAudience(rest) {
		return "", false, false
	}
	return rest, nginx, true
}

// forwardedProofs are the proofs of the request a forward-auth gateway checks: the client's
// Switchboard-Workload-Token and DPoP, which the gateway forwards with its header fields, and
// the URL it addressed, from X-Forwarded-Proto, X-Forwarded-Host and X-Forwarded-Uri (Traefik,
// Caddy); "" when the gateway does not tell the host.
type forwardedProofs struct{ r *http.Request }

func (f forwardedProofs) WorkloadToken() string {
	return keycheck.One(f.r.Header[keycheck.HeaderWorkloadToken])
}
func (f forwardedProofs) DPoP() string        { return keycheck.One(keycheck.DPoPValues(f.r.Header)) }
func (forwardedProofs) PeerPrincipal() string { return "" }
func (f forwardedProofs) URL() string {
	h := f.r.Header
	proto, host := keycheck.One(h["X-Forwarded-Proto"]), keycheck.One(h["X-Forwarded-Host"])
	if host == "" {
		return ""
	}
	if proto == "" {
		proto = "https"
	}
	return proto + "://" + host + keycheck.One(h["X-Forwarded-Uri"])
}

// nginxProofs are forwardedProofs in NGINX's mode, where the URL is X-Original-URL, which its
// configuration sets from $scheme://$http_host$request_uri (docs/gateways.md).
type nginxProofs struct{ r *http.Request }

func (n nginxProofs) WorkloadToken() string {
	return keycheck.One(n.r.Header[keycheck.HeaderWorkloadToken])
}
func (n nginxProofs) DPoP() string        { return keycheck.One(keycheck.DPoPValues(n.r.Header)) }
func (nginxProofs) PeerPrincipal() string { return "" }
func (n nginxProofs) URL() string         { return keycheck.One(n.r.Header["X-Original-Url"]) }
