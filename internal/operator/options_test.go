package operator

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

func TestOptionsWithDefaults(t *testing.T) {
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
					o.Clock == nil || o.Logger.GetSink() == nil {
					t.Fatalf("defaults not applied: %+v", o)
				}
			},
		},
		{
			name: "explicit values kept",
			in:   Options{SystemNamespace: "sys", KeyPrefix: "acme", RevealTTL: time.Minute, QPS: 7, Burst: 9, MetricsBindAddress: ":1"},
			check: func(t *testing.T, o Options) {
				if o.SystemNamespace != "sys" || o.KeyPrefix != "acme" || o.RevealTTL != time.Minute || o.QPS != 7 || o.Burst != 9 ||
					o.LeaderElectionNamespace != "sys" || o.MetricsBindAddress != ":1" {
					t.Fatalf("explicit values changed: %+v", o)
				}
			},
		},
		{name: "bad prefix", in: Options{KeyPrefix: "Bad_Prefix"}, wantErr: "key prefix"},
		{name: "negative TTL", in: Options{RevealTTL: -time.Second}, wantErr: "reveal TTL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.withDefaults()
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

func TestCapVerbosity(t *testing.T) {
	tests := []struct {
		level int
		want  bool
	}{
		{0, true},
		{MaxLogVerbosity, true},
		{MaxLogVerbosity + 1, false},
		{8, false}, // client-go's request and response bodies
	}
	for _, tt := range tests {
		var lines []string
		logger := capVerbosity(funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 10}))
		logger.WithName("n").WithValues("k", "v").V(tt.level).Info("message")
		if got := len(lines) == 1; got != tt.want {
			t.Errorf("V(%d): logged=%t, want %t", tt.level, got, tt.want)
		}
		if enabled := logger.V(tt.level).Enabled(); enabled != tt.want {
			t.Errorf("V(%d).Enabled()=%t, want %t", tt.level, enabled, tt.want)
		}
	}
}
