//go:build !unit

package plugin

import (
	"net/http"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keyclient/keyclienttest"
	"github.com/switchboard-dev/switchboard/internal/scheme"
)

func TestForbidden(t *testing.T) {
	ns := env.Namespace(t, "rbac")
	apiKeys := []string{"apikeys"}
	secrets := []string{"secrets"}

	// May read keys but not create them.
	reader := serviceAccountConfig(t, ns, "reader", []rbacv1.PolicyRule{
		rule(switchboardv1alpha1.GroupVersion.Group, apiKeys, "get", "list", "watch"),
	})
	r := run(t, reader, ns, "", "key", "create", "nope", "--timeout", "10s")
	mustFail(t, r, `forbidden: you (system:serviceaccount:`+ns+`:reader) may not create apikeys.switchboard.dev`)
	if !strings.Contains(r.stderr, `namespace "`+ns+`"`) {
		t.Fatalf("the error should name the namespace: %q", r.stderr)
	}
	if err := env.Client.Get(testContext(t), types.NamespacedName{Namespace: ns, Name: "nope"}, &switchboardv1alpha1.APIKey{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused create left an APIKey behind: %v", err)
	}
	mustSucceed(t, run(t, reader, ns, "", "key", "list"))

	// May create keys and read Secrets but not delete them: it could never claim the key.
	noDelete := serviceAccountConfig(t, ns, "no-delete", []rbacv1.PolicyRule{
		rule(switchboardv1alpha1.GroupVersion.Group, apiKeys, "get", "list", "create", "patch", "delete"),
		rule("", secrets, "get"),
	})
	r = run(t, noDelete, ns, "", "key", "create", "nope", "--timeout", "10s")
	mustFail(t, r, `forbidden: you (system:serviceaccount:`+ns+`:no-delete) may not delete secrets in namespace "`+ns+`"`)
	if err := env.Client.Get(testContext(t), types.NamespacedName{Namespace: ns, Name: "nope"}, &switchboardv1alpha1.APIKey{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused create left an APIKey behind: %v", err)
	}

	// Revoke checks its permission first too, and names the user.
	mustSucceed(t, admin(t, ns, "key", "create", "kept", "--timeout", "30s"))
	r = run(t, reader, ns, "", "key", "revoke", "kept", "--yes")
	mustFail(t, r, `forbidden: you (system:serviceaccount:`+ns+`:reader) may not patch apikeys.switchboard.dev in namespace "`+ns+`"`)
	if getAPIKey(t, ns, "kept").Spec.Revoked {
		t.Fatal("a forbidden revoke revoked the key")
	}
	r = run(t, noDelete, ns, "", "key", "rotate", "kept")
	mustFail(t, r, "may not delete secrets")
	if getAPIKey(t, ns, "kept").Spec.Rotation != nil {
		t.Fatal("a refused rotate requested a rotation")
	}
	mustFail(t, run(t, noDelete, ns, "", "connection", "list"), "may not list connections.switchboard.dev")

	// A token the API server does not know is refused as such.
	stranger := rest.CopyConfig(reader)
	stranger.BearerToken = "not-a-token"
	mustFail(t, run(t, stranger, ns, "", "key", "create", "nope"), "did not accept your credentials")

	// With every right the plugin needs, the same kind of identity succeeds: RBAC decided above.
	full := serviceAccountConfig(t, ns, "full", []rbacv1.PolicyRule{
		rule(switchboardv1alpha1.GroupVersion.Group, apiKeys, "get", "list", "create", "patch", "delete"),
		rule("", secrets, "get", "delete"),
	})
	r = run(t, full, ns, "", "key", "create", "mine", "--timeout", "30s")
	mustSucceed(t, r)
	checkKeyMatchesHash(t, ns, "mine", strings.TrimSpace(r.stdout))
	eventuallyStatus(t, strings.TrimSpace(r.stdout), http.StatusOK)
	mustSucceed(t, run(t, full, ns, "", "key", "rotate", "mine", "--timeout", "30s"))
}

// TestKeyRotateStopsAStolenKey: another identity, who may get and delete the namespace's
// Secrets, claims the key `key rotate` asked for before the command does. The rotation is
// repeated at once with no grace, the command prints the next key and warns loudly, and the
// key the other identity took no longer works (nor, as the warning says, the replaced one).
func TestKeyRotateStopsAStolenKey(t *testing.T) {
	ns := env.Namespace(t, "stolen")
	owner, err := client.NewWithWatch(serviceAccountConfig(t, ns, "owner", []rbacv1.PolicyRule{
		rule(switchboardv1alpha1.GroupVersion.Group, []string{"apikeys"}, "get", "list", "create", "patch", "delete"),
		rule("", []string{"secrets"}, "get", "delete"),
	}), client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	thiefClient, err := client.New(serviceAccountConfig(t, ns, "thief", []rbacv1.PolicyRule{rule("", []string{"secrets"}, "get", "delete")}), client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	thief := keyclienttest.NewThief(thiefClient)
	run := runner(thief.Intercept(owner), ns, clock.RealClock{})

	created := run("key", "create", "svc", "--timeout", "30s")
	mustSucceed(t, created)
	first := strings.TrimSpace(created.stdout)
	thief.Arm(1)
	r := run("key", "rotate", "svc", "--grace", "1h", "--timeout", "30s")
	mustSucceed(t, r)
	if err := thief.Err(); err != nil || len(thief.Keys()) != 1 {
		t.Fatalf("the thief stole %d keys: %v", len(thief.Keys()), err)
	}
	stolen, next := thief.Keys()[0], strings.TrimSpace(r.stdout)
	for _, want := range []string{"WARNING: someone else claimed the new key", apikey.Hint(stolen), "no longer works", apikey.Hint(first) + ") stopped working too"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if next == stolen || next == first || strings.Contains(r.stderr, next) {
		t.Fatal("rotate printed a key someone else holds, or leaked the new key to stderr")
	}
	checkKeyMatchesHash(t, ns, "svc", next)
	eventuallyStatus(t, next, http.StatusOK)
	eventuallyStatus(t, stolen, http.StatusUnauthorized)
	eventuallyStatus(t, first, http.StatusUnauthorized)
}
