// +kubebuilder:object:generate=true
// +groupName=switchboard.dev

// Package v1alpha1 contains the switchboard.dev/v1alpha1 API: Connections, which a tenant's
// API keys list through /v1/connections, and APIKeys, whose hashes authenticate those calls.
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every switchboard object.
	GroupVersion = schema.GroupVersion{Group: "switchboard.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme. It is
	// apimachinery's builder, so importing this package pulls in no controller-runtime.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &Connection{}, &ConnectionList{}, &APIKey{}, &APIKeyList{}, &LeakReport{}, &LeakReportList{},
		&KeyWebhook{}, &KeyWebhookList{}, &WebhookOutbox{}, &WebhookOutboxList{}, &APIKeyHistory{}, &APIKeyHistoryList{}, &APIKeyRole{}, &APIKeyRoleList{},
		&APIKeyCreditPool{}, &APIKeyCreditPoolList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
