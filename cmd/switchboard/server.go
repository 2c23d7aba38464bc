package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/config"
	"github.com/switchboard-dev/switchboard/internal/memlimit"
	"github.com/switchboard-dev/switchboard/internal/panel"
	"github.com/switchboard-dev/switchboard/internal/server"
	"github.com/switchboard-dev/switchboard/internal/server/leakreceiver"
)

func newServerCommand() *cobra.Command {
	var (
		cf        *configFlags
		flags     *overrides[configv1alpha1.ServerConfiguration]
		newLogger func() logr.Logger
	)
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Serve the /v1 Connections API from the informer cache",
		Long: `Serve GET /v1/connections for bearer API keys. Keys are checked against the hash Secrets
of the system namespace and the APIKeys, held in an in-memory index fed by informers: no request
calls the Kubernetes API server. Every replica serves (no leader election). Its configuration is a
ServerConfiguration (--config), which the flags given override; its panel section serves the
web panel from this process too.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := &configv1alpha1.ServerConfiguration{}
			done, err := complete(cf, c, func(c *configv1alpha1.ServerConfiguration) {
				flags.apply(c)
				if c.SystemNamespace == "" {
					c.SystemNamespace = podNamespace()
				}
			}, configv1alpha1.SetDefaults_ServerConfiguration, config.ValidateServerConfiguration, cmd.OutOrStdout())
			if done || err != nil {
				return err
			}
			opts, err := server.OptionsFromConfig(c)
			if err != nil {
				return err
			}
			if opts.RateLimitRedisPassword, err = redisPassword(c.RateLimitRedis.PasswordFile); err != nil {
				return err
			}
			if err := leakReportSecrets(&c.LeakReports, &opts.LeakReports); err != nil {
				return err
			}
			newLogger()
			limit, err := memlimit.Apply(os.Getenv)
			if err != nil {
				return err
			}
			if limit > 0 {
				ctrl.Log.WithName("server").Info("Go memory limit set from the container's", "bytes", limit, "from", "$"+memlimit.EnvVar)
			}
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return fmt.Errorf("finding the Kubernetes API server: %w", err)
			}
			if p := c.Panel; p != nil && p.Listen != "" {
				// The panel counts sign-in attempts per client by /v1's rules, behind the same proxies.
				h, err := panel.NewHandler(cfg, panel.OptionsFromConfig(&p.PanelSettings, opts.TrustedProxies))
				if err != nil {
					return fmt.Errorf("the panel (panel.listen %s): %w", p.Listen, err)
				}
				opts.PanelListen, opts.Panel = p.Listen, h
			}
			return server.Run(ctrl.SetupSignalHandler(), cfg, opts)
		},
	}
	f := cmd.Flags()
	newLogger = bindLogFlags(f)
	cf = bindConfigFlags(f, "ServerConfiguration")
	// The flags show the configuration's defaults: they have one home.
	def := &configv1alpha1.ServerConfiguration{}
	configv1alpha1.SetDefaults_ServerConfiguration(def)
	flags = newOverrides[configv1alpha1.ServerConfiguration](f)
	type sc = configv1alpha1.ServerConfiguration
	flags.String("listen", *def.Listen, "address of the /v1 API", func(c *sc, v string) { c.Listen = &v })
	flags.String("metrics-bind-address", *def.MetricsBindAddress, `address of the Prometheus metrics; "0" disables them`,
		func(c *sc, v string) { c.MetricsBindAddress = address(v) })
	flags.Bool("metrics-secure", true, "serve metrics over HTTPS to callers whose token RBAC allows to get /metrics (false: plain HTTP to anyone)",
		func(c *sc, v bool) { c.MetricsSecure = &v })
	flags.Bool("pprof", false, "serve net/http/pprof under /debug/pprof/ on the metrics address (keep that port private)", func(c *sc, v bool) { c.Pprof = v })
	flags.String("health-probe-bind-address", *def.HealthProbeBindAddress, `address of /healthz and /readyz; "0" disables them`,
		func(c *sc, v string) { c.HealthProbeBindAddress = address(v) })
	flags.String("system-namespace", podNamespace(), "namespace of the hash Secrets (default: $POD_NAMESPACE, else "+def.SystemNamespace+")",
		func(c *sc, v string) { c.SystemNamespace = v })
	flags.String("key-prefix", def.KeyPrefix, "prefix of valid keys", func(c *sc, v string) { c.KeyPrefix = v })
	flags.StringSlice("trusted-proxies", nil, "CIDRs (or addresses) of the proxies in front of the server (e.g. the ingress controller's pods) whose X-Forwarded-For is believed; never a pod-wide CIDR, since any pod in it could then pick its address",
		func(c *sc, v []string) { c.TrustedProxies = v })
	flags.Bool("peers-are-proxies", false, "the peers are proxies (an ingress controller) not in --trusted-proxies, so the server cannot know a client's address: keys with allowedSourceRanges are then refused (403 SOURCE_NOT_ALLOWED) instead of judged by the proxy's address",
		func(c *sc, v bool) { c.PeersAreProxies = v })
	flags.Int64("max-in-flight-bytes-per-namespace", *def.MaxInFlightBytesPerNamespace, "most bytes of one namespace's list responses this replica writes at once (slow readers hold theirs); past it, 429 TOO_MANY_CONCURRENT_REQUESTS unless none is in flight; negative: no bound",
		func(c *sc, v int64) { c.MaxInFlightBytesPerNamespace = bound(v) })
	flags.Int32("max-connections", *def.MaxConnections, "most open connections of the /v1 listener (each costs up to about 150 KiB); at the bound one not being answered, of the client holding the most, is closed for a new one, else new ones wait; negative: no bound",
		func(c *sc, v int32) { c.MaxConnections = bound(v) })
	flags.Int32("max-connections-per-client", *def.MaxConnectionsPerClient, "most open connections of one client address (an IPv6 client by its /64) on the /v1 listener, but for --trusted-proxies peers; one more is closed as it is accepted; negative: no bound",
		func(c *sc, v int32) { c.MaxConnectionsPerClient = bound(v) })
	flags.Int32("authz-http-max-connections", *def.Authz.HTTP.MaxConnections, "most open connections of the forward-auth listener; at the bound one not being answered, of the client holding the most, is closed for a new one, else new ones wait; negative: no bound",
		func(c *sc, v int32) { c.Authz.HTTP.MaxConnections = bound(v) })
	flags.Int32("authz-http-max-connections-per-client", *def.Authz.HTTP.MaxConnectionsPerClient, "most open connections of one client address (an IPv6 client by its /64) on the forward-auth listener, but for --trusted-proxies peers; one more is closed as it is accepted; negative: no bound",
		func(c *sc, v int32) { c.Authz.HTTP.MaxConnectionsPerClient = bound(v) })
	flags.Float64("auth-failure-rate", *def.AuthFailureLimit.Rate, "failed authentications per second an address regains; negative disables the limit",
		func(c *sc, v float64) { c.AuthFailureLimit.Rate = bound(v) })
	flags.Int32("auth-failure-burst", *def.AuthFailureLimit.Burst, "failed authentications an address may make at once; after them its failures get 429 (valid keys are always served)",
		func(c *sc, v int32) { c.AuthFailureLimit.Burst = orDefault(v) })
	flags.Int32("rate-limit-clients", *def.AuthFailureLimit.Clients, "how many client addresses the failure limiter remembers",
		func(c *sc, v int32) { c.AuthFailureLimit.Clients = orDefault(v) })
	flags.String("rate-limit-redis", "", "redis:// or rediss:// URL of a Redis that keeps keys' rate-limit budgets, exact across replicas\n(password: $"+redisPasswordEnv+"); empty keeps them in memory, per replica",
		func(c *sc, v string) { c.RateLimitRedis.URL = v })
	flags.Duration("rate-limit-redis-timeout", def.RateLimitRedis.Timeout.Duration, "longest wait for Redis per request; past it (or when Redis is down) the request is decided in memory, per replica",
		func(c *sc, v time.Duration) { c.RateLimitRedis.Timeout = period(v) })
	flags.Duration("last-used-interval", def.LastUsed.Interval.Duration, "least time between two writes of one key's status.lastUsedAt",
		func(c *sc, v time.Duration) { c.LastUsed.Interval = period(v) })
	flags.Float64("last-used-writes-per-second", *def.LastUsed.WritesPerSecond, "most status.lastUsedAt writes per second of this replica; over budget, the stalest keys are written first",
		func(c *sc, v float64) { c.LastUsed.WritesPerSecond = orDefault(v) })
	flags.Duration("shutdown-delay", def.ShutdownDelay.Duration, "how long readiness fails before the listener closes; negative: none",
		func(c *sc, v time.Duration) { c.ShutdownDelay = periodOrNone(v) })
	flags.Duration("shutdown-timeout", def.ShutdownTimeout.Duration, "how long open requests may drain",
		func(c *sc, v time.Duration) { c.ShutdownTimeout = period(v) })
	flags.String("audience", def.Audience, "the audience of this server's /v1: keys whose spec.audiences do not name it get 403 AUDIENCE_NOT_ALLOWED here",
		func(c *sc, v string) { c.Audience = v })
	flags.String("authz-grpc-listen", "", "address of Envoy's external authorization (gRPC Authorization/Check and health) for gateways; empty serves none",
		func(c *sc, v string) { c.Authz.GRPC.Listen = v })
	flags.String("authz-grpc-tls-cert-file", "", "certificate of the ext_authz listener, which then serves TLS (reloaded when it changes)",
		func(c *sc, v string) { c.Authz.GRPC.TLSCertFile = v })
	flags.String("authz-grpc-tls-key-file", "", "private key of --authz-grpc-tls-cert-file", func(c *sc, v string) { c.Authz.GRPC.TLSKeyFile = v })
	flags.String("authz-grpc-client-ca-file", "", "CA certificates the gateways' client certificates must chain to (mutual TLS); needs the TLS flags",
		func(c *sc, v string) { c.Authz.GRPC.ClientCAFile = v })
	flags.StringSlice("authz-grpc-gateways", nil, "CIDRs (or addresses) of the gateways that call the ext_authz listener (Envoy's pods): a quarter of its connections and calls are theirs alone, and no bound per client address applies to them",
		func(c *sc, v []string) { c.Authz.GRPC.Gateways = v })
	flags.Int32("authz-grpc-max-message-bytes", *def.Authz.GRPC.MaxMessageBytes, "largest CheckRequest the ext_authz listener reads, in bytes (4096 to 512 KiB): Envoy's headers (60 KiB by default) plus any body with_request_body forwards; a larger one is an RPC error, on which a gateway must not fail open",
		func(c *sc, v int32) { c.Authz.GRPC.MaxMessageBytes = orDefault(v) })
	flags.Bool("authz-strip-authorization", false, "ext_authz: remove the Authorization field before an allowed request goes upstream, so backends never see keys",
		func(c *sc, v bool) { c.Authz.GRPC.StripAuthorization = v })
	flags.String("authz-http-listen", "", "address of the forward-auth endpoints (/authz/<audience>) for Traefik, Caddy and NGINX (Envoy: --authz-grpc-listen); empty serves none",
		func(c *sc, v string) { c.Authz.HTTP.Listen = v })

	// The panel's flags, deprecated: the panel section of the configuration replaces them
	// (or `switchboard panel`, a process of its own). They work for one more release.
	panelSection := func(c *sc) *configv1alpha1.PanelSettings {
		if c.Panel == nil {
			c.Panel = &configv1alpha1.ServerPanel{}
		}
		return &c.Panel.PanelSettings
	}
	flags.String("panel-listen", "", `address of the web panel; empty serves no panel (run "switchboard panel" to serve it apart from /v1)`,
		func(c *sc, v string) { panelSection(c); c.Panel.Listen = v })
	flags.deprecate("panel-listen", "panel.listen")
	for name, field := range bindPanelFlags(flags, "panel-", panelSection) {
		flags.deprecate(name, "panel."+field)
	}
	return cmd
}

// redisPasswordEnv names the variable that holds the rate-limit Redis's password, when the
// configuration names no password file.
const redisPasswordEnv = "SWITCHBOARD_RATE_LIMIT_REDIS_PASSWORD"

// redisPassword is the rate-limit Redis's password: from file (a mounted Secret) when the
// configuration names one, else from the environment (a Secret in the chart); never a flag or
// the URL in the Deployment, where whoever may read Deployments would see it.
// leakReportSecrets reads the leak reports' secrets from the files the configuration names
// (mounted Secrets): the partner keys' token, the webhook's secret and the API token.
func leakReportSecrets(c *configv1alpha1.LeakReports, into *leakreceiver.Config) error {
	for _, s := range []struct {
		file, field string
		into        *string
	}{
		{c.Partner.TokenFile, "leakReports.partner.tokenFile", &into.PublicKeysToken},
		{c.OrganizationAlerts.APITokenFile, "leakReports.organizationAlerts.apiTokenFile", &into.APIToken},
	} {
		v, err := secretFile(s.file, s.field)
		if err != nil {
			return err
		}
		*s.into = v
	}
	secret, err := secretFile(c.OrganizationAlerts.WebhookSecretFile, "leakReports.organizationAlerts.webhookSecretFile")
	into.WebhookSecret = []byte(secret)
	return err
}

// secretFile is the content of file but for a final line break ("" when file is ""); its error
// names the configuration's field, never the content.
func secretFile(file, field string) (string, error) {
	if file == "" {
		return "", nil
	}
	b, err := os.ReadFile(file) //nolint:gosec // G304: the file the configuration names, on purpose
	if err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return "", fmt.Errorf("%s: %s is empty", field, file)
	}
	return v, nil
}

func redisPassword(file string) (string, error) {
	if file == "" {
		return os.Getenv(redisPasswordEnv), nil
	}
	b, err := os.ReadFile(file) //nolint:gosec // G304: the file the configuration names, on purpose
	if err != nil {
		return "", fmt.Errorf("rateLimitRedis.passwordFile: %w", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}
