//go:build !unit

package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// getAPIKey reads an APIKey as the admin.
func getAPIKey(t *testing.T, ns, name string) *switchboardv1alpha1.APIKey {
	t.Helper()
	var k switchboardv1alpha1.APIKey
	if err := env.Client.Get(testContext(t), types.NamespacedName{Namespace: ns, Name: name}, &k); err != nil {
		t.Fatalf("reading APIKey %s/%s: %v", ns, name, err)
	}
	return &k
}

// hashSecret reads the hash Secret the operator keeps for an APIKey.
func hashSecret(t *testing.T, k *switchboardv1alpha1.APIKey) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	key := types.NamespacedName{Namespace: switchboardv1alpha1.DefaultSystemNamespace, Name: "apikey-" + string(k.UID)}
	if err := env.Client.Get(testContext(t), key, &s); err != nil {
		t.Fatalf("reading the hash Secret of %s: %v", k.Name, err)
	}
	return &s
}

// checkKeyMatchesHash asserts the printed key is well formed and is the one the operator hashed.
func checkKeyMatchesHash(t *testing.T, ns, name, key string) {
	t.Helper()
	if err := apikey.Parse(key, apikey.DefaultPrefix); err != nil {
		t.Fatalf("the printed key is not a valid key: %v", err)
	}
	hash := hashSecret(t, getAPIKey(t, ns, name))
	if got, want := string(hash.Data[keysecret.DataHash]), apikey.Sum(key).String(); got != want {
		t.Fatalf("hash Secret sha256 = %s, want apikey.Sum(printed key) = %s", got, want)
	}
}

func TestKeyCreatePrintsTheKeyOnce(t *testing.T) {
	ns := env.Namespace(t, "create")
	r := admin(t, ns, "key", "create", "ci", "--description", "CI pipeline", "--expires-in", "720h", "--timeout", "30s")
	mustSucceed(t, r)

	key := strings.TrimSuffix(r.stdout, "\n")
	if strings.ContainsAny(key, " \n") || key == "" {
		t.Fatalf("stdout must be the key alone, got %q", r.stdout)
	}
	checkKeyMatchesHash(t, ns, "ci", key)
	eventuallyStatus(t, key, http.StatusOK)
	if strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "will not be shown again") {
		t.Fatalf("want a one-line warning on stderr, got %q", r.stderr)
	}
	if strings.Contains(r.stderr, key) {
		t.Fatal("the key leaked to stderr")
	}
	k := getAPIKey(t, ns, "ci")
	if k.Spec.Description != "CI pipeline" || k.Spec.ExpiresAt == nil || time.Until(k.Spec.ExpiresAt.Time) < 719*time.Hour {
		t.Fatalf("spec not as asked: %+v", k.Spec)
	}
	if !strings.Contains(r.stderr, k.Status.KeyHint) {
		t.Fatalf("the warning should name the hint %q: %q", k.Status.KeyHint, r.stderr)
	}

	// The reveal Secret is gone: a second claim, by anyone, fails clearly.
	stale := k.DeepCopy()
	stale.Status.RevealSecretName = "ci-key-1"
	if _, err := keyclient.Claim(testContext(t), env.Client, stale); !errors.Is(err, keyclient.ErrAlreadyClaimed) {
		t.Fatalf("second claim: err = %v, want ErrAlreadyClaimed", err)
	}
	again := admin(t, ns, "key", "reveal", "ci", "--timeout", "10s")
	mustFail(t, again, "already claimed by someone else")
	if again.stdout != "" {
		t.Fatalf("a failed reveal printed %q", again.stdout)
	}

	// The same name twice is refused without touching the first key.
	dup := admin(t, ns, "key", "create", "ci", "--timeout", "10s")
	mustFail(t, dup, `APIKey "ci" already exists`)
	if getAPIKey(t, ns, "ci").UID != k.UID {
		t.Fatal("a refused duplicate create replaced the APIKey")
	}
}

func TestKeyCreateJSON(t *testing.T) {
	ns := env.Namespace(t, "json")
	r := admin(t, ns, "key", "create", "bot", "--expires-at", "2031-01-02T03:04:05Z", "-o", "json", "--timeout", "30s")
	mustSucceed(t, r)
	if strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("want one JSON line on stdout, got %q", r.stdout)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
		t.Fatalf("stdout is not JSON: %v: %q", err, r.stdout)
	}
	if len(raw) != 5 {
		t.Fatalf("want exactly name, namespace, key, hint, expires_at; got %v", raw)
	}
	var got keyResult
	dec := json.NewDecoder(bytes.NewReader([]byte(r.stdout)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.Name != "bot" || got.Namespace != ns || got.ExpiresAt == nil || *got.ExpiresAt != "2031-01-02T03:04:05Z" {
		t.Fatalf("unexpected JSON: %+v", got)
	}
	if got.Hint != apikey.Hint(got.Key) || got.Hint != getAPIKey(t, ns, "bot").Status.KeyHint {
		t.Fatalf("hint %q does not match the key or the status", got.Hint)
	}
	checkKeyMatchesHash(t, ns, "bot", got.Key)

	// Without an expiry, expires_at is null rather than missing.
	r = admin(t, ns, "key", "create", "forever", "-o", "json", "--timeout", "30s")
	mustSucceed(t, r)
	if !strings.Contains(r.stdout, `"expires_at":null`) {
		t.Fatalf("want expires_at null, got %q", r.stdout)
	}
}

func TestKeyCreateIntoSecret(t *testing.T) {
	ns := env.Namespace(t, "deliver")
	r := admin(t, ns, "key", "create", "worker", "--secret-name", "worker-key", "--selector", "team=data", "--timeout", "30s")
	mustSucceed(t, r)
	if !strings.Contains(r.stdout, `Secret "worker-key"`) {
		t.Fatalf("stdout should say where the key is: %q", r.stdout)
	}
	var s corev1.Secret
	if err := env.Client.Get(testContext(t), types.NamespacedName{Namespace: ns, Name: "worker-key"}, &s); err != nil {
		t.Fatal(err)
	}
	key := string(s.Data[keysecret.DataKey])
	if strings.Contains(r.stdout+r.stderr, key) {
		t.Fatal("a delivered key was printed")
	}
	checkKeyMatchesHash(t, ns, "worker", key)
	if sel := getAPIKey(t, ns, "worker").Spec.ConnectionSelector; sel == nil || sel.MatchLabels["team"] != "data" {
		t.Fatalf("selector not set: %+v", sel)
	}
}

func TestKeyRevoke(t *testing.T) {
	ns := env.Namespace(t, "revoke")
	created := admin(t, ns, "key", "create", "old", "--timeout", "30s")
	mustSucceed(t, created)
	oldKey := strings.TrimSpace(created.stdout)
	eventuallyStatus(t, oldKey, http.StatusOK)
	uid := getAPIKey(t, ns, "old").UID

	for _, answer := range []string{"n\n", "", "maybe\n"} {
		r := run(t, env.Config, ns, answer, "key", "revoke", "old")
		mustFail(t, r, "was not revoked")
		if getAPIKey(t, ns, "old").Spec.Revoked {
			t.Fatalf("answer %q revoked the key", answer)
		}
	}
	if r := run(t, env.Config, ns, "n\n", "key", "revoke", "old"); !strings.Contains(r.stderr, "[y/N]") {
		t.Fatalf("no confirmation prompt: %q", r.stderr)
	}

	r := run(t, env.Config, ns, "y\n", "key", "revoke", "old")
	mustSucceed(t, r)
	if !getAPIKey(t, ns, "old").Spec.Revoked {
		t.Fatal("answering y did not revoke the key")
	}
	// The operator drops the hash: the key no longer authenticates.
	hashName := types.NamespacedName{Namespace: switchboardv1alpha1.DefaultSystemNamespace, Name: "apikey-" + string(uid)}
	err := wait.PollUntilContextTimeout(testContext(t), 100*time.Millisecond, 30*time.Second, true, func(ctx2 context.Context) (bool, error) {
		return apierrors.IsNotFound(env.Client.Get(ctx2, hashName, &corev1.Secret{})), nil
	})
	if err != nil {
		t.Fatalf("the hash Secret of a revoked key stayed: %v", err)
	}
	eventuallyStatus(t, oldKey, http.StatusUnauthorized)

	mustSucceed(t, admin(t, ns, "key", "create", "other", "--timeout", "30s"))
	mustSucceed(t, admin(t, ns, "key", "revoke", "other", "--yes"))
	if !getAPIKey(t, ns, "other").Spec.Revoked {
		t.Fatal("--yes did not revoke the key")
	}
	r = admin(t, ns, "key", "rotate", "other", "--timeout", "10s")
	mustFail(t, r, "revoked")

	mustFail(t, admin(t, ns, "key", "revoke", "missing", "--yes"), `APIKey "missing" not found in namespace "`+ns+`"`)
	mustFail(t, admin(t, ns, "key", "rotate", "missing"), `APIKey "missing" not found`)
}

func TestKeyRotateWithGrace(t *testing.T) {
	ns := env.Namespace(t, "rotate")
	first := admin(t, ns, "key", "create", "svc", "-o", "json", "--timeout", "30s")
	mustSucceed(t, first)
	var old keyResult
	if err := json.Unmarshal([]byte(first.stdout), &old); err != nil {
		t.Fatal(err)
	}

	before := time.Now()
	r := admin(t, ns, "key", "rotate", "svc", "--grace", "1h", "--timeout", "30s")
	mustSucceed(t, r)
	key := strings.TrimSuffix(r.stdout, "\n")
	if key == old.Key {
		t.Fatal("rotate printed the old key")
	}
	checkKeyMatchesHash(t, ns, "svc", key)
	if !strings.Contains(r.stderr, "will not be shown again") || !strings.Contains(r.stderr, "previous key keeps working until") ||
		strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("want a one-line warning naming the grace, got %q", r.stderr)
	}

	k := getAPIKey(t, ns, "svc")
	if k.Status.KeyGeneration != 2 || k.Status.LastHandledRotationAt != k.Spec.Rotation.RequestedAt {
		t.Fatalf("rotation not handled: %+v", k.Status)
	}
	if k.Spec.Rotation.GracePeriod.Duration != time.Hour {
		t.Fatalf("grace period = %s, want 1h", k.Spec.Rotation.GracePeriod.Duration)
	}
	hash := hashSecret(t, k)
	if got := string(hash.Data[keysecret.DataPreviousHash]); got != apikey.Sum(old.Key).String() {
		t.Fatalf("previous.sha256 = %q, want the hash of the old key", got)
	}
	validUntil, err := time.Parse(time.RFC3339, string(hash.Data[keysecret.DataPreviousValidUntil]))
	if err != nil {
		t.Fatal(err)
	}
	eventuallyStatus(t, key, http.StatusOK)
	if got := apiStatus(t, old.Key); got != http.StatusOK {
		t.Fatalf("the previous key, within its grace period, got %d", got)
	}
	if validUntil.Before(before.Add(time.Hour-time.Minute)) || validUntil.After(time.Now().Add(time.Hour+time.Minute)) {
		t.Fatalf("previous key valid until %s, want about an hour from now", validUntil)
	}

	// -o json as for create; no grace: the previous key is dropped at once.
	r = admin(t, ns, "key", "rotate", "svc", "-o", "json", "--timeout", "30s")
	mustSucceed(t, r)
	var third keyResult
	if err := json.Unmarshal([]byte(r.stdout), &third); err != nil || third.Key == "" || third.Key == key || third.Name != "svc" {
		t.Fatalf("rotate -o json: %v %q", err, r.stdout)
	}
	checkKeyMatchesHash(t, ns, "svc", third.Key)
	if _, ok := hashSecret(t, getAPIKey(t, ns, "svc")).Data[keysecret.DataPreviousHash]; ok {
		t.Fatal("a rotation without grace kept the previous key")
	}
	eventuallyStatus(t, third.Key, http.StatusOK)
	eventuallyStatus(t, key, http.StatusUnauthorized)
	eventuallyStatus(t, old.Key, http.StatusUnauthorized)
}
