//go:build !unit

package apikey_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	apikeyctrl "github.com/switchboard-dev/switchboard/internal/controller/apikey"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/renewalinterval"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// A reconcile whose last write, the status patch, is lost (a conflict with a write that came
// first, or the process dying) after its action landed: the next reconcile must still say what
// that action did, from what the action recorded where only switchboard writes, not from the
// status it never got to write.

var errStatusLost = errors.New("injected: the status patch was lost")

// statusLost is env.Client whose patches of an APIKey's status fail.
func statusLost() client.WithWatch {
	return interceptor.NewClient(env.Client, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if _, isKey := obj.(*switchboardv1alpha1.APIKey); isKey && sub == "status" {
				return errStatusLost
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
}

// recordedEvents keeps the reasons and notes of the Events a reconciler driven by hand emits.
type recordedEvents struct {
	mu    sync.Mutex
	notes map[string][]string
}

func (e *recordedEvents) Eventf(_ runtime.Object, _ runtime.Object, _, reason, _, note string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.notes == nil {
		e.notes = map[string][]string{}
	}
	e.notes[reason] = append(e.notes[reason], fmt.Sprintf(note, args...))
}

func (e *recordedEvents) of(reason string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.notes[reason]
}

// reconcileWith runs one reconcile of APIKey name with c as the client and events as the
// recorder, and returns its error.
func (w *crashWorld) reconcileWith(c client.WithWatch, events *recordedEvents, name string) error {
	r := w.reconciler(c)
	if events != nil {
		r.Recorder = events
	}
	_, err := r.Reconcile(testCtx(w.t), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: w.ns, Name: name}})
	return err
}

func (w *crashWorld) hashRecord(key *switchboardv1alpha1.APIKey) keysecret.Issued {
	w.t.Helper()
	rec, _ := keysecret.IssuedOf(w.hash(key))
	return rec
}

// rotatedWithQuietPeriod creates revealed APIKey name, whose grace ends when its old key goes
// unused for 10m, issues its key and rotates it with a day's grace, and returns it as created.
func (w *crashWorld) rotatedWithQuietPeriod(name string) *switchboardv1alpha1.APIKey {
	w.t.Helper()
	w.createKey(name, func(k *switchboardv1alpha1.APIKey) { k.Spec.GraceEndsWhenUnusedFor = durationOf(10 * time.Minute) })
	w.settle(name)
	key := w.mustKey(name)
	key.Spec.Rotation = &switchboardv1alpha1.APIKeyRotation{RequestedAt: "r1", GracePeriod: metav1.Duration{Duration: 24 * time.Hour}}
	if err := env.Client.Update(testCtx(w.t), key); err != nil {
		w.t.Fatal(err)
	}
	w.settle(name)
	return key
}

// TestRenewalWhoseStatusWasLostIsStillARenewal: a delivered key renewed by a reconcile whose
// status patch is lost is published by the next one as the renewal it was: a KeyRenewed Event
// (and so the apikey.renewed key event), saying until when the old key stays valid.
func TestRenewalWhoseStatusWasLostIsStillARenewal(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t)
	w.createKey("renews", func(k *switchboardv1alpha1.APIKey) {
		k.Spec.SecretName = "app-key"
		k.Spec.Lifetime, k.Spec.RenewBefore = durationOf(time.Hour), durationOf(20*time.Minute)
	})
	w.settle("renews")
	issued := w.clock.Now()

	w.clock.Step(45 * time.Minute) // past the renewal time, 40m after the issue
	if err := w.reconcileWith(statusLost(), nil, "renews"); !errors.Is(err, errStatusLost) {
		t.Fatalf("the renewal's reconcile: %v, want its status patch lost", err)
	}
	key := w.mustKey("renews")
	if rec := w.hashRecord(key); rec.Generation != 2 || !rec.Renewal || key.Status.KeyGeneration != 1 {
		t.Fatalf("after the lost status patch: recorded generation %d (renewal %t), published %d; want 2, true, 1",
			rec.Generation, rec.Renewal, key.Status.KeyGeneration)
	}

	events := &recordedEvents{}
	if err := w.reconcileWith(env.Client, events, "renews"); err != nil {
		t.Fatal(err)
	}
	renewed := events.of("KeyRenewed")
	want := "stays valid until " + issued.Add(time.Hour).UTC().Format(time.RFC3339)
	if len(renewed) != 1 || !strings.Contains(renewed[0], want) {
		t.Fatalf("KeyRenewed Events %q, want one saying %q (all: %v)", renewed, want, events.notes)
	}
	key = w.mustKey("renews")
	if key.Status.KeyGeneration != 2 {
		t.Fatalf("published generation %d, want 2", key.Status.KeyGeneration)
	}
	if err := hasCondition(key.Status.Conditions, switchboardv1alpha1.ConditionExpiringSoon, metav1.ConditionFalse, switchboardv1alpha1.ReasonRenewed); err != nil {
		t.Fatal(err)
	}
}

// TestEarlyGraceEndWhoseStatusWasLostIsStillSaid: the reconcile that ends an old key's grace on
// evidence drops its hash, and its status patch is lost. The next reconcile finds no old key in
// its grace, and still says why it ended (GraceEvidence True/ConsumersMoved), from the hash
// Secret's record.
func TestEarlyGraceEndWhoseStatusWasLostIsStillSaid(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t)
	key := w.rotatedWithQuietPeriod("quiet")
	if err := hasCondition(w.mustKey("quiet").Status.Conditions, switchboardv1alpha1.ConditionGraceEvidence, metav1.ConditionFalse, switchboardv1alpha1.ReasonPreviousKeyInUse); err != nil {
		t.Fatal(err)
	}

	w.clock.Step(11 * time.Minute) // the old key unused for its quiet period
	events := &recordedEvents{}
	if err := w.reconcileWith(statusLost(), events, "quiet"); !errors.Is(err, errStatusLost) {
		t.Fatalf("the reconcile that ends the grace: %v, want its status patch lost", err)
	}
	if rec := w.hashRecord(key); rec.PreviousEndedEarly == "" {
		t.Fatal("the hash Secret does not record why the old key's grace ended")
	}
	if len(events.of("GraceEndedEarly")) != 1 {
		t.Fatalf("GraceEndedEarly Events %v, want one", events.notes)
	}

	w.settle("quiet")
	got := w.mustKey("quiet")
	if err := hasCondition(got.Status.Conditions, switchboardv1alpha1.ConditionGraceEvidence, metav1.ConditionTrue, switchboardv1alpha1.ReasonConsumersMoved); err != nil {
		t.Fatal(err)
	}
	if got.Status.PreviousKeyValidUntil != nil {
		t.Fatalf("previousKeyValidUntil %s after the old key's grace ended", got.Status.PreviousKeyValidUntil)
	}
}

// staleKey is env.Client whose reads of APIKey name answer stale, as a cache behind the API
// server would.
func staleKey(stale *switchboardv1alpha1.APIKey) client.WithWatch {
	return interceptor.NewClient(env.Client, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if k, isKey := obj.(*switchboardv1alpha1.APIKey); isKey && key.Name == stale.Name && key.Namespace == stale.Namespace {
				stale.DeepCopyInto(k)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
}

// TestEarlyGraceEndWaitsForTheCache: the server records a use of the old key, and a reconcile
// whose cache does not have that record yet sees the old key quiet for longer than its quiet
// period. It must not end the grace: the early end is confirmed against the APIKey as the API
// server has it.
func TestEarlyGraceEndWaitsForTheCache(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t)
	w.rotatedWithQuietPeriod("used")
	stale := w.mustKey("used")

	w.clock.Step(9 * time.Minute)
	at := w.clock.Now().UTC().Format(time.RFC3339)
	body := fmt.Sprintf(`{"status":{"lastUsedAt":%q,"previousKeyUse":{"keyGeneration":1,"lastUsedAt":%q}}}`, at, at)
	if err := env.Client.Status().Patch(testCtx(t), stale.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(body))); err != nil {
		t.Fatal(err)
	}
	w.clock.Step(2 * time.Minute) // unused for 11m as the cache has it, 2m as the API server has it

	// Whatever it returns (a status patch from a stale APIKey conflicts), it must not have
	// dropped the old key's hash.
	_ = w.reconcileWith(staleKey(stale), nil, "used")
	hash := &corev1.Secret{}
	if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: w.system, Name: keysecret.HashName(stale.UID)}, hash); err != nil {
		t.Fatal(err)
	}
	if _, kept := keysecret.PreviousValidUntil(hash); !kept {
		t.Fatal("a reconcile behind the API server ended the grace of an old key used 2 minutes ago")
	}
	w.settle("used")
	if err := hasCondition(w.mustKey("used").Status.Conditions, switchboardv1alpha1.ConditionGraceEvidence, metav1.ConditionFalse, switchboardv1alpha1.ReasonPreviousKeyInUse); err != nil {
		t.Fatal(err)
	}
}

// TestLeakWhoseStatusWasLostIsStillTold: a delivered key that its tenant leaks twice within the
// minimum interval, each of the three reconciles that act on the leaks losing its status
// patch: the one that refuses the first leaked key and replaces it at once, the one that
// refuses the second and holds its replacement, the one that issues the held replacement once
// the interval has passed (and rolls the workloads). Each time the next reconcile, which did
// not act on the leak, still tells of it in a KeyLeaked Event, from the hash Secret's record;
// the replacements are not reported as plain rotations.
func TestLeakWhoseStatusWasLostIsStillTold(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t)
	w.createKey("loop", func(k *switchboardv1alpha1.APIKey) { k.Spec.SecretName = "loop-key" })
	w.settle("loop")
	lost := func(step string, gen int64) {
		t.Helper()
		if err := w.reconcileWith(statusLost(), nil, "loop"); !errors.Is(err, errStatusLost) {
			t.Fatalf("%s: %v, want its status patch lost", step, err)
		}
		if rec := w.hashRecord(w.mustKey("loop")); rec.Generation != gen {
			t.Fatalf("%s: recorded generation %d, want %d", step, rec.Generation, gen)
		}
	}
	told := func(step, want string) {
		t.Helper()
		events := &recordedEvents{}
		if err := w.reconcileWith(env.Client, events, "loop"); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if leaked := events.of(apikeyctrl.ReasonKeyLeaked); len(leaked) != 1 || !strings.Contains(leaked[0], want) {
			t.Fatalf("%s: KeyLeaked Events %q, want one saying %q (all: %v)", step, leaked, want, events.notes)
		}
		w.settle("loop")
	}

	createLeakReport(t, w.system, w.deliveredKey("loop-key"))
	lost("the first leak, replaced at once", 2)
	told("the first leak", "it is refused and replaced; the current key is "+w.hashRecord(w.mustKey("loop")).Hint)
	replacedAt := w.clock.Now()

	createLeakReport(t, w.system, w.deliveredKey("loop-key"))
	lost("the second leak, its replacement held", 2)
	until := replacedAt.Add(renewalinterval.Default.Floor).UTC().Format(time.RFC3339)
	told("the second leak", "it is refused, and replaced at "+until)

	w.clock.Step(renewalinterval.Default.Floor)
	lost("the held replacement", 3)
	key := w.mustKey("loop")
	if l, _ := keysecret.LeakOf(w.hash(key)); l.Generation != 2 || l.Rollout == "" || l.Rollout == keysecret.RolloutPending || key.Status.KeyGeneration != 2 {
		t.Fatalf("after the lost status patch: leak of generation %d, rollout %q; published %d; want 2, done, 2", l.Generation, l.Rollout, key.Status.KeyGeneration)
	}
	told("the held replacement", "it is refused and replaced; the current key is "+w.hashRecord(key).Hint)
	key = w.mustKey("loop")
	if key.Status.KeyGeneration != 3 {
		t.Fatalf("published generation %d, want 3", key.Status.KeyGeneration)
	}
	if err := hasCondition(key.Status.Conditions, switchboardv1alpha1.ConditionLeaked, metav1.ConditionTrue, switchboardv1alpha1.ReasonLeakReplaced); err != nil {
		t.Fatal(err)
	}
}

// deliveredKey is the key delivery Secret name holds.
func (w *crashWorld) deliveredKey(name string) string {
	w.t.Helper()
	s := &corev1.Secret{}
	if err := env.Client.Get(testCtx(w.t), client.ObjectKey{Namespace: w.ns, Name: name}, s); err != nil {
		w.t.Fatal(err)
	}
	return plaintextOf(w.t, s)
}

// hash is the hash Secret of key, as the API server has it.
func (w *crashWorld) hash(key *switchboardv1alpha1.APIKey) *corev1.Secret {
	w.t.Helper()
	s := &corev1.Secret{}
	if err := env.Client.Get(testCtx(w.t), client.ObjectKey{Namespace: w.system, Name: keysecret.HashName(key.UID)}, s); err != nil {
		w.t.Fatal(err)
	}
	return s
}
