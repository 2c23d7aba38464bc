package plugin

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// TestKeyReportText covers the states of `key status` that the control plane of the other tests
// does not hold still long enough to read: a reveal waiting to be claimed, a rotation pending, a
// previous key in its grace, a delivery Secret missing, taken or unreadable, repeated Events.
func TestKeyReportText(t *testing.T) {
	pct := int32(33)
	k := &switchboardv1alpha1.APIKey{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ci", CreationTimestamp: *at(-48 * time.Hour)},
		Spec: switchboardv1alpha1.APIKeySpec{
			Rotation: &switchboardv1alpha1.APIKeyRotation{RequestedAt: "2026-11-22T11:59:00Z"},
			APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{Lifetime: &metav1.Duration{Duration: 2160 * time.Hour}, RenewBeforePercentage: &pct,
				RenewalWindows: []switchboardv1alpha1.APIKeyRenewalWindow{
					{Days: []switchboardv1alpha1.Weekday{"Monday", "Friday"}, Start: "02:00", Duration: metav1.Duration{Duration: 2 * time.Hour}, TimeZone: "Europe/Paris"},
					{Start: "23:30", Duration: metav1.Duration{Duration: 90 * time.Minute}},
					{Cron: "0 1 1 * *", Duration: metav1.Duration{Duration: 4 * time.Hour}, TimeZone: "Europe/Paris"},
				}},
		},
		Status: switchboardv1alpha1.APIKeyStatus{
			KeyGeneration: 2, KeyHint: "sb_live_AbCd…wxyz", RevealSecretName: "ci-key-2", RevealExpiresAt: at(time.Hour),
			PreviousKeyValidUntil: at(2 * time.Hour), LastHandledRotationAt: "2026-11-21T00:00:00Z",
			Conditions: []metav1.Condition{
				{Type: switchboardv1alpha1.ConditionRevealed, Status: metav1.ConditionFalse, Reason: switchboardv1alpha1.ReasonRevealPending, LastTransitionTime: *at(-time.Hour)},
				{Type: switchboardv1alpha1.ConditionUnused, Status: metav1.ConditionFalse, Reason: switchboardv1alpha1.ReasonUsed, LastTransitionTime: *at(-time.Hour)},
				{Type: switchboardv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: switchboardv1alpha1.ReasonKeyIssued, LastTransitionTime: *at(-time.Hour),
					Message: "two\nlines"},
			},
		},
	}
	r := newKeyReport(k, now)
	if got := []string{r.Conditions[0].Type, r.Conditions[1].Type, r.Conditions[2].Type}; strings.Join(got, ",") != "Ready,Unused,Revealed" {
		t.Fatalf("conditions in order %v", got)
	}
	r.Events = []keyReportEvent{{Type: "Warning", Reason: "RenewalFailed", Message: "could not write Secret", Count: 4,
		FirstSeen: *at(-30 * time.Minute), LastSeen: *at(-5 * time.Minute), From: "switchboard-operator"}}
	for _, tt := range []struct {
		delivery keyReportDelivery
		want     string
	}{
		{keyReportDelivery{}, "none: the key is revealed once (no spec.secretName)"},
		{keyReportDelivery{SecretName: "s", Secret: secretMissing, Message: "the operator issues a new key into it"}, `Secret "s", data key "apiKey": missing; the operator issues a new key into it`},
		{keyReportDelivery{SecretName: "s", Secret: secretForeign, Message: "not ours"}, `Secret "s", data key "apiKey": taken: not ours`},
		{keyReportDelivery{SecretName: "s", Secret: secretUnknown, Message: "forbidden"}, `Secret "s", data key "apiKey": unknown: forbidden`},
		{keyReportDelivery{SecretName: "s", Secret: secretExists, SecretGeneration: 1}, `exists, holds key generation 1 (the current is 2)`},
	} {
		r.Delivery = tt.delivery
		var out strings.Builder
		if err := printKeyReport(&out, r, now); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			tt.want, "State:", "Rotating",
			`waiting to be claimed from Secret "ci-key-2" until 2026-11-22T13:00:00Z (in 60m): ` + "`kubectl switchboard key reveal ci`",
			"Rotation:", "requested (2026-11-22T11:59:00Z), not carried out yet",
			"Previous key:", "valid until 2026-11-22T14:00:00Z (in 120m)",
			"each key lasts 2160h, renewed 33% of it before its end, in a window: Monday,Friday 02:00+2h Europe/Paris; every day 23:30+1h30m UTC; cron 0 1 1 * * +4h Europe/Paris",
			"Ready", "KeyIssued", "two lines",
			"Warning", "RenewalFailed", "5m ago (x4 over 30m)", "could not write Secret",
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("lacks %q:\n%s", want, out.String())
			}
		}
	}
}

func TestRecentEventsKeepsTheLatest(t *testing.T) {
	var events []keyReportEvent
	for i := range maxEventsShown + 5 {
		events = append(events, keyReportEvent{Reason: "E", Count: int32(i), LastSeen: *at(time.Duration(-i) * time.Minute)})
	}
	got := recentEvents(events)
	if len(got) != maxEventsShown || got[len(got)-1].Count != 0 || got[0].Count != maxEventsShown-1 {
		t.Fatalf("kept %d, first %d, last %d", len(got), got[0].Count, got[len(got)-1].Count)
	}
}

// TestKeyReportShowsWhoHoldsTheOldKey: during a grace that ends on evidence, `key status` shows
// the old key's generation, its last use, and the pods that still hold it (the GraceEvidence
// condition's message); a use recorded for an older rotation is not shown as this one's.
func TestKeyReportShowsWhoHoldsTheOldKey(t *testing.T) {
	k := &switchboardv1alpha1.APIKey{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "api", CreationTimestamp: *at(-48 * time.Hour)},
		Spec: switchboardv1alpha1.APIKeySpec{SecretName: "api-key",
			APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{GraceEndsWhenUnusedFor: &metav1.Duration{Duration: 10 * time.Minute}}},
		Status: switchboardv1alpha1.APIKeyStatus{
			KeyGeneration: 3, KeyHint: "sb_live_AbCd…wxyz", PreviousKeyValidUntil: at(2 * time.Hour),
			PreviousKeyUse: &switchboardv1alpha1.APIKeyPreviousKeyUse{KeyGeneration: 2, LastUsedAt: *at(-3 * time.Minute)},
			Conditions: []metav1.Condition{{Type: switchboardv1alpha1.ConditionGraceEvidence, Status: metav1.ConditionFalse,
				Reason: switchboardv1alpha1.ReasonPodsHoldPreviousKey, LastTransitionTime: *at(-time.Minute),
				Message: "key generation 2 was last used at …, but pod api-7d9f-x2k (deployment/api) started before key generation 3 was written"}},
		},
	}
	var out strings.Builder
	if err := printKeyReport(&out, newKeyReport(k, now), now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Previous key:", "generation 2, valid until 2026-11-22T14:00:00Z",
		"Previous key last used:", "2026-11-22T11:57:00Z (3m ago)",
		"Previous key held by:", "pod api-7d9f-x2k (deployment/api)",
		"an old key's grace ends once it is unused for 10m",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("lacks %q:\n%s", want, out.String())
		}
	}

	k.Status.PreviousKeyUse.KeyGeneration = 1 // an older rotation's old key
	if r := newKeyReport(k, now); r.Key.PreviousKeyLastUsedAt != nil {
		t.Errorf("shows generation 1's use as the previous key's: %v", r.Key.PreviousKeyLastUsedAt)
	}
}

// TestKeyReportShowsTheCredits: `key status` shows the balance the API server wrote in
// status.credits, in text and in -o json; once its period has ended, that it refilled; and for
// a key with credits and no balance written yet, that none were counted.
func TestKeyReportShowsTheCredits(t *testing.T) {
	k := &switchboardv1alpha1.APIKey{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "plan", CreationTimestamp: *at(-48 * time.Hour)},
		Spec: switchboardv1alpha1.APIKeySpec{SecretName: "plan-key",
			Credits: &switchboardv1alpha1.APIKeyCredits{Amount: 100, Refill: switchboardv1alpha1.CreditsMonthly}},
		Status: switchboardv1alpha1.APIKeyStatus{KeyGeneration: 1, Credits: &switchboardv1alpha1.APIKeyCreditsStatus{
			Period: "m1796083200", PeriodEnd: *at(8 * 24 * time.Hour), Used: 63, Remaining: 37, ObservedAt: *at(-time.Minute)}},
	}
	text := func() string {
		var out strings.Builder
		if err := printKeyReport(&out, newKeyReport(k, now), now); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	if out := text(); !strings.Contains(out, "Credits:") || !strings.Contains(out, "37 of 100 left this period (refill at 2026-11-30T12:00:00Z") {
		t.Errorf("lacks the balance:\n%s", out)
	}
	raw, err := json.Marshal(newKeyReport(k, now))
	if err != nil {
		t.Fatal(err)
	}
	var report struct {
		Policy struct {
			CreditsPerPeriod int64 `json:"creditsPerPeriod"`
			Credits          struct {
				Used, Remaining int64
			} `json:"credits"`
		} `json:"policy"`
	}
	if err := json.Unmarshal(raw, &report); err != nil || report.Policy.CreditsPerPeriod != 100 || report.Policy.Credits.Used != 63 || report.Policy.Credits.Remaining != 37 {
		t.Errorf("-o json carries %+v (%v), want 100 a period, 63 used and 37 remaining: %s", report.Policy, err, raw)
	}

	// A key of a pool: the balance is the pool's, named beside it.
	k.Spec.Credits, k.Spec.CreditPool = nil, "team"
	if out := text(); !strings.Contains(out, "pool team, shared: 37 of 100 left this period (refill at 2026-11-30T12:00:00Z") {
		t.Errorf("a key of a pool lacks the pool's name or balance:\n%s", out)
	}
	if raw, _ := json.Marshal(newKeyReport(k, now)); !strings.Contains(string(raw), `"creditPool":"team"`) {
		t.Errorf("-o json lacks the pool: %s", raw)
	}
	k.Spec.Credits, k.Spec.CreditPool = &switchboardv1alpha1.APIKeyCredits{Amount: 100, Refill: switchboardv1alpha1.CreditsMonthly}, ""

	k.Status.Credits.PeriodEnd = *at(-time.Hour)
	if out := text(); !strings.Contains(out, "refilled at 2026-11-22T11:00:00Z") {
		t.Errorf("an ended period is shown as current:\n%s", out)
	}
	k.Status.Credits = nil
	if out := text(); !strings.Contains(out, "100 a period; none counted yet") {
		t.Errorf("a key with credits and no balance yet:\n%s", out)
	}
}

// TestKeyReportShowsTheBinding: a bound key's report says its mode and what it is bound to, the
// misuses the API server counted and when the operator last reported them, and who presented
// it lately, the most recent first, each with its principal ("no proof" when it proved
// nothing), address, requests, when last seen and whether bound; -o json carries the same.
func TestKeyReportShowsTheBinding(t *testing.T) {
	k := &switchboardv1alpha1.APIKey{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "payments", CreationTimestamp: *at(-48 * time.Hour)},
		Spec: switchboardv1alpha1.APIKeySpec{SecretName: "payments-key",
			Binding: &switchboardv1alpha1.APIKeyBinding{Mode: switchboardv1alpha1.BindingReportOnly, Consumers: true, ServiceAccounts: []string{"batch"}}},
		Status: switchboardv1alpha1.APIKeyStatus{KeyGeneration: 1},
	}
	text := func() string {
		var out strings.Builder
		if err := printKeyReport(&out, newKeyReport(k, now), now); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	out := text()
	for _, want := range []string{"Binding:", "ReportOnly (a request that proves no bound workload is admitted", "the pods reading its delivery Secret; ServiceAccounts batch", "none counted yet"} {
		if !strings.Contains(out, want) {
			t.Errorf("before any count, lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Presented by") {
		t.Errorf("presenters shown before the server counted any:\n%s", out)
	}

	k.Status.Binding = &switchboardv1alpha1.APIKeyBindingStatus{ObservedAt: *at(-time.Minute), Misuses: 7, LastMisuseAt: at(-3 * time.Minute),
		Presenters: []switchboardv1alpha1.BindingPresenter{
			{Principal: "", Address: "203.0.113.7", Bound: false, Requests: 7, LastSeen: *at(-3 * time.Minute)},
			{Principal: "system:serviceaccount:shop:checkout", Address: "10.244.1.17", Bound: true, Requests: 1200, LastSeen: *at(-2 * time.Minute)},
		}}
	k.Status.MisuseAlerts = &switchboardv1alpha1.APIKeyMisuseAlerts{ReportedMisuses: 7, LastMisuseAt: *at(-3 * time.Minute), ReportedAt: *at(-2 * time.Minute)}
	out = text()
	for _, want := range []string{
		"7, the last 2026-11-22T11:57:00Z (3m ago); last reported (apikey.misused) 2026-11-22T11:58:00Z",
		"Presented by (last period, counted 2026-11-22T11:59:00Z",
		"PRINCIPAL",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	checkout, noProof := strings.Index(out, "system:serviceaccount:shop:checkout"), strings.Index(out, "no proof")
	if checkout < 0 || noProof < checkout {
		t.Errorf("the presenters are not listed the most recent first:\n%s", out)
	}
	for _, row := range []struct{ start, want string }{
		{"system:serviceaccount:shop:checkout", "10.244.1.17  1200      2m ago     yes"},
		{"no proof", "203.0.113.7  7         3m ago     no"},
	} {
		_, line, _ := strings.Cut(out, row.start)
		line, _, _ = strings.Cut(line, "\n")
		if !strings.Contains(strings.Join(strings.Fields(line), " "), strings.Join(strings.Fields(row.want), " ")) {
			t.Errorf("the row of %s is %q, want %q", row.start, line, row.want)
		}
	}

	raw, err := json.Marshal(newKeyReport(k, now))
	if err != nil {
		t.Fatal(err)
	}
	var report struct {
		Binding struct {
			Mode       string
			Misuses    int64
			Presenters []struct {
				Principal, Address string
				Bound              bool
				Requests           int64
			}
			MisuseReportedAt *time.Time
		} `json:"binding"`
	}
	if err := json.Unmarshal(raw, &report); err != nil {
		t.Fatal(err)
	}
	b := report.Binding
	if b.Mode != "ReportOnly" || b.Misuses != 7 || len(b.Presenters) != 2 || b.Presenters[1].Principal != "" || b.Presenters[1].Bound ||
		b.Presenters[0].Requests != 1200 || b.MisuseReportedAt == nil {
		t.Errorf("-o json carries %+v: %s", b, raw)
	}

	k.Spec.Binding.Mode = switchboardv1alpha1.BindingEnforce
	if out := text(); !strings.Contains(out, "refused: 403 API_KEY_WRONG_WORKLOAD") {
		t.Errorf("Enforce is not said:\n%s", out)
	}
	k.Spec.Binding, k.Status.Binding, k.Status.MisuseAlerts = nil, nil, nil
	if out := text(); strings.Contains(out, "Binding:") {
		t.Errorf("a bearer key shows a binding:\n%s", out)
	}
}
