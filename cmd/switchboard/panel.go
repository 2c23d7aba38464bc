package main

import (
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/config"
	"github.com/switchboard-dev/switchboard/internal/panel"
)

func newPanelCommand() *cobra.Command {
	var (
		cf        *configFlags
		flags     *overrides[configv1alpha1.PanelConfiguration]
		newLogger func() logr.Logger
	)
	cmd := &cobra.Command{
		Use:   "panel",
		Short: "Serve the web panel (\"API keys\") on its own, apart from /v1",
		Long: `Serve the web panel alone: people sign in with their own Kubernetes token and manage API
keys with it, or with single sign-on (oidc.issuerURL: OpenID Connect, Authorization Code
with PKCE). The process watches nothing and caches nothing; its own identity only creates
TokenReviews, and in oidc.mode impersonate impersonates the signed-in person through
constrained impersonation limited to the panel's resources. Run it apart from "switchboard server" so that a panel failure or overload never
touches /v1 (the Helm chart does, by default). Its configuration is a PanelConfiguration
(--config), which the flags given override.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := &configv1alpha1.PanelConfiguration{}
			done, err := complete(cf, c, func(c *configv1alpha1.PanelConfiguration) { flags.apply(c) },
				configv1alpha1.SetDefaults_PanelConfiguration, config.ValidatePanelConfiguration, cmd.OutOrStdout())
			if done || err != nil {
				return err
			}
			proxies, err := config.ParsePrefixes(c.TrustedProxies)
			if err != nil {
				return err
			}
			newLogger()
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return fmt.Errorf("finding the Kubernetes API server: %w", err)
			}
			return panel.Serve(ctrl.SetupSignalHandler(), cfg, panel.OptionsFromConfig(&c.PanelSettings, proxies), panel.ServeOptionsFromConfig(c))
		},
	}
	f := cmd.Flags()
	newLogger = bindLogFlags(f)
	cf = bindConfigFlags(f, "PanelConfiguration")
	def := &configv1alpha1.PanelConfiguration{}
	configv1alpha1.SetDefaults_PanelConfiguration(def)
	flags = newOverrides[configv1alpha1.PanelConfiguration](f)
	type pc = configv1alpha1.PanelConfiguration
	flags.String("listen", *def.Listen, "address of the panel", func(c *pc, v string) { c.Listen = &v })
	flags.String("health-probe-bind-address", *def.HealthProbeBindAddress, `address of /healthz and /readyz; "0" disables them`,
		func(c *pc, v string) { c.HealthProbeBindAddress = address(v) })
	flags.Duration("shutdown-delay", def.ShutdownDelay.Duration, "how long readiness fails before the listener closes; negative: none",
		func(c *pc, v time.Duration) { c.ShutdownDelay = periodOrNone(v) })
	// Named as the server's, whose list it should be.
	flags.StringSlice("trusted-proxies", nil, "CIDRs (or addresses) of the proxies in front of the panel (e.g. the ingress controller's pods) whose X-Forwarded-For is believed when sign-in attempts are counted per client address; as the server's --trusted-proxies, never a pod-wide CIDR",
		func(c *pc, v []string) { c.TrustedProxies = v })
	bindPanelFlags(flags, "", func(c *pc) *configv1alpha1.PanelSettings { return &c.PanelSettings })
	return cmd
}

// bindPanelFlags binds the panel's settings to flags named prefix+name, writing them into
// the settings that settings(c) returns: `switchboard panel` uses no prefix, and
// `switchboard server` the deprecated "panel-", into its configuration's panel section.
// It returns each flag's name and the field it sets, under section.
func bindPanelFlags[C any](o *overrides[C], prefix string, settings func(*C) *configv1alpha1.PanelSettings) map[string]string {
	def := &configv1alpha1.PanelSettings{OIDC: &configv1alpha1.OIDC{}}
	configv1alpha1.SetDefaults_PanelSettings(def)
	fields := map[string]string{}
	bind := func(name, field string) string { fields[prefix+name] = field; return prefix + name }

	o.Bool(bind("secure-cookies", "secureCookies"), false,
		"mark the panel's cookies Secure and name them __Host-…, for a panel behind a TLS-terminating proxy (always so over TLS)",
		func(c *C, v bool) { settings(c).SecureCookies = v })
	o.Int32(bind("max-sessions", "maxSessions"), *def.MaxSessions, "sessions the panel holds at most; past it sign-ins are refused",
		func(c *C, v int32) { settings(c).MaxSessions = orDefault(max(v, 0)) })
	o.Int32(bind("max-sessions-per-user", "maxSessionsPerUser"), *def.MaxSessionsPerUser,
		"sessions of one user at most; signing in once more ends their least recently used one",
		func(c *C, v int32) { settings(c).MaxSessionsPerUser = orDefault(max(v, 0)) })
	o.Float64(bind("login-rate", "loginRate"), *def.LoginRate, "sign-in attempts per second one client address regains (each is a TokenReview)",
		func(c *C, v float64) { settings(c).LoginRate = orDefault(max(v, 0)) })
	o.Int32(bind("login-burst", "loginBurst"), *def.LoginBurst, "sign-in attempts one client address may make at once before 429",
		func(c *C, v int32) { settings(c).LoginBurst = orDefault(max(v, 0)) })

	// Single sign-on: any of its flags makes an oidc section, which then needs its issuer.
	// The client secret is only ever a file (a mounted Secret): a flag's value would show in
	// the pod spec and in ps.
	oidc := func(c *C) *configv1alpha1.OIDC {
		s := settings(c)
		if s.OIDC == nil {
			s.OIDC = &configv1alpha1.OIDC{}
		}
		return s.OIDC
	}
	str := func(name, field, def, usage string, to func(*configv1alpha1.OIDC, string)) {
		o.String(bind("oidc-"+name, "oidc."+field), def, usage, func(c *C, v string) { to(oidc(c), v) })
	}
	d := def.OIDC
	str("issuer-url", "issuerURL", "", "sign in with this OpenID Connect provider (https); the token paste stays available. Empty: no single sign-on",
		func(s *configv1alpha1.OIDC, v string) { s.IssuerURL = v })
	str("client-id", "clientID", "", "the panel's client id at the provider (the ID token's audience)", func(s *configv1alpha1.OIDC, v string) { s.ClientID = v })
	str("client-secret-file", "clientSecretFile", "", "file holding the client secret (mount it from a Secret)", func(s *configv1alpha1.OIDC, v string) { s.ClientSecretFile = v })
	o.StringSlice(bind("oidc-scopes", "oidc.scopes"), d.Scopes, "scopes to ask for", func(c *C, v []string) { oidc(c).Scopes = v })
	str("redirect-url", "redirectURL", "", "the panel's callback as registered at the provider: https://PANEL-HOST/oidc/callback", func(s *configv1alpha1.OIDC, v string) { s.RedirectURL = v })
	str("ca-file", "caFile", "", "PEM CA bundle for the provider's TLS, besides the system roots", func(s *configv1alpha1.OIDC, v string) { s.CAFile = v })
	str("mode", "mode", d.Mode, `how the panel acts as the signed-in person: "token" (the API server trusts the issuer) or "impersonate" (constrained impersonation)`,
		func(s *configv1alpha1.OIDC, v string) { s.Mode = v })
	str("username-claim", "usernameClaim", *d.UsernameClaim, "ID token claim naming the user (as claimMappings.username.claim)", func(s *configv1alpha1.OIDC, v string) { s.UsernameClaim = &v })
	str("username-prefix", "usernamePrefix", *d.UsernamePrefix, "prefix of usernames (as claimMappings.username.prefix)", func(s *configv1alpha1.OIDC, v string) { s.UsernamePrefix = &v })
	str("groups-claim", "groupsClaim", *d.GroupsClaim, "ID token claim listing groups (as claimMappings.groups.claim)", func(s *configv1alpha1.OIDC, v string) { s.GroupsClaim = &v })
	str("groups-prefix", "groupsPrefix", *d.GroupsPrefix, "prefix of groups (as claimMappings.groups.prefix)", func(s *configv1alpha1.OIDC, v string) { s.GroupsPrefix = &v })
	o.Bool(bind("oidc-allow-legacy-impersonation", "oidc.allowLegacyImpersonation"), false,
		`impersonate mode: start even when only the legacy, unlimited "impersonate" verb is granted (not recommended)`,
		func(c *C, v bool) { oidc(c).AllowLegacyImpersonation = v })
	str("reveal-url", "revealURL", "", "impersonate mode: the operator's reveal endpoint (https://HOST:PORT), which claims keys for the signed-in person",
		func(s *configv1alpha1.OIDC, v string) { s.RevealURL = v })
	str("reveal-ca-configmap", "revealCAConfigMap", "", "impersonate mode: NAMESPACE/NAME of the ConfigMap holding the reveal endpoint's certificates",
		func(s *configv1alpha1.OIDC, v string) { s.RevealCAConfigMap = v })
	str("provider-name", "providerName", "", `label of the sign-in button ("Sign in with NAME")`, func(s *configv1alpha1.OIDC, v string) { s.ProviderName = v })
	return fields
}
