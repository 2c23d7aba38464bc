package leak

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/metrics"
	"github.com/switchboard-dev/switchboard/internal/objstatus"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

// Finding is what an APIKey says of its last leak (the Leaked condition, Ready, the KeyLeaked
// Event and key event): the last leak its hash Secret records (Leak), what the report said
// (Report, while it is kept: it is deleted in time, and what the key says must not change with
// it), whether the key is Replaced.
type Finding struct {
	Leak     keysecret.Leak
	Report   *switchboardv1alpha1.LeakReport
	Replaced bool
	// HeldUntil is when the refused current key's replacement is issued (zero: it is not
	// held back).
	HeldUntil time.Time
}

// FindingOf reads the last leak recorded in the hash Secret of s (nil: none).
func FindingOf(s *keystate.State) *Finding {
	if s.Hash == nil {
		return nil
	}
	l, ok := keysecret.LeakOf(s.Hash)
	if !ok {
		return nil
	}
	f := &Finding{Leak: l, Report: s.Leaks[l.Hash], Replaced: keysecret.Generation(s.Hash) > l.Generation}
	if !f.Replaced && s.Now.Before(l.ReplaceAfter) {
		f.HeldUntil = l.ReplaceAfter
	}
	return f
}

// said is what the report said of the leak: the key's hint, its source and where the key was
// found, as the record keeps them, or as the report says for a record written before it kept
// them ("" where neither says).
func (f *Finding) said() (hint, source, url string) {
	hint, source, url = f.Leak.Hint, f.Leak.Source, f.Leak.URL
	if r := f.Report; r != nil && hint == "" && source == "" && url == "" {
		hint, source, url = r.Spec.KeyHint, r.Spec.Source, r.Spec.URL
	}
	return hint, source, url
}

// Message says what leaked where, what was done and when the key was last used: the hint,
// never the key.
func (f *Finding) Message(key *switchboardv1alpha1.APIKey) string {
	hint, source, where := f.said()
	if source == "" {
		source = "a report"
	}
	if where == "" {
		where = "an unknown place"
	}
	if hint == "" {
		hint = fmt.Sprintf("of generation %d", f.Leak.Generation)
	}
	used := "no use recorded"
	if !f.Leak.LastUsedAt.IsZero() {
		used = "the APIKey was last used at " + f.Leak.LastUsedAt.UTC().Format(time.RFC3339)
	}
	done := "it is refused; no replacement is issued (see Ready)"
	switch {
	case f.Replaced && !f.Leak.AcceptedUntil.IsZero():
		done = fmt.Sprintf("it is replaced first, by %s, and refused from %s (spec.leakOverlap)",
			key.Status.KeyHint, f.Leak.AcceptedUntil.UTC().Format(time.RFC3339))
	case f.Replaced:
		done = fmt.Sprintf("it is refused and replaced; the current key is %s", key.Status.KeyHint)
	case !f.HeldUntil.IsZero():
		done = fmt.Sprintf("it is refused, and replaced at %s: this APIKey's leaked keys are replaced at most once per "+
			"minimum interval between renewals (--min-renewal-interval), and its last one was replaced less than that before",
			f.HeldUntil.UTC().Format(time.RFC3339))
	}
	switch f.Leak.Rollout {
	case "":
	case keysecret.RolloutPending:
		done += fmt.Sprintf("; the workloads reading Secret %s are not rolled yet", key.Spec.SecretName)
	default:
		done += fmt.Sprintf("; Secret %s: %s", key.Spec.SecretName, f.Leak.Rollout)
	}
	return fmt.Sprintf("key %s was reported leaked by %s at %s, found at %s; %s (%s)",
		hint, source, f.Leak.At.UTC().Format(time.RFC3339), where, done, used)
}

// ReadyMessage is what Ready says of a leaked current key not replaced (yet).
func (f *Finding) ReadyMessage(key *switchboardv1alpha1.APIKey) string {
	if !f.HeldUntil.IsZero() {
		return fmt.Sprintf("key %s was reported leaked and is refused; its replacement is held until %s (see Leaked)",
			keystate.HintOf(key), f.HeldUntil.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("key %s was reported leaked and is refused; no replacement is issued yet", keystate.HintOf(key))
}

// SetCondition sets Leaked from the last leak the hash Secret records; it is left as it is
// when the hash Secret was not seen.
func SetCondition(key *switchboardv1alpha1.APIKey, f *Finding) {
	if f == nil {
		return
	}
	reason := switchboardv1alpha1.ReasonLeakRefused
	switch {
	case f.Replaced:
		reason = switchboardv1alpha1.ReasonLeakReplaced
	case !f.HeldUntil.IsZero():
		reason = switchboardv1alpha1.ReasonLeakReplacementHeld
	}
	objstatus.SetCondition(&key.Status.Conditions, key.Generation, switchboardv1alpha1.ConditionLeaked, metav1.ConditionTrue, reason, f.Message(key))
}

// ToTell says whether a reconcile tells of the leak l though it did not act on it: what
// Leaked says changed in kind (refused, replacement held, replaced), or it published the
// generation that replaced the leaked key. Both follow from the hash Secret's record, so when a
// reconcile's action landed and its status patch was lost (a conflict, the operator stopping),
// the next one, which publishes what the record holds, still says it; a held replacement was
// reported as a plain rotation.
func ToTell(before, after *switchboardv1alpha1.APIKey, l *Finding, issued bool) bool {
	const leaked = switchboardv1alpha1.ConditionLeaked
	if objstatus.ConditionReason(before.Status.Conditions, leaked) != objstatus.ConditionReason(after.Status.Conditions, leaked) {
		return true
	}
	return issued && l.Replaced && l.Leak.Generation >= before.Status.KeyGeneration
}

// Event is the key event of the leak f: the key that leaked (its generation, and its hint
// as the report or the status before knew it), where it was found and when it was last used.
func Event(before, after *switchboardv1alpha1.APIKey, f *Finding, reason string) webhookdelivery.Event {
	d := webhookdelivery.KeyData{Namespace: after.Namespace, Name: after.Name, KeyGeneration: f.Leak.Generation, Reason: reason}
	d.KeyHint, _, d.URL = f.said()
	if d.KeyHint == "" && f.Leak.Generation == before.Status.KeyGeneration {
		d.KeyHint = before.Status.KeyHint
	}
	if !f.Leak.LastUsedAt.IsZero() {
		d.LastUsedAt = ptr.To(f.Leak.LastUsedAt.UTC())
	}
	return webhookdelivery.Event{Type: webhookdelivery.KeyLeaked, Timestamp: f.Leak.At.UTC(), Data: d}
}

// ReportReconciler writes what became of a LeakReport of the system namespace: the APIKey
// whose key it names (status.keyRef) and whether that key is refused (Ready). The APIKey
// reconciler does the acting; this one reports, from the hash Secrets, and deletes the report
// once it is no longer needed: when no hash Secret knows its hash any more (leakReportSettle
// after its creation), or Retention after its creation once the key is refused. What refuses
// the key is the hash Secret's record, never the report, so the key stays refused.
type ReportReconciler struct {
	// Client reads through the cache and writes LeakReports' status.
	Client client.Client
	// Clock tells the reports' ages.
	Clock clock.PassiveClock
	// SystemNamespace is the one namespace whose LeakReports are believed.
	SystemNamespace string
	// Retention is how long a LeakReport is kept after its creation once its key is refused
	// (zero or negative: until its key is gone).
	Retention time.Duration
	// ControllerOptions tune the controller (tests skip the name validation).
	ControllerOptions crcontroller.Options
}

// leakReportSettle is how long a LeakReport whose hash no hash Secret knows is kept after its
// creation: the operator's cache may not have seen yet the hash Secret of a key issued just
// before it was reported, and once deleted the report would be lost to that key. A key
// replaced or deleted since it was reported is refused anyway.
const leakReportSettle = 10 * time.Minute

// leakReportsDeleted counts the LeakReports deleted, by why: key_gone (no hash Secret knows
// the hash) or retention.
var leakReportsDeleted = metrics.Registered.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_operator_leak_reports_deleted_total", Help: "LeakReports the operator deleted, by reason: key_gone (no hash Secret knows the leaked key's hash any more: replaced by a later leak, or its APIKey deleted) or retention (older than --leak-report-retention, its key refused)."}, []string{"reason"})

// The reasons of leakReportsDeleted.
const (
	reportGone      = "key_gone"
	reportRetention = "retention"
)

// SetupWithManager registers the reconciler: LeakReports of the system namespace, and the hash
// Secrets whose hashes name them.
func (r *ReportReconciler) SetupWithManager(mgr manager.Manager) error {
	inSystem := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == r.SystemNamespace })
	return ctrl.ControllerManagedBy(mgr).
		For(&switchboardv1alpha1.LeakReport{}, ctrl.WithPredicates(inSystem)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.hashSecretToReports), ctrl.WithPredicates(keystate.HashSecrets(r.SystemNamespace), controller.MeaningfulUpdate)).
		Named("leakreport").
		WithOptions(r.ControllerOptions).
		Complete(r)
}

// hashSecretToReports maps a hash Secret to the LeakReports its hashes would have (most do not
// exist: a Get from the cache says so at no cost).
func (r *ReportReconciler) hashSecretToReports(_ context.Context, o client.Object) []reconcile.Request {
	s, ok := o.(*corev1.Secret)
	if !ok {
		return nil
	}
	var out []reconcile.Request
	for _, sum := range keysecret.HashesOf(s) {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: r.SystemNamespace, Name: switchboardv1alpha1.LeakReportName(sum)}})
	}
	return out
}

// Reconcile reports on one LeakReport, or deletes it: KeyNotFound when no hash Secret knows
// its hash, Acting while the key's hash Secret does not record it refused yet, KeyRefused once
// it does (final: a later leak of the same APIKey replaces the record, not this report's
// outcome); deleted as reportFate says.
func (r *ReportReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req.Namespace != r.SystemNamespace {
		return reconcile.Result{}, nil
	}
	report := &switchboardv1alpha1.LeakReport{}
	if err := r.Client.Get(ctx, req.NamespacedName, report); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !isLeakReport(report, r.SystemNamespace) {
		return reconcile.Result{}, nil
	}
	ref, known, acted, err := r.keyOf(ctx, report.Spec.KeyHash)
	if err != nil {
		return reconcile.Result{}, err
	}
	why, wait := reportFate(report.CreationTimestamp.Time, r.Clock.Now(), known, acted, r.Retention)
	if why != "" {
		return reconcile.Result{}, r.delete(ctx, report, why)
	}
	if objstatus.ConditionReason(report.Status.Conditions, switchboardv1alpha1.ConditionReady) == switchboardv1alpha1.ReasonLeakActedOn {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	before := report.DeepCopy()
	set := func(status metav1.ConditionStatus, reason, message string) {
		objstatus.SetCondition(&report.Status.Conditions, report.Generation, switchboardv1alpha1.ConditionReady, status, reason, message)
	}
	report.Status.KeyRef = ref
	switch {
	case ref == nil:
		set(metav1.ConditionFalse, switchboardv1alpha1.ReasonKeyNotFound,
			"no key switchboard holds has this hash: it was never issued here, or it was replaced and its hash dropped already, so it is refused anyway")
	case acted:
		set(metav1.ConditionTrue, switchboardv1alpha1.ReasonLeakActedOn,
			fmt.Sprintf("the key of APIKey %s/%s is refused (see its Leaked condition)", ref.Namespace, ref.Name))
	default:
		set(metav1.ConditionFalse, switchboardv1alpha1.ReasonLeakActing,
			fmt.Sprintf("refusing the key of APIKey %s/%s", ref.Namespace, ref.Name))
	}
	report.Status.ObservedGeneration = report.Generation
	return reconcile.Result{RequeueAfter: wait}, objstatus.Patch(ctx, r.Client, before, report)
}

// reportFate says whether a LeakReport created at created goes at now, and why (a reason of
// leakReportsDeleted), or how long until it may ("": kept; wait 0: until a hash Secret's change
// says more). known: a hash Secret knows its hash; acted: the key's hash Secret records it
// refused. A report of a key found and not refused yet is kept whatever its age: it is what
// the APIKey reconciler acts on.
func reportFate(created, now time.Time, known, acted bool, retention time.Duration) (why string, wait time.Duration) {
	var at time.Time
	switch {
	case !known:
		why, at = reportGone, created.Add(leakReportSettle)
	case acted && retention > 0:
		why, at = reportRetention, created.Add(retention)
	default:
		return "", 0
	}
	if now.Before(at) {
		return "", at.Sub(now)
	}
	return why, 0
}

// delete deletes report, this very one (by UID: the receiver may have created it again), and
// counts it.
func (r *ReportReconciler) delete(ctx context.Context, report *switchboardv1alpha1.LeakReport, why string) error {
	uid := report.UID
	if err := r.Client.Delete(ctx, report, client.Preconditions{UID: &uid}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil // gone already, or another report now: its own event brings it here
		}
		return fmt.Errorf("deleting LeakReport %s/%s: %w", report.Namespace, report.Name, err)
	}
	leakReportsDeleted.WithLabelValues(why).Inc()
	log.FromContext(ctx).Info("deleted the leak report", "reason", why, "hint", report.Spec.KeyHint,
		"created", report.CreationTimestamp.UTC().Format(time.RFC3339))
	return nil
}

// keyOf finds the APIKey whose hash Secret knows sum, by the hash Secret's name and UID label
// (the system namespace's, which tenants cannot write) and the APIKey of that UID; known says
// a hash Secret of the system namespace knows sum, whether or not its APIKey is there; acted
// says the hash Secret records the key refused (for this leak, or revoked altogether).
func (r *ReportReconciler) keyOf(ctx context.Context, sum string) (ref *switchboardv1alpha1.LeakedKeyReference, known, acted bool, err error) {
	var hashes corev1.SecretList
	if err := r.Client.List(ctx, &hashes, client.InNamespace(r.SystemNamespace), client.MatchingFields{HashIndex: sum}); err != nil {
		return nil, false, false, fmt.Errorf("listing hash Secrets by hash: %w", err)
	}
	for i := range hashes.Items {
		h := &hashes.Items[i]
		uid := types.UID(h.Labels[keysecret.LabelAPIKeyUID])
		if uid == "" || h.Name != keysecret.HashName(uid) {
			continue
		}
		known = true
		key := &switchboardv1alpha1.APIKey{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: h.Labels[keysecret.LabelAPIKeyNamespace], Name: h.Labels[keysecret.LabelAPIKeyName]}, key)
		if client.IgnoreNotFound(err) != nil {
			return nil, false, false, fmt.Errorf("reading the APIKey of hash Secret %s: %w", h.Name, err)
		}
		if err != nil || key.UID != uid {
			continue
		}
		leak, _ := keysecret.LeakOf(h)
		rec, _ := keysecret.IssuedOf(h)
		refused := leak.Hash == sum || rec.Revoked()
		return &switchboardv1alpha1.LeakedKeyReference{Namespace: key.Namespace, Name: key.Name, UID: string(key.UID)}, true, refused, nil
	}
	return nil, known, false, nil
}
