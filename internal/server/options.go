package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/frontdoor"
	"github.com/switchboard-dev/switchboard/internal/server/keycheck"
	"github.com/switchboard-dev/switchboard/internal/server/leakreceiver"
)

// Defaults of the server. They have this one home: Options.Default fills zero fields from
// them, and `switchboard server` shows them as its flags' defaults.
const (
	DefaultListen = configv1alpha1.DefaultServerListen
	// DefaultMetricsBindAddress and DefaultHealthProbeBindAddress are where the command serves
	// metrics and probes. An embedded server (Options left empty) serves neither.
	DefaultMetricsBindAddress     = configv1alpha1.DefaultServerMetricsBindAddress
	DefaultHealthProbeBindAddress = configv1alpha1.DefaultServerHealthProbeBindAddress
	DefaultSystemNamespace        = switchboardv1alpha1.DefaultSystemNamespace
	DefaultKeyPrefix              = keycheck.DefaultKeyPrefix
	DefaultFailureRate            = configv1alpha1.DefaultAuthFailureRate
	DefaultFailureBurst           = configv1alpha1.DefaultAuthFailureBurst
	DefaultRateLimitClients       = configv1alpha1.DefaultAuthFailureClients
	DefaultRateLimitRedisTimeout  = keycheck.DefaultRedisTimeout
	DefaultLastUsedInterval       = configv1alpha1.DefaultLastUsedInterval
	DefaultLastUsedFlush          = 10 * time.Second
	DefaultLastUsedWriteRate      = configv1alpha1.DefaultLastUsedWritesPerSecond
	// DefaultMaxInFlightBytesPerNamespace bounds the bytes of one namespace's list responses
	// being written at once by a replica (internal/server/v1api).
	DefaultMaxInFlightBytesPerNamespace = configv1alpha1.DefaultMaxInFlightBytesPerNamespace
	// DefaultAudience is the audience of the server's own /v1.
	DefaultAudience        = configv1alpha1.DefaultAudience
	DefaultShutdownDelay   = configv1alpha1.DefaultShutdownDelay
	DefaultShutdownTimeout = configv1alpha1.DefaultShutdownTimeout
)

// The connection bounds' defaults are the front door's table (frontdoor.Doors says why these).
var (
	// DefaultMaxConnections and DefaultMaxConnectionsPerClient bound the API listener's open
	// connections, in all and of one client address.
	DefaultMaxConnections          = frontdoor.APILimits.MaxConnections
	DefaultMaxConnectionsPerClient = frontdoor.APILimits.MaxConnectionsPerClient
	// DefaultAuthzHTTPMaxConnections and DefaultAuthzHTTPMaxConnectionsPerClient bound the
	// forward-auth listener's.
	DefaultAuthzHTTPMaxConnections          = frontdoor.ForwardAuthLimits.MaxConnections
	DefaultAuthzHTTPMaxConnectionsPerClient = frontdoor.ForwardAuthLimits.MaxConnectionsPerClient
)

// Options configure the API server. Zero values take the Default constants above.
type Options struct {
	// Listen is the address of the /v1 API. Ignored when Listener is set.
	Listen string
	// Listener, when set, is used instead of listening on Listen (tests pass a ":0" listener).
	Listener net.Listener
	// MetricsBindAddress serves Prometheus metrics; "0" (or empty) disables it.
	MetricsBindAddress string
	// MetricsSecure serves them over HTTPS to authenticated callers RBAC allows to get /metrics
	// (internal/frontdoor/metricsauth), as the chart and config/ run the server.
	MetricsSecure bool
	// Pprof serves net/http/pprof under /debug/pprof/ on the metrics address, for profiling
	// (it exposes the process's internals: keep the metrics port private). Its answers may
	// take 5 minutes there, as a CPU profile or trace answers after the seconds it asks for.
	Pprof bool
	// HealthProbeBindAddress serves /healthz and /readyz; "0" (or empty) disables it.
	HealthProbeBindAddress string
	// SystemNamespace holds the hash Secrets.
	SystemNamespace string
	// KeyPrefix begins every valid key.
	KeyPrefix string

	// TrustedProxies are the peers whose X-Forwarded-For is believed to find the client address.
	TrustedProxies []netip.Prefix
	// PeersAreProxies says that the server's peers are proxies (an ingress controller) and not
	// clients: a peer outside TrustedProxies then gives no client address at all, so a key
	// with allowed source ranges is refused rather than judged by the proxy's address.
	PeersAreProxies bool
	// FailureRate is how many failed authentications per second an address regains; negative
	// disables the limit.
	FailureRate float64
	// FailureBurst is how many failures an address may make at once.
	FailureBurst int
	// RateLimitClients bounds how many addresses the limiter remembers.
	RateLimitClients int

	// RateLimitRedis, when set, is the redis:// (or rediss://) URL of the Redis that keeps the
	// budgets of keys' rate limits, shared by every replica; empty keeps them in memory, per
	// replica.
	RateLimitRedis string
	// RateLimitRedisPassword, when set, replaces the URL's password (it comes from a Secret).
	RateLimitRedisPassword string
	// RateLimitRedisTimeout bounds one decision in Redis; past it, memory decides.
	RateLimitRedisTimeout time.Duration

	// MaxInFlightBytesPerNamespace bounds the bytes of one namespace's list responses being
	// written at once (a slow reader holds its response until it has read it); past it, a list
	// request of that namespace gets 429 TOO_MANY_CONCURRENT_REQUESTS, unless none is in flight.
	// Negative: no bound.
	MaxInFlightBytesPerNamespace int64

	// MaxConnections bounds the API listener's open connections; at the bound one not being
	// answered, of the client holding the most, is closed for a new one, or the new one waits.
	// Negative: no bound.
	MaxConnections int
	// MaxConnectionsPerClient bounds the API listener's connections of one client address (an
	// IPv6 client by its /64), but for TrustedProxies peers: a connection past it is closed as
	// it is accepted. Negative: no bound.
	MaxConnectionsPerClient int
	// AuthzHTTPMaxConnections bounds the forward-auth listener's open connections, as
	// MaxConnections the API's.
	AuthzHTTPMaxConnections int
	// AuthzHTTPMaxConnectionsPerClient bounds the forward-auth listener's connections of one client
	// address (an IPv6 client by its /64), but for --trusted-proxies peers: a connection past
	// it is closed as it is accepted.
	AuthzHTTPMaxConnectionsPerClient int

	// LastUsedInterval is the least time between two writes of one key's lastUsedAt.
	LastUsedInterval time.Duration
	// LastUsedFlush is how often used keys are looked for.
	LastUsedFlush time.Duration
	// LastUsedWriteRate bounds the status.lastUsedAt writes of this replica per second. With
	// more keys in use than LastUsedWriteRate×LastUsedInterval, the stalest are written first
	// and each key less often.
	LastUsedWriteRate float64

	// ShutdownDelay is how long readiness fails before the listener stops accepting, so that
	// load balancers stop sending first (negative: none).
	ShutdownDelay time.Duration
	// ShutdownTimeout bounds the draining of open requests.
	ShutdownTimeout time.Duration

	// Audience is the audience of the server's own /v1: a key whose spec.audiences do not name
	// it gets 403 AUDIENCE_NOT_ALLOWED there.
	Audience string
	// AuthzGRPCListen, when set, serves Envoy's external authorization (gRPC
	// envoy.service.auth.v3.Authorization/Check) and gRPC health on this address (internal/server/authz).
	AuthzGRPCListen string
	// AuthzGRPCListener, when set, is used instead of listening on AuthzGRPCListen (tests).
	AuthzGRPCListener net.Listener
	// AuthzGRPCTLSCertFile and AuthzGRPCTLSKeyFile, when set, serve the gRPC listener over TLS
	// (reloaded when the files change, as a mounted cert-manager Secret does).
	AuthzGRPCTLSCertFile string
	AuthzGRPCTLSKeyFile  string
	// AuthzGRPCClientCAFile, when set, requires gateways to present a certificate it signed.
	AuthzGRPCClientCAFile string
	// AuthzGRPCGateways are the gateways' addresses: the ext_authz listener keeps capacity for
	// them (and for callers verified with AuthzGRPCClientCAFile) that other clients cannot take.
	AuthzGRPCGateways []netip.Prefix
	// AuthzGRPCMaxMessageBytes is the largest CheckRequest the gRPC listener reads (default
	// frontdoor.DefaultGRPCLimits.MaxMessage): Envoy's headers at its own bound (60 KiB by
	// default) plus what with_request_body forwards. A larger one is an RPC error
	// (ResourceExhausted), which a gateway must not be configured to fail open on.
	AuthzGRPCMaxMessageBytes int
	// AuthzHTTPListen, when set, serves the forward-auth endpoints (internal/server/authz) on this
	// address, for Traefik, Caddy, NGINX and Envoy's HTTP ext_authz.
	AuthzHTTPListen string
	// AuthzHTTPListener, when set, is used instead of listening on AuthzHTTPListen (tests).
	AuthzHTTPListener net.Listener
	// AuthzStripAuthorization removes the Authorization field before an allowed request goes
	// upstream through Envoy (gRPC), so backends never see keys.
	AuthzStripAuthorization bool

	// LeakReportsListen, when set, receives GitHub's secret scanning reports on this address
	// (internal/server/leakreceiver).
	LeakReportsListen string
	// LeakReportsListener, when set, is used instead of listening on LeakReportsListen (tests).
	LeakReportsListener net.Listener
	// LeakReports configures the receiver; its Index, Client, Namespace, KeyPrefix, Clock,
	// TrustedProxies, Ready and Logger are the server's own, and so is its catch-up's Leases
	// client.
	LeakReports leakreceiver.Config

	// PanelListen, when set, serves Panel on this address with the same timeouts and shutdown.
	PanelListen string
	// Panel is the panel's handler (panel.NewHandler); required when PanelListen is set.
	Panel http.Handler

	// Clock decides expiry and grace; the real clock by default (tests inject another).
	Clock clock.PassiveClock
	// Logger is the server's logger (default ctrl.Log.WithName("server")).
	Logger *logr.Logger
}

// MaxHeaderBlock is the most bytes a request line and its headers may take (the limit every
// HTTP door shares); one byte more is answered 431.
const MaxHeaderBlock = frontdoor.MaxHeaderBlock

// Default sets o's zero fields to their defaults (the Default constants above). It is the one
// place the server's defaults are applied: the command, switchboard dev and tests all go
// through Run, which calls it.
func (o *Options) Default() {
	if o.Listen == "" {
		o.Listen = DefaultListen
	}
	if o.SystemNamespace == "" {
		o.SystemNamespace = DefaultSystemNamespace
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
	}
	if o.MetricsBindAddress == "" {
		o.MetricsBindAddress = "0"
	}
	if o.FailureRate == 0 {
		o.FailureRate = DefaultFailureRate
	}
	if o.FailureBurst == 0 {
		o.FailureBurst = DefaultFailureBurst
	}
	if o.RateLimitClients == 0 {
		o.RateLimitClients = DefaultRateLimitClients
	}
	if o.RateLimitRedisTimeout == 0 {
		o.RateLimitRedisTimeout = DefaultRateLimitRedisTimeout
	}
	if o.MaxInFlightBytesPerNamespace == 0 {
		o.MaxInFlightBytesPerNamespace = DefaultMaxInFlightBytesPerNamespace
	}
	if o.MaxConnections == 0 {
		o.MaxConnections = DefaultMaxConnections
	}
	if o.MaxConnectionsPerClient == 0 {
		o.MaxConnectionsPerClient = DefaultMaxConnectionsPerClient
	}
	if o.AuthzHTTPMaxConnections == 0 {
		o.AuthzHTTPMaxConnections = DefaultAuthzHTTPMaxConnections
	}
	if o.AuthzHTTPMaxConnectionsPerClient == 0 {
		o.AuthzHTTPMaxConnectionsPerClient = DefaultAuthzHTTPMaxConnectionsPerClient
	}
	if o.AuthzGRPCMaxMessageBytes == 0 {
		o.AuthzGRPCMaxMessageBytes = frontdoor.DefaultGRPCLimits.MaxMessage
	}
	if o.LastUsedInterval == 0 {
		o.LastUsedInterval = DefaultLastUsedInterval
	}
	if o.LastUsedFlush == 0 {
		o.LastUsedFlush = DefaultLastUsedFlush
	}
	if o.LastUsedWriteRate == 0 {
		o.LastUsedWriteRate = DefaultLastUsedWriteRate
	}
	if o.Audience == "" {
		o.Audience = DefaultAudience
	}
	if o.ShutdownDelay == 0 {
		o.ShutdownDelay = DefaultShutdownDelay
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
}

// Validate says what is wrong with o once defaulted, naming the flag of each option; nil when
// nothing is.
func (o *Options) Validate() error {
	var errs []error
	if err := keycheck.ValidatePrefix(o.KeyPrefix); err != nil {
		errs = append(errs, fmt.Errorf("--key-prefix: %w", err))
	}
	if o.RateLimitRedisTimeout < 0 {
		errs = append(errs, errors.New("--rate-limit-redis-timeout must be positive"))
	}
	if o.LastUsedInterval < 0 || o.LastUsedFlush < 0 || o.LastUsedWriteRate < 0 {
		errs = append(errs, errors.New("--last-used-interval, the flush period and --last-used-writes-per-second must be positive"))
	}
	if !keycheck.ValidAudience(o.Audience) {
		errs = append(errs, fmt.Errorf("--audience: %q is not a DNS label (lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63)", o.Audience))
	}
	if (o.AuthzGRPCTLSCertFile == "") != (o.AuthzGRPCTLSKeyFile == "") {
		errs = append(errs, errors.New("--authz-grpc-tls-cert-file and --authz-grpc-tls-key-file go together"))
	}
	if o.AuthzGRPCClientCAFile != "" && o.AuthzGRPCTLSCertFile == "" {
		errs = append(errs, errors.New("--authz-grpc-client-ca-file needs TLS: set --authz-grpc-tls-cert-file and --authz-grpc-tls-key-file"))
	}
	if o.AuthzGRPCMaxMessageBytes < 4<<10 || o.AuthzGRPCMaxMessageBytes > maxGRPCMessage {
		errs = append(errs, fmt.Errorf("--authz-grpc-max-message-bytes: %d is outside 4096 to %d", o.AuthzGRPCMaxMessageBytes, maxGRPCMessage))
	}
	if o.PanelListen != "" && o.Panel == nil {
		errs = append(errs, errors.New("a panel address was given without a panel handler"))
	}
	return errors.Join(errs...)
}

// maxGRPCMessage is the largest --authz-grpc-max-message-bytes: one such request decoded may
// take 40 MiB of the 64 MiB decode budget (frontdoor.GRPCLimits.DecodeBudget), so such are
// decoded one at a time.
const maxGRPCMessage = 512 << 10
