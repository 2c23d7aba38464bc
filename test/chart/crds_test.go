//go:build !unit

package chart

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// chartBeforeTemplatedCRDs is main's commit before the CRDs moved from the chart's crds/ into
// its templates: the chart users installed until then, whose CRDs Helm made without ownership.
const chartBeforeTemplatedCRDs = "7ebe9a6"

var switchboardCRDs = []string{"apikeycreditpools.switchboard.dev", "apikeyhistories.switchboard.dev", "apikeyroles.switchboard.dev", "apikeys.switchboard.dev", "connections.switchboard.dev", "keywebhooks.switchboard.dev", "leakreports.switchboard.dev", "webhookoutboxes.switchboard.dev"}

// crdsOfOldChart are the CRDs the chart of chartBeforeTemplatedCRDs had in its crds/.
var crdsOfOldChart = []string{"apikeys.switchboard.dev", "connections.switchboard.dev"}

// TestHelmCRDs: the chart renders every CRD exactly as `make manifests` wrote them to
// config/crd/bases, with the release's labels, and helm.sh/resource-policy: keep unless
// crds.keep is false; none with crds.enabled false.
func TestHelmCRDs(t *testing.T) {
	want := map[string]map[string]any{}
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "switchboard.dev_*.yaml"))
	if err != nil || len(files) != len(switchboardCRDs) {
		t.Fatalf("config/crd/bases: %v, %v", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f) //nolint:gosec // the repository's own files
		if err != nil {
			t.Fatal(err)
		}
		var crd map[string]any
		if err := yaml.Unmarshal(b, &crd); err != nil {
			t.Fatal(err)
		}
		want[crd["metadata"].(map[string]any)["name"].(string)] = crd
	}
	tests := []struct {
		name       string
		sets       []string
		crds, keep bool
	}{
		{name: "defaults", crds: true, keep: true},
		{name: "not kept", sets: []string{"crds.keep=false"}, crds: true},
		{name: "managed elsewhere", sets: []string{"crds.enabled=false"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := 0
			for _, o := range render(t, tt.sets) {
				if o.GetKind() != "CustomResourceDefinition" {
					continue
				}
				seen++
				if o.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" || o.GetLabels()["app.kubernetes.io/instance"] != "switchboard" {
					t.Errorf("%s: not labelled as the release's: %v", o.GetName(), o.GetLabels())
				}
				annotations := o.GetAnnotations()
				if kept := annotations["helm.sh/resource-policy"] == "keep"; kept != tt.keep {
					t.Errorf("%s: helm.sh/resource-policy keep is %v, want %v", o.GetName(), kept, tt.keep)
				}
				// What remains must be config/crd/bases' CRD, field for field: the template's YAML
				// round trip may change no schema.
				delete(annotations, "helm.sh/resource-policy")
				o.SetAnnotations(annotations)
				o.SetLabels(nil)
				got, _ := yaml.Marshal(o.Object)
				wantYAML, _ := yaml.Marshal(want[o.GetName()])
				if !bytes.Equal(got, wantYAML) {
					t.Errorf("%s differs from config/crd/bases beyond labels and the keep annotation:\n%s", o.GetName(), got)
				}
			}
			if wantN := map[bool]int{true: len(switchboardCRDs)}[tt.crds]; seen != wantN {
				t.Errorf("%d CRDs rendered, want %d", seen, wantN)
			}
		})
	}
}

// TestHelmCRDLifecycle installs the chart as it was before its CRDs were templates (crds/, at
// chartBeforeTemplatedCRDs) on a control plane of its own, and then: an upgrade to today's chart
// fails on Helm's ownership check until docs/upgrading.md's adoption block has run (run here
// verbatim); after it, `helm upgrade` applies a CRD change; a downgrade to a CRD without a field
// hides what was stored in it, and upgrading again shows it; `helm uninstall` keeps the CRDs and the tenants' objects, and
// with crds.keep=false removes them. It then does the same adoption for CRDs applied with
// kubectl from config/crd/bases.
func TestHelmCRDLifecycle(t *testing.T) {
	plane := &envtest.Environment{BinaryAssetsDirectory: testenv.AssetsDir()}
	cfg, err := plane.Start()
	if err != nil {
		t.Fatalf("starting a control plane without CRDs: %v", err)
	}
	t.Cleanup(func() {
		if err := plane.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	k8s, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := testenv.WriteKubeconfig(cfg, cfg.Host, "", kubeconfig); err != nil {
		t.Fatal(err)
	}
	h := &cli{t: t, env: append(os.Environ(), "KUBECONFIG="+kubeconfig,
		"HELM_CACHE_HOME="+filepath.Join(dir, "helm-cache"), "HELM_CONFIG_HOME="+filepath.Join(dir, "helm-config"),
		"HELM_DATA_HOME="+filepath.Join(dir, "helm-data"),
		"PATH="+testenv.AssetsDir()+string(os.PathListSeparator)+os.Getenv("PATH"))}
	helm, kubectl := testenv.Helm(t), filepath.Join(testenv.AssetsDir(), "kubectl")
	release := []string{"switchboard", "--namespace", releaseNamespace}
	oldChart, plainChart, changedChart := chartAt(t, chartBeforeTemplatedCRDs), chartDir(), changedCRDChart(t)
	adopt := adoptionBlock(t)

	// Before: the chart of crds/ made the CRDs, outside its release's manifest.
	h.must(helm, append(append([]string{"install"}, release...), oldChart, "--create-namespace")...)
	for _, name := range crdsOfOldChart {
		if crd := getCRD(t, k8s, name); crd == nil || crd.GetAnnotations()["meta.helm.sh/release-name"] != "" {
			t.Fatalf("the old chart did not install %s from crds/, without Helm's ownership: %v", name, crd)
		}
	}
	h.must(kubectl, "create", "namespace", "tenant")
	h.must(kubectl, "apply", "-f", connection(t, "before-upgrade", ""))

	// Without the adoption step, Helm refuses to take the CRDs over, and changes nothing.
	out, err := h.run(helm, append(append([]string{"upgrade"}, release...), changedChart)...)
	if err == nil || !strings.Contains(err.Error(), "cannot be imported into the current release: invalid ownership metadata") {
		t.Fatalf("helm upgrade over CRDs of crds/ without adoption: want Helm's ownership error, got %v\n%s", err, out)
	}
	if hasColumn(t, k8s, "Adopted") {
		t.Fatal("the failed upgrade changed the Connection CRD")
	}

	// docs/upgrading.md's block, verbatim; then the upgrade applies the CRD change.
	h.must("sh", "-ec", adopt)
	h.must(helm, append(append([]string{"upgrade"}, release...), changedChart)...)
	if !hasColumn(t, k8s, "Adopted") {
		t.Fatal("after the adoption, helm upgrade did not apply the CRD's new printer column")
	}
	h.must(kubectl, "apply", "-f", connection(t, "with-note", "written with the new field"))
	if note := connectionNote(t, k8s, "with-note"); note != "written with the new field" {
		t.Fatalf("spec.note after the upgrade: %q, want the value written (the CRD has the field)", note)
	}

	// A downgrade (an upgrade to the chart without the field, as a rollback does) applies the
	// older CRD: the field stored in the object is no longer served.
	h.must(helm, append(append([]string{"upgrade"}, release...), plainChart)...)
	if hasColumn(t, k8s, "Adopted") {
		t.Fatal("the downgrade left the newer CRD in place")
	}
	if note := connectionNote(t, k8s, "with-note"); note != "" {
		t.Fatalf("spec.note after the downgrade: %q, want it pruned by the older schema", note)
	}
	// Unwritten since, the object still holds the field in etcd: upgrading again serves it.
	h.must(helm, append(append([]string{"upgrade"}, release...), changedChart)...)
	if note := connectionNote(t, k8s, "with-note"); note != "written with the new field" {
		t.Fatalf("spec.note after upgrading again: %q, want the value stored before the downgrade", note)
	}

	// helm uninstall keeps the CRDs, and every tenant's objects in them.
	h.must(helm, append([]string{"uninstall"}, release...)...)
	for _, name := range switchboardCRDs {
		if getCRD(t, k8s, name) == nil {
			t.Fatalf("helm uninstall deleted %s despite crds.keep", name)
		}
	}
	h.must(kubectl, "get", "connection", "before-upgrade", "with-note", "--namespace", "tenant")

	// With crds.keep=false, a reinstall takes over the kept CRDs (same release, same namespace)
	// and its uninstall removes them.
	h.must(helm, append(append([]string{"install"}, release...), plainChart, "--set", "crds.keep=false")...)
	h.must(helm, append([]string{"uninstall"}, release...)...)
	crdsGone(t, k8s)

	// CRDs applied with kubectl from config/crd/bases: the same refusal, the same adoption.
	h.must(kubectl, "apply", "-f", filepath.Join(testenv.RepoRoot(), "config", "crd", "bases"))
	out, err = h.run(helm, append(append([]string{"upgrade", "--install"}, release...), changedChart)...)
	if err == nil || !strings.Contains(err.Error(), "invalid ownership metadata") {
		t.Fatalf("helm install over CRDs applied by kubectl without adoption: want Helm's ownership error, got %v\n%s", err, out)
	}
	h.must("sh", "-ec", adopt)
	h.must(helm, append(append([]string{"upgrade", "--install"}, release...), changedChart, "--set", "crds.keep=false")...)
	if !hasColumn(t, k8s, "Adopted") {
		t.Fatal("after the adoption, helm install did not apply the CRD's new printer column")
	}
	h.must(helm, append([]string{"uninstall"}, release...)...)
	crdsGone(t, k8s)
}

// cli runs commands with a kubeconfig and Helm directories of the test's own.
type cli struct {
	t   *testing.T
	env []string
}

func (c *cli) run(name string, args ...string) (string, error) {
	c.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env, cmd.Dir = c.env, testenv.RepoRoot()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

func (c *cli) must(name string, args ...string) {
	c.t.Helper()
	if out, err := c.run(name, args...); err != nil {
		c.t.Fatalf("%v\n%s", err, out)
	}
}

// chartAt extracts charts/switchboard as it was at commit.
func chartAt(t *testing.T, commit string) string {
	t.Helper()
	archive, err := run(t, "git", "archive", "--format=tar", commit, "charts/switchboard")
	if err != nil {
		t.Fatalf("the chart at %s (the repository's history is needed): %v", commit, err)
	}
	dir := t.TempDir()
	tar := exec.Command("tar", "-x", "-C", dir)
	tar.Stdin = strings.NewReader(archive)
	if out, err := tar.CombinedOutput(); err != nil {
		t.Fatalf("extracting the chart at %s: %v\n%s", commit, err, out)
	}
	return filepath.Join(dir, "charts", "switchboard")
}

// changedCRDChart is a copy of the chart whose Connection CRD gains a printer column "Adopted"
// and a field spec.note, as a later release's CRD would.
func changedCRDChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "switchboard")
	if err := os.CopyFS(dir, os.DirFS(chartDir())); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "files", "crds", "switchboard.dev_connections.yaml")
	b, err := os.ReadFile(file) //nolint:gosec // the test's own copy
	if err != nil {
		t.Fatal(err)
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &crd.Object); err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	v := versions[0].(map[string]any)
	columns, _, _ := unstructured.NestedSlice(v, "additionalPrinterColumns")
	columns = append(columns, map[string]any{"name": "Adopted", "type": "string", "jsonPath": ".spec.note"})
	if err := unstructured.SetNestedSlice(v, columns, "additionalPrinterColumns"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedMap(v, map[string]any{"type": "string"}, "schema", "openAPIV3Schema", "properties", "spec", "properties", "note"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(crd.Object)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// adoptionBlock is docs/upgrading.md's shell block that adopts existing CRDs into the release:
// the one whose commands annotate them with meta.helm.sh/release-name.
func adoptionBlock(t *testing.T) string {
	t.Helper()
	page, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "upgrading.md"))
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, m := range regexp.MustCompile("(?ms)^```sh\n(.*?)^```").FindAllStringSubmatch(string(page), -1) {
		if strings.Contains(m[1], "meta.helm.sh/release-name=") {
			found = append(found, m[1])
		}
	}
	if len(found) != 1 {
		t.Fatalf("docs/upgrading.md has %d shell blocks setting meta.helm.sh/release-name, want the one adoption block", len(found))
	}
	return found[0]
}

// connection writes a manifest of a Connection in namespace tenant, with spec.note when note
// is set (a field only the changed CRD has), and returns its file.
func connection(t *testing.T, name, note string) string {
	t.Helper()
	spec := "{}"
	if note != "" {
		spec = fmt.Sprintf("{note: %q}", note)
	}
	file := filepath.Join(t.TempDir(), name+".yaml")
	manifest := fmt.Sprintf("apiVersion: switchboard.dev/v1alpha1\nkind: Connection\nmetadata: {name: %s, namespace: tenant}\nspec: %s\n", name, spec)
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// getCRD is the named CRD, or nil when there is none.
func getCRD(t *testing.T, k8s client.Client, name string) *unstructured.Unstructured {
	t.Helper()
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(crdGVK)
	err := k8s.Get(context.Background(), client.ObjectKey{Name: name}, crd)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

// hasColumn says whether the API server's Connection CRD has the named printer column.
func hasColumn(t *testing.T, k8s client.Client, name string) bool {
	t.Helper()
	crd := getCRD(t, k8s, "connections.switchboard.dev")
	if crd == nil {
		t.Fatal("no Connection CRD")
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	columns, _, _ := unstructured.NestedSlice(versions[0].(map[string]any), "additionalPrinterColumns")
	for _, c := range columns {
		if c.(map[string]any)["name"] == name {
			return true
		}
	}
	return false
}

// connectionNote is spec.note of the tenant's Connection as the API server serves it.
func connectionNote(t *testing.T, k8s client.Client, name string) string {
	t.Helper()
	c := &unstructured.Unstructured{}
	c.SetGroupVersionKind(schema.GroupVersionKind{Group: "switchboard.dev", Version: "v1alpha1", Kind: "Connection"})
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "tenant", Name: name}, c); err != nil {
		t.Fatal(err)
	}
	note, _, _ := unstructured.NestedString(c.Object, "spec", "note")
	return note
}

// crdsGone waits until every CRD is deleted (the API server removes a CRD once its objects are).
func crdsGone(t *testing.T, k8s client.Client) {
	t.Helper()
	// The API server deletes a CRD only after its cleanup finalizer ran; on a busy machine
	// (2 cores, other suites beside) that took over a minute once, and over three for one of
	// six CRDs (the finalizer retries a failed cleanup with a growing backoff).
	deadline := time.Now().Add(6 * time.Minute)
	for {
		var left []string
		for _, name := range switchboardCRDs {
			if getCRD(t, k8s, name) != nil {
				left = append(left, name)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, name := range left {
				crd := getCRD(t, k8s, name)
				conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
				t.Logf("%s is still there: annotations %v labels %v deletion %v finalizers %v conditions %v", name, crd.GetAnnotations(), crd.GetLabels(), crd.GetDeletionTimestamp(), crd.GetFinalizers(), conditions)
			}
			t.Fatalf("helm uninstall with crds.keep=false left %s", strings.Join(left, ", "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
