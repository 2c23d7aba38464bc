package keyindex

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

var now = time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)

func mustKey(t testing.TB) string {
	t.Helper()
	k, err := apikey.Generate("sb")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func hashSecret(uid types.UID, current, previous string, until time.Time) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "apikey-" + string(uid), Labels: map[string]string{keysecret.LabelAPIKeyUID: string(uid)}},
		Type:       keysecret.TypeHash,
		Data:       map[string][]byte{keysecret.DataHash: []byte(apikey.Sum(current).String())},
	}
	if previous != "" {
		s.Data[keysecret.DataPreviousHash] = []byte(apikey.Sum(previous).String())
		s.Data[keysecret.DataPreviousValidUntil] = []byte(until.Format(time.RFC3339))
	}
	return s
}

// revokedByOperator records in hash Secret s the operator's revocation of its key.
func revokedByOperator(s *corev1.Secret) *corev1.Secret {
	s.Data[keysecret.DataRevokedAt] = []byte(now.Add(-time.Hour).Format(time.RFC3339))
	s.Data[keysecret.DataRevokedReason] = []byte(switchboardv1alpha1.ReasonUnusedRevoked)
	return s
}

// leakedKey records in hash Secret s that the key plaintext was reported leaked.
func leakedKey(s *corev1.Secret, plaintext string) *corev1.Secret {
	s.Data[keysecret.DataLeakedHash] = []byte(apikey.Sum(plaintext).String())
	return s
}

// withNotAfter records the current key's lifetime end in hash Secret s.
func withNotAfter(s *corev1.Secret, t time.Time) *corev1.Secret {
	s.Data[keysecret.DataNotAfter] = []byte(t.UTC().Format(time.RFC3339))
	return s
}

func apiKey(uid types.UID, mutate func(*switchboardv1alpha1.APIKey)) *switchboardv1alpha1.APIKey {
	k := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: string(uid), UID: uid}}
	if mutate != nil {
		mutate(k)
	}
	return k
}

func lookup(x *Index, key string, at time.Time) Result {
	h := apikey.Sum(key)
	_, r := x.Lookup(&h, at)
	return r
}

func TestLookup(t *testing.T) {
	current, previous, other := mustKey(t), mustKey(t), mustKey(t)
	expiresAt := metav1.NewTime(now.Add(time.Hour))
	deleting := metav1.NewTime(now)
	tests := []struct {
		name   string
		secret *corev1.Secret
		key    *switchboardv1alpha1.APIKey
		try    string
		at     time.Time
		want   Result
	}{
		{"current key", hashSecret("u1", current, "", time.Time{}), apiKey("u1", nil), current, now, OK},
		{"unknown key", hashSecret("u1", current, "", time.Time{}), apiKey("u1", nil), other, now, Unknown},
		{"no APIKey in the cache", hashSecret("u1", current, "", time.Time{}), apiKey("u2", nil), current, now, Orphaned},
		{"revoked", hashSecret("u1", current, "", time.Time{}), apiKey("u1", func(k *switchboardv1alpha1.APIKey) { k.Spec.Revoked = true }), current, now, Revoked},
		{"being deleted", hashSecret("u1", current, "", time.Time{}), apiKey("u1", func(k *switchboardv1alpha1.APIKey) { k.DeletionTimestamp = &deleting }), current, now, Revoked},
		{"before expiry", hashSecret("u1", current, "", time.Time{}), apiKey("u1", func(k *switchboardv1alpha1.APIKey) { k.Spec.ExpiresAt = &expiresAt }), current, now, OK},
		{"at expiry", hashSecret("u1", current, "", time.Time{}), apiKey("u1", func(k *switchboardv1alpha1.APIKey) { k.Spec.ExpiresAt = &expiresAt }), current, now.Add(time.Hour), Expired},
		{"previous within grace", hashSecret("u1", current, previous, now.Add(time.Minute)), apiKey("u1", nil), previous, now, OK},
		{"previous at end of grace", hashSecret("u1", current, previous, now.Add(time.Minute)), apiKey("u1", nil), previous, now.Add(time.Minute), GraceEnded},
		{"current after a rotation", hashSecret("u1", current, previous, now), apiKey("u1", nil), current, now.Add(time.Hour), OK},
		{"within its lifetime", withNotAfter(hashSecret("u1", current, "", time.Time{}), now.Add(time.Hour)), apiKey("u1", nil), current, now, OK},
		{"at its lifetime's end", withNotAfter(hashSecret("u1", current, "", time.Time{}), now.Add(time.Hour)), apiKey("u1", nil), current, now.Add(time.Hour), LifetimeEnded},
		{"previous within grace, current's lifetime unaffected", withNotAfter(hashSecret("u1", current, previous, now.Add(time.Minute)), now.Add(time.Hour)), apiKey("u1", nil), previous, now, OK},
		{"revoked by the operator's record", revokedByOperator(hashSecret("u1", current, "", time.Time{})), apiKey("u1", nil), current, now, Revoked},
		{"revoked by the operator's record, previous key too", revokedByOperator(hashSecret("u1", current, previous, now.Add(time.Minute))), apiKey("u1", nil), previous, now, Revoked},
		{"current reported leaked, before its replacement", leakedKey(hashSecret("u1", current, "", time.Time{}), current), apiKey("u1", nil), current, now, Revoked},
		{"previous reported leaked within its grace", leakedKey(hashSecret("u1", current, previous, now.Add(time.Minute)), previous), apiKey("u1", nil), previous, now, Unknown},
		{"current kept when the previous leaked", leakedKey(hashSecret("u1", current, previous, now.Add(time.Minute)), previous), apiKey("u1", nil), current, now, OK},
		{"revoked beats grace", hashSecret("u1", current, previous, now.Add(time.Minute)), apiKey("u1", func(k *switchboardv1alpha1.APIKey) { k.Spec.Revoked = true }), previous, now, Revoked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := New()
			if err := putHashSecret(x, tt.secret); err != nil {
				t.Fatal(err)
			}
			if err := putAPIKey(x, tt.key); err != nil {
				t.Fatal(err)
			}
			if got := lookup(x, tt.try, tt.at); got != tt.want {
				t.Errorf("Lookup = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestHashSecretChanges: updates replace a Secret's hashes, deletes remove them, and a Secret
// that breaks the contract contributes nothing.
func TestHashSecretChanges(t *testing.T) {
	first, second := mustKey(t), mustKey(t)
	x := New()
	if err := putAPIKey(x, apiKey("u1", nil)); err != nil {
		t.Fatal(err)
	}
	if err := putHashSecret(x, hashSecret("u1", first, "", time.Time{})); err != nil {
		t.Fatal(err)
	}
	// Rotation without grace: the first key goes at once.
	if err := putHashSecret(x, hashSecret("u1", second, "", time.Time{})); err != nil {
		t.Fatal(err)
	}
	if lookup(x, first, now) != Unknown || lookup(x, second, now) != OK {
		t.Fatal("a replaced hash still authenticates, or the new one does not")
	}
	broken := []func(*corev1.Secret){
		func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque },
		func(s *corev1.Secret) { delete(s.Labels, keysecret.LabelAPIKeyUID) },
		func(s *corev1.Secret) { s.Data[keysecret.DataHash] = []byte("not hex") },
		func(s *corev1.Secret) { s.Data[keysecret.DataPreviousValidUntil] = []byte("soon") },
		func(s *corev1.Secret) { s.Data[keysecret.DataPreviousHash] = []byte("abc") },
	}
	for i, mutate := range broken {
		s := hashSecret("u1", second, first, now.Add(time.Hour))
		mutate(s)
		if err := putHashSecret(x, s); err == nil {
			t.Errorf("broken Secret %d was accepted", i)
		}
		if lookup(x, second, now) != Unknown || lookup(x, first, now) != Unknown {
			t.Errorf("broken Secret %d left a hash that authenticates", i)
		}
	}
	if err := putHashSecret(x, hashSecret("u1", second, "", time.Time{})); err != nil {
		t.Fatal(err)
	}
	x.DeleteHashSecret("apikey-u1")
	if lookup(x, second, now) != Unknown {
		t.Error("a deleted hash Secret still authenticates")
	}
	if s := x.Stats(); s.Hashes != 0 {
		t.Errorf("%d hashes left", s.Hashes)
	}
	x.DeleteAPIKey("u1")
	if s := x.Stats(); s.Keys != 0 {
		t.Errorf("%d keys left", s.Keys)
	}
}

// TestLeaked: the index knows the key a hash Secret records as leaked, for the leak receiver
// only (it authenticates nothing), until the record changes or the Secret goes; a broken Secret
// records nothing.
func TestLeaked(t *testing.T) {
	leaked, replacement, other := mustKey(t), mustKey(t), mustKey(t)
	isLeaked := func(x *Index, key string) bool { h := apikey.Sum(key); return x.Leaked(&h) }
	x := New()
	if err := putAPIKey(x, apiKey("u1", nil)); err != nil {
		t.Fatal(err)
	}
	if err := putHashSecret(x, hashSecret("u1", leaked, "", time.Time{})); err != nil {
		t.Fatal(err)
	}
	if isLeaked(x, leaked) {
		t.Fatal("a key nobody reported is leaked")
	}
	// The operator replaced the leaked key with no grace: only its record knows it.
	if err := putHashSecret(x, leakedKey(hashSecret("u1", replacement, "", time.Time{}), leaked)); err != nil {
		t.Fatal(err)
	}
	if !isLeaked(x, leaked) || isLeaked(x, replacement) || isLeaked(x, other) {
		t.Fatalf("Leaked: leaked %v, replacement %v, other %v; want true, false, false", isLeaked(x, leaked), isLeaked(x, replacement), isLeaked(x, other))
	}
	if lookup(x, leaked, now) != Unknown || lookup(x, replacement, now) != OK {
		t.Fatal("the leak record changed what authenticates")
	}
	// The replacement leaks in turn: the record names it, and no longer the first.
	if err := putHashSecret(x, leakedKey(hashSecret("u1", other, "", time.Time{}), replacement)); err != nil {
		t.Fatal(err)
	}
	if isLeaked(x, leaked) || !isLeaked(x, replacement) {
		t.Fatal("the index kept a leak record the Secret no longer holds")
	}
	broken := leakedKey(hashSecret("u1", other, "", time.Time{}), leaked)
	broken.Type = corev1.SecretTypeOpaque
	if err := putHashSecret(x, broken); err == nil || isLeaked(x, leaked) || isLeaked(x, replacement) {
		t.Fatal("a broken hash Secret's leak record was believed")
	}
	if err := putHashSecret(x, leakedKey(hashSecret("u1", other, "", time.Time{}), replacement)); err != nil {
		t.Fatal(err)
	}
	x.DeleteHashSecret("apikey-u1")
	if isLeaked(x, replacement) {
		t.Fatal("a deleted hash Secret's leak record stayed")
	}
}

func TestSelector(t *testing.T) {
	x := New()
	err := putAPIKey(x, apiKey("u1", func(k *switchboardv1alpha1.APIKey) {
		k.Spec.ConnectionSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}
	}))
	if err == nil {
		t.Fatal("an invalid selector was accepted silently")
	}
	if err := putHashSecret(x, hashSecret("u1", mustKey(t), "", time.Time{})); err != nil {
		t.Fatal(err)
	}
	for _, k := range x.Keys() {
		if k.Selector == nil || !k.Selector.Empty() && k.Selector.Matches(nil) {
			t.Error("an invalid selector must match nothing")
		}
		if k.SelectorKey == "" {
			t.Error(`an invalid selector has the SelectorKey of "no selector", so it would share a list of everything`)
		}
	}
	if err := putAPIKey(x, apiKey("u2", func(k *switchboardv1alpha1.APIKey) { k.Spec.ConnectionSelector = &metav1.LabelSelector{} })); err != nil {
		t.Fatal(err)
	}
	for _, k := range x.Keys() {
		if k.UID == "u2" && k.Selector != nil {
			t.Error("an empty selector must mean every Connection (nil)")
		}
	}
}

func TestUsage(t *testing.T) {
	x := New()
	if err := putAPIKey(x, apiKey("u1", nil)); err != nil {
		t.Fatal(err)
	}
	u := x.Keys()[0].Usage()
	u.Touch(now)
	u.Touch(now.Add(500 * time.Millisecond)) // within a second: not stored
	if !u.LastUsed().Equal(now) {
		t.Errorf("LastUsed = %v, want %v", u.LastUsed(), now)
	}
	// An update of the APIKey keeps its usage record.
	if err := putAPIKey(x, apiKey("u1", func(k *switchboardv1alpha1.APIKey) { k.Status.KeyHint = "h" })); err != nil {
		t.Fatal(err)
	}
	if x.Keys()[0].Usage() != u {
		t.Error("an update lost the usage record")
	}
	u.MarkWritten(now, now.Add(time.Second))
	if !u.LastWritten().Equal(now) || !u.WrittenAt().Equal(now.Add(time.Second)) {
		t.Error("MarkWritten did not record")
	}
}

// benchIndex holds n keys and returns one valid key.
func benchIndex(b *testing.B, n int) (*Index, string) {
	x := New()
	var key string
	for i := range n {
		key = mustKey(b)
		uid := types.UID(fmt.Sprintf("uid-%d", i))
		if err := putAPIKey(x, apiKey(uid, nil)); err != nil {
			b.Fatal(err)
		}
		if err := putHashSecret(x, hashSecret(uid, key, "", time.Time{})); err != nil {
			b.Fatal(err)
		}
	}
	return x, key
}

func BenchmarkLookup(b *testing.B) {
	x, key := benchIndex(b, 10000)
	h := apikey.Sum(key)
	b.ReportAllocs()
	for b.Loop() {
		if _, r := x.Lookup(&h, now); r != OK {
			b.Fatal(r)
		}
	}
}

func sumOf(key string) apikey.Hash { return apikey.Sum(key) }

// TestLookupBound: the binding recorded in a hash Secret comes with its hashes, current and
// previous; a hash Secret without one is a bearer key's; one whose record does not parse
// authenticates nothing.
func TestLookupBound(t *testing.T) {
	current, previous := mustKey(t), mustKey(t)
	x := New()
	if err := putAPIKey(x, apiKey("u1", nil)); err != nil {
		t.Fatal(err)
	}
	s := hashSecret("u1", current, previous, now.Add(time.Hour))
	s.Data[keysecret.DataBinding] = keysecret.Binding{Mode: switchboardv1alpha1.BindingEnforce, ServiceAccounts: []string{"web"},
		SPIFFEIDs: []string{"spiffe://cluster.local/ns/tenant/sa/mesh"}, PublicKeys: []string{strings.Repeat("A", 43)}}.Encode()
	if err := putHashSecret(x, s); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{current, previous} {
		h := apikey.Sum(key)
		_, res, _, b := x.LookupBound(&h, now)
		if res != OK || b == nil || !b.Enforce || !b.AllowsServiceAccount("web") || b.AllowsServiceAccount("api") ||
			!b.AllowsSPIFFEID("spiffe://cluster.local/ns/tenant/sa/mesh") || len(b.PublicKeys) != 1 {
			t.Errorf("lookup: %v, binding %+v", res, b)
		}
	}
	delete(s.Data, keysecret.DataBinding)
	if err := putHashSecret(x, s); err != nil {
		t.Fatal(err)
	}
	h := apikey.Sum(current)
	if _, res, _, b := x.LookupBound(&h, now); res != OK || b != nil {
		t.Errorf("without a record: %v, binding %+v", res, b)
	}
	s.Data[keysecret.DataBinding] = []byte(`{"mode":"Sometimes"}`)
	if err := putHashSecret(x, s); err == nil {
		t.Error("a record that does not parse was taken")
	}
	if res := lookup(x, current, now); res != Unknown {
		t.Errorf("a key whose binding record does not parse: %v, want unknown", res)
	}
}
