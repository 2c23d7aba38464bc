//go:build !unit

package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/testenv"
	"github.com/switchboard-dev/switchboard/internal/version"
)

// applyVersionReader creates config/rbac's version reader Role and RoleBinding, as shipped:
// everyone signed in may get the version ConfigMap of the system namespace.
func applyVersionReader(t *testing.T) {
	t.Helper()
	f, err := os.Open(filepath.Join(testenv.RepoRoot(), "config", "rbac", "version_reader_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			break
		}
		obj.SetNamespace(switchboardv1alpha1.DefaultSystemNamespace)
		if err := env.Client.Create(testContext(t), &obj); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
}

// TestVersion: `kubectl switchboard version` prints the plugin's version and the one the
// in-process operator published, to a user with no rights but config/'s reader binding; warns
// when they are more than a minor apart; and, when it cannot read the installed version, says
// why and still prints the plugin's, with exit code 0.
func TestVersion(t *testing.T) {
	ns := env.Namespace(t, "version")
	applyVersionReader(t)
	testenv.Eventually(t, 30*time.Second, "the operator's version ConfigMap", func() error {
		return env.Client.Get(testContext(t), client.ObjectKey{Namespace: switchboardv1alpha1.DefaultSystemNamespace, Name: version.ConfigMap}, &corev1.ConfigMap{})
	})
	nobody := serviceAccountConfig(t, ns, "nobody", nil)
	installed := version.Get()

	// This build is "dev": its skew with anything is unknown, which is said, and no warning.
	r := run(t, nobody, ns, "", "version")
	mustSucceed(t, r)
	if want := "Client Version: " + installed.Version + "\nServer Version: " + installed.Version + "\n"; r.stdout != want {
		t.Errorf("stdout %q, want %q", r.stdout, want)
	}
	if !strings.Contains(r.stderr, "unknown skew") || strings.Contains(r.stderr, "WARNING") {
		t.Errorf("stderr %q, want unknown skew and no warning", r.stderr)
	}

	// JSON, kubectl's fields.
	r = run(t, nobody, ns, "", "version", "-o", "json")
	mustSucceed(t, r)
	var got versions
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.ServerVersion == nil || *got.ServerVersion != installed {
		t.Errorf("-o json: %v %q, want serverVersion %+v", err, r.stdout, installed)
	}

	// A plugin two minors from what is installed is warned about, as kubectl does.
	ahead := installed
	ahead.Version = "v0.5.0"
	behind := installed
	behind.Version = "v0.3.0"
	clientVersion = func() version.Info { return ahead }
	t.Cleanup(func() { clientVersion = version.Get })
	write := func(v version.Info) {
		var cm corev1.ConfigMap
		key := client.ObjectKey{Namespace: switchboardv1alpha1.DefaultSystemNamespace, Name: version.ConfigMap}
		if err := env.Client.Get(testContext(t), key, &cm); err != nil {
			t.Fatal(err)
		}
		cm.Data = v.Data()
		if err := env.Client.Update(testContext(t), &cm); err != nil {
			t.Fatal(err)
		}
	}
	write(behind)
	t.Cleanup(func() { write(installed) })
	r = run(t, nobody, ns, "", "version")
	mustSucceed(t, r)
	if want := "WARNING: version difference between client (0.5) and server (0.3) exceeds the supported minor version skew of +/-1\n"; r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
	behind.Version = "v0.4.1"
	write(behind)
	r = run(t, nobody, ns, "", "version")
	mustSucceed(t, r)
	if r.stderr != "" || !strings.Contains(r.stdout, "Server Version: v0.4.1\n") {
		t.Errorf("one minor apart: stdout %q, stderr %q; want the versions and no warning", r.stdout, r.stderr)
	}

	// Elsewhere the reader binding does not reach: forbidden, said, exit 0.
	r = run(t, nobody, ns, "", "version", "-n", ns)
	mustSucceed(t, r)
	if r.stdout != "Client Version: v0.5.0\n" || !strings.Contains(r.stderr, "the installed version cannot be read: forbidden: you (system:serviceaccount:"+ns+":nobody) may not get configmaps") {
		t.Errorf("forbidden: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	// Not installed there.
	r = admin(t, ns, "version", "-n", ns)
	mustSucceed(t, r)
	if !strings.Contains(r.stderr, `the installed version cannot be read: no ConfigMap switchboard-version in namespace "`+ns+`": switchboard is not installed there`) {
		t.Errorf("not installed: stderr %q", r.stderr)
	}
	// --client asks nothing of the cluster.
	r = run(t, nobody, ns, "", "version", "--client", "--kubeconfig", filepath.Join(t.TempDir(), "none"))
	mustSucceed(t, r)
	if r.stdout != "Client Version: v0.5.0\n" || r.stderr != "" {
		t.Errorf("--client: stdout %q, stderr %q", r.stdout, r.stderr)
	}
}
