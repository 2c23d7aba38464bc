package v1alpha1

// Labels, annotations, Secret types and data keys shared by the operator, the API server and
// the clients. They are part of switchboard's contract: changing one breaks installed clusters.
const (
	// LabelManagedBy marks every object switchboard creates; its value is ManagedByValue.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "switchboard"

	// LabelComponent says which kind of switchboard Secret an object is (see the Component values).
	LabelComponent = "switchboard.dev/component"
	// ComponentKeyHash marks a hash Secret in the system namespace.
	ComponentKeyHash = "key-hash"
	// ComponentKeyReveal marks a one-time reveal Secret in a tenant namespace.
	ComponentKeyReveal = "key-reveal"
	// ComponentKeyDelivery marks a delivery Secret (spec.secretName) in a tenant namespace.
	ComponentKeyDelivery = "key-delivery"

	// LabelAPIKeyNamespace, LabelAPIKeyName and LabelAPIKeyUID name the APIKey a Secret belongs to.
	LabelAPIKeyNamespace = "switchboard.dev/apikey-namespace"
	// LabelAPIKeyName is the name of the APIKey a Secret belongs to.
	LabelAPIKeyName = "switchboard.dev/apikey-name"
	// LabelAPIKeyUID is the UID of the APIKey a Secret belongs to.
	LabelAPIKeyUID = "switchboard.dev/apikey-uid"
	// LabelKeyGeneration is the status.keyGeneration of the key a Secret holds or hashes.
	LabelKeyGeneration = "switchboard.dev/key-generation"

	// SecretTypeKeyHash is the type of hash Secrets.
	SecretTypeKeyHash = "switchboard.dev/key-hash"
	// SecretTypeKeyReveal is the type of one-time reveal Secrets.
	SecretTypeKeyReveal = "switchboard.dev/key-reveal"

	// HashSecretCurrentKey holds the lower-case hex SHA-256 of the current key.
	HashSecretCurrentKey = "sha256"
	// HashSecretPreviousKey holds the hex SHA-256 of the key replaced by the last rotation.
	HashSecretPreviousKey = "previous.sha256"
	// HashSecretPreviousValidUntilKey holds the RFC 3339 instant the previous key stops working.
	HashSecretPreviousValidUntilKey = "previous.validUntil"

	// KeySecretDataKey is the data key of the plaintext in reveal and delivery Secrets.
	KeySecretDataKey = "apiKey"
	// KeyHintSecretDataKey is the data key of the hint in reveal and delivery Secrets.
	KeyHintSecretDataKey = "keyHint"

	// FinalizerAPIKey lets the operator delete an APIKey's hash Secret, which lives in
	// another namespace and so cannot be garbage-collected through an owner reference.
	FinalizerAPIKey = "switchboard.dev/key-hash"

	// DefaultSystemNamespace is where the operator keeps hash Secrets unless told otherwise.
	DefaultSystemNamespace = "switchboard-system"
)
