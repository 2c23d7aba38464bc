package panel

import (
	"net/netip"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
)

// OptionsFromConfig turns defaulted, validated panel settings (a PanelConfiguration's, or a
// ServerConfiguration's panel section) into Options, behind the given trusted proxies. The
// logger and clock are left to the caller.
func OptionsFromConfig(s *configv1alpha1.PanelSettings, trustedProxies []netip.Prefix) Options {
	o := Options{
		SecureCookies:      s.SecureCookies,
		MaxSessions:        int(*s.MaxSessions),
		MaxSessionsPerUser: int(*s.MaxSessionsPerUser),
		LoginRate:          *s.LoginRate,
		LoginBurst:         int(*s.LoginBurst),
		TrustedProxies:     trustedProxies,
	}
	if c := s.OIDC; c != nil {
		o.OIDC = &OIDCOptions{
			IssuerURL:                c.IssuerURL,
			ClientID:                 c.ClientID,
			ClientSecretFile:         c.ClientSecretFile,
			Scopes:                   c.Scopes,
			RedirectURL:              c.RedirectURL,
			CAFile:                   c.CAFile,
			Mode:                     OIDCMode(c.Mode),
			UsernameClaim:            *c.UsernameClaim,
			UsernamePrefix:           *c.UsernamePrefix,
			GroupsClaim:              *c.GroupsClaim,
			GroupsPrefix:             *c.GroupsPrefix,
			AllowLegacyImpersonation: c.AllowLegacyImpersonation,
			ProviderName:             c.ProviderName,
			RevealURL:                c.RevealURL,
			RevealBundle:             c.RevealCAConfigMap,
		}
	}
	return o
}

// ServeOptionsFromConfig is where and how a PanelConfiguration serves: "" (no probes) and 0
// (no shutdown delay) spelt as ServeOptions spell them.
func ServeOptionsFromConfig(c *configv1alpha1.PanelConfiguration) ServeOptions {
	s := ServeOptions{
		Listen:                 *c.Listen,
		HealthProbeBindAddress: *c.HealthProbeBindAddress,
		ShutdownDelay:          c.ShutdownDelay.Duration,
		ShutdownTimeout:        c.ShutdownTimeout.Duration,
	}
	if s.HealthProbeBindAddress == "" {
		s.HealthProbeBindAddress = "0"
	}
	if s.ShutdownDelay == 0 {
		s.ShutdownDelay = -1
	}
	return s
}
