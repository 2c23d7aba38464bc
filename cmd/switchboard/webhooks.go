package main

import (
	"fmt"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/config"
	"github.com/switchboard-dev/switchboard/internal/webhooksender"
)

func newWebhooksCommand() *cobra.Command {
	var (
		cf        *configFlags
		flags     *overrides[configv1alpha1.OperatorConfiguration]
		newLogger func() logr.Logger
	)
	cmd := &cobra.Command{
		Use:   "webhooks",
		Short: "Send key events to tenants' KeyWebhooks (Standard Webhooks), from the outboxes of the system namespace",
		Long: `Deliver the key events the operator records in the WebhookOutboxes of the system namespace to
the endpoints tenants subscribe with KeyWebhooks, signed in the Standard Webhooks format, at least
once, retried on the specification's schedule, and never to loopback, link-local, the cloud
metadata endpoints or the networks the platform denies (NAT64 and 6to4 addresses judged by the
IPv4 address they carry). It is the one component that needs egress to the internet. Replicas elect a
leader. It reads the operator's configuration file (--config): its webhooks section, and the
settings it shares with the operator (systemNamespace, leaderElect, metrics, probes, API client).`,
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
			opts, err := webhooksender.OptionsFromConfig(c)
			if err != nil {
				return err
			}
			opts.Logger = newLogger()
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return fmt.Errorf("finding the Kubernetes API server: %w", err)
			}
			return webhooksender.Run(ctrl.SetupSignalHandler(), cfg, opts)
		},
	}
	f := cmd.Flags()
	newLogger = bindLogFlags(f)
	cf = bindConfigFlags(f, "OperatorConfiguration")
	def := &configv1alpha1.OperatorConfiguration{}
	configv1alpha1.SetDefaults_OperatorConfiguration(def)
	flags = newOverrides[configv1alpha1.OperatorConfiguration](f)
	type oc = configv1alpha1.OperatorConfiguration
	flags.String("system-namespace", podNamespace(), "namespace of the outboxes, the signing secrets' copies and the leader election Lease; $POD_NAMESPACE when set",
		func(c *oc, v string) { c.SystemNamespace = v })
	flags.Bool("leader-elect", *def.LeaderElect, "elect one sending replica through a Lease", func(c *oc, v bool) { c.LeaderElect = &v })
	bindOperatorListenerFlags(flags, def)
	return cmd
}

// bindOperatorListenerFlags binds the flags of the listeners every process reading an
// OperatorConfiguration serves (the operator and the webhook sender): metrics and probes.
func bindOperatorListenerFlags(flags *overrides[configv1alpha1.OperatorConfiguration], def *configv1alpha1.OperatorConfiguration) {
	type oc = configv1alpha1.OperatorConfiguration
	flags.String("metrics-bind-address", *def.MetricsBindAddress, `address of the Prometheus metrics; "0" disables them`,
		func(c *oc, v string) { c.MetricsBindAddress = address(v) })
	flags.Bool("metrics-secure", *def.MetricsSecure, "serve metrics over HTTPS to callers whose token RBAC allows to get /metrics (false: plain HTTP to anyone)",
		func(c *oc, v bool) { c.MetricsSecure = &v })
	flags.String("health-probe-bind-address", *def.HealthProbeBindAddress, `address of /healthz and /readyz; "0" disables them`,
		func(c *oc, v string) { c.HealthProbeBindAddress = address(v) })
}
