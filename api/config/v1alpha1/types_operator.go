package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// OperatorConfiguration configures `switchboard operator`: the controllers of Connections and
// APIKeys, the admission webhook and the reveal endpoint.
type OperatorConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	// systemNamespace holds the hash Secrets and the leader election Lease (default:
	// $POD_NAMESPACE where the command runs in a pod, else "switchboard-system").
	SystemNamespace string `json:"systemNamespace,omitempty"`
	// keyPrefix begins every generated key (default "sb"): 1-16 lower-case letters and digits,
	// starting with a letter.
	KeyPrefix string `json:"keyPrefix,omitempty"`
	// revealTTL is how long an unclaimed reveal Secret lives before it is deleted (default 1h;
	// the key stays valid); more than 0.
	RevealTTL *metav1.Duration `json:"revealTTL,omitempty"`
	// expiryWarning is how long before a key's end that nothing will renew its ExpiringSoon
	// condition turns True, with a Warning Event (default 168h); more than 0.
	ExpiryWarning *metav1.Duration `json:"expiryWarning,omitempty"`
	// unusedAfter is how long without a use (counting from creation) makes a key's Unused
	// condition True (default 2160h); 0: never.
	UnusedAfter *metav1.Duration `json:"unusedAfter,omitempty"`
	// minRenewalInterval is the least interval between two automatic renewals of a key (default
	// 5m): the admission webhook refuses lifecycles that renew more often, and keys stored
	// before renew at this interval. 0: no floor.
	MinRenewalInterval *metav1.Duration `json:"minRenewalInterval,omitempty"`
	// minRenewalIntervalPercentage raises minRenewalInterval to this percentage of a key's
	// lifetime (default 10; at most 99). 0: none.
	MinRenewalIntervalPercentage *int32 `json:"minRenewalIntervalPercentage,omitempty"`
	// leakReportRetention is how long a LeakReport is kept after it was received, once its key
	// is refused (default 720h). A report is deleted sooner when no hash Secret knows its key
	// any more (a later leak of the same APIKey replaced it, or the APIKey was deleted); the
	// key stays refused either way. 0: kept until then.
	LeakReportRetention *metav1.Duration `json:"leakReportRetention,omitempty"`
	// keyMetricsLimit is how many APIKeys get series of their own in the switchboard_apikey_*
	// metrics (default 10000); past it only the aggregates are exported. 0: no per-key series.
	KeyMetricsLimit *int32 `json:"keyMetricsLimit,omitempty"`
	// keyWorkers is how many APIKeys are reconciled concurrently (default 8).
	KeyWorkers *int32 `json:"keyWorkers,omitempty"`

	// leaderElect elects one active replica through a Lease (default true).
	LeaderElect *bool `json:"leaderElect,omitempty"`
	// Metrics are served on ":8080" by default.
	Metrics `json:",inline"`
	// healthProbeBindAddress is the address of /healthz and /readyz (default ":8081"); "" serves none.
	HealthProbeBindAddress *string `json:"healthProbeBindAddress,omitempty"`

	// reveal is the endpoint through which the panel in impersonate mode claims keys for people.
	Reveal RevealEndpoint `json:"reveal"`
	// webhook is the APIKey admission webhook, which refuses renewal windows that cannot open in
	// time and lifecycles that renew too often.
	Webhook WebhookEndpoint `json:"webhook"`

	// kubeAPIQPS is the queries per second to the Kubernetes API server (default 50;
	// client-go's own is 5).
	KubeAPIQPS *float32 `json:"kubeAPIQPS,omitempty"`
	// kubeAPIBurst is the burst of queries to the Kubernetes API server (default 100).
	KubeAPIBurst *int32 `json:"kubeAPIBurst,omitempty"`

	// webhooks configures the delivery of key events to tenants' KeyWebhooks: `switchboard
	// webhooks` sends them, and the operator checks each KeyWebhook's URL against the same
	// networks and copies its signing secrets into webhooks.signingNamespace. The sender reads
	// this same file, and shares the settings above that are not the operator's alone
	// (systemNamespace, leaderElect, the metrics and probes, the API client).
	Webhooks WebhooksConfiguration `json:"webhooks"`
}

// WebhooksConfiguration is where key events may be sent, and how many at once: the webhook
// sender is the one component with egress to the internet, so which networks it may reach is
// the platform's to say.
type WebhooksConfiguration struct {
	// deniedNetworks are CIDRs no endpoint may resolve to, besides loopback, link-local,
	// multicast, unspecified and Teredo, which are always refused: the cluster's Service and
	// pod networks and the nodes' (default: the private networks 10.0.0.0/8, 172.16.0.0/12,
	// 192.168.0.0/16, 100.64.0.0/10 and fc00::/7, where those usually are; an IPv6 cluster
	// must add its own ranges). NAT64, 6to4 and IPv4-compatible addresses are also judged as
	// the IPv4 address they carry. [] denies none beyond the always refused.
	DeniedNetworks []string `json:"deniedNetworks,omitempty"`
	// allowedNetworks are CIDRs endpoints may reach even so (an in-cluster receiver): an address
	// in one is not refused, but the cloud metadata endpoints (169.254.169.254 and the others
	// docs/webhooks.md lists) always are.
	AllowedNetworks []string `json:"allowedNetworks,omitempty"`
	// signingNamespace holds the copies of KeyWebhooks' signing secrets, which the operator
	// writes and the sender reads, and nothing else (default: systemNamespace followed by
	// "-webhook-signing"): the sender may read Secrets there and nowhere else, so RBAC keeps it
	// from every other Secret of the system namespace. It must exist and differ from
	// systemNamespace.
	SigningNamespace string `json:"signingNamespace,omitempty"`
	// allowHTTP lets endpoints be plain http:// URLs, whose payloads anyone on the path reads
	// (default false).
	AllowHTTP bool `json:"allowHTTP,omitempty"`
	// concurrency is how many deliveries are in flight at once, in all (default 32).
	Concurrency *int32 `json:"concurrency,omitempty"`
	// perNamespaceConcurrency is how many of them one namespace's endpoints may hold (default
	// 4; at most concurrency): namespaces are served in turn, so a namespace of slow or dead
	// endpoints never holds the slots another namespace's deliveries need.
	PerNamespaceConcurrency *int32 `json:"perNamespaceConcurrency,omitempty"`
	// attemptTimeout bounds one delivery attempt, from dialling to the answer (default 15s, as
	// the Standard Webhooks specification recommends 15 to 30); more than 0.
	AttemptTimeout *metav1.Duration `json:"attemptTimeout,omitempty"`
}

// RevealEndpoint is the operator's reveal endpoint (HTTPS, callers RBAC allows to post
// /reveal), whose serving certificate each replica makes and publishes for the panel.
type RevealEndpoint struct {
	// bindAddress is its address; "" (the default) serves none.
	BindAddress string `json:"bindAddress,omitempty"`
	// names are the DNS names (or IP addresses) of its certificate: its Service's. Required
	// when bindAddress is set.
	Names []string `json:"names,omitempty"`
	// caConfigMap is the ConfigMap, in the system namespace, where each replica publishes the
	// endpoint's certificate (default "switchboard-reveal-ca").
	CAConfigMap string `json:"caConfigMap,omitempty"`
}

// WebhookEndpoint is the operator's APIKey admission webhook (HTTPS), whose serving
// certificate each replica makes and adds to its ValidatingWebhookConfiguration.
type WebhookEndpoint struct {
	// bindAddress is its address; "" (the default) serves none.
	BindAddress string `json:"bindAddress,omitempty"`
	// names are the DNS names (or IP addresses) the API server calls it by: its Service's.
	// Required when bindAddress is set.
	Names []string `json:"names,omitempty"`
	// configurationName is the ValidatingWebhookConfiguration whose caBundle each replica adds
	// its certificate to (default "switchboard-apikey-windows").
	ConfigurationName string `json:"configurationName,omitempty"`
}
