package panel

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

func TestKeyRowLifecycle(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	cond := func(condType string, status metav1.ConditionStatus, msg string) metav1.Condition {
		return metav1.Condition{Type: condType, Status: status, Reason: "R", Message: msg}
	}
	ready := cond(switchboardv1alpha1.ConditionReady, metav1.ConditionTrue, "")
	key := func(name string, revoked bool, status switchboardv1alpha1.APIKeyStatus) switchboardv1alpha1.APIKey {
		return switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: switchboardv1alpha1.APIKeySpec{Revoked: revoked, ExpiresAt: at(30 * 24 * time.Hour)}, Status: status}
	}
	keys := []switchboardv1alpha1.APIKey{
		key("ending", false, switchboardv1alpha1.APIKeyStatus{KeyNotAfter: at(3 * 24 * time.Hour), RenewalTime: at(24 * time.Hour), Conditions: []metav1.Condition{
			ready, cond(switchboardv1alpha1.ConditionExpiringSoon, metav1.ConditionTrue, "ends in 3 days"),
			cond(switchboardv1alpha1.ConditionUnused, metav1.ConditionFalse, "used"),
		}}),
		key("idle", false, switchboardv1alpha1.APIKeyStatus{KeyNotAfter: at(60 * 24 * time.Hour), Conditions: []metav1.Condition{
			ready, cond(switchboardv1alpha1.ConditionExpiringSoon, metav1.ConditionFalse, ""),
			cond(switchboardv1alpha1.ConditionUnused, metav1.ConditionTrue, "not used for 90 days"),
		}}),
		// A revoked key is neither expiring nor unused, whatever an old status says.
		key("gone", true, switchboardv1alpha1.APIKeyStatus{RenewalTime: at(time.Hour), Conditions: []metav1.Condition{
			ready, cond(switchboardv1alpha1.ConditionExpiringSoon, metav1.ConditionTrue, "stale"),
			cond(switchboardv1alpha1.ConditionUnused, metav1.ConditionTrue, "stale"),
		}}),
	}
	rows := keyRows(keys, now)
	byName := map[string]keyRow{}
	for _, r := range rows {
		byName[r.Name] = r
	}
	ending, idle, gone := byName["ending"], byName["idle"], byName["gone"]
	if !ending.Expiring || ending.ExpiringMessage != "ends in 3 days" || ending.Unused || ending.NextRotation.Text != "in 1 day" || ending.KeyEnds.Text != "in 3 days" {
		t.Errorf("ending: %+v", ending)
	}
	if idle.Expiring || !idle.Unused || idle.UnusedMessage != "not used for 90 days" || idle.NextRotation.Text != "—" || idle.KeyEnds.Text != "" {
		t.Errorf("idle (its key ends after the APIKey expires, so only Expires shows): %+v", idle)
	}
	if gone.Expiring || gone.Unused || gone.NextRotation.Text != "—" {
		t.Errorf("gone: %+v", gone)
	}

	for _, tt := range []struct {
		filter, want string
		names        []string
	}{
		{"", filterAll, []string{"ending", "gone", "idle"}},
		{"expiring", filterExpiring, []string{"ending"}},
		{"unused", filterUnused, []string{"idle"}},
		{"bogus", filterAll, []string{"ending", "gone", "idle"}},
	} {
		kept, choices, filter := filterKeys(rows, "team-a", tt.filter)
		if filter != tt.want || len(kept) != len(tt.names) {
			t.Fatalf("filter %q: got %q with %d rows", tt.filter, filter, len(kept))
		}
		for i, r := range kept {
			if r.Name != tt.names[i] {
				t.Errorf("filter %q: row %d is %s, want %s", tt.filter, i, r.Name, tt.names[i])
			}
		}
		counts := map[string]int{}
		for _, c := range choices {
			counts[c.Value] = c.Count
			if c.Current != (c.Value == filter) {
				t.Errorf("filter %q: choice %q current=%v", tt.filter, c.Value, c.Current)
			}
		}
		if counts[filterAll] != 3 || counts[filterExpiring] != 1 || counts[filterUnused] != 1 {
			t.Errorf("counts %v", counts)
		}
		if choices[1].URL != "/keys?namespace=team-a&show=expiring" {
			t.Errorf("expiring URL %q", choices[1].URL)
		}
	}
}
