//go:build !unit

package fault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

var tenantRolesOnce sync.Once

// ensureTenantRoles creates the tenant ClusterRoles switchboard ships (config/rbac/tenant_roles.yaml)
// and has kube-controller-manager's aggregation controller fold them into the built-in edit
// role, as in a cluster (envtest runs no controllers; the aggregated rules stay once written).
func ensureTenantRoles(t *testing.T) {
	t.Helper()
	tenantRolesOnce.Do(func() {
		raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "tenant_roles.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(raw)), 4096)
		for {
			role := &rbacv1.ClusterRole{}
			if err := dec.Decode(role); err != nil {
				break
			}
			if role.Name == "" {
				continue
			}
			if err := env.Client.Create(ctxFor(t, 10*time.Second), role); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("creating ClusterRole %s: %v", role.Name, err)
			}
		}
		env.StartControllerManager(t, "clusterrole-aggregation")
		testenv.Eventually(t, time.Minute, "the built-in edit role to aggregate switchboard-edit", func() error {
			edit := &rbacv1.ClusterRole{}
			if err := env.Client.Get(ctxFor(t, 10*time.Second), client.ObjectKey{Name: "edit"}, edit); err != nil {
				return err
			}
			for _, r := range edit.Rules {
				if slices.Contains(r.APIGroups, switchboardv1alpha1.GroupVersion.Group) && slices.Contains(r.Resources, "apikeys") && slices.Contains(r.Verbs, "create") {
					return nil
				}
			}
			return errors.New("not yet")
		})
	})
}

// tenantClient is a tenant of namespace ns as switchboard's threat model has it: a
// ServiceAccount bound in ns to the built-in edit role, which aggregates switchboard-edit.
func tenantClient(t *testing.T, ns string) client.Client {
	t.Helper()
	ensureTenantRoles(t)
	ctx := ctxFor(t, 30*time.Second)
	const sa = "tenant"
	if err := env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa + "-edit"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
	}
	if err := env.Client.Create(ctx, rb); err != nil {
		t.Fatal(err)
	}
	clientset, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	token, err := clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &rest.Config{Host: env.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData},
		BearerToken: token.Status.Token, QPS: 200, Burst: 400}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// issueAllAs creates the APIKeys as the tenant c and claims their keys from the reveal
// Secrets as the tenant, in the order given.
func issueAllAs(t *testing.T, c client.Client, keys []*switchboardv1alpha1.APIKey) []string {
	t.Helper()
	ctx := ctxFor(t, 3*time.Minute)
	for _, ak := range keys {
		if err := c.Create(ctx, ak); err != nil {
			t.Fatalf("creating APIKey %s as the tenant: %v", ak.Name, err)
		}
	}
	out := make([]string, len(keys))
	for i, ak := range keys {
		testenv.Eventually(t, 2*time.Minute, "issuing "+ak.Name, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(ak), ak); err != nil {
				return err
			}
			if ak.Status.RevealSecretName == "" {
				return errors.New("no reveal Secret published yet")
			}
			got, err := keyclient.Claim(ctx, c, ak)
			if err != nil {
				return fmt.Errorf("claiming: %w", err)
			}
			out[i] = got.Key
			issued.add(got.Key)
			return nil
		})
	}
	return out
}

// scrapeMetric reads one unlabelled gauge from a Prometheus text endpoint; 0 when it cannot.
func scrapeMetric(ctx context.Context, url, name string) int64 {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return int64(f)
			}
		}
	}
	return 0
}
