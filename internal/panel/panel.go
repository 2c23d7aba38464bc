// Package panel serves the web panel's "API keys" section. Every action runs against the
// Kubernetes API server as the signed-in person, so that RBAC decides what they may do: with
// their own bearer token (pasted, or the ID token of single sign-on in token mode), or, in
// single sign-on's impersonate mode, with the panel's ServiceAccount impersonating them through
// constrained impersonation limited to the panel's resources (ImpersonationRules). Otherwise the
// panel's own credentials serve for nothing but TokenReview.
package panel

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/config"
	"github.com/switchboard-dev/switchboard/internal/keyclient/reveal"
	"github.com/switchboard-dev/switchboard/internal/panel/loopback"
)

// Defaults of Deps.
const (
	DefaultSessionIdleTimeout = 30 * time.Minute
	DefaultSessionMaxAge      = 8 * time.Hour
	DefaultRevealTimeout      = 20 * time.Second
	DefaultPollInterval       = 250 * time.Millisecond
)

// Deps are what the panel takes besides its settings: what only a process (or a test) has, and
// the session's timings, which are not configured. The zero value of each field is its default.
type Deps struct {
	// RESTConfig locates the API server (required); its credentials are used for nothing but
	// TokenReview (and, in impersonate mode, impersonation).
	RESTConfig *rest.Config
	// Listener, when set, is served by Serve in place of listening on the configuration's
	// listen (tests pass ":0" listeners).
	Listener net.Listener
	// Logger gets one line per sign-in and per change (user, namespace, APIKey, hint). Keys
	// and tokens never reach it. Default: controller-runtime's logger, named "panel".
	Logger logr.Logger
	// Clock tells the time; tests inject a fake one (default the real clock).
	Clock clock.Clock
	// SessionIdleTimeout ends a session unused for this long (default 30 minutes).
	SessionIdleTimeout time.Duration
	// SessionMaxAge ends a session this long after sign-in, used or not (default 8 hours).
	SessionMaxAge time.Duration
	// RevealTimeout bounds the wait for the operator to issue a created or rotated key
	// (default 20 seconds, so that the answer is written well within the 30-second write
	// timeout of the listener that serves the panel).
	RevealTimeout time.Duration
	// PollInterval is how often the panel reads an APIKey while waiting for the operator
	// (default 250 milliseconds).
	PollInterval time.Duration
}

// complete fills d's zero fields with their defaults.
func (d *Deps) complete() {
	if d.Logger.GetSink() == nil {
		d.Logger = ctrl.Log.WithName("panel")
	}
	for _, t := range []struct {
		field *time.Duration
		def   time.Duration
	}{
		{&d.SessionIdleTimeout, DefaultSessionIdleTimeout}, {&d.SessionMaxAge, DefaultSessionMaxAge},
		{&d.RevealTimeout, DefaultRevealTimeout}, {&d.PollInterval, DefaultPollInterval},
	} {
		if *t.field == 0 {
			*t.field = t.def
		}
	}
	if d.Clock == nil {
		d.Clock = clock.RealClock{}
	}
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// handler is the panel. Its fields are read-only after NewHandler, except the session store,
// which locks itself.
type handler struct {
	settings *configv1alpha1.PanelSettings
	deps     Deps
	// proxies are the trusted proxies in front of the panel, whose X-Forwarded-For is believed
	// when sign-in attempts are counted per client address, by the rules of /v1
	// (clientaddr.From). Empty: the peer's address is the client's, so behind a proxy everyone
	// shares the proxy's bucket.
	proxies  []netip.Prefix
	base     *rest.Config
	reviewer kubernetes.Interface
	sessions *sessionStore
	logins   *loginLimiter
	pages    map[string]*template.Template
	mux      *http.ServeMux
	// oidc is the identity provider's side of sign-in; nil without the settings' oidc.
	oidc *oidcAuth
	// reveal claims keys for people through the operator, in impersonate mode; nil otherwise.
	reveal *reveal.Client
	// csp is contentSecurityPolicy, with the provider's origin as a form target when there is
	// one: signing out posts to the panel, which redirects the browser to the provider's
	// end-session page, and browsers hold form-action to the redirect's target too.
	csp string
	// interceptUser, when set (by tests only), wraps each session's client: a test stages there
	// what another identity does at the same moment.
	interceptUser func(client.WithWatch) client.WithWatch
}

// NewHandler returns the panel's HTTP handler of the settings s (a PanelConfiguration's, or a
// ServerConfiguration's panel section), behind the trusted proxies trustedProxies (CIDRs or
// addresses, the configuration's spelling: the server passes its own). s is defaulted and
// validated first. deps.RESTConfig's credentials are used for nothing but TokenReview (the
// panel's service account needs "create" on tokenreviews.authentication.k8s.io, as granted by
// the system:auth-delegator ClusterRole).
func NewHandler(s *configv1alpha1.PanelSettings, trustedProxies []string, deps Deps) (http.Handler, error) {
	return newHandler(s, trustedProxies, deps)
}

func newHandler(s *configv1alpha1.PanelSettings, trustedProxies []string, deps Deps) (*handler, error) {
	cfg := deps.RESTConfig
	if cfg == nil {
		return nil, errors.New("panel: no rest.Config to reach the API server")
	}
	configv1alpha1.SetDefaults_PanelSettings(s)
	if errs := config.ValidatePanelSettings(s); len(errs) > 0 {
		return nil, fmt.Errorf("panel: %w", errs.ToAggregate())
	}
	proxies, err := config.ParsePrefixes(trustedProxies)
	if err != nil {
		return nil, fmt.Errorf("panel: %w", err)
	}
	deps.complete()
	reviewer, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("panel: building the TokenReview client: %w", err)
	}
	pages, err := parsePages()
	if err != nil {
		return nil, fmt.Errorf("panel: parsing templates: %w", err)
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, fmt.Errorf("panel: static files: %w", err)
	}
	h := &handler{
		settings: s,
		deps:     deps,
		proxies:  proxies,
		base:     rest.CopyConfig(cfg),
		reviewer: reviewer,
		sessions: newSessionStore(deps.Clock, deps.SessionIdleTimeout, deps.SessionMaxAge, int(*s.MaxSessions), int(*s.MaxSessionsPerUser)),
		logins:   newLoginLimiter(*s.LoginRate, int(*s.LoginBurst)),
		pages:    pages,
		mux:      http.NewServeMux(),
		csp:      contentSecurityPolicy,
	}
	if o := s.OIDC; o != nil {
		if h.oidc, err = newOIDCAuth(o); err != nil {
			return nil, fmt.Errorf("panel: %w", err)
		}
		if o.Mode == configv1alpha1.OIDCModeImpersonate {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := checkImpersonationGrant(ctx, reviewer, o.AllowLegacyImpersonation, deps.Logger)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("panel: impersonate mode: %w", err)
			}
			ns, name, _ := strings.Cut(o.RevealCAConfigMap, "/") // validated: NAMESPACE/NAME
			ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
			err = checkRevealGrant(ctx, reviewer, ns, name)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("panel: impersonate mode: %w", err)
			}
			revealURL := strings.TrimSuffix(o.RevealURL, "/")
			if h.reveal, err = reveal.NewClient(cfg, revealURL, client.ObjectKey{Namespace: ns, Name: name}); err != nil {
				return nil, fmt.Errorf("panel: impersonate mode: the operator's reveal endpoint: %w", err)
			}
		}
		h.csp = strings.Replace(contentSecurityPolicy, "form-action 'self'", "form-action 'self' "+h.oidc.issuerOrigin(), 1)
		h.mux.HandleFunc("GET "+oidcLoginPath, h.oidcLogin)
		h.mux.HandleFunc("GET "+callbackPath, h.oidcCallback)
	}
	h.mux.Handle("GET /static/", http.StripPrefix("/static/", staticHandler(static)))
	h.mux.HandleFunc("GET /{$}", h.root)
	h.mux.HandleFunc("GET /login", h.loginForm)
	h.mux.HandleFunc("POST /login", h.login)
	h.mux.HandleFunc("POST /logout", h.withSession(h.logout))
	h.mux.HandleFunc("GET /keys", h.withSession(h.keysPage))
	h.mux.HandleFunc("POST /keys/create", h.withSession(h.createKey))
	h.mux.HandleFunc("GET /keys/rotate", h.withSession(h.rotateForm))
	h.mux.HandleFunc("POST /keys/rotate", h.withSession(h.rotateKey))
	h.mux.HandleFunc("GET /keys/revoke", h.withSession(h.revokeForm))
	h.mux.HandleFunc("POST /keys/revoke", h.withSession(h.revokeKey))
	h.mux.HandleFunc("POST /keys/reveal", h.withSession(h.revealKey))
	return h, nil
}

// maxFormBytes bounds a form body: a bearer token is a few kilobytes at most.
const maxFormBytes = 64 << 10

// ServeHTTP sets the security headers every response carries, then routes.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", h.csp)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Cross-Origin-Opener-Policy", "same-origin")
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	}
	// The panel alone decides whom it acts as: impersonation headers a client sends mean nothing
	// here (and never reach the API server, whose requests the panel builds itself).
	for k := range r.Header {
		if strings.HasPrefix(k, "Impersonate-") {
			r.Header.Del(k)
		}
	}
	if loopback.Shared(r.Host) && fromBrowser(r) {
		toPrivateHost(w, r)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// fromBrowser reports a request a browser made: browsers send Fetch Metadata (Sec-Fetch-*) with
// every request, and other clients (curl, kubectl, the tests' HTTP clients) none.
func fromBrowser(r *http.Request) bool { return r.Header.Get("Sec-Fetch-Mode") != "" }

// toPrivateHost sends a browser that reached the panel on a host every local web app shares
// (127.0.0.1 or localhost, as through a port-forward) to a host of its own, a new random name
// under .localhost on the same port (internal/panel/loopback): browsers scope cookies by host, not by
// port, so a session cookie set on 127.0.0.1 would be sent to every other local app the person
// visits. Each redirect picks a new name, so another local app that asks cannot learn the one a
// person uses. Anything but a page load is refused: no form of the panel is served on a shared
// host, so none is posted there.
func toPrivateHost(w http.ResponseWriter, r *http.Request) {
	_, port, err := net.SplitHostPort(r.Host)
	if err != nil || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		w.Header().Set("Cache-Control", "no-store")
		http.Error(w, "403 Forbidden: open the panel at the address `kubectl switchboard panel` prints (http://sb-….localhost:PORT/); "+
			"on 127.0.0.1 or localhost other local web apps would receive its cookies.", http.StatusForbidden)
		return
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	target := url.URL{Scheme: scheme, Host: net.JoinHostPort(loopback.PrivateHost(), port), Path: r.URL.Path, RawQuery: r.URL.RawQuery}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, target.String(), http.StatusTemporaryRedirect)
}

// contentSecurityPolicy allows nothing but the panel's own script, style sheet and images:
// no inline script, no framing, forms only to the panel itself.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// staticHandler serves the embedded CSS and JavaScript. They change only with the binary,
// but a short max-age keeps an upgraded panel from running yesterday's script.
func staticHandler(static fs.FS) http.Handler {
	files := http.FileServerFS(static)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		files.ServeHTTP(w, r)
	})
}

// root sends signed-in people to their keys and everybody else to the sign-in page.
func (h *handler) root(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.currentSession(r); ok {
		http.Redirect(w, r, "/keys", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
