package main

import (
	"fmt"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/operator"
	"github.com/switchboard-dev/switchboard/internal/renewalinterval"
)

func newOperatorCommand() *cobra.Command {
	var (
		opts      operator.Options
		newLogger func() logr.Logger
	)
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Run the operator: Connection ids, and APIKeys turned into hashed keys",
		Long: `Run the controllers that give each Connection its public id and turn each APIKey into a key:
generated, hashed into a Secret of the system namespace, revealed once through a one-time Secret
(or delivered into spec.secretName), rotated, expired and revoked. Replicas elect a leader.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			opts.Logger = newLogger()
			// The flags are checked before the API server is looked for; Run checks them too.
			opts.Default()
			if err := opts.Validate(); err != nil {
				return err
			}
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return fmt.Errorf("finding the Kubernetes API server: %w", err)
			}
			return operator.Run(ctrl.SetupSignalHandler(), cfg, opts)
		},
	}
	f := cmd.Flags()
	newLogger = bindLogFlags(f)
	f.StringVar(&opts.SystemNamespace, "system-namespace", podNamespace(), "namespace of the hash Secrets and the leader election Lease; $POD_NAMESPACE when set")
	f.StringVar(&opts.KeyPrefix, "key-prefix", apikey.DefaultPrefix, "prefix of generated keys: 1-16 lower-case letters and digits, starting with a letter")
	f.DurationVar(&opts.RevealTTL, "reveal-ttl", operator.DefaultRevealTTL, "how long an unclaimed reveal Secret lives before it is deleted (the key stays valid)")
	f.DurationVar(&opts.ExpiryWarning, "expiry-warning", operator.DefaultExpiryWarning, "how long before a key's end that nothing will renew its ExpiringSoon condition turns True (with a Warning Event)")
	f.DurationVar(&opts.UnusedAfter, "unused-after", operator.DefaultUnusedAfter, "how long without a use (counting from creation) makes a key's Unused condition True; negative: never")
	f.DurationVar(&opts.MinRenewalInterval, "min-renewal-interval", renewalinterval.Default.Floor, "least interval between two automatic renewals of a key: the admission webhook refuses lifecycles that renew more often, and keys stored before renew at this interval; negative: no floor")
	f.Int32Var(&opts.MinRenewalIntervalPercentage, "min-renewal-interval-percentage", renewalinterval.Default.Percentage, "raises --min-renewal-interval to this percentage of a key's lifetime (1-99); negative: none")
	f.IntVar(&opts.KeyMetricsLimit, "key-metrics-limit", operator.DefaultKeyMetricsLimit, "most APIKeys with series of their own in switchboard_apikey_* metrics; past it only the aggregates are exported; negative: none")
	f.BoolVar(&opts.LeaderElection, "leader-elect", true, "elect one active replica through a Lease")
	f.StringVar(&opts.MetricsBindAddress, "metrics-bind-address", operator.DefaultMetricsBindAddress, `address of the Prometheus metrics; "0" disables them`)
	f.BoolVar(&opts.MetricsSecure, "metrics-secure", true, "serve metrics over HTTPS to callers whose token RBAC allows to get /metrics (false: plain HTTP to anyone)")
	f.StringVar(&opts.HealthProbeBindAddress, "health-probe-bind-address", operator.DefaultHealthProbeBindAddress, `address of /healthz and /readyz; "0" disables them`)
	f.StringVar(&opts.RevealBindAddress, "reveal-bind-address", "0", `address of the reveal endpoint, through which the panel in impersonate mode claims keys for people (HTTPS, callers RBAC allows to post /reveal); "0" disables it`)
	f.StringVar(&opts.RevealBundle, "reveal-ca-configmap", operator.DefaultRevealBundle, "ConfigMap in the system namespace where each replica publishes the reveal endpoint's certificate")
	f.StringSliceVar(&opts.RevealNames, "reveal-names", nil, "DNS names (or IP addresses) of the reveal endpoint's certificate: its Service's")
	f.StringVar(&opts.WebhookBindAddress, "webhook-bind-address", "0", `address of the APIKey admission webhook, which refuses renewal windows that cannot open in time and lifecycles that renew too often (HTTPS); "0" disables it`)
	f.StringVar(&opts.WebhookConfiguration, "webhook-configuration", operator.DefaultWebhookConfiguration, "ValidatingWebhookConfiguration whose caBundle each replica adds its certificate to")
	f.StringSliceVar(&opts.WebhookNames, "webhook-names", nil, "DNS names (or IP addresses) of the webhook's certificate: its Service's")
	f.Float32Var(&opts.QPS, "kube-api-qps", operator.DefaultQPS, "queries per second to the Kubernetes API server (client-go's default is 5)")
	f.IntVar(&opts.Burst, "kube-api-burst", operator.DefaultBurst, "burst of queries to the Kubernetes API server (client-go's default is 10)")
	f.IntVar(&opts.KeyWorkers, "key-workers", operator.DefaultKeyWorkers, "APIKeys reconciled concurrently")
	return cmd
}
