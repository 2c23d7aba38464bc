//go:build !unit

package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/v1api"
	"github.com/switchboard-dev/switchboard/internal/testenv/fixture"
)

// TestConnectionJSONIsBounded builds the Connection whose /v1 JSON is the largest the CRD's
// schema admits — every field at its limit, written in the characters that JSON escapes into
// the most bytes (U+2028, six bytes for three) — has the API server admit it, and checks that
// its JSON fits v1api.MaxConnectionJSON. It also checks that HTML characters cost what they weigh:
// the Connection of issue 18 (50 values of 500 `<`) was 6 bytes per `<`.
func TestConnectionJSONIsBounded(t *testing.T) {
	ns := env.Namespace(t, "bounded")
	const sep = "\u2028" // 3 bytes of UTF-8, 6 in JSON: the costliest character admitted
	metadata := map[string]switchboardv1alpha1.MetadataValue{}
	left := 32768 / 3 // characters of U+2028 that fit the 32 KiB of values
	for i := range 50 {
		key := strings.Repeat(sep, 39) + string(rune(0x1F600+i)) // 40 characters, distinct
		n := min(500, left)
		left -= n
		metadata[key] = switchboardv1alpha1.MetadataValue(strings.Repeat(sep, n))
	}
	name := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)
	worst := &switchboardv1alpha1.Connection{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: switchboardv1alpha1.ConnectionSpec{
			DisplayName: strings.Repeat(sep, 256), Provider: strings.Repeat("p", 128), Metadata: metadata,
		},
	}
	if err := env.Client.Create(ctx(t), worst); err != nil {
		t.Fatalf("the API server refuses the largest Connection: %v", err)
	}
	worst.Status.ID = "conn_" + strings.Repeat("z", 59)
	if err := env.Client.Status().Update(ctx(t), worst); err != nil {
		t.Fatal(err)
	}
	raw, err := v1api.EncodeConnection(worst)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the largest Connection the schema admits is %d bytes of /v1 JSON (v1api.MaxConnectionJSON %d)", len(raw), v1api.MaxConnectionJSON)
	if len(raw) > v1api.MaxConnectionJSON || len(raw) < v1api.MaxConnectionJSON*9/10 || !json.Valid(raw) {
		t.Errorf("the largest Connection's JSON is %d bytes; v1api.MaxConnectionJSON (%d) should be just above it", len(raw), v1api.MaxConnectionJSON)
	}
	// One more byte of metadata, and the API server refuses it.
	over := worst.DeepCopy()
	over.ResourceVersion, over.Name, over.Status = "", "over", switchboardv1alpha1.ConnectionStatus{}
	over.Spec.Metadata[strings.Repeat(sep, 39)+string(rune(0x1F600+49))] = "xyz" // 32,766 + 3 bytes
	if err := env.Client.Create(ctx(t), over); err == nil || !strings.Contains(err.Error(), "32768 bytes") {
		t.Errorf("a Connection with more than 32 KiB of metadata values: %v", err)
	}

	html := fixture.Connection("a", "html", "conn_html")
	html.Spec.Metadata = map[string]switchboardv1alpha1.MetadataValue{}
	for i := range 50 {
		html.Spec.Metadata[fmt.Sprintf("k%02d", i)] = switchboardv1alpha1.MetadataValue(strings.Repeat("<", 500))
	}
	raw, err = v1api.EncodeConnection(html)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 50*(500+10)+200 || !strings.Contains(string(raw), strings.Repeat("<", 500)) {
		t.Errorf("50 values of 500 `<` are %d bytes of JSON, want about 25,500", len(raw))
	}
	var back struct {
		Metadata map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &back); err != nil || back.Metadata["k07"] != strings.Repeat("<", 500) {
		t.Errorf("the unescaped JSON does not read back: %v", err)
	}
}
