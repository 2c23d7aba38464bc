package panel

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
)

func TestRelative(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		t    time.Time
		want string
	}{
		{"seconds ago", now.Add(-30 * time.Second), "just now"},
		{"one minute ago", now.Add(-61 * time.Second), "1 minute ago"},
		{"hours ago", now.Add(-5*time.Hour - 59*time.Minute), "5 hours ago"},
		{"days ago", now.Add(-3 * 24 * time.Hour), "3 days ago"},
		{"weeks ago", now.Add(-15 * 24 * time.Hour), "2 weeks ago"},
		{"in a month", now.Add(31 * 24 * time.Hour), "in 1 month"},
		{"in a year", now.Add(366 * 24 * time.Hour), "in 1 year"},
		{"in a year, seconds later", now.Add(365*24*time.Hour - 3*time.Second), "in 1 year"},
		{"in under a second", now.Add(time.Millisecond), "in less than a second"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := relative(tt.t, now); got != tt.want {
				t.Fatalf("relative = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestKeyState(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	past := metav1.NewTime(now.Add(-time.Hour))
	future := metav1.NewTime(now.Add(time.Hour))
	ready := func(status metav1.ConditionStatus, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: switchboardv1alpha1.ConditionReady, Status: status, Reason: reason}}
	}
	tests := []struct {
		name       string
		spec       switchboardv1alpha1.APIKeySpec
		status     switchboardv1alpha1.APIKeyStatus
		wantState  string
		wantClass  string
		wantNotes  int
		wantRotate bool
		wantReveal bool
	}{
		{"new, not yet seen by the operator", switchboardv1alpha1.APIKeySpec{}, switchboardv1alpha1.APIKeyStatus{}, "Issuing", "pending", 0, true, false},
		{"active and waiting to be shown", switchboardv1alpha1.APIKeySpec{ExpiresAt: &future},
			switchboardv1alpha1.APIKeyStatus{KeyGeneration: 1, RevealSecretName: "k-key-1", Conditions: ready(metav1.ConditionTrue, switchboardv1alpha1.ReasonKeyIssued)},
			"Active", "active", 1, true, true},
		{"revoked wins over everything", switchboardv1alpha1.APIKeySpec{Revoked: true, ExpiresAt: &past},
			switchboardv1alpha1.APIKeyStatus{KeyGeneration: 1, RevealSecretName: "k-key-1", Conditions: ready(metav1.ConditionTrue, switchboardv1alpha1.ReasonKeyIssued)},
			"Revoked", "revoked", 0, false, false},
		{"expired by the clock before the operator says so", switchboardv1alpha1.APIKeySpec{ExpiresAt: &past},
			switchboardv1alpha1.APIKeyStatus{KeyGeneration: 1, Conditions: ready(metav1.ConditionTrue, switchboardv1alpha1.ReasonKeyIssued)},
			"Expired", "expired", 0, true, false},
		{"delivery conflict", switchboardv1alpha1.APIKeySpec{SecretName: "taken"},
			switchboardv1alpha1.APIKeyStatus{KeyGeneration: 1, Conditions: ready(metav1.ConditionFalse, switchboardv1alpha1.ReasonDeliveryConflict)},
			"Delivery conflict", "error", 1, true, false},
		{"rotated with grace", switchboardv1alpha1.APIKeySpec{},
			switchboardv1alpha1.APIKeyStatus{KeyGeneration: 2, PreviousKeyValidUntil: &future, Conditions: ready(metav1.ConditionTrue, switchboardv1alpha1.ReasonKeyIssued)},
			"Active", "active", 1, true, false},
		{"grace over", switchboardv1alpha1.APIKeySpec{},
			switchboardv1alpha1.APIKeyStatus{KeyGeneration: 2, PreviousKeyValidUntil: &past, Conditions: ready(metav1.ConditionTrue, switchboardv1alpha1.ReasonKeyIssued)},
			"Active", "active", 0, true, false},
		// The panel knows Rotating (and Deleting, below) since it shares keyclient.State with the plugin.
		{"rotation requested, not carried out yet", switchboardv1alpha1.APIKeySpec{Rotation: &switchboardv1alpha1.APIKeyRotation{RequestedAt: "b"}},
			switchboardv1alpha1.APIKeyStatus{KeyGeneration: 1, LastHandledRotationAt: "a", Conditions: ready(metav1.ConditionTrue, switchboardv1alpha1.ReasonKeyIssued)},
			"Rotating", "pending", 0, true, false},
		{"an unknown reason is shown as it is", switchboardv1alpha1.APIKeySpec{},
			switchboardv1alpha1.APIKeyStatus{KeyGeneration: 1, Conditions: ready(metav1.ConditionFalse, "HashMissing")},
			"HashMissing", "error", 0, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Name: "k"}, Spec: tt.spec, Status: tt.status}
			row := newKeyRow(k, now)
			if row.State != tt.wantState || row.StateClass != tt.wantClass {
				t.Fatalf("state = %q/%q, want %q/%q", row.State, row.StateClass, tt.wantState, tt.wantClass)
			}
			if len(row.Notes) != tt.wantNotes {
				t.Fatalf("notes = %q, want %d of them", row.Notes, tt.wantNotes)
			}
			if row.CanRotate != tt.wantRotate || row.CanRevoke != tt.wantRotate || row.CanReveal != tt.wantReveal {
				t.Fatalf("actions rotate=%v revoke=%v reveal=%v, want rotate/revoke=%v reveal=%v",
					row.CanRotate, row.CanRevoke, row.CanReveal, tt.wantRotate, tt.wantReveal)
			}
		})
	}
}

func TestDeletingKeyOffersNothing(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	gone := metav1.NewTime(now)
	k := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Name: "k", DeletionTimestamp: &gone},
		Status: switchboardv1alpha1.APIKeyStatus{KeyGeneration: 1, RevealSecretName: "k-key-1", Conditions: []metav1.Condition{
			{Type: switchboardv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: switchboardv1alpha1.ReasonKeyIssued}}}}
	row := newKeyRow(k, now)
	if row.State != "Deleting" || row.StateClass != "pending" || row.CanRotate || row.CanRevoke || row.CanReveal {
		t.Fatalf("row of a key being deleted: %+v", row)
	}
}

func TestValidation(t *testing.T) {
	tests := []struct {
		name      string
		namespace string
		key       string
		nsOK      bool
		keyOK     bool
	}{
		{"plain", "team-a", "ci", true, true},
		{"dotted key name", "team-a", "ci.nightly", true, true},
		{"empty", "", "", false, false},
		{"upper case", "Team", "CI", false, false},
		{"too long key", "a", strings.Repeat("k", 64), true, false},
		{"path traversal", "../x", "a/b", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := validNamespace(tt.namespace) == ""; got != tt.nsOK {
				t.Fatalf("validNamespace(%q) ok = %v, want %v", tt.namespace, got, tt.nsOK)
			}
			if got := validKeyName(tt.key) == ""; got != tt.keyOK {
				t.Fatalf("validKeyName(%q) ok = %v, want %v", tt.key, got, tt.keyOK)
			}
		})
	}
}

// TestParsePolicy: the create form's policy fields are parsed as the plugin's flags, and a
// bad one is refused in one sentence that names the field.
func TestParsePolicy(t *testing.T) {
	tests := []struct {
		name string
		form createForm
		want string // rate limit | sources | audiences, or the message
		ok   bool
	}{
		{"nothing", createForm{}, " |  | ", true},
		{"everything", createForm{RateLimit: "100/1m", Burst: " 20 ", Sources: "203.0.113.0/24, 2001:db8::/32", Audiences: " billing, connections "},
			"100/1m,burst=20 | 203.0.113.0/24,2001:db8::/32 | billing,connections", true},
		{"audiences separated by spaces", createForm{Audiences: "billing connections\tbilling-v2"}, " |  | billing,connections,billing-v2", true},
		{"an audience in capitals", createForm{Audiences: "Billing, connections"}, `Audiences: audience "Billing" must be written in lower case: billing.`, false},
		{"an audience with a dot", createForm{Audiences: "billing.v2"}, `Audiences: audience "billing.v2" is not a DNS label: lower-case letters, digits and '-', starting and ending with a letter or digit, such as connections or billing-v2.`, false},
		{"an audience twice", createForm{Audiences: "billing billing"}, `Audiences: audience "billing" is given twice.`, false},
		{"a bad source range", createForm{Sources: "office", Audiences: "billing"}, `Allowed sources: source range "office" is not a CIDR`, false},
		{"a bad burst", createForm{RateLimit: "10/1m", Burst: "two"}, "The burst is a whole number of requests, at least 1.", false},
		{"a bad rate limit", createForm{RateLimit: "100"}, `Rate limit: rate limit "100" is not REQUESTS/PERIOD, e.g. 100/1m.`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, msg := parsePolicy(tt.form)
			got := keyclient.FormatRateLimit(p.RateLimit) + " | " + keyclient.FormatSourceRanges(p.AllowedSourceRanges) + " | " + keyclient.FormatAudiences(p.Audiences)
			switch {
			case tt.ok && (msg != "" || got != tt.want):
				t.Fatalf("parsePolicy = %q, %q; want %q", got, msg, tt.want)
			case !tt.ok && !strings.HasPrefix(msg, tt.want):
				t.Fatalf("parsePolicy says %q, want %q", msg, tt.want)
			}
		})
	}
}

func TestKeyRowShowsThePolicy(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	row := newKeyRow(&switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Name: "k"}, Spec: switchboardv1alpha1.APIKeySpec{
		AllowedSourceRanges: []switchboardv1alpha1.CIDR{"10.0.0.0/8", "2001:db8::/32"},
		Audiences:           []switchboardv1alpha1.Audience{"billing", "connections"},
	}}, now)
	if row.RateLimit != "" || row.Sources != "10.0.0.0/8, 2001:db8::/32" || row.Audiences != "billing, connections" {
		t.Fatalf("row: rate limit %q, sources %q, audiences %q", row.RateLimit, row.Sources, row.Audiences)
	}
	if row := newKeyRow(&switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Name: "k"}}, now); row.Audiences != "" {
		t.Fatalf("a key for every audience shows %q", row.Audiences)
	}
}

// TestKeyRowShowsTheCredits: the key list shows the balance the API server wrote in
// status.credits and when it refills; nothing once that period has ended.
func TestKeyRowShowsTheCredits(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	k := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Name: "k"}, Status: switchboardv1alpha1.APIKeyStatus{
		Credits: &switchboardv1alpha1.APIKeyCreditsStatus{Period: "m1", PeriodEnd: metav1.NewTime(now.Add(8 * 24 * time.Hour)), Used: 63, Remaining: 37}}}
	if row := newKeyRow(k, now); row.Credits != "37 of 100 credits left" || row.CreditsRefill.Text != "in 1 week" {
		t.Fatalf("credits %q, refill %q", row.Credits, row.CreditsRefill.Text)
	}
	k.Spec.CreditPool = "team"
	if row := newKeyRow(k, now); row.Credits != "37 of 100 credits left in pool team" {
		t.Fatalf("a key of a pool: credits %q", row.Credits)
	}
	k.Status.Credits.PeriodEnd = metav1.NewTime(now.Add(-time.Hour))
	if row := newKeyRow(k, now); row.Credits != "" {
		t.Fatalf("an ended period shows %q", row.Credits)
	}
}

func TestServiceAccountNamespace(t *testing.T) {
	tests := []struct{ user, want string }{
		{"system:serviceaccount:team-a:ci", "team-a"},
		{"system:serviceaccount:broken", ""},
		{"alice@example.com", ""},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.user, func(t *testing.T) {
			if got := serviceAccountNamespace(tt.user); got != tt.want {
				t.Fatalf("serviceAccountNamespace(%q) = %q, want %q", tt.user, got, tt.want)
			}
		})
	}
}
