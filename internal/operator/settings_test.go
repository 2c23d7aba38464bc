package operator

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/renewalinterval"
	"github.com/switchboard-dev/switchboard/internal/logging"
)

// The operator completes the configuration it is given as the command does (its defaults, its
// one validation), and fills what deps leave unset with the process's own.
func TestComplete(t *testing.T) {
	tests := []struct {
		name    string
		in      configv1alpha1.OperatorConfiguration
		wantErr string
		check   func(t *testing.T, s *settings)
	}{
		{
			name: "empty",
			check: func(t *testing.T, s *settings) {
				c := s.c
				if c.SystemNamespace != switchboardv1alpha1.DefaultSystemNamespace || c.KeyPrefix != "sb" || c.RevealTTL.Duration != time.Hour ||
					!*c.LeaderElect || *c.MetricsBindAddress != ":8080" || *c.HealthProbeBindAddress != ":8081" || *c.KubeAPIQPS != 50 || *c.KubeAPIBurst != 100 ||
					s.deps.Clock == nil || s.deps.WebhookClock != s.deps.Clock || s.deps.Logger.GetSink() == nil ||
					c.Webhooks.SigningNamespace != switchboardv1alpha1.DefaultSystemNamespace+"-webhook-signing" || len(s.policy.Denied) != 5 ||
					s.minRenewal() != (renewalinterval.Minimum{Floor: 5 * time.Minute, Percentage: 10}) || c.LeakReportRetention.Duration != 720*time.Hour {
					t.Fatalf("defaults not applied: %+v %+v", c, s.deps)
				}
			},
		},
		{
			name: "what is set is kept",
			in: configv1alpha1.OperatorConfiguration{SystemNamespace: "sys", KeyPrefix: "acme", RevealTTL: &metav1.Duration{Duration: time.Minute},
				KubeAPIQPS: ptr.To[float32](7), KubeAPIBurst: ptr.To[int32](9), Metrics: configv1alpha1.Metrics{MetricsBindAddress: ptr.To(":1")}},
			check: func(t *testing.T, s *settings) {
				c := s.c
				if c.SystemNamespace != "sys" || c.KeyPrefix != "acme" || c.RevealTTL.Duration != time.Minute || *c.KubeAPIQPS != 7 || *c.KubeAPIBurst != 9 ||
					*c.MetricsBindAddress != ":1" || c.Webhooks.SigningNamespace != "sys-webhook-signing" {
					t.Fatalf("set values changed: %+v", c)
				}
			},
		},
		{
			name: "no minimum renewal interval",
			in:   configv1alpha1.OperatorConfiguration{MinRenewalInterval: &metav1.Duration{}, MinRenewalIntervalPercentage: ptr.To[int32](0)},
			check: func(t *testing.T, s *settings) {
				if got := s.minRenewal().Of(time.Hour); got != 0 {
					t.Fatalf("a minimum renewal interval of 0 and 0%% still bounds it: %s", got)
				}
			},
		},
		{name: "bad prefix", in: configv1alpha1.OperatorConfiguration{KeyPrefix: "Bad_Prefix"}, wantErr: "keyPrefix"},
		{name: "a minimum renewal interval of the whole lifetime", in: configv1alpha1.OperatorConfiguration{MinRenewalIntervalPercentage: ptr.To[int32](100)},
			wantErr: "minRenewalIntervalPercentage: Invalid value: 100: must be at most 99"},
		{name: "negative TTL", in: configv1alpha1.OperatorConfiguration{RevealTTL: &metav1.Duration{Duration: -time.Second}}, wantErr: "revealTTL"},
		{name: "the signing copies in the system namespace", in: configv1alpha1.OperatorConfiguration{SystemNamespace: "sys",
			Webhooks: configv1alpha1.WebhooksConfiguration{SigningNamespace: "sys"}}, wantErr: "webhooks.signingNamespace"},
		{name: "a webhook on no port", in: configv1alpha1.OperatorConfiguration{
			Webhook: configv1alpha1.WebhookEndpoint{BindAddress: "127.0.0.1", Names: []string{"127.0.0.1"}}}, wantErr: "webhook.bindAddress"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := complete(&tt.in, Deps{RESTConfig: &rest.Config{}})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, got)
		})
	}
}

// The APIKey reconciler reads a zero as a default of its own: the configuration's 0 ("never",
// "none") reaches it as what it reads so, and what is set, as set.
func TestKeyLife(t *testing.T) {
	for _, tt := range []struct {
		name        string
		in          configv1alpha1.OperatorConfiguration
		unused      time.Duration // < 0: never
		minOfAnHour time.Duration
	}{
		{name: "defaults", unused: 90 * 24 * time.Hour, minOfAnHour: 6 * time.Minute},
		{name: "never unused, no minimum", in: configv1alpha1.OperatorConfiguration{UnusedAfter: &metav1.Duration{},
			MinRenewalInterval: &metav1.Duration{}, MinRenewalIntervalPercentage: ptr.To[int32](0)}, unused: -1},
		{name: "a floor alone", in: configv1alpha1.OperatorConfiguration{MinRenewalInterval: &metav1.Duration{Duration: time.Minute},
			MinRenewalIntervalPercentage: ptr.To[int32](0)}, unused: 90 * 24 * time.Hour, minOfAnHour: time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := complete(&tt.in, Deps{RESTConfig: &rest.Config{}})
			if err != nil {
				t.Fatal(err)
			}
			unused, minimum := s.keyLife()
			if (tt.unused < 0) != (unused < 0) || (tt.unused >= 0 && unused != tt.unused) || minimum == (renewalinterval.Minimum{}) ||
				minimum.Of(time.Hour) != tt.minOfAnHour {
				t.Fatalf("unusedAfter %s, minimum %+v (of an hour %s); want %s, %s", unused, minimum, minimum.Of(time.Hour), tt.unused, tt.minOfAnHour)
			}
		})
	}
}

// The operator's logger is capped whatever logger it is given: client-go logs Secret bodies
// at V(8) (internal/logging).
func TestDepsLoggerIsCapped(t *testing.T) {
	var lines []string
	s, err := complete(&configv1alpha1.OperatorConfiguration{},
		Deps{RESTConfig: &rest.Config{}, Logger: funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 10})})
	if err != nil {
		t.Fatal(err)
	}
	log := s.deps.Logger
	log.V(logging.MaxVerbosity).Info("kept")
	log.V(8).Info("a Secret body")
	if len(lines) != 1 || log.V(8).Enabled() {
		t.Fatalf("the operator logged %d lines (%v) with V(8) enabled=%t, want only the V(%d) line", len(lines), lines, log.V(8).Enabled(), logging.MaxVerbosity)
	}
}
