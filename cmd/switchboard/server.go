package main

import (
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/switchboard-dev/switchboard/internal/frontdoor"
	"github.com/switchboard-dev/switchboard/internal/memlimit"
	"github.com/switchboard-dev/switchboard/internal/panel"
	"github.com/switchboard-dev/switchboard/internal/server"
)

func newServerCommand() *cobra.Command {
	var (
		opts           server.Options
		trustedProxies []string
		panelOpts      panel.Options
		newLogger      func() logr.Logger
	)
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Serve the /v1 Connections API from the informer cache",
		Long: `Serve GET /v1/connections for bearer API keys. Keys are checked against the hash Secrets
of the system namespace and the APIKeys, held in an in-memory index fed by informers: no request
calls the Kubernetes API server. Every replica serves (no leader election).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			newLogger()
			limit, err := memlimit.Apply(os.Getenv)
			if err != nil {
				return err
			}
			if limit > 0 {
				ctrl.Log.WithName("server").Info("Go memory limit set from the container's", "bytes", limit, "from", "$"+memlimit.EnvVar)
			}
			for _, s := range trustedProxies {
				p, err := parsePrefix(s)
				if err != nil {
					return err
				}
				opts.TrustedProxies = append(opts.TrustedProxies, p)
			}
			// The password comes from the environment (a Secret in the chart), never a flag or the URL
			// in the Deployment, where whoever may read Deployments would see it.
			opts.RateLimitRedisPassword = os.Getenv(redisPasswordEnv)
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return fmt.Errorf("finding the Kubernetes API server: %w", err)
			}
			if err := finishOIDCFlags(cmd.Flags(), &panelOpts, "panel-"); err != nil {
				return err
			}
			if opts.PanelListen != "" {
				// The panel counts sign-in attempts per client by /v1's rules, behind the same proxies.
				panelOpts.TrustedProxies = opts.TrustedProxies
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
	newLogger = bindLogFlags(f)
	// Every default has one home, server's Default constants.
	f.StringVar(&opts.Listen, "listen", server.DefaultListen, "address of the /v1 API")
	f.StringVar(&opts.MetricsBindAddress, "metrics-bind-address", server.DefaultMetricsBindAddress, `address of the Prometheus metrics; "0" disables them`)
	f.BoolVar(&opts.MetricsSecure, "metrics-secure", true, "serve metrics over HTTPS to callers whose token RBAC allows to get /metrics (false: plain HTTP to anyone)")
	f.BoolVar(&opts.Pprof, "pprof", false, "serve net/http/pprof under /debug/pprof/ on the metrics address (keep that port private)")
	f.StringVar(&opts.HealthProbeBindAddress, "health-probe-bind-address", server.DefaultHealthProbeBindAddress, `address of /healthz and /readyz; "0" disables them`)
	f.StringVar(&opts.SystemNamespace, "system-namespace", podNamespace(), "namespace of the hash Secrets (default: $POD_NAMESPACE, else "+server.DefaultSystemNamespace+")")
	f.StringVar(&opts.KeyPrefix, "key-prefix", server.DefaultKeyPrefix, "prefix of valid keys")
	f.StringSliceVar(&trustedProxies, "trusted-proxies", nil, "CIDRs (or addresses) of the proxies in front of the server (e.g. the ingress controller's pods) whose X-Forwarded-For is believed; never a pod-wide CIDR, since any pod in it could then pick its address")
	f.BoolVar(&opts.PeersAreProxies, "peers-are-proxies", false, "the peers are proxies (an ingress controller) not in --trusted-proxies, so the server cannot know a client's address: keys with allowedSourceRanges are then refused (403 SOURCE_NOT_ALLOWED) instead of judged by the proxy's address")
	f.Int64Var(&opts.MaxInFlightBytesPerNamespace, "max-in-flight-bytes-per-namespace", server.DefaultMaxInFlightBytesPerNamespace, "most bytes of one namespace's list responses this replica writes at once (slow readers hold theirs); past it, 429 TOO_MANY_CONCURRENT_REQUESTS unless none is in flight; negative: no bound")
	f.IntVar(&opts.MaxConnections, "max-connections", server.DefaultMaxConnections, "most open connections of the /v1 listener (each costs up to about 150 KiB); at the bound one not being answered, of the client holding the most, is closed for a new one, else new ones wait; negative: no bound")
	f.IntVar(&opts.MaxConnectionsPerClient, "max-connections-per-client", server.DefaultMaxConnectionsPerClient, "most open connections of one client address (an IPv6 client by its /64) on the /v1 listener, but for --trusted-proxies peers; one more is closed as it is accepted; negative: no bound")
	f.IntVar(&opts.AuthzHTTPMaxConnections, "authz-http-max-connections", server.DefaultAuthzHTTPMaxConnections, "most open connections of the forward-auth listener; at the bound one not being answered, of the client holding the most, is closed for a new one, else new ones wait; negative: no bound")
	f.IntVar(&opts.AuthzHTTPMaxConnectionsPerClient, "authz-http-max-connections-per-client", server.DefaultAuthzHTTPMaxConnectionsPerClient, "most open connections of one client address (an IPv6 client by its /64) on the forward-auth listener, but for --trusted-proxies peers; one more is closed as it is accepted; negative: no bound")
	f.Float64Var(&opts.FailureRate, "auth-failure-rate", server.DefaultFailureRate, "failed authentications per second an address regains; negative disables the limit")
	f.IntVar(&opts.FailureBurst, "auth-failure-burst", server.DefaultFailureBurst, "failed authentications an address may make at once; after them its failures get 429 (valid keys are always served)")
	f.IntVar(&opts.RateLimitClients, "rate-limit-clients", server.DefaultRateLimitClients, "how many client addresses the failure limiter remembers")
	f.StringVar(&opts.RateLimitRedis, "rate-limit-redis", "", "redis:// or rediss:// URL of a Redis that keeps keys' rate-limit budgets, exact across replicas\n(password: $"+redisPasswordEnv+"); empty keeps them in memory, per replica")
	f.DurationVar(&opts.RateLimitRedisTimeout, "rate-limit-redis-timeout", server.DefaultRateLimitRedisTimeout, "longest wait for Redis per request; past it (or when Redis is down) the request is decided in memory, per replica")
	f.DurationVar(&opts.LastUsedInterval, "last-used-interval", server.DefaultLastUsedInterval, "least time between two writes of one key's status.lastUsedAt")
	f.Float64Var(&opts.LastUsedWriteRate, "last-used-writes-per-second", server.DefaultLastUsedWriteRate, "most status.lastUsedAt writes per second of this replica; over budget, the stalest keys are written first")
	f.DurationVar(&opts.ShutdownDelay, "shutdown-delay", server.DefaultShutdownDelay, "how long readiness fails before the listener closes")
	f.DurationVar(&opts.ShutdownTimeout, "shutdown-timeout", server.DefaultShutdownTimeout, "how long open requests may drain")
	f.StringVar(&opts.Audience, "audience", server.DefaultAudience, "the audience of this server's /v1: keys whose spec.audiences do not name it get 403 AUDIENCE_NOT_ALLOWED here")
	f.StringVar(&opts.AuthzGRPCListen, "authz-grpc-listen", "", "address of Envoy's external authorization (gRPC Authorization/Check and health) for gateways; empty serves none")
	f.StringVar(&opts.AuthzGRPCTLSCertFile, "authz-grpc-tls-cert-file", "", "certificate of the ext_authz listener, which then serves TLS (reloaded when it changes)")
	f.StringVar(&opts.AuthzGRPCTLSKeyFile, "authz-grpc-tls-key-file", "", "private key of --authz-grpc-tls-cert-file")
	f.StringVar(&opts.AuthzGRPCClientCAFile, "authz-grpc-client-ca-file", "", "CA certificates the gateways' client certificates must chain to (mutual TLS); needs the TLS flags")
	f.IntVar(&opts.AuthzGRPCMaxMessageBytes, "authz-grpc-max-message-bytes", frontdoor.DefaultGRPCLimits.MaxMessage, "largest CheckRequest the ext_authz listener reads, in bytes (4096 to 512 KiB): Envoy's headers (60 KiB by default) plus any body with_request_body forwards; a larger one is an RPC error, on which a gateway must not fail open")
	f.BoolVar(&opts.AuthzStripAuthorization, "authz-strip-authorization", false, "ext_authz: remove the Authorization field before an allowed request goes upstream, so backends never see keys")
	f.StringVar(&opts.AuthzHTTPListen, "authz-http-listen", "", "address of the forward-auth endpoints (/authz/<audience>) for Traefik, Caddy and NGINX (Envoy: --authz-grpc-listen); empty serves none")
	f.StringVar(&opts.PanelListen, "panel-listen", "", `address of the web panel; empty serves no panel (run "switchboard panel" to serve it apart from /v1)`)
	bindPanelFlags(f, &panelOpts, "panel-")
	return cmd
}

// redisPasswordEnv names the variable that holds the rate-limit Redis's password.
const redisPasswordEnv = "SWITCHBOARD_RATE_LIMIT_REDIS_PASSWORD"

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
