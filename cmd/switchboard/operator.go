package main

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/config"
	"github.com/switchboard-dev/switchboard/internal/operator"
)

// operatorComponent is `switchboard operator`.
var operatorComponent = component[*oc]{
	use:   "operator",
	short: "Run the operator: Connection ids, and APIKeys turned into hashed keys",
	long: `Run the controllers that give each Connection its public id and turn each APIKey into a key:
generated, hashed into a Secret of the system namespace, revealed once through a one-time Secret
(or delivered into spec.secretName), rotated, expired and revoked. Replicas elect a leader. Its
configuration is an OperatorConfiguration (--config), which the flags given override.`,
	bind:            bindOperatorFlags,
	systemNamespace: func(c *oc) *string { return &c.SystemNamespace },
	run: func(ctx context.Context, c *oc, p process) error {
		return operator.Run(ctx, c, operator.Deps{RESTConfig: p.rest, Logger: p.log})
	},
}

func bindOperatorFlags(f *configFlags[*oc]) {
	value(f, "system-namespace", "namespace of the hash Secrets and the leader election Lease; $POD_NAMESPACE when set",
		func(c *oc) *string { return &c.SystemNamespace })
	value(f, "key-prefix", "prefix of generated keys: 1-16 lower-case letters and digits, starting with a letter", func(c *oc) *string { return &c.KeyPrefix })
	optional(f, "reveal-ttl", "how long an unclaimed reveal Secret lives before it is deleted (the key stays valid)",
		func(c *oc) **metav1.Duration { return &c.RevealTTL }, zeroDefault)
	optional(f, "expiry-warning", "how long before a key's end that nothing will renew its ExpiringSoon condition turns True (with a Warning Event)",
		func(c *oc) **metav1.Duration { return &c.ExpiryWarning }, zeroDefault)
	optional(f, "unused-after", "how long without a use (counting from creation) makes a key's Unused condition True; 0: never",
		func(c *oc) **metav1.Duration { return &c.UnusedAfter }, negativeNone)
	optional(f, "min-renewal-interval", "least interval between two automatic renewals of a key: the admission webhook refuses lifecycles that renew more often, and keys stored before renew at this interval; 0: no floor",
		func(c *oc) **metav1.Duration { return &c.MinRenewalInterval }, negativeNone)
	optional(f, "min-renewal-interval-percentage", "raises --min-renewal-interval to this percentage of a key's lifetime (1-99); 0: none",
		func(c *oc) **int32 { return &c.MinRenewalIntervalPercentage }, negativeNone)
	optional(f, "leak-report-retention", "how long a LeakReport is kept once its key is refused (one whose key no hash Secret knows any more goes sooner); 0: until then",
		func(c *oc) **metav1.Duration { return &c.LeakReportRetention }, negativeNone)
	optional(f, "key-metrics-limit", "most APIKeys with series of their own in switchboard_apikey_* metrics; past it only the aggregates are exported; 0: none",
		func(c *oc) **int32 { return &c.KeyMetricsLimit }, negativeNone)
	optional(f, "leader-elect", "elect one active replica through a Lease", func(c *oc) **bool { return &c.LeaderElect })
	bindOperatorListenerFlags(f)
	value(f, "reveal-bind-address", `address of the reveal endpoint, through which the panel in impersonate mode claims keys for people (HTTPS, callers RBAC allows to post /reveal); "" serves none`,
		func(c *oc) *string { return &c.Reveal.BindAddress }, addressZero)
	value(f, "reveal-ca-configmap", "ConfigMap in the system namespace where each replica publishes the reveal endpoint's certificate",
		func(c *oc) *string { return &c.Reveal.CAConfigMap })
	value(f, "reveal-names", "DNS names (or IP addresses) of the reveal endpoint's certificate: its Service's", func(c *oc) *[]string { return &c.Reveal.Names })
	value(f, "webhook-bind-address", `address of the APIKey admission webhook, which refuses renewal windows that cannot open in time and lifecycles that renew too often (HTTPS); "" serves none`,
		func(c *oc) *string { return &c.Webhook.BindAddress }, addressZero)
	value(f, "webhook-configuration", "ValidatingWebhookConfiguration whose caBundle each replica adds its certificate to",
		func(c *oc) *string { return &c.Webhook.ConfigurationName })
	value(f, "webhook-names", "DNS names (or IP addresses) of the webhook's certificate: its Service's", func(c *oc) *[]string { return &c.Webhook.Names })
	optional(f, "kube-api-qps", "queries per second to the Kubernetes API server (client-go's default is 5)", func(c *oc) **float32 { return &c.KubeAPIQPS }, zeroDefault)
	optional(f, "kube-api-burst", "burst of queries to the Kubernetes API server (client-go's default is 10)", func(c *oc) **int32 { return &c.KubeAPIBurst }, zeroDefault)
	optional(f, "key-workers", "APIKeys reconciled concurrently", func(c *oc) **int32 { return &c.KeyWorkers }, zeroDefault)
}

// bindOperatorListenerFlags binds the flags of the listeners every process reading an
// OperatorConfiguration serves (the operator and the webhook sender): metrics and probes.
func bindOperatorListenerFlags(f *configFlags[*oc]) {
	bindMetricsFlags(f, func(c *oc) *configv1alpha1.Metrics { return &c.Metrics })
	optional(f, "health-probe-bind-address", `address of /healthz and /readyz; "" serves none`,
		func(c *oc) **string { return &c.HealthProbeBindAddress }, addressZero)
}

// bindMetricsFlags binds the flags of a process's Prometheus metrics, the server's or the
// operator's, into the metrics settings that metrics(c) returns.
func bindMetricsFlags[T config.Object](f *configFlags[T], metrics func(T) *configv1alpha1.Metrics) {
	optional(f, "metrics-bind-address", `address of the Prometheus metrics; "" serves none`, func(c T) **string { return &metrics(c).MetricsBindAddress }, addressZero)
	optional(f, "metrics-secure", "serve metrics over HTTPS to callers whose token RBAC allows to get /metrics (false: plain HTTP to anyone)",
		func(c T) **bool { return &metrics(c).MetricsSecure })
}
