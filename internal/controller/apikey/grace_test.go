package apikey

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// graceState is generation 2 of an APIKey that asks for its grace to end on evidence after 10m
// unused, rotated (its new key written) 15 minutes before planNow, the old key (generation 1)
// accepted for a day more; delivered into app-key or revealed, changed by f.
func graceState(delivered bool, f func(s *keyState)) *keyState {
	base := policyState
	if delivered {
		base = deliveredPolicyState
	}
	return base(func(s *keyState) {
		s.key.Spec.GraceEndsWhenUnusedFor = &metav1.Duration{Duration: 10 * time.Minute}
		rec, _ := keysecret.IssuedOf(s.hash)
		rec.IssuedAt = planNow.Add(-15 * time.Minute)
		keysecret.SetIssued(s.hash, rec)
		s.hash.Data[keysecret.DataPreviousHash] = []byte(apikey.Sum("h1").String())
		s.hash.Data[keysecret.DataPreviousValidUntil] = []byte(planNow.Add(24 * time.Hour).Format(time.RFC3339))
		if f != nil {
			f(s)
		}
	})
}

// usedAt records a use of the old key generation gen at planNow - ago in s's status.
func usedAt(s *keyState, gen int64, ago time.Duration) {
	s.key.Status.PreviousKeyUse = &switchboardv1alpha1.APIKeyPreviousKeyUse{KeyGeneration: gen, LastUsedAt: metav1.NewTime(planNow.Add(-ago))}
}

// TestGraceEvidence: what the evidence says of an old key's grace, on an injected time: its
// traffic first, then (for a delivered key) the pods that take it by restart.
func TestGraceEvidence(t *testing.T) {
	tests := []struct {
		name     string
		s        *keyState
		active   bool
		moved    bool
		ended    bool
		reason   string
		wake     time.Duration
		contains string
	}{
		{name: "not asked for", s: graceState(false, func(s *keyState) { s.key.Spec.GraceEndsWhenUnusedFor = nil })},
		{name: "no old key", s: graceState(false, func(s *keyState) { keysecret.DropPrevious(s.hash) })},
		{name: "its grace ended on evidence: said from the record, nothing left to do",
			s:      graceState(true, func(s *keyState) { keysecret.EndPreviousEarly(s.hash, "every pod restarted") }),
			active: true, ended: true, reason: switchboardv1alpha1.ReasonConsumersMoved, contains: "every pod restarted"},
		{name: "ended on evidence, but no longer asked for",
			s: graceState(true, func(s *keyState) {
				keysecret.EndPreviousEarly(s.hash, "every pod restarted")
				s.key.Spec.GraceEndsWhenUnusedFor = nil
			})},
		{name: "the fixed grace is over: GraceEnded's", s: graceState(false, func(s *keyState) {
			s.hash.Data[keysecret.DataPreviousValidUntil] = []byte(planNow.Add(-time.Second).Format(time.RFC3339))
		})},
		{name: "no record of when the new key was written", s: graceState(false, func(s *keyState) {
			delete(s.hash.Data, keysecret.DataIssuedAt)
		})},
		{name: "revealed, unused since the new key was written 15m ago: moved on traffic alone",
			s: graceState(false, nil), active: true, moved: true, reason: switchboardv1alpha1.ReasonConsumersMoved, contains: "traffic alone"},
		{name: "written 5m ago: the quiet period runs 5m more",
			s:      graceState(false, func(s *keyState) { s.now = planNow.Add(-10 * time.Minute) }),
			active: true, reason: switchboardv1alpha1.ReasonPreviousKeyInUse, wake: 5 * time.Minute},
		{name: "the old key used 3m ago: 7m more",
			s:      graceState(false, func(s *keyState) { usedAt(s, 1, 3*time.Minute) }),
			active: true, reason: switchboardv1alpha1.ReasonPreviousKeyInUse, wake: 7 * time.Minute, contains: "last used at"},
		{name: "a use of another generation does not count",
			s:      graceState(false, func(s *keyState) { usedAt(s, 2, time.Minute) }),
			active: true, moved: true, reason: switchboardv1alpha1.ReasonConsumersMoved},
		{name: "a use before the new key was written: counted from the write",
			s:      graceState(false, func(s *keyState) { usedAt(s, 1, time.Hour) }),
			active: true, moved: true, reason: switchboardv1alpha1.ReasonConsumersMoved},
		{name: "the fixed bound comes first: the evidence has nothing to add",
			s: graceState(false, func(s *keyState) {
				usedAt(s, 1, time.Minute)
				s.hash.Data[keysecret.DataPreviousValidUntil] = []byte(planNow.Add(time.Minute).Format(time.RFC3339))
			}),
			active: true, reason: switchboardv1alpha1.ReasonPreviousKeyInUse, wake: 9 * time.Minute, contains: "at the latest at 2026-11-24T12:01:00Z"},
		{name: "delivered, quiet, pods not read yet",
			s:      graceState(true, nil),
			active: true, reason: switchboardv1alpha1.ReasonPodsHoldPreviousKey, wake: staleRetry},
		{name: "delivered, quiet, workloads not readable: the fixed bound",
			s:      graceState(true, func(s *keyState) { s.consumers = &consumerState{unreadable: "forbidden to list Deployments"} }),
			active: true, reason: switchboardv1alpha1.ReasonWorkloadsNotReadable, wake: consumersRetry, contains: "switchboard-consumer-reader"},
		{name: "delivered, quiet, a pod started before the new key",
			s:      graceState(true, func(s *keyState) { s.consumers = &consumerState{holders: []string{"api-1 (deployment/api)"}} }),
			active: true, reason: switchboardv1alpha1.ReasonPodsHoldPreviousKey, wake: consumersRetry, contains: "pod api-1 (deployment/api) started before"},
		{name: "delivered, quiet, every pod restarted",
			s:      graceState(true, func(s *keyState) { s.consumers = &consumerState{} }),
			active: true, moved: true, reason: switchboardv1alpha1.ReasonConsumersMoved, contains: "every pod"},
		{name: "delivered, pods restarted but the old key still in use",
			s: graceState(true, func(s *keyState) {
				s.consumers = &consumerState{}
				usedAt(s, 1, time.Minute)
			}),
			active: true, reason: switchboardv1alpha1.ReasonPreviousKeyInUse, wake: 9 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var wake requeue
			e := graceEvidenceOf(tt.s, tt.s.record(), &wake)
			if e.active != tt.active || e.moved != tt.moved || e.ended != tt.ended || e.reason != tt.reason {
				t.Fatalf("active %t, moved %t, ended %t, reason %q; want %t, %t, %t, %q (%s)", e.active, e.moved, e.ended, e.reason, tt.active, tt.moved, tt.ended, tt.reason, e.message)
			}
			if wake.after != tt.wake {
				t.Errorf("wakes after %v, want %v", wake.after, tt.wake)
			}
			if !strings.Contains(e.message, tt.contains) {
				t.Errorf("message %q does not say %q", e.message, tt.contains)
			}
		})
	}
}

// TestNeedsConsumers: pods are read only for a delivered key whose old key's traffic stopped.
func TestNeedsConsumers(t *testing.T) {
	tests := []struct {
		name string
		s    *keyState
		want bool
	}{
		{"delivered and quiet", graceState(true, nil), true},
		{"revealed: no Secret for pods to take", graceState(false, nil), false},
		{"the old key still in use", graceState(true, func(s *keyState) { usedAt(s, 1, time.Minute) }), false},
		{"not asked for", graceState(true, func(s *keyState) { s.key.Spec.GraceEndsWhenUnusedFor = nil }), false},
		{"no old key", graceState(true, func(s *keyState) { keysecret.DropPrevious(s.hash) }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := needsConsumers(tt.s, tt.s.record()); got != tt.want {
				t.Errorf("needsConsumers = %t, want %t", got, tt.want)
			}
		})
	}
}
