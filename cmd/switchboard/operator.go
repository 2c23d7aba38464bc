package main

import (
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/config"
	"github.com/switchboard-dev/switchboard/internal/operator"
)

func newOperatorCommand() *cobra.Command {
	var (
		cf        *configFlags
		flags     *overrides[configv1alpha1.OperatorConfiguration]
		newLogger func() logr.Logger
	)
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Run the operator: Connection ids, and APIKeys turned into hashed keys",
		Long: `Run the controllers that give each Connection its public id and turn each APIKey into a key:
generated, hashed into a Secret of the system namespace, revealed once through a one-time Secret
(or delivered into spec.secretName), rotated, expired and revoked. Replicas elect a leader. Its
configuration is an OperatorConfiguration (--config), which the flags given override.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := &configv1alpha1.OperatorConfiguration{}
			done, err := complete(cf, c, func(c *configv1alpha1.OperatorConfiguration) {
				flags.apply(c)
				if c.SystemNamespace == "" {
					c.SystemNamespace = podNamespace()
				}
			}, configv1alpha1.SetDefaults_OperatorConfiguration, config.ValidateOperatorConfiguration, cmd.OutOrStdout())
			if done || err != nil {
				return err
			}
			opts := operator.OptionsFromConfig(c)
			opts.Logger = newLogger()
			// The configuration is checked before the API server is looked for; Run checks it too.
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
	cf = bindConfigFlags(f, "OperatorConfiguration")
	// The flags show the configuration's defaults: they have one home.
	def := &configv1alpha1.OperatorConfiguration{}
	configv1alpha1.SetDefaults_OperatorConfiguration(def)
	flags = newOverrides[configv1alpha1.OperatorConfiguration](f)
	type oc = configv1alpha1.OperatorConfiguration
	flags.String("system-namespace", podNamespace(), "namespace of the hash Secrets and the leader election Lease; $POD_NAMESPACE when set",
		func(c *oc, v string) { c.SystemNamespace = v })
	flags.String("key-prefix", def.KeyPrefix, "prefix of generated keys: 1-16 lower-case letters and digits, starting with a letter",
		func(c *oc, v string) { c.KeyPrefix = v })
	flags.Duration("reveal-ttl", def.RevealTTL.Duration, "how long an unclaimed reveal Secret lives before it is deleted (the key stays valid)",
		func(c *oc, v time.Duration) { c.RevealTTL = period(v) })
	flags.Duration("expiry-warning", def.ExpiryWarning.Duration, "how long before a key's end that nothing will renew its ExpiringSoon condition turns True (with a Warning Event)",
		func(c *oc, v time.Duration) { c.ExpiryWarning = period(v) })
	flags.Duration("unused-after", def.UnusedAfter.Duration, "how long without a use (counting from creation) makes a key's Unused condition True; negative: never",
		func(c *oc, v time.Duration) { c.UnusedAfter = periodOrNone(v) })
	flags.Duration("min-renewal-interval", def.MinRenewalInterval.Duration, "least interval between two automatic renewals of a key: the admission webhook refuses lifecycles that renew more often, and keys stored before renew at this interval; negative: no floor",
		func(c *oc, v time.Duration) { c.MinRenewalInterval = periodOrNone(v) })
	flags.Int32("min-renewal-interval-percentage", *def.MinRenewalIntervalPercentage, "raises --min-renewal-interval to this percentage of a key's lifetime (1-99); negative: none",
		func(c *oc, v int32) { c.MinRenewalIntervalPercentage = bound(v) })
	flags.Duration("leak-report-retention", def.LeakReportRetention.Duration, "how long a LeakReport is kept once its key is refused (one whose key no hash Secret knows any more goes sooner); negative: until then",
		func(c *oc, v time.Duration) { c.LeakReportRetention = periodOrNone(v) })
	flags.Int32("key-metrics-limit", *def.KeyMetricsLimit, "most APIKeys with series of their own in switchboard_apikey_* metrics; past it only the aggregates are exported; negative: none",
		func(c *oc, v int32) { c.KeyMetricsLimit = bound(v) })
	flags.Bool("leader-elect", *def.LeaderElect, "elect one active replica through a Lease", func(c *oc, v bool) { c.LeaderElect = &v })
	bindOperatorListenerFlags(flags, def)
	flags.String("reveal-bind-address", "0", `address of the reveal endpoint, through which the panel in impersonate mode claims keys for people (HTTPS, callers RBAC allows to post /reveal); "0" disables it`,
		func(c *oc, v string) { c.Reveal.BindAddress = *address(v) })
	flags.String("reveal-ca-configmap", def.Reveal.CAConfigMap, "ConfigMap in the system namespace where each replica publishes the reveal endpoint's certificate",
		func(c *oc, v string) { c.Reveal.CAConfigMap = v })
	flags.StringSlice("reveal-names", nil, "DNS names (or IP addresses) of the reveal endpoint's certificate: its Service's",
		func(c *oc, v []string) { c.Reveal.Names = v })
	flags.String("webhook-bind-address", "0", `address of the APIKey admission webhook, which refuses renewal windows that cannot open in time and lifecycles that renew too often (HTTPS); "0" disables it`,
		func(c *oc, v string) { c.Webhook.BindAddress = *address(v) })
	flags.String("webhook-configuration", def.Webhook.ConfigurationName, "ValidatingWebhookConfiguration whose caBundle each replica adds its certificate to",
		func(c *oc, v string) { c.Webhook.ConfigurationName = v })
	flags.StringSlice("webhook-names", nil, "DNS names (or IP addresses) of the webhook's certificate: its Service's",
		func(c *oc, v []string) { c.Webhook.Names = v })
	flags.Float32("kube-api-qps", *def.KubeAPIQPS, "queries per second to the Kubernetes API server (client-go's default is 5)",
		func(c *oc, v float32) { c.KubeAPIQPS = orDefault(v) })
	flags.Int32("kube-api-burst", *def.KubeAPIBurst, "burst of queries to the Kubernetes API server (client-go's default is 10)",
		func(c *oc, v int32) { c.KubeAPIBurst = orDefault(v) })
	flags.Int32("key-workers", *def.KeyWorkers, "APIKeys reconciled concurrently", func(c *oc, v int32) { c.KeyWorkers = orDefault(v) })
	return cmd
}
