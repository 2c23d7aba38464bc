//go:build !unit

package apikey_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/misusealerts"
	"github.com/switchboard-dev/switchboard/internal/controller/keyjournal"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

// Misuse events, from who presented a bound key as the API server writes it (status.binding,
// a merge patch like the server's) to the outbox the sender reads and the Events, on a real
// API server.

// writeBinding writes status.binding as the API server does: misuses counted, the last seen
// at last, an unbound presenter from 10.0.0.9 that proved nothing and a bound one.
func writeBinding(t *testing.T, ns, name string, misuses int64, last time.Time) {
	t.Helper()
	at := last.UTC().Format(time.RFC3339)
	body, err := json.Marshal(map[string]any{"status": map[string]any{"binding": map[string]any{
		"misuses": misuses, "lastMisuseAt": at, "observedAt": at,
		"presenters": []map[string]any{
			{"principal": "system:serviceaccount:" + ns + ":checkout", "address": "10.0.0.5", "bound": true, "requests": 40, "lastSeen": at},
			{"principal": "", "address": "10.0.0.9", "bound": false, "requests": misuses, "lastSeen": at},
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	key := &switchboardv1alpha1.APIKey{}
	if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: name}, key); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Status().Patch(testCtx(t), key, client.RawPatch(types.MergePatchType, body)); err != nil {
		t.Fatal(err)
	}
}

// misuseMessage is one apikey.misused message the outbox should hold: the last misuse it
// reports and how many it counts.
type misuseMessage struct {
	last    time.Time
	misuses int64
}

// misuseOutboxHolds checks that ns's outbox in system holds exactly want for hook, in order,
// each with the id of its last misuse, valid against the schema, counting what it should and
// naming the unbound presenter alone.
func misuseOutboxHolds(system, ns string, key *switchboardv1alpha1.APIKey, hook *switchboardv1alpha1.KeyWebhook, want []misuseMessage, schema *jsonschema.Schema) error {
	box := &switchboardv1alpha1.WebhookOutbox{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: system, Name: switchboardv1alpha1.WebhookOutboxName(ns)}, box); err != nil {
		if apierrors.IsNotFound(err) && len(want) == 0 {
			return nil
		}
		return err
	}
	if len(box.Spec.Messages) != len(want) {
		return fmt.Errorf("outbox holds %d messages, want %d", len(box.Spec.Messages), len(want))
	}
	for i, m := range box.Spec.Messages {
		w := want[i]
		if id := keyjournal.MessageID(hook.UID, keyjournal.MisuseEventID(key.UID, w.last)); m.Type != "apikey.misused" || m.ID != id {
			return fmt.Errorf("message %d: %s %s, want apikey.misused %s", i, m.Type, m.ID, id)
		}
		payload, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(m.Body)))
		if err != nil {
			return err
		}
		if err := schema.Validate(payload); err != nil {
			return fmt.Errorf("message %d breaks its schema: %w", i, err)
		}
		var e webhookdelivery.Event
		if err := json.Unmarshal([]byte(m.Body), &e); err != nil {
			return err
		}
		u := e.Data.Misuse
		if u == nil || u.Misuses != w.misuses || !u.LastMisuseAt.Equal(w.last) || u.Mode != "ReportOnly" ||
			len(u.Presenters) != 1 || u.Presenters[0].Address != "10.0.0.9" || e.Data.KeyHint != key.Status.KeyHint {
			return fmt.Errorf("message %d reports %+v of key %s, want %d misuses, the last at %s, by 10.0.0.9", i, u, e.Data.KeyHint, w.misuses, w.last)
		}
	}
	return nil
}

// TestMisuseEventsAtMostOncePerInterval drives the reconciler by hand (its clock a fake one)
// through the misuses of a key bound in ReportOnly mode, status.binding written as the server
// writes it: 3 misuses send one event at once; 2 more 4 minutes later none (the interval);
// the wake the reconcile asks for, 12 minutes after the event, sends the second counting those
// 2 (its status patch fails once: the next reconcile records nothing twice, and the Event is
// emitted once, after the status that reports it); the same status written again, and a fresh
// reconciler (an operator restart), nothing. The outbox and the history hold each event once,
// with the id of its last misuse; one Warning Event KeyMisused each.
func TestMisuseEventsAtMostOncePerInterval(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t)
	schema := compileSchemas(t)[webhookdelivery.KeyMisused]
	hook := newKeyWebhook(t, w.ns, "misuse", "apikey.misused")
	w.createKey("k", func(k *switchboardv1alpha1.APIKey) {
		k.Spec.Binding = &switchboardv1alpha1.APIKeyBinding{Mode: switchboardv1alpha1.BindingReportOnly, Consumers: true}
	})
	w.settle("k")
	recorder := &recordedEvents{}
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: w.ns, Name: "k"}}
	reconcile := func(c client.WithWatch) (ctrl.Result, error) {
		r := w.reconciler(c)
		r.Recorder = recorder
		return r.Reconcile(testCtx(t), req)
	}
	settle := func() ctrl.Result {
		t.Helper()
		for range 10 {
			res, err := reconcile(env.Client)
			if err != nil {
				t.Fatal(err)
			}
			if again, _ := reconcile(env.Client); again == res {
				return res
			}
		}
		t.Fatal("the key did not settle")
		return ctrl.Result{}
	}
	check := func(what string, want []misuseMessage) {
		t.Helper()
		key := w.mustKey("k")
		if err := misuseOutboxHolds(w.system, w.ns, key, hook, want, schema); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := recorder.of(misusealerts.ReasonKeyMisused); len(got) != len(want) {
			t.Fatalf("%s: %d KeyMisused Events %q, want %d", what, len(got), got, len(want))
		}
	}
	start := w.clock.Now()
	first := misuseMessage{start.Add(-30 * time.Second).Truncate(time.Second), 3}

	writeBinding(t, w.ns, "k", 3, first.last)
	settle()
	check("3 misuses", []misuseMessage{first})
	rec := w.mustKey("k").Status.MisuseAlerts
	if rec == nil || rec.ReportedMisuses != 3 || !rec.ReportedAt.Time.Equal(start) {
		t.Fatalf("the record is %+v, want 3 misuses reported at %s", rec, start)
	}
	if note := recorder.of(misusealerts.ReasonKeyMisused)[0]; !strings.Contains(note, "presented 3 times") || !strings.Contains(note, "no proof from 10.0.0.9") {
		t.Errorf("the Event says %q", note)
	}

	w.clock.Step(4 * time.Minute)
	second := misuseMessage{w.clock.Now().Add(-10 * time.Second), 2}
	writeBinding(t, w.ns, "k", 5, second.last)
	res := settle()
	check("2 more within the interval", []misuseMessage{first})
	wake := start.Add(misusealerts.Interval + misusealerts.Settle)
	if got := w.clock.Now().Add(res.RequeueAfter); res.RequeueAfter == 0 || got.After(wake) {
		t.Fatalf("the reconcile asks to run again at %s, want by %s", got, wake)
	}

	// The wake: the event is recorded, the status patch that publishes it fails.
	w.clock.SetTime(wake)
	statusDown := interceptor.NewClient(env.Client, interceptor.Funcs{
		SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
			return errStatusDown
		}})
	if _, err := reconcile(statusDown); !errors.Is(err, errStatusDown) {
		t.Fatalf("want the injected error, got %v", err)
	}
	if err := misuseOutboxHolds(w.system, w.ns, w.mustKey("k"), hook, []misuseMessage{first, second}, schema); err != nil {
		t.Fatalf("before the status: %v", err)
	}
	if got := recorder.of(misusealerts.ReasonKeyMisused); len(got) != 1 {
		t.Fatalf("an Event emitted before its status: %q", got)
	}
	w.clock.Step(time.Minute)
	settle()
	check("the wake after the interval", []misuseMessage{first, second})

	writeBinding(t, w.ns, "k", 5, second.last)
	settle()
	check("the same misuses written again", []misuseMessage{first, second})
	recorder.notes = nil
	if _, err := reconcile(env.Client); err != nil { // as a restarted operator does
		t.Fatal(err)
	}
	if got := recorder.of(misusealerts.ReasonKeyMisused); len(got) != 0 {
		t.Fatalf("a restarted operator emitted %q", got)
	}
	if err := misuseOutboxHolds(w.system, w.ns, w.mustKey("k"), hook, []misuseMessage{first, second}, schema); err != nil {
		t.Fatalf("after a restart: %v", err)
	}

	h := &switchboardv1alpha1.APIKeyHistory{}
	if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: w.system, Name: switchboardv1alpha1.APIKeyHistoryName(string(w.mustKey("k").UID))}, h); err != nil {
		t.Fatal(err)
	}
	var history []string
	for _, e := range h.Spec.Events {
		if e.Type == "apikey.misused" {
			history = append(history, e.Message)
		}
	}
	if len(history) != 2 || !strings.Contains(history[1], "presented 2 times") {
		t.Errorf("the history lists the misuses %q, want the two events", history)
	}
}

// TestMisuseEventFromTheServersWrite: with the operator running, the server's write of a
// misuse wakes it (no poke): one apikey.misused in the outbox, one Warning Event KeyMisused.
func TestMisuseEventFromTheServersWrite(t *testing.T) {
	kt := newKeyTest(t)
	schema := compileSchemas(t)[webhookdelivery.KeyMisused]
	hook := newKeyWebhook(t, kt.ns, "misuse", "apikey.misused")
	key := kt.create("k", func(k *switchboardv1alpha1.APIKey) {
		k.Spec.Binding = &switchboardv1alpha1.APIKeyBinding{Mode: switchboardv1alpha1.BindingReportOnly, Consumers: true}
	})
	key = kt.waitIssued(key, 1)
	last := time.Now().Truncate(time.Second)
	writeBinding(t, kt.ns, "k", 1, last)
	kt.waitFor(key, "the misuse events' record", func(k *switchboardv1alpha1.APIKey) error {
		if r := k.Status.MisuseAlerts; r == nil || r.ReportedMisuses != 1 {
			return fmt.Errorf("record %+v", r)
		}
		return nil
	})
	if err := misuseOutboxHolds(kt.system, kt.ns, kt.get(key), hook, []misuseMessage{{last, 1}}, schema); err != nil {
		t.Fatal(err)
	}
	kt.waitEvent(key, misusealerts.ReasonKeyMisused, "presented 1 time by workloads its binding does not name")
}
