package keyjournal

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

var testNow = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

// event is a valid key event of type t for generation gen of team/ci.
func event(t webhookdelivery.EventType, gen int64) Event {
	e := webhookdelivery.Event{Type: t, Timestamp: testNow, Data: webhookdelivery.KeyData{
		Namespace: "team", Name: "ci", KeyGeneration: gen, KeyHint: "sb_live_AbCd…wxyz", Reason: string(t) + " for a test"}}
	switch t {
	case webhookdelivery.KeyExpiring, webhookdelivery.KeyExpired:
		e.Data.ExpiresAt = &testNow
	case webhookdelivery.KeyLeaked:
		e.Data.URL = "https://github.com/acme/app"
	}
	return Event{ID: EventID("uid-1", t, gen), Event: e}
}

func TestIDs(t *testing.T) {
	a := EventID("uid-1", webhookdelivery.KeyRotated, 2)
	for name, other := range map[string]string{
		"another key":        EventID("uid-2", webhookdelivery.KeyRotated, 2),
		"another type":       EventID("uid-1", webhookdelivery.KeyRenewed, 2),
		"another generation": EventID("uid-1", webhookdelivery.KeyRotated, 3),
	} {
		if other == a {
			t.Errorf("%s: the same id %s", name, a)
		}
	}
	if again := EventID("uid-1", webhookdelivery.KeyRotated, 2); again != a {
		t.Errorf("computed again: %s, then %s", a, again)
	}
	m := MessageID("hook-1", a)
	if m == MessageID("hook-2", a) || m != MessageID("hook-1", a) {
		t.Errorf("message ids are not one per event and webhook")
	}
	for _, id := range []string{a, m} {
		if err := webhookdelivery.ValidateID(id); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
}

func hook(name string, types ...switchboardv1alpha1.KeyEventType) switchboardv1alpha1.KeyWebhook {
	return switchboardv1alpha1.KeyWebhook{ObjectMeta: metav1.ObjectMeta{Name: name, UID: typesUID(name)},
		Spec: switchboardv1alpha1.KeyWebhookSpec{EventTypes: types}}
}

func typesUID(name string) types.UID { return types.UID("uid-" + name) }

func TestMessagesFor(t *testing.T) {
	all, revoked := hook("all"), hook("revoked", "apikey.revoked")
	noURL := event(webhookdelivery.KeyLeaked, 1)
	noURL.Data.URL = ""
	cases := []struct {
		name           string
		hooks          []switchboardv1alpha1.KeyWebhook
		events         []Event
		want           []string // webhook/type
		wantUnsendable int
	}{
		{name: "no webhooks", events: []Event{event(webhookdelivery.KeyCreated, 1)}},
		{name: "all and one type", hooks: []switchboardv1alpha1.KeyWebhook{all, revoked},
			events: []Event{event(webhookdelivery.KeyCreated, 1), event(webhookdelivery.KeyRevoked, 1)},
			want:   []string{"all/apikey.created", "all/apikey.revoked", "revoked/apikey.revoked"}},
		{name: "nobody subscribed", hooks: []switchboardv1alpha1.KeyWebhook{revoked}, events: []Event{event(webhookdelivery.KeyRotated, 2)}},
		{name: "a payload that breaks its schema is sent to nobody", hooks: []switchboardv1alpha1.KeyWebhook{all},
			events: []Event{noURL, event(webhookdelivery.KeyRotated, 2)}, want: []string{"all/apikey.rotated"}, wantUnsendable: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msgs, unsendable := messagesFor(tc.hooks, tc.events)
			var got []string
			for _, m := range msgs {
				got = append(got, m.WebhookName+"/"+string(m.Type))
				if m.ID != MessageID(types.UID(m.WebhookUID), eventIDOf(tc.events, m.Type)) {
					t.Errorf("%s: id %s is not MessageID of its webhook and event", m.Type, m.ID)
				}
			}
			if !reflect.DeepEqual(got, tc.want) || len(unsendable) != tc.wantUnsendable {
				t.Errorf("messages %v, unsendable %d; want %v, %d", got, len(unsendable), tc.want, tc.wantUnsendable)
			}
		})
	}
}

func eventIDOf(events []Event, t switchboardv1alpha1.KeyEventType) string {
	for _, e := range events {
		if string(e.Type) == string(t) {
			return e.ID
		}
	}
	return ""
}

// messages are n outbox messages for webhook uid, ids prefix0..prefix<n-1>.
func messages(prefix, uid string, n int) []switchboardv1alpha1.WebhookMessage {
	out := make([]switchboardv1alpha1.WebhookMessage, n)
	for i := range out {
		out[i] = switchboardv1alpha1.WebhookMessage{ID: fmt.Sprintf("%s%d", prefix, i), WebhookUID: uid, Type: "apikey.created", Body: "{}"}
	}
	return out
}

func TestAppendMessages(t *testing.T) {
	max := switchboardv1alpha1.MaxOutboxMessages
	cases := []struct {
		name                   string
		held, add              []switchboardv1alpha1.WebhookMessage
		wantAdded, wantDropped int
		wantFirst              string
		wantEndpointDropped    int64
	}{
		{name: "into an empty outbox", add: messages("m", "a", 2), wantAdded: 2, wantFirst: "m0"},
		{name: "held already: nothing", held: messages("m", "a", 2), add: messages("m", "a", 2), wantFirst: "m0"},
		{name: "room for all", held: messages("old", "a", max-2), add: messages("m", "a", 2), wantAdded: 2, wantFirst: "old0"},
		{name: "full: the oldest go, counted", held: messages("old", "a", max), add: messages("m", "a", 3), wantAdded: 3, wantDropped: 3, wantFirst: "old3", wantEndpointDropped: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := switchboardv1alpha1.WebhookOutboxSpec{Messages: tc.held, Dropped: 5}
			added, dropped := appendMessages(&spec, tc.add)
			if added != tc.wantAdded || dropped != tc.wantDropped {
				t.Errorf("added %d, dropped %d; want %d, %d", added, dropped, tc.wantAdded, tc.wantDropped)
			}
			if len(spec.Messages) > max || spec.Messages[0].ID != tc.wantFirst || spec.Dropped != 5+int64(tc.wantDropped) {
				t.Errorf("%d messages, first %s, dropped %d", len(spec.Messages), spec.Messages[0].ID, spec.Dropped)
			}
			var endpointDropped int64
			for _, e := range spec.Endpoints {
				endpointDropped += e.Dropped
			}
			if endpointDropped != tc.wantEndpointDropped {
				t.Errorf("endpoints count %d dropped, want %d", endpointDropped, tc.wantEndpointDropped)
			}
		})
	}
}

func TestAppendEvents(t *testing.T) {
	max := switchboardv1alpha1.MaxHistoryEvents
	var many []Event
	for gen := int64(1); gen <= int64(max)+2; gen++ {
		many = append(many, event(webhookdelivery.KeyRotated, gen))
	}
	cases := []struct {
		name               string
		held, add          []Event
		wantAdded, wantLen int
		wantDropped        int64
		wantFirstGen       int64
	}{
		{name: "new", add: []Event{event(webhookdelivery.KeyCreated, 1)}, wantAdded: 1, wantLen: 1, wantFirstGen: 1},
		{name: "the same event twice: once", held: []Event{event(webhookdelivery.KeyCreated, 1)},
			add: []Event{event(webhookdelivery.KeyCreated, 1), event(webhookdelivery.KeyRevealed, 1)}, wantAdded: 1, wantLen: 2, wantFirstGen: 1},
		{name: "beyond the bound the oldest go", add: many, wantAdded: max + 2, wantLen: max, wantDropped: 2, wantFirstGen: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var spec switchboardv1alpha1.APIKeyHistorySpec
			appendEvents(&spec, tc.held)
			added := appendEvents(&spec, tc.add)
			if len(added) != tc.wantAdded || len(spec.Events) != tc.wantLen || spec.Dropped != tc.wantDropped || spec.Events[0].KeyGeneration != tc.wantFirstGen {
				t.Errorf("added %d, kept %d, dropped %d, first generation %d", len(added), len(spec.Events), spec.Dropped, spec.Events[0].KeyGeneration)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{{"short", 10, "short"}, {"exactly", 7, "exactly"}, {"too long", 4, "too…"}, {"ééééé", 3, "éé…"}} {
		if got := truncate(tc.in, tc.n); got != tc.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
