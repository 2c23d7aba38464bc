package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PanelConfiguration configures `switchboard panel`, the web panel as a process of its own.
type PanelConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	// listen is the panel's address (default ":8083"); it may not be "".
	Listen *string `json:"listen,omitempty"`
	// healthProbeBindAddress is the address of /healthz and /readyz (default ":8082"); "" serves none.
	HealthProbeBindAddress *string `json:"healthProbeBindAddress,omitempty"`
	// Shutdown is how the panel's listener stops.
	Shutdown `json:",inline"`
	// trustedProxies are the CIDRs (or addresses) of the proxies in front of the panel (e.g. the
	// ingress controller's pods) whose X-Forwarded-For is believed when sign-in attempts are
	// counted per client address; as the server's, never a pod-wide CIDR.
	TrustedProxies []string `json:"trustedProxies,omitempty"`

	// PanelSettings are the panel's own settings, which a ServerConfiguration's panel takes too.
	PanelSettings `json:",inline"`
}

// PanelSettings are the panel's settings wherever it runs: `switchboard panel` or the
// panel section of `switchboard server`.
type PanelSettings struct {
	// secureCookies marks the panel's cookies Secure and names them __Host-…, for a panel
	// behind a TLS-terminating proxy (always so over TLS).
	SecureCookies bool `json:"secureCookies"`
	// maxSessions is how many sessions the panel holds at most (default 1000); past it sign-ins
	// are refused.
	MaxSessions *int32 `json:"maxSessions,omitempty"`
	// maxSessionsPerUser is how many sessions one user holds at most (default 10); signing in once
	// more ends their least recently used one.
	MaxSessionsPerUser *int32 `json:"maxSessionsPerUser,omitempty"`
	// loginRate is how many sign-in attempts per second one client address regains (default
	// 0.2; each is a TokenReview); more than 0.
	LoginRate *float64 `json:"loginRate,omitempty"`
	// loginBurst is how many sign-in attempts one client address may make at once before 429
	// (default 10).
	LoginBurst *int32 `json:"loginBurst,omitempty"`
	// oidc, when set, signs people in with an OpenID Connect provider (Authorization Code with
	// PKCE); the token paste stays available. Absent: no single sign-on.
	OIDC *OIDC `json:"oidc,omitempty"`
}

// The modes of single sign-on (OIDC.Mode): how the panel acts as the signed-in person.
const (
	// OIDCModeToken passes the person's ID token to the Kubernetes API server, which must trust
	// the issuer (its AuthenticationConfiguration's jwt[]). The panel holds no power of its own.
	OIDCModeToken = "token"
	// OIDCModeImpersonate has the panel validate the ID token itself and call the API server as
	// its own ServiceAccount, impersonating the mapped user and groups with constrained
	// impersonation on the panel's few resources only.
	OIDCModeImpersonate = "impersonate"
)

// OIDCCallbackPath is the path of the panel's callback, which OIDC.RedirectURL ends in.
const OIDCCallbackPath = "/oidc/callback"

// OIDC is the panel's single sign-on. The client secret is only ever a file (a mounted
// Secret), never a value of the configuration.
type OIDC struct {
	// issuerURL is the OpenID Connect provider (https); required.
	IssuerURL string `json:"issuerURL"`
	// clientID is the panel's client id at the provider (the ID token's audience).
	ClientID string `json:"clientID"`
	// clientSecretFile is the file holding the client secret (mount it from a Secret).
	ClientSecretFile string `json:"clientSecretFile"`
	// redirectURL is the panel's callback as registered at the provider:
	// https://PANEL-HOST/oidc/callback.
	RedirectURL string `json:"redirectURL"`
	// scopes are asked for (default openid, profile, email, groups, offline_access).
	Scopes []string `json:"scopes,omitempty"`
	// caFile is a PEM CA bundle for the provider's TLS, besides the system roots.
	CAFile string `json:"caFile,omitempty"`
	// mode is how the panel acts as the signed-in person (default "token"): "token" (the API
	// server trusts the issuer) or "impersonate" (constrained impersonation).
	Mode string `json:"mode,omitempty"`
	// usernameClaim is the ID token claim naming the user (default "sub"; as
	// claimMappings.username.claim).
	UsernameClaim *string `json:"usernameClaim,omitempty"`
	// usernamePrefix prefixes usernames (default "oidc:"; "" for none).
	UsernamePrefix *string `json:"usernamePrefix,omitempty"`
	// groupsClaim is the ID token claim listing groups (default "groups").
	GroupsClaim *string `json:"groupsClaim,omitempty"`
	// groupsPrefix prefixes groups (default "oidc:"; "" for none).
	GroupsPrefix *string `json:"groupsPrefix,omitempty"`
	// allowLegacyImpersonation, in impersonate mode, starts even when only the legacy, unlimited
	// "impersonate" verb is granted (not recommended).
	AllowLegacyImpersonation bool `json:"allowLegacyImpersonation"`
	// revealURL, in impersonate mode, is the operator's reveal endpoint (https://HOST:PORT),
	// which claims keys for the signed-in person.
	RevealURL string `json:"revealURL,omitempty"`
	// revealCAConfigMap, in impersonate mode, is NAMESPACE/NAME of the ConfigMap holding the
	// reveal endpoint's certificates.
	RevealCAConfigMap string `json:"revealCAConfigMap,omitempty"`
	// providerName labels the sign-in button ("Sign in with NAME").
	ProviderName string `json:"providerName,omitempty"`
}
