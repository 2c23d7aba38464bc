// Package keysecret is the one home of the key-Secret format: the names, labels, types and data
// of the Secrets switchboard writes for an APIKey (and of the copies of a KeyWebhook's signing
// secrets, signing.go), and the checks that tell switchboard's own Secrets from ones a tenant
// planted. The operator writes these Secrets, the server's index parses hash Secrets, the
// clients claim reveal Secrets and the webhook sender reads the signing copies, all through
// this package.
//
// Three kinds of Secret make up an issued key:
//
//   - the hash Secret, "apikey-<APIKey UID>" in the system namespace, of type TypeHash, holds the
//     SHA-256 of the current key (and of the previous one during a rotation's grace period),
//     and the record of its issue (generation, hint, the rotation it carried out: Issued).
//     Tenants and the server cannot write the system namespace, so this is the record
//     switchboard trusts; the APIKey's status only mirrors it.
//   - the reveal Secret, "<APIKey name>-key-<generation>" in the APIKey's namespace, of type
//     TypeReveal and immutable, holds the plaintext until someone claims (reads and deletes) it.
//   - the delivery Secret, spec.secretName in the APIKey's namespace, of type Opaque, holds the
//     plaintext for pods that mount it.
//
// Reveal and delivery Secrets live where tenants can write, so a label, a name or a type proves
// nothing about them: switchboard believes one only when its value hashes to what the hash
// Secret stores for that generation (HoldsHashedKey), and deletes or overwrites one only when it
// names the APIKey as its controller (IsOwnedBy).
package keysecret

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// Labels, Secret types and data keys. They are part of switchboard's contract with installed
// clusters: changing one breaks them.
const (
	// LabelManagedBy marks every Secret switchboard creates; its value is ManagedBy.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is the value of LabelManagedBy.
	ManagedBy = "switchboard"

	// LabelComponent says which kind of key Secret an object is: ComponentHash,
	// ComponentReveal or ComponentDelivery.
	LabelComponent = "switchboard.dev/component"
	// ComponentHash marks a hash Secret in the system namespace.
	ComponentHash = "key-hash"
	// ComponentReveal marks a one-time reveal Secret in a tenant namespace.
	ComponentReveal = "key-reveal"
	// ComponentDelivery marks a delivery Secret (spec.secretName) in a tenant namespace.
	ComponentDelivery = "key-delivery"

	// LabelAPIKeyNamespace is the namespace of the APIKey a hash Secret belongs to.
	LabelAPIKeyNamespace = "switchboard.dev/apikey-namespace"
	// LabelAPIKeyName is the name of the APIKey a Secret belongs to.
	LabelAPIKeyName = "switchboard.dev/apikey-name"
	// LabelAPIKeyUID is the UID of the APIKey a Secret belongs to.
	LabelAPIKeyUID = "switchboard.dev/apikey-uid"
	// LabelTemplate is the digest of the spec.secretTemplate a delivery Secret was given.
	LabelTemplate = "switchboard.dev/secret-template"
	// LabelGeneration is the status.keyGeneration of the key a Secret holds or hashes.
	LabelGeneration = "switchboard.dev/key-generation"

	// TypeHash is the type of hash Secrets.
	TypeHash corev1.SecretType = "switchboard.dev/key-hash"
	// TypeReveal is the type of one-time reveal Secrets.
	TypeReveal corev1.SecretType = "switchboard.dev/key-reveal"
	// TypeDelivery is the type of delivery Secrets: Opaque, so that any workload can mount one.
	TypeDelivery = corev1.SecretTypeOpaque

	// DataHash holds the lower-case hex SHA-256 of the current key in a hash Secret.
	DataHash = "sha256"
	// DataPreviousHash holds the hex SHA-256 of the key replaced by the last rotation.
	DataPreviousHash = "previous.sha256"
	// DataPreviousValidUntil holds the RFC 3339 instant the previous key stops working.
	DataPreviousValidUntil = "previous.validUntil"

	// DataRotationHandled holds, in a hash Secret, the spec.rotation.requestedAt that the key
	// generation it hashes carried out ("" when none). With the generation label and DataHint it
	// is the operator's record of issuance: status says the same, but others may write status.
	DataRotationHandled = "rotation.handledRequestedAt"
	// DataRevealExpiresAt holds, in a hash Secret, the RFC 3339 instant at which the unclaimed
	// reveal Secret of the key generation it hashes is deleted (absent: the key was delivered, or
	// the record was written before switchboard kept it). Part of the record of issuance: the
	// status's revealExpiresAt only mirrors it.
	DataRevealExpiresAt = "reveal.expiresAt"
	// DataDelivery holds, in a hash Secret, the name of the delivery Secret the key generation
	// it hashes was written to (absent: the key was revealed, or the record was written before
	// switchboard kept it). Part of the record of issuance.
	DataDelivery = "delivery.secretName"

	// DataIssuedAt and DataNotAfter record when the current key was issued and when it stops
	// being accepted (its lifetime's end; absent: it does not end on its own). The API server
	// refuses the current key from DataNotAfter on.
	DataIssuedAt = "issuedAt"
	DataNotAfter = "notAfter"
	// DataRenewal says, in a hash Secret, that the key generation it hashes was issued by an
	// automatic renewal ("true"; absent: a first key, a rotation or a redelivery). Part of the
	// record of issuance, so that a renewal interrupted before its status patch is still
	// reported as one when the next reconcile publishes it.
	DataRenewal = "renewal"
	// DataPreviousEndedEarly holds, in a hash Secret, the evidence that ended the grace of the
	// key the current generation replaced before its fixed end (spec.graceEndsWhenUnusedFor),
	// in a sentence (absent: it did not, or not yet). Written with the previous hash's removal,
	// so that what ended the grace is said even when the status patch that followed was lost.
	DataPreviousEndedEarly = "previous.endedEarly"
	// DataRevokedAt and DataRevokedReason record, in a hash Secret, that the operator revoked
	// the key for a reason of its own (spec.revokeWhenUnusedFor), rather than writing the
	// user's spec.revoked: the API server refuses every key of such a hash Secret, and the
	// operator never removes the entry nor issues another key under it. The reason is a Ready
	// condition reason (RevokedWhenUnused).
	DataRevokedAt     = "revokedAt"
	DataRevokedReason = "revoked.reason"
	// DataLeakedHash, DataLeakedAt, DataLeakedGeneration and DataLeakedLastUsedAt record, in a
	// hash Secret, the last key of the APIKey reported leaked (a LeakReport in the system
	// namespace): its hash, when the operator refused it, its generation and when the APIKey
	// was last used before (absent: unknown). The API server refuses that hash, current or
	// previous, from the moment it is recorded; the record outlives the key's replacement so
	// that the same report is acted on once (SetLeaked).
	DataLeakedHash       = "leaked.sha256"
	DataLeakedAt         = "leaked.at"
	DataLeakedGeneration = "leaked.generation"
	DataLeakedLastUsedAt = "leaked.lastUsedAt"
	// DataLeakedAcceptedUntil, when present, is the RFC 3339 instant until which the leaked
	// key is still accepted (spec.leakOverlap: its replacement is delivered first); the API
	// server refuses it from then on, and at once when the value does not parse.
	DataLeakedAcceptedUntil = "leaked.acceptedUntil"
	// DataLeakedRollout says what became of the rollout of the workloads that read a leaked
	// delivered key's Secret: RolloutPending until the operator tried, then what it did, in a
	// sentence (absent: no rollout is asked, the key was not delivered).
	DataLeakedRollout = "leaked.rollout"
	// DataLeakedHint, DataLeakedSource and DataLeakedURL copy, into the record, what the
	// LeakReport said of the leak (the key's hint, how it was reported, where it was found), so
	// that what the APIKey says of its leak outlives the report, which the operator deletes.
	DataLeakedHint   = "leaked.keyHint"
	DataLeakedSource = "leaked.source"
	DataLeakedURL    = "leaked.url"
	// DataLeakedReplaceAfter, when present, is the RFC 3339 instant before which the leaked
	// current key is not replaced (it is refused meanwhile): the APIKey's last replacement of a
	// leaked key was less than the platform's minimum interval between renewals before.
	// DataLeakedLastReplacement is when that last replacement was issued, or is to be: each
	// record carries it on from the one before, so that the interval holds whatever leaked in
	// between (a previous key, a key rotated by hand).
	DataLeakedReplaceAfter    = "leaked.replaceAfter"
	DataLeakedLastReplacement = "leaked.lastReplacement"
	// DataKey holds the plaintext key in reveal and delivery Secrets.
	DataKey = "apiKey"
	// DataHint holds the key's hint in reveal, delivery and hash Secrets.
	DataHint = "keyHint"
)

// HashName is the name of the hash Secret of the APIKey with this UID. The UID, not the name,
// makes it unique: an APIKey deleted and created again under the same name gets another one.
func HashName(uid types.UID) string { return "apikey-" + string(uid) }

// RevealName is the name of the reveal Secret of key generation gen of the named APIKey.
func RevealName(apiKeyName string, gen int64) string {
	return apiKeyName + "-key-" + strconv.FormatInt(gen, 10)
}

// Generation reads the key generation label of a key Secret; 0 when it is absent or not a
// positive number.
func Generation(o metav1.Object) int64 {
	g, err := strconv.ParseInt(o.GetLabels()[LabelGeneration], 10, 64)
	if err != nil || g < 0 {
		return 0
	}
	return g
}

// Selector is the label set that selects every Secret of one component that switchboard wrote.
func Selector(component string) map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy, LabelComponent: component}
}

// labelsFor are the labels of a key Secret of key generation gen.
func labelsFor(key *switchboardv1alpha1.APIKey, component string, gen int64) map[string]string {
	l := Selector(component)
	l[LabelAPIKeyName] = key.Name
	l[LabelAPIKeyUID] = string(key.UID)
	l[LabelGeneration] = strconv.FormatInt(gen, 10)
	if component == ComponentHash {
		// A hash Secret lives in another namespace: the label leads back to its APIKey.
		l[LabelAPIKeyNamespace] = key.Namespace
	}
	return l
}

// controllerRef makes the APIKey the controller of a Secret of its namespace, so that the
// Secret goes with it and so that switchboard can recognise the Secret as its own.
func controllerRef(key *switchboardv1alpha1.APIKey) metav1.OwnerReference {
	return *metav1.NewControllerRef(key, switchboardv1alpha1.GroupVersion.WithKind("APIKey"))
}
