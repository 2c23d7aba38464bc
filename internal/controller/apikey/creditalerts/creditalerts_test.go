package creditalerts

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

// Two monthly periods, as the server names them (refill letter and start in Unix seconds).
var (
	novStart, decStart, janStart = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	nov                          = period{fmt.Sprintf("M%d", novStart.Unix()), decStart}
	dec                          = period{fmt.Sprintf("M%d", decStart.Unix()), janStart}
	observedAt                   = time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC)
)

type period struct {
	id  string
	end time.Time
}

// balance is a status.credits of p with used of 1000 credits spent.
func balance(p period, used int64) *switchboardv1alpha1.APIKeyCreditsStatus {
	return &switchboardv1alpha1.APIKeyCreditsStatus{Period: p.id, PeriodEnd: metav1.NewTime(p.end), Used: used, Remaining: 1000 - used, ObservedAt: metav1.NewTime(observedAt)}
}

// record is a status.creditAlerts of p at level l.
func record(p period, l switchboardv1alpha1.CreditAlertLevel) *switchboardv1alpha1.APIKeyCreditAlerts {
	return &switchboardv1alpha1.APIKeyCreditAlerts{Period: p.id, PeriodEnd: metav1.NewTime(p.end), Level: l}
}

// sent is what the table expects of one event: its type, threshold and time.
type sent struct {
	Type    webhookdelivery.EventType
	Percent int
	At      time.Time
}

var (
	low80     = sent{webhookdelivery.KeyCreditsLow, 80, observedAt}
	low90     = sent{webhookdelivery.KeyCreditsLow, 90, observedAt}
	exhausted = sent{webhookdelivery.KeyCreditsExhausted, 0, observedAt}
	refilled  = sent{webhookdelivery.KeyCreditsRefilled, 0, decStart} // when November ended
)

// TestCreditAlertsPlan is the table of the credit events: for the record so far and the
// balance the server wrote, the record after and the events sent.
func TestCreditAlertsPlan(t *testing.T) {
	const (
		under80 = switchboardv1alpha1.CreditsUnder80
		used80  = switchboardv1alpha1.CreditsUsed80
		used90  = switchboardv1alpha1.CreditsUsed90
		empty   = switchboardv1alpha1.CreditsExhausted
	)
	tests := []struct {
		name    string
		rec     *switchboardv1alpha1.APIKeyCreditAlerts
		balance *switchboardv1alpha1.APIKeyCreditsStatus
		want    *switchboardv1alpha1.APIKeyCreditAlerts // nil: the record as it was
		events  []sent
	}{
		{"no balance, no record", nil, nil, nil, nil},
		{"no balance keeps the record", record(nov, used90), nil, nil, nil},
		{"first balance under 80 %: no record", nil, balance(nov, 799), nil, nil},
		{"first balance at 80 %", nil, balance(nov, 800), record(nov, used80), []sent{low80}},
		{"first balance at 95 %: both thresholds", nil, balance(nov, 950), record(nov, used90), []sent{low80, low90}},
		{"first balance at none left: all three", nil, balance(nov, 1000), record(nov, empty), []sent{low80, low90, exhausted}},
		{"under 80 % still", record(nov, under80), balance(nov, 799), nil, nil},
		{"80 % crossed", record(nov, under80), balance(nov, 800), record(nov, used80), []sent{low80}},
		{"80 % again: nothing", record(nov, used80), balance(nov, 899), nil, nil},
		{"90 % crossed", record(nov, used80), balance(nov, 900), record(nov, used90), []sent{low90}},
		{"from 80 % to none left", record(nov, used80), balance(nov, 1000), record(nov, empty), []sent{low90, exhausted}},
		{"exhausted again: nothing", record(nov, empty), balance(nov, 1000), nil, nil},
		{"the amount raised mid-period: no threshold twice", record(nov, used90), &switchboardv1alpha1.APIKeyCreditsStatus{
			Period: nov.id, PeriodEnd: metav1.NewTime(nov.end), Used: 950, Remaining: 1050, ObservedAt: metav1.NewTime(observedAt)}, nil, nil},
		{"new period after 80 %: refilled", record(nov, used80), balance(dec, 3), record(dec, under80), []sent{refilled}},
		{"new period after exhausted: refilled", record(nov, empty), balance(dec, 0), record(dec, under80), []sent{refilled}},
		{"new period after under 80 %: nothing, the record kept", record(nov, under80), balance(dec, 10), nil, nil},
		{"new period already at 85 %: refilled, then low", record(nov, used90), balance(dec, 850), record(dec, used80), []sent{refilled, low80}},
		{"new period already at 85 % after a quiet one", record(nov, under80), balance(dec, 850), record(dec, used80), []sent{low80}},
		{"a late write of the previous period: nothing", record(dec, under80), balance(nov, 1000), nil, nil},
		{"a period renamed with the same end (refill changed): a new one", record(nov, used80),
			&switchboardv1alpha1.APIKeyCreditsStatus{Period: "D1764460800", PeriodEnd: metav1.NewTime(nov.end), Used: 0, Remaining: 1000, ObservedAt: metav1.NewTime(observedAt)},
			&switchboardv1alpha1.APIKeyCreditAlerts{Period: "D1764460800", PeriodEnd: metav1.NewTime(nov.end), Level: under80},
			[]sent{{webhookdelivery.KeyCreditsRefilled, 0, nov.end}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.want
			if want == nil {
				want = tt.rec
			}
			next := Next(tt.rec, tt.balance)
			if fmt.Sprint(next) != fmt.Sprint(want) {
				t.Errorf("Next = %v, want %v", next, want)
			}
			if due := Due(tt.rec, tt.balance); due != (tt.want != nil) {
				t.Errorf("Due = %t, want %t", due, tt.want != nil)
			}
			alerts := Alerts(tt.rec, next, tt.balance, "sb_live_AbCd…wxyz")
			var got []sent
			for _, a := range alerts {
				got = append(got, sent{a.Type, a.Data.ThresholdPercent, a.At})
				// Every event is one a receiver may get: its payload passes its schema's rules.
				e := webhookdelivery.Event{Type: a.Type, Timestamp: a.At, Data: webhookdelivery.KeyData{
					Namespace: "team-a", Name: "billing", KeyGeneration: 1, KeyHint: "sb_live_AbCd…wxyz", Reason: a.Message, Credits: &a.Data}}
				if err := e.Validate(); err != nil {
					t.Errorf("%s: %v", a.Type, err)
				}
				if a.Data.Period != tt.balance.Period || a.Data.Used != tt.balance.Used || a.Data.Remaining != tt.balance.Remaining {
					t.Errorf("%s reports %+v, not the balance written", a.Type, a.Data)
				}
			}
			if !slices.Equal(got, tt.events) {
				t.Errorf("events %v, want %v", got, tt.events)
			}
			// Seen again (a re-reconcile, a restart, a lost status patch recomputing from the
			// record it wrote), the balance tells nothing more.
			if again := Alerts(next, Next(next, tt.balance), tt.balance, "sb_live_AbCd…wxyz"); len(again) != 0 {
				t.Errorf("seen again, it sends %d more events", len(again))
			}
		})
	}
}

// TestLevelOf: the thresholds are of used + remaining, to the credit.
func TestLevelOf(t *testing.T) {
	for _, tt := range []struct {
		used, remaining int64
		want            switchboardv1alpha1.CreditAlertLevel
	}{
		{0, 1, switchboardv1alpha1.CreditsUnder80},
		{7, 3, switchboardv1alpha1.CreditsUnder80},
		{8, 2, switchboardv1alpha1.CreditsUsed80},
		{9, 1, switchboardv1alpha1.CreditsUsed90},
		{1, 0, switchboardv1alpha1.CreditsExhausted},
		{799_999_999_999, 200_000_000_001, switchboardv1alpha1.CreditsUnder80},
		{1 << 40, 0, switchboardv1alpha1.CreditsExhausted},
		{(1 << 40) - 1, 1, switchboardv1alpha1.CreditsUsed90},
	} {
		if got := LevelOf(&switchboardv1alpha1.APIKeyCreditsStatus{Used: tt.used, Remaining: tt.remaining}); got != tt.want {
			t.Errorf("LevelOf(used %d, remaining %d) = %s, want %s", tt.used, tt.remaining, got, tt.want)
		}
	}
}
