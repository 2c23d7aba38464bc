package keyadmission

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/renewalinterval"
)

// granted waits up to a few seconds for the turn acquire gives in the background.
func granted(t *testing.T, what string, got <-chan func()) func() {
	t.Helper()
	select {
	case release := <-got:
		return release
	case <-time.After(5 * time.Second):
		t.Fatalf("%s got no turn", what)
		return nil
	}
}

// acquireLater asks for namespace's turn in the background; the channel gets its release.
func acquireLater(t *testing.T, tr *turns, namespace string) <-chan func() {
	t.Helper()
	got := make(chan func(), 1)
	go func() {
		release, err := tr.acquire(context.Background(), namespace)
		if err != nil {
			t.Errorf("%s: %v", namespace, err)
			return
		}
		got <- release
	}()
	return got
}

// waiting says how many checks wait their turn.
func (t *turns) waiting() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, line := range t.lines {
		n += len(line)
	}
	return n
}

// waitQueued waits until n checks wait their turn.
func waitQueued(t *testing.T, tr *turns, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for tr.waiting() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d checks waiting, want %d", tr.waiting(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestTurnsRotateNamespaces: while one namespace's checks wait in a line, another's comes
// next after the one running, not after all of them; each namespace's own in the order they
// came.
func TestTurnsRotateNamespaces(t *testing.T) {
	tr := newTurns(1, 4, time.Minute)
	release, err := tr.acquire(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	type turn struct {
		name    string
		release func()
	}
	turns := make(chan turn)
	asked := []string{"a1", "a2", "a3", "b1"}
	for i, name := range asked {
		go func() {
			r, err := tr.acquire(context.Background(), name[:1])
			if err != nil {
				t.Errorf("%s: %v", name, err)
				return
			}
			turns <- turn{name, r}
		}()
		waitQueued(t, tr, i+1)
	}
	var got []string
	for range asked {
		release()
		select {
		case next := <-turns:
			got, release = append(got, next.name), next.release
		case <-time.After(5 * time.Second):
			t.Fatalf("no check got the turn after %v", got)
		}
	}
	release()
	if want := []string{"a1", "b1", "a2", "a3"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("turns went to %v (asked in the order %v), want %v", got, asked, want)
	}
	if len(tr.held) != 0 || tr.inUse != 0 || len(tr.rotation) != 0 {
		t.Fatalf("left behind: held %v, in use %d, rotation %v", tr.held, tr.inUse, tr.rotation)
	}
}

// TestTurnsRefuseABusyNamespaceAtOnce: a namespace holding all its turns (one running, one
// waiting) is refused at once, while another namespace still gets its turn.
func TestTurnsRefuseABusyNamespaceAtOnce(t *testing.T) {
	tr := newTurns(1, 2, time.Minute)
	release, err := tr.acquire(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	second := acquireLater(t, tr, "a")
	waitQueued(t, tr, 1)
	start := time.Now()
	if _, err := tr.acquire(context.Background(), "a"); !errors.Is(err, errNamespaceBusy) {
		t.Fatalf("a third check of a busy namespace: %v, want %v", err, errNamespaceBusy)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("the refusal took %s", took)
	}
	other := acquireLater(t, tr, "b")
	waitQueued(t, tr, 2)
	release()
	granted(t, "the namespace's second check", second)()
	granted(t, "another namespace's check", other)()
}

// TestTurnsWaitIsBounded: a check waits for its turn at most maxWait, or until its request
// ends, then leaves the line; the turn passes on to the next as if it had never waited.
func TestTurnsWaitIsBounded(t *testing.T) {
	tr := newTurns(1, 2, 100*time.Millisecond)
	release, err := tr.acquire(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := tr.acquire(context.Background(), "b"); !errors.Is(err, errNoTurn) {
		t.Fatalf("a wait past maxWait: %v, want %v", err, errNoTurn)
	}
	if took := time.Since(start); took < 100*time.Millisecond || took > 3*time.Second {
		t.Fatalf("gave up after %s, want maxWait (100ms)", took)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tr.acquire(ctx, "c"); !errors.Is(err, errNoTurn) {
		t.Fatalf("a request that ended: %v, want %v", err, errNoTurn)
	}
	if tr.waiting() != 0 || len(tr.rotation) != 0 || tr.held["b"] != 0 || tr.held["c"] != 0 {
		t.Fatalf("those that gave up are still counted: held %v, rotation %v", tr.held, tr.rotation)
	}
	release()
	if tr.inUse != 0 || len(tr.held) != 0 {
		t.Fatalf("left behind: held %v, in use %d", tr.held, tr.inUse)
	}
	again, err := tr.acquire(context.Background(), "b")
	if err != nil {
		t.Fatalf("the turn free again: %v", err)
	}
	again()
}

// TestHandlerTurns: through the handler, a check of cron windows whose namespace's turns are
// all held is refused at once with a 429 that names the namespace and says to retry (weekly
// windows alone, which CEL checked and whose webhook fails open, are admitted with a warning);
// one of another namespace waits for its turn and gives up with a 503 when its request ends
// first; once the turn is free it is checked.
func TestHandlerTurns(t *testing.T) {
	wh := Handler(clocktesting.NewFakePassiveClock(time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)), renewalinterval.Default)
	v := wh.Handler.(*Validator)
	cron := switchboardv1alpha1.APIKeyRenewalWindow{Cron: "0 0 * * *", Duration: metav1.Duration{Duration: time.Minute}, TimeZone: "UTC"}
	weekly := switchboardv1alpha1.APIKeyRenewalWindow{Start: "00:00", Duration: metav1.Duration{Duration: time.Minute}, TimeZone: "UTC"}
	requestOf := func(ns string, w switchboardv1alpha1.APIKeyRenewalWindow) admission.Request {
		key := switchboardv1alpha1.APIKey{TypeMeta: metav1.TypeMeta{APIVersion: "switchboard.dev/v1alpha1", Kind: "APIKey"},
			ObjectMeta: metav1.ObjectMeta{Name: "k", Namespace: ns}}
		key.Spec.RenewBefore = &metav1.Duration{Duration: time.Hour}
		key.Spec.RenewalWindows = []switchboardv1alpha1.APIKeyRenewalWindow{w}
		raw, err := json.Marshal(&key)
		if err != nil {
			t.Fatal(err)
		}
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Namespace: ns, Object: runtime.RawExtension{Raw: raw}}}
	}
	request := func(ns string) admission.Request { return requestOf(ns, cron) }

	running, err := v.turns.acquire(context.Background(), "flood") // a check in progress
	if err != nil {
		t.Fatal(err)
	}
	waiting := acquireLater(t, v.turns, "flood") // and one waiting
	waitQueued(t, v.turns, 1)
	resp := v.Handle(context.Background(), request("flood"))
	if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusTooManyRequests ||
		resp.Result.Message != "too many renewal-window checks in progress for namespace flood; retry" {
		t.Fatalf("a check of a namespace whose turns are held: %+v, want a 429 naming it", resp.Result)
	}
	if resp := v.Handle(context.Background(), requestOf("flood", weekly)); !resp.Allowed || len(resp.Warnings) != 1 ||
		!strings.Contains(resp.Warnings[0], "not checked across daylight saving time changes: too many renewal-window checks in progress for namespace flood") {
		t.Fatalf("weekly windows of a namespace whose turns are held: allowed %v, warnings %q; want admitted with a warning", resp.Allowed, resp.Warnings)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if resp := v.Handle(ctx, request("other")); resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusServiceUnavailable ||
		!strings.Contains(resp.Result.Message, "retry") {
		t.Fatalf("a check while another runs, its request ending: %+v, want a 503", resp.Result)
	}
	running()
	granted(t, "the waiting check", waiting)()
	resp = v.Handle(context.Background(), request("other"))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "no renewal window opens between") {
		t.Fatalf("a check with the turn free: %+v, want the refusal", resp.Result)
	}
	if v.turns.inUse != 0 || len(v.turns.held) != 0 {
		t.Fatal("the check did not give its turn back")
	}
}
