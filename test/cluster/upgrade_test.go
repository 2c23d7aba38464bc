//go:build cluster

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// load is clients calling the API continuously with a valid key through the Service, as an
// application would during an upgrade: keep-alive connections, Go's standard client.
type load struct {
	mu          sync.Mutex
	requests    int
	failures    []string  // what each failed request got
	lastSuccess time.Time // when the latest successful response arrived
	longestGap  time.Duration
	slowest     time.Duration
	stop        context.CancelFunc
	wg          sync.WaitGroup
}

func startLoad(c *http.Client, api, key string, workers int) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{stop: cancel, lastSuccess: time.Now()}
	for range workers {
		l.wg.Go(func() {
			for ctx.Err() == nil {
				start := time.Now()
				r := listConnections(ctx, c, api, key)
				if ctx.Err() != nil {
					return // the run ended during this request: not the server's doing
				}
				l.record(r, time.Since(start))
			}
		})
	}
	return l
}

func (l *load) record(r apiResponse, took time.Duration) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests++
	l.slowest = max(l.slowest, took)
	if r.err != nil || r.status != http.StatusOK {
		l.failures = append(l.failures, fmt.Sprintf("%s: %s", now.Format("15:04:05.000"), r))
		return
	}
	l.longestGap = max(l.longestGap, now.Sub(l.lastSuccess))
	l.lastSuccess = now
}

func (l *load) finish() {
	l.stop()
	l.wg.Wait()
}

// previousRelease is the release the suite upgrades from, as `make previous-release` builds it
// into bin/previous/<commit>/ from the commit or tag hack/previous-release pins: its chart
// directory and its image, which the node imports (it is in no registry).
type previousRelease struct {
	chart, image, repo, tag string
}

func (s *suite) previous(t *testing.T) previousRelease {
	t.Helper()
	pin, err := os.ReadFile(filepath.Join(s.root, "hack", "previous-release"))
	if err != nil {
		t.Fatal(err)
	}
	git := exec.Command("git", "rev-parse", "--verify", strings.TrimSpace(string(pin))+"^{commit}")
	git.Dir = s.root
	commit, err := git.Output()
	if err != nil {
		t.Fatalf("hack/previous-release: %v (make previous-release says how to fetch it)", err)
	}
	dir := filepath.Join(s.root, "bin", "previous", strings.TrimSpace(string(commit)))
	name, err := os.ReadFile(filepath.Join(dir, "image-name"))
	if err != nil {
		t.Fatalf("the previous release is not built: %v (make previous-release; make test-cluster does)", err)
	}
	p := previousRelease{chart: filepath.Join(dir, "chart"), image: filepath.Join(dir, "switchboard.tar")}
	var ok bool
	if p.repo, p.tag, ok = strings.Cut(strings.TrimSpace(string(name)), ":"); !ok {
		t.Fatalf("%s/image-name: %q has no tag", dir, name)
	}
	return p
}

// testUpgradeFromPrevious is a platform team's upgrade: on a clean slate (the kustomize install
// removed, CRDs and all), the previous release is installed from its own chart, a key is
// issued by it, and four clients call the API with that key without pause while the one-time
// CRD adoption docs/upgrading.md gives is run and `helm upgrade` moves the release to this
// one's chart from the registry, its image by digest. Every pod must roll onto the digest, the
// API server's CRDs must be this release's, the key must still work, and not one request
// may fail: readiness gating, the server's shutdown delay and the rollout strategy must make
// the upgrade invisible to clients.
func testUpgradeFromPrevious(t *testing.T) {
	ctx := context.Background()
	if s.kustomized != "" { // else (go test -run) nothing was installed
		s.saveLogs(t)
		// The APIKeys first, while the operator runs: their finalizer removes their hashes.
		s.kubectl(t, "delete", "apikeys,connections", "--all", "--all-namespaces", "--wait", "--timeout=2m")
		s.must(t, s.kustomized, "kubectl", "delete", "-f", "-", "--wait", "--timeout=3m", "--ignore-not-found")
	}
	eventually(t, 2*time.Minute, "the kustomize install gone", func() error {
		for _, crd := range strings.Fields(s.kubectl(t, "get", "crd", "-o", "name")) {
			if strings.HasSuffix(crd, ".switchboard.dev") {
				return fmt.Errorf("%s is still there", crd)
			}
		}
		ns := &corev1.Namespace{}
		if err := s.k8s.Get(ctx, client.ObjectKey{Name: systemNamespace}, ns); err == nil {
			return fmt.Errorf("namespace %s is still there (%s)", systemNamespace, ns.Status.Phase)
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})

	prev := s.previous(t)
	if _, err := s.c.Ctr("images", "import", prev.image); err != nil {
		t.Fatal(err)
	}
	args := []string{"install", release, prev.chart, "--create-namespace", "--namespace", systemNamespace,
		"--set", "image.repository=" + prev.repo, "--set", "image.tag=" + prev.tag}
	s.must(t, "", s.helm, append(args, s.helmValues()...)...)
	t.Logf("the previous release (%s:%s) installed from %s", prev.repo, prev.tag, prev.chart)
	s.tenant(t, "tenant-c", "load")
	key := s.claim(t, "tenant-c", "load")
	s.issued = append(s.issued, key)
	before := map[string]bool{}
	for _, component := range []string{"operator", "server", "panel"} {
		for _, p := range s.pods(t, component) {
			before[p.Name] = true
		}
	}

	api := s.serviceURL(t, "switchboard-api")
	l := startLoad(s.c.HTTPClient(), api, key, 4)
	defer l.finish()
	time.Sleep(3 * time.Second)
	start := time.Now()
	adoptCRDs(t)
	args = append(append([]string{"upgrade", release}, s.chart()...), s.helmInstallArgs()...)
	s.must(t, "", s.helm, args...)
	s.readyDeployment(t, "switchboard-server", 3*time.Minute)
	s.readyDeployment(t, "switchboard-operator", 3*time.Minute)
	s.readyDeployment(t, "switchboard-panel", 3*time.Minute)
	rolled := time.Since(start)
	eventually(t, 2*time.Minute, "only this release's pods, on its digest", func() error {
		for _, component := range []string{"operator", "server", "panel"} {
			pods := s.pods(t, component)
			for _, p := range pods {
				if before[p.Name] {
					return fmt.Errorf("pod %s of the previous release is still there", p.Name)
				}
				if len(p.Status.ContainerStatuses) != 1 {
					return fmt.Errorf("pod %s has no container status yet", p.Name)
				}
				if err := checkOnDigest(p.Name, p.Spec.Containers[0].Image, p.Status.ContainerStatuses[0].ImageID); err != nil {
					return err
				}
			}
			if len(pods) != 2 {
				return fmt.Errorf("%d %s pods, want 2", len(pods), component)
			}
		}
		return nil
	})
	time.Sleep(5 * time.Second)
	l.finish()

	t.Logf("upgrade from the previous release: rolled in %s; %d requests, %d failed, longest gap between successes %s, slowest request %s",
		rolled.Round(100*time.Millisecond), l.requests, len(l.failures), l.longestGap.Round(time.Millisecond), l.slowest.Round(time.Millisecond))
	if l.requests < 100 {
		t.Fatalf("only %d requests were sent during the upgrade; the load did not run", l.requests)
	}
	if len(l.failures) > 0 {
		t.Errorf("%d of %d requests failed during the upgrade, want none; the first: %v",
			len(l.failures), l.requests, l.failures[:min(len(l.failures), 10)])
	}
	if r := listConnections(ctx, s.c.HTTPClient(), api, key); r.status != http.StatusOK {
		t.Errorf("the key the previous release issued, after the upgrade: %s", r)
	}
	checkCRDs(t)
}

// adoptionSection is docs/upgrading.md's section with the one-time CRD adoption.
const adoptionSection = "## Once: CRDs installed before the chart owned them"

// adoptCRDs runs docs/upgrading.md's one-time step before the first upgrade from a release whose
// chart installed the CRDs from crds/, exactly as the doc gives it (its section's shell block):
// it gives them the ownership metadata without which Helm refuses to take them over as
// templates of the release.
func adoptCRDs(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(s.root, "docs", "upgrading.md"))
	if err != nil {
		t.Fatal(err)
	}
	script, err := shellBlock(string(doc), adoptionSection)
	if err != nil {
		t.Fatalf("docs/upgrading.md: %v", err)
	}
	t.Logf("docs/upgrading.md's adoption step:\n%s", script)
	s.must(t, "", "bash", "-euo", "pipefail", "-c", script)
}

// shellBlock is the first ```sh block of a Markdown section.
func shellBlock(doc, heading string) (string, error) {
	_, section, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		return "", fmt.Errorf("no section %q", heading)
	}
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	_, block, ok := strings.Cut(section, "\n```sh\n")
	if !ok {
		return "", fmt.Errorf("section %q has no sh block", heading)
	}
	block, _, ok = strings.Cut(block, "\n```")
	if !ok {
		return "", fmt.Errorf("section %q: its sh block does not end", heading)
	}
	return block + "\n", nil
}

// checkCRDs compares the schema of every version of the API server's switchboard CRDs with the
// chart's CRD files in this commit (charts/switchboard/files/crds, which `make manifests` writes
// and the chart renders as templates), and checks that they are the release's.
func checkCRDs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(s.root, "charts", "switchboard", "files", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRD files in the chart: %v", err)
	}
	for _, file := range files {
		b, err := os.ReadFile(filepath.Clean(file))
		if err != nil {
			t.Fatal(err)
		}
		want := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, want); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := json.Unmarshal([]byte(s.kubectl(t, "get", "crd", want.Name, "-o", "json")), got); err != nil {
			t.Fatal(err)
		}
		if len(got.Spec.Versions) != len(want.Spec.Versions) {
			t.Errorf("CRD %s serves %d versions, want %d", want.Name, len(got.Spec.Versions), len(want.Spec.Versions))
			continue
		}
		for i, v := range want.Spec.Versions {
			if !equality.Semantic.DeepEqual(got.Spec.Versions[i].Schema, v.Schema) || got.Spec.Versions[i].Name != v.Name {
				t.Errorf("CRD %s version %s: the API server's schema is not this release's (%s)", want.Name, v.Name, file)
			}
		}
		// The adoption step sets Helm's ownership metadata; only the chart's template sets keep.
		if got.Labels["app.kubernetes.io/managed-by"] != "Helm" || got.Annotations["meta.helm.sh/release-name"] != release ||
			got.Annotations["helm.sh/resource-policy"] != "keep" {
			t.Errorf("CRD %s is not the release's template: labels %v, annotations %v", want.Name, got.Labels, got.Annotations)
		}
	}
}
