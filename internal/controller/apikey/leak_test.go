//go:build !unit

package apikey_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	apikeyctrl "github.com/switchboard-dev/switchboard/internal/controller/apikey"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
)

const leakURL = "https://github.com/octo/app/blob/0123abc/config.env"

// report is createLeakReport, in kt's test.
func (kt *keyTest) report(ns, plaintext string) *switchboardv1alpha1.LeakReport {
	kt.t.Helper()
	return createLeakReport(kt.t, ns, plaintext)
}

// createLeakReport creates, in namespace ns, the LeakReport the receiver would write for
// plaintext.
func createLeakReport(t *testing.T, ns, plaintext string) *switchboardv1alpha1.LeakReport {
	t.Helper()
	sum := apikey.Sum(plaintext).String()
	r := &switchboardv1alpha1.LeakReport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: switchboardv1alpha1.LeakReportName(sum)},
		Spec: switchboardv1alpha1.LeakReportSpec{
			KeyHash: sum, KeyHint: apikey.Hint(plaintext), Source: switchboardv1alpha1.LeakSourceGitHubPartner,
			URL: leakURL, Location: "content", ReportedAt: metav1.NewTime(time.Now().Truncate(time.Second)),
		},
	}
	if err := env.Client.Create(testCtx(t), r); err != nil {
		t.Fatalf("creating the LeakReport: %v", err)
	}
	return r
}

// waitReport polls the LeakReport until its Ready condition has reason, and returns it.
func (kt *keyTest) waitReport(r *switchboardv1alpha1.LeakReport, status metav1.ConditionStatus, reason string) *switchboardv1alpha1.LeakReport {
	kt.t.Helper()
	got := &switchboardv1alpha1.LeakReport{}
	eventually(kt.t, "LeakReport Ready "+reason, func() error {
		if err := env.Client.Get(testCtx(kt.t), client.ObjectKeyFromObject(r), got); err != nil {
			return err
		}
		return hasCondition(got.Status.Conditions, switchboardv1alpha1.ConditionReady, status, reason)
	})
	return got
}

// refused says whether the index the server builds from the API server's objects refuses plaintext.
func (kt *keyTest) refused(key *switchboardv1alpha1.APIKey, plaintext string) bool {
	return kt.lookupAt(key, plaintext, kt.op.Clock.Now()) != keyindex.OK
}

func TestLeakedDeliveredKeyIsRefusedAndReplaced(t *testing.T) {
	kt := newKeyTest(t)
	key := kt.waitIssued(kt.create("leaky", func(k *switchboardv1alpha1.APIKey) { k.Spec.SecretName = "leaky-key" }), 1)
	lastUsed := metav1.NewTime(kt.op.Clock.Now().Add(-time.Minute))
	eventually(t, "lastUsedAt written", func() error {
		used := kt.get(key)
		used.Status.LastUsedAt = &lastUsed
		return env.Client.Status().Update(testCtx(t), used)
	})
	old := kt.delivered("leaky-key")

	counted := leaksCounted(t, switchboardv1alpha1.LeakSourceGitHubPartner)
	start := time.Now()
	report := kt.report(kt.system, old)
	var took time.Duration
	eventually(t, "the leaked key refused", func() error {
		if !kt.refused(key, old) {
			return fmt.Errorf("the leaked key is still accepted")
		}
		took = time.Since(start)
		return nil
	})
	t.Logf("the leaked key was refused %v after its LeakReport was created", took)

	got := kt.waitIssued(key, 2)
	next := kt.delivered("leaky-key")
	if next == old {
		t.Fatal("the delivery Secret still holds the leaked key")
	}
	if kt.refused(got, next) {
		t.Fatal("the replacement key is refused")
	}
	if got.Status.PreviousKeyValidUntil != nil {
		t.Fatalf("the leaked key was given a grace period until %v", got.Status.PreviousKeyValidUntil)
	}
	got = kt.waitFor(key, "Leaked", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionLeaked, metav1.ConditionTrue, switchboardv1alpha1.ReasonLeakReplaced)
	})
	c, _ := condition(got.Status.Conditions, switchboardv1alpha1.ConditionLeaked)
	for _, want := range []string{apikey.Hint(old), leakURL, lastUsed.UTC().Format(time.RFC3339), got.Status.KeyHint} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("the Leaked message %q does not say %q", c.Message, want)
		}
	}
	kt.waitEvent(key, apikeyctrl.ReasonKeyLeaked, leakURL)
	r := kt.waitReport(report, metav1.ConditionTrue, switchboardv1alpha1.ReasonLeakActedOn)
	if r.Status.KeyRef == nil || r.Status.KeyRef.Name != key.Name || r.Status.KeyRef.Namespace != kt.ns || r.Status.KeyRef.UID != string(key.UID) {
		t.Fatalf("LeakReport keyRef %+v", r.Status.KeyRef)
	}

	// A re-reconcile, and the report seen again, rotate nothing more.
	poke(t, key)
	annotate := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"poked":"again"}}}`))
	if err := env.Client.Patch(testCtx(t), report, annotate); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if g := kt.get(key).Status.KeyGeneration; g != 2 {
		t.Fatalf("the same report rotated the key again: generation %d", g)
	}
	if n := len(kt.events(key)[apikeyctrl.ReasonKeyLeaked]); n != 1 {
		t.Fatalf("%d KeyLeaked Events, want 1", n)
	}
	if n := leaksCounted(t, switchboardv1alpha1.LeakSourceGitHubPartner); n < counted+1 {
		t.Fatalf("switchboard_operator_keys_leaked_total went from %v to %v", counted, n)
	}
	kt.assertNoPlaintext(key, old)
	kt.assertNoPlaintext(key, next)
}

// leaksCounted reads switchboard_operator_keys_leaked_total{source}, all actions, from the
// operator's registry (tests in parallel may add to it: compare before and after).
func leaksCounted(t *testing.T, source string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "switchboard_operator_keys_leaked_total" {
			continue
		}
		var n float64
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "source" && l.GetValue() == source {
					n += m.GetCounter().GetValue()
				}
			}
		}
		return n
	}
	return 0
}

// A leaked key whose delivery Secret became someone else's is refused, with nothing to
// replace it with: Leaked says Refused and Ready says Leaked.
func TestLeakedKeyWithoutReplacementIsRefused(t *testing.T) {
	kt := newKeyTest(t)
	key := kt.waitIssued(kt.create("stuck", func(k *switchboardv1alpha1.APIKey) { k.Spec.SecretName = "stuck-key" }), 1)
	old := kt.delivered("stuck-key")
	s, err := kt.secret("stuck-key")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(testCtx(t), s); err != nil {
		t.Fatal(err)
	}
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kt.ns, Name: "stuck-key"}, StringData: map[string]string{"other": "data"}}
	if err := env.Client.Create(testCtx(t), foreign); err != nil {
		t.Fatal(err)
	}
	kt.waitFor(key, "delivery conflict", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonDeliveryConflict)
	})
	kt.report(kt.system, old)
	got := kt.waitFor(key, "Leaked Refused", func(k *switchboardv1alpha1.APIKey) error {
		if err := hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonLeaked); err != nil {
			return err
		}
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionLeaked, metav1.ConditionTrue, switchboardv1alpha1.ReasonLeakRefused)
	})
	if !kt.refused(got, old) || got.Status.KeyGeneration != 1 {
		t.Fatalf("the leaked key: refused %v, generation %d", kt.refused(got, old), got.Status.KeyGeneration)
	}
}

func TestLeakedRevealedKeyIsReplacedByANewReveal(t *testing.T) {
	kt := newKeyTest(t)
	key := kt.waitIssued(kt.create("shown", nil), 1)
	first, err := keyclient.Claim(testCtx(t), env.Client, key)
	if err != nil {
		t.Fatal(err)
	}
	kt.report(kt.system, first.Key)
	got := kt.waitIssued(key, 2)
	if !kt.refused(got, first.Key) {
		t.Fatal("the leaked key is still accepted")
	}
	second, err := keyclient.Claim(testCtx(t), env.Client, got)
	if err != nil {
		t.Fatal(err)
	}
	if second.Key == first.Key || kt.refused(got, second.Key) {
		t.Fatal("no working replacement to reveal")
	}
}

func TestLeakedPreviousKeyLosesItsGrace(t *testing.T) {
	kt := newKeyTest(t)
	key := kt.waitIssued(kt.create("graced", func(k *switchboardv1alpha1.APIKey) { k.Spec.SecretName = "graced-key" }), 1)
	old := kt.delivered("graced-key")
	kt.patchSpec(key, func(k *switchboardv1alpha1.APIKey) {
		k.Spec.Rotation = &switchboardv1alpha1.APIKeyRotation{RequestedAt: "r1", GracePeriod: metav1.Duration{Duration: time.Hour}}
	})
	got := kt.waitIssued(key, 2)
	current := kt.delivered("graced-key")
	if kt.refused(got, old) {
		t.Fatal("the previous key should be in its grace period")
	}
	report := kt.report(kt.system, old)
	kt.waitFor(key, "grace ended", func(k *switchboardv1alpha1.APIKey) error {
		if k.Status.PreviousKeyValidUntil != nil {
			return fmt.Errorf("previousKeyValidUntil %v", k.Status.PreviousKeyValidUntil)
		}
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionLeaked, metav1.ConditionTrue, switchboardv1alpha1.ReasonLeakReplaced)
	})
	if !kt.refused(got, old) {
		t.Fatal("the leaked previous key is still accepted")
	}
	if _, ok := kt.mustHash(key).Data[keysecret.DataPreviousHash]; ok {
		t.Fatal("the hash Secret keeps the leaked previous key's hash")
	}
	kt.waitReport(report, metav1.ConditionTrue, switchboardv1alpha1.ReasonLeakActedOn)
	if g := kt.get(key).Status.KeyGeneration; g != 2 || kt.delivered("graced-key") != current || kt.refused(got, current) {
		t.Fatalf("a leak of the previous key should issue nothing new (generation %d)", g)
	}
}

func TestLeakReportOfUnknownKey(t *testing.T) {
	kt := newKeyTest(t)
	key := kt.waitIssued(kt.create("bystander", func(k *switchboardv1alpha1.APIKey) { k.Spec.SecretName = "bystander-key" }), 1)
	stranger, err := apikey.Generate(apikey.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	r := kt.waitReport(kt.report(kt.system, stranger), metav1.ConditionFalse, switchboardv1alpha1.ReasonKeyNotFound)
	if r.Status.KeyRef != nil {
		t.Fatalf("keyRef %+v for a key nobody has", r.Status.KeyRef)
	}
	kt.assertUntouched(key, "bystander-key")
}

// A tenant may create LeakReports in its own namespace (the kind is namespaced): a forged
// report of another's key, or its own, changes nothing.
func TestLeakReportOutsideTheSystemNamespaceIsIgnored(t *testing.T) {
	kt := newKeyTest(t)
	key := kt.waitIssued(kt.create("victim", func(k *switchboardv1alpha1.APIKey) { k.Spec.SecretName = "victim-key" }), 1)
	forged := kt.report(kt.ns, kt.delivered("victim-key"))
	poke(t, key)
	kt.assertUntouched(key, "victim-key")
	got := &switchboardv1alpha1.LeakReport{}
	if err := env.Client.Get(testCtx(t), client.ObjectKeyFromObject(forged), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 0 || got.Status.KeyRef != nil {
		t.Fatalf("the operator reported on a tenant's LeakReport: %+v", got.Status)
	}
}

// assertUntouched waits a little and checks the delivered key of generation 1 still works and
// has no Leaked condition.
func (kt *keyTest) assertUntouched(key *switchboardv1alpha1.APIKey, secretName string) {
	kt.t.Helper()
	plaintext := kt.delivered(secretName)
	time.Sleep(2 * time.Second)
	got := kt.get(key)
	if got.Status.KeyGeneration != 1 || kt.refused(got, plaintext) || kt.delivered(secretName) != plaintext {
		kt.t.Fatalf("the key changed: generation %d", got.Status.KeyGeneration)
	}
	if _, err := condition(got.Status.Conditions, switchboardv1alpha1.ConditionLeaked); err == nil {
		kt.t.Fatal("a Leaked condition on a key nobody reported")
	}
	if _, ok := kt.mustHash(key).Data[keysecret.DataLeakedHash]; ok {
		kt.t.Fatal("a leak recorded in the hash Secret")
	}
}

// TestLeakOverlapReplacesFirst: with spec.leakOverlap, a leaked delivered key's replacement is
// written first and the leaked key keeps working for the overlap, never longer: measured
// second by second on the index the server builds, at the operator's injected clock.
func TestLeakOverlapReplacesFirst(t *testing.T) {
	const overlap = 30 * time.Second
	kt := newKeyTest(t)
	key := kt.waitIssued(kt.create("overlap", func(k *switchboardv1alpha1.APIKey) {
		k.Spec.SecretName = "overlap-key"
		k.Spec.LeakOverlap = durationOf(overlap)
	}), 1)
	old := kt.delivered("overlap-key")
	counted := leaksCountedAs(t, switchboardv1alpha1.LeakSourceGitHubPartner, "replaced_after_overlap")
	acted := kt.op.Clock.Now()
	kt.report(kt.system, old)

	got := kt.waitIssued(key, 2)
	next := kt.delivered("overlap-key")
	if next == old {
		t.Fatal("the delivery Secret still holds the leaked key")
	}
	// The last instant the leaked key is accepted, from the moment the operator acted (its
	// clock does not move here) to well past the overlap.
	var last time.Duration = -1
	for d := time.Duration(0); d <= 2*overlap; d += time.Second {
		if !kt.refusedAt(got, old, acted.Add(d)) {
			last = d
		}
		if kt.refusedAt(got, next, acted.Add(d)) {
			t.Fatalf("the replacement is refused %v after the leak was acted on", d)
		}
	}
	t.Logf("the leaked key was accepted until %v after the leak was acted on (leakOverlap %v)", last, overlap)
	if last < overlap-time.Second || last >= overlap {
		t.Fatalf("the leaked key was last accepted %v after the leak was acted on; want just under the overlap, %v", last, overlap)
	}
	if got.Status.PreviousKeyValidUntil == nil || got.Status.PreviousKeyValidUntil.After(acted.Add(overlap)) {
		t.Fatalf("previousKeyValidUntil %v, want at most %v", got.Status.PreviousKeyValidUntil, acted.Add(overlap))
	}
	got = kt.waitFor(key, "Leaked says the overlap", func(k *switchboardv1alpha1.APIKey) error {
		c, err := condition(k.Status.Conditions, switchboardv1alpha1.ConditionLeaked)
		if err != nil {
			return err
		}
		if !strings.Contains(c.Message, "replaced first") || !strings.Contains(c.Message, got.Status.KeyHint) {
			return fmt.Errorf("Leaked says %q", c.Message)
		}
		return nil
	})
	if n := leaksCountedAs(t, switchboardv1alpha1.LeakSourceGitHubPartner, "replaced_after_overlap"); n < counted+1 {
		t.Fatalf("keys_leaked_total{action=replaced_after_overlap} went from %v to %v", counted, n)
	}

	// Once the overlap ends the operator drops the leaked hash; nothing more is issued.
	kt.op.Clock.Step(overlap)
	poke(t, got)
	kt.waitFor(key, "the overlap over", func(k *switchboardv1alpha1.APIKey) error {
		if k.Status.PreviousKeyValidUntil != nil {
			return fmt.Errorf("previousKeyValidUntil %v", k.Status.PreviousKeyValidUntil)
		}
		return nil
	})
	if _, ok := kt.mustHash(key).Data[keysecret.DataPreviousHash]; ok {
		t.Fatal("the hash Secret keeps the leaked key's hash after the overlap")
	}
	if g := kt.get(key).Status.KeyGeneration; g != 2 || kt.delivered("overlap-key") != next {
		t.Fatalf("the end of the overlap issued another key (generation %d)", g)
	}
}

// refusedAt says whether the index the server builds refuses plaintext at t.
func (kt *keyTest) refusedAt(key *switchboardv1alpha1.APIKey, plaintext string, t time.Time) bool {
	return kt.lookupAt(key, plaintext, t) != keyindex.OK
}

// leaksCountedAs reads switchboard_operator_keys_leaked_total{source,action}.
func leaksCountedAs(t *testing.T, source, action string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "switchboard_operator_keys_leaked_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["source"] == source && labels["action"] == action {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// A leak of an expired key refuses it and issues nothing: an expired APIKey gets no new key.
func TestLeakOfExpiredKeyIssuesNothing(t *testing.T) {
	kt := newKeyTest(t)
	ends := metav1.NewTime(kt.op.Clock.Now().Add(time.Hour))
	key := kt.waitIssued(kt.create("ended", func(k *switchboardv1alpha1.APIKey) {
		k.Spec.SecretName = "ended-key"
		k.Spec.ExpiresAt = &ends
	}), 1)
	old := kt.delivered("ended-key")
	kt.op.Clock.Step(2 * time.Hour)
	poke(t, key)
	kt.waitFor(key, "expired", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonExpired)
	})
	kt.report(kt.system, old)
	got := kt.waitFor(key, "Leaked Refused", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionLeaked, metav1.ConditionTrue, switchboardv1alpha1.ReasonLeakRefused)
	})
	poke(t, key)
	time.Sleep(2 * time.Second)
	if g := kt.get(key).Status.KeyGeneration; g != 1 || kt.delivered("ended-key") != old {
		t.Fatalf("a leak of an expired key issued generation %d", g)
	}
	if !kt.refused(got, old) {
		t.Fatal("the leaked expired key is accepted")
	}
}

// A leak of a revoked key issues nothing: its hash is gone, so the report finds no key.
func TestLeakOfRevokedKeyIssuesNothing(t *testing.T) {
	kt := newKeyTest(t)
	key := kt.waitIssued(kt.create("gone", func(k *switchboardv1alpha1.APIKey) { k.Spec.SecretName = "gone-key" }), 1)
	old := kt.delivered("gone-key")
	kt.patchSpec(key, func(k *switchboardv1alpha1.APIKey) { k.Spec.Revoked = true })
	kt.waitFor(key, "revoked", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevoked)
	})
	kt.waitReport(kt.report(kt.system, old), metav1.ConditionFalse, switchboardv1alpha1.ReasonKeyNotFound)
	poke(t, key)
	time.Sleep(2 * time.Second)
	got := kt.get(key)
	if got.Status.KeyGeneration != 1 {
		t.Fatalf("a leak of a revoked key issued generation %d", got.Status.KeyGeneration)
	}
	if s, err := kt.secret("gone-key"); err == nil && keysecret.Generation(s) != 1 {
		t.Fatalf("the delivery Secret of a revoked key got generation %d", keysecret.Generation(s))
	}
}

// Two leaks of one APIKey whose current key cannot be replaced (its delivery Secret became
// someone else's): the current key reported first, then the previous key in its grace. Both
// stay refused: the record of the current key's leak is what refuses it, and the second report
// must not replace it, not even for the moment until the next reconcile writes it back.
func TestLeakOfPreviousKeyKeepsTheCurrentKeyRefused(t *testing.T) {
	kt := newKeyTest(t)
	key := kt.waitIssued(kt.create("twice", func(k *switchboardv1alpha1.APIKey) { k.Spec.SecretName = "twice-key" }), 1)
	first := kt.delivered("twice-key")
	kt.patchSpec(key, func(k *switchboardv1alpha1.APIKey) {
		k.Spec.Rotation = &switchboardv1alpha1.APIKeyRotation{RequestedAt: "r1", GracePeriod: metav1.Duration{Duration: time.Hour}}
	})
	got := kt.waitIssued(key, 2)
	second := kt.delivered("twice-key")
	s, err := kt.secret("twice-key")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(testCtx(t), s); err != nil {
		t.Fatal(err)
	}
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kt.ns, Name: "twice-key"}, StringData: map[string]string{"other": "data"}}
	if err := env.Client.Create(testCtx(t), foreign); err != nil {
		t.Fatal(err)
	}
	kt.waitFor(key, "delivery conflict", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonDeliveryConflict)
	})
	kt.report(kt.system, second)
	kt.waitFor(key, "the current key refused", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionLeaked, metav1.ConditionTrue, switchboardv1alpha1.ReasonLeakRefused)
	})
	if kt.refused(got, first) {
		t.Fatal("the previous key should still be in its grace period")
	}
	kt.report(kt.system, first)
	eventually(t, "the previous key refused", func() error {
		if !kt.refused(got, first) {
			return fmt.Errorf("the previous key is still accepted")
		}
		return nil
	})
	poke(t, key)
	time.Sleep(2 * time.Second)
	// The record refusing the current key was never replaced: no second refusal of it.
	if l, _ := keysecret.LeakOf(kt.mustHash(key)); l.Hash != apikey.Sum(second).String() {
		t.Fatalf("the leak record names %s, not the current key", l.Hash)
	}
	if n := len(kt.events(key)[apikeyctrl.ReasonKeyLeaked]); n != 1 {
		t.Fatalf("%d KeyLeaked Events, want 1: the current key's leak record was replaced and written again", n)
	}
	if !kt.refused(got, second) {
		t.Fatal("the current key, reported leaked first, is accepted again after its previous key's leak")
	}
	if !kt.refused(got, first) {
		t.Fatal("the previous key is accepted again")
	}
}
