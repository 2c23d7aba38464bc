package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// TestMeaningfulUpdateOfAPIKeyStatus: the server's writes (lastUsedAt, previousKeyUse, credits
// that cross no threshold) wake no reconcile; the operator's own status does, and credits that
// cross a threshold of the credit events.
func TestMeaningfulUpdateOfAPIKeyStatus(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC))
	tests := []struct {
		name   string
		change func(*switchboardv1alpha1.APIKeyStatus)
		want   bool
	}{
		{"lastUsedAt", func(s *switchboardv1alpha1.APIKeyStatus) { s.LastUsedAt = &at }, false},
		{"previousKeyUse", func(s *switchboardv1alpha1.APIKeyStatus) {
			s.PreviousKeyUse = &switchboardv1alpha1.APIKeyPreviousKeyUse{KeyGeneration: 1, LastUsedAt: at}
		}, false},
		{"credits below a threshold", func(s *switchboardv1alpha1.APIKeyStatus) {
			s.Credits = &switchboardv1alpha1.APIKeyCreditsStatus{Period: "M1", PeriodEnd: at, Used: 10, Remaining: 90, ObservedAt: at}
		}, false},
		{"credits past 80 %", func(s *switchboardv1alpha1.APIKeyStatus) {
			s.Credits = &switchboardv1alpha1.APIKeyCreditsStatus{Period: "M1", PeriodEnd: at, Used: 80, Remaining: 20, ObservedAt: at}
		}, true},
		{"keyGeneration", func(s *switchboardv1alpha1.APIKeyStatus) { s.KeyGeneration = 2 }, true},
		{"conditions", func(s *switchboardv1alpha1.APIKeyStatus) {
			s.Conditions = []metav1.Condition{{Type: switchboardv1alpha1.ConditionReady}}
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := &switchboardv1alpha1.APIKey{Status: switchboardv1alpha1.APIKeyStatus{KeyGeneration: 1}}
			n := old.DeepCopy()
			tt.change(&n.Status)
			if got := MeaningfulUpdate.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: n}); got != tt.want {
				t.Errorf("MeaningfulUpdate = %t, want %t", got, tt.want)
			}
		})
	}
}
