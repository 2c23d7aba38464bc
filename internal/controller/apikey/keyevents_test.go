//go:build !unit

package apikey_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/keyjournal"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

// Key events, recorded by the real operator: the messages its KeyWebhooks get, in the outbox
// the sender reads, and the key's history, in the system namespace and in the tenant's copy.

// newKeyWebhook creates a KeyWebhook in ns subscribed to types (every type when none).
func newKeyWebhook(t *testing.T, ns, name string, types ...switchboardv1alpha1.KeyEventType) *switchboardv1alpha1.KeyWebhook {
	t.Helper()
	h := &switchboardv1alpha1.KeyWebhook{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: switchboardv1alpha1.KeyWebhookSpec{
		URL: "https://hooks.example.com/" + name, EventTypes: types, SigningSecretRef: switchboardv1alpha1.KeyWebhookSecretReference{Name: "hooks"}}}
	if err := env.Client.Create(testCtx(t), h); err != nil {
		t.Fatal(err)
	}
	return h
}

// wantMessage is one message the outbox should hold: for a webhook, an event of the key.
type wantMessage struct {
	hook *switchboardv1alpha1.KeyWebhook
	typ  webhookdelivery.EventType
	gen  int64
}

// outboxHolds checks that ns's outbox in system holds exactly want, in order, for key, each
// body valid against its type's JSON Schema and about key.
func outboxHolds(system, ns string, key *switchboardv1alpha1.APIKey, want []wantMessage, schemas map[webhookdelivery.EventType]*jsonschema.Schema) error {
	box := &switchboardv1alpha1.WebhookOutbox{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: system, Name: switchboardv1alpha1.WebhookOutboxName(ns)}, box); err != nil {
		return err
	}
	var got, wantIDs []string
	for _, m := range box.Spec.Messages {
		got = append(got, fmt.Sprintf("%s %s", m.WebhookName, m.Type))
	}
	for _, w := range want {
		wantIDs = append(wantIDs, fmt.Sprintf("%s %s", w.hook.Name, w.typ))
	}
	if !slices.Equal(got, wantIDs) {
		return fmt.Errorf("outbox holds %v, want %v", got, wantIDs)
	}
	for i, m := range box.Spec.Messages {
		w := want[i]
		if id := keyjournal.MessageID(w.hook.UID, keyjournal.EventID(key.UID, w.typ, w.gen)); m.ID != id || m.WebhookUID != string(w.hook.UID) {
			return fmt.Errorf("message %d: id %s for webhook %s, want %s for %s", i, m.ID, m.WebhookUID, id, w.hook.UID)
		}
		payload, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(m.Body)))
		if err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		if err := schemas[w.typ].Validate(payload); err != nil {
			return fmt.Errorf("message %d (%s) breaks its schema: %w", i, w.typ, err)
		}
		data := payload.(map[string]any)["data"].(map[string]any)
		if data["namespace"] != key.Namespace || data["name"] != key.Name || data["keyGeneration"] == nil {
			return fmt.Errorf("message %d is about %v", i, data)
		}
	}
	return nil
}

// compileSchemas compiles every event type's schema, asserting formats.
func compileSchemas(t *testing.T) map[webhookdelivery.EventType]*jsonschema.Schema {
	t.Helper()
	out := map[webhookdelivery.EventType]*jsonschema.Schema{}
	for _, et := range webhookdelivery.EventTypes {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(webhookdelivery.Schema(et)))
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		loc := "https://switchboard.dev/schemas/webhooks/" + string(et) + ".json"
		if err := c.AddResource(loc, doc); err != nil {
			t.Fatal(err)
		}
		if out[et], err = c.Compile(loc); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// historyIs checks that the history in ns named name lists want, oldest first.
func historyIs(ns, name string, want []wantMessage) (*switchboardv1alpha1.APIKeyHistory, error) {
	h := &switchboardv1alpha1.APIKeyHistory{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, h); err != nil {
		return nil, err
	}
	var got, wantEvents []string
	for _, e := range h.Spec.Events {
		got = append(got, fmt.Sprintf("%s %d", e.Type, e.KeyGeneration))
	}
	for _, w := range want {
		wantEvents = append(wantEvents, fmt.Sprintf("%s %d", w.typ, w.gen))
	}
	if !slices.Equal(got, wantEvents) {
		return h, fmt.Errorf("history %s/%s lists %v, want %v", ns, name, got, wantEvents)
	}
	return h, nil
}

// TestKeyEventsAreRecorded: issue, rotate and revoke a key in a namespace with two
// KeyWebhooks, one for every event and one for revocations only: the outbox holds exactly the
// messages each subscribed to, with bodies valid against their schemas, and the history lists
// the events in order, in the system namespace and in the tenant's copy, which the APIKey owns.
// Deleting the APIKey deletes the history.
func TestKeyEventsAreRecorded(t *testing.T) {
	kt := newKeyTest(t)
	schemas := compileSchemas(t)
	all := newKeyWebhook(t, kt.ns, "all")
	revocations := newKeyWebhook(t, kt.ns, "revocations", "apikey.revoked")

	key := kt.create("ci", nil)
	kt.waitIssued(key, 1)
	kt.patchSpec(key, func(k *switchboardv1alpha1.APIKey) {
		k.Spec.Rotation = &switchboardv1alpha1.APIKeyRotation{RequestedAt: "first"}
	})
	key = kt.waitIssued(key, 2)
	kt.patchSpec(key, func(k *switchboardv1alpha1.APIKey) { k.Spec.Revoked = true })
	key = kt.waitFor(key, "revoked", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevoked)
	})

	want := []wantMessage{
		{all, webhookdelivery.KeyCreated, 1}, {all, webhookdelivery.KeyRotated, 2},
		{all, webhookdelivery.KeyRevoked, 2}, {revocations, webhookdelivery.KeyRevoked, 2},
	}
	// Recorded before the status that published it: no waiting.
	if err := outboxHolds(kt.system, kt.ns, key, want, schemas); err != nil {
		t.Fatal(err)
	}
	events := []wantMessage{{typ: webhookdelivery.KeyCreated, gen: 1}, {typ: webhookdelivery.KeyRotated, gen: 2}, {typ: webhookdelivery.KeyRevoked, gen: 2}}
	record, err := historyIs(kt.system, switchboardv1alpha1.APIKeyHistoryName(string(key.UID)), events)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range record.Spec.Events {
		if e.KeyHint == "" || e.Time.IsZero() {
			t.Errorf("history event %s has no hint or time", e.Type)
		}
	}
	cp, err := historyIs(kt.ns, key.Name, events)
	if err != nil {
		t.Fatal(err)
	}
	if owner := metav1.GetControllerOf(cp); owner == nil || owner.UID != key.UID || owner.Kind != "APIKey" {
		t.Errorf("the tenant's copy is controlled by %+v, want the APIKey", owner)
	}

	if err := env.Client.Delete(testCtx(t), key); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the history deleted with the APIKey", func() error {
		err := env.Client.Get(testCtx(t), client.ObjectKeyFromObject(record), &switchboardv1alpha1.APIKeyHistory{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still there")
	})
}

var errStatusDown = errors.New("injected: the status patch fails")

// TestKeyEventsAreRecordedOnceAcrossAFailedStatusPatch: the events are recorded before the
// status that publishes them; when that patch fails, the next reconcile computes the same
// events and records them again: one message, one history entry, the same ids.
func TestKeyEventsAreRecordedOnceAcrossAFailedStatusPatch(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t)
	all := newKeyWebhook(t, w.ns, "all")
	w.createKey("k", nil)
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: w.ns, Name: "k"}}
	patches := 0
	statusDown := interceptor.NewClient(env.Client, interceptor.Funcs{
		SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
			patches++
			return errStatusDown
		}})
	// The first reconcile adds the finalizer; the next issues the key, records its creation, and
	// cannot publish it.
	if _, err := w.reconciler(env.Client).Reconcile(testCtx(t), req); err != nil {
		t.Fatal(err)
	}
	if _, err := w.reconciler(statusDown).Reconcile(testCtx(t), req); !errors.Is(err, errStatusDown) {
		t.Fatalf("want the injected error, got %v", err)
	}
	key := w.mustKey("k")
	if patches != 1 || key.Status.KeyGeneration != 0 {
		t.Fatalf("%d status patches tried, keyGeneration %d published", patches, key.Status.KeyGeneration)
	}
	created := []wantMessage{{all, webhookdelivery.KeyCreated, 1}}
	if err := outboxHolds(w.system, w.ns, key, created, compileSchemas(t)); err != nil {
		t.Fatalf("before the status: %v", err)
	}
	w.settle("k")
	key = w.mustKey("k")
	if key.Status.KeyGeneration != 1 {
		t.Fatalf("keyGeneration %d after the status was published", key.Status.KeyGeneration)
	}
	if err := outboxHolds(w.system, w.ns, key, created, compileSchemas(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := historyIs(w.system, switchboardv1alpha1.APIKeyHistoryName(string(key.UID)), []wantMessage{{typ: webhookdelivery.KeyCreated, gen: 1}}); err != nil {
		t.Fatal(err)
	}
}

// TestKeyEventsFailingToRecordHoldTheStatus: when the events cannot be recorded, the status
// that would publish them is not written: the reconcile fails and is retried.
func TestKeyEventsFailingToRecordHoldTheStatus(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t)
	newKeyWebhook(t, w.ns, "all")
	w.createKey("k", nil)
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: w.ns, Name: "k"}}
	errOutboxDown := errors.New("injected: the outbox cannot be written")
	outboxDown := interceptor.NewClient(env.Client, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*switchboardv1alpha1.WebhookOutbox); ok {
				return errOutboxDown
			}
			return c.Create(ctx, obj, opts...)
		}})
	if _, err := w.reconciler(env.Client).Reconcile(testCtx(t), req); err != nil {
		t.Fatal(err)
	}
	if _, err := w.reconciler(outboxDown).Reconcile(testCtx(t), req); !errors.Is(err, errOutboxDown) {
		t.Fatalf("want the injected error, got %v", err)
	}
	if key := w.mustKey("k"); key.Status.KeyGeneration != 0 {
		t.Fatalf("keyGeneration %d published without its event recorded", key.Status.KeyGeneration)
	}
	w.settle("k")
	if key := w.mustKey("k"); key.Status.KeyGeneration != 1 {
		t.Fatalf("keyGeneration %d once the outbox could be written", key.Status.KeyGeneration)
	}
}
