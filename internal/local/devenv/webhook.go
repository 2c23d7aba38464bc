package devenv

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/operator/keyadmission"
	"github.com/switchboard-dev/switchboard/internal/scheme"
)

// installWebhook applies the operator's ValidatingWebhookConfiguration, pointed at a free
// loopback port, and returns that address for the operator to serve the webhook on.
func installWebhook(ctx context.Context, cfg *rest.Config) (string, error) {
	addr, err := freeLoopbackAddr()
	if err != nil {
		return "", err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return "", err
	}
	url := "https://" + addr + keyadmission.Path
	want := keyadmission.Configuration(configv1alpha1.DefaultWebhookConfigurationName, admissionregistrationv1.WebhookClientConfig{URL: &url})
	var have admissionregistrationv1.ValidatingWebhookConfiguration
	switch err := c.Get(ctx, client.ObjectKeyFromObject(want), &have); {
	case apierrors.IsNotFound(err):
		err = c.Create(ctx, want)
		if err != nil {
			return "", fmt.Errorf("installing the admission webhook: %w", err)
		}
	case err != nil:
		return "", fmt.Errorf("installing the admission webhook: %w", err)
	default: // a control plane kept from an earlier run: the port is new
		have.Webhooks = want.Webhooks
		if err := c.Update(ctx, &have); err != nil {
			return "", fmt.Errorf("installing the admission webhook: %w", err)
		}
	}
	return addr, nil
}
