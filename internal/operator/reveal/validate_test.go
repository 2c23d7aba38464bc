package reveal

import (
	"strings"
	"testing"
)

func TestRequestValidate(t *testing.T) {
	ok := Request{Namespace: "team-a", Name: "web", UID: "6f1c", SecretName: "web-reveal-1", User: "oidc:alice", Groups: []string{"oidc:owners"}}
	tests := []struct {
		name   string
		change func(*Request)
		want   string // "" for valid
	}{
		{"valid", func(*Request) {}, ""},
		{"bad namespace", func(r *Request) { r.Namespace = "Team A" }, "namespace"},
		{"bad secret name", func(r *Request) { r.SecretName = "../x" }, "secretName"},
		{"no uid", func(r *Request) { r.UID = "" }, "uid"},
		{"no user", func(r *Request) { r.User = "" }, "user"},
		{"system user", func(r *Request) { r.User = "system:admin" }, "system:"},
		{"system group", func(r *Request) { r.Groups = []string{"oidc:x", "system:masters"} }, "system:"},
		{"long user", func(r *Request) { r.User = strings.Repeat("a", maxNameLength+1) }, "longer"},
		{"too many groups", func(r *Request) { r.Groups = make([]string, maxGroups+1) }, "at most"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ok
			r.Groups = append([]string(nil), ok.Groups...)
			tt.change(&r)
			got := r.validate()
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Fatalf("validate() = %q, want %q", got, tt.want)
			}
		})
	}
}
