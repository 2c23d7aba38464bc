package main

import (
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/switchboard-dev/switchboard/internal/panel"
)

func newPanelCommand() *cobra.Command {
	var (
		opts           panel.Options
		serve          panel.ServeOptions
		trustedProxies []string
		newLogger      func() logr.Logger
	)
	cmd := &cobra.Command{
		Use:   "panel",
		Short: "Serve the web panel (\"API keys\") on its own, apart from /v1",
		Long: `Serve the web panel alone: people sign in with their own Kubernetes token and manage API
keys with it, or with single sign-on (--oidc-issuer-url: OpenID Connect, Authorization Code
with PKCE). The process watches nothing and caches nothing; its own identity only creates
TokenReviews, and in --oidc-mode=impersonate impersonates the signed-in person through
constrained impersonation limited to the panel's resources. Run it apart from "switchboard server" so that a panel failure or overload never
touches /v1 (the Helm chart does, by default).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := finishOIDCFlags(cmd.Flags(), &opts, ""); err != nil {
				return err
			}
			for _, s := range trustedProxies {
				p, err := parsePrefix(s)
				if err != nil {
					return err
				}
				opts.TrustedProxies = append(opts.TrustedProxies, p)
			}
			newLogger()
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return fmt.Errorf("finding the Kubernetes API server: %w", err)
			}
			return panel.Serve(ctrl.SetupSignalHandler(), cfg, opts, serve)
		},
	}
	f := cmd.Flags()
	newLogger = bindLogFlags(f)
	f.StringVar(&serve.Listen, "listen", panel.DefaultListen, "address of the panel")
	f.StringVar(&serve.HealthProbeBindAddress, "health-probe-bind-address", panel.DefaultHealthProbeBindAddress, `address of /healthz and /readyz; "0" disables them`)
	f.DurationVar(&serve.ShutdownDelay, "shutdown-delay", panel.DefaultShutdownDelay, "how long readiness fails before the listener closes")
	// Named as the server's, whose list it should be: "switchboard server --panel-listen" passes its own.
	f.StringSliceVar(&trustedProxies, "trusted-proxies", nil, "CIDRs (or addresses) of the proxies in front of the panel (e.g. the ingress controller's pods) whose X-Forwarded-For is believed when sign-in attempts are counted per client address; as the server's --trusted-proxies, never a pod-wide CIDR")
	bindPanelFlags(f, &opts, "")
	return cmd
}

// bindPanelFlags binds the panel's options to flags named prefix+name: "switchboard panel"
// uses no prefix, "switchboard server" (which can serve the panel too) uses "panel-".
func bindPanelFlags(f *pflag.FlagSet, o *panel.Options, prefix string) {
	f.BoolVar(&o.SecureCookies, prefix+"secure-cookies", false,
		"mark the panel's cookies Secure and name them __Host-…, for a panel behind a TLS-terminating proxy (always so over TLS)")
	f.IntVar(&o.MaxSessions, prefix+"max-sessions", panel.DefaultMaxSessions, "sessions the panel holds at most; past it sign-ins are refused")
	f.IntVar(&o.MaxSessionsPerUser, prefix+"max-sessions-per-user", panel.DefaultMaxSessionsPerUser,
		"sessions of one user at most; signing in once more ends their least recently used one")
	f.Float64Var(&o.LoginRate, prefix+"login-rate", panel.DefaultLoginRate, "sign-in attempts per second one client address regains (each is a TokenReview)")
	f.IntVar(&o.LoginBurst, prefix+"login-burst", panel.DefaultLoginBurst, "sign-in attempts one client address may make at once before 429")
	bindOIDCFlags(f, o, prefix)
}

// bindOIDCFlags binds single sign-on's flags into a fresh o.OIDC; finishOIDCFlags drops it
// again when no issuer is given. The client secret is only ever a file (a mounted Secret):
// a flag's value would show in the pod spec and in ps.
func bindOIDCFlags(f *pflag.FlagSet, o *panel.Options, prefix string) {
	oidc := &panel.OIDCOptions{}
	o.OIDC = oidc
	p := prefix + "oidc-"
	f.StringVar(&oidc.IssuerURL, p+"issuer-url", "", "sign in with this OpenID Connect provider (https); the token paste stays available. Empty: no single sign-on")
	f.StringVar(&oidc.ClientID, p+"client-id", "", "the panel's client id at the provider (the ID token's audience)")
	f.StringVar(&oidc.ClientSecretFile, p+"client-secret-file", "", "file holding the client secret (mount it from a Secret)")
	f.StringSliceVar(&oidc.Scopes, p+"scopes", panel.DefaultOIDCScopes, "scopes to ask for")
	f.StringVar(&oidc.RedirectURL, p+"redirect-url", "", "the panel's callback as registered at the provider: https://PANEL-HOST/oidc/callback")
	f.StringVar(&oidc.CAFile, p+"ca-file", "", "PEM CA bundle for the provider's TLS, besides the system roots")
	f.StringVar((*string)(&oidc.Mode), p+"mode", string(panel.OIDCModeToken),
		`how the panel acts as the signed-in person: "token" (the API server trusts the issuer) or "impersonate" (constrained impersonation)`)
	f.StringVar(&oidc.UsernameClaim, p+"username-claim", panel.DefaultOIDCUsernameClaim, "ID token claim naming the user (as claimMappings.username.claim)")
	f.StringVar(&oidc.UsernamePrefix, p+"username-prefix", panel.DefaultOIDCUsernamePrefix, "prefix of usernames (as claimMappings.username.prefix)")
	f.StringVar(&oidc.GroupsClaim, p+"groups-claim", panel.DefaultOIDCGroupsClaim, "ID token claim listing groups (as claimMappings.groups.claim)")
	f.StringVar(&oidc.GroupsPrefix, p+"groups-prefix", panel.DefaultOIDCGroupsPrefix, "prefix of groups (as claimMappings.groups.prefix)")
	f.BoolVar(&oidc.AllowLegacyImpersonation, p+"allow-legacy-impersonation", false,
		`impersonate mode: start even when only the legacy, unlimited "impersonate" verb is granted (not recommended)`)
	f.StringVar(&oidc.RevealURL, p+"reveal-url", "", "impersonate mode: the operator's reveal endpoint (https://HOST:PORT), which claims keys for the signed-in person")
	f.StringVar(&oidc.RevealBundle, p+"reveal-ca-configmap", "", "impersonate mode: NAMESPACE/NAME of the ConfigMap holding the reveal endpoint's certificates")
	f.StringVar(&oidc.ProviderName, p+"provider-name", "", `label of the sign-in button ("Sign in with NAME")`)
}

// finishOIDCFlags turns single sign-on off when no issuer was given, and refuses its other
// flags then: a half-configured sign-in must not pass silently.
func finishOIDCFlags(f *pflag.FlagSet, o *panel.Options, prefix string) error {
	if o.OIDC == nil || o.OIDC.IssuerURL != "" {
		return nil
	}
	var set []string
	f.Visit(func(fl *pflag.Flag) {
		if strings.HasPrefix(fl.Name, prefix+"oidc-") {
			set = append(set, "--"+fl.Name)
		}
	})
	if len(set) > 0 {
		return fmt.Errorf("%s given without --%soidc-issuer-url", strings.Join(set, ", "), prefix)
	}
	o.OIDC = nil
	return nil
}
