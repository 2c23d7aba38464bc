//go:build !unit

package gateways

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// The route's audience in every example, the context extension that carries it to the gRPC
// listener, and the headers switchboard gives the upstream of an allowed request (issue 19).
const (
	audience          = "orders"
	audienceExtension = "switchboard.dev/audience"
	releaseNamespace  = "switchboard-system"
)

var upstreamHeaders = []string{"X-Switchboard-Key", "X-Switchboard-Key-Uid", "X-Switchboard-Key-Hint"}

// authzService is what the chart, installed as docs/operating.md says (release switchboard in
// switchboard-system, both listeners on), names the authz Service and its ports.
type authzService struct {
	name, namespace string
	grpcPort        int64
	httpPort        int64
}

func chartAuthzService(t *testing.T) authzService {
	t.Helper()
	cmd := exec.Command(testenv.Helm(t), "template", "switchboard", filepath.Join(testenv.RepoRoot(), "charts", "switchboard"),
		"--namespace", releaseNamespace, "--set", "server.authz.grpc.enabled=true", "--set", "server.authz.http.enabled=true",
		// Behind the chart's NetworkPolicy (on by default), which then needs the gateways named.
		"--set", "server.authz.allowedClients[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=gateways")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm template: %v\n%s", err, stderr.String())
	}
	for _, o := range decodeYAMLStream(t, stdout.Bytes()) {
		m := o.Object
		if o.GetKind() != "Service" || !strings.HasSuffix(o.GetName(), "-authz") {
			continue
		}
		s := authzService{name: o.GetName(), namespace: o.GetNamespace()}
		ports, _, _ := unstructured.NestedSlice(m, "spec", "ports")
		for _, p := range ports {
			pm := p.(map[string]any)
			switch pm["appProtocol"] {
			case "grpc":
				s.grpcPort = int64(pm["port"].(float64))
			case "http":
				s.httpPort = int64(pm["port"].(float64))
			}
		}
		if s.grpcPort == 0 || s.httpPort == 0 {
			t.Fatalf("the chart's %s has ports %v, want a grpc and an http one", s.name, ports)
		}
		return s
	}
	t.Fatal("the chart with both listeners on renders no authz Service")
	return authzService{}
}

func (s authzService) host() string { return s.name + "." + s.namespace + ".svc.cluster.local" }

// objectsOf returns the objects of kind in an example file.
func objectsOf(t *testing.T, file, kind string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, o := range decodeYAMLFile(t, filepath.Join(examplesDir(), file)) {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no %s", file, kind)
	}
	return out
}

func field(t *testing.T, o *unstructured.Unstructured, path ...string) any {
	t.Helper()
	v, found, err := unstructured.NestedFieldNoCopy(o.Object, path...)
	if !found || err != nil {
		t.Fatalf("%s has no %s (%v)", objectName(o), strings.Join(path, "."), err)
	}
	return v
}

// checkGrant: a ReferenceGrant of the Service's namespace lets objects of group/kind in from's
// namespace reach exactly the authz Service.
func checkGrant(t *testing.T, file string, s authzService, group, kind, from string) {
	t.Helper()
	for _, g := range objectsOf(t, file, "ReferenceGrant") {
		if g.GetNamespace() != s.namespace {
			continue
		}
		froms := field(t, g, "spec", "from").([]any)
		tos := field(t, g, "spec", "to").([]any)
		wantFrom := map[string]any{"group": group, "kind": kind, "namespace": from}
		wantTo := map[string]any{"group": "", "kind": "Service", "name": s.name}
		if reflect.DeepEqual(froms, []any{wantFrom}) && reflect.DeepEqual(tos, []any{wantTo}) {
			return
		}
		t.Errorf("%s: %s lets %v reach %v, want %v to reach %v", file, objectName(g), froms, tos, wantFrom, wantTo)
		return
	}
	t.Errorf("%s: no ReferenceGrant in %s lets %s/%s of %s reach Service %s", file, s.namespace, group, kind, from, s.name)
}

// TestExamplesCallTheChartsListeners: every example calls the Service, port and path the chart
// serves, names the route's audience where the gRPC listener or the forward-auth URL reads it,
// hands the upstream switchboard's headers, and fails closed. A renamed Service, a moved port
// or a changed path in the chart fails here, not at a user's gateway.
func TestExamplesCallTheChartsListeners(t *testing.T) {
	s := chartAuthzService(t)
	grpcRef := map[string]any{"name": s.name, "namespace": s.namespace, "port": float64(s.grpcPort)}

	t.Run("envoy-gateway.yaml", func(t *testing.T) {
		for _, p := range objectsOf(t, "envoy-gateway.yaml", "SecurityPolicy") {
			if refs := field(t, p, "spec", "extAuth", "grpc", "backendRefs"); !reflect.DeepEqual(refs, []any{grpcRef}) {
				t.Errorf("%s sends to %v, want %v", objectName(p), refs, grpcRef)
			}
			want := []any{map[string]any{"name": audienceExtension, "type": "Value", "value": audience}}
			if exts := field(t, p, "spec", "extAuth", "contextExtensions"); !reflect.DeepEqual(exts, want) {
				t.Errorf("%s: contextExtensions %v, want %v", objectName(p), exts, want)
			}
			if field(t, p, "spec", "extAuth", "failOpen") != false {
				t.Errorf("%s does not fail closed", objectName(p))
			}
			checkGrant(t, "envoy-gateway.yaml", s, "gateway.envoyproxy.io", "SecurityPolicy", p.GetNamespace())
		}
	})

	t.Run("kgateway.yaml", func(t *testing.T) {
		exts := map[string]bool{}
		for _, e := range objectsOf(t, "kgateway.yaml", "GatewayExtension") {
			exts[e.GetNamespace()+"/"+e.GetName()] = true
			if ref := field(t, e, "spec", "extAuth", "grpcService", "backendRef"); !reflect.DeepEqual(ref, grpcRef) {
				t.Errorf("%s sends to %v, want %v", objectName(e), ref, grpcRef)
			}
			checkGrant(t, "kgateway.yaml", s, "gateway.kgateway.dev", "GatewayExtension", e.GetNamespace())
		}
		for _, p := range objectsOf(t, "kgateway.yaml", "TrafficPolicy") {
			name := field(t, p, "spec", "extAuth", "extensionRef", "name").(string)
			if !exts[p.GetNamespace()+"/"+name] {
				t.Errorf("%s names GatewayExtension %s, which the file does not hold", objectName(p), name)
			}
			want := map[string]any{audienceExtension: audience}
			if got := field(t, p, "spec", "extAuth", "contextExtensions"); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: contextExtensions %v, want %v", objectName(p), got, want)
			}
		}
	})

	t.Run("istio.yaml", func(t *testing.T) {
		provider := istioProvider(t)
		for _, p := range objectsOf(t, "istio.yaml", "AuthorizationPolicy") {
			if field(t, p, "spec", "action") != "CUSTOM" || field(t, p, "spec", "provider", "name") != provider["name"] {
				t.Errorf("%s is not a CUSTOM policy of provider %v", objectName(p), provider["name"])
			}
		}
		grpc, _ := provider["envoyExtAuthzGrpc"].(map[string]any)
		want := map[string]any{"service": s.host(), "port": float64(s.grpcPort), "timeout": "1s", "failOpen": false, "statusOnError": "503"}
		if !reflect.DeepEqual(grpc, want) {
			t.Errorf("the mesh configuration's envoyExtAuthzGrpc is %v, want %v", grpc, want)
		}
		for _, f := range objectsOf(t, "istio.yaml", "EnvoyFilter") {
			patches := field(t, f, "spec", "configPatches").([]any)
			ext, _, _ := unstructured.NestedString(patches[0].(map[string]any), "patch", "value", "typed_per_filter_config",
				"envoy.filters.http.ext_authz", "check_settings", "context_extensions", audienceExtension)
			if ext != audience {
				t.Errorf("%s sets the context extension %s to %q, want %q", objectName(f), audienceExtension, ext, audience)
			}
		}
	})

	t.Run("traefik.yaml", func(t *testing.T) {
		want := fmt.Sprintf("http://%s.%s:%d/authz/%s", s.name, s.namespace, s.httpPort, audience)
		var forwardAuths int
		for _, m := range objectsOf(t, "traefik.yaml", "Middleware") {
			if _, ok, _ := unstructured.NestedMap(m.Object, "spec", "forwardAuth"); !ok {
				continue
			}
			forwardAuths++
			if got := field(t, m, "spec", "forwardAuth", "address"); got != want {
				t.Errorf("%s calls %v, want %s", objectName(m), got, want)
			}
			got, _, _ := unstructured.NestedStringSlice(m.Object, "spec", "forwardAuth", "authResponseHeaders")
			if !reflect.DeepEqual(got, upstreamHeaders) {
				t.Errorf("%s copies %v to the upstream, want %v", objectName(m), got, upstreamHeaders)
			}
		}
		if forwardAuths != 1 {
			t.Errorf("traefik.yaml has %d forwardAuth Middlewares, want 1", forwardAuths)
		}
	})

	t.Run("Caddyfile", func(t *testing.T) {
		text := readExample(t, "Caddyfile")
		for _, want := range []string{
			fmt.Sprintf("forward_auth %s:%d {", s.host(), s.httpPort),
			"uri /authz/" + audience + "\n",
			"copy_headers " + strings.Join(upstreamHeaders, " ") + "\n",
			"request_header -Authorization\n",
		} {
			if !strings.Contains(text, want) {
				t.Errorf("the Caddyfile lacks %q", want)
			}
		}
	})

	t.Run("nginx.conf", func(t *testing.T) {
		text := readExample(t, "nginx.conf")
		for _, want := range []string{
			fmt.Sprintf("server %s:%d;", s.host(), s.httpPort),
			"proxy_pass http://switchboard_authz/authz/nginx/" + audience + ";",
			`proxy_set_header Authorization "";`,
		} {
			if !strings.Contains(text, want) {
				t.Errorf("nginx.conf lacks %q", want)
			}
		}
		for _, h := range upstreamHeaders {
			v := "$upstream_http_" + strings.ReplaceAll(strings.ToLower(h), "-", "_")
			if !regexp.MustCompile(`auth_request_set \$\w+ ` + regexp.QuoteMeta(v) + `;`).MatchString(text) {
				t.Errorf("nginx.conf does not take %s from switchboard's answer", h)
			}
		}
	})
}

func readExample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(examplesDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// istioProvider parses the extension provider of istio.yaml's comment (the mesh
// configuration, which no CRD holds): the indented YAML under "meshConfig:".
func istioProvider(t *testing.T) map[string]any {
	t.Helper()
	var block []string
	in := false
	for _, line := range strings.Split(readExample(t, "istio.yaml"), "\n") {
		body, isComment := strings.CutPrefix(line, "#    ")
		switch {
		case isComment && strings.TrimSpace(body) == "meshConfig:":
			in = true
			block = append(block, body)
		case in && isComment && strings.HasPrefix(body, " "):
			block = append(block, body)
		case in:
			in = false
		}
	}
	if len(block) == 0 {
		t.Fatal("istio.yaml's comment has no meshConfig block")
	}
	var mesh struct {
		MeshConfig struct {
			ExtensionProviders []map[string]any `json:"extensionProviders"`
		} `json:"meshConfig"`
	}
	if err := yaml.UnmarshalStrict([]byte(strings.Join(block, "\n")), &mesh); err != nil {
		t.Fatalf("istio.yaml's meshConfig block: %v\n%s", err, strings.Join(block, "\n"))
	}
	if n := len(mesh.MeshConfig.ExtensionProviders); n != 1 {
		t.Fatalf("istio.yaml's meshConfig names %d extension providers, want 1", n)
	}
	p := mesh.MeshConfig.ExtensionProviders[0]
	if keys := slices.Sorted(maps.Keys(p)); !slices.Equal(keys, []string{"envoyExtAuthzGrpc", "name"}) {
		t.Fatalf("istio.yaml's extension provider has the fields %v, want name and envoyExtAuthzGrpc", keys)
	}
	return p
}
