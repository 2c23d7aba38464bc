//go:build !unit

package keyadmission_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/operator"
	"github.com/switchboard-dev/switchboard/internal/testenv"
	"github.com/switchboard-dev/switchboard/internal/testenv/system"
)

// sys is the real API server with the real operator serving the webhook, registered by the
// configuration the chart installs, its caBundle filled by the operator.
var sys *system.System

func TestMain(m *testing.M) {
	system.Main(m, system.Options{Webhook: true}, func(s *system.System) { sys = s })
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func cronWindow(spec string, d time.Duration, tz string) switchboardv1alpha1.APIKeyRenewalWindow {
	return switchboardv1alpha1.APIKeyRenewalWindow{Cron: spec, Duration: metav1.Duration{Duration: d}, TimeZone: tz}
}

// key is a delivered APIKey renewed renewBefore before the end of a 30-day lifetime, in windows.
func key(ns, name string, renewBefore time.Duration, windows ...switchboardv1alpha1.APIKeyRenewalWindow) *switchboardv1alpha1.APIKey {
	k := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	k.Spec.SecretName = name + "-key"
	k.Spec.Lifetime = &metav1.Duration{Duration: 30 * 24 * time.Hour}
	k.Spec.RenewBefore = &metav1.Duration{Duration: renewBefore}
	k.Spec.RenewalWindows = windows
	return k
}

// waitForWebhook waits until the operator has published its certificate in the configuration
// and the API server calls the webhook: an impossible window is refused.
func waitForWebhook(t *testing.T, ns string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "the webhook refuses an impossible window", func() error {
		err := sys.Client.Create(testContext(t), key(ns, "probe", time.Hour, cronWindow("0 0 * * *", time.Minute, "UTC")), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "no renewal window opens") {
			return fmt.Errorf("creating the probe: %w", err)
		}
		return nil
	})
}

// TestWebhookRefusesWindowsThatCannotOpenInTime: through the real API server, cron windows of
// which none opens within the renewal period are refused with the gap named (cert-manager#9146),
// possible ones are admitted, and so is an old object updated without touching its windows.
func TestWebhookRefusesWindowsThatCannotOpenInTime(t *testing.T) {
	ns := sys.Namespace(t, "windows")
	waitForWebhook(t, ns)
	day := 24 * time.Hour
	tests := []struct {
		name string
		key  *switchboardv1alpha1.APIKey
		want string // a fragment of the refusal; "" for admitted
	}{
		{"daily 1m window, 1h to renew", key(ns, "daily-short", time.Hour, cronWindow("0 0 * * *", time.Minute, "UTC")), "no renewal window opens between"},
		{"daily 1m window, a day to renew", key(ns, "daily", day, cronWindow("0 0 * * *", time.Minute, "UTC")), ""},
		{"weekdays, 2 days to renew", key(ns, "weekdays-short", 2*day, cronWindow("0 2 * * 1-5", time.Hour, "Europe/Paris")), "2 days 23h"},
		{"weekdays, 4 days to renew", key(ns, "weekdays", 4*day, cronWindow("0 2 * * 1-5", time.Hour, "Europe/Paris")), ""},
		{"a date that never comes", key(ns, "never", 7*day, cronWindow("0 0 30 2 *", time.Hour, "UTC")), "never opens"},
		{"daily for an hour, 24h to renew: the night the clocks go back", key(ns, "dst", day, switchboardv1alpha1.APIKeyRenewalWindow{Start: "02:30", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "Europe/Paris"}), "(24h)"},
		{"an unknown zone", key(ns, "zone", day, cronWindow("0 2 * * *", time.Hour, "Mars/Olympus")), "unknown time zone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := sys.Client.Create(testContext(t), tt.key)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "spec.renewalWindows") {
				t.Fatalf("got %v, want a refusal with %q", err, tt.want)
			}
		})
	}
	// An update is checked when it changes the windows or the renewal period, and only then.
	got := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "daily"}}
	patch := func(p string) error {
		return sys.Client.Patch(testContext(t), got, client.RawPatch(types.MergePatchType, []byte(p)))
	}
	if err := patch(`{"spec":{"description":"changed"}}`); err != nil {
		t.Fatalf("an update that leaves the windows alone: %v", err)
	}
	if err := patch(`{"spec":{"renewBefore":"1h"}}`); err == nil || !strings.Contains(err.Error(), "no renewal window opens") {
		t.Fatalf("shortening renewBefore under the windows' gap: %v, want a refusal", err)
	}
}

// TestWebhookCABundleRestored: the operator's certificate is in every webhook's caBundle, and
// when something resets it (a GitOps sync of the chart's empty caBundle), the operator puts
// it back within a minute.
func TestWebhookCABundleRestored(t *testing.T) {
	ctx := testContext(t)
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := sys.Client.Get(ctx, client.ObjectKey{Name: operator.DefaultWebhookConfiguration}, &vwc); err != nil {
		t.Fatal(err)
	}
	for _, w := range vwc.Webhooks {
		if !strings.Contains(string(w.ClientConfig.CABundle), "BEGIN CERTIFICATE") {
			t.Fatalf("webhook %s has no certificate in its caBundle", w.Name)
		}
	}
	for i := range vwc.Webhooks {
		vwc.Webhooks[i].ClientConfig.CABundle = nil
	}
	if err := sys.Client.Update(ctx, &vwc); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 90*time.Second, "the operator restores the caBundle", func() error {
		var now admissionregistrationv1.ValidatingWebhookConfiguration
		if err := sys.Client.Get(ctx, client.ObjectKey{Name: operator.DefaultWebhookConfiguration}, &now); err != nil {
			return err
		}
		for _, w := range now.Webhooks {
			if len(w.ClientConfig.CABundle) == 0 {
				return fmt.Errorf("webhook %s has an empty caBundle", w.Name)
			}
		}
		return nil
	})
	waitForWebhook(t, sys.Namespace(t, "restored"))
}
