//go:build !unit

package panel_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/testenv"
	"github.com/switchboard-dev/switchboard/internal/testenv/system"
)

// systemNS holds the operator's hash Secrets in these tests.
const systemNS = "switchboard-system"

var (
	env  *testenv.Env
	kube kubernetes.Interface
	// sys is the whole system: the control plane, the real operator and the real /v1 API server
	// (to prove that a key the panel shows authenticates).
	sys *system.System
)

// TestMain starts the real control plane, operator and /v1 API server in this process: the
// panel is tested against them, as it runs in production. First it starts the tests' OpenID
// Provider (bin/oidc-op), which the kube-apiserver trusts through the AuthenticationConfiguration
// the panel itself prints for token mode (oidc_test.go).
func TestMain(m *testing.M) {
	authConfig, stopProvider, err := startOIDCProvider()
	if err != nil {
		fmt.Fprintln(os.Stderr, "OpenID Provider:", err)
		os.Exit(1)
	}
	code := func() int {
		defer stopProvider()
		s, err := system.Start(system.Options{SystemNamespace: systemNS, Reveal: true, APIServerArgs: map[string]string{"authentication-config": authConfig}})
		if err != nil {
			fmt.Fprintln(os.Stderr, "system:", err)
			return 1
		}
		sys, env = s, s.Env
		kube = kubernetes.NewForConfigOrDie(s.Config)
		code := m.Run()
		if err := s.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "system:", err)
			code = max(code, 1)
		}
		return code
	}()
	os.Exit(code)
}

// requireOperator fails a test that needs the operator when it is not running.
func requireOperator(t *testing.T) {
	t.Helper()
	if err := sys.OperatorErr(); err != nil {
		t.Fatalf("no key can be issued: %v", err)
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Rules a key owner needs in the panel: deleting APIKeys too, since a create whose key cannot be
// shown deletes the APIKey again.
var (
	ownerRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"switchboard.dev"}, Resources: []string{"apikeys"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "delete"}},
		{APIGroups: []string{"switchboard.dev"}, Resources: []string{"connections"}, Verbs: []string{"get", "list"}},
	}
	readOnlyRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"switchboard.dev"}, Resources: []string{"apikeys"}, Verbs: []string{"get", "list"}},
	}
	noSecretRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"switchboard.dev"}, Resources: []string{"apikeys"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
	}
)

// grant creates a ServiceAccount bound to a Role with rules in ns and mints a token for it with
// the TokenRequest API (envtest runs no token controller).
func grant(t *testing.T, ns, name string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	return env.ServiceAccount(t, ns, name, rules...).BearerToken
}

// logBuffer collects the panel's log lines, to prove that no key or token reaches them.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) logger() logr.Logger {
	return funcr.NewJSON(func(obj string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.lines = append(b.lines, obj)
	}, funcr.Options{})
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// hashSecret reads the APIKey's hash Secret in the system namespace.
func hashSecret(t *testing.T, ns, name string) (*switchboardv1alpha1.APIKey, *corev1.Secret) {
	t.Helper()
	ctx := testCtx(t)
	var key switchboardv1alpha1.APIKey
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &key); err != nil {
		t.Fatalf("reading APIKey %s/%s: %v", ns, name, err)
	}
	var secret corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "apikey-" + string(key.UID)}, &secret); err != nil {
		t.Fatalf("reading the hash Secret of %s/%s: %v", ns, name, err)
	}
	return &key, &secret
}

// requireHash fails unless key is well formed and its SHA-256 is the current hash of ns/name.
func requireHash(t *testing.T, ns, name, key string) {
	t.Helper()
	if err := apikey.Parse(key, apikey.DefaultPrefix); err != nil {
		t.Fatalf("the page showed a malformed key (hint %s): %v", apikey.Hint(key), err)
	}
	_, secret := hashSecret(t, ns, name)
	if got, want := string(secret.Data[keysecret.DataHash]), apikey.Sum(key).String(); got != want {
		t.Fatalf("hash Secret holds %s, the shown key hashes to %s", got, want)
	}
}

func metaName(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

func sha(key string) string { return apikey.Sum(key).String() }

// regexpValue reads a hidden field's value from a form.
func regexpValue(t *testing.T, body, field string) string {
	t.Helper()
	m := regexp.MustCompile(`name="` + regexp.QuoteMeta(field) + `" value="([^"]*)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no %s field on the page", field)
	}
	return m[1]
}

// waitFor is testenv.Eventually for 30s, on a condition that holds or not.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "the condition", func() error {
		if !cond() {
			return errors.New("not yet")
		}
		return nil
	})
}

// bindClusterNamespaceReader lets a ServiceAccount list namespaces.
func bindClusterNamespaceReader(t *testing.T, ns, sa string) {
	t.Helper()
	name := "ns-reader-" + ns + "-" + sa
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := env.Client.Create(testCtx(t), obj); err != nil {
			t.Fatalf("creating %T: %v", obj, err)
		}
	}
}

// v1Status calls GET /v1/connections with key and returns the status and the error code.
func v1Status(t *testing.T, key string) (int, string) {
	t.Helper()
	if err := sys.ServerErr(); err != nil {
		t.Fatal(err)
	}
	status, code, err := sys.Connections(testCtx(t), key)
	if err != nil {
		t.Fatal(err)
	}
	return status, code
}

// requireV1 waits (the server learns of keys through its informers) until GET /v1/connections
// with key answers status.
func requireV1(t *testing.T, key string, status int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, code := v1Status(t, key)
		if got == status {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /v1/connections with the key (hint %s): %d %s, want %d", apikey.Hint(key), got, code, status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
