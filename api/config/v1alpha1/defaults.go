package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// The defaults of the configurations: their one home. SetDefaults_* apply them, the commands
// show them as their flags' defaults, and `switchboard dev` starts from them.
const (
	// DefaultSystemNamespace holds the hash Secrets when the command runs outside a pod.
	DefaultSystemNamespace = switchboardv1alpha1.DefaultSystemNamespace
	// DefaultKeyPrefix begins every key.
	DefaultKeyPrefix = "sb"

	// DefaultServerListen is the /v1 API's address.
	DefaultServerListen = ":8080"
	// DefaultServerMetricsBindAddress is the server's metrics address.
	DefaultServerMetricsBindAddress = ":8081"
	// DefaultServerHealthProbeBindAddress is the server's probes' address.
	DefaultServerHealthProbeBindAddress = ":8082"
	// DefaultAudience is the audience of the server's own /v1.
	DefaultAudience = "connections"
	// DefaultMaxInFlightBytesPerNamespace bounds one namespace's list responses being written.
	DefaultMaxInFlightBytesPerNamespace = 16 << 20
	// DefaultMaxConnections and DefaultMaxConnectionsPerClient bound /v1's connections: at
	// about 150 KiB each at worst, 1024 fit the chart's 256 MiB, and eight client addresses
	// together hold at most half of what clients may take (internal/frontdoor's table).
	DefaultMaxConnections          = 1024
	DefaultMaxConnectionsPerClient = 48
	// DefaultAuthzHTTPMaxConnections and DefaultAuthzHTTPMaxConnectionsPerClient bound
	// forward-auth's, whose connections cost some 80 KiB at most.
	DefaultAuthzHTTPMaxConnections          = 256
	DefaultAuthzHTTPMaxConnectionsPerClient = 12
	// DefaultAuthzGRPCMaxMessageBytes is the largest ext_authz CheckRequest read.
	DefaultAuthzGRPCMaxMessageBytes = 256 << 10
	// DefaultAuthFailureRate, DefaultAuthFailureBurst and DefaultAuthFailureClients shape the
	// limiter of failed authentications.
	DefaultAuthFailureRate    = 1.0
	DefaultAuthFailureBurst   = 20
	DefaultAuthFailureClients = 1 << 16
	// DefaultRateLimitRedisTimeout bounds one rate-limit decision in Redis.
	DefaultRateLimitRedisTimeout = 50 * time.Millisecond
	// DefaultCreditsOnRedisFailure refuses keys with credits while Redis fails: never sold twice.
	DefaultCreditsOnRedisFailure = CreditsOnRedisFailureRefuse
	// DefaultCreditReplicas gives each replica a key's whole credits when memory decides them.
	DefaultCreditReplicas = 1
	// DefaultLastUsedInterval and DefaultLastUsedWritesPerSecond pace status.lastUsedAt writes.
	DefaultLastUsedInterval        = time.Minute
	DefaultLastUsedWritesPerSecond = 20.0
	// DefaultBindingTokenAudience is the audience of the ServiceAccount tokens that prove a
	// workload; DefaultBindingTrustDomain the SPIFFE trust domain of their workloads.
	DefaultBindingTokenAudience = "switchboard.dev"
	DefaultBindingTrustDomain   = "cluster.local"
	// DefaultShutdownDelay and DefaultShutdownTimeout: readiness fails, then requests drain.
	DefaultShutdownDelay   = 5 * time.Second
	DefaultShutdownTimeout = 30 * time.Second

	// DefaultLeakReportsMaxBodyBytes and DefaultLeakReportsMaxBatch bound a report request
	// (internal/server/leakreceiver/secretscanning's own bounds): an alert's delivery is some
	// 10 to 30 KiB, a partner request 256 matches of at most 1 KiB.
	DefaultLeakReportsMaxBodyBytes = 256 << 10
	DefaultLeakReportsMaxBatch     = 256
	// DefaultLeakReportsRate and DefaultLeakReportsBurst limit the verified requests that need a
	// call: GitHub sends a few a minute at most.
	DefaultLeakReportsRate  = 10.0
	DefaultLeakReportsBurst = 100
	// DefaultLeakReportsUnverifiedRate, …Burst and …Clients limit each client address's
	// requests without a valid signature (internal/server/leakreceiver's defaults).
	DefaultLeakReportsUnverifiedRate    = 1.0
	DefaultLeakReportsUnverifiedBurst   = 10
	DefaultLeakReportsUnverifiedClients = 10000
	// DefaultLeakReportsReplays and DefaultLeakReportsReplayTTL bound the memory of handled
	// alerts and recorded keys.
	DefaultLeakReportsReplays   = 10000
	DefaultLeakReportsReplayTTL = 24 * time.Hour
	// DefaultLeakReportsCatchUpPeriod and DefaultLeakReportsCatchUpMaxRequests pace the listing
	// of an organization's open alerts: 60 requests an hour of a token's 5,000.
	DefaultLeakReportsCatchUpPeriod      = 10 * time.Minute
	DefaultLeakReportsCatchUpMaxRequests = 10
	// DefaultLeakReportsPublicKeysURL publishes the keys of GitHub's partner program requests.
	DefaultLeakReportsPublicKeysURL = "https://api.github.com/meta/public_keys/secret_scanning"
	// DefaultGitHubAPIBaseURL is GitHub's REST API.
	DefaultGitHubAPIBaseURL = "https://api.github.com"

	// DefaultOperatorMetricsBindAddress is the operator's metrics address.
	DefaultOperatorMetricsBindAddress = ":8080"
	// DefaultOperatorHealthProbeBindAddress is the operator's probes' address.
	DefaultOperatorHealthProbeBindAddress = ":8081"
	// DefaultRevealTTL is how long an unclaimed reveal Secret lives.
	DefaultRevealTTL = time.Hour
	// DefaultExpiryWarning is how long before its end a key that nothing renews is ExpiringSoon.
	DefaultExpiryWarning = 7 * 24 * time.Hour
	// DefaultUnusedAfter is how long without a use makes a key Unused.
	DefaultUnusedAfter = 90 * 24 * time.Hour
	// DefaultMinRenewalInterval and DefaultMinRenewalIntervalPercentage floor the interval
	// between two renewals of a key: a 90-day key renews at most every 9 days.
	DefaultMinRenewalInterval           = 5 * time.Minute
	DefaultMinRenewalIntervalPercentage = 10
	// DefaultLeakReportRetention is how long a LeakReport is kept once its key is refused.
	DefaultLeakReportRetention = 30 * 24 * time.Hour
	// DefaultKeyMetricsLimit bounds the APIKeys with per-key series.
	DefaultKeyMetricsLimit = 10000
	// DefaultKeyWorkers is how many APIKeys are reconciled at once: issuing a key is four
	// sequential API writes, so one worker caps throughput at the API server's round trip.
	DefaultKeyWorkers = 8
	// DefaultKubeAPIQPS and DefaultKubeAPIBurst raise client-go's 5/10, which throttle a busy operator.
	DefaultKubeAPIQPS   = 50
	DefaultKubeAPIBurst = 100
	// DefaultRevealCAConfigMap is the ConfigMap of the reveal endpoint's certificates.
	DefaultRevealCAConfigMap = "switchboard-reveal-ca"
	// DefaultWebhookConfigurationName is the admission webhook's configuration.
	DefaultWebhookConfigurationName = "switchboard-apikey-windows"

	// DefaultWebhookConcurrency and DefaultWebhookPerNamespaceConcurrency bound the deliveries
	// in flight, in all and per namespace: eight namespaces' dead endpoints at once before a
	// ninth waits for a slot.
	DefaultWebhookConcurrency             = 32
	DefaultWebhookPerNamespaceConcurrency = 4
	// DefaultWebhookAttemptTimeout bounds one delivery attempt.
	DefaultWebhookAttemptTimeout = 15 * time.Second

	// DefaultPanelListen is the panel's address when it runs alone.
	DefaultPanelListen = ":8083"
	// DefaultPanelHealthProbeBindAddress is the panel's probes' address when it runs alone.
	DefaultPanelHealthProbeBindAddress = ":8082"
	// DefaultMaxSessions and DefaultMaxSessionsPerUser bound the panel's sessions.
	DefaultMaxSessions        = 1000
	DefaultMaxSessionsPerUser = 10
	// DefaultLoginRate and DefaultLoginBurst limit sign-in attempts per client address.
	DefaultLoginRate  = 0.2
	DefaultLoginBurst = 10
	// DefaultOIDCMode is the panel's single sign-on mode: the API server trusts the issuer.
	DefaultOIDCMode = OIDCModeToken
	// DefaultOIDCUsernameClaim, DefaultOIDCUsernamePrefix, DefaultOIDCGroupsClaim and
	// DefaultOIDCGroupsPrefix map the ID token as the API server's claimMappings would.
	DefaultOIDCUsernameClaim  = "sub"
	DefaultOIDCUsernamePrefix = "oidc:"
	DefaultOIDCGroupsClaim    = "groups"
	DefaultOIDCGroupsPrefix   = "oidc:"
)

// DefaultOIDCScopes returns the scopes asked for when none are configured: "groups" is not a
// standard scope, but the providers that have it need it to send the groups claim.
func DefaultOIDCScopes() []string {
	return []string{"openid", "profile", "email", "groups", "offline_access"}
}

// SetDefaults_ServerConfiguration fills the unset fields of c with their defaults.
//
//nolint:revive,staticcheck // The Kubernetes defaulter name, as cert-manager and the kubelet spell it.
func SetDefaults_ServerConfiguration(c *ServerConfiguration) {
	setTypeMeta(&c.TypeMeta, ServerConfigurationKind)
	setDefault(&c.Listen, DefaultServerListen)
	setDefaultMetrics(&c.Metrics, DefaultServerMetricsBindAddress)
	setDefault(&c.HealthProbeBindAddress, DefaultServerHealthProbeBindAddress)
	setEmpty(&c.SystemNamespace, DefaultSystemNamespace)
	setEmpty(&c.KeyPrefix, DefaultKeyPrefix)
	setEmpty(&c.Audience, DefaultAudience)
	setDefault(&c.MaxInFlightBytesPerNamespace, DefaultMaxInFlightBytesPerNamespace)
	setDefault(&c.MaxConnections, DefaultMaxConnections)
	setDefault(&c.MaxConnectionsPerClient, DefaultMaxConnectionsPerClient)
	setDefault(&c.AuthFailureLimit.Rate, DefaultAuthFailureRate)
	setDefault(&c.AuthFailureLimit.Burst, DefaultAuthFailureBurst)
	setDefault(&c.AuthFailureLimit.Clients, DefaultAuthFailureClients)
	setDuration(&c.RateLimitRedis.Timeout, DefaultRateLimitRedisTimeout)
	setEmpty(&c.RateLimitCredits.OnRedisFailure, DefaultCreditsOnRedisFailure)
	setDefault(&c.RateLimitCredits.Replicas, DefaultCreditReplicas)
	setDuration(&c.LastUsed.Interval, DefaultLastUsedInterval)
	setDefault(&c.LastUsed.WritesPerSecond, DefaultLastUsedWritesPerSecond)
	setDefault(&c.Binding.ServiceAccountTokens, true)
	setEmpty(&c.Binding.TokenAudience, DefaultBindingTokenAudience)
	setEmpty(&c.Binding.TrustDomain, DefaultBindingTrustDomain)
	SetDefaults_Shutdown(&c.Shutdown)
	setDefault(&c.Authz.GRPC.MaxMessageBytes, DefaultAuthzGRPCMaxMessageBytes)
	setDefault(&c.Authz.HTTP.MaxConnections, DefaultAuthzHTTPMaxConnections)
	setDefault(&c.Authz.HTTP.MaxConnectionsPerClient, DefaultAuthzHTTPMaxConnectionsPerClient)
	lr := &c.LeakReports
	setDefault(&lr.MaxBodyBytes, DefaultLeakReportsMaxBodyBytes)
	setDefault(&lr.MaxBatch, DefaultLeakReportsMaxBatch)
	setDefault(&lr.Rate, DefaultLeakReportsRate)
	setDefault(&lr.Burst, DefaultLeakReportsBurst)
	setDefault(&lr.UnverifiedLimit.Rate, DefaultLeakReportsUnverifiedRate)
	setDefault(&lr.UnverifiedLimit.Burst, DefaultLeakReportsUnverifiedBurst)
	setDefault(&lr.UnverifiedLimit.Clients, DefaultLeakReportsUnverifiedClients)
	setDefault(&lr.Replays.Entries, DefaultLeakReportsReplays)
	setDuration(&lr.Replays.TTL, DefaultLeakReportsReplayTTL)
	setDuration(&lr.OrganizationAlerts.CatchUp.Period, DefaultLeakReportsCatchUpPeriod)
	setDefault(&lr.OrganizationAlerts.CatchUp.MaxRequests, DefaultLeakReportsCatchUpMaxRequests)
	setEmpty(&lr.Partner.PublicKeysURL, DefaultLeakReportsPublicKeysURL)
	setEmpty(&lr.OrganizationAlerts.APIBaseURL, DefaultGitHubAPIBaseURL)
	if c.Panel != nil {
		SetDefaults_PanelSettings(&c.Panel.PanelSettings)
	}
}

// SetDefaults_OperatorConfiguration fills the unset fields of c with their defaults.
//
//nolint:revive,staticcheck // The Kubernetes defaulter name.
func SetDefaults_OperatorConfiguration(c *OperatorConfiguration) {
	setTypeMeta(&c.TypeMeta, OperatorConfigurationKind)
	setEmpty(&c.SystemNamespace, DefaultSystemNamespace)
	setEmpty(&c.KeyPrefix, DefaultKeyPrefix)
	setDuration(&c.RevealTTL, DefaultRevealTTL)
	setDuration(&c.ExpiryWarning, DefaultExpiryWarning)
	setDuration(&c.UnusedAfter, DefaultUnusedAfter)
	setDuration(&c.MinRenewalInterval, DefaultMinRenewalInterval)
	setDefault(&c.MinRenewalIntervalPercentage, DefaultMinRenewalIntervalPercentage)
	setDuration(&c.LeakReportRetention, DefaultLeakReportRetention)
	setDefault(&c.KeyMetricsLimit, DefaultKeyMetricsLimit)
	setDefault(&c.KeyWorkers, DefaultKeyWorkers)
	setDefault(&c.LeaderElect, true)
	setDefaultMetrics(&c.Metrics, DefaultOperatorMetricsBindAddress)
	setDefault(&c.HealthProbeBindAddress, DefaultOperatorHealthProbeBindAddress)
	setEmpty(&c.Reveal.CAConfigMap, DefaultRevealCAConfigMap)
	setEmpty(&c.Webhook.ConfigurationName, DefaultWebhookConfigurationName)
	setDefault(&c.KubeAPIQPS, DefaultKubeAPIQPS)
	setDefault(&c.KubeAPIBurst, DefaultKubeAPIBurst)
	SetDefaults_WebhooksConfiguration(&c.Webhooks)
	setEmpty(&c.Webhooks.SigningNamespace, DefaultWebhookSigningNamespace(c.SystemNamespace))
}

// DefaultWebhookSigningNamespace returns the namespace of the signing secrets' copies when none
// is configured: the system namespace's name followed by "-webhook-signing".
func DefaultWebhookSigningNamespace(system string) string { return system + "-webhook-signing" }

// DefaultWebhookDeniedNetworks returns the networks endpoints may not reach when none are
// configured: the private ones, where a cluster's Services, pods and nodes usually are.
func DefaultWebhookDeniedNetworks() []string {
	return []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7"}
}

// SetDefaults_WebhooksConfiguration fills the unset webhook settings of w.
//
//nolint:revive,staticcheck // The Kubernetes defaulter name.
func SetDefaults_WebhooksConfiguration(w *WebhooksConfiguration) {
	if w.DeniedNetworks == nil {
		w.DeniedNetworks = DefaultWebhookDeniedNetworks()
	}
	setDefault(&w.Concurrency, DefaultWebhookConcurrency)
	setDefault(&w.PerNamespaceConcurrency, DefaultWebhookPerNamespaceConcurrency)
	setDuration(&w.AttemptTimeout, DefaultWebhookAttemptTimeout)
}

// SetDefaults_PanelConfiguration fills the unset fields of c with their defaults.
//
//nolint:revive,staticcheck // The Kubernetes defaulter name.
func SetDefaults_PanelConfiguration(c *PanelConfiguration) {
	setTypeMeta(&c.TypeMeta, PanelConfigurationKind)
	setDefault(&c.Listen, DefaultPanelListen)
	setDefault(&c.HealthProbeBindAddress, DefaultPanelHealthProbeBindAddress)
	SetDefaults_Shutdown(&c.Shutdown)
	SetDefaults_PanelSettings(&c.PanelSettings)
}

// SetDefaults_Shutdown fills the unset shutdown settings of s, the server's or the panel's.
//
//nolint:revive,staticcheck // The Kubernetes defaulter name.
func SetDefaults_Shutdown(s *Shutdown) {
	setDuration(&s.ShutdownDelay, DefaultShutdownDelay)
	setDuration(&s.ShutdownTimeout, DefaultShutdownTimeout)
}

// setDefaultMetrics fills the unset metrics settings of m, whose address is the component's.
func setDefaultMetrics(m *Metrics, address string) {
	setDefault(&m.MetricsBindAddress, address)
	setDefault(&m.MetricsSecure, true)
}

// SetDefaults_PanelSettings fills the unset panel settings of s, wherever the panel runs.
//
//nolint:revive,staticcheck // The Kubernetes defaulter name.
func SetDefaults_PanelSettings(s *PanelSettings) {
	setDefault(&s.MaxSessions, DefaultMaxSessions)
	setDefault(&s.MaxSessionsPerUser, DefaultMaxSessionsPerUser)
	setDefault(&s.LoginRate, DefaultLoginRate)
	setDefault(&s.LoginBurst, DefaultLoginBurst)
	if o := s.OIDC; o != nil {
		if len(o.Scopes) == 0 {
			o.Scopes = DefaultOIDCScopes()
		}
		setEmpty(&o.Mode, DefaultOIDCMode)
		setDefault(&o.UsernameClaim, DefaultOIDCUsernameClaim)
		setDefault(&o.UsernamePrefix, DefaultOIDCUsernamePrefix)
		setDefault(&o.GroupsClaim, DefaultOIDCGroupsClaim)
		setDefault(&o.GroupsPrefix, DefaultOIDCGroupsPrefix)
	}
}

func setTypeMeta(t *metav1.TypeMeta, kind string) {
	setEmpty(&t.APIVersion, SchemeGroupVersion.String())
	setEmpty(&t.Kind, kind)
}

func setDefault[T any](p **T, v T) {
	if *p == nil {
		*p = ptr.To(v)
	}
}

// setEmpty fills a field whose "" means unset.
func setEmpty(p *string, v string) {
	if *p == "" {
		*p = v
	}
}

func setDuration(p **metav1.Duration, d time.Duration) {
	if *p == nil {
		*p = &metav1.Duration{Duration: d}
	}
}
