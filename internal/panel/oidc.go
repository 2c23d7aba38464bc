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
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/scheme"
)

// OIDCMode says how the panel acts as a person who signed in with the identity provider.
type OIDCMode string

const (
	// OIDCModeToken passes the person's ID token to the Kubernetes API server, which must trust
	// the issuer (its AuthenticationConfiguration's jwt[]). The panel holds no power of its own.
	OIDCModeToken OIDCMode = "token"
	// OIDCModeImpersonate has the panel validate the ID token itself and call the API server
	// as its own ServiceAccount, impersonating the mapped user and groups with constrained
	// impersonation (impersonate-on:user-info:<verb> on the panel's few resources only).
	OIDCModeImpersonate OIDCMode = "impersonate"
)

// Defaults of OIDCOptions.
const (
	DefaultOIDCUsernameClaim  = configv1alpha1.DefaultOIDCUsernameClaim
	DefaultOIDCUsernamePrefix = configv1alpha1.DefaultOIDCUsernamePrefix
	DefaultOIDCGroupsClaim    = configv1alpha1.DefaultOIDCGroupsClaim
	DefaultOIDCGroupsPrefix   = configv1alpha1.DefaultOIDCGroupsPrefix
)

// DefaultOIDCScopes are the scopes asked for when none are configured: "groups" is not a
// standard scope, but the common providers (Dex, Keycloak with a mapper, zitadel) answer it.
var DefaultOIDCScopes = configv1alpha1.DefaultOIDCScopes()

// OIDCOptions configure sign-in with an OpenID Connect provider (Authorization Code flow with
// PKCE, state and nonce). Pasting a Kubernetes token stays available beside it.
type OIDCOptions struct {
	// IssuerURL is the provider's issuer (https), exactly as its tokens' "iss" claim says.
	IssuerURL string
	// ClientID is the panel's client at the provider; it is the ID token's audience.
	ClientID string
	// ClientSecret, or ClientSecretFile (read once at start), is the client's secret. It is
	// sent to the provider's token endpoint only, and never logged.
	ClientSecret     string
	ClientSecretFile string
	// Scopes asked for (default DefaultOIDCScopes); "openid" is added when missing.
	Scopes []string
	// RedirectURL is the panel's callback as registered at the provider, ending in
	// /oidc/callback (https://panel.example.com/oidc/callback). Sessions live on its host.
	RedirectURL string
	// CAFile, or CAData (PEM), is trusted for the provider's TLS besides the system roots.
	CAFile string
	CAData []byte
	// Mode is OIDCModeToken or OIDCModeImpersonate.
	Mode OIDCMode
	// UsernameClaim and UsernamePrefix, GroupsClaim and GroupsPrefix map the ID token to a
	// Kubernetes user the way an AuthenticationConfiguration's claimMappings does (claim +
	// prefix). Impersonate mode uses them; token mode prints them in the configuration it
	// asks the API server's administrator to add. Defaults: "sub", "oidc:", "groups", "oidc:".
	UsernameClaim  string
	UsernamePrefix string
	GroupsClaim    string
	GroupsPrefix   string
	// AllowLegacyImpersonation lets impersonate mode start when the panel's ServiceAccount
	// holds only the legacy, unlimited "impersonate" verb. Off by default: with it a stolen
	// panel pod can act as anyone, on anything.
	AllowLegacyImpersonation bool
	// ProviderName labels the sign-in button ("Sign in with NAME"; default "single sign-on").
	ProviderName string
	// RevealURL (https://HOST:PORT) is the operator's reveal endpoint, through which impersonate
	// mode claims a key's one-time reveal for the person (internal/operator/reveal), and RevealBundle
	// ("namespace/name") the ConfigMap of its certificates. Required in impersonate mode: the
	// panel's ServiceAccount is granted nothing on Secrets, as anyone.
	RevealURL    string
	RevealBundle string
}

// validate checks o and fills its defaults; every error names the option to fix.
func (o *OIDCOptions) validate() error {
	switch o.Mode {
	case OIDCModeToken, OIDCModeImpersonate:
	case "":
		return errors.New(`OIDC: no mode: set "token" (the API server trusts the issuer) or "impersonate" (the panel impersonates the user)`)
	default:
		return fmt.Errorf(`OIDC: unknown mode %q: want "token" or "impersonate"`, o.Mode)
	}
	iss, err := url.Parse(o.IssuerURL)
	if o.IssuerURL == "" || err != nil || iss.Scheme != "https" || iss.Host == "" || iss.RawQuery != "" || iss.Fragment != "" {
		return fmt.Errorf("OIDC: the issuer URL must be an https URL without query or fragment, got %q", o.IssuerURL)
	}
	if o.ClientID == "" {
		return errors.New("OIDC: no client id")
	}
	if o.ClientSecret != "" && o.ClientSecretFile != "" {
		return errors.New("OIDC: give the client secret as a file or as a value, not both")
	}
	if o.ClientSecretFile != "" {
		b, err := os.ReadFile(o.ClientSecretFile)
		if err != nil {
			// The error names the file only: the secret is not read, nothing of it can leak.
			return fmt.Errorf("OIDC: reading the client secret file: %w", err)
		}
		o.ClientSecret = strings.TrimSpace(string(b))
		if o.ClientSecret == "" {
			return fmt.Errorf("OIDC: the client secret file %s is empty", o.ClientSecretFile)
		}
	}
	if o.ClientSecret == "" {
		return errors.New("OIDC: no client secret (give a file holding it)")
	}
	cb, err := url.Parse(o.RedirectURL)
	if o.RedirectURL == "" || err != nil || (cb.Scheme != "https" && cb.Scheme != "http") || cb.Host == "" || cb.Path != callbackPath || cb.RawQuery != "" {
		return fmt.Errorf("OIDC: the redirect URL must be the panel's absolute http(s) URL ending in %s, got %q", callbackPath, o.RedirectURL)
	}
	if o.CAFile != "" {
		b, err := os.ReadFile(o.CAFile)
		if err != nil {
			return fmt.Errorf("OIDC: reading the CA file: %w", err)
		}
		o.CAData = append(o.CAData, b...)
	}
	if len(o.Scopes) == 0 {
		o.Scopes = DefaultOIDCScopes
	}
	if !slices.Contains(o.Scopes, oidc.ScopeOpenID) {
		o.Scopes = append([]string{oidc.ScopeOpenID}, o.Scopes...)
	}
	if o.UsernameClaim == "" {
		o.UsernameClaim, o.UsernamePrefix = DefaultOIDCUsernameClaim, DefaultOIDCUsernamePrefix
	}
	if o.GroupsClaim == "" {
		o.GroupsClaim, o.GroupsPrefix = DefaultOIDCGroupsClaim, DefaultOIDCGroupsPrefix
	}
	if o.ProviderName == "" {
		o.ProviderName = "single sign-on"
	}
	return o.validateReveal()
}

// validateReveal checks the reveal endpoint's options: required in impersonate mode, refused in
// token mode (where the person's own token claims the Secret).
func (o *OIDCOptions) validateReveal() error {
	if o.Mode == OIDCModeToken {
		if o.RevealURL != "" || o.RevealBundle != "" {
			return errors.New("OIDC: the reveal endpoint is for impersonate mode only; in token mode the person's own token claims their keys")
		}
		return nil
	}
	u, err := url.Parse(o.RevealURL)
	if o.RevealURL == "" || err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return fmt.Errorf("OIDC: impersonate mode claims keys through the operator's reveal endpoint: its URL must be https://HOST:PORT, got %q", o.RevealURL)
	}
	o.RevealURL = strings.TrimSuffix(o.RevealURL, "/")
	if _, _, err := revealBundle(o.RevealBundle); err != nil {
		return err
	}
	return nil
}

// revealBundle splits "namespace/name", the ConfigMap of the reveal endpoint's certificates.
func revealBundle(ref string) (string, string, error) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return "", "", fmt.Errorf("OIDC: impersonate mode needs the ConfigMap of the reveal endpoint's certificates as NAMESPACE/NAME, got %q", ref)
	}
	return ns, name, nil
}

// Paths of the sign-in flow.
const (
	oidcLoginPath = "/oidc/login"
	callbackPath  = "/oidc/callback"
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
	opts OIDCOptions
	http *http.Client

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

func newOIDCAuth(opts OIDCOptions) (*oidcAuth, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if len(opts.CAData) > 0 && !pool.AppendCertsFromPEM(opts.CAData) {
		return nil, errors.New("OIDC: the CA file holds no PEM certificate")
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	redirect, _ := url.Parse(opts.RedirectURL) // validated above
	return &oidcAuth{
		opts:     opts,
		http:     &http.Client{Transport: transport, Timeout: 15 * time.Second},
		flows:    map[string]*flow{},
		redirect: redirect,
	}, nil
}

// issuerOrigin is the scheme and host of the issuer, as a CSP source.
func (a *oidcAuth) issuerOrigin() string {
	u, _ := url.Parse(a.opts.IssuerURL) // validated
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
	p, err := oidc.NewProvider(a.ctx(ctx), a.opts.IssuerURL)
	if err != nil {
		return nil, fmt.Errorf("discovering the OpenID provider %s: %w", a.opts.IssuerURL, err)
	}
	var extra struct {
		EndSession string `json:"end_session_endpoint"`
		Revocation string `json:"revocation_endpoint"`
	}
	_ = p.Claims(&extra) // optional endpoints: absent ones stay empty
	a.disc = &discovered{
		oauth: oauth2.Config{
			ClientID: a.opts.ClientID, ClientSecret: a.opts.ClientSecret,
			Endpoint: p.Endpoint(), RedirectURL: a.opts.RedirectURL, Scopes: a.opts.Scopes,
		},
		verifier:   p.Verifier(&oidc.Config{ClientID: a.opts.ClientID}),
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
func mapClaims(claims map[string]any, o *OIDCOptions) (identity, error) {
	raw, ok := claims[o.UsernameClaim]
	name, isString := raw.(string)
	if !ok || !isString || name == "" {
		return identity{}, fmt.Errorf("the ID token has no %q claim to name the user by (a non-empty string)", o.UsernameClaim)
	}
	if err := checkEmailVerified(claims, o.UsernameClaim); err != nil {
		return identity{}, err
	}
	id := identity{Username: o.UsernamePrefix + name}
	id.Subject, _ = claims["sub"].(string)
	switch g := claims[o.GroupsClaim].(type) {
	case nil:
	case string:
		if g != "" {
			id.Groups = []string{o.GroupsPrefix + g}
		}
	case []any:
		for _, v := range g {
			s, ok := v.(string)
			if !ok {
				return identity{}, fmt.Errorf("the ID token's %q claim holds a %T, not only strings", o.GroupsClaim, v)
			}
			if s != "" {
				id.Groups = append(id.Groups, o.GroupsPrefix+s)
			}
		}
	default:
		return identity{}, fmt.Errorf("the ID token's %q claim is a %T, want a string or a list of strings", o.GroupsClaim, g)
	}
	if o.Mode == OIDCModeImpersonate {
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
	mode        OIDCMode
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
	case OIDCModeToken:
		r.Header.Set("Authorization", "Bearer "+bearer)
	case OIDCModeImpersonate:
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
	if creds.mode == OIDCModeToken {
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
