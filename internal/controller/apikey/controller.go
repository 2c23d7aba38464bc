// Package apikey is the APIKey controller. It hosts the concerns below it, each a package with
// its own chain of named policies over one observed state (keystate): objectlife, leak,
// issuing, lifecycle, grace, binding, and readiness, which alone computes Ready. One reconcile asks them
// in turn: observe, plan and confirm (steps.go), then act, the status written once, at the end.
// It never writes an APIKey's spec.
package apikey

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
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
	"sigs.k8s.io/controller-runtime/pkg/source"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/creditalerts"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/grace"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/issuing"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/leak"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/lifecycle"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/misusealerts"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/podwatch"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/readiness"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/renewalinterval"
	"github.com/switchboard-dev/switchboard/internal/controller/keyjournal"
	"github.com/switchboard-dev/switchboard/internal/fairqueue"
	"github.com/switchboard-dev/switchboard/internal/objstatus"
)

// What the concerns name, for those who know the controller by its host (the operator, the
// tests): the Events' reasons and the delivery's grace; and the defaults of the operator-wide
// lifecycle settings (Reconciler.ExpiryWarning, UnusedAfter).
const (
	ReasonDeliverySecretLost = issuing.ReasonDeliverySecretLost
	ReasonKeySecretReplaced  = issuing.ReasonKeySecretReplaced
	ReasonStatusRestored     = readiness.ReasonStatusRestored
	ReasonKeyLeaked          = leak.ReasonKeyLeaked
	ReasonGraceEndedEarly    = grace.ReasonGraceEndedEarly
	RedeliveryGrace          = issuing.RedeliveryGrace
	DefaultExpiryWarning     = 7 * 24 * time.Hour
	DefaultUnusedAfter       = 90 * 24 * time.Hour
)

// Reconciler turns APIKeys into hashed keys: it issues, reveals or delivers, rotates,
// expires and revokes them, following the write order of the key protocol so that any
// interrupted reconcile is finished by the next one.
type Reconciler struct {
	// Client, APIReader and Recorder are what the concerns' actions read and write with
	// (keystate.Env), in SystemNamespace, which holds the hash Secrets; KeyPrefix begins every
	// key issued; RevealTTL is how long an unclaimed reveal Secret lives.
	Client          client.Client
	APIReader       client.Reader
	Recorder        events.EventRecorder
	SystemNamespace string
	KeyPrefix       string
	RevealTTL       time.Duration
	// Clock tells the time for expiry, grace periods and reveal deadlines.
	Clock clock.PassiveClock
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
	// negative: until its key is gone; leak.ReportReconciler).
	LeakReportRetention time.Duration
	// ControllerOptions tune the controller (tests skip the name validation).
	ControllerOptions crcontroller.Options

	// pods wakes the keys that wait for their consumers' pods to restart (grace); set by
	// SetupWithManager. Nil: such keys look again every 30 seconds.
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
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Secret{}, HashOwnerIndex, hashOwner(r.SystemNamespace)); err != nil {
		return fmt.Errorf("indexing hash Secrets: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Secret{}, leak.HashIndex, leak.Hashes(r.SystemNamespace)); err != nil {
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
	reports := &leak.ReportReconciler{Client: r.Client, Clock: r.Clock, SystemNamespace: r.SystemNamespace, Retention: r.LeakReportRetention, ControllerOptions: r.ControllerOptions}
	if err := reports.SetupWithManager(mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&switchboardv1alpha1.APIKey{}, builder.WithPredicates(controller.MeaningfulUpdate)).
		Owns(&corev1.Secret{}, builder.WithPredicates(controller.MeaningfulUpdate)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(keystate.APIKeyOf), builder.WithPredicates(keystate.HashSecrets(r.SystemNamespace), controller.MeaningfulUpdate)).
		Watches(&switchboardv1alpha1.LeakReport{}, handler.EnqueueRequestsFromMapFunc(leak.ReportToAPIKey(r.Client, r.SystemNamespace))).
		WatchesRawSource(source.Channel(r.pods.Events(), &handler.EnqueueRequestForObject{})).
		Named("apikey").
		WithOptions(fairqueue.ControllerOptions(r.ControllerOptions)).
		Complete(r)
}

// Reconcile runs the four steps: observe the APIKey and its Secrets (from the cache), plan the
// one action (the concerns' chains of policies), confirm what it rests on (from the API server,
// when the cache could be wrong), act. The status is patched once, at the end, from what was
// observed and what the action did (readiness).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	env := &keystate.Env{ // what the concerns' actions read and write with
		Client: r.Client, APIReader: r.APIReader, Recorder: r.Recorder, SystemNamespace: r.SystemNamespace,
		KeyPrefix: r.KeyPrefix, RevealTTL: r.RevealTTL,
		Journal: &keyjournal.Journal{Client: r.Client, APIReader: r.APIReader, SystemNamespace: r.SystemNamespace},
	}
	s, err := r.observe(ctx, env, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	p := r.params()
	obs, d := plan(s, p)
	obs, d, stale, err := confirm(ctx, env, s, p, obs, d)
	if err != nil {
		return ctrl.Result{}, err
	}
	if stale {
		// The cache is behind: decide again once it has caught up.
		return ctrl.Result{RequeueAfter: keystate.StaleRetry}, nil
	}
	if d.Policy != "" {
		log.FromContext(ctx).V(1).Info("decided", "policy", d.Policy, "why", d.Why)
	}
	key := s.Key
	if _, none := d.Do.(keystate.Statusless); key == nil || none {
		_, err := act(ctx, env, s, d)
		return ctrl.Result{}, err
	}
	before := key.DeepCopy()
	out, err := act(ctx, env, s, d)
	if err == nil && d.Problem != "" {
		err = errors.New(d.Problem)
	}
	wake := obs.Wake
	wake.At(out.After)
	life := obs.Life
	if i, isIssue := d.Do.(issuing.Issue); err == nil && out.LifeChanged && !obs.Revoked && !obs.Expired && (!isIssue || !i.Renewal) {
		// The record of the key's life was just written: its conditions come from it now,
		// rather than in a second status patch when the hash Secret's event comes. A renewal
		// reports the life of the key it replaced (until when that one stays valid).
		life = lifecycle.LifeOf(s, s.Record(), p, &wake)
	}
	f := readiness.FindingsOf(obs, d, out, life)
	f.Leak, f.LeakRefused, f.LeakRolled = leak.FindingOf(s), out.LeakRefused, out.LeakRolled
	if readiness.Mirror(ctx, s, d, &f, p) {
		f.Restored = true
	}
	// The credit events' record follows the balance the server wrote (Transitions tells the
	// change).
	key.Status.CreditAlerts = creditalerts.Next(key.Status.CreditAlerts, key.Status.Credits)
	// So does the misuse events' record the misuses it counted, at most once an interval: the
	// wake after it reports those the interval held back.
	key.Status.MisuseAlerts = misusealerts.Next(key.Status.MisuseAlerts, key.Status.Binding, s.Now)
	wake.At(misusealerts.WakeAt(key.Status.MisuseAlerts).Sub(s.Now))
	f.BindingMode = misusealerts.ModeOf(key, s.Hash)
	if f.Life.Renewal {
		// Counted from the last status, for people and alerts only: nothing is decided from it;
		// the back-off is the controller's, on the error.
		if err != nil {
			key.Status.FailedRenewalAttempts = before.Status.FailedRenewalAttempts + 1
		} else {
			key.Status.FailedRenewalAttempts = 0
		}
	}
	readiness.SetConditions(key, &f, r.SystemNamespace)
	if err == nil {
		// Only a reconcile that ran to its end has seen this generation of the spec.
		key.Status.ObservedGeneration = key.Generation
	}
	ts := readiness.Transitions(before, key, &f, s.Now)
	// The key events are recorded before the status that publishes them: if either write
	// fails, the next reconcile computes the same events (the same ids) and records them again.
	if jerr := env.Journal.Record(ctx, key, readiness.KeyEvents(key, ts)); jerr != nil {
		return ctrl.Result{}, kerrors.NewAggregate([]error{err, jerr})
	}
	if perr := objstatus.Patch(ctx, r.Client, before, key); perr != nil {
		return ctrl.Result{}, kerrors.NewAggregate([]error{err, perr})
	}
	readiness.Emit(r.Recorder, key, ts)
	return ctrl.Result{RequeueAfter: wake.After}, err
}

// act carries out the decision's action, if any, and says what it did.
func act(ctx context.Context, env *keystate.Env, s *keystate.State, d keystate.Decision) (keystate.Outcome, error) {
	if d.Do == nil {
		return keystate.Outcome{}, nil
	}
	return d.Do.Do(ctx, env, s, d)
}

// params are the settings plan decides with.
func (r *Reconciler) params() keystate.Params {
	p := keystate.Params{RevealTTL: r.RevealTTL, ExpiryWarning: r.ExpiryWarning, UnusedAfter: r.UnusedAfter, MinRenewal: r.MinRenewalInterval}
	if p.MinRenewal == (renewalinterval.Minimum{}) {
		p.MinRenewal = renewalinterval.Default
	}
	if p.ExpiryWarning == 0 {
		p.ExpiryWarning = DefaultExpiryWarning
	}
	if p.UnusedAfter == 0 {
		p.UnusedAfter = DefaultUnusedAfter
	}
	return p
}
