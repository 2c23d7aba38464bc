package keyclient_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/operator"
	"github.com/switchboard-dev/switchboard/internal/server"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// env is the real control plane; the real operator and /v1 server run against it in this
// process, so that every decision of the workflow is checked against what they do.
var (
	env   *testenv.Env
	v1URL string
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	e, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	env = e
	defer func() {
		if err := e.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "testenv: stopping the control plane:", err)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := e.EnsureNamespace(ctx, switchboardv1alpha1.DefaultSystemNamespace); err != nil {
		fmt.Fprintln(os.Stderr, "creating the system namespace:", err)
		return 1
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "listening for the /v1 server:", err)
		return 1
	}
	v1URL = "http://" + l.Addr().String()
	quiet := logr.Discard()
	stopped := make(chan error, 2)
	go func() {
		stopped <- operator.Run(ctx, e.Config, operator.Options{SystemNamespace: switchboardv1alpha1.DefaultSystemNamespace,
			MetricsBindAddress: "0", HealthProbeBindAddress: "0", Logger: quiet})
	}()
	go func() {
		stopped <- server.Run(ctx, e.Config, server.Options{Listener: l, SystemNamespace: switchboardv1alpha1.DefaultSystemNamespace,
			HealthProbeBindAddress: "0", ShutdownDelay: -1, FailureRate: -1, Logger: &quiet})
	}()
	code := m.Run()
	cancel()
	for range 2 {
		if err := <-stopped; err != nil {
			fmt.Fprintln(os.Stderr, "stopped with an error:", err)
			code = max(code, 1)
		}
	}
	return code
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// identity creates a ServiceAccount bound to a Role with rules in namespace and returns a
// client (with watch, for interceptors) that carries a token minted for it.
func identity(t *testing.T, namespace, name string, rules ...rbacv1.PolicyRule) client.WithWatch {
	t.Helper()
	ctx := testContext(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Rules: rules}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
	}
	for _, obj := range []client.Object{sa, role, binding} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T: %v", obj, err)
		}
	}
	token, err := kubernetes.NewForConfigOrDie(env.Config).CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("minting a token: %v", err)
	}
	cfg := &rest.Config{Host: env.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}, BearerToken: token.Status.Token}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The rights of the identities in these tests.
var (
	// ownerRules are what a key's owner needs for every operation of the workflow.
	ownerRules = []rbacv1.PolicyRule{
		{APIGroups: []string{switchboardv1alpha1.GroupVersion.Group}, Resources: []string{"apikeys"}, Verbs: []string{"get", "list", "create", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "delete"}},
	}
	// thiefRules are another tenant user's: may read and delete the namespace's Secrets.
	thiefRules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "delete"}}}
)

// v1Status is the status of GET /v1/connections with key.
func v1Status(t *testing.T, key string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), http.MethodGet, v1URL+"/v1/connections", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /v1/connections: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// requireV1 waits (the server follows the API server through its informers) until GET
// /v1/connections with key answers want.
func requireV1(t *testing.T, what, key string, want int) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, what+" answers "+http.StatusText(want), func() error {
		if got := v1Status(t, key); got != want {
			return fmt.Errorf("GET /v1/connections: %d", got)
		}
		return nil
	})
}
