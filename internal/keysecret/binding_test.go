package keysecret

import (
	"strings"
	"testing"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// TestBindingRecord: a binding encodes the same whatever its lists' order and reads back; a
// record past its bounds or with an unknown mode is refused.
func TestBindingRecord(t *testing.T) {
	a := Binding{Mode: switchboardv1alpha1.BindingEnforce, ServiceAccounts: []string{"web", "api"}, SPIFFEIDs: []string{"spiffe://c/ns/a/sa/web"}}
	b := Binding{Mode: switchboardv1alpha1.BindingEnforce, ServiceAccounts: []string{"api", "web"}, SPIFFEIDs: []string{"spiffe://c/ns/a/sa/web"}}
	if string(a.Encode()) != string(b.Encode()) {
		t.Errorf("the same binding encodes as %s and %s", a.Encode(), b.Encode())
	}
	got, err := ParseBinding(a.Encode())
	if err != nil || got.Mode != a.Mode || strings.Join(got.ServiceAccounts, ",") != "api,web" {
		t.Errorf("read back: %+v, %v", got, err)
	}
	tooMany := Binding{Mode: switchboardv1alpha1.BindingReportOnly, ServiceAccounts: make([]string, MaxBoundServiceAccounts+1)}
	for _, tc := range []struct {
		name, raw, want string
	}{
		{"not JSON", "enforce", "binding:"},
		{"an unknown mode", `{"mode":"Sometimes"}`, `mode "Sometimes"`},
		{"no mode", `{"serviceAccounts":["web"]}`, `mode ""`},
		{"too many ServiceAccounts", string(tooMany.Encode()), "at most 64"},
	} {
		if _, err := ParseBinding([]byte(tc.raw)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}
