package operator

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// TestKeyState: the state label of switchboard_apikeys, from the spec and the Ready condition;
// a key the operator revoked for want of use (its spec untouched) counts as revoked.
func TestKeyState(t *testing.T) {
	ready := func(status metav1.ConditionStatus, reason string) *switchboardv1alpha1.APIKey {
		return &switchboardv1alpha1.APIKey{Status: switchboardv1alpha1.APIKeyStatus{Conditions: []metav1.Condition{
			{Type: switchboardv1alpha1.ConditionReady, Status: status, Reason: reason}}}}
	}
	tests := []struct {
		name string
		key  *switchboardv1alpha1.APIKey
		want string
	}{
		{"no status yet", &switchboardv1alpha1.APIKey{}, "pending"},
		{"ready", ready(metav1.ConditionTrue, switchboardv1alpha1.ReasonKeyIssued), "ready"},
		{"revoked in spec", &switchboardv1alpha1.APIKey{Spec: switchboardv1alpha1.APIKeySpec{Revoked: true}}, "revoked"},
		{"revoked by the operator for want of use", ready(metav1.ConditionFalse, switchboardv1alpha1.ReasonUnusedRevoked), "revoked"},
		{"expired", ready(metav1.ConditionFalse, switchboardv1alpha1.ReasonExpired), "expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := keyState(tt.key); got != tt.want {
				t.Fatalf("keyState = %q, want %q", got, tt.want)
			}
		})
	}
}
