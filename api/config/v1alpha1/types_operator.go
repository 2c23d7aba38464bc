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
	// keyMetricsLimit is how many APIKeys get series of their own in the switchboard_apikey_*
	// metrics (default 10000); past it only the aggregates are exported. 0: no per-key series.
	KeyMetricsLimit *int32 `json:"keyMetricsLimit,omitempty"`
	// keyWorkers is how many APIKeys are reconciled concurrently (default 8).
	KeyWorkers *int32 `json:"keyWorkers,omitempty"`

	// leaderElect elects one active replica through a Lease (default true).
	LeaderElect *bool `json:"leaderElect,omitempty"`
	// metricsBindAddress is the address of the Prometheus metrics (default ":8080"); "" serves none.
	MetricsBindAddress *string `json:"metricsBindAddress,omitempty"`
	// metricsSecure serves the metrics over HTTPS to callers whose token RBAC allows to get
	// /metrics (default true); false serves plain HTTP to anyone.
	MetricsSecure *bool `json:"metricsSecure,omitempty"`
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
