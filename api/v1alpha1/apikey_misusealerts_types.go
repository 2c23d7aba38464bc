package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// APIKeyMisuseAlerts is the operator's record of the last apikey.misused event it sent for a
// bound key: which of the misuses status.binding counted it reported, and when. The API server
// may not write it (the server status policy), so a re-reconcile or an operator restart sends
// nothing twice, and the next event waits for the interval to pass.
type APIKeyMisuseAlerts struct {
	// reportedMisuses is status.binding.misuses when the event was sent: the next one counts
	// the misuses since.
	// +required
	// +kubebuilder:validation:Minimum=0
	ReportedMisuses int64 `json:"reportedMisuses"`

	// lastMisuseAt is status.binding.lastMisuseAt when the event was sent: a misuse seen after
	// it is one to report.
	// +required
	LastMisuseAt metav1.Time `json:"lastMisuseAt"`

	// reportedAt is when the operator sent the event: no other is sent for the key until the
	// interval after it has passed.
	// +required
	ReportedAt metav1.Time `json:"reportedAt"`
}
