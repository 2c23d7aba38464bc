package main

import (
	"fmt"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/switchboard-dev/switchboard/internal/panel"
)

func newPanelCommand() *cobra.Command {
	var (
		opts      panel.Options
		serve     panel.ServeOptions
		newLogger func() logr.Logger
	)
	cmd := &cobra.Command{
		Use:   "panel",
		Short: "Serve the web panel (\"API keys\") on its own, apart from /v1",
		Long: `Serve the web panel alone: people sign in with their own Kubernetes token and manage API
keys with it. The process watches nothing and caches nothing; its own identity only creates
TokenReviews. Run it apart from "switchboard server" so that a panel failure or overload never
touches /v1 (the Helm chart does, by default).`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
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
}
