//go:build !unit

package server

import (
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
	"github.com/switchboard-dev/switchboard/internal/testenv/fixture"
)

// TestOnlySwitchboardsHashSecretsAuthenticate: the server believes a hash only from a Secret
// switchboard wrote, which is one of the system namespace, of the hash type, named for the UID it
// is labelled with (keysecret.ParseHash). A tenant who plants a look-alike in its own namespace,
// and a Secret of another type in the system namespace, authenticate nothing.
func TestOnlySwitchboardsHashSecretsAuthenticate(t *testing.T) {
	ns := env.Namespace(t, "planted")
	genuine := newKey(t, ns, "genuine", switchboardv1alpha1.APIKeySpec{})
	chosen, err := apikey.Generate(apikey.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	// A tenant's copy of a hash Secret in its own namespace, with every label and the type.
	planted := fixture.HashSecret(systemNamespace, genuine.APIKey, chosen, "", metav1.Now().Time)
	planted.Namespace = ns
	if err := env.Client.Create(ctx(t), planted); err != nil {
		t.Fatal(err)
	}
	// In the system namespace but Opaque: not a hash Secret, whatever its labels say.
	other := newKey(t, ns, "other", switchboardv1alpha1.APIKeySpec{})
	opaque, err := apikey.Generate(apikey.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	wrongType := fixture.HashSecret(systemNamespace, other.APIKey, opaque, "", metav1.Now().Time)
	wrongType.Name = keysecret.HashName(other.APIKey.UID) + "-copy"
	wrongType.Type = corev1.SecretTypeOpaque
	if err := env.Client.Create(ctx(t), wrongType); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, nil, noFailureLimit(nil), Deps{}, true)
	if resp := s.get(t, "/v1/connections", genuine.Key); resp.Status != http.StatusOK {
		t.Fatalf("the genuine key: %d", resp.Status)
	}
	for name, key := range map[string]string{"planted in the tenant namespace": chosen, "Opaque in the system namespace": opaque} {
		if resp := s.get(t, "/v1/connections", key); resp.Status != http.StatusUnauthorized || resp.errorCode(t) != apicode.APIKeyInvalid {
			t.Errorf("a key hashed by a Secret %s: %d %s, want 401 API_KEY_INVALID", name, resp.Status, resp.Body)
		}
	}
}

// TestDuplicateHashAuthenticatesNobody: when two hash Secrets hold the same hash (a bug, or a
// hand edit of the system namespace), the key it belongs to cannot be told, so it authenticates
// nobody, the gauge says so, and it works again once one Secret holds it.
func TestDuplicateHashAuthenticatesNobody(t *testing.T) {
	ns := env.Namespace(t, "duplicate")
	newConnection(t, ns, "one", "conn_dup1", nil)
	a := newKey(t, ns, "a", switchboardv1alpha1.APIKeySpec{})
	b := newKey(t, ns, "b", switchboardv1alpha1.APIKeySpec{})
	s := startServer(t, nil, noFailureLimit(nil), Deps{}, true)
	if resp := s.get(t, "/v1/connections", a.Key); resp.Status != http.StatusOK {
		t.Fatalf("before: %d", resp.Status)
	}
	refusedAsDuplicate := func() float64 {
		return metricValue(t, "switchboard_api_auth_total", "code", apicode.APIKeyInvalid, "reason", keyindex.Duplicate.String())
	}
	before := refusedAsDuplicate()
	// b's hash Secret now holds a's hash too.
	setHashSecret(t, fixture.HashSecret(systemNamespace, b.APIKey, a.Key, "", metav1.Now().Time))
	eventually(t, "a's key refused while two Secrets hold its hash", func() bool {
		return s.get(t, "/v1/connections", a.Key).Status == http.StatusUnauthorized
	})
	// The gauge is set by the informer's handler just after the index takes the Secret, which a
	// request can already see: it follows, within moments.
	eventually(t, "switchboard_api_duplicate_key_hashes at 1", func() bool { return metricValue(t, "switchboard_api_duplicate_key_hashes") == 1 })
	if refusedAsDuplicate() <= before {
		t.Error("the refusal was not counted with reason duplicate")
	}
	if resp := s.get(t, "/v1/connections", b.Key); resp.Status != http.StatusUnauthorized {
		t.Errorf("b's old key, no longer in its Secret: %d", resp.Status)
	}
	setHashSecret(t, fixture.HashSecret(systemNamespace, b.APIKey, b.Key, "", metav1.Now().Time))
	eventually(t, "a's key served once one Secret holds it", func() bool {
		return s.get(t, "/v1/connections", a.Key).Status == http.StatusOK
	})
	eventually(t, "switchboard_api_duplicate_key_hashes back at 0 after the fix", func() bool { return metricValue(t, "switchboard_api_duplicate_key_hashes") == 0 })
	if resp := s.get(t, "/v1/connections", b.Key); resp.Status != http.StatusOK {
		t.Errorf("b's key after the fix: %d", resp.Status)
	}
}
