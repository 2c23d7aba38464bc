package server

import (
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/ratelimit"
)

// The forward-auth endpoints: the decision of check.go for gateways that ask another server
// before proxying (Traefik forwardAuth, Caddy forward_auth, NGINX auth_request). They have a
// listener of their own (--authz-http-listen), never the API's. The path must be exactly one of
// the two below: Envoy's HTTP ext_authz appends the client's path to its prefix, which would
// let a client choose the audience of a route configured without one, so Envoy uses gRPC.
//
//	/authz/<audience>        200 allowed; else the /v1 status (401, 403, 429, 503) and JSON error
//	/authz/nginx/<audience>  the same, but every denial other than 401 is 403: NGINX's
//	                         auth_request turns any other status into 500
//
// The audience is in the URL the gateway is configured with, never in anything the client
// sends; /authz (no audience) is a route that names none, which only keys without audiences
// may use. The gateway forwards the client's Authorization (every one of them does by
// default) and, with --trusted-proxies covering the gateway, its X-Forwarded-For.
//
// An allowed request is answered with the key's identity, for the gateway to copy upstream:
// HeaderKey (namespace/name), HeaderKeyUID and HeaderKeyHint. A denial carries HeaderCode, so
// that a gateway that replaces the body (NGINX) can still say which.
const (
	HeaderKey     = "X-Switchboard-Key"
	HeaderKeyUID  = "X-Switchboard-Key-Uid"
	HeaderKeyHint = "X-Switchboard-Key-Hint"
	HeaderCode    = "X-Switchboard-Code"

	// ForwardAuthPath is the forward-auth endpoints' path prefix; ForwardAuthNginxPath is
	// NGINX's compatibility mode.
	ForwardAuthPath      = "/authz"
	ForwardAuthNginxPath = "/authz/nginx"
)

// forwardAuth serves the forward-auth endpoints.
type forwardAuth struct {
	api *api
	log logr.Logger
}

func (f *forwardAuth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	audience, nginx, ok := forwardAuthRoute(r.URL.Path)
	if !ok {
		writeError(w, http.StatusNotFound, CodeNotFound, "There is nothing at this path. The forward-auth endpoints are "+ForwardAuthPath+"/<audience> and "+ForwardAuthNginxPath+"/<audience>, where <audience> is a DNS label.")
		return
	}
	req := checkRequest{authorization: r.Header["Authorization"], httpReq: r, audience: audience}
	v := f.api.check(r.Context(), &req, f.api.now(start))
	h := w.Header()
	h["X-Content-Type-Options"] = headerNoSniff
	if v.policy != nil {
		ratelimit.SetHeaders(h, v.policy, v.result)
	}
	if v.allowed() {
		key := v.auth.key
		h.Set(HeaderKey, key.Namespace+"/"+key.Name)
		h.Set(HeaderKeyUID, string(key.UID))
		h.Set(HeaderKeyHint, apikey.Hint(v.auth.wellFormed))
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
	} else {
		h.Set(HeaderCode, v.code)
		if nginx && v.status != http.StatusUnauthorized {
			v.status = http.StatusForbidden
		}
		writeDenial(w, &v)
	}
	countCheck(protocolHTTP, &v, time.Since(start))
	if log := f.log.V(1); log.Enabled() {
		hint := ""
		if v.auth.wellFormed != "" {
			hint = apikey.Hint(v.auth.wellFormed)
		}
		log.Info("check", "audience", audience, "status", v.status, "code", v.code, "key", hint,
			"client", clientAddress(r, f.api.trusted).String())
	}
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
	if !validAudience(rest) {
		return "", false, false
	}
	return rest, nginx, true
}
