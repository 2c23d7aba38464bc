package apikey

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/renewalinterval"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// TestPlanLife: every transition of a key's life, decided from a keystate.State built by hand at an
// injected time: the record of its lifetime, renewal ahead of its end into the delivery Secret
// (the old key valid until its own end), the warning when nothing will renew it, unused keys and
// their revocation, and when the reconciler wakes for each.
func TestPlanLife(t *testing.T) {
	p := keystate.Params{RevealTTL: planTTL, ExpiryWarning: 7 * 24 * time.Hour, UnusedAfter: 90 * 24 * time.Hour, MinRenewal: renewalinterval.Default}
	day := 24 * time.Hour
	issued := planNow.Add(-20 * day)
	dur := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	// delivered is generation 2 delivered into app-key, issued 20 days ago, with a 30-day
	// lifetime renewed 7 days ahead, created 25 days ago and used an hour ago.
	delivered := func(f func(k *switchboardv1alpha1.APIKey, rec *keysecret.Issued, s *keystate.State)) *keystate.State {
		key := planKeyObj(2, false)
		key.Spec.SecretName = "app-key"
		key.Spec.Lifetime, key.Spec.RenewBefore = dur(30*day), dur(7*day)
		key.CreationTimestamp = metav1.NewTime(planNow.Add(-25 * day))
		key.Status.LastUsedAt = ptr.To(metav1.NewTime(planNow.Add(-time.Hour)))
		rec := keysecret.Issued{Hint: hintOfGen(2), RotationHandled: rotationOfGen(2), Delivery: "app-key", IssuedAt: issued, NotAfter: issued.Add(30 * day)}
		s := &keystate.State{Key: key, Now: planNow}
		if f != nil {
			f(key, &rec, s)
		}
		s.Hash = planHash(key, 2, false)
		keysecret.SetIssued(s.Hash, rec)
		s.Delivery = keysecret.NewDelivery(key, 2, "k2")
		return s
	}
	revealed := func(k *switchboardv1alpha1.APIKey, rec *keysecret.Issued, _ *keystate.State) {
		k.Spec.SecretName, rec.Delivery = "", ""
	}
	tests := []struct {
		name  string
		s     *keystate.State
		do    string
		gen   int64
		grace time.Duration
		after time.Duration
		check func(t *testing.T, l keystate.Life)
	}{
		{name: "within its life: wake at the renewal time", s: delivered(nil), after: 3 * day,
			check: func(t *testing.T, l keystate.Life) {
				if !l.RenewAt.Equal(issued.Add(23*day)) || l.Expiring != "" || l.Unused {
					t.Errorf("renewAt %s, expiring %q, unused %v", l.RenewAt, l.Expiring, l.Unused)
				}
			}},
		{name: "at the renewal time: a new key into the delivery Secret, the old one valid until its end",
			s: delivered(func(_ *switchboardv1alpha1.APIKey, _ *keysecret.Issued, s *keystate.State) {
				s.Now = issued.Add(23 * day)
			}),
			do: "Issue", gen: 3, grace: 7 * day,
			check: func(t *testing.T, l keystate.Life) {
				if !l.Renewal {
					t.Error("the issue is not marked a renewal")
				}
			}},
		{name: "a percentage: 10% of 30 days is 3 days ahead",
			s: delivered(func(k *switchboardv1alpha1.APIKey, _ *keysecret.Issued, s *keystate.State) {
				k.Spec.RenewBefore, k.Spec.RenewBeforePercentage = nil, ptr.To[int32](10)
				s.Now = issued.Add(27 * day)
			}),
			do: "Issue", gen: 3, grace: 3 * day},
		{name: "revealed only: at the renewal time it warns instead",
			s: delivered(func(k *switchboardv1alpha1.APIKey, rec *keysecret.Issued, s *keystate.State) {
				revealed(k, rec, s)
				s.Now = issued.Add(24 * day)
			}),
			after: time.Hour * 24 * 6, // its end, 6 days later
			check: func(t *testing.T, l keystate.Life) {
				if l.Expiring != switchboardv1alpha1.ReasonRenewalNeedsHuman {
					t.Errorf("expiring %q, want %s", l.Expiring, switchboardv1alpha1.ReasonRenewalNeedsHuman)
				}
			}},
		// The platform's minimum interval between renewals (the larger of 5m and 10% of the
		// lifetime): a lifecycle that asks for more renews at that interval instead (issue 29).
		{name: "renewed at 99% of 30 days: held back to 3 days after the issue, woken then",
			s: delivered(func(k *switchboardv1alpha1.APIKey, _ *keysecret.Issued, s *keystate.State) {
				k.Spec.RenewBefore, k.Spec.RenewBeforePercentage = nil, ptr.To[int32](99)
				s.Now = issued.Add(day)
			}),
			after: 2 * day,
			check: func(t *testing.T, l keystate.Life) {
				if !l.RenewAt.Equal(issued.Add(3*day)) || !strings.Contains(l.Limited, "renews the key every 7h12m0s; this platform renews a key at most every 72h0m0s") {
					t.Errorf("renewAt %s, limited %q", l.RenewAt, l.Limited)
				}
			}},
		{name: "renewed at 99% of 30 days: renewed 3 days after the issue",
			s: delivered(func(k *switchboardv1alpha1.APIKey, _ *keysecret.Issued, s *keystate.State) {
				k.Spec.RenewBefore, k.Spec.RenewBeforePercentage = nil, ptr.To[int32](99)
				s.Now = issued.Add(3 * day)
			}),
			do: "Issue", gen: 3, grace: 27 * day},
		{name: "a 2m lifetime renewed at 99%: ended, renewed 5m after the issue",
			s: delivered(func(k *switchboardv1alpha1.APIKey, rec *keysecret.Issued, s *keystate.State) {
				k.Spec.Lifetime, k.Spec.RenewBefore, k.Spec.RenewBeforePercentage = dur(2*time.Minute), nil, ptr.To[int32](99)
				rec.NotAfter = issued.Add(2 * time.Minute)
				s.Now = issued.Add(3 * time.Minute)
			}),
			after: 2 * time.Minute,
			check: func(t *testing.T, l keystate.Life) {
				if !l.Ended || !l.RenewAt.Equal(issued.Add(5*time.Minute)) || !strings.Contains(l.Limited, "after its end") ||
					l.Expiring != switchboardv1alpha1.ReasonEndsSoon || !strings.Contains(l.ExpiringMessage, "before its renewal") {
					t.Errorf("ended %v, renewAt %s, limited %q, expiring %q (%s)", l.Ended, l.RenewAt, l.Limited, l.Expiring, l.ExpiringMessage)
				}
			}},
		{name: "a 2m lifetime renewed at 99%: renewed after its end, with no grace",
			s: delivered(func(k *switchboardv1alpha1.APIKey, rec *keysecret.Issued, s *keystate.State) {
				k.Spec.Lifetime, k.Spec.RenewBefore, k.Spec.RenewBeforePercentage = dur(2*time.Minute), nil, ptr.To[int32](99)
				rec.NotAfter = issued.Add(2 * time.Minute)
				s.Now = issued.Add(5 * time.Minute)
			}),
			do: "Issue", gen: 3, grace: 0},
		{name: "a revealed key is never renewed: its warning is not held back",
			s: delivered(func(k *switchboardv1alpha1.APIKey, rec *keysecret.Issued, s *keystate.State) {
				revealed(k, rec, s)
				k.Spec.RenewBefore, k.Spec.RenewBeforePercentage = nil, ptr.To[int32](99)
				s.Now = issued.Add(day)
			}),
			check: func(t *testing.T, l keystate.Life) {
				if l.Expiring != switchboardv1alpha1.ReasonRenewalNeedsHuman || l.Limited != "" {
					t.Errorf("expiring %q, limited %q", l.Expiring, l.Limited)
				}
			}},
		{name: "no renewal asked: warned 7 days before the end, woken then",
			s:     delivered(func(k *switchboardv1alpha1.APIKey, _ *keysecret.Issued, _ *keystate.State) { k.Spec.RenewBefore = nil }),
			after: 3 * day,
			check: func(t *testing.T, l keystate.Life) {
				if l.Expiring != "" {
					t.Errorf("warned 10 days ahead: %q", l.Expiring)
				}
			}},
		{name: "no renewal asked, 5 days before the end: EndsSoon",
			s: delivered(func(k *switchboardv1alpha1.APIKey, _ *keysecret.Issued, s *keystate.State) {
				k.Spec.RenewBefore = nil
				s.Now = issued.Add(25 * day)
			}),
			after: 5 * day,
			check: func(t *testing.T, l keystate.Life) {
				if l.Expiring != switchboardv1alpha1.ReasonEndsSoon {
					t.Errorf("expiring %q, want %s", l.Expiring, switchboardv1alpha1.ReasonEndsSoon)
				}
			}},
		{name: "spec.expiresAt before the renewal: no renewal, EndsSoon",
			s: delivered(func(k *switchboardv1alpha1.APIKey, _ *keysecret.Issued, _ *keystate.State) {
				k.Spec.ExpiresAt = ptr.To(metav1.NewTime(planNow.Add(2 * day)))
			}),
			after: 2 * day,
			check: func(t *testing.T, l keystate.Life) {
				if !l.RenewAt.IsZero() || l.Expiring != switchboardv1alpha1.ReasonEndsSoon {
					t.Errorf("renewAt %s, expiring %q", l.RenewAt, l.Expiring)
				}
			}},
		{name: "past its end without a renewal: ended",
			s: delivered(func(k *switchboardv1alpha1.APIKey, rec *keysecret.Issued, s *keystate.State) {
				revealed(k, rec, s)
				s.Now = issued.Add(31 * day)
			}),
			after: 79*day - time.Hour, // Unused: 90 days after the last use, an hour before planNow
			check: func(t *testing.T, l keystate.Life) {
				if !l.Ended {
					t.Error("not ended")
				}
			}},
		{name: "a lifetime set after the issue is recorded",
			s: delivered(func(_ *switchboardv1alpha1.APIKey, rec *keysecret.Issued, _ *keystate.State) {
				rec.NotAfter = time.Time{}
			}),
			do: "recordLife"},
		{name: "a lifetime removed is recorded",
			s: delivered(func(k *switchboardv1alpha1.APIKey, _ *keysecret.Issued, _ *keystate.State) {
				k.Spec.Lifetime, k.Spec.RenewBefore = nil, nil
			}),
			do: "recordLife"},
		{name: "a record without an issue time gets one",
			s: delivered(func(_ *switchboardv1alpha1.APIKey, rec *keysecret.Issued, _ *keystate.State) {
				rec.IssuedAt = time.Time{}
			}),
			do: "recordLife"},
		{name: "unused for 90 days since its last use",
			s: delivered(func(k *switchboardv1alpha1.APIKey, rec *keysecret.Issued, _ *keystate.State) {
				k.Spec.Lifetime, k.Spec.RenewBefore, rec.NotAfter = nil, nil, time.Time{}
				k.CreationTimestamp = metav1.NewTime(planNow.Add(-200 * day))
				k.Status.LastUsedAt = ptr.To(metav1.NewTime(planNow.Add(-91 * day)))
			}),
			check: func(t *testing.T, l keystate.Life) {
				if !l.Unused {
					t.Error("not unused")
				}
			}},
		{name: "never used, created 30 days ago: not unused yet, woken in 60 days",
			s: delivered(func(k *switchboardv1alpha1.APIKey, rec *keysecret.Issued, _ *keystate.State) {
				k.Spec.Lifetime, k.Spec.RenewBefore, rec.NotAfter = nil, nil, time.Time{}
				k.CreationTimestamp = metav1.NewTime(planNow.Add(-30 * day))
				k.Status.LastUsedAt = nil
			}),
			after: 60 * day},
		{name: "revokeWhenUnusedFor passed: revoke",
			s: delivered(func(k *switchboardv1alpha1.APIKey, _ *keysecret.Issued, _ *keystate.State) {
				k.Spec.RevokeWhenUnusedFor = dur(45 * day)
				k.CreationTimestamp = metav1.NewTime(planNow.Add(-100 * day))
				k.Status.LastUsedAt = ptr.To(metav1.NewTime(planNow.Add(-46 * day)))
			}),
			do: "revokeUnused"},
		{name: "a template not yet applied to the delivery Secret",
			s: func() *keystate.State {
				s := delivered(nil)
				s.Key.Spec.SecretTemplate = &switchboardv1alpha1.APIKeySecretTemplate{Annotations: map[string]string{"reloader.stakater.com/match": "true"}}
				return s
			}(),
			do: "applyTemplate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := planOf(tt.s, p)
			if !got.matches(planned{do: tt.do, gen: tt.gen, grace: tt.grace, after: tt.after, lostHint: got.lostHint, found: got.found}) {
				t.Fatalf("plan = %+v; want %s gen %d grace %s after %s", got, tt.do, tt.gen, tt.grace, tt.after)
			}
			if tt.check != nil {
				tt.check(t, got.found.Life)
			}
		})
	}
}
