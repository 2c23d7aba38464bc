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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	apikeyctrl "github.com/switchboard-dev/switchboard/internal/controller/apikey"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

var errCrash = errors.New("injected crash: the operator stopped here")

// crashBudget lets budget writes through and then fails every write, as a process that died
// after its budget-th write would. With applyLast the write that crashes still reaches the API
// server and only its response is lost (the process died waiting for it).
type crashBudget struct {
	budget    int
	applyLast bool

	mu      sync.Mutex
	writes  int
	crashed bool
}

func (b *crashBudget) write(fn func() error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.writes < b.budget {
		b.writes++
		return fn()
	}
	if !b.crashed && b.applyLast {
		_ = fn()
	}
	b.crashed = true
	return errCrash
}

// client is env.Client with every write, of objects and of their status, going through the
// budget.
func (b *crashBudget) client() client.WithWatch {
	return interceptor.NewClient(env.Client, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return b.write(func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return b.write(func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return b.write(func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return b.write(func() error { return c.Delete(ctx, obj, opts...) })
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			return b.write(func() error { return c.DeleteAllOf(ctx, obj, opts...) })
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			return b.write(func() error { return c.Apply(ctx, obj, opts...) })
		},
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			return b.write(func() error { return c.SubResource(sub).Create(ctx, obj, subObj, opts...) })
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return b.write(func() error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			return b.write(func() error { return c.SubResource(sub).Patch(ctx, obj, patch, opts...) })
		},
		SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			return b.write(func() error { return c.SubResource(sub).Apply(ctx, obj, opts...) })
		},
	})
}

// failing is env.Client whose deletes, and with writes also creates and patches, of the Secrets
// that match fail with errSecretsDown, as an API server that refuses them for a while would.
func failing(writes bool, match func(*corev1.Secret) bool) client.WithWatch {
	fail := func(obj client.Object) bool {
		s, ok := obj.(*corev1.Secret)
		return ok && match(s)
	}
	funcs := interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		if fail(obj) {
			return errSecretsDown
		}
		return c.Delete(ctx, obj, opts...)
	}}
	if writes {
		funcs.Create = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if fail(obj) {
				return errSecretsDown
			}
			return c.Create(ctx, obj, opts...)
		}
		funcs.Patch = func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if fail(obj) {
				return errSecretsDown
			}
			return c.Patch(ctx, obj, patch, opts...)
		}
	}
	return interceptor.NewClient(env.Client, funcs)
}

// indexed answers the list by HashOwnerIndex that a manager's cache indexes, for a reconciler
// driven by hand over a client without that cache: by switchboard's labels, which say the
// same (hashOwner reads them).
func indexed(c client.WithWatch) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		o := (&client.ListOptions{}).ApplyOptions(opts)
		if o.FieldSelector != nil {
			if owner, ok := o.FieldSelector.RequiresExactMatch(apikeyctrl.HashOwnerIndex); ok {
				ns, name, _ := strings.Cut(owner, "/")
				o.FieldSelector = nil
				o.LabelSelector = labels.SelectorFromSet(labels.Set{keysecret.LabelComponent: keysecret.ComponentHash,
					keysecret.LabelAPIKeyNamespace: ns, keysecret.LabelAPIKeyName: name})
			}
		}
		return c.List(ctx, list, o)
	}})
}

// discardEvents is an events.EventRecorder for reconcilers driven by hand.
type discardEvents struct{}

func (discardEvents) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...any) {}

// crashWorld is one crash scenario: a namespace, a system namespace and a clock.
type crashWorld struct {
	t      *testing.T
	ns     string
	system string
	clock  *clocktesting.FakeClock
	// seen records every hashed or published plaintext found for a key generation, per APIKey.
	seen map[string]map[int64]map[string]bool
	// held are the keys a user claimed, by APIKey and generation.
	held map[string]map[int64]string
}

func newCrashWorld(t *testing.T) *crashWorld {
	return &crashWorld{
		t: t, ns: env.Namespace(t, "crash"), system: env.Namespace(t, "crash-system"),
		clock: clocktesting.NewFakeClock(time.Now().Truncate(time.Second)),
		seen:  map[string]map[int64]map[string]bool{}, held: map[string]map[int64]string{},
	}
}

// reconciler is an APIKey reconciler driven by hand, with c as its client (in place of a
// manager's cache) and the API server as its APIReader.
func (w *crashWorld) reconciler(c client.WithWatch) *apikeyctrl.Reconciler {
	return &apikeyctrl.Reconciler{
		Client: indexed(c), APIReader: env.Client, Recorder: discardEvents{}, Clock: w.clock,
		SystemNamespace: w.system, KeyPrefix: apikey.DefaultPrefix, RevealTTL: revealTTL,
	}
}

// settle runs a healthy reconciler until a reconcile writes nothing and succeeds.
func (w *crashWorld) settle(name string) {
	w.t.Helper()
	for range 20 {
		counter := &crashBudget{budget: 1 << 30}
		res, err := w.reconciler(counter.client()).Reconcile(testCtx(w.t), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: w.ns, Name: name}})
		if err == nil && counter.writes == 0 && (res.RequeueAfter == 0 || res.RequeueAfter > time.Second) {
			return
		}
	}
	w.t.Fatalf("APIKey %s did not settle in 20 reconciles", name)
}

// crash runs reconcilers whose process dies after budget writes; it reports whether the
// budget ran out (false: the whole job took fewer writes).
func (w *crashWorld) crash(name string, budget int, applyLast bool) bool {
	w.t.Helper()
	cc := &crashBudget{budget: budget, applyLast: applyLast}
	for range 10 {
		_, err := w.reconciler(cc.client()).Reconcile(testCtx(w.t), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: w.ns, Name: name}})
		if err != nil && !errors.Is(err, errCrash) {
			w.t.Fatalf("reconcile of %s failed other than by the injected crash: %v", name, err)
		}
	}
	return cc.crashed
}

func (w *crashWorld) apiKey(name string) (*switchboardv1alpha1.APIKey, error) {
	key := &switchboardv1alpha1.APIKey{}
	err := env.Client.Get(testCtx(w.t), client.ObjectKey{Namespace: w.ns, Name: name}, key)
	return key, err
}

// check asserts the protocol's invariants on what the API server holds right now.
func (w *crashWorld) check(name, when string) {
	w.t.Helper()
	fail := func(format string, args ...any) {
		w.t.Helper()
		w.t.Fatalf("%s, %s: %s", name, when, fmt.Sprintf(format, args...))
	}
	var reveals corev1.SecretList
	if err := env.Client.List(testCtx(w.t), &reveals, client.InNamespace(w.ns), client.MatchingLabels{
		keysecret.LabelComponent: keysecret.ComponentReveal, keysecret.LabelAPIKeyName: name,
	}); err != nil {
		w.t.Fatal(err)
	}
	byGen := map[int64]string{}
	for i := range reveals.Items {
		s := &reveals.Items[i]
		gen := generationOfSecret(s)
		if _, dup := byGen[gen]; dup {
			fail("two reveal Secrets for key generation %d", gen)
		}
		byGen[gen] = string(s.Data[keysecret.DataKey])
	}
	key, keyErr := w.apiKey(name)
	if keyErr == nil && key.Spec.SecretName != "" {
		// A delivered key is held by its delivery Secret.
		delivery := &corev1.Secret{}
		err := env.Client.Get(testCtx(w.t), client.ObjectKey{Namespace: w.ns, Name: key.Spec.SecretName}, delivery)
		if err == nil {
			byGen[generationOfSecret(delivery)] = string(delivery.Data[keysecret.DataKey])
		} else if !apierrors.IsNotFound(err) {
			w.t.Fatal(err)
		}
	}
	var hash *corev1.Secret
	if keyErr == nil {
		hash = &corev1.Secret{}
		if err := env.Client.Get(testCtx(w.t), client.ObjectKey{Namespace: w.system, Name: keysecret.HashName(key.UID)}, hash); apierrors.IsNotFound(err) {
			hash = nil
		} else if err != nil {
			w.t.Fatal(err)
		}
	} else if !apierrors.IsNotFound(keyErr) {
		w.t.Fatal(keyErr)
	}
	// A key counts once it was hashed or published: from then on no other key ever appears
	// for its generation. A key neither hashed nor published (the process died between
	// writing it and hashing it) never authenticated anything; since issue 10 the operator
	// replaces it, as it cannot tell it from a key planted by someone who writes Secrets.
	for gen, plaintext := range byGen {
		hashed := hash != nil && generationOfSecret(hash) == gen && string(hash.Data[keysecret.DataHash]) == apikey.Sum(plaintext).String()
		published := keyErr == nil && key.Status.KeyGeneration >= gen
		if (hashed || published) && !w.saw(name, gen, plaintext) {
			fail("two different keys were issued for key generation %d", gen)
		}
	}
	// A published reveal Secret of a live key exists, and its key is the hashed one.
	if keyErr == nil && key.Status.RevealSecretName != "" && !key.Spec.Revoked && key.DeletionTimestamp.IsZero() {
		plaintext, ok := byGen[key.Status.KeyGeneration]
		if !ok {
			fail("status publishes %s but there is no reveal Secret for generation %d", key.Status.RevealSecretName, key.Status.KeyGeneration)
		}
		if hash == nil || string(hash.Data[keysecret.DataHash]) != apikey.Sum(plaintext).String() {
			fail("the published key is not the hashed one")
		}
	}
	// A hash always belongs to a key the user holds or can still claim.
	if hash != nil {
		gen := generationOfSecret(hash)
		plaintext, ok := byGen[gen]
		if !ok {
			plaintext, ok = w.held[name][gen]
		}
		if !ok {
			fail("the hash of key generation %d has no key anyone holds or can claim", gen)
		}
		if string(hash.Data[keysecret.DataHash]) != apikey.Sum(plaintext).String() {
			fail("the hash of key generation %d does not match its key", gen)
		}
		for g, held := range w.held[name] {
			if g < gen && key.Spec.Rotation != nil && key.Spec.Rotation.GracePeriod.Duration > 0 &&
				string(hash.Data[keysecret.DataPreviousHash]) != apikey.Sum(held).String() && g == gen-1 {
				fail("the key the user holds (generation %d) lost its grace period", g)
			}
		}
	} else if keyErr == nil && !key.Spec.Revoked && key.DeletionTimestamp.IsZero() {
		// Before the first hash nothing may be published or held.
		if key.Status.KeyGeneration > 0 {
			fail("status publishes key generation %d without a hash", key.Status.KeyGeneration)
		}
	}
}

// saw records that plaintext was found for key generation gen of APIKey name, and reports
// whether it is the only key ever found for that generation.
func (w *crashWorld) saw(name string, gen int64, plaintext string) bool {
	if w.seen[name] == nil {
		w.seen[name] = map[int64]map[string]bool{}
	}
	if w.seen[name][gen] == nil {
		w.seen[name][gen] = map[string]bool{}
	}
	w.seen[name][gen][plaintext] = true
	return len(w.seen[name][gen]) == 1
}

func generationOfSecret(s *corev1.Secret) int64 {
	var g int64
	_, _ = fmt.Sscan(s.Labels[keysecret.LabelGeneration], &g)
	return g
}

// runCrashes interrupts the job that prepare sets up after each of its writes in turn — for
// every k, the process dies after k writes (and, with applyLast, during write k+1, which still
// lands) — then lets a fresh reconciler finish, checking the invariants at the crash point and
// after, and finally verify.
func runCrashes(t *testing.T, w *crashWorld, prepare func(name string), verify func(name string)) {
	for _, applyLast := range []bool{false, true} {
		for k := 0; ; k++ {
			name := fmt.Sprintf("k%d-%t", k, applyLast)
			prepare(name)
			crashed := w.crash(name, k, applyLast)
			w.check(name, fmt.Sprintf("after a crash after %d writes (applyLast=%t)", k, applyLast))
			w.settle(name)
			w.check(name, "after a fresh operator finished")
			verify(name)
			if !crashed {
				t.Logf("applyLast=%t: the job takes %d writes; a crash after each of 0..%d was survived", applyLast, k, k-1)
				break
			}
			if k > 20 {
				t.Fatal("the job never finishes")
			}
		}
	}
}

func (w *crashWorld) createKey(name string, mutate func(*switchboardv1alpha1.APIKey)) {
	w.t.Helper()
	key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}}
	if mutate != nil {
		mutate(key)
	}
	if err := env.Client.Create(testCtx(w.t), key); err != nil {
		w.t.Fatal(err)
	}
}

func (w *crashWorld) mustKey(name string) *switchboardv1alpha1.APIKey {
	w.t.Helper()
	key, err := w.apiKey(name)
	if err != nil {
		w.t.Fatal(err)
	}
	return key
}

func (w *crashWorld) verifyIssued(name string, gen int64) {
	w.t.Helper()
	key := w.mustKey(name)
	if key.Status.KeyGeneration != gen || key.Status.RevealSecretName != fmt.Sprintf("%s-key-%d", name, gen) {
		w.t.Fatalf("%s: keyGeneration %d revealSecretName %q, want %d", name, key.Status.KeyGeneration, key.Status.RevealSecretName, gen)
	}
	if err := hasCondition(key.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionTrue, switchboardv1alpha1.ReasonKeyIssued); err != nil {
		w.t.Fatalf("%s: %v", name, err)
	}
	// The user can claim the key, and it is the hashed one (check did the hash comparison).
	got, err := keyclient.Claim(testCtx(w.t), env.Client, key)
	if err != nil {
		w.t.Fatalf("%s: the finished key cannot be claimed: %v", name, err)
	}
	if got.Generation != gen {
		w.t.Fatalf("%s: claimed generation %d, want %d", name, got.Generation, gen)
	}
	if w.held[name] == nil {
		w.held[name] = map[int64]string{}
	}
	w.held[name][gen] = got.Key
}

// TestCrashSafetyIssue: interrupting the first issue of a key after any write never yields two
// keys, a hash without a claimable key, or a lost key.
func TestCrashSafetyIssue(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t)
	runCrashes(t, w,
		func(name string) { w.createKey(name, nil) },
		func(name string) { w.verifyIssued(name, 1) })
}

// TestCrashSafetyRotation: the same for a rotation with grace: the previous key, which the
// user holds, stays valid throughout.
func TestCrashSafetyRotation(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t)
	runCrashes(t, w,
		func(name string) {
			w.createKey(name, nil)
			w.settle(name)
			w.verifyIssued(name, 1)
			w.settle(name)
			key := w.mustKey(name)
			before := key.DeepCopy()
			key.Spec.Rotation = &switchboardv1alpha1.APIKeyRotation{RequestedAt: "now", GracePeriod: metav1.Duration{Duration: time.Hour}}
			if err := env.Client.Patch(testCtx(t), key, client.MergeFrom(before)); err != nil {
				t.Fatal(err)
			}
		},
		func(name string) {
			w.verifyIssued(name, 2)
			key := w.mustKey(name)
			hash := &corev1.Secret{}
			if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: w.system, Name: keysecret.HashName(key.UID)}, hash); err != nil {
				t.Fatal(err)
			}
			if string(hash.Data[keysecret.DataPreviousHash]) != apikey.Sum(w.held[name][1]).String() {
				t.Fatalf("%s: the previous key is not valid during the grace period", name)
			}
			if key.Status.PreviousKeyValidUntil == nil {
				t.Fatalf("%s: no previousKeyValidUntil", name)
			}
		})
}

// TestCrashSafetyRedelivery: interrupting the new issue into a deleted delivery Secret never
// delivers two keys for one generation, and the old key keeps its grace throughout.
func TestCrashSafetyRedelivery(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t)
	runCrashes(t, w,
		func(name string) {
			w.createKey(name, func(k *switchboardv1alpha1.APIKey) { k.Spec.SecretName = name + "-secret" })
			w.settle(name)
			delivery := &corev1.Secret{}
			if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: w.ns, Name: name + "-secret"}, delivery); err != nil {
				t.Fatal(err)
			}
			w.held[name] = map[int64]string{1: string(delivery.Data[keysecret.DataKey])}
			if err := env.Client.Delete(testCtx(t), delivery); err != nil {
				t.Fatal(err)
			}
		},
		func(name string) {
			key := w.mustKey(name)
			if key.Status.KeyGeneration != 2 {
				t.Fatalf("%s: keyGeneration %d, want 2", name, key.Status.KeyGeneration)
			}
			if err := hasCondition(key.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionTrue, switchboardv1alpha1.ReasonKeyIssued); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			delivery := &corev1.Secret{}
			if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: w.ns, Name: name + "-secret"}, delivery); err != nil {
				t.Fatalf("%s: the delivery Secret was not re-created: %v", name, err)
			}
			hash := &corev1.Secret{}
			if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: w.system, Name: keysecret.HashName(key.UID)}, hash); err != nil {
				t.Fatal(err)
			}
			if generationOfSecret(delivery) != 2 || string(hash.Data[keysecret.DataHash]) != apikey.Sum(string(delivery.Data[keysecret.DataKey])).String() {
				t.Fatalf("%s: the re-created Secret does not hold the hashed key of generation 2", name)
			}
			if string(hash.Data[keysecret.DataPreviousHash]) != apikey.Sum(w.held[name][1]).String() {
				t.Fatalf("%s: the old key lost its grace", name)
			}
		})
}

// TestCrashSafetyDelete: interrupting the deletion of an APIKey never leaves a hash behind it.
func TestCrashSafetyDelete(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t)
	var hashes = map[string]string{}
	runCrashes(t, w,
		func(name string) {
			w.createKey(name, nil)
			w.settle(name)
			key := w.mustKey(name)
			hashes[name] = keysecret.HashName(key.UID)
			if err := env.Client.Delete(testCtx(t), key); err != nil {
				t.Fatal(err)
			}
		},
		func(name string) {
			if _, err := w.apiKey(name); !apierrors.IsNotFound(err) {
				t.Fatalf("%s: the APIKey is still there (err %v)", name, err)
			}
			err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: w.system, Name: hashes[name]}, &corev1.Secret{})
			if !apierrors.IsNotFound(err) {
				t.Fatalf("%s: the hash Secret outlived its APIKey (err %v)", name, err)
			}
		})
}
