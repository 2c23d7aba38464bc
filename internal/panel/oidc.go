package panel

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/scheme"
)

// defaultProviderName labels the sign-in button when the configuration names no provider.
const defaultProviderName = "single sign-on"

// Paths of the sign-in flow.
const (
	oidcLoginPath = "/oidc/login"
	callbackPath  = configv1alpha1.OIDCCallbackPath
	// flowCookie carries the id of a sign-in in progress. It is SameSite=Lax, unlike the
	// others: the provider's redirect back to the callback is a cross-site navigation, on
	// which a Strict cookie is not sent.
	flowCookie = "switchboard_oidc"
	// flowTTL bounds the time between "Sign in" and the provider's redirect back.
	flowTTL = 10 * time.Minute
	// maxFlows bounds the sign-ins in progress the panel remembers.
	maxFlows = 4096
)

// oidcAuth is the panel's side of the provider: discovery (done on first use, so that the
// panel starts and serves its sign-in page while the provider is unreachable), the pending
// sign-ins, and the client and verifier built from discovery.
type oidcAuth struct {
	// cfg is the configuration's oidc section, defaulted and validated.
	cfg *configv1alpha1.OIDC
	// clientSecret is read from cfg.ClientSecretFile at start. It is sent to the provider's
	// token endpoint only, and never logged.
	clientSecret string
	// scopes are cfg's, with "openid" first when they lack it.
	scopes []string
	// providerName labels the sign-in button ("Sign in with NAME").
	providerName string
	http         *http.Client

	mu       sync.Mutex
	disc     *discovered
	flows    map[string]*flow
	redirect *url.URL
}

// discovered is what the provider's discovery document gave.
type discovered struct {
	oauth      oauth2.Config
	verifier   *oidc.IDTokenVerifier
	endSession string
	revocation string
}

// flow is one sign-in in progress: what the callback must find again.
type flow struct {
	state, nonce, verifier string
	expires                time.Time
}

// newOIDCAuth is the provider's side of sign-in for c, a defaulted and validated oidc section:
// it reads the client secret, and the CA file when c names one. Its errors name the file,
// never what it holds.
func newOIDCAuth(c *configv1alpha1.OIDC) (*oidcAuth, error) {
	b, err := os.ReadFile(c.ClientSecretFile)
	if err != nil {
		return nil, fmt.Errorf("OIDC: reading the client secret file: %w", err)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return nil, fmt.Errorf("OIDC: the client secret file %s is empty", c.ClientSecretFile)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("OIDC: reading the CA file: %w", err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("OIDC: the CA file holds no PEM certificate")
		}
	}
	scopes := c.Scopes
	if !slices.Contains(scopes, oidc.ScopeOpenID) {
		scopes = append([]string{oidc.ScopeOpenID}, scopes...)
	}
	name := c.ProviderName
	if name == "" {
		name = defaultProviderName
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	redirect, _ := url.Parse(c.RedirectURL) // validated
	return &oidcAuth{
		cfg: c, clientSecret: secret, scopes: scopes, providerName: name,
		http:     &http.Client{Transport: transport, Timeout: 15 * time.Second},
		flows:    map[string]*flow{},
		redirect: redirect,
	}, nil
}

// issuerOrigin is the scheme and host of the issuer, as a CSP source.
func (a *oidcAuth) issuerOrigin() string {
	u, _ := url.Parse(a.cfg.IssuerURL) // validated
	return u.Scheme + "://" + u.Host
}

// ctx carries the panel's HTTP client (with the provider's CA) to go-oidc and oauth2.
func (a *oidcAuth) ctx(ctx context.Context) context.Context {
	return oidc.ClientContext(ctx, a.http)
}

// discover reads the provider's discovery document once it first answers.
func (a *oidcAuth) discover(ctx context.Context) (*discovered, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.disc != nil {
		return a.disc, nil
	}
	p, err := oidc.NewProvider(a.ctx(ctx), a.cfg.IssuerURL)
	if err != nil {
		return nil, fmt.Errorf("discovering the OpenID provider %s: %w", a.cfg.IssuerURL, err)
	}
	var extra struct {
		EndSession string `json:"end_session_endpoint"`
		Revocation string `json:"revocation_endpoint"`
	}
	_ = p.Claims(&extra) // optional endpoints: absent ones stay empty
	a.disc = &discovered{
		oauth: oauth2.Config{
			ClientID: a.cfg.ClientID, ClientSecret: a.clientSecret,
			Endpoint: p.Endpoint(), RedirectURL: a.cfg.RedirectURL, Scopes: a.scopes,
		},
		verifier:   p.Verifier(&oidc.Config{ClientID: a.cfg.ClientID}),
		endSession: extra.EndSession,
		revocation: extra.Revocation,
	}
	return a.disc, nil
}

// start remembers a new sign-in and returns its id and what to send to the provider.
func (a *oidcAuth) start(now time.Time) (string, *flow, error) {
	var tokens [4]string
	for i := range tokens {
		t, err := randomToken()
		if err != nil {
			return "", nil, err
		}
		tokens[i] = t
	}
	f := &flow{state: tokens[1], nonce: tokens[2], verifier: oauth2.GenerateVerifier(), expires: now.Add(flowTTL)}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.flows) >= maxFlows {
		for id, old := range a.flows {
			if now.After(old.expires) {
				delete(a.flows, id)
			}
		}
	}
	if len(a.flows) >= maxFlows {
		return "", nil, errTooManyFlows
	}
	a.flows[tokens[0]] = f
	return tokens[0], f, nil
}

var errTooManyFlows = errors.New("too many sign-ins in progress")

// take returns and forgets the sign-in id: a callback can complete it once.
func (a *oidcAuth) take(id string, now time.Time) (*flow, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f, ok := a.flows[id]
	delete(a.flows, id)
	if !ok || now.After(f.expires) {
		return nil, false
	}
	return f, true
}

// identity is who the ID token says the person is, mapped like claimMappings.
type identity struct {
	Subject  string
	Username string
	Groups   []string
}

// mapClaims maps an ID token's claims to a Kubernetes user as claimMappings would: the
// username claim (a string, required) and the groups claim (a string or a list of strings,
// optional), each with its prefix. A username claim of "email" also needs email_verified as the
// API server reads it (checkEmailVerified). Impersonate mode refuses names under "system:": those are
// Kubernetes' own users and groups, and no identity provider may claim them.
func mapClaims(claims map[string]any, o *configv1alpha1.OIDC) (identity, error) {
	userClaim, groupsClaim := *o.UsernameClaim, *o.GroupsClaim
	raw, ok := claims[userClaim]
	name, isString := raw.(string)
	if !ok || !isString || name == "" {
		return identity{}, fmt.Errorf("the ID token has no %q claim to name the user by (a non-empty string)", userClaim)
	}
	if err := checkEmailVerified(claims, userClaim); err != nil {
		return identity{}, err
	}
	id := identity{Username: *o.UsernamePrefix + name}
	id.Subject, _ = claims["sub"].(string)
	switch g := claims[groupsClaim].(type) {
	case nil:
	case string:
		if g != "" {
			id.Groups = []string{*o.GroupsPrefix + g}
		}
	case []any:
		for _, v := range g {
			s, ok := v.(string)
			if !ok {
				return identity{}, fmt.Errorf("the ID token's %q claim holds a %T, not only strings", groupsClaim, v)
			}
			if s != "" {
				id.Groups = append(id.Groups, *o.GroupsPrefix+s)
			}
		}
	default:
		return identity{}, fmt.Errorf("the ID token's %q claim is a %T, want a string or a list of strings", groupsClaim, g)
	}
	if o.Mode == configv1alpha1.OIDCModeImpersonate {
		if strings.HasPrefix(id.Username, "system:") {
			return identity{}, fmt.Errorf("the username %q is under system:, which the panel never impersonates: set a username prefix", id.Username)
		}
		for _, g := range id.Groups {
			if strings.HasPrefix(g, "system:") {
				return identity{}, fmt.Errorf("the group %q is under system:, which the panel never impersonates: set a groups prefix", g)
			}
		}
	}
	return id, nil
}

// errEmailNotVerified refuses an ID token named by an address its provider has not verified.
// Its text is shown to the person and may be logged: it holds neither the address nor a token.
var errEmailNotVerified = errors.New(`the identity provider has not verified your email address (the ID token's "email_verified" claim is not true), ` +
	"and the panel names you by it: verify the address with the provider, then sign in again")

// checkEmailVerified refuses, as kube-apiserver's OIDC authenticator does for a username claim
// of exactly "email" (getUsername in k8s.io/apiserver/plugin/pkg/authenticator/token/oidc), an
// ID token whose "email_verified" claim is present but not the boolean true: false, null, or a
// string or number, which the API server fails to read as a bool. An absent claim is accepted,
// as the API server accepts it: providers that verify every address may leave it out. Without
// this, anyone who can set an unverified address at the provider could be impersonated as its
// owner. Other username claims never consult email_verified.
func checkEmailVerified(claims map[string]any, usernameClaim string) error {
	if usernameClaim != "email" {
		return nil
	}
	v, present := claims["email_verified"]
	if !present {
		return nil
	}
	if verified, ok := v.(bool); !ok || !verified {
		return errEmailNotVerified
	}
	return nil
}

// oidcSession is the provider's side of a session: its tokens, kept in the panel's memory only.
type oidcSession struct {
	mu      sync.Mutex
	token   *oauth2.Token
	idToken string
	expiry  time.Time // the ID token's
	issued  time.Time // when the panel got it
	subject string
	creds   *sessionCreds
}

// sessionCreds is what the session's client sends as the person; the refresh swaps it.
type sessionCreds struct {
	mu          sync.RWMutex
	bearer      string // token mode: the ID token
	impersonate identity
	mode        string // the configuration's oidc.mode
}

func (c *sessionCreds) set(bearer string, id identity) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bearer, c.impersonate = bearer, id
}

// credsTransport sets the session's credentials on each request to the API server, and drops
// any impersonation header that came from anywhere else: only the panel decides whom it acts as.
type credsTransport struct {
	next  http.RoundTripper
	creds *sessionCreds
}

func (t *credsTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k := range r.Header {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), "Impersonate-") {
			r.Header.Del(k)
		}
	}
	t.creds.mu.RLock()
	bearer, id, mode := t.creds.bearer, t.creds.impersonate, t.creds.mode
	t.creds.mu.RUnlock()
	switch mode {
	case configv1alpha1.OIDCModeToken:
		r.Header.Set("Authorization", "Bearer "+bearer)
	case configv1alpha1.OIDCModeImpersonate:
		r.Header.Set("Impersonate-User", id.Username)
		for _, g := range id.Groups {
			r.Header.Add("Impersonate-Group", g)
		}
	}
	return t.next.RoundTrip(r)
}

// oidcClient builds a session's client: in token mode with no credentials of the panel's own
// (the ID token is the only one), in impersonate mode with the panel's ServiceAccount.
func (h *handler) oidcClient(creds *sessionCreds) (client.WithWatch, error) {
	var cfg *rest.Config
	if creds.mode == configv1alpha1.OIDCModeToken {
		cfg = rest.AnonymousClientConfig(h.base)
	} else {
		cfg = rest.CopyConfig(h.base)
		cfg.Impersonate = rest.ImpersonationConfig{}
	}
	cfg.UserAgent = "switchboard-panel"
	cfg.QPS, cfg.Burst = 20, 40
	cfg.Timeout = 30 * time.Second
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &credsTransport{next: rt, creds: creds} })
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.Scheme, Mapper: mapper})
	if err != nil || h.interceptUser == nil {
		return c, err
	}
	return h.interceptUser(c), nil
}
