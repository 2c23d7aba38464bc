package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConnectionIDPrefix begins every public connection id.
const ConnectionIDPrefix = "conn_"

// ConnectionSpec is what a tenant declares about a connection. That spec.id is set only at
// creation and never changed is a rule of the Connection itself, so that removing the whole
// spec cannot undo it.
type ConnectionSpec struct {
	// id pins the public id of this connection (conn_ followed by lower-case letters and digits),
	// so that a connection moved or restored through GitOps keeps the id its clients know.
	// Ids are unique within a namespace: another Connection of this namespace with the same id
	// makes this one wait (Ready=False IDConflict); Connections of other namespaces never do.
	// When empty the operator assigns one. It is immutable once set.
	// +optional
	// +kubebuilder:validation:MinLength=6
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^conn_[a-z0-9]+$`
	ID string `json:"id,omitempty"`

	// displayName is a human-readable name, returned as display_name by the API: at most 256
	// characters, no control characters.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.matches('[\\x00-\\x1f]')",message="displayName must not contain control characters"
	DisplayName string `json:"displayName,omitempty"`

	// provider names what this connection connects to (for example "postgres" or "salesforce").
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._-]*$`
	Provider string `json:"provider,omitempty"`

	// metadata holds non-secret attributes returned to API clients as they are: at most 50
	// keys of at most 40 characters, each value at most 500 characters (Stripe's limits), at
	// most 32 KiB (32768 bytes of UTF-8) of values in all, no control characters in keys, and
	// none in values but tab, line feed and carriage return. These bound what one Connection
	// costs every API server replica, which caches them all.
	// Never put credentials here: use credentialsSecretRef.
	// +optional
	// +kubebuilder:validation:MaxProperties=50
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) >= 1 && size(k) <= 40)",message="metadata keys must be 1 to 40 characters long"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.matches('[\\x00-\\x1f]') && !self[k].matches('[\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f]'))",message="metadata keys must not contain control characters, and values none but tab, line feed and carriage return"
	// +kubebuilder:validation:XValidation:rule="self.map(k, size(bytes(self[k]))).sum() <= 32768",message="metadata values must be at most 32768 bytes (32 KiB of UTF-8) in all"
	Metadata map[string]MetadataValue `json:"metadata,omitempty"`

	// credentialsSecretRef names a Secret in this namespace with the connection's credentials.
	// It is never exposed by the /v1 API.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.name) || size(self.name) <= 253",message="credentialsSecretRef.name must be at most 253 characters long"
	CredentialsSecretRef *corev1.LocalObjectReference `json:"credentialsSecretRef,omitempty"`
}

// MetadataValue is one value of a Connection's metadata: at most 500 characters. (A type of its
// own, so that the schema bounds each value where the API server's estimate of the cost of the
// metadata rules sees the bound.)
// +kubebuilder:validation:MaxLength=500
type MetadataValue string

// ConnectionStatus is what the operator observed and decided about a connection.
type ConnectionStatus struct {
	// observedGeneration is the metadata.generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// id is the public id of this connection, assigned once and never changed.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="status.id is assigned once and never changed"
	ID string `json:"id,omitempty"`

	// conditions describe the state of the connection; Ready is True once it has an id.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=conn,categories=switchboard
// +kubebuilder:printcolumn:name="ID",type=string,JSONPath=`.status.id`
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.provider`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.spec) && has(oldSelf.spec.id)) == (has(self.spec) && has(self.spec.id))",message="spec.id can only be set when the Connection is created, and never removed"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.spec) || !has(oldSelf.spec.id) || !has(self.spec) || !has(self.spec.id) || self.spec.id == oldSelf.spec.id",message="spec.id is immutable; create a new Connection to change it"

// Connection is a tenant's connection, listed by GET /v1/connections for the API keys of its namespace.
type Connection struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired connection.
	// +optional
	Spec ConnectionSpec `json:"spec,omitempty"`

	// status is the connection as the operator last saw it.
	// +optional
	Status ConnectionStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ConnectionList is a list of Connections.
type ConnectionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Connection `json:"items"`
}
