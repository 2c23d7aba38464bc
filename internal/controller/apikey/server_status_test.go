//go:build !unit

package apikey_test

// What the server's identity can do to an APIKey's status (issue 18, item 3): it may patch
// apikeys/status, to write lastUsedAt. With one patch it used to revoke any key for good
// (status.revokedAt) and to keep a plaintext reveal Secret alive (status.revealExpiresAt). The
// shipped admission policy now refuses every change but lastUsedAt, and without it the operator
// still decides only from the spec and the hash Secret's record.

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/testenv/controllertest"
)

// shippedServer is the ServiceAccount config/rbac/server_status_policy.yaml names.
const shippedServer = "system:serviceaccount:switchboard-system:switchboard-server"

// shippedPolicy reads a file of config/rbac that holds an admission policy and its binding.
func shippedPolicy(t *testing.T, file string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	policy, binding, err := controllertest.ReadShippedPolicy(file)
	if err != nil {
		t.Fatal(err)
	}
	return policy, binding
}

// serverStatusPolicy reads config/rbac/server_status_policy.yaml.
func serverStatusPolicy(t *testing.T) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	return shippedPolicy(t, "server_status_policy.yaml")
}

// installServerStatusPolicy installs the shipped policy for the server ServiceAccount sa of
// namespace ns instead of switchboard-system's, under names of its own, and waits until the API
// server enforces it.
func installServerStatusPolicy(t *testing.T, ns, sa string, key *switchboardv1alpha1.APIKey, as client.Client) {
	t.Helper()
	policy, binding := serverStatusPolicy(t)
	user := "system:serviceaccount:" + ns + ":" + sa
	found := false
	for i, c := range policy.Spec.MatchConditions {
		if strings.Contains(c.Expression, "'"+shippedServer+"'") {
			policy.Spec.MatchConditions[i].Expression = strings.ReplaceAll(c.Expression, shippedServer, user)
			found = true
		}
	}
	if !found {
		t.Fatalf("the shipped policy does not name %s in a match condition", shippedServer)
	}
	policy.Name += "-" + ns
	binding.Name += "-" + ns
	binding.Spec.PolicyName = policy.Name
	for _, obj := range []client.Object{policy, binding} {
		if err := env.Client.Create(testCtx(t), obj); err != nil {
			t.Fatalf("installing %s: %v", obj.GetName(), err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(testCtx(t), obj) })
	}
	// The API server compiles policies in the background: a refused probe says it is in force.
	eventually(t, "the admission policy to be enforced", func() error {
		err := as.Status().Patch(testCtx(t), key.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"status":{"keyHint":"probe"}}`)))
		if err == nil {
			return errors.New("a keyHint patch went through")
		}
		if !strings.Contains(err.Error(), "may change status.lastUsedAt, status.previousKeyUse, status.credits and status.binding of an APIKey and nothing else") {
			t.Fatalf("refused for another reason: %v", err)
		}
		return nil
	})
}

// TestServerCannotRevokeOrMoveTheReveal performs item 3 of issue 18 as the server's
// ServiceAccount under its shipped roles and the shipped admission policy: the patch that
// revoked any key, the one that kept a reveal alive, and a rewrite of the conditions are all
// refused; lastUsedAt, the one field the server writes, still goes through; the key keeps working.
func TestServerCannotRevokeOrMoveTheReveal(t *testing.T) {
	w := newTenantWorld(t)
	server := actAs(t, w.ns, "switchboard-server", "switchboard-server", "")
	key := w.waitIssued(w.createAsTenant("svc", nil), 1)
	installServerStatusPolicy(t, w.ns, "switchboard-server", key, server.client)

	now := w.op.Clock.Now().UTC()
	for _, patch := range []string{
		fmt.Sprintf(`{"status":{"revokedAt":%q}}`, now.Format(time.RFC3339)),
		fmt.Sprintf(`{"status":{"revealExpiresAt":%q}}`, now.AddDate(1, 0, 0).Format(time.RFC3339)),
		`{"status":{"revealSecretName":"db-password"}}`,
		`{"status":{"conditions":[]}}`,
		`{"status":null}`,
	} {
		err := server.client.Status().Patch(testCtx(t), w.get(key), client.RawPatch(types.MergePatchType, []byte(patch)))
		if err == nil || !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
			t.Fatalf("the server's identity patched %s: %v", patch, err)
		}
	}
	lastUsed := now.Add(-time.Minute).Format(time.RFC3339)
	if err := server.client.Status().Patch(testCtx(t), w.get(key), client.RawPatch(types.MergePatchType,
		[]byte(fmt.Sprintf(`{"status":{"lastUsedAt":%q}}`, lastUsed)))); err != nil {
		t.Fatalf("the server's identity cannot write lastUsedAt: %v", err)
	}
	got := w.get(key)
	if got.Status.LastUsedAt == nil || got.Status.LastUsedAt.UTC().Format(time.RFC3339) != lastUsed {
		t.Fatalf("lastUsedAt %v, want %s", got.Status.LastUsedAt, lastUsed)
	}
	// The credit balance it counts goes through with it (the lastused writer's one patch).
	if err := server.client.Status().Patch(testCtx(t), w.get(key), client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(
		`{"status":{"lastUsedAt":%q,"credits":{"period":"m1","periodEnd":%q,"used":63,"remaining":37,"observedAt":%q}}}`,
		lastUsed, now.Format(time.RFC3339), lastUsed)))); err != nil {
		t.Fatalf("the server's identity cannot write status.credits: %v", err)
	}
	if c := w.get(key).Status.Credits; c == nil || c.Used != 63 || c.Remaining != 37 {
		t.Fatalf("status.credits %+v, want 63 used and 37 remaining", c)
	}
	// Moving it back would make the key look unused (spec.revokeWhenUnusedFor revokes such
	// keys): refused, as is removing it.
	for _, patch := range []string{
		fmt.Sprintf(`{"status":{"lastUsedAt":%q}}`, now.AddDate(0, -6, 0).Format(time.RFC3339)),
		`{"status":{"lastUsedAt":null}}`,
	} {
		err := server.client.Status().Patch(testCtx(t), w.get(key), client.RawPatch(types.MergePatchType, []byte(patch)))
		if err == nil || !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
			t.Fatalf("the server's identity patched %s: %v", patch, err)
		}
	}
	// The old key's record of use (spec.graceEndsWhenUnusedFor) goes through, forward only: a
	// later use or a newer generation; an earlier use of the same generation, an older
	// generation and removing it are refused.
	use := func(gen int64, at time.Time) string {
		return fmt.Sprintf(`{"status":{"previousKeyUse":{"keyGeneration":%d,"lastUsedAt":%q}}}`, gen, at.Format(time.RFC3339))
	}
	for _, patch := range []string{use(1, now.Add(-time.Minute)), use(1, now), use(2, now.Add(-time.Hour))} {
		if err := server.client.Status().Patch(testCtx(t), w.get(key), client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatalf("the server's identity cannot write %s: %v", patch, err)
		}
	}
	for _, patch := range []string{use(2, now.Add(-2*time.Hour)), use(1, now), `{"status":{"previousKeyUse":null}}`} {
		err := server.client.Status().Patch(testCtx(t), w.get(key), client.RawPatch(types.MergePatchType, []byte(patch)))
		if err == nil || !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
			t.Fatalf("the server's identity patched %s: %v", patch, err)
		}
	}
	if got.Status.RevokedAt != nil || got.Status.RevealExpiresAt == nil || !got.Status.RevealExpiresAt.Equal(key.Status.RevealExpiresAt) {
		t.Fatalf("the status changed: revokedAt %v, revealExpiresAt %v", got.Status.RevokedAt, got.Status.RevealExpiresAt)
	}
	if _, err := w.hashSecret(key); err != nil {
		t.Fatalf("the key's hash is gone: %v", err)
	}
}

// TestServerCannotRevokeOrExtendWithoutThePolicy: where the admission policy is not installed,
// the server's identity can still write any status field, but neither forgery decides anything.
// status.revokedAt on a key that is not revoked is refused by the APIKey's own schema (before
// issue 18 the operator deleted the hash, and the set-once rule kept the key revoked for good);
// a revealExpiresAt a year away is put back to the deadline the hash Secret records, and the
// reveal Secret is deleted at that deadline (before, the plaintext stayed for the year).
func TestServerCannotRevokeOrExtendWithoutThePolicy(t *testing.T) {
	w := newTenantWorld(t)
	server := actAs(t, w.ns, "switchboard-server", "switchboard-server", "")
	key := w.waitIssued(w.createAsTenant("svc", nil), 1)
	recorded := key.Status.RevealExpiresAt.DeepCopy()

	now := w.op.Clock.Now().UTC()
	err := server.client.Status().Patch(testCtx(t), w.get(key), client.RawPatch(types.MergePatchType,
		[]byte(fmt.Sprintf(`{"status":{"revokedAt":%q}}`, now.Format(time.RFC3339)))))
	if err == nil || !strings.Contains(err.Error(), "status.revokedAt can be set only on a revoked key") {
		t.Fatalf("the server's identity revoked a key in status: %v", err)
	}

	later := now.AddDate(1, 0, 0).Format(time.RFC3339)
	if err := server.client.Status().Patch(testCtx(t), w.get(key), client.RawPatch(types.MergePatchType,
		[]byte(fmt.Sprintf(`{"status":{"revealExpiresAt":%q}}`, later)))); err != nil {
		t.Fatalf("without the policy the server's identity may patch the status: %v", err)
	}
	w.waitFor(key, "the recorded reveal deadline to be put back", func(k *switchboardv1alpha1.APIKey) error {
		if !k.Status.RevealExpiresAt.Equal(recorded) {
			return fmt.Errorf("revealExpiresAt %v, want the recorded %v", k.Status.RevealExpiresAt, recorded)
		}
		return nil
	})
	w.op.Clock.Step(revealTTL + time.Second)
	poke(t, key)
	w.waitFor(key, "the reveal to end at its recorded deadline", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionRevealed, metav1.ConditionFalse, switchboardv1alpha1.ReasonRevealExpired)
	})
	if _, err := w.secret(keysecret.RevealName("svc", 1)); !apierrors.IsNotFound(err) {
		t.Fatalf("the reveal Secret outlived its recorded deadline (err %v)", err)
	}
	if _, err := w.hashSecret(key); err != nil {
		t.Fatalf("the key's hash is gone: %v", err)
	}
}

// TestServerStatusPolicyNamesEveryField: the shipped policy compares every field of
// APIKeyStatus but lastUsedAt, previousKeyUse, credits and binding, so a field added to the type cannot be written by the server
// until someone decides it may.
func TestServerStatusPolicyNamesEveryField(t *testing.T) {
	policy, _ := serverStatusPolicy(t)
	if len(policy.Spec.Validations) != 3 {
		t.Fatalf("%d validations, want 3: every field but lastUsedAt and previousKeyUse kept, those two only forward", len(policy.Spec.Validations))
	}
	if forward := policy.Spec.Validations[1].Expression; !strings.Contains(forward, "object.status.lastUsedAt >= oldObject.status.lastUsedAt") {
		t.Errorf("the second validation does not keep lastUsedAt moving forward: %s", forward)
	}
	if forward := policy.Spec.Validations[2].Expression; !strings.Contains(forward, "object.status.previousKeyUse.lastUsedAt >= oldObject.status.previousKeyUse.lastUsedAt") {
		t.Errorf("the third validation does not keep previousKeyUse moving forward: %s", forward)
	}
	expr := policy.Spec.Validations[0].Expression
	typ := reflect.TypeFor[switchboardv1alpha1.APIKeyStatus]()
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		clause := fmt.Sprintf("object.?status.?%s == oldObject.?status.?%s", name, name)
		if name == "lastUsedAt" || name == "previousKeyUse" || name == "credits" || name == "binding" {
			if strings.Contains(expr, "."+name) {
				t.Errorf("the policy constrains %s, which the server writes", name)
			}
			continue
		}
		if !strings.Contains(expr, clause) {
			t.Errorf("the policy does not keep status.%s: want %q in its expression", name, clause)
		}
	}
	if policy.Spec.FailurePolicy == nil || *policy.Spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Error("the policy must fail closed (failurePolicy: Fail)")
	}
}
