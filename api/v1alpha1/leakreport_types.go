package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Sources of a LeakReport: the two ways GitHub's secret scanning reports a leaked key.
const (
	// LeakSourceGitHubPartner is GitHub's secret scanning partner program: a signed POST of the
	// tokens matching a provider's registered pattern.
	LeakSourceGitHubPartner = "GitHubPartner"
	// LeakSourceGitHubAlert is a secret_scanning_alert webhook of the platform's own
	// organization, for a custom pattern of its key prefix.
	LeakSourceGitHubAlert = "GitHubAlert"
)

// LeakReportSpec is what a verified report said: which key (by its hash, never the key) was
// found where. The component that received the report wrote it; nobody changes it after.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a leak report is a record: its spec cannot change"
type LeakReportSpec struct {
	// keyHash is the SHA-256 of the leaked key in lower-case hex, as hash Secrets store it.
	// +required
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	KeyHash string `json:"keyHash"`

	// keyHint is the leaked key's hint (its prefix and last characters), for people reading
	// the report; never the key.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	KeyHint string `json:"keyHint,omitempty"`

	// source is how the report arrived.
	// +required
	// +kubebuilder:validation:Enum=GitHubPartner;GitHubAlert
	Source string `json:"source"`

	// url is where the key was found, as the report says (a commit, a file, an issue).
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url,omitempty"`

	// location is what the key was found in, as the report names it (the partner program's
	// "source", such as "content" or "commit"; an alert's location type).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Location string `json:"location,omitempty"`

	// reference identifies the report at its sender, when it has an identity of its own: an
	// organization alert's "owner/repository#number".
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Reference string `json:"reference,omitempty"`

	// reportedAt is when switchboard received the report.
	// +required
	ReportedAt metav1.Time `json:"reportedAt"`
}

// LeakReportStatus is what the operator did about the report.
type LeakReportStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// keyRef names the APIKey whose key leaked, once the operator found it.
	// +optional
	KeyRef *LeakedKeyReference `json:"keyRef,omitempty"`

	// conditions: Ready is True once the operator acted on the report (the key refused, its
	// replacement issued), False with the reason while it cannot (no such key).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// LeakedKeyReference names the APIKey a leaked key belongs to.
type LeakedKeyReference struct {
	// namespace is the APIKey's namespace (its tenant).
	// +required
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// name is the APIKey's name.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// uid is the APIKey's UID, so that a new APIKey of the same name is not taken for it.
	// +required
	// +kubebuilder:validation:MaxLength=36
	UID string `json:"uid"`
}

// LeakReport records, in switchboard's own namespace where no tenant can write, that a key was
// reported leaked. The component that receives GitHub's reports may create these and nothing
// else; the operator acts on them. Its name is derived from the key's hash, so the same key
// reported twice is one record, acted on once.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=switchboard
// +kubebuilder:printcolumn:name="Hint",type=string,JSONPath=`.spec.keyHint`
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.spec.source`
// +kubebuilder:printcolumn:name="Key",type=string,JSONPath=`.status.keyRef.name`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type LeakReport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the report.
	// +required
	Spec LeakReportSpec `json:"spec"`

	// status is what the operator did about it.
	// +optional
	Status LeakReportStatus `json:"status,omitempty"`
}

// LeakReportList is a list of LeakReports.
// +kubebuilder:object:root=true
type LeakReportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LeakReport `json:"items"`
}

// LeakReportName is the name of the LeakReport of the key whose SHA-256 is keyHash (hex): one
// record per leaked key, however often and however it is reported.
func LeakReportName(keyHash string) string { return "leak-" + keyHash }
