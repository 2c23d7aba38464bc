package main

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/config"
	"github.com/switchboard-dev/switchboard/internal/panel"
)

// panelComponent is `switchboard panel`.
var panelComponent = component[*pc]{
	use:   "panel",
	short: "Serve the web panel (\"API keys\") on its own, apart from /v1",
	long: `Serve the web panel alone: people sign in with their own Kubernetes token and manage API
keys with it, or with single sign-on (oidc.issuerURL: OpenID Connect, Authorization Code
with PKCE). The process watches nothing and caches nothing; its own identity only creates
TokenReviews, and in oidc.mode impersonate impersonates the signed-in person through
constrained impersonation limited to the panel's resources. Run it apart from "switchboard server" so that a panel failure or overload never
touches /v1 (the Helm chart does, by default). Its configuration is a PanelConfiguration
(--config), which the flags given override.`,
	prepare: func(c *pc) { c.OIDC = &configv1alpha1.OIDC{} }, // the oidc flags' defaults
	bind: func(f *configFlags[*pc]) {
		optional(f, "listen", "address of the panel", func(c *pc) **string { return &c.Listen })
		optional(f, "health-probe-bind-address", `address of /healthz and /readyz; "" serves none`,
			func(c *pc) **string { return &c.HealthProbeBindAddress }, addressZero)
		optional(f, "shutdown-delay", "how long readiness fails before the listener closes; 0: none",
			func(c *pc) **metav1.Duration { return &c.ShutdownDelay }, negativeNone)
		// Named as the server's, whose list it should be.
		value(f, "trusted-proxies", "CIDRs (or addresses) of the proxies in front of the panel (e.g. the ingress controller's pods) whose X-Forwarded-For is believed when sign-in attempts are counted per client address; as the server's --trusted-proxies, never a pod-wide CIDR",
			func(c *pc) *[]string { return &c.TrustedProxies })
		bindPanelFlags(f, "", func(c *pc) *configv1alpha1.PanelSettings { return &c.PanelSettings })
	},
	run: func(ctx context.Context, c *pc, p process) error {
		return panel.Serve(ctx, c, panel.Deps{RESTConfig: p.rest})
	},
}

// bindPanelFlags binds the panel's settings to flags named prefix+name, in the settings that
// settings(c) returns: `switchboard panel` uses no prefix, and `switchboard server` the
// deprecated "panel-", into its configuration's panel section. It returns each flag's name and
// the field it sets, under the settings.
func bindPanelFlags[T config.Object](f *configFlags[T], prefix string, settings func(T) *configv1alpha1.PanelSettings) map[string]string {
	fields := map[string]string{}
	bind := func(name, field string) string { fields[prefix+name] = field; return prefix + name }

	value(f, bind("secure-cookies", "secureCookies"), "mark the panel's cookies Secure and name them __Host-…, for a panel behind a TLS-terminating proxy (always so over TLS)",
		func(c T) *bool { return &settings(c).SecureCookies })
	optional(f, bind("max-sessions", "maxSessions"), "sessions the panel holds at most; past it sign-ins are refused",
		func(c T) **int32 { return &settings(c).MaxSessions }, zeroDefault)
	optional(f, bind("max-sessions-per-user", "maxSessionsPerUser"), "sessions of one user at most; signing in once more ends their least recently used one",
		func(c T) **int32 { return &settings(c).MaxSessionsPerUser }, zeroDefault)
	optional(f, bind("login-rate", "loginRate"), "sign-in attempts per second one client address regains (each is a TokenReview)",
		func(c T) **float64 { return &settings(c).LoginRate }, zeroDefault)
	optional(f, bind("login-burst", "loginBurst"), "sign-in attempts one client address may make at once before 429",
		func(c T) **int32 { return &settings(c).LoginBurst }, zeroDefault)

	// Single sign-on: any of its flags makes an oidc section, which then needs its issuer.
	// The client secret is only ever a file (a mounted Secret): a flag's value would show in
	// the pod spec and in ps.
	oidc := func(c T) *configv1alpha1.OIDC {
		s := settings(c)
		if s.OIDC == nil {
			s.OIDC = &configv1alpha1.OIDC{}
		}
		return s.OIDC
	}
	str := func(name, field, usage string, to func(*configv1alpha1.OIDC) *string) {
		value(f, bind("oidc-"+name, "oidc."+field), usage, func(c T) *string { return to(oidc(c)) })
	}
	claim := func(name, field, usage string, to func(*configv1alpha1.OIDC) **string) {
		optional(f, bind("oidc-"+name, "oidc."+field), usage, func(c T) **string { return to(oidc(c)) })
	}
	str("issuer-url", "issuerURL", "sign in with this OpenID Connect provider (https); the token paste stays available. Empty: no single sign-on",
		func(o *configv1alpha1.OIDC) *string { return &o.IssuerURL })
	str("client-id", "clientID", "the panel's client id at the provider (the ID token's audience)", func(o *configv1alpha1.OIDC) *string { return &o.ClientID })
	str("client-secret-file", "clientSecretFile", "file holding the client secret (mount it from a Secret)",
		func(o *configv1alpha1.OIDC) *string { return &o.ClientSecretFile })
	value(f, bind("oidc-scopes", "oidc.scopes"), "scopes to ask for", func(c T) *[]string { return &oidc(c).Scopes })
	str("redirect-url", "redirectURL", "the panel's callback as registered at the provider: https://PANEL-HOST/oidc/callback",
		func(o *configv1alpha1.OIDC) *string { return &o.RedirectURL })
	str("ca-file", "caFile", "PEM CA bundle for the provider's TLS, besides the system roots", func(o *configv1alpha1.OIDC) *string { return &o.CAFile })
	str("mode", "mode", `how the panel acts as the signed-in person: "token" (the API server trusts the issuer) or "impersonate" (constrained impersonation)`,
		func(o *configv1alpha1.OIDC) *string { return &o.Mode })
	claim("username-claim", "usernameClaim", "ID token claim naming the user (as claimMappings.username.claim)",
		func(o *configv1alpha1.OIDC) **string { return &o.UsernameClaim })
	claim("username-prefix", "usernamePrefix", "prefix of usernames (as claimMappings.username.prefix)", func(o *configv1alpha1.OIDC) **string { return &o.UsernamePrefix })
	claim("groups-claim", "groupsClaim", "ID token claim listing groups (as claimMappings.groups.claim)", func(o *configv1alpha1.OIDC) **string { return &o.GroupsClaim })
	claim("groups-prefix", "groupsPrefix", "prefix of groups (as claimMappings.groups.prefix)", func(o *configv1alpha1.OIDC) **string { return &o.GroupsPrefix })
	value(f, bind("oidc-allow-legacy-impersonation", "oidc.allowLegacyImpersonation"),
		`impersonate mode: start even when only the legacy, unlimited "impersonate" verb is granted (not recommended)`,
		func(c T) *bool { return &oidc(c).AllowLegacyImpersonation })
	str("reveal-url", "revealURL", "impersonate mode: the operator's reveal endpoint (https://HOST:PORT), which claims keys for the signed-in person",
		func(o *configv1alpha1.OIDC) *string { return &o.RevealURL })
	str("reveal-ca-configmap", "revealCAConfigMap", "impersonate mode: NAMESPACE/NAME of the ConfigMap holding the reveal endpoint's certificates",
		func(o *configv1alpha1.OIDC) *string { return &o.RevealCAConfigMap })
	str("provider-name", "providerName", `label of the sign-in button ("Sign in with NAME")`, func(o *configv1alpha1.OIDC) *string { return &o.ProviderName })
	return fields
}
