// Package grace is the grace of an APIKey's old key after a rotation, a concern of its
// controller: it ends at the instant the hash Secret records, or earlier on evidence
// (spec.graceEndsWhenUnusedFor) once its consumers have moved to the new key. The evidence is
// (a) the old key's record of use, status.previousKeyUse, which only the server may write and
// only forward (its admission policy), measured from when the new key was written, which the
// hash Secret records; and (b) the pods that take the delivery Secret by environment variable
// or subPath, which see a new key only when they restart, all started (their
// metadata.creationTimestamp, which the API server sets) after that. The fixed grace stays the
// upper bound: evidence only ever shortens it.
package grace

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/workloads"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/objstatus"
)

// maxHoldersShown bounds the pods the GraceEvidence condition names.
const maxHoldersShown = 10

// quietUntil is when the old key of s's rotation will have gone unused for
// spec.graceEndsWhenUnusedFor since the new key was written (rec.IssuedAt), by its last use of
// that generation; the old key's generation and last use come with it. ok is false when the
// grace does not end on evidence: not asked for, no old key in its grace, or no record of
// when the new key was written.
func quietUntil(s *keystate.State, rec *keysecret.Issued) (until, lastUse time.Time, gen int64, ok bool) {
	key := s.Key
	quiet := key.Spec.GraceEndsWhenUnusedFor
	if quiet == nil || s.Hash == nil || rec == nil || rec.IssuedAt.IsZero() {
		return time.Time{}, time.Time{}, 0, false
	}
	if end, has := keysecret.PreviousValidUntil(s.Hash); !has || !s.Now.Before(end) {
		return time.Time{}, time.Time{}, 0, false
	}
	gen = rec.Generation - 1
	lastUse = rec.IssuedAt
	if u := key.Status.PreviousKeyUse; u != nil && u.KeyGeneration == gen && u.LastUsedAt.After(lastUse) {
		lastUse = u.LastUsedAt.Time
	}
	return lastUse.Add(quiet.Duration), lastUse, gen, true
}

// NeedsConsumers says whether the reconcile of s must read the pods that take its delivery
// Secret: the grace ends on evidence, the old key's traffic has stopped for the quiet period,
// and the key is delivered (a revealed key has no Secret for pods to take it from).
func NeedsConsumers(s *keystate.State, rec *keysecret.Issued) bool {
	until, _, _, ok := quietUntil(s, rec)
	return ok && !s.Now.Before(until) && keystate.Delivered(s.Key, rec)
}

// evidenceOf reads the evidence of s's old key's grace; wake gets when it is worth
// looking again.
func evidenceOf(s *keystate.State, rec *keysecret.Issued, wake *keystate.Requeue) keystate.GraceEvidence {
	until, lastUse, gen, ok := quietUntil(s, rec)
	if !ok {
		if rec != nil && rec.PreviousEndedEarly != "" && s.Key.Spec.GraceEndsWhenUnusedFor != nil {
			// Said from the record, not from the status the early end was first reported in:
			// that status patch may have been lost.
			return keystate.GraceEvidence{Active: true, Ended: true, Reason: switchboardv1alpha1.ReasonConsumersMoved, Message: rec.PreviousEndedEarly}
		}
		return keystate.GraceEvidence{}
	}
	key, now := s.Key, s.Now
	end, _ := keysecret.PreviousValidUntil(s.Hash)
	written := rec.IssuedAt.UTC().Format(time.RFC3339)
	used := fmt.Sprintf("key generation %d has not been used since key generation %d was written at %s", gen, rec.Generation, written)
	if lastUse.After(rec.IssuedAt) {
		used = fmt.Sprintf("key generation %d was last used at %s", gen, lastUse.UTC().Format(time.RFC3339))
	}
	e := keystate.GraceEvidence{Active: true}
	bound := fmt.Sprintf("at the latest at %s", end.UTC().Format(time.RFC3339))
	switch {
	case now.Before(until):
		wake.At(until.Sub(now))
		e.Reason = switchboardv1alpha1.ReasonPreviousKeyInUse
		e.Message = fmt.Sprintf("%s; its grace ends at %s if it stays unused (spec.graceEndsWhenUnusedFor %s), %s", used,
			until.UTC().Format(time.RFC3339), key.Spec.GraceEndsWhenUnusedFor.Duration, bound)
	case !keystate.Delivered(key, rec):
		e.Moved, e.Reason = true, switchboardv1alpha1.ReasonConsumersMoved
		e.Message = fmt.Sprintf("%s, longer than spec.graceEndsWhenUnusedFor (%s); the key is not delivered into a Secret, so no pod is judged: its grace ended on traffic alone",
			used, key.Spec.GraceEndsWhenUnusedFor.Duration)
	case s.Consumers == nil:
		// Not read (NeedsConsumers was false when observed): look again at once.
		wake.At(keystate.StaleRetry)
		e.Reason = switchboardv1alpha1.ReasonPodsHoldPreviousKey
		e.Message = fmt.Sprintf("%s; the pods that take Secret %s are not read yet; its grace ends %s", used, key.Spec.SecretName, bound)
	case s.Consumers.Unreadable != "":
		wake.At(keystate.ConsumersRecheck(false))
		e.Reason = switchboardv1alpha1.ReasonWorkloadsNotReadable
		e.Message = fmt.Sprintf("%s, but switchboard may not read the workloads and pods of namespace %s (%s): bind it the Role switchboard-consumer-reader there to let their restarts end the grace early; until then it ends %s",
			used, key.Namespace, s.Consumers.Unreadable, bound)
	case len(s.Consumers.Holders) > 0:
		wake.At(keystate.ConsumersRecheck(s.Consumers.Watched))
		e.Reason = switchboardv1alpha1.ReasonPodsHoldPreviousKey
		e.Message = fmt.Sprintf("%s, but %s started before key generation %d was written at %s and take%s Secret %s by environment variable or subPath, so they still hold the old key: restart them (kubectl rollout restart); its grace ends when they have, %s",
			used, holdersText(s.Consumers.Holders), rec.Generation, written, map[bool]string{true: "s", false: ""}[len(s.Consumers.Holders) == 1], key.Spec.SecretName, bound)
	default:
		e.Moved, e.Reason = true, switchboardv1alpha1.ReasonConsumersMoved
		e.Message = fmt.Sprintf("%s, longer than spec.graceEndsWhenUnusedFor (%s), and every pod that takes Secret %s by environment variable or subPath started after it was written: its grace ended",
			used, key.Spec.GraceEndsWhenUnusedFor.Duration, key.Spec.SecretName)
	}
	return e
}

// holdersText names the pods that hold the old key, at most maxHoldersShown of them.
func holdersText(holders []string) string {
	switch {
	case len(holders) == 1:
		return "pod " + holders[0]
	case len(holders) <= maxHoldersShown:
		return "pods " + strings.Join(holders, ", ")
	}
	return fmt.Sprintf("pods %s and %d more", strings.Join(holders[:maxHoldersShown], ", "), len(holders)-maxHoldersShown)
}

// ReadConsumers reads the pods of key's namespace that take its delivery Secret in a way that
// needs a restart and started no later than writtenAt, when the new key was written: the
// consumers (found by internal/controller/apikey/workloads) that hold the old key after a rotation, the pods of
// the Deployments, StatefulSets and DaemonSets whose template takes the Secret by environment
// variable (env valueFrom, envFrom) or by a subPath mount, which the kubelet never updates, so
// that only a restart shows them the new key. Pods that mount the Secret as a whole volume see
// the new key within the kubelet's sync period and are judged by their traffic alone.
//
// Read from the API server, not the cache, and only for keys whose grace may end on evidence
// once the old key's traffic has stopped (NeedsConsumers): the operator holds no grant to read
// workloads or pods anywhere; a tenant lets it in its own namespace by binding the
// switchboard-consumer-reader ClusterRole (config/rbac/consumer_reader_role.yaml). Pods are
// read as metadata only (their creation time), selected by the workload's selector.
func ReadConsumers(ctx context.Context, reader client.Reader, key *switchboardv1alpha1.APIKey, writtenAt time.Time) *keystate.Consumers {
	found, forbidden, err := workloads.Find(ctx, reader, key.Namespace, key.Spec.SecretName)
	switch {
	case err != nil:
		return &keystate.Consumers{Unreadable: fmt.Sprintf("could not list workloads: %v", err)}
	case len(forbidden) > 0:
		return &keystate.Consumers{Unreadable: "forbidden to " + strings.Join(forbidden, ", ")}
	}
	state := &keystate.Consumers{}
	for _, w := range found {
		if !w.Use.NeedsRestart() {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(w.Selector)
		if err != nil || sel.Empty() {
			continue // the API server refuses such workloads; none has pods of its own
		}
		pods := &metav1.PartialObjectMetadataList{}
		pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		if err := reader.List(ctx, pods, client.InNamespace(key.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			if apierrors.IsForbidden(err) {
				return &keystate.Consumers{Unreadable: "forbidden to list pods"}
			}
			return &keystate.Consumers{Unreadable: fmt.Sprintf("could not list pods: %v", err)}
		}
		name := strings.ToLower(w.Kind) + "/" + w.Name // as kubectl names it
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && !p.CreationTimestamp.After(writtenAt) {
				state.Holders = append(state.Holders, fmt.Sprintf("%s (%s)", p.Name, name))
			}
		}
	}
	slices.Sort(state.Holders)
	return state
}

// ReasonGraceEndedEarly is the Event reason of an old key whose grace ended before its fixed
// end because its consumers moved to the new key (spec.graceEndsWhenUnusedFor).
const ReasonGraceEndedEarly = "GraceEndedEarly"

// Policies end the previous key's grace: on evidence, or at its fixed end.
var Policies = keystate.Chain{
	{Name: "GraceEndsOnEvidence", Decide: graceEndsOnEvidence},
	{Name: "GraceEnded", Decide: graceEnded},
}

// Observe wakes the reconcile when the previous key's grace ends, and reads the evidence of it
// for a key not expired.
func Observe(s *keystate.State, _ keystate.Params, obs *keystate.Observation) {
	if obs.Hash != keystate.HashFound {
		return
	}
	if until, ok := keysecret.PreviousValidUntil(s.Hash); ok && s.Now.Before(until) {
		obs.Wake.At(until.Sub(s.Now))
	}
	if !obs.Expired {
		obs.Grace = evidenceOf(s, obs.Rec, &obs.Wake)
	}
}

// graceEndsOnEvidence: the old key's consumers have moved (evidenceOf), so its hash goes
// before the fixed grace ends.
func graceEndsOnEvidence(in keystate.Input) (keystate.Decision, bool) {
	if in.Obs.Hash != keystate.HashFound || !in.Obs.Grace.Moved {
		return keystate.Decision{}, false
	}
	return keystate.Decision{Do: dropPrevious{early: in.Obs.Grace.Message}, Why: "the old key's consumers have moved (spec.graceEndsWhenUnusedFor)"}, true
}

// graceEnded: the previous key's grace period ended; its hash goes.
func graceEnded(in keystate.Input) (keystate.Decision, bool) {
	if in.Obs.Hash != keystate.HashFound {
		return keystate.Decision{}, false
	}
	until, ok := keysecret.PreviousValidUntil(in.S.Hash)
	if !ok || in.S.Now.Before(until) {
		return keystate.Decision{}, false
	}
	return keystate.Decision{Do: dropPrevious{}, Why: "the previous key's grace period ended"}, true
}

// dropPrevious drops the previous key's hash: its grace period ended, or its consumers moved.
type dropPrevious struct {
	// early is the evidence that ended the grace before its fixed end ("" when it ran out).
	early string
}

// Confirm: an early end rests on the old key's record of use (status.previousKeyUse), which the
// cache may not have yet — the server's last write of it may be the newest thing there is —
// and on the hash Secret: both are read from the API server, and a cached APIKey behind the
// live one makes the reconcile stale. A grace that ran out rests on the hash Secret's instant
// alone.
func (p dropPrevious) Confirm(ctx context.Context, env *keystate.Env, s *keystate.State) (bool, error) {
	if p.early == "" {
		return false, nil
	}
	return env.LiveKeyAndHash(ctx, s)
}

func (p dropPrevious) Do(ctx context.Context, env *keystate.Env, s *keystate.State, _ keystate.Decision) (keystate.Outcome, error) {
	err := env.Patch(ctx, s.Hash, func() {
		if p.early != "" {
			// Why it ended goes into the same write: the GraceEvidence condition says it from the
			// record, even when the status patch that follows is lost.
			keysecret.EndPreviousEarly(s.Hash, p.early)
		} else {
			keysecret.DropPrevious(s.Hash)
		}
	})
	if err != nil {
		return keystate.Outcome{}, fmt.Errorf("dropping the previous key's hash: %w", err)
	}
	if p.early != "" {
		log.FromContext(ctx).Info("the previous key's grace ended early: its consumers moved", "hint", s.Key.Status.KeyHint)
		env.Recorder.Eventf(s.Key, nil, corev1.EventTypeNormal, ReasonGraceEndedEarly, "EndGrace", "%s", p.early)
		return keystate.Outcome{}, nil
	}
	log.FromContext(ctx).Info("the previous key's grace period ended", "hint", s.Key.Status.KeyHint)
	return keystate.Outcome{}, nil
}

// SetCondition sets GraceEvidence while an old key's grace may end on evidence (e), and keeps
// what it last said once that grace is over (until the next rotation); a key that no longer
// asks for it, or is revoked or expired (ended), has none.
func SetCondition(key *switchboardv1alpha1.APIKey, ended bool, e *keystate.GraceEvidence) {
	const cond = switchboardv1alpha1.ConditionGraceEvidence
	switch {
	case key.Spec.GraceEndsWhenUnusedFor == nil || ended:
		meta.RemoveStatusCondition(&key.Status.Conditions, cond)
	case e.Active:
		status := metav1.ConditionFalse
		if e.Moved || e.Ended {
			status = metav1.ConditionTrue
		}
		objstatus.SetCondition(&key.Status.Conditions, key.Generation, cond, status, e.Reason, e.Message)
	}
}
