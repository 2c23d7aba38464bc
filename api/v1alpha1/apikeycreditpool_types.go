package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// APIKeyCreditPoolSpec is the credits that the keys naming the pool spend together.
type APIKeyCreditPoolSpec struct {
	// credits are how many requests all the keys naming the pool may make per period
	// together, and when they refill, as an APIKey's own spec.credits.
	// +required
	Credits APIKeyCredits `json:"credits"`
}

// APIKeyCreditPool is credits that many APIKeys of its namespace spend together, by naming it
// in spec.creditPool: a plan bought once by an organisation for all of its keys. Its count is
// named by the pool's UID, so a pool deleted and created again under the same name starts with
// its whole amount, and a key of another namespace can never spend it.
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=switchboard
// +kubebuilder:printcolumn:name="Amount",type=integer,JSONPath=`.spec.credits.amount`
// +kubebuilder:printcolumn:name="Refill",type=string,JSONPath=`.spec.credits.refill`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type APIKeyCreditPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the pool's credits.
	// +required
	Spec APIKeyCreditPoolSpec `json:"spec"`
}

// APIKeyCreditPoolList is a list of APIKeyCreditPools.
// +kubebuilder:object:root=true
type APIKeyCreditPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []APIKeyCreditPool `json:"items"`
}
