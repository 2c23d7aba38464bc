package apikey

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/renewalinterval"
	"github.com/switchboard-dev/switchboard/internal/renewalwindow"
)

// The lifecycle of an issued key, as cert-manager looks after certificates: each key ends
// spec.lifetime after its issue (the hash Secret records the end, and the API server refuses
// the key from then on), a delivered key is renewed spec.renewBefore ahead of its end (the old
// key stays valid until its own end), a key that cannot be renewed without a person is warned
// about (ExpiringSoon), a key nobody uses is noticed (Unused) and, with
// spec.revokeWhenUnusedFor, revoked in its hash Secret (never in the user's spec). Every decision here is made from the record switchboard
// wrote in the hash Secret, the spec, metadata.creationTimestamp and status.lastUsedAt, which
// only the API server may write and only forwards (an admission policy).

// Defaults of the operator-wide lifecycle settings.
const (
	DefaultExpiryWarning = 7 * 24 * time.Hour
	DefaultUnusedAfter   = 90 * 24 * time.Hour
)

// life is what the observation says of the current key's life, for the policies, the status
// and the conditions.
type life struct {
	// known: the key is neither revoked nor expired, so the rest was read.
	known bool
	// issuedAt, notAfter: from the record (zero: not recorded, or no end); end is notAfter or
	// spec.expiresAt, whichever comes first.
	issuedAt, notAfter, end time.Time
	// renewAt is when the key is renewed (zero: it is not); renews says it renews itself,
	// into its delivery Secret (otherwise renewAt only warns).
	renewAt time.Time
	renews  bool
	// limited is the RenewalLimited message when the platform's minimum interval between
	// renewals held renewAt back ("" when it did not).
	limited string
	// expiring is the ExpiringSoon reason when it is True ("" when False), with its message.
	expiring, expiringMessage string
	// unused: no use for unusedAfter; lastActivity is the latest use, or the creation.
	unused       bool
	lastActivity time.Time
	// renewal: this reconcile's issue is an automatic renewal (set from the decision).
	renewal bool
	// ended: the current key's lifetime is over; the API server refuses it.
	ended bool
}

// wantNotAfter is the end the record should give the current key: issuedAt + spec.lifetime;
// zero without a lifetime. ok is false when the record has no issue time to count from.
func wantNotAfter(key *switchboardv1alpha1.APIKey, issuedAt time.Time) (t time.Time, ok bool) {
	if key.Spec.Lifetime == nil {
		return time.Time{}, true
	}
	if issuedAt.IsZero() {
		return time.Time{}, false
	}
	return issuedAt.Add(key.Spec.Lifetime.Duration).Truncate(time.Second), true
}

// renewalTime is when the current key should be renewed: renewBefore (or the percentage of its
// lifetime) ahead of its recorded end, but not before earliest (earliestRenewal; zero: any
// time), at the first renewal window open from then on. Zero when it has no end or no renewal
// is asked for, when no window opens before its end, or when spec.expiresAt comes first (a new
// key would end then too). limited says earliest held it back: it may then fall after the
// key's end (a lifetime no longer than the platform's minimum interval), and the key is
// refused from its end until it is renewed.
func renewalTime(key *switchboardv1alpha1.APIKey, issuedAt, notAfter, earliest time.Time) (at time.Time, limited bool) {
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

// earliestRenewal is the soonest the platform lets the key of rec be renewed into its delivery
// Secret: its issue plus the least interval between renewals for its lifetime. Zero for a key
// that is not delivered: it is never renewed without a person, and its renewal time only warns.
func earliestRenewal(key *switchboardv1alpha1.APIKey, rec *keysecret.Issued, least renewalinterval.Minimum) time.Time {
	if !delivered(key, rec) || rec.IssuedAt.IsZero() || key.Spec.Lifetime == nil {
		return time.Time{}
	}
	return rec.IssuedAt.Add(least.Of(key.Spec.Lifetime.Duration))
}

// delivered says the key of rec sits in the delivery Secret spec.secretName names, so that a
// new one can be written there without a person.
func delivered(key *switchboardv1alpha1.APIKey, rec *keysecret.Issued) bool {
	return key.Spec.SecretName != "" && rec != nil && rec.Delivery == key.Spec.SecretName
}

// lifeOf reads the life of s's current key from its record rec: its issue and end, its renewal,
// the warnings, its use; wake gets the next time one of them changes.
func lifeOf(s *keyState, rec *keysecret.Issued, p planParams, wake *requeue) life {
	key, now := s.key, s.now
	l := life{known: true}
	l.lastActivity = key.CreationTimestamp.Time
	if u := key.Status.LastUsedAt; u != nil && u.After(l.lastActivity) {
		l.lastActivity = u.Time
	}
	if p.unusedAfter > 0 {
		l.unused = !now.Before(l.lastActivity.Add(p.unusedAfter))
		if !l.unused {
			wake.at(l.lastActivity.Add(p.unusedAfter).Sub(now))
		}
	}
	if d := key.Spec.RevokeWhenUnusedFor; d != nil {
		wake.at(l.lastActivity.Add(d.Duration).Sub(now))
	}
	if rec != nil {
		l.issuedAt, l.notAfter = rec.IssuedAt, rec.NotAfter
	}
	l.ended = !l.notAfter.IsZero() && !now.Before(l.notAfter)
	if !l.ended && !l.notAfter.IsZero() {
		wake.at(l.notAfter.Sub(now))
	}
	l.end = l.notAfter
	if exp := key.Spec.ExpiresAt; exp != nil && (l.end.IsZero() || exp.Time.Before(l.end)) {
		l.end = exp.Time
	}
	renewAt, limited := renewalTime(key, l.issuedAt, l.notAfter, earliestRenewal(key, rec, p.minRenewal))
	l.renewAt = renewAt
	l.renews = !l.renewAt.IsZero() && delivered(key, rec)
	if l.renews && limited {
		l.limited = limitedMessage(key, p.minRenewal, l.renewAt, l.notAfter)
	}
	switch {
	case l.renews && !now.Before(l.renewAt):
		return l // due: RenewalDue renews it
	case l.renews:
		wake.at(l.renewAt.Sub(now))
	case !l.renewAt.IsZero() && !now.Before(l.renewAt):
		l.expiring = switchboardv1alpha1.ReasonRenewalNeedsHuman
		l.expiringMessage = fmt.Sprintf("key %s should have been renewed at %s, but it is only revealed, not delivered: rotate it (kubectl switchboard key rotate %s) before it ends at %s, or set spec.secretName so that it renews itself",
			key.Status.KeyHint, l.renewAt.UTC().Format(time.RFC3339), key.Name, l.end.UTC().Format(time.RFC3339))
	case !l.renewAt.IsZero():
		wake.at(l.renewAt.Sub(now))
	}
	if l.expiring == "" && !l.end.IsZero() && (!l.renews || !l.renewAt.Before(l.end)) {
		warnAt := l.end.Add(-p.expiryWarning)
		if !now.Before(warnAt) {
			l.expiring = switchboardv1alpha1.ReasonEndsSoon
			l.expiringMessage = fmt.Sprintf("key %s ends at %s and nothing will replace it on its own", key.Status.KeyHint, l.end.UTC().Format(time.RFC3339))
			if l.renews {
				l.expiringMessage = fmt.Sprintf("key %s ends at %s, before its renewal at %s (see RenewalLimited)", key.Status.KeyHint,
					l.end.UTC().Format(time.RFC3339), l.renewAt.UTC().Format(time.RFC3339))
			}
		} else {
			wake.at(warnAt.Sub(now))
		}
	}
	return l
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

// recordLife writes the current key's issue time (now, when the record lacks one) and its end
// into its hash Secret: the server refuses the key from that end on.
type recordLife struct{}

func (recordLife) do(ctx context.Context, r *Reconciler, s *keyState, _ decision) (outcome, error) {
	key, hash := s.key, s.hash
	rec := *issuedRecord(key, hash)
	if rec.IssuedAt.IsZero() {
		rec.IssuedAt = s.now.Truncate(time.Second)
	}
	rec.NotAfter, _ = wantNotAfter(key, rec.IssuedAt)
	before := hash.DeepCopy()
	keysecret.SetIssued(hash, rec)
	if err := r.Client.Patch(ctx, hash, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return outcome{}, fmt.Errorf("recording the lifetime of key generation %d in the hash Secret: %w", rec.Generation, err)
	}
	log.FromContext(ctx).Info("recorded the key's lifetime", "hint", key.Status.KeyHint, "notAfter", rec.NotAfter)
	// Decide the renewal and the warnings from the record as written.
	return outcome{lifeChanged: true, after: staleRetry}, nil
}

// revokeUnused revokes the key for good once it went unused for spec.revokeWhenUnusedFor. The
// operator decided it, so it records it where it alone writes: the key's hash Secret (the
// server refuses the key from then on), never the user's spec, which a GitOps tool would see
// drift. Nothing takes the record back; the next reconcile removes the reveal Secrets.
type revokeUnused struct {
	// lastActivity is the key's last use, or its creation.
	lastActivity time.Time
}

func (u revokeUnused) do(ctx context.Context, r *Reconciler, s *keyState, _ decision) (outcome, error) {
	key, hash := s.key, s.hash
	rec := *issuedRecord(key, hash) // a hash Secret of an older switchboard gets its record too
	before := hash.DeepCopy()
	keysecret.SetIssued(hash, rec)
	keysecret.SetRevoked(hash, s.now, switchboardv1alpha1.ReasonUnusedRevoked)
	if err := r.Client.Patch(ctx, hash, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return outcome{}, fmt.Errorf("recording the revocation of the unused key in hash Secret %s/%s: %w", hash.Namespace, hash.Name, err)
	}
	revoked, _ := keysecret.IssuedOf(hash)
	log.FromContext(ctx).Info("revoked the key: unused for spec.revokeWhenUnusedFor", "hint", key.Status.KeyHint)
	r.Recorder.Eventf(key, nil, corev1.EventTypeWarning, switchboardv1alpha1.ReasonUnusedRevoked, "RevokeKey",
		"revoked key %s: unused since %s, longer than spec.revokeWhenUnusedFor", hintOf(key), u.lastActivity.UTC().Format(time.RFC3339))
	return outcome{revokedAt: revoked.RevokedAt}, nil
}
