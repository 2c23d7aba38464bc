package plugin

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// Key states as the list shows them.
const (
	StateActive           = "Active"
	StateRevoked          = "Revoked"
	StateExpired          = "Expired"
	StateIssuing          = "Issuing"
	StateRotating         = "Rotating"
	StateDeleting         = "Deleting"
	StateDeliveryConflict = "DeliveryConflict"
)

// keyState sums up an APIKey in one word. What the spec says (revoked, expiry passed) wins
// over a status the operator may not have updated yet, because the API server refuses such a
// key at once too.
func keyState(k *switchboardv1alpha1.APIKey, now time.Time) string {
	ready := meta.FindStatusCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady)
	switch {
	case k.DeletionTimestamp != nil:
		return StateDeleting
	case k.Spec.Revoked:
		return StateRevoked
	case k.Spec.ExpiresAt != nil && !now.Before(k.Spec.ExpiresAt.Time):
		return StateExpired
	case ready == nil:
		return StateIssuing
	case ready.Status == metav1.ConditionTrue:
		if k.Spec.Rotation != nil && k.Spec.Rotation.RequestedAt != k.Status.LastHandledRotationAt {
			return StateRotating
		}
		return StateActive
	case ready.Reason == switchboardv1alpha1.ReasonDeliveryConflict:
		return StateDeliveryConflict
	case ready.Reason == switchboardv1alpha1.ReasonRevoked:
		return StateRevoked
	case ready.Reason == switchboardv1alpha1.ReasonExpired:
		return StateExpired
	case ready.Reason == "":
		return StateIssuing
	}
	return ready.Reason
}

// ago says how long before now t was ("5m ago"), or never.
func ago(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "never"
	}
	d := now.Sub(t.Time)
	if d < 0 {
		return "in " + duration.HumanDuration(-d)
	}
	return duration.HumanDuration(d) + " ago"
}

// until says when t comes ("in 29d") or came ("2h ago"), or never.
func until(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "never"
	}
	d := t.Sub(now)
	if d <= 0 {
		return duration.HumanDuration(-d) + " ago"
	}
	return "in " + duration.HumanDuration(d)
}

// age is the time since t, as kubectl's AGE column shows it.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
