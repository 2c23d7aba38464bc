package main

import (
	"context"
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/panel"
	"github.com/switchboard-dev/switchboard/internal/server"
	"github.com/switchboard-dev/switchboard/internal/server/memlimit"
)

// serverComponent is `switchboard server`.
var serverComponent = component[*sc]{
	use:   "server",
	short: "Serve the /v1 Connections API from the informer cache",
	long: `Serve GET /v1/connections for bearer API keys. Keys are checked against the hash Secrets
of the system namespace and the APIKeys, held in an in-memory index fed by informers: no request
calls the Kubernetes API server. Every replica serves (no leader election). Its configuration is a
ServerConfiguration (--config), which the flags given override; its panel section serves the
web panel from this process too.`,
	// The deprecated --panel-* flags bind into a panel section, which a configuration has
	// only when they are given (or the file has one).
	prepare: func(c *sc) {
		c.Panel = &configv1alpha1.ServerPanel{PanelSettings: configv1alpha1.PanelSettings{OIDC: &configv1alpha1.OIDC{}}}
	},
	bind:            bindServerFlags,
	systemNamespace: func(c *sc) *string { return &c.SystemNamespace },
	run:             runServer,
}

// runServer runs the server of c, and the panel of its panel section.
func runServer(ctx context.Context, c *configv1alpha1.ServerConfiguration, p process) error {
	limit, err := memlimit.Apply(os.Getenv)
	if err != nil {
		return err
	}
	if limit > 0 {
		p.log.WithName("server").Info("Go memory limit set from the container's", "bytes", limit, "from", "$"+memlimit.EnvVar)
	}
	deps := server.Deps{RESTConfig: p.rest}
	if s := c.Panel; s != nil && s.Listen != "" {
		// The panel counts sign-in attempts per client by /v1's rules, behind the same proxies.
		if deps.PanelHandler, err = panel.NewHandler(&s.PanelSettings, c.TrustedProxies, panel.Deps{RESTConfig: p.rest}); err != nil {
			return fmt.Errorf("the panel (panel.listen %s): %w", s.Listen, err)
		}
	}
	return server.Run(ctx, c, deps)
}

func bindServerFlags(f *configFlags[*sc]) {
	optional(f, "listen", "address of the /v1 API", func(c *sc) **string { return &c.Listen })
	bindMetricsFlags(f, func(c *sc) *configv1alpha1.Metrics { return &c.Metrics })
	value(f, "pprof", "serve net/http/pprof under /debug/pprof/ on the metrics address (keep that port private)", func(c *sc) *bool { return &c.Pprof })
	optional(f, "health-probe-bind-address", `address of /healthz and /readyz; "" serves none`, func(c *sc) **string { return &c.HealthProbeBindAddress }, addressZero)
	value(f, "system-namespace", "namespace of the hash Secrets (default: $POD_NAMESPACE, else "+configv1alpha1.DefaultSystemNamespace+")",
		func(c *sc) *string { return &c.SystemNamespace })
	value(f, "key-prefix", "prefix of valid keys", func(c *sc) *string { return &c.KeyPrefix })
	value(f, "trusted-proxies", "CIDRs (or addresses) of the proxies in front of the server (e.g. the ingress controller's pods) whose X-Forwarded-For is believed; never a pod-wide CIDR, since any pod in it could then pick its address",
		func(c *sc) *[]string { return &c.TrustedProxies })
	value(f, "peers-are-proxies", "the peers are proxies (an ingress controller) not in --trusted-proxies, so the server cannot know a client's address: keys with allowedSourceRanges are then refused (403 SOURCE_NOT_ALLOWED) instead of judged by the proxy's address",
		func(c *sc) *bool { return &c.PeersAreProxies })
	optional(f, "max-in-flight-bytes-per-namespace", "most bytes of one namespace's list responses this replica writes at once (slow readers hold theirs); past it, 429 TOO_MANY_CONCURRENT_REQUESTS unless none is in flight; 0: no bound",
		func(c *sc) **int64 { return &c.MaxInFlightBytesPerNamespace }, negativeNone)
	optional(f, "max-connections", "most open connections of the /v1 listener (each costs up to about 150 KiB); at the bound one not being answered, of the client holding the most, is closed for a new one, else new ones wait; 0: no bound",
		func(c *sc) **int32 { return &c.MaxConnections }, negativeNone)
	optional(f, "max-connections-per-client", "most open connections of one client address (an IPv6 client by its /64) on the /v1 listener, but for --trusted-proxies peers; one more is closed as it is accepted; 0: no bound",
		func(c *sc) **int32 { return &c.MaxConnectionsPerClient }, negativeNone)
	optional(f, "authz-http-max-connections", "most open connections of the forward-auth listener; at the bound one not being answered, of the client holding the most, is closed for a new one, else new ones wait; 0: no bound",
		func(c *sc) **int32 { return &c.Authz.HTTP.MaxConnections }, negativeNone)
	optional(f, "authz-http-max-connections-per-client", "most open connections of one client address (an IPv6 client by its /64) on the forward-auth listener, but for --trusted-proxies peers; one more is closed as it is accepted; 0: no bound",
		func(c *sc) **int32 { return &c.Authz.HTTP.MaxConnectionsPerClient }, negativeNone)
	optional(f, "auth-failure-rate", "failed authentications per second an address regains; 0 turns the limit off",
		func(c *sc) **float64 { return &c.AuthFailureLimit.Rate }, negativeNone)
	optional(f, "auth-failure-burst", "failed authentications an address may make at once; after them its failures get 429 (valid keys are always served)",
		func(c *sc) **int32 { return &c.AuthFailureLimit.Burst }, zeroDefault)
	optional(f, "rate-limit-clients", "how many client addresses the failure limiter remembers", func(c *sc) **int32 { return &c.AuthFailureLimit.Clients }, zeroDefault)
	value(f, "rate-limit-redis", "redis:// or rediss:// URL of a Redis that keeps keys' rate-limit budgets, exact across replicas\n(password: $"+server.RedisPasswordEnv+"); empty keeps them in memory, per replica",
		func(c *sc) *string { return &c.RateLimitRedis.URL })
	optional(f, "rate-limit-redis-timeout", "longest wait for Redis per request; past it (or when Redis is down) the request is decided in memory, per replica",
		func(c *sc) **metav1.Duration { return &c.RateLimitRedis.Timeout }, zeroDefault)
	value(f, "rate-limit-credits-on-redis-failure", "what a key with credits gets while Redis fails: Refuse (503 NOT_READY, nothing sold twice) or CountInMemory (each replica counts its share from what it saw; up to the running replicas × the share more per period, never merged back)",
		func(c *sc) *string { return &c.RateLimitCredits.OnRedisFailure })
	optional(f, "rate-limit-credits-replicas", "how many replicas at most decide keys' credits in their own memory (without Redis, or with --rate-limit-credits-on-redis-failure=CountInMemory while it fails): each admits amount/replicas of a period, so that as many never admit more than the amount",
		func(c *sc) **int32 { return &c.RateLimitCredits.Replicas }, zeroDefault)
	optional(f, "last-used-interval", "least time between two writes of one key's status.lastUsedAt", func(c *sc) **metav1.Duration { return &c.LastUsed.Interval }, zeroDefault)
	optional(f, "last-used-writes-per-second", "most status.lastUsedAt writes per second of this replica; over budget, the stalest keys are written first",
		func(c *sc) **float64 { return &c.LastUsed.WritesPerSecond }, zeroDefault)
	optional(f, "shutdown-delay", "how long readiness fails before the listener closes; 0: none", func(c *sc) **metav1.Duration { return &c.ShutdownDelay }, negativeNone)
	optional(f, "shutdown-timeout", "how long open requests may drain", func(c *sc) **metav1.Duration { return &c.ShutdownTimeout }, zeroDefault)
	value(f, "audience", "the audience of this server's /v1: keys whose spec.audiences do not name it get 403 AUDIENCE_NOT_ALLOWED here",
		func(c *sc) *string { return &c.Audience })
	value(f, "authz-grpc-listen", "address of Envoy's external authorization (gRPC Authorization/Check and health) for gateways; empty serves none",
		func(c *sc) *string { return &c.Authz.GRPC.Listen })
	value(f, "authz-grpc-tls-cert-file", "certificate of the ext_authz listener, which then serves TLS (reloaded when it changes)",
		func(c *sc) *string { return &c.Authz.GRPC.TLSCertFile })
	value(f, "authz-grpc-tls-key-file", "private key of --authz-grpc-tls-cert-file", func(c *sc) *string { return &c.Authz.GRPC.TLSKeyFile })
	value(f, "authz-grpc-client-ca-file", "CA certificates the gateways' client certificates must chain to (mutual TLS); needs the TLS flags",
		func(c *sc) *string { return &c.Authz.GRPC.ClientCAFile })
	value(f, "authz-grpc-gateways", "CIDRs (or addresses) of the gateways that call the ext_authz listener (Envoy's pods): a quarter of its connections and calls are theirs alone, and no bound per client address applies to them",
		func(c *sc) *[]string { return &c.Authz.GRPC.Gateways })
	optional(f, "authz-grpc-max-message-bytes", "largest CheckRequest the ext_authz listener reads, in bytes (4096 to 512 KiB): Envoy's headers (60 KiB by default) plus any body with_request_body forwards; a larger one is an RPC error, on which a gateway must not fail open",
		func(c *sc) **int32 { return &c.Authz.GRPC.MaxMessageBytes }, zeroDefault)
	value(f, "authz-strip-authorization", "ext_authz: remove the Authorization field before an allowed request goes upstream, so backends never see keys",
		func(c *sc) *bool { return &c.Authz.GRPC.StripAuthorization })
	value(f, "authz-http-listen", "address of the forward-auth endpoints (/authz/<audience>) for Traefik, Caddy and NGINX (Envoy: --authz-grpc-listen); empty serves none",
		func(c *sc) *string { return &c.Authz.HTTP.Listen })

	// The panel's flags, deprecated: the panel section of the configuration replaces them
	// (or `switchboard panel`, a process of its own). They work for one more release.
	section := func(c *sc) *configv1alpha1.ServerPanel {
		if c.Panel == nil {
			c.Panel = &configv1alpha1.ServerPanel{}
		}
		return c.Panel
	}
	value(f, "panel-listen", `address of the web panel; empty serves no panel (run "switchboard panel" to serve it apart from /v1)`,
		func(c *sc) *string { return &section(c).Listen })
	f.deprecate("panel-listen", "panel.listen")
	for name, field := range bindPanelFlags(f, "panel-", func(c *sc) *configv1alpha1.PanelSettings { return &section(c).PanelSettings }) {
		f.deprecate(name, "panel."+field)
	}
}
