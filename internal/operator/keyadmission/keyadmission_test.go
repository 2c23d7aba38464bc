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
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/operator"
	"github.com/switchboard-dev/switchboard/internal/testenv"
	"github.com/switchboard-dev/switchboard/internal/testenv/system"
)

// sys is the real API server with the real operator serving the webhook, registered by the
// configuration the chart installs, its caBundle filled by the operator.
var sys *system.System

// webhookNow is the webhook's clock: the windows' gaps it names depend on the instant it
// follows them from, so each test puts it at the instant it names, and what the test asserts
// holds whatever the day it runs. The operator's own clock stays real: it dates the serving
// certificate, which the API server checks against its real time.
var webhookNow = clocktesting.NewFakePassiveClock(wednesday)

// wednesday is an ordinary week's middle: the first gap of a weekday window is its weekend.
var wednesday = time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)

func TestMain(m *testing.M) {
	// CI machines keep UTC: the whole system runs in a zone that is not, a quarter-hour off
	// UTC, so that nothing of the webhook's answer comes from the machine's zone.
	local, err := time.LoadLocation("Asia/Kathmandu")
	if err != nil {
		panic(err)
	}
	time.Local = local
	system.Main(m, system.Options{Webhook: true, Operator: func(_ *configv1alpha1.OperatorConfiguration, deps *operator.Deps) { deps.WebhookClock = webhookNow }},
		func(s *system.System) { sys = s })
}

// at puts the webhook's clock at now.
func at(t *testing.T, now time.Time) {
	t.Helper()
	webhookNow.SetTime(now)
	t.Cleanup(func() { webhookNow.SetTime(wednesday) })
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
	at(t, wednesday)
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

// TestWebhookRefusesRenewalsTooOften: through the real API server and the operator's default
// minimum interval between renewals (the larger of 5m and 10% of the lifetime), a lifecycle
// that renews more often is refused with its numbers named, whether or not it has windows
// (issue 29: lifetime 2m renewed at 99% renewed every 1.2s); one at the minimum is admitted, and
// so is a key that renews nothing. An update is checked when it changes the lifecycle.
func TestWebhookRefusesRenewalsTooOften(t *testing.T) {
	ns := sys.Namespace(t, "interval")
	waitForWebhook(t, ns)
	day := 24 * time.Hour
	lifecycle := func(name string, lifetime, renewBefore time.Duration, pct int32, windows ...switchboardv1alpha1.APIKeyRenewalWindow) *switchboardv1alpha1.APIKey {
		k := key(ns, name, renewBefore, windows...)
		k.Spec.Lifetime = &metav1.Duration{Duration: lifetime}
		if renewBefore == 0 {
			k.Spec.RenewBefore = nil
		}
		if pct != 0 {
			k.Spec.RenewBeforePercentage = &pct
		}
		return k
	}
	tests := []struct {
		name string
		key  *switchboardv1alpha1.APIKey
		want string // the refusal; "" for admitted
	}{
		{"the storm: 2m renewed at 99%", lifecycle("storm", 2*time.Minute, 0, 99),
			"spec.lifetime: lifetime 2m0s with renewBeforePercentage 99 (1m58.8s) renews the key every 1.2s; this platform renews a key at most every 5m0s (the larger of 5m0s and 10% of the lifetime): lengthen lifetime"},
		{"30 days renewed 28 days ahead, under 10%", lifecycle("monthly", 30*day, 28*day, 0),
			"renews the key every 48h0m0s; this platform renews a key at most every 72h0m0s"},
		{"weekly windows do not make it less often", lifecycle("weekly", 10*time.Minute, 8*time.Minute, 0,
			switchboardv1alpha1.APIKeyRenewalWindow{Start: "02:00", Duration: metav1.Duration{Duration: 24 * time.Hour}}), "renews the key every 2m0s"},
		{"a cron window neither", lifecycle("cron", 10*time.Minute, 8*time.Minute, 0, cronWindow("* * * * *", time.Hour, "UTC")), "renews the key every 2m0s"},
		{"exactly the minimum", lifecycle("at-minimum", 10*time.Minute, 5*time.Minute, 0), ""},
		{"a lifetime alone renews nothing", lifecycle("lifetime-only", 2*time.Minute, 0, 0), ""},
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
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want a refusal with %q", err, tt.want)
			}
		})
	}
	got := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "at-minimum"}}
	patch := func(p string) error {
		return sys.Client.Patch(testContext(t), got, client.RawPatch(types.MergePatchType, []byte(p)))
	}
	if err := patch(`{"spec":{"renewBefore":"6m"}}`); err == nil || !strings.Contains(err.Error(), "renews the key every 4m0s") {
		t.Fatalf("renewing earlier than the minimum: %v, want a refusal", err)
	}
	if err := patch(`{"spec":{"description":"changed"}}`); err != nil {
		t.Fatalf("an update that leaves the lifecycle alone: %v", err)
	}
}

// TestWebhookAtNamedInstants: the gap the webhook names is the first one it finds from now,
// so it is checked at instants where that differs: just after Friday's window, in the middle
// of the weekend, on the nights daylight saving time begins and ends in Paris, each told to
// the webhook in UTC and in the machine's own (non-UTC) zone. Every answer is derived by hand
// in the case's comment. The weekday window opens at 02:00 in Paris for an hour: 01:00 to
// 02:00 UTC in winter, 00:00 to 01:00 in summer.
func TestWebhookAtNamedInstants(t *testing.T) {
	ns := sys.Namespace(t, "instants")
	waitForWebhook(t, ns)
	day := 24 * time.Hour
	weekdays := cronWindow("0 2 * * 1-5", time.Hour, "Europe/Paris")
	// daily opens every day at 02:30 in Paris, which the night the clocks go back passes twice
	// (time.Date takes the second): that night's gap is 24h (01:30 to 01:30 UTC), every other
	// one 23h or less. The next such night is 2027-10-31 from every instant below: on
	// 2026-10-25 at 00:30 UTC the webhook is inside that night's gap, cut short at now.
	daily := switchboardv1alpha1.APIKeyRenewalWindow{Start: "02:30", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "Europe/Paris"}
	// The weekend the clocks go back is the weekdays' longest gap: Friday's window closes at
	// 01:00 UTC in summer time, Monday's opens at 01:00 UTC in winter time, 3 days later. From
	// every instant below, the next whole one is 2027-10-29's (2026-10-23's has begun already
	// at the earliest instant, 2026-10-25).
	const longestWeekend = "between 2027-10-29T01:00:00Z and 2027-11-01T01:00:00Z (3 days)"
	const nightClocksGoBack = "between 2027-10-30T01:30:00Z and 2027-10-31T01:30:00Z (24h)"
	instants := []struct {
		name string
		now  time.Time
		// weekend is the first gap of at least two days from now.
		weekend string
	}{
		{"Friday 02:01 UTC, a minute after the window closed", time.Date(2026, 11, 27, 2, 1, 0, 0, time.UTC),
			"between 2026-11-27T02:01:00Z and 2026-11-30T01:00:00Z (2 days 22h59m)"},
		{"Friday noon UTC", time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC),
			"between 2026-11-27T12:00:00Z and 2026-11-30T01:00:00Z (2 days 13h)"},
		{"Saturday 00:30 UTC, still two days to Monday", time.Date(2026, 11, 28, 0, 30, 0, 0, time.UTC),
			"between 2026-11-28T00:30:00Z and 2026-11-30T01:00:00Z (2 days 30m)"},
		// Sunday: 24h30m to Monday's window, then the week's, then the whole next weekend.
		{"2026-10-25 00:30 UTC, the night the clocks go back in Paris", time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC),
			"between 2026-10-30T02:00:00Z and 2026-11-02T01:00:00Z (2 days 23h)"},
		// 03:30 summer time, just after the jump: the next weekend, in summer time throughout.
		{"2027-03-28 01:30 UTC, the night the clocks go forward in Paris", time.Date(2027, 3, 28, 1, 30, 0, 0, time.UTC),
			"between 2027-04-02T01:00:00Z and 2027-04-05T00:00:00Z (2 days 23h)"},
	}
	tests := []struct {
		name   string
		key    *switchboardv1alpha1.APIKey
		want   func(weekend string) string // a fragment of the refusal; "" for admitted
		period string
	}{
		{"weekdays, 2 days to renew", key(ns, "weekdays-2d", 2*day, weekdays), func(w string) string { return w }, "(2 days)"},
		{"weekdays, 3 days to renew", key(ns, "weekdays-3d", 3*day, weekdays), func(string) string { return longestWeekend }, "(3 days)"},
		{"weekdays, 3 days and a minute to renew", key(ns, "weekdays-3d1m", 3*day+time.Minute, weekdays), func(string) string { return "" }, ""},
		{"daily at 02:30 in Paris, 24h to renew", key(ns, "daily-24h", day, daily), func(string) string { return nightClocksGoBack }, "(24h)"},
		{"daily at 02:30 in Paris, 24h1m to renew", key(ns, "daily-24h1m", day+time.Minute, daily), func(string) string { return "" }, ""},
	}
	for _, instant := range instants {
		for _, zone := range []*time.Location{time.UTC, time.Local} {
			t.Run(instant.name+" in "+zone.String(), func(t *testing.T) {
				at(t, instant.now.In(zone))
				for _, tt := range tests {
					err := sys.Client.Create(testContext(t), tt.key.DeepCopy(), client.DryRunAll)
					want := tt.want(instant.weekend)
					switch {
					case want == "" && err != nil:
						t.Errorf("%s: refused: %v", tt.name, err)
					case want != "" && (err == nil || !strings.Contains(err.Error(), "no renewal window opens "+want) ||
						!strings.Contains(err.Error(), "renewal period "+tt.period)):
						t.Errorf("%s: got %v, want a refusal naming the gap %s and the renewal period %s", tt.name, err, want, tt.period)
					}
				}
			})
		}
	}
}

// TestWebhookCABundleRestored: the operator's certificate is in every webhook's caBundle, and
// when something resets it (a GitOps sync of the chart's empty caBundle), the operator puts
// it back within a minute.
func TestWebhookCABundleRestored(t *testing.T) {
	ctx := testContext(t)
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := sys.Client.Get(ctx, client.ObjectKey{Name: configv1alpha1.DefaultWebhookConfigurationName}, &vwc); err != nil {
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
		if err := sys.Client.Get(ctx, client.ObjectKey{Name: configv1alpha1.DefaultWebhookConfigurationName}, &now); err != nil {
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
