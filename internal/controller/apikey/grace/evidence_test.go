package grace

import (
	"strings"
	"testing"
	"time"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// TestGraceEvidence: what the evidence says of an old key's grace, on an injected time: its
// traffic first, then (for a delivered key) the pods that take it by restart.
func TestGraceEvidence(t *testing.T) {
	tests := []struct {
		name     string
		s        *keystate.State
		active   bool
		moved    bool
		ended    bool
		reason   string
		wake     time.Duration
		contains string
	}{
		{name: "not asked for", s: graceState(false, func(s *keystate.State) { s.Key.Spec.GraceEndsWhenUnusedFor = nil })},
		{name: "no old key", s: graceState(false, func(s *keystate.State) { keysecret.DropPrevious(s.Hash) })},
		{name: "its grace ended on evidence: said from the record, nothing left to do",
			s:      graceState(true, func(s *keystate.State) { keysecret.EndPreviousEarly(s.Hash, "every pod restarted") }),
			active: true, ended: true, reason: switchboardv1alpha1.ReasonConsumersMoved, contains: "every pod restarted"},
		{name: "ended on evidence, but no longer asked for",
			s: graceState(true, func(s *keystate.State) {
				keysecret.EndPreviousEarly(s.Hash, "every pod restarted")
				s.Key.Spec.GraceEndsWhenUnusedFor = nil
			})},
		{name: "the fixed grace is over: GraceEnded's", s: graceState(false, func(s *keystate.State) {
			s.Hash.Data[keysecret.DataPreviousValidUntil] = []byte(planNow.Add(-time.Second).Format(time.RFC3339))
		})},
		{name: "no record of when the new key was written", s: graceState(false, func(s *keystate.State) {
			delete(s.Hash.Data, keysecret.DataIssuedAt)
		})},
		{name: "revealed, unused since the new key was written 15m ago: moved on traffic alone",
			s: graceState(false, nil), active: true, moved: true, reason: switchboardv1alpha1.ReasonConsumersMoved, contains: "traffic alone"},
		{name: "written 5m ago: the quiet period runs 5m more",
			s:      graceState(false, func(s *keystate.State) { s.Now = planNow.Add(-10 * time.Minute) }),
			active: true, reason: switchboardv1alpha1.ReasonPreviousKeyInUse, wake: 5 * time.Minute},
		{name: "the old key used 3m ago: 7m more",
			s:      graceState(false, func(s *keystate.State) { usedAt(s, 1, 3*time.Minute) }),
			active: true, reason: switchboardv1alpha1.ReasonPreviousKeyInUse, wake: 7 * time.Minute, contains: "last used at"},
		{name: "a use of another generation does not count",
			s:      graceState(false, func(s *keystate.State) { usedAt(s, 2, time.Minute) }),
			active: true, moved: true, reason: switchboardv1alpha1.ReasonConsumersMoved},
		{name: "a use before the new key was written: counted from the write",
			s:      graceState(false, func(s *keystate.State) { usedAt(s, 1, time.Hour) }),
			active: true, moved: true, reason: switchboardv1alpha1.ReasonConsumersMoved},
		{name: "the fixed bound comes first: the evidence has nothing to add",
			s: graceState(false, func(s *keystate.State) {
				usedAt(s, 1, time.Minute)
				s.Hash.Data[keysecret.DataPreviousValidUntil] = []byte(planNow.Add(time.Minute).Format(time.RFC3339))
			}),
			active: true, reason: switchboardv1alpha1.ReasonPreviousKeyInUse, wake: 9 * time.Minute, contains: "at the latest at 2026-11-24T12:01:00Z"},
		{name: "delivered, quiet, pods not read yet",
			s:      graceState(true, nil),
			active: true, reason: switchboardv1alpha1.ReasonPodsHoldPreviousKey, wake: keystate.StaleRetry},
		{name: "delivered, quiet, workloads not readable: the fixed bound",
			s: graceState(true, func(s *keystate.State) {
				s.Consumers = &keystate.Consumers{Unreadable: "forbidden to list Deployments"}
			}),
			active: true, reason: switchboardv1alpha1.ReasonWorkloadsNotReadable, wake: 30 * time.Second, contains: "switchboard-consumer-reader"},
		{name: "delivered, quiet, a pod started before the new key",
			s: graceState(true, func(s *keystate.State) {
				s.Consumers = &keystate.Consumers{Holders: []string{"api-1 (deployment/api)"}}
			}),
			active: true, reason: switchboardv1alpha1.ReasonPodsHoldPreviousKey, wake: 30 * time.Second, contains: "pod api-1 (deployment/api) started before"},
		{name: "delivered, quiet, every pod restarted",
			s:      graceState(true, func(s *keystate.State) { s.Consumers = &keystate.Consumers{} }),
			active: true, moved: true, reason: switchboardv1alpha1.ReasonConsumersMoved, contains: "every pod"},
		{name: "delivered, pods restarted but the old key still in use",
			s: graceState(true, func(s *keystate.State) {
				s.Consumers = &keystate.Consumers{}
				usedAt(s, 1, time.Minute)
			}),
			active: true, reason: switchboardv1alpha1.ReasonPreviousKeyInUse, wake: 9 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var wake keystate.Requeue
			e := evidenceOf(tt.s, tt.s.Record(), &wake)
			if e.Active != tt.active || e.Moved != tt.moved || e.Ended != tt.ended || e.Reason != tt.reason {
				t.Fatalf("active %t, moved %t, ended %t, reason %q; want %t, %t, %t, %q (%s)", e.Active, e.Moved, e.Ended, e.Reason, tt.active, tt.moved, tt.ended, tt.reason, e.Message)
			}
			if wake.After != tt.wake {
				t.Errorf("wakes after %v, want %v", wake.After, tt.wake)
			}
			if !strings.Contains(e.Message, tt.contains) {
				t.Errorf("message %q does not say %q", e.Message, tt.contains)
			}
		})
	}
}

// TestNeedsConsumers: pods are read only for a delivered key whose old key's traffic stopped.
func TestNeedsConsumers(t *testing.T) {
	tests := []struct {
		name string
		s    *keystate.State
		want bool
	}{
		{"delivered and quiet", graceState(true, nil), true},
		{"revealed: no Secret for pods to take", graceState(false, nil), false},
		{"the old key still in use", graceState(true, func(s *keystate.State) { usedAt(s, 1, time.Minute) }), false},
		{"not asked for", graceState(true, func(s *keystate.State) { s.Key.Spec.GraceEndsWhenUnusedFor = nil }), false},
		{"no old key", graceState(true, func(s *keystate.State) { keysecret.DropPrevious(s.Hash) }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NeedsConsumers(tt.s, tt.s.Record()); got != tt.want {
				t.Errorf("NeedsConsumers = %t, want %t", got, tt.want)
			}
		})
	}
}
