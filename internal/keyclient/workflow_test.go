//go:build !unit

package keyclient_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/keyclient/keyclienttest"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

const wait = 30 * time.Second

func newKey(ns, name string) *switchboardv1alpha1.APIKey {
	return &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// newThief is a second identity, who may get and delete the namespace's Secrets, armed to
// steal budget reveal Secrets.
func newThief(t *testing.T, ns string, budget int) *keyclienttest.Thief {
	t.Helper()
	th := keyclienttest.NewThief(identity(t, ns, "thief", thiefRules...))
	th.Arm(budget)
	t.Cleanup(func() {
		if err := th.Err(); err != nil {
			t.Error(err)
		}
	})
	return th
}

// requireGone waits until the APIKey is deleted (the operator removes its finalizer once the
// hash Secret is gone).
func requireGone(t *testing.T, ns, name string) {
	t.Helper()
	testenv.Eventually(t, wait, "APIKey "+name+" deleted", func() error {
		err := env.Client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: name}, &switchboardv1alpha1.APIKey{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return errors.New("still there")
	})
}

func TestCreateHandsOverTheKeyOnce(t *testing.T) {
	ns := env.Namespace(t, "create")
	owner := keyclient.New(identity(t, ns, "owner", ownerRules...), keyclient.Options{})
	issued, err := owner.Create(testContext(t), newKey(ns, "ci"), wait)
	if err != nil {
		t.Fatal(err)
	}
	if err := apikey.Parse(issued.Revealed.Key, apikey.DefaultPrefix); err != nil || issued.Delivered() {
		t.Fatalf("handed over %q (delivered %v): %v", apikey.Hint(issued.Revealed.Key), issued.Delivered(), err)
	}
	if issued.Hint() != apikey.Hint(issued.Revealed.Key) || issued.Revealed.Generation != 1 || len(issued.Stolen) != 0 {
		t.Fatalf("issued = hint %s, generation %d, stolen %v", issued.Hint(), issued.Revealed.Generation, issued.Stolen)
	}
	requireV1(t, "the created key", issued.Revealed.Key, http.StatusOK)
	// Exactly one claimer: the reveal Secret is gone, a second claim fails.
	if _, err := owner.Claim(testContext(t), issued.APIKey); !errors.Is(err, keyclient.ErrAlreadyClaimed) {
		t.Fatalf("second claim: %v, want ErrAlreadyClaimed", err)
	}
	if _, err := owner.Reveal(testContext(t), ns, "ci", wait); !errors.Is(err, keyclient.ErrAlreadyClaimed) {
		t.Fatalf("reveal of a claimed key: %v, want ErrAlreadyClaimed", err)
	}
}

func TestCreateChecksEveryPermissionFirst(t *testing.T) {
	ns := env.Namespace(t, "perms")
	// May do everything with APIKeys and read Secrets, not delete them: could never claim a key.
	c := identity(t, ns, "no-delete", ownerRules[0], rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
	_, err := keyclient.New(c, keyclient.Options{}).Create(testContext(t), newKey(ns, "nope"), wait)
	var forbidden *keyclient.ForbiddenError
	if !errors.As(err, &forbidden) || keyclient.JoinPermissions(forbidden.Missing) != "delete secrets" ||
		forbidden.User != "system:serviceaccount:"+ns+":no-delete" || forbidden.Namespace != ns {
		t.Fatalf("create without delete secrets: %v", err)
	}
	// Checked before anything changed: no APIKey whose key its creator could not claim.
	if err := env.Client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: "nope"}, &switchboardv1alpha1.APIKey{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused create left an APIKey: %v", err)
	}
	// A token the API server refuses is said so, not taken for a missing permission.
	stranger := keyclient.New(identity(t, ns, "gone", ownerRules...), keyclient.Options{})
	if err := env.Client.Delete(testContext(t), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone"}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the deleted ServiceAccount's token refused", func() error {
		_, err := stranger.Create(testContext(t), newKey(ns, "nope"), wait)
		if !apierrors.IsUnauthorized(err) {
			return fmt.Errorf("create: %w", err)
		}
		return nil
	})
}

// A key someone else claimed first does not outlive the create that made it: the APIKey is
// deleted again, and the stolen key stops working.
func TestCreateClaimLostDeletesTheAPIKey(t *testing.T) {
	ns := env.Namespace(t, "create-lost")
	th := newThief(t, ns, 1)
	owner := keyclient.New(th.Intercept(identity(t, ns, "owner", ownerRules...)), keyclient.Options{})
	_, err := owner.Create(testContext(t), newKey(ns, "ci"), wait)
	var abandoned *keyclient.AbandonedError
	var claimed *keyclient.ClaimedError
	if !errors.As(err, &abandoned) || abandoned.DeleteErr != nil || !errors.As(err, &claimed) || !errors.Is(err, keyclient.ErrAlreadyClaimed) {
		t.Fatalf("create whose key was stolen: %v", err)
	}
	if len(th.Keys()) != 1 || claimed.Hint != apikey.Hint(th.Keys()[0]) {
		t.Fatalf("the error names key %s, the thief holds %d keys", claimed.Hint, len(th.Keys()))
	}
	if !strings.Contains(err.Error(), "was deleted again") {
		t.Fatalf("message %q does not say the APIKey was deleted", err)
	}
	requireGone(t, ns, "ci")
	requireV1(t, "the stolen key", th.Keys()[0], http.StatusUnauthorized)
}

// Any other failure to hand the key over deletes the APIKey too: here the operator refuses to
// deliver into a Secret switchboard does not manage.
func TestCreateRefusedDeletesTheAPIKey(t *testing.T) {
	ns := env.Namespace(t, "create-refused")
	taken := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, StringData: map[string]string{"password": "x"}}
	if err := env.Client.Create(testContext(t), taken); err != nil {
		t.Fatal(err)
	}
	owner := keyclient.New(identity(t, ns, "owner", ownerRules...), keyclient.Options{})
	key := newKey(ns, "worker")
	key.Spec.SecretName = "db"
	_, err := owner.Create(testContext(t), key, wait)
	var abandoned *keyclient.AbandonedError
	var refused *keyclient.RefusedError
	if !errors.As(err, &abandoned) || !errors.As(err, &refused) || refused.State != keyclient.StateDeliveryConflict {
		t.Fatalf("create into a taken Secret: %v", err)
	}
	requireGone(t, ns, "worker")
	var still corev1.Secret
	if err := env.Client.Get(testContext(t), client.ObjectKeyFromObject(taken), &still); err != nil || string(still.Data["password"]) != "x" {
		t.Fatalf("the taken Secret was touched: %v", err)
	}
}

func TestRotateHandsOverWithGrace(t *testing.T) {
	ns := env.Namespace(t, "rotate")
	owner := keyclient.New(identity(t, ns, "owner", ownerRules...), keyclient.Options{})
	first, err := owner.Create(testContext(t), newKey(ns, "svc"), wait)
	if err != nil {
		t.Fatal(err)
	}
	req := keyclient.RotateRequest{RequestedAt: time.Now().UTC().Format(time.RFC3339Nano), Grace: time.Hour, Timeout: wait}
	second, err := owner.Rotate(testContext(t), ns, "svc", req)
	if err != nil {
		t.Fatal(err)
	}
	if second.Revealed.Key == first.Revealed.Key || second.Revealed.Generation != 2 || second.Replaced != first.Hint() || len(second.Stolen) != 0 {
		t.Fatalf("rotation handed over generation %d replacing %s, stolen %v", second.Revealed.Generation, second.Replaced, second.Stolen)
	}
	if until := second.PreviousValidUntil(time.Now()); until == nil || time.Until(*until) < 59*time.Minute {
		t.Fatalf("previous key valid until %v, want about an hour from now", until)
	}
	requireV1(t, "the new key", second.Revealed.Key, http.StatusOK)
	requireV1(t, "the previous key, in its grace period", first.Revealed.Key, http.StatusOK)
	// The same request again (a form posted twice) rotates nothing.
	if _, err := owner.Rotate(testContext(t), ns, "svc", req); !errors.Is(err, keyclient.ErrAlreadyRotated) {
		t.Fatalf("the same rotation again: %v, want ErrAlreadyRotated", err)
	}
	if _, _, err := owner.Revoke(testContext(t), ns, "svc", nil); err != nil {
		t.Fatal(err)
	}
	var refused *keyclient.RefusedError
	if _, err := owner.Rotate(testContext(t), ns, "svc", keyclient.RotateRequest{Timeout: wait}); !errors.As(err, &refused) || refused.State != keyclient.StateRevoked {
		t.Fatalf("rotating a revoked key: %v", err)
	}
}

// When someone else claims the key a rotation issued, the workflow rotates again at once with
// no grace: the stolen key stops, and so does the replaced key (only one previous key is kept).
func TestRotateClaimLostStopsTheStolenKey(t *testing.T) {
	ns := env.Namespace(t, "rotate-lost")
	th := newThief(t, ns, 0)
	owner := keyclient.New(th.Intercept(identity(t, ns, "owner", ownerRules...)), keyclient.Options{})
	first, err := owner.Create(testContext(t), newKey(ns, "svc"), wait)
	if err != nil {
		t.Fatal(err)
	}
	th.Arm(1)
	rotated, err := owner.Rotate(testContext(t), ns, "svc", keyclient.RotateRequest{Grace: time.Hour, Timeout: wait})
	if err != nil {
		t.Fatal(err)
	}
	if len(th.Keys()) != 1 || len(rotated.Stolen) != 1 || rotated.Stolen[0] != apikey.Hint(th.Keys()[0]) || rotated.Replaced != first.Hint() {
		t.Fatalf("stolen %v (thief holds %d keys), replaced %s", rotated.Stolen, len(th.Keys()), rotated.Replaced)
	}
	if rotated.Revealed.Generation != 3 || rotated.PreviousValidUntil(time.Now()) != nil {
		t.Fatalf("handed over generation %d, previous valid until %v; want generation 3 and no previous key", rotated.Revealed.Generation, rotated.PreviousValidUntil(time.Now()))
	}
	requireV1(t, "the key handed over", rotated.Revealed.Key, http.StatusOK)
	requireV1(t, "the stolen key", th.Keys()[0], http.StatusUnauthorized)
	requireV1(t, "the replaced key, whose grace the stolen key's stop ended", first.Revealed.Key, http.StatusUnauthorized)
}

func TestRotateClaimLostEveryTimeFails(t *testing.T) {
	ns := env.Namespace(t, "rotate-lost2")
	th := newThief(t, ns, 0)
	owner := keyclient.New(th.Intercept(identity(t, ns, "owner", ownerRules...)), keyclient.Options{})
	first, err := owner.Create(testContext(t), newKey(ns, "svc"), wait)
	if err != nil {
		t.Fatal(err)
	}
	th.Arm(100)
	_, err = owner.Rotate(testContext(t), ns, "svc", keyclient.RotateRequest{Grace: time.Hour, Timeout: wait})
	var lost *keyclient.ClaimLostError
	if !errors.As(err, &lost) || lost.StopErr != nil || len(lost.Stolen) != 2 || len(th.Keys()) != 2 || !errors.Is(err, keyclient.ErrAlreadyClaimed) {
		t.Fatalf("rotation stolen every time: %v (thief holds %d keys)", err, len(th.Keys()))
	}
	for i, key := range th.Keys() {
		if lost.Stolen[i] != apikey.Hint(key) {
			t.Fatalf("stolen hints %v do not name the thief's keys", lost.Stolen)
		}
		requireV1(t, "a stolen key", key, http.StatusUnauthorized)
	}
	requireV1(t, "the replaced key", first.Revealed.Key, http.StatusUnauthorized)
	// One more rotation stopped the last stolen key; its key waits, unseen, to be revealed.
	testenv.Eventually(t, wait, "a fourth key published", func() error {
		var k switchboardv1alpha1.APIKey
		if err := env.Client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: "svc"}, &k); err != nil {
			return err
		}
		if k.Status.KeyGeneration != 4 || keyclient.RevealStatus(&k) != keyclient.RevealClaimable {
			return fmt.Errorf("generation %d, reveal state %d", k.Status.KeyGeneration, keyclient.RevealStatus(&k))
		}
		return nil
	})
}

// Reveal hands over a key it did not issue: when someone else claimed it first, that is
// reported and nothing is stopped (the key may be a teammate's; rotating ends it).
func TestRevealClaimLostChangesNothing(t *testing.T) {
	ns := env.Namespace(t, "reveal-lost")
	if err := env.Client.Create(testContext(t), newKey(ns, "applied")); err != nil {
		t.Fatal(err)
	}
	th := newThief(t, ns, 1)
	owner := keyclient.New(th.Intercept(identity(t, ns, "owner", ownerRules...)), keyclient.Options{})
	_, err := owner.Reveal(testContext(t), ns, "applied", wait)
	var claimed *keyclient.ClaimedError
	if !errors.As(err, &claimed) || len(th.Keys()) != 1 || claimed.Hint != apikey.Hint(th.Keys()[0]) {
		t.Fatalf("reveal of a key claimed first by someone else: %v", err)
	}
	requireV1(t, "the key the other claimer holds", th.Keys()[0], http.StatusOK)
}

func TestRevokeChecksAsksThenRevokes(t *testing.T) {
	ns := env.Namespace(t, "revoke")
	owner := keyclient.New(identity(t, ns, "owner", ownerRules...), keyclient.Options{})
	issued, err := owner.Create(testContext(t), newKey(ns, "old"), wait)
	if err != nil {
		t.Fatal(err)
	}
	reader := keyclient.New(identity(t, ns, "reader", rbacv1.PolicyRule{APIGroups: []string{switchboardv1alpha1.GroupVersion.Group}, Resources: []string{"apikeys"}, Verbs: []string{"get"}}),
		keyclient.Options{})
	asked := false
	_, _, err = reader.Revoke(testContext(t), ns, "old", func(*switchboardv1alpha1.APIKey) error { asked = true; return nil })
	var forbidden *keyclient.ForbiddenError
	if !errors.As(err, &forbidden) || asked {
		t.Fatalf("revoke without patch: %v (asked for confirmation: %v)", err, asked)
	}
	no := errors.New("not confirmed")
	if _, _, err := owner.Revoke(testContext(t), ns, "old", func(*switchboardv1alpha1.APIKey) error { return no }); !errors.Is(err, no) {
		t.Fatalf("revoke not confirmed: %v", err)
	}
	requireV1(t, "a key whose revocation was not confirmed", issued.Revealed.Key, http.StatusOK)
	if _, already, err := owner.Revoke(testContext(t), ns, "old", nil); err != nil || already {
		t.Fatalf("revoke: already %v, %v", already, err)
	}
	requireV1(t, "the revoked key", issued.Revealed.Key, http.StatusUnauthorized)
	if _, already, err := owner.Revoke(testContext(t), ns, "old", nil); err != nil || !already {
		t.Fatalf("revoking again: already %v, %v", already, err)
	}
	if _, _, err := owner.Revoke(testContext(t), ns, "missing", nil); !apierrors.IsNotFound(err) {
		t.Fatalf("revoking a missing key: %v", err)
	}
}
