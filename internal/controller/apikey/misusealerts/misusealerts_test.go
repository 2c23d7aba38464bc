package misusealerts

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// at is t0 plus d.
func at(d time.Duration) time.Time { return t0.Add(d) }

// binding is a status.binding counting misuses, the last at last (none when zero), with an
// unbound presenter and a bound one.
func binding(misuses int64, last time.Duration) *switchboardv1alpha1.APIKeyBindingStatus {
	b := &switchboardv1alpha1.APIKeyBindingStatus{Misuses: misuses, ObservedAt: metav1.NewTime(at(last + 30*time.Second)),
		Presenters: []switchboardv1alpha1.BindingPresenter{
			{Principal: "system:serviceaccount:shop:checkout", Address: "10.0.0.5", Bound: true, Requests: 40, LastSeen: metav1.NewTime(at(last + time.Second))},
			{Principal: "", Address: "10.0.0.9", Bound: false, Requests: misuses, LastSeen: metav1.NewTime(at(last))},
		}}
	if misuses > 0 {
		b.LastMisuseAt = new(metav1.NewTime(at(last)))
	}
	return b
}

// record is a status.misuseAlerts: reported misuses up to the one at last, sent at sent.
func record(misuses int64, last, sent time.Duration) *switchboardv1alpha1.APIKeyMisuseAlerts {
	return &switchboardv1alpha1.APIKeyMisuseAlerts{ReportedMisuses: misuses, LastMisuseAt: metav1.NewTime(at(last)), ReportedAt: metav1.NewTime(at(sent))}
}

// TestMisuseAlertsPlan is the table of the misuse events: for the record so far, the
// status.binding the server wrote and the time, the record after and the count the event
// reports (0: no event).
func TestMisuseAlertsPlan(t *testing.T) {
	min := time.Minute
	for _, tc := range []struct {
		name    string
		rec     *switchboardv1alpha1.APIKeyMisuseAlerts
		b       *switchboardv1alpha1.APIKeyBindingStatus
		now     time.Duration
		want    *switchboardv1alpha1.APIKeyMisuseAlerts // nil and same: rec kept
		same    bool
		counted int64
	}{
		{name: "no binding status", b: nil, now: 0},
		{name: "presenters, all bound, no misuse", b: binding(0, 0), now: min},
		{name: "the first misuse: sent at once", b: binding(3, 0), now: min, want: record(3, 0, min), counted: 3},
		{name: "the same status again (a restart): nothing", rec: record(3, 0, min), b: binding(3, 0), now: 30 * min, same: true},
		{name: "a new misuse within the interval: held back", rec: record(3, 0, min), b: binding(5, 4*min), now: 5 * min, same: true},
		{name: "held back until the interval ends", rec: record(3, 0, min), b: binding(5, 4*min), now: 11*min - time.Second, same: true},
		{name: "the interval over: the misuses since, counted", rec: record(3, 0, min), b: binding(12, 9*min), now: 11 * min, want: record(12, 9*min, 11*min), counted: 9},
		{name: "a late server write after an interval: sent", rec: record(3, 0, min), b: binding(4, 40*min), now: 41 * min, want: record(4, 40*min, 41*min), counted: 1},
		{name: "a server replica restarted: its own count", rec: record(30, 0, min), b: binding(2, 20*min), now: 21 * min, want: record(2, 20*min, 21*min), counted: 2},
		{name: "another replica with the same count and a later misuse: at least one", rec: record(3, 0, min), b: binding(3, 20*min), now: 21 * min, want: record(3, 20*min, 21*min), counted: 1},
		{name: "a replica's older write: nothing", rec: record(9, 20*min, 21*min), b: binding(7, 15*min), now: 40 * min, same: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Next(tc.rec, tc.b, at(tc.now))
			switch {
			case tc.want == nil && got != tc.rec:
				t.Fatalf("the record became %+v, want it kept (%+v)", got, tc.rec)
			case tc.want != nil && (got == nil || got.ReportedMisuses != tc.want.ReportedMisuses || !got.LastMisuseAt.Equal(&tc.want.LastMisuseAt) || !got.ReportedAt.Equal(&tc.want.ReportedAt)):
				t.Fatalf("the record is %+v, want %+v", got, tc.want)
			}
			// The controller compares a copy of the status before with the status after.
			alerts := Alerts(tc.rec.DeepCopy(), got, tc.b, switchboardv1alpha1.BindingReportOnly, "sb_live_AbCd…wxyz")
			if tc.counted == 0 {
				if len(alerts) != 0 {
					t.Fatalf("events %+v, want none", alerts)
				}
				return
			}
			if len(alerts) != 1 {
				t.Fatalf("%d events, want 1", len(alerts))
			}
			a := alerts[0]
			if a.Data.Misuses != tc.counted || !a.At.Equal(tc.b.LastMisuseAt.Time) || !a.Data.LastMisuseAt.Equal(tc.b.LastMisuseAt.Time) {
				t.Errorf("the event reports %d misuses, the last at %s (at %s), want %d at %s", a.Data.Misuses, a.Data.LastMisuseAt, a.At, tc.counted, tc.b.LastMisuseAt.Time)
			}
			if tc.rec == nil && a.Data.PreviousReportAt != nil || tc.rec != nil && (a.Data.PreviousReportAt == nil || !a.Data.PreviousReportAt.Equal(tc.rec.ReportedAt.Time)) {
				t.Errorf("previousReportAt %v, want the previous record's %v", a.Data.PreviousReportAt, tc.rec)
			}
			if len(a.Data.Presenters) != 1 || a.Data.Presenters[0].Address != "10.0.0.9" || a.Data.Presenters[0].Principal != "" {
				t.Errorf("presenters %+v, want the unbound one alone", a.Data.Presenters)
			}
			if !strings.Contains(a.Message, "last by no proof from 10.0.0.9") || !strings.Contains(a.Message, "admitted: ReportOnly") {
				t.Errorf("message %q", a.Message)
			}
			e := webhookdelivery.Event{Type: webhookdelivery.KeyMisused, Timestamp: a.At, Data: webhookdelivery.KeyData{
				Namespace: "shop", Name: "checkout", KeyGeneration: 1, KeyHint: "sb_live_AbCd…wxyz", Reason: a.Message, Misuse: &a.Data}}
			if err := e.Validate(); err != nil {
				t.Errorf("the event breaks its schema's rules: %v", err)
			}
		})
	}
}

// TestMisuseAlertsAtMostOncePerInterval replays a storm: a misuse every 30 seconds for an hour,
// the server writing status.binding once a minute, the operator reconciling at each write that
// Due lets through and at each WakeAt: the events are at least Interval apart, every misuse is
// counted in exactly one of them, and the last is sent by a wake (no write is Due after it).
func TestMisuseAlertsAtMostOncePerInterval(t *testing.T) {
	var (
		rec        *switchboardv1alpha1.APIKeyMisuseAlerts
		sent       []time.Time
		total      int64
		counted    int64
		wake       time.Time
		reconciles int
	)
	reconcile := func(b *switchboardv1alpha1.APIKeyBindingStatus, now time.Time) {
		reconciles++
		after := Next(rec, b, now)
		for _, a := range Alerts(rec.DeepCopy(), after, b, switchboardv1alpha1.BindingEnforce, "sb_live_AbCd…wxyz") {
			sent = append(sent, now)
			counted += a.Data.Misuses
			if !strings.Contains(a.Message, "refused: Enforce") {
				t.Errorf("message %q", a.Message)
			}
		}
		rec = after
		if w := WakeAt(rec); w.After(now) {
			wake = w
		}
	}
	var b *switchboardv1alpha1.APIKeyBindingStatus
	for s := time.Duration(0); s <= 90*time.Minute; s += 30 * time.Second {
		now := at(s)
		if !wake.IsZero() && !now.Before(wake) {
			wake = time.Time{}
			reconcile(b, now)
		}
		if s < time.Hour {
			total++
		}
		if s%time.Minute == 0 && s <= time.Hour { // the server's write, with the misuses so far
			b = binding(total, s)
			if Due(rec, b) {
				reconcile(b, now)
			}
		}
	}
	t.Logf("%d misuses, %d events, %d reconciles", total, len(sent), reconciles)
	if counted != total {
		t.Errorf("the events counted %d misuses, %d happened", counted, total)
	}
	for i := 1; i < len(sent); i++ {
		if d := sent[i].Sub(sent[i-1]); d < Interval {
			t.Errorf("events %d and %d are %s apart, less than %s", i-1, i, d, Interval)
		}
	}
	if len(sent) < 6 || len(sent) > 7 {
		t.Errorf("%d events for an hour of misuse, want 6 or 7", len(sent))
	}
	if reconciles > 2*len(sent)+1 {
		t.Errorf("%d reconciles for %d events: the server's writes woke the operator", reconciles, len(sent))
	}
}

// TestModeOf: the events report the mode the operator recorded for the server, over the spec's
// (a change the record does not carry yet); a record that does not parse is not reported from.
func TestModeOf(t *testing.T) {
	key := &switchboardv1alpha1.APIKey{Spec: switchboardv1alpha1.APIKeySpec{Binding: &switchboardv1alpha1.APIKeyBinding{Mode: switchboardv1alpha1.BindingEnforce, Consumers: true}}}
	recorded := &corev1.Secret{Data: map[string][]byte{keysecret.DataBinding: keysecret.Binding{Mode: switchboardv1alpha1.BindingReportOnly}.Encode()}}
	broken := &corev1.Secret{Data: map[string][]byte{keysecret.DataBinding: []byte(`{"mode":"Audit"}`)}}
	for _, tc := range []struct {
		name string
		key  *switchboardv1alpha1.APIKey
		hash *corev1.Secret
		want switchboardv1alpha1.BindingMode
	}{
		{"the record's", key, recorded, switchboardv1alpha1.BindingReportOnly},
		{"no record yet: the spec's", key, &corev1.Secret{}, switchboardv1alpha1.BindingEnforce},
		{"a record that does not parse: the spec's", key, broken, switchboardv1alpha1.BindingEnforce},
		{"neither", &switchboardv1alpha1.APIKey{}, nil, switchboardv1alpha1.BindingReportOnly},
	} {
		if got := ModeOf(tc.key, tc.hash); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
