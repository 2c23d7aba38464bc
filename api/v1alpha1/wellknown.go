package v1alpha1

// Names shared by the operator, the API server and the clients. They are part of switchboard's
// contract: changing one breaks installed clusters. The format of the Secrets that hold a key
// (names, labels, types, data) lives in internal/keysecret.
const (
	// FinalizerAPIKey lets the operator delete an APIKey's hash Secret, which lives in
	// another namespace and so cannot be garbage-collected through an owner reference.
	FinalizerAPIKey = "switchboard.dev/key-hash"

	// DefaultSystemNamespace is where the operator keeps hash Secrets unless told otherwise.
	DefaultSystemNamespace = "switchboard-system"
)
