//go:build !unit

package apikey_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex/keyindextest"
)

// lookupAt is what the /v1 server would say of plaintext at t, from what the API server holds.
func (kt *keyTest) lookupAt(key *switchboardv1alpha1.APIKey, plaintext string, t time.Time) keyindex.Result {
	kt.t.Helper()
	idx := keyindex.New()
	if err := keyindextest.PutAPIKey(idx, kt.get(key)); err != nil {
		kt.t.Fatal(err)
	}
	if err := keyindextest.PutHashSecret(idx, kt.mustHash(key)); err != nil {
		kt.t.Fatal(err)
	}
	h := apikey.Sum(plaintext)
	_, res := idx.Lookup(&h, t)
	return res
}

func (kt *keyTest) delivered(name string) string {
	kt.t.Helper()
	s, err := kt.secret(name)
	if err != nil {
		kt.t.Fatal(err)
	}
	return plaintextOf(kt.t, s)
}

func durationOf(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// TestKeyRenewsItselfBeforeItEnds: a delivered key with a 30-day lifetime renewed 7 days ahead
// is replaced twice by the operator alone, at the injected clock's renewal times: each new key
// lands in the delivery Secret (with spec.secretTemplate's annotation), the old one stays valid
// until its own end and is refused from then on, the status shows issue, end and renewal
// times, and each renewal is an Event.
func TestKeyRenewsItselfBeforeItEnds(t *testing.T) {
	kt := newKeyTest(t)
	const day = 24 * time.Hour
	key := kt.waitIssued(kt.create("renewing", func(k *switchboardv1alpha1.APIKey) {
		k.Spec.SecretName = "renewing-key"
		k.Spec.Lifetime, k.Spec.RenewBefore = durationOf(30*day), durationOf(7*day)
		k.Spec.SecretTemplate = &switchboardv1alpha1.APIKeySecretTemplate{Annotations: map[string]string{"reloader.stakater.com/match": "true"},
			Labels: map[string]string{"app": "billing", keysecret.LabelComponent: "not-switchboards"}}
	}), 1)
	first := kt.delivered("renewing-key")
	secret, _ := kt.secret("renewing-key")
	if secret.Annotations["reloader.stakater.com/match"] != "true" || secret.Labels["app"] != "billing" || secret.Labels[keysecret.LabelComponent] != keysecret.ComponentDelivery {
		t.Fatalf("the delivery Secret's metadata: labels %v, annotations %v", secret.Labels, secret.Annotations)
	}
	issued := kt.op.Clock.Now().Truncate(time.Second)
	key = kt.waitFor(key, "the life in the status", func(k *switchboardv1alpha1.APIKey) error {
		if k.Status.KeyNotAfter == nil || k.Status.RenewalTime == nil || k.Status.KeyIssuedAt == nil {
			return fmt.Errorf("issued %v, ends %v, renews %v", k.Status.KeyIssuedAt, k.Status.KeyNotAfter, k.Status.RenewalTime)
		}
		return nil
	})
	if !key.Status.KeyNotAfter.Equal(ptrTime(issued.Add(30*day))) || !key.Status.RenewalTime.Equal(ptrTime(issued.Add(23*day))) {
		t.Fatalf("ends %s, renews %s; want %s and %s", key.Status.KeyNotAfter, key.Status.RenewalTime, issued.Add(30*day), issued.Add(23*day))
	}
	if err := hasCondition(key.Status.Conditions, switchboardv1alpha1.ConditionExpiringSoon, metav1.ConditionFalse, switchboardv1alpha1.ReasonNotEndingSoon); err != nil {
		t.Fatal(err)
	}

	keys := []string{first}
	for gen := int64(2); gen <= 3; gen++ {
		before := kt.get(key)
		oldEnd := before.Status.KeyNotAfter.Time
		kt.op.Clock.SetTime(before.Status.RenewalTime.Add(time.Second))
		poke(t, key)
		key = kt.waitIssued(key, gen)
		next := kt.delivered("renewing-key")
		if next == keys[len(keys)-1] {
			t.Fatalf("renewal %d delivered the same key", gen-1)
		}
		now := kt.op.Clock.Now()
		if got := kt.lookupAt(key, next, now); got != keyindex.OK {
			t.Fatalf("the renewed key: %v", got)
		}
		old := keys[len(keys)-1]
		if got := kt.lookupAt(key, old, now); got != keyindex.OK {
			t.Fatalf("the replaced key before its end: %v, want ok", got)
		}
		if got := kt.lookupAt(key, old, oldEnd); got == keyindex.OK {
			t.Fatalf("the replaced key at its own end: %v, want refused", got)
		}
		kt.waitEvent(key, "KeyRenewed", fmt.Sprintf("generation %d", gen))
		keys = append(keys, next)
	}
	if f := kt.get(key).Status.FailedRenewalAttempts; f != 0 {
		t.Errorf("failedRenewalAttempts %d after two renewals", f)
	}
	kt.assertNoPlaintext(key, keys[2])
}

func ptrTime(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }

// TestRevealedKeyWarnsInsteadOfRenewing: a key that is only revealed cannot be renewed without
// a person: past its renewal time it is ExpiringSoon (with a Warning Event), keeps its
// generation, and from its lifetime's end it is refused and Ready says so.
func TestRevealedKeyWarnsInsteadOfRenewing(t *testing.T) {
	kt := newKeyTest(t)
	const day = 24 * time.Hour
	key := kt.waitIssued(kt.create("revealed", func(k *switchboardv1alpha1.APIKey) {
		k.Spec.Lifetime, k.Spec.RenewBeforePercentage = durationOf(10*day), ptrInt32(20)
	}), 1)
	key = kt.waitFor(key, "the end in the status", func(k *switchboardv1alpha1.APIKey) error {
		if k.Status.KeyNotAfter == nil {
			return fmt.Errorf("no keyNotAfter")
		}
		if k.Status.RenewalTime != nil {
			return fmt.Errorf("a revealed key shows renewalTime %s", k.Status.RenewalTime)
		}
		return nil
	})
	end := key.Status.KeyNotAfter.Time
	kt.op.Clock.SetTime(end.Add(-2*day + time.Minute)) // past the renewal time (20% of 10 days)
	poke(t, key)
	key = kt.waitFor(key, "ExpiringSoon", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionExpiringSoon, metav1.ConditionTrue, switchboardv1alpha1.ReasonRenewalNeedsHuman)
	})
	kt.waitEvent(key, "KeyExpiringSoon", "rotate it")
	if key.Status.KeyGeneration != 1 {
		t.Fatalf("a revealed key was renewed to generation %d", key.Status.KeyGeneration)
	}
	kt.op.Clock.SetTime(end.Add(time.Second))
	poke(t, key)
	kt.waitFor(key, "Ready=False Expired", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonExpired)
	})
}

func ptrInt32(v int32) *int32 { return &v }

// TestUnusedKeyIsRevoked: a key unused for spec.revokeWhenUnusedFor (counting from its
// creation) is revoked for good, with an Event. The operator records that where it alone writes
// (issue 31): the hash Secret, which stays and makes the server refuse the key, and the status
// (revokedAt, Ready=False RevokedWhenUnused); spec.revoked stays as the user wrote it. Its reveal
// Secret goes, and a rotation asked for afterwards issues no new key.
func TestUnusedKeyIsRevoked(t *testing.T) {
	kt := newKeyTest(t)
	key := kt.waitIssued(kt.create("idle", func(k *switchboardv1alpha1.APIKey) {
		k.Spec.RevokeWhenUnusedFor = durationOf(24 * time.Hour)
	}), 1)
	reveal, err := kt.secret(key.Status.RevealSecretName)
	if err != nil {
		t.Fatal(err)
	}
	plaintext := plaintextOf(t, reveal)
	kt.op.Clock.SetTime(key.CreationTimestamp.Add(25 * time.Hour))
	poke(t, key)
	key = kt.waitRevokedUnused(key)
	kt.waitEvent(key, switchboardv1alpha1.ReasonUnusedRevoked, "revokeWhenUnusedFor")
	if got := kt.lookupAt(key, plaintext, kt.op.Clock.Now()); got != keyindex.Revoked {
		t.Fatalf("the server's index says %s of the revoked key, want revoked", got)
	}
	eventually(t, "the reveal Secret deleted", func() error {
		if _, err := kt.secret(reveal.Name); err == nil {
			return fmt.Errorf("reveal Secret %s is still there", reveal.Name)
		}
		return nil
	})
	kt.patchSpec(key, func(k *switchboardv1alpha1.APIKey) {
		k.Spec.Rotation = &switchboardv1alpha1.APIKeyRotation{RequestedAt: "after-revocation"}
	})
	key = kt.waitRevokedUnused(key)
	if key.Status.KeyGeneration != 1 || key.Status.LastHandledRotationAt != "" {
		t.Fatalf("a rotation of the revoked key issued generation %d (rotation %q)", key.Status.KeyGeneration, key.Status.LastHandledRotationAt)
	}
	if got := kt.lookupAt(key, plaintext, kt.op.Clock.Now()); got != keyindex.Revoked {
		t.Fatalf("after a rotation the server's index says %s of the revoked key, want revoked", got)
	}
}

// waitRevokedUnused waits for the operator's own revocation of key for want of use: recorded
// in its hash Secret, shown in its status, its spec not revoked. It returns the APIKey.
func (kt *keyTest) waitRevokedUnused(key *switchboardv1alpha1.APIKey) *switchboardv1alpha1.APIKey {
	kt.t.Helper()
	return kt.waitFor(key, "revoked for want of use", func(k *switchboardv1alpha1.APIKey) error {
		if k.Spec.Revoked {
			return fmt.Errorf("spec.revoked was written: the operator must not write the spec")
		}
		if err := hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonUnusedRevoked); err != nil {
			return err
		}
		hash, err := kt.hashSecret(k)
		if err != nil {
			return fmt.Errorf("the hash Secret: %w", err)
		}
		rec, ok := keysecret.IssuedOf(hash)
		if !ok || !rec.Revoked() || rec.RevokedReason != switchboardv1alpha1.ReasonUnusedRevoked {
			return fmt.Errorf("the hash Secret records no revocation: %+v", rec)
		}
		if k.Status.RevokedAt == nil || !k.Status.RevokedAt.Time.Equal(rec.RevokedAt) {
			return fmt.Errorf("status.revokedAt %v, the record says %s", k.Status.RevokedAt, rec.RevokedAt)
		}
		if c, _ := condition(k.Status.Conditions, switchboardv1alpha1.ConditionReady); !strings.Contains(c.Message, "a rotation issues no new key") {
			return fmt.Errorf("Ready's message does not say a rotation issues no key: %s", c.Message)
		}
		return nil
	})
}

// TestRenewalHeldToTheMinimumInterval: a key stored with a lifecycle that renews it every 6
// seconds (lifetime 10m renewed at 99%: no admission webhook runs here, as before the minimum
// existed) is renewed by the real operator no more often than its default minimum, the larger
// of 5 minutes and 10% of the lifetime (issue 29): not at its own renewal time, whatever
// reconciles then, but 5 minutes after each issue. The status shows that time and says why
// (RenewalLimited, with a Warning Event); the spec is left as the tenant wrote it.
func TestRenewalHeldToTheMinimumInterval(t *testing.T) {
	kt := newKeyTest(t)
	key := kt.waitIssued(kt.create("storm", func(k *switchboardv1alpha1.APIKey) {
		k.Spec.SecretName = "storm-key"
		k.Spec.Lifetime, k.Spec.RenewBeforePercentage = durationOf(10*time.Minute), ptrInt32(99)
	}), 1)
	limited := func(gen int64) func(*switchboardv1alpha1.APIKey) error {
		return func(k *switchboardv1alpha1.APIKey) error {
			if k.Status.KeyGeneration != gen || k.Status.KeyIssuedAt == nil || k.Status.RenewalTime == nil {
				return fmt.Errorf("generation %d, issued %v, renews %v", k.Status.KeyGeneration, k.Status.KeyIssuedAt, k.Status.RenewalTime)
			}
			if want := k.Status.KeyIssuedAt.Add(5 * time.Minute); !k.Status.RenewalTime.Time.Equal(want) {
				return fmt.Errorf("renews at %s, want %s (5m after its issue at %s)", k.Status.RenewalTime.UTC(), want.UTC(), k.Status.KeyIssuedAt.UTC())
			}
			c, err := condition(k.Status.Conditions, switchboardv1alpha1.ConditionRenewalLimited)
			if err != nil {
				return err
			}
			if c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "renews the key every 6s; this platform renews a key at most every 5m0s") {
				return fmt.Errorf("RenewalLimited is %s: %s", c.Status, c.Message)
			}
			return nil
		}
	}
	key = kt.waitFor(key, "renewal held to 5m after the issue", limited(1))
	kt.waitEvent(key, switchboardv1alpha1.ConditionRenewalLimited, "at most every 5m0s")
	issued := key.Status.KeyIssuedAt.Time

	// Past its own renewal time (6s after the issue) and up to a second before the minimum's,
	// reconciles renew nothing.
	for _, at := range []time.Duration{7 * time.Second, time.Minute, 5*time.Minute - time.Second} {
		kt.op.Clock.SetTime(issued.Add(at))
		poke(t, key)
		kt.waitFor(key, fmt.Sprintf("reconciled %s after the issue", at), func(k *switchboardv1alpha1.APIKey) error {
			if k.Status.KeyGeneration != 1 {
				t.Fatalf("renewed to generation %d %s after the issue, before the minimum interval", k.Status.KeyGeneration, at)
			}
			return nil
		})
	}
	kt.op.Clock.SetTime(issued.Add(5 * time.Minute))
	poke(t, key)
	key = kt.waitFor(key, "renewed 5m after the issue, and held again", limited(2))
	if !key.Status.KeyIssuedAt.Time.Equal(issued.Add(5 * time.Minute)) {
		t.Fatalf("generation 2 issued at %s, want %s", key.Status.KeyIssuedAt.UTC(), issued.Add(5*time.Minute).UTC())
	}
	kt.waitEvent(key, "KeyRenewed", "generation 2")
	if got := kt.get(key).Spec; got.Lifetime.Duration != 10*time.Minute || got.RenewBeforePercentage == nil || *got.RenewBeforePercentage != 99 {
		t.Fatalf("the spec was changed: lifetime %s, renewBeforePercentage %v", got.Lifetime, got.RenewBeforePercentage)
	}
}
