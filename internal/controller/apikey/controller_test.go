//go:build !unit

package apikey_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	apikeyctrl "github.com/switchboard-dev/switchboard/internal/controller/apikey"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/testenv/controllertest"
)

// keyTest is one APIKey test: a tenant namespace, a system namespace and an operator for both.
type keyTest struct {
	t      *testing.T
	ns     string
	system string
	op     *controllertest.Operator
}

func newKeyTest(t *testing.T) *keyTest {
	t.Helper()
	t.Parallel()
	kt := &keyTest{t: t, ns: env.Namespace(t, "keys"), system: env.Namespace(t, "keys-system")}
	kt.op = startOperator(t, nil, kt.system, kt.ns)
	return kt
}

func (kt *keyTest) create(name string, mutate func(*switchboardv1alpha1.APIKey)) *switchboardv1alpha1.APIKey {
	kt.t.Helper()
	key := &switchboardv1alpha1.APIKey{
		ObjectMeta: metav1.ObjectMeta{Namespace: kt.ns, Name: name},
		Spec:       switchboardv1alpha1.APIKeySpec{Description: "test key " + name},
	}
	if mutate != nil {
		mutate(key)
	}
	if err := env.Client.Create(testCtx(kt.t), key); err != nil {
		kt.t.Fatalf("creating APIKey %s: %v", name, err)
	}
	return key
}

func (kt *keyTest) get(key *switchboardv1alpha1.APIKey) *switchboardv1alpha1.APIKey {
	kt.t.Helper()
	got := &switchboardv1alpha1.APIKey{}
	if err := env.Client.Get(testCtx(kt.t), client.ObjectKeyFromObject(key), got); err != nil {
		kt.t.Fatalf("reading APIKey %s: %v", key.Name, err)
	}
	return got
}

// waitFor polls the APIKey until check accepts it, and returns it.
func (kt *keyTest) waitFor(key *switchboardv1alpha1.APIKey, what string, check func(*switchboardv1alpha1.APIKey) error) *switchboardv1alpha1.APIKey {
	kt.t.Helper()
	var got *switchboardv1alpha1.APIKey
	eventually(kt.t, "APIKey "+key.Name+": "+what, func() error {
		got = &switchboardv1alpha1.APIKey{}
		if err := env.Client.Get(testCtx(kt.t), client.ObjectKeyFromObject(key), got); err != nil {
			return err
		}
		if got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("observedGeneration %d, generation %d", got.Status.ObservedGeneration, got.Generation)
		}
		return check(got)
	})
	return got
}

// waitIssued waits for key generation gen to be published with Ready=True.
func (kt *keyTest) waitIssued(key *switchboardv1alpha1.APIKey, gen int64) *switchboardv1alpha1.APIKey {
	kt.t.Helper()
	return kt.waitFor(key, fmt.Sprintf("key generation %d issued", gen), func(k *switchboardv1alpha1.APIKey) error {
		if k.Status.KeyGeneration != gen {
			return fmt.Errorf("keyGeneration %d", k.Status.KeyGeneration)
		}
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionTrue, switchboardv1alpha1.ReasonKeyIssued)
	})
}

func (kt *keyTest) hashSecret(key *switchboardv1alpha1.APIKey) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := env.Client.Get(testCtx(kt.t), client.ObjectKey{Namespace: kt.system, Name: keysecret.HashName(key.UID)}, s)
	return s, err
}

func (kt *keyTest) mustHash(key *switchboardv1alpha1.APIKey) *corev1.Secret {
	kt.t.Helper()
	s, err := kt.hashSecret(key)
	if err != nil {
		kt.t.Fatalf("reading the hash Secret of %s: %v", key.Name, err)
	}
	return s
}

func (kt *keyTest) secret(name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := env.Client.Get(testCtx(kt.t), client.ObjectKey{Namespace: kt.ns, Name: name}, s)
	return s, err
}

func (kt *keyTest) patchSpec(key *switchboardv1alpha1.APIKey, mutate func(*switchboardv1alpha1.APIKey)) {
	kt.t.Helper()
	cur := kt.get(key)
	before := cur.DeepCopy()
	mutate(cur)
	if err := env.Client.Patch(testCtx(kt.t), cur, client.MergeFrom(before)); err != nil {
		kt.t.Fatalf("patching APIKey %s: %v", key.Name, err)
	}
}

// events returns the notes of the Events about the APIKey, by reason.
func (kt *keyTest) events(key *switchboardv1alpha1.APIKey) map[string][]string {
	kt.t.Helper()
	var list eventsv1.EventList
	if err := env.Client.List(testCtx(kt.t), &list, client.InNamespace(kt.ns)); err != nil {
		kt.t.Fatalf("listing Events: %v", err)
	}
	got := map[string][]string{}
	for _, e := range list.Items {
		if e.Regarding.UID == key.UID {
			got[e.Reason] = append(got[e.Reason], e.Note)
		}
	}
	return got
}

func (kt *keyTest) waitEvent(key *switchboardv1alpha1.APIKey, reason, contains string) {
	kt.t.Helper()
	eventually(kt.t, "Event "+reason, func() error {
		for _, note := range kt.events(key)[reason] {
			if strings.Contains(note, contains) {
				return nil
			}
		}
		return fmt.Errorf("no %s Event containing %q yet: %v", reason, contains, kt.events(key))
	})
}

// assertNoPlaintext fails when the key appears anywhere but where it belongs: the APIKey
// (status, annotations, everything), the hash Secret, the Events of the namespace, the logs.
func (kt *keyTest) assertNoPlaintext(key *switchboardv1alpha1.APIKey, plaintext string) {
	kt.t.Helper()
	secretPart := plaintext[strings.LastIndex(plaintext, "_")+1:]
	encoded := base64.StdEncoding.EncodeToString([]byte(plaintext))
	check := func(where, text string) {
		if strings.Contains(text, plaintext) || strings.Contains(text, secretPart) || strings.Contains(text, encoded) {
			kt.t.Fatalf("the plaintext key appears in %s", where)
		}
	}
	raw, _ := json.Marshal(kt.get(key))
	check("the APIKey", string(raw))
	if hash, err := kt.hashSecret(key); err == nil {
		raw, _ = json.Marshal(hash)
		check("the hash Secret", string(raw))
	}
	var evs eventsv1.EventList
	if err := env.Client.List(testCtx(kt.t), &evs, client.InNamespace(kt.ns)); err != nil {
		kt.t.Fatal(err)
	}
	raw, _ = json.Marshal(evs)
	check("the Events", string(raw))
	var coreEvs corev1.EventList
	if err := env.Client.List(testCtx(kt.t), &coreEvs, client.InNamespace(kt.ns)); err != nil {
		kt.t.Fatal(err)
	}
	raw, _ = json.Marshal(coreEvs)
	check("the core/v1 Events", string(raw))
	logs := kt.op.Logs.All()
	check("the operator's logs", logs)
	if strings.Contains(logs, "Request Body") || strings.Contains(logs, "Response Body") {
		kt.t.Fatal("the operator logged HTTP bodies, which hold Secrets")
	}
}

func plaintextOf(t *testing.T, s *corev1.Secret) string {
	t.Helper()
	key := string(s.Data[keysecret.DataKey])
	if err := apikey.Parse(key, apikey.DefaultPrefix); err != nil {
		t.Fatalf("Secret %s holds no valid key: %v", s.Name, err)
	}
	return key
}

// TestAPIKeyIssued: a new APIKey gets a key in a reveal Secret, its SHA-256 in a hash Secret
// of the system namespace, a hint, Ready=True and Events, and the key is nowhere else.
func TestAPIKeyIssued(t *testing.T) {
	kt := newKeyTest(t)
	start := time.Now()
	key := kt.create("ci", nil)
	got := kt.waitIssued(key, 1)
	t.Logf("APIKey create → Ready=True in %s (the operator's informers starting included)", time.Since(start).Round(time.Millisecond))

	if got.Status.RevealSecretName != "ci-key-1" {
		t.Fatalf("revealSecretName %q, want ci-key-1", got.Status.RevealSecretName)
	}
	revealSecret, err := kt.secret(got.Status.RevealSecretName)
	if err != nil {
		t.Fatal(err)
	}
	plaintext := plaintextOf(t, revealSecret)
	if revealSecret.Type != keysecret.TypeReveal ||
		revealSecret.Labels[keysecret.LabelComponent] != keysecret.ComponentReveal ||
		revealSecret.Labels[keysecret.LabelAPIKeyUID] != string(got.UID) ||
		revealSecret.Labels[keysecret.LabelGeneration] != "1" {
		t.Fatalf("reveal Secret has the wrong type or labels: %s %v", revealSecret.Type, revealSecret.Labels)
	}
	if ref := metav1.GetControllerOf(revealSecret); ref == nil || ref.UID != got.UID {
		t.Fatalf("reveal Secret is not controlled by the APIKey: %v", revealSecret.OwnerReferences)
	}

	hash := kt.mustHash(got)
	if want := apikey.Sum(plaintext).String(); string(hash.Data[keysecret.DataHash]) != want {
		t.Fatalf("hash Secret sha256 %q, want SHA-256 of the revealed key %q", hash.Data[keysecret.DataHash], want)
	}
	wantLabels := map[string]string{
		keysecret.LabelManagedBy:       keysecret.ManagedBy,
		keysecret.LabelComponent:       keysecret.ComponentHash,
		keysecret.LabelAPIKeyNamespace: kt.ns,
		keysecret.LabelAPIKeyName:      "ci",
		keysecret.LabelAPIKeyUID:       string(got.UID),
		keysecret.LabelGeneration:      "1",
	}
	for k, v := range wantLabels {
		if hash.Labels[k] != v {
			t.Fatalf("hash Secret label %s=%q, want %q", k, hash.Labels[k], v)
		}
	}
	if hash.Type != keysecret.TypeHash {
		t.Fatalf("hash Secret type %q", hash.Type)
	}

	if got.Status.KeyHint != apikey.Hint(plaintext) || !strings.HasPrefix(got.Status.KeyHint, "sb_live_") {
		t.Fatalf("keyHint %q, want %q", got.Status.KeyHint, apikey.Hint(plaintext))
	}
	if got.Status.CreatedAt == nil || got.Status.RevealExpiresAt == nil ||
		!got.Status.RevealExpiresAt.Time.Equal(got.Status.CreatedAt.Add(revealTTL)) {
		t.Fatalf("createdAt %v, revealExpiresAt %v: want the reveal to expire one TTL after creation", got.Status.CreatedAt, got.Status.RevealExpiresAt)
	}
	if err := hasCondition(got.Status.Conditions, switchboardv1alpha1.ConditionRevealed, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevealPending); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got.Finalizers, switchboardv1alpha1.FinalizerAPIKey) {
		t.Fatalf("APIKey has no finalizer %s: %v", switchboardv1alpha1.FinalizerAPIKey, got.Finalizers)
	}
	kt.waitEvent(got, "KeyCreated", got.Status.KeyHint)
	kt.assertNoPlaintext(got, plaintext)

	// The API server writes lastUsedAt; the operator's later status patches leave it alone.
	used := metav1.NewTime(time.Now().Truncate(time.Second))
	withUse := got.DeepCopy()
	withUse.Status.LastUsedAt = &used
	if err := env.Client.Status().Patch(testCtx(t), withUse, client.MergeFrom(got)); err != nil {
		t.Fatal(err)
	}
	kt.op.Clock.Step(revealTTL + time.Second)
	poke(t, got)
	got = kt.waitFor(got, "the reveal to expire", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionRevealed, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevealExpired)
	})
	if got.Status.LastUsedAt == nil || !got.Status.LastUsedAt.Equal(&used) {
		t.Fatalf("the operator clobbered status.lastUsedAt: %v, want %v", got.Status.LastUsedAt, used)
	}

	// With the operator warm, issuing is a handful of API calls.
	start = time.Now()
	kt.waitIssued(kt.create("ci-warm", nil), 1)
	t.Logf("APIKey create → Ready=True in %s (operator running)", time.Since(start).Round(time.Millisecond))
}

// TestAPIKeyClaimedOnce: two concurrent claims of the reveal Secret, exactly one gets the key;
// the operator then reports Claimed and clears revealSecretName.
func TestAPIKeyClaimedOnce(t *testing.T) {
	kt := newKeyTest(t)
	key := kt.waitIssued(kt.create("claim", nil), 1)

	type result struct {
		r   keyclient.Revealed
		err error
	}
	results := make([]result, 2)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range results {
		wg.Go(func() {
			<-start
			r, err := keyclient.Claim(context.Background(), env.Client, key)
			results[i] = result{r, err}
		})
	}
	close(start)
	wg.Wait()
	var won []keyclient.Revealed
	for _, r := range results {
		switch {
		case r.err == nil:
			won = append(won, r.r)
		case errors.Is(r.err, keyclient.ErrAlreadyClaimed):
		default:
			t.Fatalf("unexpected claim error: %v", r.err)
		}
	}
	if len(won) != 1 {
		t.Fatalf("%d claimers got the key, want exactly 1", len(won))
	}
	if got := string(kt.mustHash(key).Data[keysecret.DataHash]); got != apikey.Sum(won[0].Key).String() {
		t.Fatal("the claimed key does not match the hash Secret")
	}
	if won[0].Hint != key.Status.KeyHint || won[0].Generation != 1 {
		t.Fatalf("claimed hint %q generation %d, want %q 1", won[0].Hint, won[0].Generation, key.Status.KeyHint)
	}
	got := kt.waitFor(key, "Revealed=True Claimed", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionRevealed, metav1.ConditionTrue, switchboardv1alpha1.ReasonRevealClaimed)
	})
	if got.Status.RevealSecretName != "" {
		t.Fatalf("revealSecretName still %q after the claim", got.Status.RevealSecretName)
	}
	if err := hasCondition(got.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionTrue, switchboardv1alpha1.ReasonKeyIssued); err != nil {
		t.Fatal(err)
	}
	// A third claim, with the status as now published, finds nothing.
	if _, err := keyclient.Claim(testCtx(t), env.Client, got); !errors.Is(err, keyclient.ErrNotPublished) {
		t.Fatalf("claim after the claim: %v, want ErrNotPublished", err)
	}
	kt.waitEvent(got, "KeyClaimed", got.Status.KeyHint)
	kt.assertNoPlaintext(got, won[0].Key)
}

// TestAPIKeyRevealExpires: an unclaimed reveal Secret is deleted after the reveal TTL (fake
// clock); the key stays valid.
func TestAPIKeyRevealExpires(t *testing.T) {
	kt := newKeyTest(t)
	key := kt.waitIssued(kt.create("unclaimed", nil), 1)
	revealSecret, err := kt.secret(key.Status.RevealSecretName)
	if err != nil {
		t.Fatal(err)
	}
	plaintext := plaintextOf(t, revealSecret)

	kt.op.Clock.Step(revealTTL - time.Second)
	poke(t, key)
	eventually(t, "a reconcile one second before the deadline", func() error {
		// The operator asks to run again at the deadline, one (fake) second away.
		if !strings.Contains(kt.op.Logs.All(), `requeueing after 1s"`) {
			return errors.New("not yet")
		}
		return nil
	})
	if _, err := kt.secret(key.Status.RevealSecretName); err != nil {
		t.Fatalf("the reveal Secret went before its TTL: %v", err)
	}

	kt.op.Clock.Step(2 * time.Second)
	poke(t, key)
	got := kt.waitFor(key, "Revealed=False RevealExpired", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionRevealed, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevealExpired)
	})
	if got.Status.RevealSecretName != "" || got.Status.RevealExpiresAt != nil {
		t.Fatalf("reveal still published: %q %v", got.Status.RevealSecretName, got.Status.RevealExpiresAt)
	}
	if _, err := kt.secret(key.Status.RevealSecretName); !apierrors.IsNotFound(err) {
		t.Fatalf("the expired reveal Secret is still there (err %v)", err)
	}
	if err := hasCondition(got.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionTrue, switchboardv1alpha1.ReasonKeyIssued); err != nil {
		t.Fatalf("the key should stay valid: %v", err)
	}
	if string(kt.mustHash(got).Data[keysecret.DataHash]) != apikey.Sum(plaintext).String() {
		t.Fatal("the hash changed when the reveal expired")
	}
	kt.waitEvent(got, switchboardv1alpha1.ReasonRevealExpired, got.Status.KeyHint)
	kt.assertNoPlaintext(got, plaintext)
}

// TestAPIKeyRevoked: spec.revoked removes the hash and the unclaimed reveal; Ready=False Revoked.
func TestAPIKeyRevoked(t *testing.T) {
	kt := newKeyTest(t)
	key := kt.waitIssued(kt.create("revoke-me", nil), 1)
	revealName := key.Status.RevealSecretName
	kt.patchSpec(key, func(k *switchboardv1alpha1.APIKey) { k.Spec.Revoked = true })
	got := kt.waitFor(key, "Ready=False Revoked", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevoked)
	})
	if _, err := kt.hashSecret(got); !apierrors.IsNotFound(err) {
		t.Fatalf("the hash Secret of a revoked key still exists (err %v)", err)
	}
	if _, err := kt.secret(revealName); !apierrors.IsNotFound(err) {
		t.Fatalf("the unclaimed reveal Secret of a revoked key still exists (err %v)", err)
	}
	if got.Status.RevealSecretName != "" {
		t.Fatalf("a revoked key still publishes %q", got.Status.RevealSecretName)
	}
	kt.waitEvent(got, "KeyRevoked", got.Status.KeyHint)
}

// TestAPIKeyDeleted: deleting the APIKey deletes its hash Secret and the finalizer lets it go.
func TestAPIKeyDeleted(t *testing.T) {
	kt := newKeyTest(t)
	key := kt.waitIssued(kt.create("delete-me", nil), 1)
	kt.mustHash(key)
	if err := env.Client.Delete(testCtx(t), key); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the APIKey to be gone", func() error {
		err := env.Client.Get(testCtx(t), client.ObjectKeyFromObject(key), &switchboardv1alpha1.APIKey{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (err %w)", err)
	})
	if _, err := kt.hashSecret(key); !apierrors.IsNotFound(err) {
		t.Fatalf("the hash Secret outlived its APIKey (err %v)", err)
	}
	if _, err := kt.secret(key.Status.RevealSecretName); !apierrors.IsNotFound(err) {
		t.Fatalf("the reveal Secret outlived its APIKey (err %v)", err)
	}
}

// TestAPIKeyExpires: at spec.expiresAt (fake clock) Ready turns False with reason Expired.
func TestAPIKeyExpires(t *testing.T) {
	kt := newKeyTest(t)
	expiresAt := metav1.NewTime(kt.op.Clock.Now().Add(24 * time.Hour))
	key := kt.waitIssued(kt.create("expiring", func(k *switchboardv1alpha1.APIKey) { k.Spec.ExpiresAt = &expiresAt }), 1)
	if key.Status.ExpiresAt == nil || !key.Status.ExpiresAt.Equal(&expiresAt) {
		t.Fatalf("status.expiresAt %v does not mirror spec.expiresAt %v", key.Status.ExpiresAt, expiresAt)
	}
	kt.op.Clock.Step(24*time.Hour + time.Second)
	poke(t, key)
	got := kt.waitFor(key, "Ready=False Expired", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonExpired)
	})
	kt.waitEvent(got, "KeyExpired", got.Status.KeyHint)

	// Moving expiresAt forward makes the key valid again: the hash was kept.
	later := metav1.NewTime(kt.op.Clock.Now().Add(time.Hour))
	kt.patchSpec(key, func(k *switchboardv1alpha1.APIKey) { k.Spec.ExpiresAt = &later })
	kt.waitIssued(key, 1)

	// An APIKey that is born expired gets no key at all.
	past := metav1.NewTime(kt.op.Clock.Now().Add(-time.Minute))
	born := kt.create("born-expired", func(k *switchboardv1alpha1.APIKey) { k.Spec.ExpiresAt = &past })
	got = kt.waitFor(born, "Ready=False Expired", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonExpired)
	})
	if got.Status.KeyGeneration != 0 || got.Status.RevealSecretName != "" {
		t.Fatalf("an expired APIKey was issued a key: generation %d", got.Status.KeyGeneration)
	}
	if _, err := kt.hashSecret(got); !apierrors.IsNotFound(err) {
		t.Fatalf("an expired APIKey has a hash Secret (err %v)", err)
	}
}

// TestAPIKeyRotationWithGrace: a rotation issues key 2; both hashes are accepted until the grace
// period ends (fake clock), then only the new one. A zero grace drops the old hash at once.
func TestAPIKeyRotationWithGrace(t *testing.T) {
	kt := newKeyTest(t)
	key := kt.waitIssued(kt.create("rotate", nil), 1)
	first, err := keyclient.Claim(testCtx(t), env.Client, key)
	if err != nil {
		t.Fatal(err)
	}
	kt.waitFor(key, "claimed", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionRevealed, metav1.ConditionTrue, switchboardv1alpha1.ReasonRevealClaimed)
	})

	rotatedAt := kt.op.Clock.Now()
	kt.patchSpec(key, func(k *switchboardv1alpha1.APIKey) {
		k.Spec.Rotation = &switchboardv1alpha1.APIKeyRotation{RequestedAt: "first", GracePeriod: metav1.Duration{Duration: time.Hour}}
	})
	got := kt.waitIssued(key, 2)
	if got.Status.LastHandledRotationAt != "first" || got.Status.RotatedAt == nil ||
		got.Status.PreviousKeyValidUntil == nil || !got.Status.PreviousKeyValidUntil.Time.Equal(rotatedAt.Add(time.Hour)) {
		t.Fatalf("rotation status: lastHandled %q rotatedAt %v previousKeyValidUntil %v", got.Status.LastHandledRotationAt, got.Status.RotatedAt, got.Status.PreviousKeyValidUntil)
	}
	second, err := keyclient.Claim(testCtx(t), env.Client, got)
	if err != nil {
		t.Fatal(err)
	}
	if second.Key == first.Key || second.Generation != 2 {
		t.Fatalf("the rotation did not issue a new key (generation %d)", second.Generation)
	}
	hash := kt.mustHash(got)
	if string(hash.Data[keysecret.DataHash]) != apikey.Sum(second.Key).String() ||
		string(hash.Data[keysecret.DataPreviousHash]) != apikey.Sum(first.Key).String() {
		t.Fatal("during the grace period the hash Secret should hold the new key's hash and the previous one")
	}
	if hash.Labels[keysecret.LabelGeneration] != "2" {
		t.Fatalf("hash Secret generation label %q", hash.Labels[keysecret.LabelGeneration])
	}
	kt.waitEvent(got, "KeyRotated", got.Status.KeyHint)

	// The grace period ends.
	kt.op.Clock.Step(time.Hour + time.Second)
	poke(t, key)
	kt.waitFor(key, "the previous key dropped", func(k *switchboardv1alpha1.APIKey) error {
		if k.Status.PreviousKeyValidUntil != nil {
			return fmt.Errorf("previousKeyValidUntil %v", k.Status.PreviousKeyValidUntil)
		}
		return nil
	})
	hash = kt.mustHash(got)
	if _, ok := hash.Data[keysecret.DataPreviousHash]; ok {
		t.Fatal("the previous hash outlived its grace period")
	}
	if string(hash.Data[keysecret.DataHash]) != apikey.Sum(second.Key).String() {
		t.Fatal("the current hash changed when the grace period ended")
	}

	// Zero grace: the previous key is refused at once. The unclaimed reveal of key 3 is swept
	// when key 4 comes.
	kt.patchSpec(key, func(k *switchboardv1alpha1.APIKey) {
		k.Spec.Rotation = &switchboardv1alpha1.APIKeyRotation{RequestedAt: "second"}
	})
	got = kt.waitIssued(key, 3)
	hash = kt.mustHash(got)
	if _, ok := hash.Data[keysecret.DataPreviousHash]; ok || got.Status.PreviousKeyValidUntil != nil {
		t.Fatal("a zero-grace rotation kept the previous hash")
	}
	third := got.Status.RevealSecretName
	kt.patchSpec(key, func(k *switchboardv1alpha1.APIKey) {
		k.Spec.Rotation = &switchboardv1alpha1.APIKeyRotation{RequestedAt: "third"}
	})
	kt.waitIssued(key, 4)
	eventually(t, "the superseded reveal Secret swept", func() error {
		if _, err := kt.secret(third); !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s still there (err %w)", third, err)
		}
		return nil
	})
	kt.assertNoPlaintext(got, first.Key)
	kt.assertNoPlaintext(got, second.Key)
}

// TestAPIKeyDelivered: with spec.secretName the key goes to that Secret and stays, updated on
// rotation; a Secret switchboard does not manage is never overwritten.
func TestAPIKeyDelivered(t *testing.T) {
	kt := newKeyTest(t)
	key := kt.waitIssued(kt.create("mounted", func(k *switchboardv1alpha1.APIKey) { k.Spec.SecretName = "mounted-key" }), 1)
	if err := hasCondition(key.Status.Conditions, switchboardv1alpha1.ConditionRevealed, metav1.ConditionTrue, switchboardv1alpha1.ReasonDelivered); err != nil {
		t.Fatal(err)
	}
	if key.Status.RevealSecretName != "" {
		t.Fatalf("a delivered key publishes a reveal Secret %q", key.Status.RevealSecretName)
	}
	delivery, err := kt.secret("mounted-key")
	if err != nil {
		t.Fatal(err)
	}
	first := plaintextOf(t, delivery)
	if string(kt.mustHash(key).Data[keysecret.DataHash]) != apikey.Sum(first).String() {
		t.Fatal("the delivered key does not match the hash")
	}
	kt.patchSpec(key, func(k *switchboardv1alpha1.APIKey) {
		k.Spec.Rotation = &switchboardv1alpha1.APIKeyRotation{RequestedAt: "now"}
	})
	kt.waitIssued(key, 2)
	delivery, err = kt.secret("mounted-key")
	if err != nil {
		t.Fatal(err)
	}
	second := plaintextOf(t, delivery)
	if second == first || string(kt.mustHash(key).Data[keysecret.DataHash]) != apikey.Sum(second).String() {
		t.Fatal("the rotation did not deliver the new key")
	}
	kt.assertNoPlaintext(key, second)

	// Someone else's Secret.
	foreign := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: kt.ns, Name: "app-config"},
		StringData: map[string]string{"apiKey": "mine"},
	}
	if err := env.Client.Create(testCtx(t), foreign); err != nil {
		t.Fatal(err)
	}
	other := kt.create("conflicting", func(k *switchboardv1alpha1.APIKey) { k.Spec.SecretName = "app-config" })
	kt.waitFor(other, "Ready=False DeliveryConflict", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonDeliveryConflict)
	})
	after, err := kt.secret("app-config")
	if err != nil {
		t.Fatal(err)
	}
	if string(after.Data["apiKey"]) != "mine" {
		t.Fatal("switchboard overwrote a Secret it does not manage")
	}
	if _, err := kt.hashSecret(kt.get(other)); !apierrors.IsNotFound(err) {
		t.Fatalf("a hash exists for a key that was never delivered (err %v)", err)
	}
}

// TestAPIKeyDeliverySecretDeleted: a delivery Secret deleted by hand is issued again, like
// cert-manager re-issues a deleted certificate Secret; the old key keeps working for
// RedeliveryGrace (fake clock), so pods that still hold it do not fail at once.
func TestAPIKeyDeliverySecretDeleted(t *testing.T) {
	kt := newKeyTest(t)
	key := kt.waitIssued(kt.create("redeliver", func(k *switchboardv1alpha1.APIKey) { k.Spec.SecretName = "redeliver-key" }), 1)
	delivery, err := kt.secret("redeliver-key")
	if err != nil {
		t.Fatal(err)
	}
	first := plaintextOf(t, delivery)
	if err := env.Client.Delete(testCtx(t), delivery); err != nil {
		t.Fatal(err)
	}
	got := kt.waitIssued(key, 2)
	kt.waitEvent(key, apikeyctrl.ReasonDeliverySecretLost, "redeliver-key")
	delivery, err = kt.secret("redeliver-key")
	if err != nil {
		t.Fatal(err)
	}
	second := plaintextOf(t, delivery)
	hash := kt.mustHash(got)
	if second == first || string(hash.Data[keysecret.DataHash]) != apikey.Sum(second).String() {
		t.Fatal("the re-created Secret does not hold the new, hashed key")
	}
	if string(hash.Data[keysecret.DataPreviousHash]) != apikey.Sum(first).String() {
		t.Fatal("the old key stopped working at once")
	}
	until := got.Status.PreviousKeyValidUntil
	if until == nil || until.Sub(kt.op.Clock.Now()) > apikeyctrl.RedeliveryGrace || until.Sub(kt.op.Clock.Now()) < apikeyctrl.RedeliveryGrace-time.Minute {
		t.Fatalf("previousKeyValidUntil %v, want about %s from now", until, apikeyctrl.RedeliveryGrace)
	}
	if err := hasCondition(got.Status.Conditions, switchboardv1alpha1.ConditionRevealed, metav1.ConditionTrue, switchboardv1alpha1.ReasonDelivered); err != nil {
		t.Fatal(err)
	}
	kt.assertNoPlaintext(got, first)
	kt.assertNoPlaintext(got, second)
}

// TestAPIKeyHashDeletedByHand: the operator watches hash Secrets across namespaces; one deleted
// by hand turns Ready False (the key is refused), and a rotation issues a working key again.
func TestAPIKeyHashDeletedByHand(t *testing.T) {
	kt := newKeyTest(t)
	key := kt.waitIssued(kt.create("tampered", nil), 1)
	if err := env.Client.Delete(testCtx(t), kt.mustHash(key)); err != nil {
		t.Fatal(err)
	}
	// The reason says what the message says (HashMissing); it was Issuing before issue 13.
	got := kt.waitFor(key, "Ready=False after the hash went", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonHashMissing)
	})
	if c, _ := condition(got.Status.Conditions, switchboardv1alpha1.ConditionReady); !strings.Contains(c.Message, "rotate") {
		t.Fatalf("the condition does not say what to do: %q", c.Message)
	}
	kt.patchSpec(key, func(k *switchboardv1alpha1.APIKey) {
		k.Spec.Rotation = &switchboardv1alpha1.APIKeyRotation{RequestedAt: "after-tampering"}
	})
	got = kt.waitIssued(key, 2)
	claimed, err := keyclient.Claim(testCtx(t), env.Client, got)
	if err != nil {
		t.Fatal(err)
	}
	if string(kt.mustHash(got).Data[keysecret.DataHash]) != apikey.Sum(claimed.Key).String() {
		t.Fatal("the new key is not the hashed one")
	}
}
