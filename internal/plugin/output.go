package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/switchboard-dev/switchboard/internal/scheme"

	"k8s.io/apimachinery/pkg/api/meta"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Output formats.
const (
	outputJSON = "json"
	outputYAML = "yaml"
)

// checkOutput accepts the -o values a command offers: one of formats, or no -o for what plain
// names (text, a table).
func checkOutput(output, plain string, formats ...string) error {
	if output == "" || slices.Contains(formats, output) {
		return nil
	}
	return fmt.Errorf("unsupported output format %q: use -o %s, or no -o for %s", output, strings.Join(formats, ", -o "), plain)
}

// writeJSON writes v as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	if err := json.NewEncoder(w).Encode(v); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}

// printObjects prints a list as kubectl -o json|yaml does: with apiVersion and kind on the
// list and its items, and without managed fields.
func printObjects(w io.Writer, list k8sruntime.Object, output string) error {
	// ExtractList returns pointers into the list, so the items are changed in place.
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	for _, item := range items {
		if err := setKind(item); err != nil {
			return err
		}
		if accessor, err := meta.Accessor(item); err == nil {
			accessor.SetManagedFields(nil)
		}
	}
	if err := setKind(list); err != nil {
		return err
	}
	var p printers.ResourcePrinter = &printers.JSONPrinter{}
	if output == outputYAML {
		p = &printers.YAMLPrinter{}
	}
	return p.PrintObj(list, w)
}

// itemsOf is list's items, each an E: pointers into list.
func itemsOf[E k8sruntime.Object](list k8sruntime.Object) ([]E, error) {
	objs, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	items := make([]E, len(objs))
	for i, obj := range objs {
		items[i] = obj.(E)
	}
	return items, nil
}

func setKind(obj k8sruntime.Object) error {
	gvk, err := apiutil.GVKForObject(obj, scheme.Scheme)
	if err != nil {
		return err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return nil
}
