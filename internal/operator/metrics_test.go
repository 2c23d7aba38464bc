//go:build !unit

package operator_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"

	"github.com/switchboard-dev/switchboard/internal/operator"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// TestMetricsNeedAuthorizedToken (issue 18, item 6): with --metrics-secure, as the chart and
// config/ run it, the operator's metrics answer over HTTPS only to a bearer token whose owner
// RBAC allows to get /metrics: no token gets 401, a token of someone else 403, a token of a
// ServiceAccount bound to the shipped switchboard-metrics-reader ClusterRole the metrics.
func TestMetricsNeedAuthorizedToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	system := env.Namespace(t, "metrics-system")
	addr := testenv.FreeAddr(t)
	oc := testenv.OperatorConfiguration(system)
	oc.MetricsBindAddress, oc.MetricsSecure = &addr, ptr.To(true)
	startManager(t, oc, operator.Deps{Namespaces: []string{system}})

	reader := shippedMetricsReader(t)
	reader.Name += "-" + system
	if err := env.Client.Create(ctx, reader); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), reader) })
	prometheus := env.ServiceAccount(t, system, "prometheus")
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: reader.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: system, Name: "prometheus"}}}
	if err := env.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), binding) })
	stranger := env.ServiceAccount(t, system, "stranger")

	// The certificate is controller-runtime's self-signed one, as a ServiceMonitor accepts it.
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed by design
	scrape := func(token string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	testenv.Eventually(t, time.Minute, "the metrics to answer an authorized scrape", func() error {
		status, body, err := scrape(prometheus.BearerToken)
		if err != nil {
			return err
		}
		if status != http.StatusOK || !strings.Contains(body, "controller_runtime_reconcile_total") {
			return fmt.Errorf("status %d", status)
		}
		return nil
	})
	if status, body, err := scrape(""); err != nil || status != http.StatusUnauthorized || strings.Contains(body, "controller_runtime") {
		t.Fatalf("a scrape without a token got %d (%v)", status, err)
	}
	if status, body, err := scrape(stranger.BearerToken); err != nil || status != http.StatusForbidden || strings.Contains(body, "controller_runtime") {
		t.Fatalf("a scrape with a token RBAC does not allow got %d (%v)", status, err)
	}
	plain, err := http.Get("http://" + addr + "/metrics") //nolint:noctx // one probe
	if err == nil {
		_ = plain.Body.Close()
		if plain.StatusCode == http.StatusOK {
			t.Fatal("the metrics answer plain HTTP")
		}
	}
}

// shippedMetricsReader reads the switchboard-metrics-reader ClusterRole of config/rbac.
func shippedMetricsReader(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	path := filepath.Join(testenv.RepoRoot(), "config", "rbac", "metrics_auth_role.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		role := &rbacv1.ClusterRole{}
		if err := dec.Decode(role); err != nil {
			if errors.Is(err, io.EOF) {
				t.Fatalf("%s has no ClusterRole switchboard-metrics-reader", path)
			}
			t.Fatal(err)
		}
		if role.Kind == "ClusterRole" && role.Name == "switchboard-metrics-reader" {
			return role
		}
	}
}
