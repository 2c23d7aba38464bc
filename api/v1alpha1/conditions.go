package v1alpha1

// Condition types.
const (
	// ConditionReady is True when the object is usable: a Connection has its id, an APIKey
	// authenticates requests.
	ConditionReady = "Ready"

	// ConditionRevealed tells what became of an APIKey's one-time reveal: claimed, delivered,
	// still pending, or expired unclaimed.
	ConditionRevealed = "Revealed"
)

// Reasons of the Ready condition.
const (
	// ReasonIDAssigned: the Connection has its public id.
	ReasonIDAssigned = "IDAssigned"
	// ReasonIDConflict: the Connection's spec.id is already used by another Connection of its namespace.
	ReasonIDConflict = "IDConflict"

	// ReasonKeyIssued: the APIKey has a valid key.
	ReasonKeyIssued = "KeyIssued"
	// ReasonIssuing: the operator is issuing the first key.
	ReasonIssuing = "Issuing"
	// ReasonHashMissing: the key was issued but its hash Secret is gone (deleted by hand), so
	// the key is refused; a rotation issues a new one.
	ReasonHashMissing = "HashMissing"
	// ReasonRevoked: spec.revoked is true; the key is refused.
	ReasonRevoked = "Revoked"
	// ReasonExpired: spec.expiresAt has passed; the key is refused.
	ReasonExpired = "Expired"
	// ReasonDeliveryConflict: spec.secretName names a Secret that switchboard does not manage.
	ReasonDeliveryConflict = "DeliveryConflict"
	// ReasonLeaked: the current key was reported leaked and is refused; no replacement is
	// issued yet (the Leaked condition says why).
	ReasonLeaked = "Leaked"
)

// Reasons of the Revealed condition.
const (
	// ReasonRevealPending: the reveal Secret waits to be claimed.
	ReasonRevealPending = "Pending"
	// ReasonRevealClaimed: the reveal Secret was claimed (read and deleted) by someone.
	ReasonRevealClaimed = "Claimed"
	// ReasonRevealExpired: nobody claimed the reveal Secret in time; it was deleted. The key
	// stays valid; rotate it to get one you can see.
	ReasonRevealExpired = "RevealExpired"
	// ReasonDelivered: the key is kept in spec.secretName.
	ReasonDelivered = "Delivered"
)

// ConditionLeaked is True on an APIKey once a verified report (a LeakReport in the system
// namespace) said one of its keys leaked: that key is refused, and replaced when it was the
// current one. It stays True for the record; a later leak of a later key updates it.
const ConditionLeaked = "Leaked"

// Reasons of the Leaked condition.
const (
	// ReasonLeakReplaced: the leaked key is refused and a new key replaced it (in the delivery
	// Secret, or in a reveal Secret), or it was the previous key, already replaced, whose grace
	// ended at once.
	ReasonLeakReplaced = "Replaced"
	// ReasonLeakRefused: the leaked key is refused and no replacement is issued yet, or none can
	// be (the delivery Secret is someone else's, the APIKey expired or was revoked).
	ReasonLeakRefused = "Refused"
	// ReasonLeakReplacementHeld: the leaked current key is refused, and its replacement is
	// issued at the instant the message names: the APIKey's last leaked key was replaced less
	// than the platform's minimum interval between renewals before.
	ReasonLeakReplacementHeld = "ReplacementHeld"
)

// Reasons of a LeakReport's Ready condition.
const (
	// ReasonLeakActedOn: the operator refused the leaked key (and replaced it where it could).
	ReasonLeakActedOn = "KeyRefused"
	// ReasonLeakActing: the key is found; the operator is refusing it.
	ReasonLeakActing = "Acting"
	// ReasonKeyNotFound: no key switchboard holds has the reported hash: never issued here, or
	// replaced and dropped long ago (and so refused already).
	ReasonKeyNotFound = "KeyNotFound"
)
