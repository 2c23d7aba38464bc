package webhooksender

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

var at = time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)

func msg(id, uid string, attempts int32, next *time.Time) switchboardv1alpha1.WebhookMessage {
	m := switchboardv1alpha1.WebhookMessage{ID: id, WebhookName: "wh-" + uid, WebhookUID: uid, Attempts: attempts}
	if next != nil {
		t := metav1.NewTime(*next)
		m.NextAttemptTime = &t
	}
	return m
}

func ids(cs []candidate) string {
	var s []string
	for _, c := range cs {
		s = append(s, c.message.ID)
	}
	return strings.Join(s, ",")
}

func TestDueMessages(t *testing.T) {
	later := at.Add(time.Minute)
	soon := at.Add(time.Second)
	obs := []switchboardv1alpha1.WebhookOutbox{
		{ObjectMeta: metav1.ObjectMeta{Name: "outbox-a"}, Spec: switchboardv1alpha1.WebhookOutboxSpec{Namespace: "a", Messages: []switchboardv1alpha1.WebhookMessage{
			msg("a1", "u1", 0, nil), msg("a2", "u1", 0, nil), // one at a time per endpoint: a2 waits for a1
			msg("a3", "u2", 1, &later), // not due
			msg("a4", "u3", 0, nil),    // busy endpoint
			msg("a5", "u4", 2, &soon),  // not due, sooner
		}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "outbox-b"}, Spec: switchboardv1alpha1.WebhookOutboxSpec{Namespace: "b", Messages: []switchboardv1alpha1.WebhookMessage{
			msg("b1", "u5", 0, nil), // stale in the cache: skipped, and holds its endpoint's turn
			msg("b2", "u5", 0, nil),
			msg("b3", "u6", 3, &at), // due now
		}}},
		// An outbox whose name is not its namespace's: not the operator's, never read.
		{ObjectMeta: metav1.ObjectMeta{Name: "outbox-c"}, Spec: switchboardv1alpha1.WebhookOutboxSpec{Namespace: "a", Messages: []switchboardv1alpha1.WebhookMessage{
			msg("c1", "u7", 0, nil),
		}}},
	}
	due, next := dueMessages(obs, at, func(uid string) bool { return uid == "u3" },
		func(outbox string, m *switchboardv1alpha1.WebhookMessage) bool {
			return outbox == "outbox-b" && m.ID == "b1"
		})
	if got := ids(due["a"]) + "|" + ids(due["b"]); got != "a1|b3" {
		t.Errorf("due %s, want a1|b3", got)
	}
	if !next.Equal(soon) {
		t.Errorf("next %s, want %s", next, soon)
	}
}

func TestRoundRobin(t *testing.T) {
	cands := func(ns string, n int) []candidate {
		var cs []candidate
		for i := range n {
			cs = append(cs, candidate{namespace: ns, message: switchboardv1alpha1.WebhookMessage{ID: fmt.Sprintf("%s%d", ns, i)}})
		}
		return cs
	}
	due := map[string][]candidate{"a": cands("a", 5), "b": cands("b", 1), "c": cands("c", 2)}
	for _, tt := range []struct {
		name     string
		free     int
		room     map[string]int
		after    string
		want     string
		wantLast string
	}{
		{name: "in turn", free: 8, room: map[string]int{"a": 9, "b": 9, "c": 9}, want: "a0,b0,c0,a1,c1,a2,a3,a4", wantLast: "a"},
		{name: "after the last served", free: 3, room: map[string]int{"a": 9, "b": 9, "c": 9}, after: "a", want: "b0,c0,a0", wantLast: "a"},
		{name: "past the end wraps", free: 2, room: map[string]int{"a": 9, "b": 9, "c": 9}, after: "c", want: "a0,b0", wantLast: "b"},
		{name: "a full namespace waits", free: 8, room: map[string]int{"a": 1, "b": 9, "c": 0}, want: "a0,b0", wantLast: "b"},
		{name: "no free slot", free: 0, room: map[string]int{"a": 9}, after: "b", want: "", wantLast: "b"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, last := roundRobin(due, tt.free, func(ns string) int { return tt.room[ns] }, tt.after)
			if ids(got) != tt.want || last != tt.wantLast {
				t.Errorf("got %s (last %q), want %s (last %q)", ids(got), last, tt.want, tt.wantLast)
			}
		})
	}
}

func TestApply(t *testing.T) {
	spec := func() switchboardv1alpha1.WebhookOutboxSpec {
		return switchboardv1alpha1.WebhookOutboxSpec{Namespace: "a", Messages: []switchboardv1alpha1.WebhookMessage{
			msg("m1", "u1", 0, nil), msg("m2", "u2", 0, nil), msg("m3", "u1", 0, nil),
		}}
	}
	retryAt := at.Add(1500 * time.Millisecond)
	for _, tt := range []struct {
		name     string
		o        outcome
		removed  string
		messages string
		state    switchboardv1alpha1.WebhookEndpointState
		check    func(*switchboardv1alpha1.WebhookOutboxSpec) error
	}{
		{name: "delivered", o: outcome{result: webhookdelivery.Result{Outcome: webhookdelivery.Delivered}},
			removed: "m1", messages: "m2,m3", state: switchboardv1alpha1.WebhookEndpointState{WebhookUID: "u1", LastDeliveryTime: &metav1.Time{Time: at}}},
		{name: "retry", o: outcome{result: webhookdelivery.Result{Outcome: webhookdelivery.Retry, RetryAt: retryAt}, err: "POST https://x: 500"},
			messages: "m1,m2,m3", state: switchboardv1alpha1.WebhookEndpointState{WebhookUID: "u1", LastError: "POST https://x: 500"},
			check: func(s *switchboardv1alpha1.WebhookOutboxSpec) error {
				m := s.Messages[0]
				if m.Attempts != 1 || m.NextAttemptTime == nil || !m.NextAttemptTime.Time.Equal(at.Add(2*time.Second)) {
					return fmt.Errorf("attempts %d, next %v; want 1 and the retry time rounded up to the second", m.Attempts, m.NextAttemptTime)
				}
				return nil
			}},
		{name: "gone drops every message of the endpoint", o: outcome{result: webhookdelivery.Result{Outcome: webhookdelivery.Disable}, generation: 3, err: "410"},
			removed: "m1,m3", messages: "m2", state: switchboardv1alpha1.WebhookEndpointState{WebhookUID: "u1", DisabledGeneration: 3, Dropped: 2, LastError: "410"}},
		{name: "given up", o: outcome{result: webhookdelivery.Result{Outcome: webhookdelivery.GiveUp}, err: "timeout"},
			removed: "m1", messages: "m2,m3", state: switchboardv1alpha1.WebhookEndpointState{WebhookUID: "u1", Dropped: 1, LastError: "timeout"}},
		{name: "webhook gone: dropped, not counted", o: outcome{drop: true},
			removed: "m1", messages: "m2,m3", state: switchboardv1alpha1.WebhookEndpointState{WebhookUID: "u1"}},
		{name: "disabled: dropped and counted", o: outcome{drop: true, count: true},
			removed: "m1", messages: "m2,m3", state: switchboardv1alpha1.WebhookEndpointState{WebhookUID: "u1", Dropped: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := spec()
			removed := apply(&s, "u1", "m1", tt.o, at)
			var left []string
			for _, m := range s.Messages {
				left = append(left, m.ID)
			}
			if strings.Join(removed, ",") != tt.removed || strings.Join(left, ",") != tt.messages {
				t.Errorf("removed %v, left %v; want %s, %s", removed, left, tt.removed, tt.messages)
			}
			st := findState(&s, "u1")
			if st == nil || fmt.Sprint(*st) != fmt.Sprint(tt.state) {
				t.Errorf("state %+v, want %+v", st, tt.state)
			}
			if tt.check != nil {
				if err := tt.check(&s); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// The endpoint states stay within the CRD's 64: idle ones are forgotten first.
func TestEndpointStateBound(t *testing.T) {
	s := switchboardv1alpha1.WebhookOutboxSpec{Messages: []switchboardv1alpha1.WebhookMessage{msg("m", "busy", 0, nil)}}
	s.Endpoints = append(s.Endpoints, switchboardv1alpha1.WebhookEndpointState{WebhookUID: "busy"},
		switchboardv1alpha1.WebhookEndpointState{WebhookUID: "disabled", DisabledGeneration: 2})
	for i := range 62 {
		s.Endpoints = append(s.Endpoints, switchboardv1alpha1.WebhookEndpointState{WebhookUID: fmt.Sprint(i)})
	}
	endpointState(&s, "new")
	if len(s.Endpoints) != 64 || findState(&s, "busy") == nil || findState(&s, "disabled") == nil || findState(&s, "new") == nil {
		t.Errorf("%d states after adding one to 64; busy, disabled and new kept: %v %v %v",
			len(s.Endpoints), findState(&s, "busy") != nil, findState(&s, "disabled") != nil, findState(&s, "new") != nil)
	}
}

func TestMirror(t *testing.T) {
	delivered := metav1.NewTime(at)
	for _, tt := range []struct {
		name  string
		ready *metav1.Condition
		state *switchboardv1alpha1.WebhookEndpointState
		want  string
	}{
		{name: "nothing yet", want: "True/Active"},
		{name: "delivered", state: &switchboardv1alpha1.WebhookEndpointState{WebhookUID: "u1", LastDeliveryTime: &delivered}, want: "True/Active"},
		{name: "failing", state: &switchboardv1alpha1.WebhookEndpointState{WebhookUID: "u1", LastError: "POST https://x: 500"}, want: "False/Failing: The last attempt failed: POST https://x: 500"},
		{name: "gone at this generation", state: &switchboardv1alpha1.WebhookEndpointState{WebhookUID: "u1", DisabledGeneration: 2, LastError: "410"}, want: "False/Gone"},
		{name: "the operator's reason stays", ready: &metav1.Condition{Type: "Ready", Status: "False", Reason: switchboardv1alpha1.ReasonWebhookInvalidEndpoint, Message: "spec.url: loopback"},
			state: &switchboardv1alpha1.WebhookEndpointState{WebhookUID: "u1", LastError: "x"}, want: "False/InvalidEndpoint: spec.url: loopback"},
		{name: "active stays as set", ready: &metav1.Condition{Type: "Ready", Status: "True", Reason: switchboardv1alpha1.ReasonWebhookActive, Message: "the operator's words"},
			want: "True/Active: the operator's words"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kw := &switchboardv1alpha1.KeyWebhook{}
			kw.UID, kw.Generation = "u1", 2
			if tt.ready != nil {
				kw.Status.Conditions = []metav1.Condition{*tt.ready}
			}
			spec := &switchboardv1alpha1.WebhookOutboxSpec{Messages: []switchboardv1alpha1.WebhookMessage{msg("m1", "u1", 0, nil), msg("m2", "u2", 0, nil)}}
			if tt.state != nil {
				spec.Endpoints = []switchboardv1alpha1.WebhookEndpointState{*tt.state}
			}
			mirror(kw, spec)
			if got := ready(kw); !strings.HasPrefix(got, tt.want) {
				t.Errorf("Ready %s, want %s…", got, tt.want)
			}
			if kw.Status.Pending != 1 {
				t.Errorf("pending %d, want 1", kw.Status.Pending)
			}
		})
	}
}
