package main

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/logging"
	"github.com/switchboard-dev/switchboard/internal/panel"
	"github.com/switchboard-dev/switchboard/internal/server"
)

func newServerCommand() *cobra.Command {
	var (
		opts           server.Options
		trustedProxies []string
		zapOpts        zap.Options
		panelOpts      panel.Options
	)
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Serve the /v1 Connections API from the informer cache",
		Long: `Serve GET /v1/connections for bearer API keys. Keys are checked against the hash Secrets
of the system namespace and the APIKeys, held in an in-memory index fed by informers: no request
calls the Kubernetes API server. Every replica serves (no leader election).`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			logging.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
			for _, s := range trustedProxies {
				p, err := parsePrefix(s)
				if err != nil {
					return err
				}
				opts.TrustedProxies = append(opts.TrustedProxies, p)
			}
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return fmt.Errorf("finding the Kubernetes API server: %w", err)
			}
			if opts.PanelListen != "" {
				h, err := panel.NewHandler(cfg, panelOpts)
				if err != nil {
					return fmt.Errorf("the panel (--panel-listen %s): %w", opts.PanelListen, err)
				}
				opts.Panel = h
			}
			return server.Run(ctrl.SetupSignalHandler(), cfg, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Listen, "listen", ":8080", "address of the /v1 API")
	f.StringVar(&opts.MetricsBindAddress, "metrics-bind-address", ":8081", `address of the Prometheus metrics; "0" disables them`)
	f.StringVar(&opts.HealthProbeBindAddress, "health-probe-bind-address", ":8082", `address of /healthz and /readyz; "0" disables them`)
	f.StringVar(&opts.SystemNamespace, "system-namespace", defaultSystemNamespace(), "namespace of the hash Secrets (default: $POD_NAMESPACE, else switchboard-system)")
	f.StringVar(&opts.KeyPrefix, "key-prefix", apikey.DefaultPrefix, "prefix of valid keys")
	f.StringSliceVar(&trustedProxies, "trusted-proxies", nil, "CIDRs (or addresses) of proxies whose X-Forwarded-For is believed, e.g. 10.0.0.0/8")
	f.Float64Var(&opts.FailureRate, "auth-failure-rate", 1, "failed authentications per second an address regains; negative disables the limit")
	f.IntVar(&opts.FailureBurst, "auth-failure-burst", 20, "failed authentications an address may make at once before 429")
	f.IntVar(&opts.RateLimitClients, "rate-limit-clients", 1<<16, "how many client addresses the failure limiter remembers")
	f.DurationVar(&opts.LastUsedInterval, "last-used-interval", 0, "least time between two writes of one key's status.lastUsedAt (default 1m)")
	f.Float64Var(&opts.LastUsedWriteRate, "last-used-writes-per-second", 20, "most status.lastUsedAt writes per second of this replica; over budget, the stalest keys are written first")
	f.DurationVar(&opts.ShutdownDelay, "shutdown-delay", 0, "how long readiness fails before the listener closes (default 5s)")
	f.DurationVar(&opts.ShutdownTimeout, "shutdown-timeout", 0, "how long open requests may drain (default 30s)")
	f.StringVar(&opts.PanelListen, "panel-listen", "", `address of the web panel; empty serves no panel (run "switchboard panel" to serve it apart from /v1)`)
	bindPanelFlags(f, &panelOpts, "panel-")
	gofs := flag.NewFlagSet("zap", flag.ExitOnError)
	zapOpts.BindFlags(gofs)
	f.AddGoFlagSet(gofs)
	return cmd
}

// defaultSystemNamespace is the namespace the server runs in, as the Downward API tells it.
func defaultSystemNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return switchboardv1alpha1.DefaultSystemNamespace
}

// parsePrefix accepts a CIDR or a single address.
func parsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return p, fmt.Errorf("--trusted-proxies: %q is not a CIDR: %w", s, err)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("--trusted-proxies: %q is not an address or CIDR: %w", s, err)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}
