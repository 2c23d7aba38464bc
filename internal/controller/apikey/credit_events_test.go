//go:build !unit

package apikey_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/keyjournal"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

// Credit events, from the balance the API server writes (status.credits, a merge patch like
// the server's) to the outbox the sender reads, on a real API server.

// Two monthly periods, named as the server names them.
var (
	creditsNov = creditPeriod{"M1793491200", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	creditsDec = creditPeriod{"M1796083200", time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}
)

type creditPeriod struct {
	id  string
	end time.Time
}

// writeCredits writes status.credits as the API server does: used of 1000 credits spent in p,
// counted at observedAt.
func writeCredits(t *testing.T, ns, name string, p creditPeriod, used int64, observedAt time.Time) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"status": map[string]any{"credits": map[string]any{
		"period": p.id, "periodEnd": p.end.Format(time.RFC3339), "used": used, "remaining": 1000 - used,
		"observedAt": observedAt.UTC().Format(time.RFC3339)}}})
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

// creditMessage is one credit event's message the outbox should hold.
type creditMessage struct {
	typ     webhookdelivery.EventType
	period  creditPeriod
	percent int
}

// creditOutboxHolds checks that ns's outbox in system holds exactly want for hook, in order,
// each with the id of its period and threshold, valid against its schema, reporting its period.
func creditOutboxHolds(system, ns string, key *switchboardv1alpha1.APIKey, hook *switchboardv1alpha1.KeyWebhook, want []creditMessage, schemas map[webhookdelivery.EventType]*jsonschema.Schema) error {
	box := &switchboardv1alpha1.WebhookOutbox{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: system, Name: switchboardv1alpha1.WebhookOutboxName(ns)}, box); err != nil {
		if apierrors.IsNotFound(err) && len(want) == 0 {
			return nil
		}
		return err
	}
	var got, wantTypes []string
	for _, m := range box.Spec.Messages {
		got = append(got, string(m.Type))
	}
	for _, w := range want {
		wantTypes = append(wantTypes, string(w.typ))
	}
	if !slices.Equal(got, wantTypes) {
		return fmt.Errorf("outbox holds %v, want %v", got, wantTypes)
	}
	for i, m := range box.Spec.Messages {
		w := want[i]
		if id := keyjournal.MessageID(hook.UID, keyjournal.PeriodEventID(key.UID, w.typ, w.period.id, w.percent)); m.ID != id {
			return fmt.Errorf("message %d (%s): id %s, want %s", i, w.typ, m.ID, id)
		}
		payload, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(m.Body)))
		if err != nil {
			return err
		}
		if err := schemas[w.typ].Validate(payload); err != nil {
			return fmt.Errorf("message %d (%s) breaks its schema: %w", i, w.typ, err)
		}
		var e webhookdelivery.Event
		if err := json.Unmarshal([]byte(m.Body), &e); err != nil {
			return err
		}
		if c := e.Data.Credits; c == nil || c.Period != w.period.id || c.ThresholdPercent != w.percent || e.Data.KeyHint != key.Status.KeyHint {
			return fmt.Errorf("message %d (%s) reports %+v of key %s", i, w.typ, c, e.Data.KeyHint)
		}
	}
	return nil
}

// TestCreditEventsOncePerPeriod drives the reconciler by hand through a period of a key with
// 1000 credits a month, the balance written as the server writes it: 500 used sends nothing,
// 850 credits_low at 80 %, 870 nothing, 1000 credits_low at 90 % and credits_exhausted (the
// status patch publishing them fails once: the next reconcile records nothing twice), a late
// write of the same balance nothing, a fresh reconciler (an operator restart) nothing, then
// December's first balance credits_refilled. The outbox holds each once, with its period's id.
func TestCreditEventsOncePerPeriod(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t)
	schemas := compileSchemas(t)
	hook := newKeyWebhook(t, w.ns, "credits", "apikey.credits_low", "apikey.credits_exhausted", "apikey.credits_refilled")
	w.createKey("k", func(k *switchboardv1alpha1.APIKey) {
		k.Spec.Credits = &switchboardv1alpha1.APIKeyCredits{Amount: 1000, Refill: switchboardv1alpha1.CreditsMonthly}
	})
	w.settle("k")
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: w.ns, Name: "k"}}
	reconcile := func(c client.WithWatch) error {
		_, err := w.reconciler(c).Reconcile(testCtx(t), req)
		return err
	}
	at := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	// step writes a balance of used in p, settles, and checks the outbox holds want and the
	// record is at level of recorded (none: no record).
	step := func(what string, p creditPeriod, used int64, want []creditMessage, level switchboardv1alpha1.CreditAlertLevel, recorded creditPeriod) {
		t.Helper()
		at = at.Add(time.Minute)
		writeCredits(t, w.ns, "k", p, used, at)
		w.settle("k")
		key := w.mustKey("k")
		if err := creditOutboxHolds(w.system, w.ns, key, hook, want, schemas); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if level == "" {
			if key.Status.CreditAlerts != nil {
				t.Fatalf("%s: a record %+v, want none", what, key.Status.CreditAlerts)
			}
			return
		}
		if r := key.Status.CreditAlerts; r == nil || r.Period != recorded.id || r.Level != level {
			t.Fatalf("%s: the record is %+v, want %s of %s", what, r, level, recorded.id)
		}
	}
	low80 := creditMessage{webhookdelivery.KeyCreditsLow, creditsNov, 80}
	low90 := creditMessage{webhookdelivery.KeyCreditsLow, creditsNov, 90}
	exhausted := creditMessage{webhookdelivery.KeyCreditsExhausted, creditsNov, 0}
	refilled := creditMessage{webhookdelivery.KeyCreditsRefilled, creditsDec, 0}

	step("500 used", creditsNov, 500, nil, "", creditPeriod{})
	step("850 used", creditsNov, 850, []creditMessage{low80}, switchboardv1alpha1.CreditsUsed80, creditsNov)
	step("870 used", creditsNov, 870, []creditMessage{low80}, switchboardv1alpha1.CreditsUsed80, creditsNov)

	// None left, and the status patch that would record it fails: the events are in the outbox
	// already (recorded first), the record is not.
	at = at.Add(time.Minute)
	writeCredits(t, w.ns, "k", creditsNov, 1000, at)
	statusDown := interceptor.NewClient(env.Client, interceptor.Funcs{
		SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
			return errStatusDown
		}})
	if err := reconcile(statusDown); !errors.Is(err, errStatusDown) {
		t.Fatalf("want the injected error, got %v", err)
	}
	if r := w.mustKey("k").Status.CreditAlerts; r.Level != switchboardv1alpha1.CreditsUsed80 {
		t.Fatalf("the record moved to %s through a failing patch", r.Level)
	}
	all := []creditMessage{low80, low90, exhausted}
	if err := creditOutboxHolds(w.system, w.ns, w.mustKey("k"), hook, all, schemas); err != nil {
		t.Fatalf("before the status: %v", err)
	}
	w.settle("k")
	step("1000 used, written again", creditsNov, 1000, all, switchboardv1alpha1.CreditsExhausted, creditsNov)
	if err := reconcile(env.Client); err != nil { // a fresh reconciler: the operator restarted
		t.Fatal(err)
	}
	if err := creditOutboxHolds(w.system, w.ns, w.mustKey("k"), hook, all, schemas); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	step("December's first balance", creditsDec, 2, append(all, refilled), switchboardv1alpha1.CreditsUnder80, creditsDec)
	step("November's late write", creditsNov, 1000, append(all, refilled), switchboardv1alpha1.CreditsUnder80, creditsDec)

	var history []string
	h := &switchboardv1alpha1.APIKeyHistory{}
	if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: w.system, Name: switchboardv1alpha1.APIKeyHistoryName(string(w.mustKey("k").UID))}, h); err != nil {
		t.Fatal(err)
	}
	for _, e := range h.Spec.Events {
		if e.Type != "apikey.created" && e.Type != "apikey.revealed" {
			history = append(history, string(e.Type))
		}
	}
	if want := []string{"apikey.credits_low", "apikey.credits_low", "apikey.credits_exhausted", "apikey.credits_refilled"}; !slices.Equal(history, want) {
		t.Errorf("the history lists %v, want %v", history, want)
	}
}

// TestCreditEventsFromTheServersWrite: with the operator running, the server's write of a
// balance past 80 % wakes it (no poke) and the outbox gets credits_low once.
func TestCreditEventsFromTheServersWrite(t *testing.T) {
	kt := newKeyTest(t)
	schemas := compileSchemas(t)
	hook := newKeyWebhook(t, kt.ns, "credits", "apikey.credits_low")
	key := kt.create("k", func(k *switchboardv1alpha1.APIKey) {
		k.Spec.Credits = &switchboardv1alpha1.APIKeyCredits{Amount: 1000, Refill: switchboardv1alpha1.CreditsMonthly}
	})
	key = kt.waitIssued(key, 1)
	writeCredits(t, kt.ns, "k", creditsNov, 810, time.Now())
	kt.waitFor(key, "the credit events' record at 80 %", func(k *switchboardv1alpha1.APIKey) error {
		if r := k.Status.CreditAlerts; r == nil || r.Level != switchboardv1alpha1.CreditsUsed80 {
			return fmt.Errorf("record %+v", r)
		}
		return nil
	})
	if err := creditOutboxHolds(kt.system, kt.ns, kt.get(key), hook, []creditMessage{{webhookdelivery.KeyCreditsLow, creditsNov, 80}}, schemas); err != nil {
		t.Fatal(err)
	}
}
