package operator

import (
	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/config"
)

// OptionsFromConfig turns a defaulted, validated OperatorConfiguration into Options: the one
// translation from the configuration's spelling of "disabled" (an empty address, a 0 period or
// bound) to the Options' ("0", negative). What only a process has (logger, clocks) is left to
// the caller.
func OptionsFromConfig(c *configv1alpha1.OperatorConfiguration) Options {
	// Validation has read every network already.
	policy, _ := config.WebhookPolicy(&c.Webhooks)
	return Options{
		WebhookPolicy:                policy,
		WebhookSigningNamespace:      c.Webhooks.SigningNamespace,
		SystemNamespace:              c.SystemNamespace,
		KeyPrefix:                    c.KeyPrefix,
		RevealTTL:                    c.RevealTTL.Duration,
		ExpiryWarning:                c.ExpiryWarning.Duration,
		UnusedAfter:                  orNone(c.UnusedAfter.Duration),
		MinRenewalInterval:           orNone(c.MinRenewalInterval.Duration),
		MinRenewalIntervalPercentage: orNone(*c.MinRenewalIntervalPercentage),
		LeakReportRetention:          orNone(c.LeakReportRetention.Duration),
		KeyMetricsLimit:              int(orNone(*c.KeyMetricsLimit)),
		KeyWorkers:                   int(*c.KeyWorkers),
		LeaderElection:               *c.LeaderElect,
		MetricsBindAddress:           address(*c.MetricsBindAddress),
		MetricsSecure:                *c.MetricsSecure,
		HealthProbeBindAddress:       address(*c.HealthProbeBindAddress),
		RevealBindAddress:            address(c.Reveal.BindAddress),
		RevealBundle:                 c.Reveal.CAConfigMap,
		RevealNames:                  c.Reveal.Names,
		WebhookBindAddress:           address(c.Webhook.BindAddress),
		WebhookConfiguration:         c.Webhook.ConfigurationName,
		WebhookNames:                 c.Webhook.Names,
		QPS:                          *c.KubeAPIQPS,
		Burst:                        int(*c.KubeAPIBurst),
	}
}

// address is an Options address: the configuration's "" (none) is "0".
func address(a string) string {
	if a == "" {
		return "0"
	}
	return a
}

// orNone is an Options bound: the configuration's 0 (none) is -1, as Options' zero means the
// default.
func orNone[T ~int32 | ~int64](v T) T {
	if v == 0 {
		return -1
	}
	return v
}
