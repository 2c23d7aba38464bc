//go:build !unit

package v1alpha1_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestBindingDocsExamples: the objects of docs/keys.md's "Workload binding" (the bound APIKey
// and the Deployment that mounts its key and a projected token; the key bound to a public key)
// are admitted by the API server as written, nothing unknown dropped.
func TestBindingDocsExamples(t *testing.T) {
	ns := env.Namespace(t, "bindingdocs")
	var kinds []string
	for _, name := range []string{"payments", "billing-export"} {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(docsExample(t, name)), 4096)
		for {
			o := &unstructured.Unstructured{}
			if err := dec.Decode(&o.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("the example of %s: %v", name, err)
			}
			if len(o.Object) == 0 {
				continue
			}
			o.SetNamespace(ns)
			if err := env.Client.Create(ctx(t), o, client.FieldValidation("Strict")); err != nil {
				t.Fatalf("the API server refuses docs/keys.md's %s %s: %v", o.GetKind(), o.GetName(), err)
			}
			kinds = append(kinds, o.GetKind()+"/"+o.GetName())
		}
	}
	if len(kinds) != 3 {
		t.Fatalf("created %v, want the APIKey payments, the Deployment checkout and the APIKey billing-export", kinds)
	}
}
