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
		{"binding: presenters, no misuse", func(s *switchboardv1alpha1.APIKeyStatus) {
			s.Binding = &switchboardv1alpha1.APIKeyBindingStatus{ObservedAt: at, Presenters: []switchboardv1alpha1.BindingPresenter{
				{Principal: "system:serviceaccount:shop:web", Bound: true, Requests: 9, LastSeen: at}}}
		}, false},
		{"binding: a first misuse", func(s *switchboardv1alpha1.APIKeyStatus) {
			s.Binding = &switchboardv1alpha1.APIKeyBindingStatus{ObservedAt: at, Misuses: 1, LastMisuseAt: &at}
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

// TestMeaningfulUpdateOfAPIKeyBinding: with an apikey.misused sent at 10:00, the server's
// writes of status.binding wake no reconcile until they carry a misuse seen once the interval
// is over (those before are the wake's, at 10:12).
func TestMeaningfulUpdateOfAPIKeyBinding(t *testing.T) {
	sent := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	old := &switchboardv1alpha1.APIKey{Status: switchboardv1alpha1.APIKeyStatus{KeyGeneration: 1,
		MisuseAlerts: &switchboardv1alpha1.APIKeyMisuseAlerts{ReportedMisuses: 4, LastMisuseAt: metav1.NewTime(sent.Add(-time.Minute)), ReportedAt: metav1.NewTime(sent)},
		Binding:      &switchboardv1alpha1.APIKeyBindingStatus{Misuses: 4, LastMisuseAt: &metav1.Time{Time: sent.Add(-time.Minute)}, ObservedAt: metav1.NewTime(sent)}}}
	for _, tt := range []struct {
		name     string
		misuseAt time.Duration
		want     bool
	}{
		{"no new misuse", -time.Minute, false},
		{"a misuse 5 minutes after the event", 5 * time.Minute, false},
		{"a misuse 10 minutes after", 10 * time.Minute, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := old.DeepCopy()
			n.Status.Binding = &switchboardv1alpha1.APIKeyBindingStatus{Misuses: 9, LastMisuseAt: &metav1.Time{Time: sent.Add(tt.misuseAt)}, ObservedAt: metav1.NewTime(sent.Add(11 * time.Minute))}
			if got := MeaningfulUpdate.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: n}); got != tt.want {
				t.Errorf("MeaningfulUpdate = %t, want %t", got, tt.want)
			}
		})
	}
}
