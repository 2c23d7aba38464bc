package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ServerConfiguration configures `switchboard server`: the /v1 API answered from the informer
// cache, the gateways' ext_authz and forward-auth listeners, and optionally the panel.
type ServerConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	// listen is the address of the /v1 API (default ":8080"); it may not be "".
	Listen *string `json:"listen,omitempty"`
	// Metrics are served on ":8081" by default.
	Metrics `json:",inline"`
	// pprof serves net/http/pprof under /debug/pprof/ on the metrics address (keep that port
	// private).
	Pprof bool `json:"pprof"`
	// healthProbeBindAddress is the address of /healthz and /readyz (default ":8082"); "" serves none.
	HealthProbeBindAddress *string `json:"healthProbeBindAddress,omitempty"`
	// systemNamespace holds the hash Secrets (default: $POD_NAMESPACE where the command runs in
	// a pod, else "switchboard-system").
	SystemNamespace string `json:"systemNamespace,omitempty"`
	// keyPrefix begins every valid key (default "sb").
	KeyPrefix string `json:"keyPrefix,omitempty"`
	// audience is the audience of this server's /v1 (default "connections"): keys whose
	// spec.audiences do not name it get 403 AUDIENCE_NOT_ALLOWED here.
	Audience string `json:"audience,omitempty"`

	// trustedProxies are the CIDRs (or addresses) of the proxies in front of the server (e.g. the
	// ingress controller's pods) whose X-Forwarded-For is believed; never a pod-wide CIDR, since
	// any pod in it could then pick its address.
	TrustedProxies []string `json:"trustedProxies,omitempty"`
	// peersAreProxies says the peers are proxies (an ingress controller) not in trustedProxies, so
	// the server cannot know a client's address: keys with allowedSourceRanges are then refused
	// (403 SOURCE_NOT_ALLOWED) instead of judged by the proxy's address.
	PeersAreProxies bool `json:"peersAreProxies"`

	// maxInFlightBytesPerNamespace bounds the bytes of one namespace's list responses this
	// replica writes at once (default 16 MiB); past it, 429 TOO_MANY_CONCURRENT_REQUESTS unless
	// none is in flight. 0: no bound.
	MaxInFlightBytesPerNamespace *int64 `json:"maxInFlightBytesPerNamespace,omitempty"`
	// maxConnections bounds the open connections of the /v1 listener (default 1024; each costs up
	// to about 150 KiB), a quarter of which are kept for trustedProxies peers when there are
	// any. 0: no bound.
	MaxConnections *int32 `json:"maxConnections,omitempty"`
	// maxConnectionsPerClient bounds the open connections of one client address (an IPv6 client
	// by its /64) on the /v1 listener, but for trustedProxies peers (default 48). 0: no bound.
	MaxConnectionsPerClient *int32 `json:"maxConnectionsPerClient,omitempty"`

	// authFailureLimit limits failed authentications per client address.
	AuthFailureLimit AuthFailureLimit `json:"authFailureLimit"`
	// rateLimitRedis, when its url is set, keeps keys' rate-limit budgets in Redis, exact across
	// replicas; otherwise they are kept in memory, per replica.
	RateLimitRedis RateLimitRedis `json:"rateLimitRedis"`
	// rateLimitCredits is how keys' credits (spec.credits) are decided where Redis cannot decide
	// them: without Redis, or while it fails.
	RateLimitCredits RateLimitCredits `json:"rateLimitCredits"`
	// lastUsed paces the writes of keys' status.lastUsedAt.
	LastUsed LastUsed `json:"lastUsed"`
	// binding is how the server checks the workloads that present keys bound to them (APIKey
	// spec.binding).
	Binding WorkloadBinding `json:"binding"`

	// Shutdown is how the listeners stop.
	Shutdown `json:",inline"`

	// authz configures the gateways' listeners (docs/gateways.md).
	Authz Authz `json:"authz"`

	// leakReports receives GitHub's secret scanning reports of leaked keys (docs/leaks.md).
	LeakReports LeakReports `json:"leakReports"`

	// panel, when set with a listen address, serves the web panel from this process too (the
	// chart runs `switchboard panel` apart instead, so that a panel failure never touches /v1).
	// It replaces the deprecated --panel-* flags.
	Panel *ServerPanel `json:"panel,omitempty"`
}

// AuthFailureLimit is the limiter of failed authentications per client address: valid keys
// are always served.
type AuthFailureLimit struct {
	// rate is how many failed authentications per second an address regains (default 1);
	// 0 turns the limit off.
	Rate *float64 `json:"rate,omitempty"`
	// burst is how many failed authentications an address may make at once (default 20); after
	// them its failures get 429.
	Burst *int32 `json:"burst,omitempty"`
	// clients is how many client addresses the limiter remembers (default 65536).
	Clients *int32 `json:"clients,omitempty"`
}

// RateLimitRedis is the Redis that keeps keys' rate-limit budgets. Its password never sits
// in the configuration: it is read from passwordFile, else from
// $SWITCHBOARD_RATE_LIMIT_REDIS_PASSWORD (the chart sets it from a Secret).
type RateLimitRedis struct {
	// url is the redis:// or rediss:// URL of the Redis; "" keeps budgets in memory, per replica.
	URL string `json:"url,omitempty"`
	// passwordFile is a file (a mounted Secret) holding the Redis password.
	PasswordFile string `json:"passwordFile,omitempty"`
	// timeout is the longest wait for Redis per request (default 50ms); past it, or when Redis
	// is down, the request is decided in memory, per replica.
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// The values of RateLimitCredits.OnRedisFailure.
const (
	CreditsOnRedisFailureRefuse        = "Refuse"
	CreditsOnRedisFailureCountInMemory = "CountInMemory"
)

// RateLimitCredits is how keys' credits are decided in a replica's memory (docs/operating.md).
type RateLimitCredits struct {
	// onRedisFailure is what a key with credits gets while Redis fails: Refuse (the default;
	// 503 NOT_READY, nothing sold twice) or CountInMemory (decided in each replica's memory,
	// each counting its share from what it saw: up to the running replicas × the share more per
	// period, never merged back into Redis).
	OnRedisFailure string `json:"onRedisFailure,omitempty"`
	// replicas is how many replicas at most decide credits in their own memory (default 1):
	// each admits amount/replicas (rounded down, at least 1) of a period, so that as many
	// replicas never admit more than the amount together. The chart sets it to its replica
	// count (the autoscaler's maximum when autoscaling is on).
	Replicas *int32 `json:"replicas,omitempty"`
}

// LastUsed paces the writes of keys' status.lastUsedAt.
type LastUsed struct {
	// interval is the least time between two writes of one key's status.lastUsedAt (default 1m).
	Interval *metav1.Duration `json:"interval,omitempty"`
	// writesPerSecond bounds this replica's status.lastUsedAt writes (default 20); over budget,
	// the stalest keys are written first.
	WritesPerSecond *float64 `json:"writesPerSecond,omitempty"`
}

// WorkloadBinding is how the server checks the workloads that present bound keys.
type WorkloadBinding struct {
	// serviceAccountTokens verifies the ServiceAccount tokens presented with bound keys
	// (Switchboard-Workload-Token; default true): the server watches the metadata of every pod
	// (a token is good while its pod lives) and reads the cluster's ServiceAccount issuer
	// discovery (its signing keys), and is ready once it has listed the pods. false: no token
	// proves a workload.
	ServiceAccountTokens *bool `json:"serviceAccountTokens,omitempty"`
	// tokenAudience is the audience a token must be issued for (default "switchboard.dev"): the
	// audience of the pods' projected token volume.
	TokenAudience string `json:"tokenAudience,omitempty"`
	// trustDomain is the SPIFFE trust domain a token's workload is named in when a binding
	// lists SPIFFE IDs (default "cluster.local", Istio's).
	TrustDomain string `json:"trustDomain,omitempty"`
	// clientCertHeader names the header in which an edge proxy that terminated mutual TLS tells
	// the client's certificate in Envoy's format (X-Forwarded-Client-Cert); its URI SAN, a
	// SPIFFE ID, is then the peer a binding's spiffeIDs are matched against on /v1 and
	// forward-auth, read only from trustedProxies peers. Default "": none is read.
	ClientCertHeader string `json:"clientCertHeader"`
}

// Authz configures the gateways' listeners: Envoy's ext_authz (gRPC) and forward-auth (HTTP).
type Authz struct {
	// grpc is Envoy's external authorization (Authorization/Check and gRPC health).
	GRPC AuthzGRPC `json:"grpc"`
	// http is the forward-auth endpoints (/authz/<audience>) for Traefik, Caddy and NGINX.
	HTTP AuthzHTTP `json:"http"`
}

// AuthzGRPC is Envoy's ext_authz listener.
type AuthzGRPC struct {
	// listen is its address; "" (the default) serves none.
	Listen string `json:"listen,omitempty"`
	// tlsCertFile is the listener's certificate, which then serves TLS (reloaded when it changes).
	TLSCertFile string `json:"tlsCertFile,omitempty"`
	// tlsKeyFile is the private key of tlsCertFile.
	TLSKeyFile string `json:"tlsKeyFile,omitempty"`
	// clientCAFile holds the CA certificates the gateways' client certificates must chain to
	// (mutual TLS); it needs tlsCertFile. A caller it verified is a gateway.
	ClientCAFile string `json:"clientCAFile,omitempty"`
	// gateways are the CIDRs (or addresses) of the gateways that call the listener (Envoy's
	// pods): they have a quarter of its connections and calls of their own, which other clients
	// cannot take, and no bound per client address (they carry many clients' checks).
	Gateways []string `json:"gateways,omitempty"`
	// maxMessageBytes is the largest CheckRequest read (default 262144; 4096 to 524288): Envoy's
	// headers plus any body with_request_body forwards. A larger one is an RPC error, on which a
	// gateway must not fail open.
	MaxMessageBytes *int32 `json:"maxMessageBytes,omitempty"`
	// stripAuthorization removes the Authorization field before an allowed request goes
	// upstream, so backends never see keys.
	StripAuthorization bool `json:"stripAuthorization"`
}

// AuthzHTTP is the forward-auth listener.
type AuthzHTTP struct {
	// listen is its address; "" (the default) serves none.
	Listen string `json:"listen,omitempty"`
	// maxConnections bounds its open connections (default 256), a quarter of which are kept
	// for trustedProxies peers when there are any. 0: no bound.
	MaxConnections *int32 `json:"maxConnections,omitempty"`
	// maxConnectionsPerClient bounds the open connections of one client address, but for
	// trustedProxies peers (default 12). 0: no bound.
	MaxConnectionsPerClient *int32 `json:"maxConnectionsPerClient,omitempty"`
}

// ServerPanel is the panel served by `switchboard server`: the panel's own settings, on an
// address of the server's process, behind the server's trustedProxies and probes.
type ServerPanel struct {
	// listen is the panel's address; "" (the default) serves no panel.
	Listen string `json:"listen,omitempty"`
	// PanelSettings are the same settings `switchboard panel` takes.
	PanelSettings `json:",inline"`
}

// LeakReports is the listener that receives GitHub's secret scanning reports of leaked keys
// and records each as a LeakReport in the system namespace (docs/leaks.md). Its secrets are
// read from files (mounted Secrets), never from the configuration.
type LeakReports struct {
	// listen is its address; "" (the default) serves none. It is meant to be reached by
	// GitHub, through an ingress that terminates TLS.
	Listen string `json:"listen,omitempty"`
	// maxBodyBytes bounds a request's body (default 262144): a larger one is 413, unread. GitHub's
	// deliveries of an organization's alert are some 10 to 30 KiB; a partner program request of
	// maxBatch matches of at most 1 KiB each fits 256 KiB.
	MaxBodyBytes *int64 `json:"maxBodyBytes,omitempty"`
	// maxBatch bounds the reports of one partner program request (default 256).
	MaxBatch *int32 `json:"maxBatch,omitempty"`
	// rate is how many verified requests per second that need a call (to GitHub's REST API or
	// to the API server) the listener regains, from all senders together (default 10); past
	// its burst, 429. A request without a valid signature never takes from it, nor does one
	// answered from the replays' memory.
	Rate *float64 `json:"rate,omitempty"`
	// burst is how many such requests the listener takes at once (default 100).
	Burst *int32 `json:"burst,omitempty"`
	// unverifiedLimit limits, per client address, the requests without a valid signature.
	UnverifiedLimit LeakReportsUnverifiedLimit `json:"unverifiedLimit"`
	// replays remembers the alerts handled and the keys recorded, so that a delivery of them
	// again is answered as before without a call.
	Replays LeakReportsReplays `json:"replays"`
	// partner receives the secret scanning partner program's reports (POST /github/secret-scanning).
	Partner LeakReportsPartner `json:"partner"`
	// organizationAlerts receives an organization's secret_scanning_alert webhook (POST /github/alerts).
	OrganizationAlerts LeakReportsOrganizationAlerts `json:"organizationAlerts"`
}

// LeakReportsUnverifiedLimit is the limit, per client address (an IPv6 client by its /64; behind
// trustedProxies, the address they forward), of the requests that carry no valid signature:
// each takes a token, and an address without one is answered 429 before its body is read.
// GitHub's requests are signed, so they take nothing and are never limited by it.
type LeakReportsUnverifiedLimit struct {
	// rate is how many unverified requests per second an address regains (default 1).
	Rate *float64 `json:"rate,omitempty"`
	// burst is how many an address may send at once (default 10).
	Burst *int32 `json:"burst,omitempty"`
	// clients is how many client addresses are remembered (default 10000).
	Clients *int32 `json:"clients,omitempty"`
}

// LeakReportsReplays is the memory of handled alerts (by repository and number) and recorded
// keys (by hash), per replica: only what GitHub signed goes in.
type LeakReportsReplays struct {
	// entries bounds what is remembered (default 10000), the least recently used going first.
	Entries *int32 `json:"entries,omitempty"`
	// ttl is how long each is remembered (default 24h); a delivery of it again after that costs
	// its calls once more, then is remembered again.
	TTL *metav1.Duration `json:"ttl,omitempty"`
}

// LeakReportsPartner is the secret scanning partner program's side: a provider that registered
// its key pattern with GitHub.
type LeakReportsPartner struct {
	// enabled serves POST /github/secret-scanning.
	Enabled bool `json:"enabled"`
	// publicKeysURL publishes the keys that sign GitHub's requests (default
	// https://api.github.com/meta/public_keys/secret_scanning).
	PublicKeysURL string `json:"publicKeysURL,omitempty"`
	// tokenFile, when set, holds a GitHub token sent when fetching the keys, to stay clear of
	// the unauthenticated rate limit; it needs no scope.
	TokenFile string `json:"tokenFile,omitempty"`
}

// LeakReportsOrganizationAlerts is an organization's secret_scanning_alert webhook, for a
// custom pattern of the key prefix: served (POST /github/alerts) when webhookSecretFile is set.
type LeakReportsOrganizationAlerts struct {
	// webhookSecretFile holds the webhook's secret, which signs GitHub's deliveries
	// (X-Hub-Signature-256).
	WebhookSecretFile string `json:"webhookSecretFile,omitempty"`
	// apiTokenFile holds a GitHub token allowed to read the organization's secret scanning
	// alerts, with which the alert's token is fetched; required with webhookSecretFile.
	APITokenFile string `json:"apiTokenFile,omitempty"`
	// apiBaseURL is GitHub's REST API (default https://api.github.com; GitHub Enterprise Server:
	// https://HOST/api/v3).
	APIBaseURL string `json:"apiBaseURL,omitempty"`
	// organization is the organization's login, whose open alerts the catch-up lists; required
	// with webhookSecretFile.
	Organization string `json:"organization,omitempty"`
	// catchUp lists the organization's open alerts, as GitHub does not deliver a failed
	// organization webhook again: any leak of an issued key not recorded yet is recorded then.
	CatchUp LeakReportsCatchUp `json:"catchUp"`
}

// LeakReportsCatchUp is the periodic listing of an organization's open secret scanning alerts,
// by one server replica at a time (a Lease in the system namespace).
type LeakReportsCatchUp struct {
	// period is the time between two listings (default 10m; at least 1m).
	Period *metav1.Duration `json:"period,omitempty"`
	// maxRequests bounds the REST API requests of one listing, each a page of 100 alerts, newest
	// first (default 10); past it, the oldest open alerts wait for a period with fewer.
	MaxRequests *int32 `json:"maxRequests,omitempty"`
}
