// Package issuing is the issue of an APIKey's keys, a concern of its controller: the record of
// issuance in the hash Secret decides a first key, a rotation, or a status to put back; the key
// is written to a one-time reveal Secret or delivered into spec.secretName (redelivered when that
// Secret loses it), its hash and record to the hash Secret; the record is kept complete and the
// unclaimed reveal ends at its deadline.
package issuing

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/objstatus"
)

// RedeliveryGrace is how long a delivered key stays valid after its delivery Secret was
// deleted and a new key was issued into the Secret again.
const RedeliveryGrace = time.Hour

// keyAction is what the record of issuance asks of a reconcile.
type keyAction int

const (
	// keepKey: the issued key stands and the status says so.
	keepKey keyAction = iota
	// issueKey: issue the next generation, the first key or a rotation not yet carried out.
	issueKey
	// publishKey: the status does not say what the hash Secret records; put it back.
	publishKey
)

// planKey decides from rec, the record of the hash Secret (nil when there is none), what key
// generation the APIKey should have and what to do about it. Without a hash Secret no key of
// this APIKey authenticates, so a forged status cannot end one: the status is all there is to
// go by (a first key, or the rotation that replaces a hash deleted by hand).
func planKey(key *switchboardv1alpha1.APIKey, rec *keysecret.Issued) (keyAction, int64) {
	rotating := key.Spec.Rotation != nil
	requested := ""
	if rotating {
		requested = key.Spec.Rotation.RequestedAt
	}
	if rec == nil {
		gen := max(key.Status.KeyGeneration, 0)
		if gen == 0 || rotating && requested != key.Status.LastHandledRotationAt {
			return issueKey, gen + 1
		}
		return keepKey, gen
	}
	if rotating && requested != rec.RotationHandled {
		return issueKey, rec.Generation + 1
	}
	if key.Status.KeyGeneration != rec.Generation || key.Status.KeyHint != rec.Hint ||
		key.Status.LastHandledRotationAt != rec.RotationHandled {
		return publishKey, rec.Generation
	}
	return keepKey, rec.Generation
}

// recordIncomplete says hash, of the status's generation, lacks what the record of issuance
// keeps: written by an older switchboard (no hint), or before deadlines were recorded while a
// reveal is pending, or before deliveries were recorded for a delivered key.
func recordIncomplete(hash *corev1.Secret, key *switchboardv1alpha1.APIKey) bool {
	if keysecret.Generation(hash) != key.Status.KeyGeneration {
		return false
	}
	rec, ok := keysecret.IssuedOf(hash)
	switch {
	case !ok:
		return key.Status.KeyHint != ""
	case rec.RevealExpiresAt.IsZero() && key.Status.RevealSecretName != "":
		return true
	default:
		return rec.Delivery == "" && rec.RevealExpiresAt.IsZero() && keystate.LegacyRecord(key, rec.Generation).Delivery != ""
	}
}

// RevealDeadline is when the unclaimed reveal of the recorded key generation is deleted: the
// deadline its hash Secret records (rec), never the status's, which whoever may patch
// apikeys/status could move. A hash Secret written before switchboard recorded deadlines has
// none: then the status's deadline counts, but never later than revealTTL from now, and
// completeRecord writes it down so that it stops moving.
func RevealDeadline(key *switchboardv1alpha1.APIKey, rec *keysecret.Issued, now time.Time, revealTTL time.Duration) time.Time {
	if rec != nil && !rec.RevealExpiresAt.IsZero() {
		return rec.RevealExpiresAt
	}
	limit := keystate.TimePtr(now.Add(revealTTL)).Time
	if d := key.Status.RevealExpiresAt; d != nil && d.Time.Before(limit) {
		return d.Time
	}
	return limit
}

// gracePeriod is how long the key a rotation replaces stays valid: spec.rotation.gracePeriod,
// never past that key's own end.
func gracePeriod(key *switchboardv1alpha1.APIKey, rec *keysecret.Issued, now time.Time) time.Duration {
	if key.Spec.Rotation == nil {
		return 0
	}
	grace := key.Spec.Rotation.GracePeriod.Duration
	if rec != nil && !rec.NotAfter.IsZero() {
		grace = min(grace, max(rec.NotAfter.Sub(now), 0))
	}
	return grace
}

// Observe reads what became of the one-time reveal the status publishes, and when it ends.
func Observe(s *keystate.State, p keystate.Params, obs *keystate.Observation) {
	if s.Key.Status.RevealSecretName == "" {
		return
	}
	obs.RevealDeadline = RevealDeadline(s.Key, obs.Rec, s.Now, p.RevealTTL)
	obs.Reveal = revealOf(s, obs.RevealDeadline)
	if obs.Reveal == "" && s.Now.Before(obs.RevealDeadline) {
		obs.Wake.At(obs.RevealDeadline.Sub(s.Now))
	}
}

// revealOf says what became of the published unclaimed reveal: "" while its Secret is there
// (or its absence is only the cache's), claimed when it went before deadline, expired after.
func revealOf(s *keystate.State, deadline time.Time) string {
	switch r := s.Reveal; {
	case r != nil && keysecret.IsOwnedBy(r, s.Key, keysecret.ComponentReveal), !s.Confirmed.Reveal:
		return ""
	case !s.Now.Before(deadline):
		// Gone (or someone else's under that name), and the deadline passed.
		return switchboardv1alpha1.ReasonRevealExpired
	default:
		// Gone before the deadline: someone claimed it.
		return switchboardv1alpha1.ReasonRevealClaimed
	}
}

// SetRevealedCondition sets Revealed from what became of the one-time reveal ("": it is left
// as it is). It is the only place that sets it.
func SetRevealedCondition(key *switchboardv1alpha1.APIKey, reveal string) {
	set := func(status metav1.ConditionStatus, message string) {
		objstatus.SetCondition(&key.Status.Conditions, key.Generation, switchboardv1alpha1.ConditionRevealed, status, reveal, message)
	}
	switch reveal {
	case switchboardv1alpha1.ReasonRevealPending:
		set(metav1.ConditionFalse, "claim key "+key.Status.KeyHint+" from Secret "+key.Status.RevealSecretName+" before "+
			key.Status.RevealExpiresAt.UTC().Format(time.RFC3339)+" (kubectl switchboard reveal "+key.Name+")")
	case switchboardv1alpha1.ReasonRevealClaimed:
		set(metav1.ConditionTrue, "key "+key.Status.KeyHint+" was claimed; it is not stored anywhere else")
	case switchboardv1alpha1.ReasonRevealExpired:
		set(metav1.ConditionFalse, "nobody claimed key "+key.Status.KeyHint+" in time and its reveal Secret was deleted; the key stays valid: rotate it to get one you can see")
	case switchboardv1alpha1.ReasonDelivered:
		set(metav1.ConditionTrue, "key "+key.Status.KeyHint+" is kept in Secret "+key.Spec.SecretName)
	case switchboardv1alpha1.ReasonRevoked:
		set(metav1.ConditionFalse, "key "+key.Status.KeyHint+" was revoked before anyone claimed it; its reveal Secret was deleted")
	}
}

// The issuing concern's policies come as three chains, each asked at its place in the
// controller's chain: the key (Policies) before the key's life is looked at, the upkeep of its
// record (RecordPolicies) after it, and of its reveal (RevealPolicies) last.
var (
	// Policies: the record of issuance (a first key, a rotation, a status to put back), and
	// delivery (spec.secretName holds the delivered key, with spec.secretTemplate).
	Policies = keystate.Chain{
		{Name: "StatusBehindRecord", Decide: statusBehindRecord},
		{Name: "KeyToIssue", Decide: keyToIssue},
		{Name: "ExpiredBeforeFirstKey", Decide: expiredBeforeFirstKey},
		{Name: "TemplateNotApplied", Decide: templateNotApplied},
		{Name: "DeliveryUnconfirmed", Decide: deliveryUnconfirmed},
		{Name: "DeliveryLost", Decide: deliveryLost},
	}
	// RecordPolicies: the hash Secret and its record.
	RecordPolicies = keystate.Chain{
		{Name: "HashUnconfirmed", Decide: hashUnconfirmed},
		{Name: "HashBehindStatus", Decide: hashBehindStatus},
		{Name: "RecordIncomplete", Decide: recordToComplete},
	}
	// RevealPolicies: the unclaimed reveal, old reveals.
	RevealPolicies = keystate.Chain{
		{Name: "RevealDeadlinePassed", Decide: revealDeadlinePassed},
		{Name: "RevealUnconfirmed", Decide: revealUnconfirmed},
		{Name: "OldReveals", Decide: oldReveals},
	}
)

// statusBehindRecord: the status does not say what the hash Secret records; put it back.
func statusBehindRecord(in keystate.Input) (keystate.Decision, bool) {
	action, gen := planKey(in.S.Key, in.Obs.Rec)
	if action != publishKey {
		return keystate.Decision{}, false
	}
	return keystate.Decision{Do: publish{}, Gen: gen, Why: "the status does not say what the hash Secret records"}, true
}

// keyToIssue: a first key, or a rotation the record has not carried out, for a key not expired.
func keyToIssue(in keystate.Input) (keystate.Decision, bool) {
	s := in.S
	action, gen := planKey(s.Key, in.Obs.Rec)
	if action != issueKey || in.Obs.Expired {
		return keystate.Decision{}, false
	}
	return keystate.Decision{Do: Issue{Grace: gracePeriod(s.Key, in.Obs.Rec, s.Now)}, Gen: gen, Why: "a first key or a rotation"}, true
}

// expiredBeforeFirstKey: an APIKey that expired before its first key never gets one.
func expiredBeforeFirstKey(in keystate.Input) (keystate.Decision, bool) {
	action, gen := planKey(in.S.Key, in.Obs.Rec)
	return keystate.Decision{Why: "expired before its first key"}, action == issueKey && gen == 1 && in.Obs.Expired
}

// deliveredAndOurs is the record of a delivered key whose delivery Secret is the APIKey's (false:
// the key is not delivered, someone else's Secret is there, or the key expired).
func deliveredAndOurs(in keystate.Input) (rec *keysecret.Issued, followed bool) {
	s, rec := in.S, in.Obs.Rec
	if in.Obs.Expired || s.Key.Spec.SecretName == "" || rec == nil || rec.Delivery == "" || in.Obs.Conflict != "" {
		return nil, false
	}
	return rec, true
}

// templateNotApplied: the delivery Secret holds the delivered key but not spec.secretTemplate's
// labels and annotations.
func templateNotApplied(in keystate.Input) (keystate.Decision, bool) {
	rec, ok := deliveredAndOurs(in)
	d := in.S.Delivery
	if !ok || d == nil || keysecret.Generation(d) != rec.Generation || keysecret.TemplateApplied(d, in.S.Key) {
		return keystate.Decision{}, false
	}
	return keystate.Decision{Do: applyTemplate{}, Why: "spec.secretTemplate not applied"}, true
}

// deliveryUnconfirmed: the delivery Secret is absent from the cache (which keeps only Secrets
// labelled as switchboard's), or of another generation there: the API server says which.
func deliveryUnconfirmed(in keystate.Input) (keystate.Decision, bool) {
	rec, ok := deliveredAndOurs(in)
	d := in.S.Delivery
	if !ok || d != nil && keysecret.Generation(d) == rec.Generation || in.S.Confirmed.Delivery {
		return keystate.Decision{}, false
	}
	return keystate.Decision{Do: checkDelivery{}, Why: "the delivery Secret does not hold the key in the cache"}, true
}

// deliveryLost: the Secret spec.secretName names no longer holds the delivered key (deleted, or
// moved to a free name): a new key is issued into it, as cert-manager does with a deleted
// certificate Secret, and pods that still hold the old one keep working for RedeliveryGrace.
func deliveryLost(in keystate.Input) (keystate.Decision, bool) {
	rec, ok := deliveredAndOurs(in)
	d := in.S.Delivery
	if !ok || d != nil && keysecret.Generation(d) == rec.Generation {
		return keystate.Decision{}, false
	}
	return keystate.Decision{Do: Issue{Grace: RedeliveryGrace, LostHint: rec.Hint}, Gen: rec.Generation + 1, Why: "the delivery Secret lost the key"}, true
}

// hashUnconfirmed: no hash Secret in the cache for an issued key, or one behind the status: the
// cache may not have caught up with the last issue, the API server says.
func hashUnconfirmed(in keystate.Input) (keystate.Decision, bool) {
	s := in.S
	if s.Confirmed.Hash || s.Hash != nil && keysecret.Generation(s.Hash) >= s.Key.Status.KeyGeneration {
		return keystate.Decision{}, false
	}
	return keystate.Decision{Do: checkHash{}, Why: "the cache shows no hash Secret of the status's generation"}, true
}

// hashBehindStatus: the API server's hash Secret hashes an older generation than the status
// says: a state the operator cannot repair (the status was not published from it).
func hashBehindStatus(in keystate.Input) (keystate.Decision, bool) {
	s := in.S
	if s.Hash == nil || keysecret.Generation(s.Hash) >= s.Key.Status.KeyGeneration {
		return keystate.Decision{}, false
	}
	return keystate.Decision{Problem: fmt.Sprintf("hash Secret %s hashes key generation %d, the status says %d", s.Hash.Name, keysecret.Generation(s.Hash), s.Key.Status.KeyGeneration)}, true
}

// recordToComplete: a hash Secret of an older switchboard gets what the record of issuance
// keeps written down, once.
func recordToComplete(in keystate.Input) (keystate.Decision, bool) {
	if in.Obs.Hash != keystate.HashFound || !recordIncomplete(in.S.Hash, in.S.Key) {
		return keystate.Decision{}, false
	}
	return keystate.Decision{Do: completeRecord{}, Why: "the hash Secret's record is incomplete"}, true
}

// revealDeadlinePassed: the unclaimed reveal Secret whose recorded deadline passed is deleted.
func revealDeadlinePassed(in keystate.Input) (keystate.Decision, bool) {
	s := in.S
	if s.Key.Status.RevealSecretName == "" || s.Reveal == nil || !keysecret.IsOwnedBy(s.Reveal, s.Key, keysecret.ComponentReveal) ||
		s.Now.Before(in.Obs.RevealDeadline) {
		return keystate.Decision{}, false
	}
	return keystate.Decision{Do: expireReveal{}, Why: "nobody claimed the key before its reveal's deadline"}, true
}

// revealUnconfirmed: no reveal Secret in the cache where the status publishes one: claimed, or
// the cache is behind; the API server says.
func revealUnconfirmed(in keystate.Input) (keystate.Decision, bool) {
	s := in.S
	if s.Key.Status.RevealSecretName == "" || s.Confirmed.Reveal || s.Reveal != nil && keysecret.IsOwnedBy(s.Reveal, s.Key, keysecret.ComponentReveal) {
		return keystate.Decision{}, false
	}
	return keystate.Decision{Do: checkReveal{}, Why: "the published reveal Secret is not in the cache"}, true
}

// oldReveals: reveal Secrets of generations the status no longer publishes are deleted.
func oldReveals(in keystate.Input) (keystate.Decision, bool) {
	for _, r := range in.S.Reveals {
		if keysecret.Generation(r) < in.S.Key.Status.KeyGeneration {
			return keystate.Decision{Do: sweep{}, Why: "reveal Secrets of older generations"}, true
		}
	}
	return keystate.Decision{}, false
}

// applyTemplate gives the delivery Secret spec.secretTemplate's labels and annotations.
type applyTemplate struct{}

func (applyTemplate) Do(ctx context.Context, env *keystate.Env, s *keystate.State, _ keystate.Decision) (keystate.Outcome, error) {
	key := s.Key
	// The cache trims labels and annotations: patch from the Secret as it is.
	live := &corev1.Secret{}
	if err := env.APIReader.Get(ctx, client.ObjectKeyFromObject(s.Delivery), live); err != nil {
		return keystate.Outcome{}, fmt.Errorf("reading delivery Secret %s/%s: %w", key.Namespace, s.Delivery.Name, err)
	}
	if !keysecret.IsOwnedBy(live, key, keysecret.ComponentDelivery) {
		return keystate.Outcome{After: keystate.StaleRetry}, nil
	}
	if err := env.Patch(ctx, live, func() { keysecret.SetTemplate(live, key, keysecret.Generation(live)) }); err != nil {
		return keystate.Outcome{}, fmt.Errorf("applying spec.secretTemplate to delivery Secret %s/%s: %w", key.Namespace, s.Delivery.Name, err)
	}
	return keystate.Outcome{}, nil
}

// expireReveal deletes the unclaimed reveal Secret whose deadline passed.
type expireReveal struct{}

func (expireReveal) Do(ctx context.Context, env *keystate.Env, s *keystate.State, _ keystate.Decision) (keystate.Outcome, error) {
	uid, rv := s.Reveal.UID, s.Reveal.ResourceVersion
	err := env.Client.Delete(ctx, s.Reveal, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// A claimer got there first; the next reconcile sees it gone.
		return keystate.Outcome{After: keystate.StaleRetry}, nil
	}
	if err != nil {
		return keystate.Outcome{}, fmt.Errorf("deleting the expired reveal Secret %s/%s: %w", s.Key.Namespace, s.Reveal.Name, err)
	}
	return keystate.Outcome{Reveal: switchboardv1alpha1.ReasonRevealExpired}, nil
}

// sweep deletes the reveal Secrets of generations the status no longer publishes.
type sweep struct{}

func (sweep) Do(ctx context.Context, env *keystate.Env, s *keystate.State, _ keystate.Decision) (keystate.Outcome, error) {
	for _, secret := range s.Reveals {
		if keysecret.Generation(secret) < s.Key.Status.KeyGeneration {
			if err := env.DeleteRevealSecret(ctx, secret); err != nil {
				return keystate.Outcome{}, err
			}
		}
	}
	return keystate.Outcome{}, nil
}

// completeRecord writes down, once, what a hash Secret written by an older switchboard does not
// record yet: the hint and the rotation (taken from the status, which was trusted until then),
// the deadline of a reveal still pending (RevealDeadline) and where a delivered key went. From
// then on the record decides and the status only mirrors it.
type completeRecord struct{}

func (completeRecord) Do(ctx context.Context, env *keystate.Env, s *keystate.State, _ keystate.Decision) (keystate.Outcome, error) {
	key, hash := s.Key, s.Hash
	rec := *keystate.IssuedRecord(key, hash)
	if rec.RevealExpiresAt.IsZero() && key.Status.RevealSecretName != "" {
		rec.RevealExpiresAt = RevealDeadline(key, &rec, s.Now, env.RevealTTL)
	}
	if rec.Delivery == "" && rec.RevealExpiresAt.IsZero() {
		rec.Delivery = keystate.LegacyRecord(key, rec.Generation).Delivery
	}
	if err := env.Patch(ctx, hash, func() { keysecret.SetIssued(hash, rec) }); err != nil {
		return keystate.Outcome{}, fmt.Errorf("recording the issue of key generation %d in the hash Secret: %w", key.Status.KeyGeneration, err)
	}
	return keystate.Outcome{}, nil
}

// Confirm of an issue: a first issue creates its Secrets, and a create fails on what exists: no
// read. A rotation must know the generation the API server hashes, or a cache behind the last
// rotation would mint a second key for a generation already hashed.
func (Issue) Confirm(ctx context.Context, env *keystate.Env, s *keystate.State) (bool, error) {
	if s.Hash == nil {
		return false, nil
	}
	return true, env.LiveHash(ctx, s)
}

// PublishesKey says an issue writes the status's key fields itself (keystate.KeyPublisher).
func (Issue) PublishesKey() {}

// Confirm of a publication: the status may be behind our own last patch, or the hash Secret
// our last write.
func (publish) Confirm(ctx context.Context, env *keystate.Env, s *keystate.State) (bool, error) {
	return env.LiveKeyAndHash(ctx, s)
}

func (publish) PublishesKey() {}

// checkHash reads the hash Secret: none in the cache (or an older one) for an issued key.
type checkHash struct{ check }

func (checkHash) Confirm(ctx context.Context, env *keystate.Env, s *keystate.State) (bool, error) {
	return true, env.LiveHash(ctx, s)
}

// checkReveal reads the reveal Secret the status publishes, absent from the cache.
type checkReveal struct{ check }

func (checkReveal) Confirm(ctx context.Context, env *keystate.Env, s *keystate.State) (read bool, err error) {
	key := s.Key
	s.Reveal, err = env.LiveSecret(ctx, client.ObjectKey{Namespace: key.Namespace, Name: keysecret.RevealName(key.Name, key.Status.KeyGeneration)})
	s.Confirmed.Reveal = true
	return true, err
}

// checkDelivery reads the delivery Secret, which does not hold the delivered key in the cache.
type checkDelivery struct{ check }

func (checkDelivery) Confirm(ctx context.Context, env *keystate.Env, s *keystate.State) (read bool, err error) {
	s.Delivery, err = env.LiveSecret(ctx, client.ObjectKey{Namespace: s.Key.Namespace, Name: s.Key.Spec.SecretName})
	s.Confirmed.Delivery = true
	return true, err
}

// check is what the checks share: they do nothing but their Confirm (keystate.Check).
type check struct{}

func (check) IsCheck() {}

func (check) Do(context.Context, *keystate.Env, *keystate.State, keystate.Decision) (keystate.Outcome, error) {
	return keystate.Outcome{}, nil
}
