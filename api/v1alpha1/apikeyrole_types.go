package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxPermissionRoles bounds an APIKey's spec.permissionRoles, as its marker states it.
const MaxPermissionRoles = 8

// APIKeyRoleSpec is a reusable list of permission rules.
type APIKeyRoleSpec struct {
	// rules are Allow and Deny rules (at most 32, at most 8 with a condition), read after the permissions of a key that
	// names the role and before the rules of the roles it names next; the first that matches
	// a request decides.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.filter(r, has(r.condition)).size() <= 8",message="at most 8 rules may have a condition"
	Rules []PermissionRule `json:"rules,omitempty"`
}

// APIKeyRole is a list of permission rules that many APIKeys of its namespace share by naming
// it in spec.permissionRoles: editing it changes what all of them may do.
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=switchboard
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type APIKeyRole struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the role's rules.
	// +required
	Spec APIKeyRoleSpec `json:"spec"`
}

// APIKeyRoleList is a list of APIKeyRoles.
// +kubebuilder:object:root=true
type APIKeyRoleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []APIKeyRole `json:"items"`
}
