package keyclient

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// KeyState sums up an APIKey in one word.
type KeyState string

// The states. A Ready=False reason the client does not know is its own state, as it is.
const (
	StateActive           KeyState = "Active"
	StateRevoked          KeyState = "Revoked"
	StateExpired          KeyState = "Expired"
	StateIssuing          KeyState = "Issuing"
	StateRotating         KeyState = "Rotating"
	StateDeleting         KeyState = "Deleting"
	StateDeliveryConflict KeyState = "DeliveryConflict"
)

// State sums up an APIKey in one word. What the spec says (revoked, expiry passed, being
// deleted) wins over a status the operator may not have updated yet, because the API server
// refuses such a key at once too.
func State(k *switchboardv1alpha1.APIKey, now time.Time) KeyState {
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
		if rotationPending(k) {
			return StateRotating
		}
		return StateActive
	case ready.Reason == switchboardv1alpha1.ReasonDeliveryConflict:
		return StateDeliveryConflict
	case ready.Reason == switchboardv1alpha1.ReasonRevoked, ready.Reason == switchboardv1alpha1.ReasonUnusedRevoked:
		// The second: revoked by the operator for want of use, which it records in the hash
		// Secret and the status, not in the user's spec.
		return StateRevoked
	case ready.Reason == switchboardv1alpha1.ReasonExpired:
		return StateExpired
	case ready.Reason == "", ready.Reason == switchboardv1alpha1.ReasonIssuing:
		return StateIssuing
	}
	return KeyState(ready.Reason)
}

// Live reports that a key can still be used, rotated or revoked: it is neither revoked (by its
// spec, or by the operator for want of use) nor being deleted.
func Live(k *switchboardv1alpha1.APIKey) bool {
	ready := meta.FindStatusCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady)
	return !k.Spec.Revoked && k.DeletionTimestamp == nil && (ready == nil || ready.Reason != switchboardv1alpha1.ReasonUnusedRevoked)
}

// CreatedAt is when the APIKey's first key was issued, or when the APIKey was created while
// none has been issued yet: what the plugin's and the panel's CREATED columns show.
func CreatedAt(k *switchboardv1alpha1.APIKey) *metav1.Time {
	if k.Status.CreatedAt != nil {
		return k.Status.CreatedAt
	}
	return &k.CreationTimestamp
}

// rotationPending reports a rotation requested and not carried out yet.
func rotationPending(k *switchboardv1alpha1.APIKey) bool {
	return k.Spec.Rotation != nil && k.Spec.Rotation.RequestedAt != k.Status.LastHandledRotationAt
}

// RevealState is what can be done about the current key's one-time reveal.
type RevealState int

// The reveal states.
const (
	// RevealWaiting: the operator has not published the current key yet.
	RevealWaiting RevealState = iota
	// RevealClaimable: status.revealSecretName names the reveal Secret; Claim it.
	RevealClaimable
	// RevealDelivered: the key is kept in spec.secretName.
	RevealDelivered
	// RevealGone: claimed by someone, or expired unclaimed.
	RevealGone
)

// RevealStatus tells the state of the current key's reveal from the status.
func RevealStatus(k *switchboardv1alpha1.APIKey) RevealState {
	ready := meta.IsStatusConditionTrue(k.Status.Conditions, switchboardv1alpha1.ConditionReady)
	revealed := meta.FindStatusCondition(k.Status.Conditions, switchboardv1alpha1.ConditionRevealed)
	switch {
	case !ready || k.Status.KeyGeneration == 0:
		return RevealWaiting
	case k.Spec.SecretName != "":
		if revealed != nil && revealed.Reason == switchboardv1alpha1.ReasonDelivered {
			return RevealDelivered
		}
		return RevealWaiting
	case k.Status.RevealSecretName != "":
		return RevealClaimable
	case revealed != nil && (revealed.Reason == switchboardv1alpha1.ReasonRevealClaimed || revealed.Reason == switchboardv1alpha1.ReasonRevealExpired):
		return RevealGone
	}
	return RevealWaiting
}
