package operator

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/logging"
	"github.com/switchboard-dev/switchboard/internal/renewalinterval"
)

func TestOptionsComplete(t *testing.T) {
	tests := []struct {
		name    string
		in      Options
		wantErr string
		check   func(t *testing.T, o Options)
	}{
		{
			name: "zero value",
			check: func(t *testing.T, o Options) {
				if o.SystemNamespace != switchboardv1alpha1.DefaultSystemNamespace || o.KeyPrefix != "sb" || o.RevealTTL != time.Hour ||
					o.LeaderElectionID != DefaultLeaderElectionID || o.LeaderElectionNamespace != o.SystemNamespace ||
					o.MetricsBindAddress != "0" || o.HealthProbeBindAddress != "0" || o.QPS != DefaultQPS || o.Burst != DefaultBurst ||
					o.Clock == nil || o.WebhookClock != o.Clock || o.Logger.GetSink() == nil ||
					o.WebhookSigningNamespace != switchboardv1alpha1.DefaultSystemNamespace+"-webhook-signing" ||
					o.minRenewal() != (renewalinterval.Minimum{Floor: 5 * time.Minute, Percentage: 10}) || o.LeakReportRetention != 720*time.Hour {
					t.Fatalf("defaults not applied: %+v", o)
				}
			},
		},
		{
			name: "explicit values kept",
			in:   Options{SystemNamespace: "sys", KeyPrefix: "acme", RevealTTL: time.Minute, QPS: 7, Burst: 9, MetricsBindAddress: ":1"},
			check: func(t *testing.T, o Options) {
				if o.SystemNamespace != "sys" || o.KeyPrefix != "acme" || o.RevealTTL != time.Minute || o.QPS != 7 || o.Burst != 9 ||
					o.LeaderElectionNamespace != "sys" || o.MetricsBindAddress != ":1" || o.WebhookSigningNamespace != "sys-webhook-signing" {
					t.Fatalf("explicit values changed: %+v", o)
				}
			},
		},
		{
			name: "no minimum renewal interval",
			in:   Options{MinRenewalInterval: -1, MinRenewalIntervalPercentage: -1},
			check: func(t *testing.T, o Options) {
				if got := o.minRenewal().Of(time.Hour); got != 0 {
					t.Fatalf("negative parts of the minimum renewal interval still bound it: %s", got)
				}
			},
		},
		{name: "bad prefix", in: Options{KeyPrefix: "Bad_Prefix"}, wantErr: "key prefix"},
		{name: "a minimum renewal interval of the whole lifetime", in: Options{MinRenewalIntervalPercentage: 100}, wantErr: "--min-renewal-interval-percentage: at most 99"},
		{name: "negative TTL", in: Options{RevealTTL: -time.Second}, wantErr: "reveal TTL"},
		{name: "the signing copies in the system namespace", in: Options{SystemNamespace: "sys", WebhookSigningNamespace: "sys"},
			wantErr: "webhooks.signingNamespace: the signing secrets' copies need a namespace of their own"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.complete()
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

// The operator's logger is capped whatever logger it is given: client-go logs Secret bodies
// at V(8) (internal/logging).
func TestOptionsCapTheLogger(t *testing.T) {
	var lines []string
	o, err := Options{Logger: funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 10})}.complete()
	if err != nil {
		t.Fatal(err)
	}
	o.Logger.V(logging.MaxVerbosity).Info("kept")
	o.Logger.V(8).Info("a Secret body")
	if len(lines) != 1 || o.Logger.V(8).Enabled() {
		t.Fatalf("the operator logged %d lines (%v) with V(8) enabled=%t, want only the V(%d) line", len(lines), lines, o.Logger.V(8).Enabled(), logging.MaxVerbosity)
	}
}
