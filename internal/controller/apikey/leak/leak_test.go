package leak

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/renewalinterval"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// TestNextReplacement: a leaked current key is replaced at once, unless the APIKey's last
// replacement of a leaked key was less than the interval before; then at the end of the
// interval (to the second, never sooner), which the next leak counts from.
func TestNextReplacement(t *testing.T) {
	now := time.Date(2026, 5, 6, 7, 8, 9, 500_000_000, time.UTC)
	at := now.Truncate(time.Second)
	tests := []struct {
		name             string
		last             time.Time
		interval         time.Duration
		wantAfter, wantL time.Time
	}{
		{"the first leak", time.Time{}, 5 * time.Minute, time.Time{}, at},
		{"the last replacement long ago", at.Add(-time.Hour), 5 * time.Minute, time.Time{}, at},
		{"exactly the interval ago", at.Add(-5 * time.Minute), 5 * time.Minute, time.Time{}, at},
		{"a minute ago", at.Add(-time.Minute), 5 * time.Minute, at.Add(4 * time.Minute), at.Add(4 * time.Minute)},
		{"a replacement still held back", at.Add(2 * time.Minute), 5 * time.Minute, at.Add(7 * time.Minute), at.Add(7 * time.Minute)},
		{"an interval of a fraction of a second is rounded up", at.Add(-time.Second), 1500 * time.Millisecond, at.Add(time.Second), at.Add(time.Second)},
		{"no minimum interval", at.Add(-time.Second), 0, time.Time{}, at},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			after, last := nextReplacement(keysecret.Leak{LastReplacement: tt.last}, now, tt.interval)
			if !after.Equal(tt.wantAfter) || !last.Equal(tt.wantL) {
				t.Fatalf("nextReplacement = %v, %v; want %v, %v", after, last, tt.wantAfter, tt.wantL)
			}
		})
	}
}

// TestLeakReplacementInterval: the renewal minimum for the APIKey's lifetime; its floor for a
// key without one.
func TestLeakReplacementInterval(t *testing.T) {
	p := keystate.Params{MinRenewal: renewalinterval.Default}
	key := &switchboardv1alpha1.APIKey{}
	if got := leakReplacementInterval(key, p); got != 5*time.Minute {
		t.Fatalf("without a lifetime: %s, want the floor, 5m", got)
	}
	key.Spec.Lifetime = &metav1.Duration{Duration: 90 * 24 * time.Hour}
	if got := leakReplacementInterval(key, p); got != 9*24*time.Hour {
		t.Fatalf("a 90-day lifetime: %s, want 10%% of it", got)
	}
}

// TestReportFate: a report whose hash no hash Secret knows goes leakReportSettle after its
// creation; one whose key is refused goes after the retention (none: kept); one whose key is
// found and not refused yet is kept, whatever its age.
func TestReportFate(t *testing.T) {
	created := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	const retention = 720 * time.Hour
	tests := []struct {
		name         string
		now          time.Time
		known, acted bool
		retention    time.Duration
		want         string
		wantWait     time.Duration
	}{
		{"gone, just created", created.Add(time.Minute), false, false, retention, "", leakReportSettle - time.Minute},
		{"gone, settled", created.Add(leakReportSettle), false, false, retention, reportGone, 0},
		{"gone, no retention", created.Add(leakReportSettle), false, false, 0, reportGone, 0},
		{"refused, young", created.Add(time.Hour), true, true, retention, "", retention - time.Hour},
		{"refused, at the retention", created.Add(retention), true, true, retention, reportRetention, 0},
		{"refused, kept for good", created.Add(10 * retention), true, true, 0, "", 0},
		{"found, not refused yet, past the retention", created.Add(2 * retention), true, false, retention, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			why, wait := reportFate(created, tt.now, tt.known, tt.acted, tt.retention)
			if why != tt.want || wait != tt.wantWait {
				t.Fatalf("reportFate = %q, %s; want %q, %s", why, wait, tt.want, tt.wantWait)
			}
		})
	}
}
