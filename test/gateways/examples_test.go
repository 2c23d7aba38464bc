//go:build !unit

// The examples of examples/gateways/, kept right the way a cluster would: the CRDs of Envoy
// Gateway, Gateway API, Istio, kgateway and Traefik, as those projects publish them
// (testdata/crds, whose README names each source), are installed into a real kube-apiserver,
// and every document of every example manifest is applied with a server-side dry run and
// strict field validation. A misspelt field, a wrong type, or a value the project's schema or
// CEL rules refuse fails here with the API server's own message. No Envoy can run on these
// machines (nor Istio, kgateway or Traefik); this is how their examples are checked.
//
// The package has no TestMain: each test starts what it needs (a control plane here).

package gateways

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

func examplesDir() string { return filepath.Join(testenv.RepoRoot(), "examples", "gateways") }

// manifests are the example files that are Kubernetes manifests; each must exist.
var manifests = []string{"apikey.yaml", "envoy-gateway.yaml", "istio.yaml", "kgateway.yaml", "traefik.yaml"}

// startControlPlane starts etcd and kube-apiserver for t (stopped when t ends) and installs
// every CRD of testdata/crds; it returns when the API server serves them.
func startControlPlane(t *testing.T) *testenv.Env {
	t.Helper()
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	dirs, err := filepath.Glob(filepath.Join("testdata", "crds", "*"))
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			paths = append(paths, d)
		}
	}
	if len(paths) != 5 {
		t.Fatalf("testdata/crds holds %d folders (%v), want 5: envoy-gateway, gateway-api, istio, kgateway, traefik", len(paths), paths)
	}
	crds, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true, MaxTime: 2 * time.Minute})
	if err != nil {
		t.Fatalf("installing the gateways' CRDs: %v", err)
	}
	if len(crds) != 9 {
		t.Fatalf("installed %d CRDs, want 9 (testdata/crds/README.md lists them)", len(crds))
	}
	return env
}

// TestExamplesOnTheRealCRDs runs, on one control plane with the gateways' CRDs, the checks
// that need an API server.
func TestExamplesOnTheRealCRDs(t *testing.T) {
	env := startControlPlane(t)
	t.Run("every example applies", func(t *testing.T) { testExamplesApply(t, env) })
	t.Run("spoilt examples are refused", func(t *testing.T) { testMistakesAreRefused(t, env) })
	t.Run("the docs' chart values apply", func(t *testing.T) { testDocsChartValues(t, env) })
}

// decodeYAMLFile returns the objects of a multi-document YAML file, in order.
func decodeYAMLFile(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeYAMLStream(t, raw)
	if len(objs) == 0 {
		t.Fatalf("%s holds no object", filepath.Base(path))
	}
	return objs
}

// decodeYAMLStream returns the objects of a multi-document YAML stream, in order.
func decodeYAMLStream(t *testing.T, stream []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(stream), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("decoding document %d: %v", len(objs)+1, err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	return objs
}

// serverDryRun applies o with a server-side dry run and strict field validation: the API server
// checks it fully (schema, CEL rules, admission), reports unknown fields as errors rather than
// dropping them, and stores nothing.
func serverDryRun(ctx context.Context, env *testenv.Env, o *unstructured.Unstructured) error {
	if ns := o.GetNamespace(); ns != "" {
		if err := env.EnsureNamespace(ctx, ns); err != nil {
			return err
		}
	}
	o = o.DeepCopy()
	// Patch, not Client.Apply: only Patch takes FieldValidation, and Strict is what turns a
	// misspelt field into an error instead of a silently dropped value.
	return env.Client.Patch(ctx, o, client.Apply, //nolint:staticcheck // see above
		client.DryRunAll, client.FieldOwner("gateways-test"), client.ForceOwnership, client.FieldValidation("Strict"))
}

func objectName(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
}

// testExamplesApply dry-runs every document of every example manifest.
func testExamplesApply(t *testing.T, env *testenv.Env) {
	files, err := filepath.Glob(filepath.Join(examplesDir(), "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	for _, want := range manifests {
		if !slices.Contains(names, want) {
			t.Errorf("examples/gateways has no %s", want)
		}
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for i, o := range decodeYAMLFile(t, f) {
				if err := serverDryRun(ctx, env, o); err != nil {
					t.Errorf("document %d, %s: the API server refuses it: %v", i+1, objectName(o), err)
				}
			}
		})
	}
}

// testMistakesAreRefused: the dry run is a real check. Each case spoils one document of an
// example the way a hand could (a misspelt field, a value out of an enum, a missing part a
// CEL rule demands) and the API server must refuse it, saying why.
func testMistakesAreRefused(t *testing.T, env *testenv.Env) {
	tests := []struct {
		name  string
		file  string
		kind  string
		spoil func(o map[string]any)
		want  string // in the API server's message
	}{
		{
			name:  "Envoy Gateway: a misspelt field",
			file:  "envoy-gateway.yaml",
			kind:  "SecurityPolicy",
			spoil: func(o map[string]any) { renameField(o, "contextExtension", "spec", "extAuth", "contextExtensions") },
			want:  `.spec.extAuth.contextExtension: field not declared in schema`,
		},
		{
			name: "Envoy Gateway: a context extension of an unknown type",
			file: "envoy-gateway.yaml",
			kind: "SecurityPolicy",
			spoil: func(o map[string]any) {
				exts, _, _ := unstructured.NestedSlice(o, "spec", "extAuth", "contextExtensions")
				exts[0].(map[string]any)["type"] = "Literal"
				_ = unstructured.SetNestedSlice(o, exts, "spec", "extAuth", "contextExtensions")
			},
			want: `Unsupported value: "Literal"`,
		},
		{
			name:  "Envoy Gateway: extAuth with no service (a CEL rule)",
			file:  "envoy-gateway.yaml",
			kind:  "SecurityPolicy",
			spoil: func(o map[string]any) { unstructured.RemoveNestedField(o, "spec", "extAuth", "grpc") },
			want:  "one of grpc or http must be specified",
		},
		{
			name:  "Gateway API: a ReferenceGrant with a misspelt field",
			file:  "envoy-gateway.yaml",
			kind:  "ReferenceGrant",
			spoil: func(o map[string]any) { renameField(o, "froms", "spec", "from") },
			want:  `.spec.froms: field not declared in schema`,
		},
		{
			name:  "Istio: an action that does not exist",
			file:  "istio.yaml",
			kind:  "AuthorizationPolicy",
			spoil: func(o map[string]any) { _ = unstructured.SetNestedField(o, "EXTERNAL", "spec", "action") },
			want:  `Unsupported value: "EXTERNAL"`,
		},
		{
			name:  "Istio: a misspelt provider",
			file:  "istio.yaml",
			kind:  "AuthorizationPolicy",
			spoil: func(o map[string]any) { renameField(o, "providers", "spec", "provider") },
			want:  `.spec.providers: field not declared in schema`,
		},
		{
			name: "Istio: an EnvoyFilter patch of an unknown operation",
			file: "istio.yaml",
			kind: "EnvoyFilter",
			spoil: func(o map[string]any) {
				patches, _, _ := unstructured.NestedSlice(o, "spec", "configPatches")
				_ = unstructured.SetNestedField(patches[0].(map[string]any), "MERGED", "patch", "operation")
				_ = unstructured.SetNestedSlice(o, patches, "spec", "configPatches")
			},
			want: `Unsupported value: "MERGED"`,
		},
		{
			name: "kgateway: a Service reference without its port (a CEL rule)",
			file: "kgateway.yaml",
			kind: "GatewayExtension",
			spoil: func(o map[string]any) {
				unstructured.RemoveNestedField(o, "spec", "extAuth", "grpcService", "backendRef", "port")
			},
			want: "Must have port for Service reference",
		},
		{
			name:  "kgateway: extAuth naming no extension (a CEL rule)",
			file:  "kgateway.yaml",
			kind:  "TrafficPolicy",
			spoil: func(o map[string]any) { unstructured.RemoveNestedField(o, "spec", "extAuth", "extensionRef") },
			want:  "exactly one of the fields in [extensionRef disable] must be set",
		},
		{
			name: "kgateway: a context extension that is not a string",
			file: "kgateway.yaml",
			kind: "TrafficPolicy",
			spoil: func(o map[string]any) {
				_ = unstructured.SetNestedField(o, int64(7), "spec", "extAuth", "contextExtensions", "switchboard.dev/audience")
			},
			want: "spec.extAuth.contextExtensions.switchboard.dev/audience",
		},
		{
			name: "Traefik: a misspelt field",
			file: "traefik.yaml",
			kind: "Middleware",
			spoil: func(o map[string]any) {
				renameField(o, "authResponseHeader", "spec", "forwardAuth", "authResponseHeaders")
			},
			want: `.spec.forwardAuth.authResponseHeader: field not declared in schema`,
		},
		{
			name: "Traefik: a route with no match",
			file: "traefik.yaml",
			kind: "IngressRoute",
			spoil: func(o map[string]any) {
				routes, _, _ := unstructured.NestedSlice(o, "spec", "routes")
				delete(routes[0].(map[string]any), "match")
				_ = unstructured.SetNestedSlice(o, routes, "spec", "routes")
			},
			want: "spec.routes[0].match: Required value",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var target *unstructured.Unstructured
			for _, o := range decodeYAMLFile(t, filepath.Join(examplesDir(), tt.file)) {
				if o.GetKind() == tt.kind {
					target = o
					break
				}
			}
			if target == nil {
				t.Fatalf("%s has no %s", tt.file, tt.kind)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// The example itself passes: the refusal below is the spoiling's doing.
			if err := serverDryRun(ctx, env, target); err != nil {
				t.Fatalf("the example's %s is refused before it is spoilt: %v", objectName(target), err)
			}
			tt.spoil(target.Object)
			err := serverDryRun(ctx, env, target)
			if err == nil {
				t.Fatalf("the API server accepted the spoilt %s", objectName(target))
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("the API server refused the spoilt %s, but its message does not say %q:\n%v", objectName(target), tt.want, err)
			}
		})
	}
}

// renameField moves the field at path to the name to, beside it.
func renameField(o map[string]any, to string, path ...string) {
	v, found, err := unstructured.NestedFieldNoCopy(o, path...)
	if !found || err != nil {
		panic(fmt.Sprintf("rename: no field %v: %v", path, err))
	}
	unstructured.RemoveNestedField(o, path...)
	if err := unstructured.SetNestedField(o, v, append(slices.Clone(path[:len(path)-1]), to)...); err != nil {
		panic(err)
	}
}
