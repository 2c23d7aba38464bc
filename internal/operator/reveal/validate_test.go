package reveal

import (
	"strings"
	"testing"

	"github.com/switchboard-dev/switchboard/internal/keyclient/reveal"
)

func TestRequestValidate(t *testing.T) {
	ok := reveal.Request{Namespace: "team-a", Name: "web", UID: "6f1c", SecretName: "web-reveal-1", User: "oidc:alice", Groups: []string{"oidc:owners"}}
	tests := []struct {
		name   string
		change func(*reveal.Request)
		want   string // "" for valid
	}{
		{"valid", func(*reveal.Request) {}, ""},
		{"bad namespace", func(r *reveal.Request) { r.Namespace = "Team A" }, "namespace"},
		{"bad secret name", func(r *reveal.Request) { r.SecretName = "../x" }, "secretName"},
		{"no uid", func(r *reveal.Request) { r.UID = "" }, "uid"},
		{"no user", func(r *reveal.Request) { r.User = "" }, "user"},
		{"system user", func(r *reveal.Request) { r.User = "system:admin" }, "system:"},
		{"system group", func(r *reveal.Request) { r.Groups = []string{"oidc:x", "system:masters"} }, "system:"},
		{"long user", func(r *reveal.Request) { r.User = strings.Repeat("a", maxNameLength+1) }, "longer"},
		{"too many groups", func(r *reveal.Request) { r.Groups = make([]string, maxGroups+1) }, "at most"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ok
			r.Groups = append([]string(nil), ok.Groups...)
			tt.change(&r)
			got := validate(&r)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Fatalf("validate() = %q, want %q", got, tt.want)
			}
		})
	}
}
