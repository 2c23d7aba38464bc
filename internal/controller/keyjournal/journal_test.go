//go:build !unit

package keyjournal

import (
	"context"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/testenv"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

// The journal against a real API server (envtest): what it stores, and that it stores it once.

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Run(m, &env) }

// world is a tenant namespace with an APIKey, a system namespace and a journal over them.
type world struct {
	ns, system string
	key        *switchboardv1alpha1.APIKey
	j          *Journal
}

func newWorld(t *testing.T, c client.Client) *world {
	t.Helper()
	w := &world{ns: env.Namespace(t, "tenant"), system: env.Namespace(t, "system")}
	w.key = &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "ci"}}
	if err := env.Client.Create(context.Background(), w.key); err != nil {
		t.Fatal(err)
	}
	if c == nil {
		c = env.Client
	}
	w.j = &Journal{Client: c, APIReader: env.Client, SystemNamespace: w.system}
	return w
}

// webhook creates a KeyWebhook in the tenant namespace subscribed to types (all when none).
func (w *world) webhook(t *testing.T, name string, types ...switchboardv1alpha1.KeyEventType) *switchboardv1alpha1.KeyWebhook {
	t.Helper()
	h := &switchboardv1alpha1.KeyWebhook{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}, Spec: switchboardv1alpha1.KeyWebhookSpec{
		URL: "https://hooks.example.com/" + name, EventTypes: types, SigningSecretRef: switchboardv1alpha1.KeyWebhookSecretReference{Name: "hook-secret"}}}
	if err := env.Client.Create(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	return h
}

// keyEvent is event for w's APIKey.
func (w *world) keyEvent(t webhookdelivery.EventType, gen int64) Event {
	e := event(t, gen)
	e.ID = EventID(w.key.UID, t, gen)
	e.Data.Namespace = w.ns
	return e
}

func (w *world) outbox(t *testing.T) *switchboardv1alpha1.WebhookOutbox {
	t.Helper()
	box := &switchboardv1alpha1.WebhookOutbox{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: w.system, Name: switchboardv1alpha1.WebhookOutboxName(w.ns)}, box); err != nil {
		t.Fatal(err)
	}
	return box
}

func (w *world) history(t *testing.T, ns, name string) *switchboardv1alpha1.APIKeyHistory {
	t.Helper()
	h := &switchboardv1alpha1.APIKeyHistory{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, h); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestRecordTwiceKeepsOne: the same events recorded twice (a reconcile that ran again after a
// crash) are one message per subscribed webhook and one history entry each; the tenant's copy
// says what the record says and is owned by the APIKey.
func TestRecordTwiceKeepsOne(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	all := w.webhook(t, "all")
	onlyRevoked := w.webhook(t, "revoked", "apikey.revoked")
	events := []Event{w.keyEvent(webhookdelivery.KeyCreated, 1), w.keyEvent(webhookdelivery.KeyRevoked, 1)}
	ctx := context.Background()
	before := testutil.ToFloat64(eventsRecorded.WithLabelValues("apikey.revoked"))
	for range 2 {
		if err := w.j.Record(ctx, w.key, events); err != nil {
			t.Fatal(err)
		}
	}
	box := w.outbox(t)
	want := []string{MessageID(all.UID, events[0].ID), MessageID(all.UID, events[1].ID), MessageID(onlyRevoked.UID, events[1].ID)}
	var got []string
	for _, m := range box.Spec.Messages {
		got = append(got, m.ID)
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || box.Spec.Namespace != w.ns {
		t.Fatalf("outbox of %s holds %v, want %v", box.Spec.Namespace, got, want)
	}
	record := w.history(t, w.system, switchboardv1alpha1.APIKeyHistoryName(string(w.key.UID)))
	if len(record.Spec.Events) != 2 || record.Spec.Events[0].ID != events[0].ID || record.Spec.Events[1].ID != events[1].ID || record.Spec.APIKey.UID != string(w.key.UID) {
		t.Fatalf("history: %+v", record.Spec)
	}
	if got := testutil.ToFloat64(eventsRecorded.WithLabelValues("apikey.revoked")) - before; got != 1 {
		t.Errorf("switchboard_operator_key_events_total{type=apikey.revoked} rose by %v, want 1", got)
	}
	cp := w.history(t, w.ns, w.key.Name)
	if len(cp.Spec.Events) != 2 || cp.Spec.Events[1].ID != events[1].ID {
		t.Errorf("the tenant's copy holds %+v", cp.Spec.Events)
	}
	if owner := metav1.GetControllerOf(cp); owner == nil || owner.UID != w.key.UID {
		t.Errorf("the tenant's copy is controlled by %v, want the APIKey", owner)
	}

	if err := w.j.Delete(ctx, w.key.UID); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(record), &switchboardv1alpha1.APIKeyHistory{}); err == nil {
		t.Error("the history outlived Delete")
	}
	if err := w.j.Delete(ctx, w.key.UID); err != nil {
		t.Errorf("deleting a history that is gone: %v", err)
	}
}

// TestNothingWithoutEvents: most reconciles have no events, and write nothing.
func TestNothingWithoutEvents(t *testing.T) {
	t.Parallel()
	writes := 0
	c := interceptor.NewClient(env.Client, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			writes++
			return c.Create(ctx, obj, opts...)
		}})
	w := newWorld(t, c)
	w.webhook(t, "all")
	if err := w.j.Record(context.Background(), w.key, nil); err != nil || writes != 0 {
		t.Fatalf("Record of no events: %v, %d writes", err, writes)
	}
}

// TestFullOutboxDropsOldest: a namespace whose endpoint takes nothing has a bounded backlog:
// the oldest messages go, counted in spec.dropped, the endpoint's state and the metric.
func TestFullOutboxDropsOldest(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	h := w.webhook(t, "all")
	box := &switchboardv1alpha1.WebhookOutbox{ObjectMeta: metav1.ObjectMeta{Namespace: w.system, Name: switchboardv1alpha1.WebhookOutboxName(w.ns)},
		Spec: switchboardv1alpha1.WebhookOutboxSpec{Namespace: w.ns, Messages: messages("old", string(h.UID), switchboardv1alpha1.MaxOutboxMessages)}}
	ctx := context.Background()
	if err := env.Client.Create(ctx, box); err != nil {
		t.Fatal(err)
	}
	before := testutil.ToFloat64(outboxDropped)
	if err := w.j.Record(ctx, w.key, []Event{w.keyEvent(webhookdelivery.KeyCreated, 1), w.keyEvent(webhookdelivery.KeyRevealed, 1)}); err != nil {
		t.Fatal(err)
	}
	box = w.outbox(t)
	msgs := box.Spec.Messages
	if len(msgs) != switchboardv1alpha1.MaxOutboxMessages || msgs[0].ID != "old2" || msgs[len(msgs)-1].Type != "apikey.revealed" || box.Spec.Dropped != 2 {
		t.Fatalf("%d messages, first %s, last %s, dropped %d; want %d, old2, apikey.revealed, 2",
			len(msgs), msgs[0].ID, msgs[len(msgs)-1].Type, box.Spec.Dropped, switchboardv1alpha1.MaxOutboxMessages)
	}
	if len(box.Spec.Endpoints) != 1 || box.Spec.Endpoints[0].WebhookUID != string(h.UID) || box.Spec.Endpoints[0].Dropped != 2 {
		t.Errorf("endpoint states %+v, want 2 dropped for %s", box.Spec.Endpoints, h.UID)
	}
	if got := testutil.ToFloat64(outboxDropped) - before; got < 2 {
		t.Errorf("switchboard_operator_webhook_outbox_dropped_total rose by %v, want 2", got)
	}
}

// TestRecordRetriesOnConflict: the sender updates the same outbox (it removes what it
// delivered); a write that lost the race is made again on what the sender wrote, which stays.
func TestRecordRetriesOnConflict(t *testing.T) {
	t.Parallel()
	var once sync.Once
	var w *world
	c := interceptor.NewClient(env.Client, interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if _, ok := obj.(*switchboardv1alpha1.WebhookOutbox); ok {
				once.Do(func() {
					// The sender delivers the first message meanwhile.
					box := w.outbox(t)
					box.Spec.Messages = box.Spec.Messages[1:]
					if err := env.Client.Update(ctx, box); err != nil {
						t.Errorf("the sender's update: %v", err)
					}
				})
			}
			return c.Update(ctx, obj, opts...)
		}})
	w = newWorld(t, c)
	w.webhook(t, "all")
	ctx := context.Background()
	first := w.keyEvent(webhookdelivery.KeyCreated, 1)
	if err := w.j.Record(ctx, w.key, []Event{first}); err != nil {
		t.Fatal(err)
	}
	second := w.keyEvent(webhookdelivery.KeyRotated, 2)
	second.Data.KeyGeneration = 2
	if err := w.j.Record(ctx, w.key, []Event{second}); err != nil {
		t.Fatal(err)
	}
	msgs := w.outbox(t).Spec.Messages
	if len(msgs) != 1 || msgs[0].Type != "apikey.rotated" {
		t.Fatalf("outbox holds %+v, want the rotation alone (the creation was delivered)", msgs)
	}
	if n := len(w.history(t, w.system, switchboardv1alpha1.APIKeyHistoryName(string(w.key.UID))).Spec.Events); n != 2 {
		t.Errorf("history holds %d events, want 2", n)
	}
}
