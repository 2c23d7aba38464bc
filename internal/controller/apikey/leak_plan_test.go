package apikey

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/renewalinterval"
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
	p := planParams{minRenewal: renewalinterval.Default}
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

// TestLeakFindingHeld: a refused current key whose replacement is held says so, with when, in
// Leaked (ReplacementHeld) and Ready; once replaced, Replaced. What the report said comes from
// the record, so a deleted report changes nothing.
func TestLeakFindingHeld(t *testing.T) {
	s := deliveredPolicyState(nil)
	until := planNow.Add(3 * time.Minute)
	keysecret.SetLeaked(s.hash, keysecret.Leak{Hash: string(s.hash.Data[keysecret.DataHash]), Generation: 2, At: planNow,
		ReplaceAfter: until, Hint: "sb_live_abc…xyz", Source: switchboardv1alpha1.LeakSourceGitHubPartner, URL: "https://example.com/leak"})
	f := leakFindingOf(s)
	if f == nil || !f.heldUntil.Equal(until) || f.replaced {
		t.Fatalf("leakFindingOf = %+v", f)
	}
	setKeyConditions(s.key, &keyFindings{leak: f, hash: hashFound}, "sys")
	leaked := controller.ConditionReason(s.key.Status.Conditions, switchboardv1alpha1.ConditionLeaked)
	ready := controller.ConditionReason(s.key.Status.Conditions, switchboardv1alpha1.ConditionReady)
	if leaked != switchboardv1alpha1.ReasonLeakReplacementHeld || ready != switchboardv1alpha1.ReasonLeaked {
		t.Fatalf("Leaked %s, Ready %s", leaked, ready)
	}
	stamp := until.UTC().Format(time.RFC3339)
	for _, c := range s.key.Status.Conditions {
		if (c.Type == switchboardv1alpha1.ConditionLeaked || c.Type == switchboardv1alpha1.ConditionReady) && !strings.Contains(c.Message, stamp) {
			t.Errorf("%s says %q, not when the replacement comes (%s)", c.Type, c.Message, stamp)
		}
	}
	if msg := f.message(s.key); !strings.Contains(msg, "sb_live_abc…xyz") || !strings.Contains(msg, "https://example.com/leak") || !strings.Contains(msg, "GitHubPartner") {
		t.Errorf("the message %q does not say what the record keeps of the report", msg)
	}

	s.now = until
	if f := leakFindingOf(s); !f.heldUntil.IsZero() {
		t.Fatalf("held at its end: %+v", f)
	}
}

// TestPlanHeldLeakReplacement: while a leaked key's replacement is held, nothing is issued on
// its account, and the wake-up is its end; a rotation asked by hand meanwhile is carried out
// (the chain goes on past Leaked); at its end the replacement is issued.
func TestPlanHeldLeakReplacement(t *testing.T) {
	p := planParams{revealTTL: planTTL, expiryWarning: 7 * 24 * time.Hour, unusedAfter: 90 * 24 * time.Hour, minRenewal: renewalinterval.Default}
	held := func(now time.Time, f func(s *keyState)) *keyState {
		s := deliveredPolicyState(func(s *keyState) {
			keysecret.SetLeaked(s.hash, keysecret.Leak{Hash: string(s.hash.Data[keysecret.DataHash]), Generation: 2, At: planNow,
				ReplaceAfter: planNow.Add(3 * time.Minute), LastReplacement: planNow.Add(3 * time.Minute)})
			s.now = now
		})
		if f != nil {
			f(s)
		}
		return s
	}
	obs, d := plan(held(planNow, nil), p)
	if d.policy == "Leaked" || d.policy == "KeyToIssue" || obs.wake.after != 3*time.Minute {
		t.Fatalf("held: policy %q (%s), wake after %s; want no issue, a wake-up in 3m", d.policy, d.why, obs.wake.after)
	}
	_, d = plan(held(planNow, func(s *keyState) { s.key.Spec.Rotation.RequestedAt = "by hand" }), p)
	if d.policy != "KeyToIssue" {
		t.Fatalf("a rotation asked while held: policy %q (%s), want KeyToIssue", d.policy, d.why)
	}
	_, d = plan(held(planNow.Add(3*time.Minute), nil), p)
	if a, ok := d.do.(refuseLeaked); d.policy != "Leaked" || !ok || !a.leak.replace || d.gen != 3 {
		t.Fatalf("at the hold's end: policy %q (%+v), want Leaked replacing with generation 3", d.policy, d)
	}
}
