//go:build cluster

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/operator"
	"github.com/switchboard-dev/switchboard/internal/webhooksender"
)

// leftOnPurpose is what `helm uninstall` leaves in the release namespace and the signing
// namespace, as docs/operating.md says: the hash Secrets (so that a reinstall keeps every issued
// key valid), the keys' histories, the webhook outboxes and, in the signing namespace, the
// signing-secret copies (so that it keeps the histories and delivers what was pending), and the
// operator's and the sender's leader-election Leases, which they make and Helm does not know;
// and what Kubernetes puts in every namespace.
func leftOnPurpose(kind, name string, obj map[string]any) bool {
	switch kind {
	case "Secret":
		meta, _ := obj["metadata"].(map[string]any)
		if meta["namespace"] == signingNamespace {
			return obj["type"] == string(keysecret.TypeSigning)
		}
		return obj["type"] == string(keysecret.TypeHash)
	case "APIKeyHistory", "WebhookOutbox":
		return true
	case "Lease":
		return name == operator.DefaultLeaderElectionID || name == webhooksender.DefaultLeaderElectionID
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
	for _, ns := range []string{systemNamespace, signingNamespace} {
		for _, o := range s.objects(t, strings.Join(namespaced, ","), "-n", ns) {
			if !leftOnPurpose(o.kind, o.name, o.obj) {
				t.Errorf("helm uninstall left %s %s/%s", o.kind, ns, o.name)
			}
		}
	}
	clusterScoped := strings.Fields(s.kubectl(t, "api-resources", "--verbs=list", "--namespaced=false", "-o", "name"))
	crds := 0
	for _, o := range s.objects(t, strings.Join(clusterScoped, ",")) {
		switch {
		case o.kind == "CustomResourceDefinition" && strings.HasSuffix(o.name, ".switchboard.dev"):
			crds++ // kept: the chart's CRDs carry helm.sh/resource-policy: keep (crds.keep, on by default)
		case o.kind == "Namespace" && o.name == systemNamespace:
			// made by --create-namespace, which Helm never deletes
		case o.kind == "Namespace" && o.name == signingNamespace:
			// the chart's, kept (helm.sh/resource-policy: keep) with the signing-secret copies
		case o.kind == "APIService" && o.name == "v1alpha1.switchboard.dev":
			// the API server's own entry for the CRDs' group, which lives as long as they do
		case strings.Contains(o.name, "switchboard"):
			t.Errorf("helm uninstall left %s %s", o.kind, o.name)
		}
	}
	chartCRDs, err := filepath.Glob(filepath.Join(s.root, "charts", "switchboard", "files", "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if crds != len(chartCRDs) || crds == 0 {
		t.Errorf("%d switchboard CRDs after the uninstall, want the chart's %d, which crds.keep keeps", crds, len(chartCRDs))
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
