// Package lifecycle is the life of an APIKey's issued key, a concern of its controller, as
// cert-manager looks after certificates: each key ends spec.lifetime after its issue (the hash
// Secret records the end, and the API server refuses the key from then on), a delivered key is
// renewed spec.renewBefore ahead of its end (the old key stays valid until its own end), a key
// that cannot be renewed without a person is warned about (ExpiringSoon), a key nobody uses is
// noticed (Unused) and, with spec.revokeWhenUnusedFor, revoked in its hash Secret (never in the
// user's spec). Every decision here is made from the record switchboard wrote in the hash
// Secret, the spec, metadata.creationTimestamp and status.lastUsedAt, which only the API server
// may write and only forwards (an admission policy).
package lifecycle

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/issuing"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/renewalinterval"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/renewalwindow"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/objstatus"
)

// RenewalTime is when the current key should be renewed: renewBefore (or the percentage of its
// lifetime) ahead of its recorded end, but not before earliest (EarliestRenewal; zero: any
// time), at the first renewal window open from then on. Zero when it has no end or no renewal
// is asked for, when no window opens before its end, or when spec.expiresAt comes first (a new
// key would end then too). limited says earliest held it back: it may then fall after the
// key's end (a lifetime no longer than the platform's minimum interval), and the key is
// refused from its end until it is renewed.
func RenewalTime(key *switchboardv1alpha1.APIKey, issuedAt, notAfter, earliest time.Time) (at time.Time, limited bool) {
	lc := key.Spec.APIKeyLifecycle
	if notAfter.IsZero() || lc.RenewBefore == nil && lc.RenewBeforePercentage == nil {
		return time.Time{}, false
	}
	before := time.Duration(0)
	if lc.RenewBefore != nil {
		before = lc.RenewBefore.Duration
	} else {
		lifetime := notAfter.Sub(issuedAt)
		if issuedAt.IsZero() && lc.Lifetime != nil {
			lifetime = lc.Lifetime.Duration
		}
		before = renewalinterval.Percent(lifetime, *lc.RenewBeforePercentage)
	}
	due := notAfter.Add(-before)
	if due.Before(earliest) {
		due, limited = earliest, true
	}
	at, ok := renewalwindow.Next(lc.RenewalWindows, due)
	if !ok || !at.Before(notAfter) && !limited {
		return time.Time{}, false // no window before the end: ExpiringSoon says so
	}
	if exp := key.Spec.ExpiresAt; exp != nil && !at.Before(exp.Time) {
		return time.Time{}, false
	}
	return at, limited
}

// EarliestRenewal is the soonest the platform lets the key of rec be renewed into its delivery
// Secret: its issue plus the least interval between renewals for its lifetime. Zero for a key
// that is not delivered: it is never renewed without a person, and its renewal time only warns.
func EarliestRenewal(key *switchboardv1alpha1.APIKey, rec *keysecret.Issued, least renewalinterval.Minimum) time.Time {
	if !keystate.Delivered(key, rec) || rec.IssuedAt.IsZero() || key.Spec.Lifetime == nil {
		return time.Time{}
	}
	return rec.IssuedAt.Add(least.Of(key.Spec.Lifetime.Duration))
}

// LifeOf reads the life of s's current key from its record rec: its issue and end, its renewal,
// the warnings, its use; wake gets the next time one of them changes.
func LifeOf(s *keystate.State, rec *keysecret.Issued, p keystate.Params, wake *keystate.Requeue) keystate.Life {
	key, now := s.Key, s.Now
	l := keystate.Life{Known: true}
	l.LastActivity = key.CreationTimestamp.Time
	if u := key.Status.LastUsedAt; u != nil && u.After(l.LastActivity) {
		l.LastActivity = u.Time
	}
	if p.UnusedAfter > 0 {
		l.Unused = !now.Before(l.LastActivity.Add(p.UnusedAfter))
		if !l.Unused {
			wake.At(l.LastActivity.Add(p.UnusedAfter).Sub(now))
		}
	}
	if d := key.Spec.RevokeWhenUnusedFor; d != nil {
		wake.At(l.LastActivity.Add(d.Duration).Sub(now))
	}
	if rec != nil {
		l.IssuedAt, l.NotAfter = rec.IssuedAt, rec.NotAfter
	}
	l.Ended = !l.NotAfter.IsZero() && !now.Before(l.NotAfter)
	if !l.Ended && !l.NotAfter.IsZero() {
		wake.At(l.NotAfter.Sub(now))
	}
	l.End = EndOf(key, l.NotAfter)
	renewAt, limited := RenewalTime(key, l.IssuedAt, l.NotAfter, EarliestRenewal(key, rec, p.MinRenewal))
	l.RenewAt = renewAt
	l.Renews = !l.RenewAt.IsZero() && keystate.Delivered(key, rec)
	if l.Renews && limited {
		l.Limited = limitedMessage(key, p.MinRenewal, l.RenewAt, l.NotAfter)
	}
	switch {
	case l.Renews && !now.Before(l.RenewAt):
		return l // due: RenewalDue renews it
	case l.Renews:
		wake.At(l.RenewAt.Sub(now))
	case !l.RenewAt.IsZero() && !now.Before(l.RenewAt):
		l.Expiring = switchboardv1alpha1.ReasonRenewalNeedsHuman
		l.ExpiringMessage = fmt.Sprintf("key %s should have been renewed at %s, but it is only revealed, not delivered: rotate it (kubectl switchboard key rotate %s) before it ends at %s, or set spec.secretName so that it renews itself",
			key.Status.KeyHint, l.RenewAt.UTC().Format(time.RFC3339), key.Name, l.End.UTC().Format(time.RFC3339))
	case !l.RenewAt.IsZero():
		wake.At(l.RenewAt.Sub(now))
	}
	if l.Expiring == "" && !l.End.IsZero() && (!l.Renews || !l.RenewAt.Before(l.End)) {
		warnAt := l.End.Add(-p.ExpiryWarning)
		if !now.Before(warnAt) {
			l.Expiring = switchboardv1alpha1.ReasonEndsSoon
			l.ExpiringMessage = fmt.Sprintf("key %s ends at %s and nothing will replace it on its own", key.Status.KeyHint, l.End.UTC().Format(time.RFC3339))
			if l.Renews {
				l.ExpiringMessage = fmt.Sprintf("key %s ends at %s, before its renewal at %s (see RenewalLimited)", key.Status.KeyHint,
					l.End.UTC().Format(time.RFC3339), l.RenewAt.UTC().Format(time.RFC3339))
			}
		} else {
			wake.At(warnAt.Sub(now))
		}
	}
	return l
}

// EndOf is when the key whose record ends at notAfter ends: then or at spec.expiresAt,
// whichever comes first (zero: it does not end).
func EndOf(key *switchboardv1alpha1.APIKey, notAfter time.Time) time.Time {
	if exp := key.Spec.ExpiresAt; exp != nil && (notAfter.IsZero() || exp.Time.Before(notAfter)) {
		return exp.Time
	}
	return notAfter
}

// limitedMessage says, for the RenewalLimited condition, that key's lifecycle renews it more
// often than the platform allows, and when it renews instead.
func limitedMessage(key *switchboardv1alpha1.APIKey, least renewalinterval.Minimum, renewAt, notAfter time.Time) string {
	msg := fmt.Sprintf("%s (--min-renewal-interval): key %s renews at %s", least.Check(&key.Spec.APIKeyLifecycle), key.Status.KeyHint, renewAt.UTC().Format(time.RFC3339))
	if !renewAt.Before(notAfter) {
		msg += fmt.Sprintf(", after its end at %s: it is refused in between", notAfter.UTC().Format(time.RFC3339))
	}
	return msg + "; lengthen spec.lifetime or renew later in it (renewBefore, renewBeforePercentage)"
}

// Policies are the key's life: revokeWhenUnusedFor, lifetime, renewal.
var Policies = keystate.Chain{
	{Name: "UnusedTooLong", Decide: unusedTooLong},
	{Name: "LifetimeNotRecorded", Decide: lifetimeNotRecorded},
	{Name: "RenewalDue", Decide: renewalDue},
}

// Observe reads the current key's life, for a key not expired, and wakes the reconcile at
// spec.expiresAt.
func Observe(s *keystate.State, p keystate.Params, obs *keystate.Observation) {
	if obs.Expired {
		return
	}
	obs.Life = LifeOf(s, obs.Rec, p, &obs.Wake)
	if obs.Hash == keystate.HashFound && s.Key.Spec.ExpiresAt != nil {
		obs.Wake.At(s.Key.Spec.ExpiresAt.Sub(s.Now))
	}
}

// unusedTooLong: a key unused for spec.revokeWhenUnusedFor is revoked for good, in its hash
// Secret (without one the key is refused anyway).
func unusedTooLong(in keystate.Input) (keystate.Decision, bool) {
	s, l := in.S, &in.Obs.Life
	d := s.Key.Spec.RevokeWhenUnusedFor
	if !l.Known || d == nil || s.Hash == nil || s.Now.Before(l.LastActivity.Add(d.Duration)) {
		return keystate.Decision{}, false
	}
	return keystate.Decision{Do: revokeUnused{lastActivity: l.LastActivity}, Why: "unused for spec.revokeWhenUnusedFor"}, true
}

// lifetimeNotRecorded: a lifetime set, changed or removed after the key was issued applies to
// it too: the record's end is written again.
func lifetimeNotRecorded(in keystate.Input) (keystate.Decision, bool) {
	rec := in.Obs.Rec
	if !in.Obs.Life.Known || rec == nil {
		return keystate.Decision{}, false
	}
	want, ok := keystate.WantNotAfter(in.S.Key, rec.IssuedAt)
	if ok && want.Equal(rec.NotAfter) {
		return keystate.Decision{}, false
	}
	return keystate.Decision{Do: recordLife{}, Why: "the record's lifetime is not the spec's"}, true
}

// renewalDue: a delivered key at its renewal time is replaced in its delivery Secret; the old
// one stays valid until its own end.
func renewalDue(in keystate.Input) (keystate.Decision, bool) {
	s, l, rec := in.S, &in.Obs.Life, in.Obs.Rec
	if !l.Known || !l.Renews || s.Now.Before(l.RenewAt) {
		return keystate.Decision{}, false
	}
	return keystate.Decision{Do: issuing.Issue{Grace: max(l.NotAfter.Sub(s.Now), 0), Renewal: true}, Gen: rec.Generation + 1, Why: "renewal due"}, true
}

// recordLife writes the current key's issue time (now, when the record lacks one) and its end
// into its hash Secret: the server refuses the key from that end on.
type recordLife struct{}

func (recordLife) Do(ctx context.Context, env *keystate.Env, s *keystate.State, _ keystate.Decision) (keystate.Outcome, error) {
	key, hash := s.Key, s.Hash
	rec := *keystate.IssuedRecord(key, hash)
	if rec.IssuedAt.IsZero() {
		rec.IssuedAt = s.Now.Truncate(time.Second)
	}
	rec.NotAfter, _ = keystate.WantNotAfter(key, rec.IssuedAt)
	if err := env.Patch(ctx, hash, func() { keysecret.SetIssued(hash, rec) }); err != nil {
		return keystate.Outcome{}, fmt.Errorf("recording the lifetime of key generation %d in the hash Secret: %w", rec.Generation, err)
	}
	log.FromContext(ctx).Info("recorded the key's lifetime", "hint", key.Status.KeyHint, "notAfter", rec.NotAfter)
	// Decide the renewal and the warnings from the record as written.
	return keystate.Outcome{LifeChanged: true, After: keystate.StaleRetry}, nil
}

// revokeUnused revokes the key for good once it went unused for spec.revokeWhenUnusedFor. The
// operator decided it, so it records it where it alone writes: the key's hash Secret (the
// server refuses the key from then on), never the user's spec, which a GitOps tool would see
// drift. Nothing takes the record back; the next reconcile removes the reveal Secrets.
type revokeUnused struct {
	// lastActivity is the key's last use, or its creation.
	lastActivity time.Time
}

// Confirm: status.lastUsedAt in the cache may not have caught up yet; the APIKey as the API
// server has it decides, and the record it is written to.
func (revokeUnused) Confirm(ctx context.Context, env *keystate.Env, s *keystate.State) (bool, error) {
	return env.LiveKeyAndHash(ctx, s)
}

func (u revokeUnused) Do(ctx context.Context, env *keystate.Env, s *keystate.State, _ keystate.Decision) (keystate.Outcome, error) {
	key, hash := s.Key, s.Hash
	rec := *keystate.IssuedRecord(key, hash) // a hash Secret of an older switchboard gets its record too
	if err := env.Patch(ctx, hash, func() {
		keysecret.SetIssued(hash, rec)
		keysecret.SetRevoked(hash, s.Now, switchboardv1alpha1.ReasonUnusedRevoked)
	}); err != nil {
		return keystate.Outcome{}, fmt.Errorf("recording the revocation of the unused key in hash Secret %s/%s: %w", hash.Namespace, hash.Name, err)
	}
	revoked, _ := keysecret.IssuedOf(hash)
	log.FromContext(ctx).Info("revoked the key: unused for spec.revokeWhenUnusedFor", "hint", key.Status.KeyHint)
	env.Recorder.Eventf(key, nil, corev1.EventTypeWarning, switchboardv1alpha1.ReasonUnusedRevoked, "RevokeKey",
		"revoked key %s: unused since %s, longer than spec.revokeWhenUnusedFor", keystate.HintOf(key), u.lastActivity.UTC().Format(time.RFC3339))
	return keystate.Outcome{RevokedAt: revoked.RevokedAt}, nil
}

// SetConditions sets ExpiringSoon, Unused and RenewalLimited from the key's life l; a revoked
// or expired key (ended) has none of them. rotated: this reconcile issued a key that replaced
// another.
func SetConditions(key *switchboardv1alpha1.APIKey, ended bool, l *keystate.Life, rotated bool) {
	const expiring, unused, limited = switchboardv1alpha1.ConditionExpiringSoon, switchboardv1alpha1.ConditionUnused, switchboardv1alpha1.ConditionRenewalLimited
	if ended {
		meta.RemoveStatusCondition(&key.Status.Conditions, expiring)
		meta.RemoveStatusCondition(&key.Status.Conditions, unused)
		meta.RemoveStatusCondition(&key.Status.Conditions, limited)
		return
	}
	if !l.Known {
		return
	}
	set := func(condType string, status metav1.ConditionStatus, reason, message string) {
		objstatus.SetCondition(&key.Status.Conditions, key.Generation, condType, status, reason, message)
	}
	if l.Limited != "" {
		set(limited, metav1.ConditionTrue, switchboardv1alpha1.ReasonRenewsTooOften, l.Limited)
	} else {
		meta.RemoveStatusCondition(&key.Status.Conditions, limited)
	}
	switch {
	case l.Renewal || rotated:
		set(expiring, metav1.ConditionFalse, switchboardv1alpha1.ReasonRenewed, fmt.Sprintf("key %s replaced the previous one", key.Status.KeyHint))
	case l.Expiring != "":
		set(expiring, metav1.ConditionTrue, l.Expiring, l.ExpiringMessage)
	default:
		msg := "the key does not end on its own"
		switch {
		case key.Status.RenewalTime != nil:
			msg = fmt.Sprintf("key %s renews itself at %s", key.Status.KeyHint, key.Status.RenewalTime.UTC().Format(time.RFC3339))
		case key.Status.KeyNotAfter != nil:
			msg = fmt.Sprintf("key %s ends at %s", key.Status.KeyHint, key.Status.KeyNotAfter.UTC().Format(time.RFC3339))
		}
		set(expiring, metav1.ConditionFalse, switchboardv1alpha1.ReasonNotEndingSoon, msg)
	}
	since := l.LastActivity.UTC().Format(time.RFC3339)
	if l.Unused {
		set(unused, metav1.ConditionTrue, switchboardv1alpha1.ReasonUnused, fmt.Sprintf("the key has not been used since %s (last use, or creation)", since))
	} else {
		set(unused, metav1.ConditionFalse, switchboardv1alpha1.ReasonUsed, fmt.Sprintf("last used, or created, at %s", since))
	}
}

// Mirror shows the current key's life as the hash Secret records it (rec) in the status: its
// issue, its end (or spec.expiresAt, if sooner) and its automatic renewal, no sooner than least
// allows.
func Mirror(key *switchboardv1alpha1.APIKey, rec *keysecret.Issued, least renewalinterval.Minimum) {
	key.Status.KeyIssuedAt, key.Status.KeyNotAfter, key.Status.RenewalTime = nil, nil, nil
	if rec == nil || key.Spec.Revoked || rec.Revoked() {
		return
	}
	if !rec.IssuedAt.IsZero() {
		key.Status.KeyIssuedAt = keystate.TimePtr(rec.IssuedAt)
	}
	if end := EndOf(key, rec.NotAfter); !end.IsZero() {
		key.Status.KeyNotAfter = keystate.TimePtr(end)
	}
	if at, _ := RenewalTime(key, rec.IssuedAt, rec.NotAfter, EarliestRenewal(key, rec, least)); !at.IsZero() && keystate.Delivered(key, rec) {
		key.Status.RenewalTime = keystate.TimePtr(at)
	}
}
