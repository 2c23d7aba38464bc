//go:build cluster

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/operator"
)

// saveLogs keeps the current pods' logs for testNoLeaks, before an upgrade replaces the pods.
func (s *suite) saveLogs(t *testing.T) {
	t.Helper()
	list := &corev1.PodList{}
	if err := s.k8s.List(context.Background(), list, client.InNamespace(systemNamespace)); err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		s.logs = append(s.logs, s.kubectl(t, "logs", "-n", systemNamespace, p.Name))
	}
}

// testNoLeaks looks for every key the suite was given in the logs of every operator and
// server pod it ran, in every Event and in every APIKey.
func testNoLeaks(t *testing.T) {
	s.saveLogs(t)
	places := map[string]string{
		"pod logs":               strings.Join(s.logs, "\n"),
		"Events (core/v1)":       s.kubectl(t, "get", "events", "-A", "-o", "json"),
		"Events (events.k8s.io)": s.kubectl(t, "get", "events.v1.events.k8s.io", "-A", "-o", "json"),
		"APIKeys":                s.kubectl(t, "get", "apikeys", "-A", "-o", "json"),
	}
	if !strings.Contains(places["pod logs"], "Starting workers") && !strings.Contains(places["pod logs"], "starting") {
		t.Fatalf("the pod logs look empty; are they the real logs?\n%.500s", places["pod logs"])
	}
	if len(s.issued) == 0 {
		t.Fatal("no key was issued to look for")
	}
	for where, text := range places {
		for _, key := range s.issued {
			if strings.Contains(text, key) || strings.Contains(text, key[len(key)-20:]) {
				t.Errorf("an issued key (hint %s…) appears in %s", key[:12], where)
			}
		}
	}
}

// leftOnPurpose is what `helm uninstall` leaves in the release namespace, as the README says:
// the hash Secrets (so that a reinstall keeps every issued key valid) and the operator's
// leader-election Lease, which the operator makes and Helm does not know; and what Kubernetes
// puts in every namespace.
func leftOnPurpose(kind, name string, obj map[string]any) bool {
	switch kind {
	case "Secret":
		return obj["type"] == string(keysecret.TypeHash)
	case "Lease":
		return name == operator.DefaultLeaderElectionID
	case "ConfigMap":
		return name == "kube-root-ca.crt"
	case "ServiceAccount":
		return name == "default"
	case "Event":
		return true
	}
	return false
}

// testUninstall uninstalls the release and looks at every object of every kind that is left.
func testUninstall(t *testing.T) {
	ctx := context.Background()
	s.must(t, "", s.helm, "uninstall", release, "--namespace", systemNamespace, "--wait", "--timeout", "3m")
	eventually(t, 2*time.Minute, "the release's pods gone", func() error {
		list := &corev1.PodList{}
		if err := s.k8s.List(ctx, list, client.InNamespace(systemNamespace)); err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d pods left, %s the first", len(list.Items), list.Items[0].Name)
		}
		return nil
	})

	namespaced := strings.Fields(s.kubectl(t, "api-resources", "--verbs=list", "--namespaced=true", "-o", "name"))
	left := s.objects(t, strings.Join(namespaced, ","), "-n", systemNamespace)
	for _, o := range left {
		if !leftOnPurpose(o.kind, o.name, o.obj) {
			t.Errorf("helm uninstall left %s %s/%s", o.kind, systemNamespace, o.name)
		}
	}
	clusterScoped := strings.Fields(s.kubectl(t, "api-resources", "--verbs=list", "--namespaced=false", "-o", "name"))
	crds := 0
	for _, o := range s.objects(t, strings.Join(clusterScoped, ",")) {
		switch {
		case o.kind == "CustomResourceDefinition" && strings.HasSuffix(o.name, ".switchboard.dev"):
			crds++ // kept, as Helm keeps the CRDs of crds/
		case o.kind == "Namespace" && o.name == systemNamespace:
			// made by --create-namespace, which Helm never deletes
		case o.kind == "APIService" && o.name == "v1alpha1.switchboard.dev":
			// the API server's own entry for the CRDs' group, which lives as long as they do
		case strings.Contains(o.name, "switchboard"):
			t.Errorf("helm uninstall left %s %s", o.kind, o.name)
		}
	}
	if crds != 2 {
		t.Errorf("%d switchboard CRDs after the uninstall, want the 2 Helm keeps", crds)
	}
}

// object is one object kubectl listed.
type object struct {
	kind, name string
	obj        map[string]any
}

// objects lists the objects of the given resources (comma-separated) with kubectl.
func (s *suite) objects(t *testing.T, resources string, args ...string) []object {
	t.Helper()
	out := s.kubectl(t, append([]string{"get", resources, "-o", "json"}, args...)...)
	var list struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("kubectl get %s: %v", resources, err)
	}
	var objs []object
	for _, item := range list.Items {
		meta, _ := item["metadata"].(map[string]any)
		kind, _ := item["kind"].(string)
		name, _ := meta["name"].(string)
		objs = append(objs, object{kind: kind, name: name, obj: item})
	}
	return objs
}

// testKustomize installs config/default with the local image (an overlay, as a user's own
// kustomization would set it) and checks that it reaches Ready and serves: the key issued under
// the Helm release still works, because the hash Secrets outlived the uninstall, and a new
// APIKey is issued by the new operator.
func testKustomize(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	// kustomize takes a base only as a relative path.
	base, err := filepath.Rel(dir, filepath.Join(s.root, "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	overlay := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
images:
  - name: ghcr.io/switchboard-dev/switchboard
    newName: %s
    newTag: %s
`, base, s.repo, s.tag)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o600); err != nil {
		t.Fatal(err)
	}
	s.kubectl(t, "apply", "-k", dir)
	s.readyDeployment(t, "switchboard-operator", 3*time.Minute)
	s.readyDeployment(t, "switchboard-server", 3*time.Minute)

	api := s.serviceURL(t, "switchboard-api")
	c := s.c.HTTPClient()
	kept := s.issued[len(s.issued)-1] // the upgrade's key, issued under the Helm release
	eventually(t, time.Minute, "the key issued under Helm accepted", func() error {
		if r := listConnections(ctx, c, api, kept); r.status != http.StatusOK {
			return fmt.Errorf("%s", r)
		}
		return nil
	})
	testPanel(t)
	connID := s.tenant(t, "tenant-d", "after")
	key := s.claim(t, "tenant-d", "after")
	s.issued = append(s.issued, key)
	r := listConnections(ctx, c, api, key)
	if r.status != http.StatusOK || len(connectionIDs(t, r)) != 1 || connectionIDs(t, r)[0] != connID {
		t.Fatalf("the key issued by the kustomize install: %s", r)
	}
}
