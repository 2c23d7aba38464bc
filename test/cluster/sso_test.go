//go:build cluster

package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/keyclient/reveal"
)

// testPanelSSO upgrades the release with single sign-on in impersonate mode, as docs/keys.md
// shows (the client secret from an existing Secret): the panel pods start with the chart's
// constrained-impersonation grant (the panel refuses to start when it does not work) and
// answer their sign-in page through the Service, offering the provider's sign-in beside the
// token form. The provider is not reachable from the cluster: the panel discovers it on the
// first sign-in, so it starts without it.
func testPanelSSO(t *testing.T) {
	s.apply(t, `apiVersion: v1
kind: Secret
metadata:
  name: panel-oidc
  namespace: `+systemNamespace+`
stringData:
  client-secret: not-a-real-secret
`)
	args := append([]string{"upgrade", release}, s.chart()...)
	s.must(t, "", s.helm, append(args, "--namespace", systemNamespace,
		"--reuse-values", "--wait", "--timeout", "4m",
		"--set", "panel.oidc.enabled=true",
		"--set", "panel.oidc.issuerURL=https://idp.example.test",
		"--set", "panel.oidc.clientID=switchboard",
		"--set", "panel.oidc.clientSecret.secretName=panel-oidc",
		"--set", "panel.oidc.redirectURL=https://switchboard.example.test/oidc/callback",
		"--set", "panel.oidc.mode=impersonate",
		"--set", "panel.oidc.providerName=Example")...)
	s.readyDeployment(t, "switchboard-panel", 3*time.Minute)
	base := s.serviceURL(t, "switchboard-panel")
	browser := s.c.HTTPClient()
	eventually(t, time.Minute, "the sign-in page offering single sign-on", func() error {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, base+"/", nil)
		if err != nil {
			return err
		}
		resp, err := browser.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		body := readAll(t, resp)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Sign in with Example") || !strings.Contains(body, `href="/oidc/login"`) {
			return fmt.Errorf("GET / answered %d:\n%.400s", resp.StatusCode, body)
		}
		return nil
	})
	t.Run("reveal through the Service", testRevealThroughTheService)
	// Not the chart's: helm uninstall, next, would leave it, and that step counts what stays.
	s.kubectl(t, "delete", "secret", "panel-oidc", "-n", systemNamespace)
}

// testRevealThroughTheService: in impersonate mode the panel's ServiceAccount, with the chart's
// grants, may read no Secret as anyone, and claims a key for a person through the operator's
// reveal endpoint: its Service, the operator pods' TLS (trusted from the bundle ConfigMap they
// publish), the operator's own grants to review the caller and the person. A person without the
// right to the reveal Secret is refused, and the key claimed for the one with it works on /v1.
func testRevealThroughTheService(t *testing.T) {
	ctx := context.Background()
	ns := "reveal-sso"
	s.tenant(t, ns, "web")
	s.apply(t, `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: owners
  namespace: `+ns+`
rules:
  - apiGroups: [""]
    resources: ["secrets"]
    verbs: ["get", "delete"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: owners
  namespace: `+ns+`
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: owners
subjects:
  - kind: Group
    apiGroup: rbac.authorization.k8s.io
    name: oidc:owners
`)
	key := &switchboardv1alpha1.APIKey{}
	if err := s.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, key); err != nil {
		t.Fatal(err)
	}
	token, err := s.cs.CoreV1().ServiceAccounts(systemNamespace).CreateToken(ctx, "switchboard-panel", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := s.c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	panelCfg := rest.AnonymousClientConfig(admin)
	panelCfg.BearerToken = token.Status.Token

	// Impersonating the person, the panel may read none of their Secrets.
	as := rest.CopyConfig(panelCfg)
	as.Impersonate = rest.ImpersonationConfig{UserName: "oidc:alice", Groups: []string{"oidc:owners"}}
	cs := kubernetes.NewForConfigOrDie(as)
	if _, err := cs.CoreV1().Secrets(ns).Get(ctx, key.Status.RevealSecretName, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the panel's ServiceAccount read a reveal Secret as oidc:alice: %v, want Forbidden", err)
	}

	// The endpoint by its Service's name, as the panel calls it, dialled at its ClusterIP.
	svc := &corev1.Service{}
	if err := s.k8s.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: "switchboard-reveal"}, svc); err != nil {
		t.Fatal(err)
	}
	// (The test's process has no cluster DNS: the Service's name is dialled at its ClusterIP;
	// the API server as before.)
	dial, revealHost := admin.Dial, "switchboard-reveal."+systemNamespace+".svc:9445"
	panelCfg.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		if address == revealHost {
			address = net.JoinHostPort(svc.Spec.ClusterIP, "9445")
		}
		return dial(ctx, network, address)
	}
	c, err := reveal.NewClient(panelCfg, "https://"+revealHost,
		client.ObjectKey{Namespace: systemNamespace, Name: "switchboard-reveal-ca"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.For("oidc:mallory", []string{"oidc:others"}).Claim(ctx, key); !errors.Is(err, keyclient.ErrForbidden) {
		t.Fatalf("claiming for a person without the right: %v, want Forbidden", err)
	}
	got, err := c.For("oidc:alice", []string{"oidc:owners"}).Claim(ctx, key)
	if err != nil {
		t.Fatalf("claiming for oidc:alice through the Service: %v", err)
	}
	// Not added to s.issued: testKustomize takes the last key there as one issued under Helm, and this
	// one ends with its namespace below.
	api := s.serviceURL(t, "switchboard-api")
	eventually(t, time.Minute, "the claimed key works on /v1", func() error {
		if r := listConnections(ctx, s.c.HTTPClient(), api, got.Key); r.status != http.StatusOK {
			return fmt.Errorf("GET /v1/connections: %s", r)
		}
		return nil
	})
	s.kubectl(t, "delete", "namespace", ns, "--wait=false")
}
