package issuing

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// TestPlanKey: the record of issuance, not the status, decides whether to issue, rotate or put
// the status back (moved here from before the reshape, unchanged).
func TestPlanKey(t *testing.T) {
	rotation := func(at string) *switchboardv1alpha1.APIKeyRotation {
		return &switchboardv1alpha1.APIKeyRotation{RequestedAt: at}
	}
	status := func(gen int64, hint, handled string) switchboardv1alpha1.APIKeyStatus {
		return switchboardv1alpha1.APIKeyStatus{KeyGeneration: gen, KeyHint: hint, LastHandledRotationAt: handled}
	}
	rec := &keysecret.Issued{Generation: 2, Hint: "h2", RotationHandled: "r1"}
	tests := []struct {
		name     string
		rotation *switchboardv1alpha1.APIKeyRotation
		status   switchboardv1alpha1.APIKeyStatus
		rec      *keysecret.Issued
		action   keyAction
		gen      int64
	}{
		{name: "a new APIKey gets its first key", action: issueKey, gen: 1},
		{name: "no hash, status says issued: the key is refused, nothing to issue", status: status(3, "h3", ""), action: keepKey, gen: 3},
		{name: "no hash and a rotation: it replaces the lost hash", rotation: rotation("r9"), status: status(3, "h3", "r1"), action: issueKey, gen: 4},
		{name: "no hash, a forged negative generation", status: status(-5, "", ""), action: issueKey, gen: 1},
		{name: "the record and the status agree", rotation: rotation("r1"), status: status(2, "h2", "r1"), rec: rec, action: keepKey, gen: 2},
		{name: "a rotation the record has not carried out", rotation: rotation("r2"), status: status(2, "h2", "r1"), rec: rec, action: issueKey, gen: 3},
		{name: "a forged lastHandledRotationAt is no rotation", rotation: rotation("r1"), status: status(2, "h2", "forged"), rec: rec, action: publishKey, gen: 2},
		{name: "a forged lastHandledRotationAt matching a new request still rotates once", rotation: rotation("r2"), status: status(2, "h2", "r2"), rec: rec, action: issueKey, gen: 3},
		{name: "a forged keyGeneration 0 issues nothing", rotation: rotation("r1"), status: status(0, "", ""), rec: rec, action: publishKey, gen: 2},
		{name: "a generation ahead of the record", rotation: rotation("r1"), status: status(7, "h2", "r1"), rec: rec, action: publishKey, gen: 2},
		{name: "a generation behind the record (an issue stopped before its status)", rotation: rotation("r1"), status: status(1, "h1", ""), rec: rec, action: publishKey, gen: 2},
		{name: "a forged hint", rotation: rotation("r1"), status: status(2, "other", "r1"), rec: rec, action: publishKey, gen: 2},
		{name: "rotation removed from the spec: nothing to do", status: status(2, "h2", "r1"), rec: rec, action: keepKey, gen: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := &switchboardv1alpha1.APIKey{Spec: switchboardv1alpha1.APIKeySpec{Rotation: tt.rotation}, Status: tt.status}
			action, gen := planKey(key, tt.rec)
			if action != tt.action || gen != tt.gen {
				t.Fatalf("planKey = %d, generation %d; want %d, generation %d", action, gen, tt.action, tt.gen)
			}
		})
	}
}

// TestGraceNeverOutlivesTheKey: a manual rotation's grace ends with the replaced key's life.
func TestGraceNeverOutlivesTheKey(t *testing.T) {
	key := planKeyObj(2, false)
	key.Spec.Rotation.GracePeriod = metav1.Duration{Duration: 48 * time.Hour}
	tests := []struct {
		name     string
		notAfter time.Time
		want     time.Duration
	}{
		{"no end", time.Time{}, 48 * time.Hour},
		{"ends later", planNow.Add(72 * time.Hour), 48 * time.Hour},
		{"ends sooner", planNow.Add(5 * time.Hour), 5 * time.Hour},
		{"ended", planNow.Add(-time.Hour), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := gracePeriod(key, &keysecret.Issued{NotAfter: tt.notAfter}, planNow); got != tt.want {
				t.Errorf("grace %s, want %s", got, tt.want)
			}
		})
	}
}
