// Package apikey is the APIKey controller: it turns APIKeys into hashed keys, issued, revealed
// once or delivered, rotated, renewed, expired, revoked, and refused and replaced when reported
// leaked (leak.go; leakreport.go reports on the LeakReport, and deletes it in time), in four
// steps per reconcile: observe (observe.go), plan (plan.go: the facts, and the chain of named
// policies in policies.go), confirm (confirm.go) and act (act.go, issue.go, hash.go), the
// status written once, at the end (status.go). It never writes an APIKey's spec.
package apikey

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller"
	"github.com/switchboard-dev/switchboard/internal/controller/keyjournal"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/podwatch"
	"github.com/switchboard-dev/switchboard/internal/renewalinterval"
)

// conflictRetry is how often an APIKey whose delivery Secret is someone else's is looked at
// again: that Secret is not in the cache (it lacks switchboard's label), so no event wakes us.
const conflictRetry = time.Minute

// RedeliveryGrace is how long a delivered key stays valid after its delivery Secret was
// deleted and a new key was issued into the Secret again.
const RedeliveryGrace = time.Hour

// ReasonDeliverySecretLost is the Event reason of a delivery Secret that was deleted or lost
// its key; a new key is issued into it.
const ReasonDeliverySecretLost = "DeliverySecretLost"

// ReasonKeySecretReplaced is the Event reason of a reveal or delivery Secret whose key
// switchboard could not prove it issued (planted, or left unhashed by a crash): it was
// replaced by a fresh key.
const ReasonKeySecretReplaced = "KeySecretReplaced"

// ReasonStatusRestored is the Event reason of a status that did not say what the hash Secret
// records (keyGeneration, keyHint, lastHandledRotationAt) and was put back.
const ReasonStatusRestored = "StatusRestored"

// staleRetry is how soon a reconcile that found the cache behind the API server runs again.
const staleRetry = time.Second

// Reconciler turns APIKeys into hashed keys: it issues, reveals or delivers, rotates,
// expires and revokes them, following the write order of the key protocol so that any
// interrupted reconcile is finished by the next one.
type Reconciler struct {
	// Client reads through the cache and writes.
	Client client.Client
	// APIReader reads the API server directly, wherever a stale cache could cost a key.
	APIReader client.Reader
	// Recorder emits Events; they carry the key's hint, never the key.
	Recorder events.EventRecorder
	// Clock tells the time for expiry, grace periods and reveal deadlines.
	Clock clock.PassiveClock
	// SystemNamespace holds the hash Secrets.
	SystemNamespace string
	// KeyPrefix begins every key issued.
	KeyPrefix string
	// RevealTTL is how long an unclaimed reveal Secret lives.
	RevealTTL time.Duration
	// ExpiryWarning is how long before a key's end that nothing will renew it ExpiringSoon
	// turns True (DefaultExpiryWarning when zero).
	ExpiryWarning time.Duration
	// UnusedAfter is how long without a use makes a key Unused (DefaultUnusedAfter when zero;
	// negative: never).
	UnusedAfter time.Duration
	// MinRenewalInterval is the least interval between two renewals of a key, whatever its
	// lifecycle asks (renewalinterval.Default when zero), and between two replacements of an
	// APIKey's leaked keys.
	MinRenewalInterval renewalinterval.Minimum
	// LeakReportRetention is how long a LeakReport is kept once its key is refused (zero or
	// negative: until its key is gone; LeakReportReconciler).
	LeakReportRetention time.Duration
	// ControllerOptions tune the controller (tests skip the name validation).
	ControllerOptions crcontroller.Options

	// pods wakes the keys that wait for their consumers' pods to restart (consumers.go); set
	// by SetupWithManager. Nil: such keys look again every consumersRetry.
	pods *podwatch.Watcher
}

// SetupWithManager registers the reconciler with mgr. Reveal and delivery Secrets are owned by
// their APIKey; hash Secrets live in another namespace and are mapped back by their labels.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Client == nil || r.APIReader == nil || r.Recorder == nil || r.Clock == nil {
		return errors.New("the APIKey reconciler needs a Client, an APIReader, a Recorder and a Clock")
	}
	if r.SystemNamespace == "" || r.KeyPrefix == "" || r.RevealTTL <= 0 {
		return errors.New("the APIKey reconciler needs a SystemNamespace, a KeyPrefix and a positive RevealTTL")
	}
	isHash := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == r.SystemNamespace &&
			o.GetLabels()[keysecret.LabelComponent] == keysecret.ComponentHash
	})
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Secret{}, HashOwnerIndex, hashOwner(r.SystemNamespace)); err != nil {
		return fmt.Errorf("indexing hash Secrets: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Secret{}, LeakHashIndex, leakHashes(r.SystemNamespace)); err != nil {
		return fmt.Errorf("indexing hash Secrets by hash: %w", err)
	}
	// The journal lists a namespace's KeyWebhooks from the cache: their informer starts with
	// the manager, so a missing grant shows at start rather than at the first key event.
	if _, err := mgr.GetCache().GetInformer(ctx, &switchboardv1alpha1.KeyWebhook{}); err != nil {
		return fmt.Errorf("watching KeyWebhooks: %w", err)
	}
	md, err := metadata.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("creating the pods' metadata client: %w", err)
	}
	r.pods = podwatch.New(md, 0, nil, mgr.GetLogger().WithName("podwatch"))
	if err := mgr.Add(r.pods); err != nil {
		return fmt.Errorf("adding the pod watcher: %w", err)
	}
	reports := &LeakReportReconciler{Client: r.Client, Clock: r.Clock, SystemNamespace: r.SystemNamespace, Retention: r.LeakReportRetention, ControllerOptions: r.ControllerOptions}
	if err := reports.SetupWithManager(mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&switchboardv1alpha1.APIKey{}, builder.WithPredicates(controller.MeaningfulUpdate)).
		Owns(&corev1.Secret{}, builder.WithPredicates(controller.MeaningfulUpdate)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(hashSecretToAPIKey), builder.WithPredicates(isHash, controller.MeaningfulUpdate)).
		Watches(&switchboardv1alpha1.LeakReport{}, handler.EnqueueRequestsFromMapFunc(r.leakReportToAPIKey)).
		WatchesRawSource(source.Channel(r.pods.Events(), &handler.EnqueueRequestForObject{})).
		Named("apikey").
		WithOptions(controller.FairOptions(r.ControllerOptions)).
		Complete(r)
}

// hashSecretToAPIKey maps a hash Secret to the APIKey its labels name.
func hashSecretToAPIKey(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	ns, name := l[keysecret.LabelAPIKeyNamespace], l[keysecret.LabelAPIKeyName]
	if ns == "" || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

// Reconcile runs the four steps: observe the APIKey and its Secrets (from the cache), plan the
// one action (a chain of policies), confirm what it rests on (from the API server, when the
// cache could be wrong), act. The status is patched once, at the end, from what was observed
// and what the action did.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s, err := r.observe(ctx, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	p := r.params()
	obs, d := plan(s, p)
	obs, d, stale, err := r.confirm(ctx, s, obs, d)
	if err != nil {
		return ctrl.Result{}, err
	}
	if stale {
		// The cache is behind: decide again once it has caught up.
		return ctrl.Result{RequeueAfter: staleRetry}, nil
	}
	if d.policy != "" {
		log.FromContext(ctx).V(1).Info("decided", "policy", d.policy, "why", d.why)
	}
	key := s.key
	if _, none := d.do.(statusless); key == nil || none {
		_, err := act(ctx, r, s, d)
		return ctrl.Result{}, err
	}
	before := key.DeepCopy()
	out, err := act(ctx, r, s, d)
	if err == nil && d.problem != "" {
		err = errors.New(d.problem)
	}
	wake := obs.wake
	wake.at(out.after)
	life := obs.life
	if i, isIssue := d.do.(issue); err == nil && out.lifeChanged && !obs.revoked && !obs.expired && (!isIssue || !i.renewal) {
		// The record of the key's life was just written: its conditions come from it now,
		// rather than in a second status patch when the hash Secret's event comes. A renewal
		// reports the life of the key it replaced (until when that one stays valid).
		life = lifeOf(s, s.record(), p, &wake)
	}
	f := findingsOf(obs, d, out, life)
	f.leak, f.leakRefused, f.leakRolled = leakFindingOf(s), out.leakRefused, out.leakRolled
	if r.mirror(ctx, s, d, f) {
		f.restored = true
	}
	if f.life.renewal {
		// Counted from the last status, for people and alerts only: nothing is decided from it;
		// the back-off is the controller's, on the error.
		if err != nil {
			key.Status.FailedRenewalAttempts = before.Status.FailedRenewalAttempts + 1
		} else {
			key.Status.FailedRenewalAttempts = 0
		}
	}
	setKeyConditions(key, &f, r.SystemNamespace)
	if err == nil {
		// Only a reconcile that ran to its end has seen this generation of the spec.
		key.Status.ObservedGeneration = key.Generation
	}
	ts := transitions(before, key, &f, s.now)
	// The key events are recorded before the status that publishes them: if either write
	// fails, the next reconcile computes the same events (the same ids) and records them again.
	if jerr := r.journal().Record(ctx, key, keyEvents(key, ts)); jerr != nil {
		return ctrl.Result{}, kerrors.NewAggregate([]error{err, jerr})
	}
	if perr := controller.PatchStatus(ctx, r.Client, before, key); perr != nil {
		return ctrl.Result{}, kerrors.NewAggregate([]error{err, perr})
	}
	r.recordTransitions(key, ts)
	return ctrl.Result{RequeueAfter: wake.after}, err
}

// journal records key events in the system namespace (internal/controller/keyjournal).
func (r *Reconciler) journal() *keyjournal.Journal {
	return &keyjournal.Journal{Client: r.Client, APIReader: r.APIReader, SystemNamespace: r.SystemNamespace}
}

// keyPublisher is an action that writes the status's key fields itself (generation, hint, the
// previous key's grace, the reveal), which mirror then leaves alone.
type keyPublisher interface{ publishesKey() }

func (issue) publishesKey()   {}
func (publish) publishesKey() {}

// act carries out the decision's action, if any, and says what it did.
func act(ctx context.Context, r *Reconciler, s *keyState, d decision) (outcome, error) {
	if d.do == nil {
		return outcome{}, nil
	}
	return d.do.do(ctx, r, s, d)
}

// params are the settings plan decides with.
func (r *Reconciler) params() planParams {
	p := planParams{revealTTL: r.RevealTTL, expiryWarning: r.ExpiryWarning, unusedAfter: r.UnusedAfter, minRenewal: r.MinRenewalInterval}
	if p.minRenewal == (renewalinterval.Minimum{}) {
		p.minRenewal = renewalinterval.Default
	}
	if p.expiryWarning == 0 {
		p.expiryWarning = DefaultExpiryWarning
	}
	if p.unusedAfter == 0 {
		p.unusedAfter = DefaultUnusedAfter
	}
	return p
}

// mirror sets the status fields that only show what the spec and the hash Secret's record say,
// whatever the action: the expiry, the revocation, and for an issued key whose status the action
// did not write, the previous key's grace and the unclaimed reveal (f says what the reconcile
// found of them). A field someone else changed is put back; restored says so.
func (r *Reconciler) mirror(ctx context.Context, s *keyState, d decision, f keyFindings) (restored bool) {
	key := s.key
	key.Status.ExpiresAt = key.Spec.ExpiresAt.DeepCopy()
	rec := s.record()
	mirrorLife(key, rec, r.params().minRenewal)
	switch {
	case key.Spec.Revoked:
		if key.Status.RevokedAt == nil {
			key.Status.RevokedAt = timePtr(s.now)
		}
		return false
	case rec != nil && rec.Revoked():
		// The operator's own revocation: the status shows the instant its record holds.
		key.Status.RevokedAt = timePtr(rec.RevokedAt)
		return false
	case key.Status.RevokedAt != nil:
		// Written by someone else (the API server refuses it on a key not revoked since issue
		// 18, so it is older than that): the key is not revoked, and the status says so again.
		log.FromContext(ctx).Info("status.revokedAt is set but the key is not revoked; restoring the status")
		key.Status.RevokedAt = nil
		restored = true
	}
	if _, own := d.do.(keyPublisher); own {
		return restored
	}
	if f.hash == hashFound {
		key.Status.PreviousKeyValidUntil = previousValidUntil(s.hash)
	}
	switch f.reveal {
	case switchboardv1alpha1.ReasonRevealClaimed, switchboardv1alpha1.ReasonRevealExpired:
		key.Status.RevealSecretName, key.Status.RevealExpiresAt = "", nil
		return restored
	}
	if key.Status.RevealSecretName == "" {
		return restored
	}
	if want := keysecret.RevealName(key.Name, key.Status.KeyGeneration); key.Status.RevealSecretName != want {
		// The operator publishes no other name: someone else wrote this one into the status.
		log.FromContext(ctx).Info("status.revealSecretName names a Secret switchboard did not publish; restoring it",
			"found", key.Status.RevealSecretName, "want", want)
		key.Status.RevealSecretName = want
	}
	key.Status.RevealExpiresAt = timePtr(revealDeadline(key, s.record(), s.now, r.RevealTTL))
	return restored
}

// mirrorLife shows the current key's life as the hash Secret records it: its issue, its end
// (or spec.expiresAt, if sooner) and its automatic renewal, no sooner than least allows.
func mirrorLife(key *switchboardv1alpha1.APIKey, rec *keysecret.Issued, least renewalinterval.Minimum) {
	key.Status.KeyIssuedAt, key.Status.KeyNotAfter, key.Status.RenewalTime = nil, nil, nil
	if rec == nil || key.Spec.Revoked || rec.Revoked() {
		return
	}
	if !rec.IssuedAt.IsZero() {
		key.Status.KeyIssuedAt = timePtr(rec.IssuedAt)
	}
	end := rec.NotAfter
	if exp := key.Spec.ExpiresAt; exp != nil && (end.IsZero() || exp.Time.Before(end)) {
		end = exp.Time
	}
	if !end.IsZero() {
		key.Status.KeyNotAfter = timePtr(end)
	}
	if at, _ := renewalTime(key, rec.IssuedAt, rec.NotAfter, earliestRenewal(key, rec, least)); !at.IsZero() && delivered(key, rec) {
		key.Status.RenewalTime = timePtr(at)
	}
}
