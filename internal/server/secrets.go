package server

import (
	"fmt"
	"os"
	"strings"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/leakreceiver"
)

// The server's secrets never sit in its configuration (a ConfigMap): it names the files that
// hold them (mounted Secrets), read here once at start. Errors name the field, never a secret.

// RedisPasswordEnv names the variable that holds the rate-limit Redis's password, when the
// configuration names no password file (the chart sets it from a Secret).
const RedisPasswordEnv = "SWITCHBOARD_RATE_LIMIT_REDIS_PASSWORD"

// redisPassword is the rate-limit Redis's password: from file when the configuration names one,
// else from the environment; never a flag or the URL in the Deployment, where whoever may read
// Deployments would see it.
func redisPassword(file string) (string, error) {
	if file == "" {
		return os.Getenv(RedisPasswordEnv), nil
	}
	b, err := os.ReadFile(file) //nolint:gosec // G304: the file the configuration names, on purpose
	if err != nil {
		return "", fmt.Errorf("rateLimitRedis.passwordFile: %w", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// leakReportSecrets reads the leak reports' secrets from the files the configuration names into
// the receiver's configuration: the partner keys' token, the webhook's secret and the API token.
func leakReportSecrets(c *configv1alpha1.LeakReports, into *leakreceiver.Config) error {
	for _, s := range []struct {
		file, field string
		into        *string
	}{
		{c.Partner.TokenFile, "leakReports.partner.tokenFile", &into.PublicKeysToken},
		{c.OrganizationAlerts.APITokenFile, "leakReports.organizationAlerts.apiTokenFile", &into.APIToken},
	} {
		v, err := secretFile(s.file, s.field)
		if err != nil {
			return err
		}
		*s.into = v
	}
	secret, err := secretFile(c.OrganizationAlerts.WebhookSecretFile, "leakReports.organizationAlerts.webhookSecretFile")
	into.WebhookSecret = []byte(secret)
	return err
}

// secretFile is the content of file but for a final line break ("" when file is ""); its error
// names the configuration's field, never the content.
func secretFile(file, field string) (string, error) {
	if file == "" {
		return "", nil
	}
	b, err := os.ReadFile(file) //nolint:gosec // G304: the file the configuration names, on purpose
	if err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return "", fmt.Errorf("%s: %s is empty", field, file)
	}
	return v, nil
}
