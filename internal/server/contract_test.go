//go:build !unit

package server

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
	"github.com/switchboard-dev/switchboard/internal/testenv/fixture"
)

// TestContract covers every row of the /v1 contract against the real API server.
func TestContract(t *testing.T) {
	ns := env.Namespace(t, "contract")
	newConnection(t, ns, "warehouse", "conn_b2warehouse", nil)
	newConnection(t, ns, "crm", "conn_a1crm", nil)
	newConnection(t, ns, "pending", "", nil) // no id yet: never listed

	valid := newKey(t, ns, "valid", switchboardv1alpha1.APIKeySpec{})
	revoked := newKey(t, ns, "revoked", switchboardv1alpha1.APIKeySpec{Revoked: true})
	past := metav1.NewTime(time.Now().Add(-time.Minute))
	expired := newKey(t, ns, "expired", switchboardv1alpha1.APIKeySpec{ExpiresAt: &past})

	// A rotated key: the current key, a previous key past its grace, and (on another APIKey) a
	// previous key still within its grace.
	rotated := newKey(t, ns, "rotated", switchboardv1alpha1.APIKeySpec{})
	oldKey, err := apikey.Generate("sb")
	if err != nil {
		t.Fatal(err)
	}
	setHashSecret(t, fixture.HashSecret(systemNamespace, rotated.APIKey, rotated.Key, oldKey, time.Now().Add(-time.Second)))
	graced := newKey(t, ns, "graced", switchboardv1alpha1.APIKeySpec{})
	gracedOld, err := apikey.Generate("sb")
	if err != nil {
		t.Fatal(err)
	}
	setHashSecret(t, fixture.HashSecret(systemNamespace, graced.APIKey, graced.Key, gracedOld, time.Now().Add(time.Hour)))

	otherPrefix, err := apikey.Generate("acme")
	if err != nil {
		t.Fatal(err)
	}
	unknown, err := apikey.Generate("sb")
	if err != nil {
		t.Fatal(err)
	}
	badChecksum := valid.Key[:len(valid.Key)-1] + flip(valid.Key[len(valid.Key)-1])

	s := startServer(t, nil, noFailureLimit(nil), Deps{}, true)

	tests := []struct {
		name      string
		header    []string // Authorization values; nil: no header
		status    int
		code      string
		challenge string
	}{
		{name: "missing header", header: nil, status: 401, code: apicode.APIKeyMissing, challenge: `Bearer realm="switchboard"`},
		{name: "empty header", header: []string{""}, status: 401, code: apicode.APIKeyMissing},
		{name: "Basic scheme", header: []string{"Basic dXNlcjpwYXNz"}, status: 401, code: apicode.APIKeyMissing, challenge: `Bearer realm="switchboard", error="invalid_request"`},
		{name: "Bearer alone", header: []string{"Bearer"}, status: 401, code: apicode.APIKeyMissing},
		{name: "Bearer and a space", header: []string{"Bearer "}, status: 401, code: apicode.APIKeyMissing},
		{name: "two tokens", header: []string{"Bearer " + valid.Key + " " + valid.Key}, status: 401, code: apicode.APIKeyMissing},
		{name: "two spaces", header: []string{"Bearer  " + valid.Key}, status: 401, code: apicode.APIKeyMissing},
		{name: "tab separator", header: []string{"Bearer\t" + valid.Key}, status: 401, code: apicode.APIKeyMissing},
		{name: "key without scheme", header: []string{valid.Key}, status: 401, code: apicode.APIKeyMissing},
		{name: "two Authorization headers", header: []string{"Bearer " + valid.Key, "Bearer " + valid.Key}, status: 401, code: apicode.APIKeyMissing},
		{name: "wrong prefix", header: []string{"Bearer " + otherPrefix}, status: 401, code: apicode.APIKeyInvalid, challenge: `Bearer realm="switchboard", error="invalid_token"`},
		{name: "not a key at all", header: []string{"Bearer abc"}, status: 401, code: apicode.APIKeyInvalid},
		{name: "bad checksum", header: []string{"Bearer " + badChecksum}, status: 401, code: apicode.APIKeyInvalid},
		{name: "unknown", header: []string{"Bearer " + unknown}, status: 401, code: apicode.APIKeyInvalid},
		{name: "revoked", header: []string{"Bearer " + revoked.Key}, status: 401, code: apicode.APIKeyInvalid},
		{name: "expired", header: []string{"Bearer " + expired.Key}, status: 401, code: apicode.APIKeyInvalid},
		{name: "rotated, past grace", header: []string{"Bearer " + oldKey}, status: 401, code: apicode.APIKeyInvalid},
		{name: "rotated, current key", header: []string{"Bearer " + rotated.Key}, status: 200},
		{name: "rotated, within grace", header: []string{"Bearer " + gracedOld}, status: 200},
		{name: "valid", header: []string{"Bearer " + valid.Key}, status: 200},
		{name: "valid, lower-case scheme", header: []string{"bearer " + valid.Key}, status: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := s.request(t, http.MethodGet, "/v1/connections", func(h http.Header) {
				for _, v := range tt.header {
					h.Add("Authorization", v)
				}
			})
			if resp.Status != tt.status {
				t.Fatalf("status = %d, want %d: %s", resp.Status, tt.status, resp.Body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			if tt.status == 200 {
				list := resp.connections(t)
				if got, want := ids(list), []string{"conn_a1crm", "conn_b2warehouse"}; !slices.Equal(got, want) {
					t.Errorf("ids = %v, want %v (sorted by id, only those with an id)", got, want)
				}
				return
			}
			if code := resp.errorCode(t); code != tt.code {
				t.Errorf("code = %s, want %s", code, tt.code)
			}
			challenge := resp.Header.Get("WWW-Authenticate")
			if !strings.HasPrefix(challenge, "Bearer") {
				t.Errorf("WWW-Authenticate = %q, want a Bearer challenge", challenge)
			}
			if tt.challenge != "" && challenge != tt.challenge {
				t.Errorf("WWW-Authenticate = %q, want %q", challenge, tt.challenge)
			}
		})
	}

	t.Run("connection JSON", func(t *testing.T) {
		resp := s.get(t, "/v1/connections", valid.Key)
		body := string(resp.Body)
		if strings.Contains(body, "secret-credentials-of") || strings.Contains(body, "credentials") {
			t.Errorf("the response leaks credentialsSecretRef: %s", body)
		}
		want := `{"id":"conn_a1crm","name":"crm","display_name":"Crm","provider":"postgres","metadata":{"region":"eu-west-1"},"created_at":"`
		if !strings.HasPrefix(body, `{"connections":[`+want) {
			t.Errorf("body = %s\nwant it to begin with the first connection %s…", body, want)
		}
		list := resp.connections(t)
		if _, err := time.Parse(time.RFC3339, list[0]["created_at"].(string)); err != nil {
			t.Errorf("created_at is not RFC 3339: %v", err)
		}
	})
}

// TestEmptyNamespace: a key in a namespace without Connections gets [], never null.
func TestEmptyNamespace(t *testing.T) {
	ns := env.Namespace(t, "empty")
	k := newKey(t, ns, "lonely", switchboardv1alpha1.APIKeySpec{})
	s := startServer(t, nil, nil, Deps{}, true)
	resp := s.get(t, "/v1/connections", k.Key)
	if resp.Status != 200 || string(resp.Body) != `{"connections":[]}` {
		t.Fatalf("got %d %s, want 200 {\"connections\":[]}", resp.Status, resp.Body)
	}
}

// TestNotFoundAndMethodNotAllowed covers routing after authentication.
func TestNotFoundAndMethodNotAllowed(t *testing.T) {
	ns := env.Namespace(t, "routing")
	k := newKey(t, ns, "router", switchboardv1alpha1.APIKeySpec{})
	s := startServer(t, nil, noFailureLimit(nil), Deps{}, true)
	auth := func(h http.Header) { h.Set("Authorization", "Bearer "+k.Key) }

	tests := []struct {
		name, method, path string
		header             func(http.Header)
		status             int
		code, allow        string
	}{
		{"unknown /v1 path", http.MethodGet, "/v1/keys", auth, 404, apicode.NotFound, ""},
		{"/v1 itself", http.MethodGet, "/v1", auth, 404, apicode.NotFound, ""},
		{"trailing slash", http.MethodGet, "/v1/connections/", auth, 404, apicode.NotFound, ""},
		{"unknown /v1 path without a key is 401 first", http.MethodGet, "/v1/keys", nil, 401, apicode.APIKeyMissing, ""},
		{"POST", http.MethodPost, "/v1/connections", auth, 405, apicode.MethodNotAllowed, "GET, HEAD"},
		{"DELETE", http.MethodDelete, "/v1/connections", auth, 405, apicode.MethodNotAllowed, "GET, HEAD"},
		{"POST without a key is 401 first", http.MethodPost, "/v1/connections", nil, 401, apicode.APIKeyMissing, ""},
		{"outside /v1", http.MethodGet, "/connections", nil, 404, apicode.NotFound, ""},
		{"OpenAPI needs no key", http.MethodGet, "/openapi.yaml", nil, 200, "", ""},
		{"OpenAPI is read-only", http.MethodPut, "/openapi.yaml", nil, 405, apicode.MethodNotAllowed, "GET, HEAD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := s.request(t, tt.method, tt.path, tt.header)
			if resp.Status != tt.status {
				t.Fatalf("status = %d, want %d: %s", resp.Status, tt.status, resp.Body)
			}
			if tt.code != "" {
				if code := resp.errorCode(t); code != tt.code {
					t.Errorf("code = %s, want %s", code, tt.code)
				}
			}
			if got := resp.Header.Get("Allow"); got != tt.allow {
				t.Errorf("Allow = %q, want %q", got, tt.allow)
			}
		})
	}
}

func flip(c byte) string {
	if c == 'a' {
		return "b"
	}
	return "a"
}

// setHashSecret replaces the hash Secret's data and labels with want's, as a rotation would.
func setHashSecret(t testing.TB, want *corev1.Secret) {
	t.Helper()
	var cur corev1.Secret
	if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(want), &cur); err != nil {
		t.Fatal(err)
	}
	cur.Labels, cur.Data = want.Labels, want.Data
	if err := env.Client.Update(ctx(t), &cur); err != nil {
		t.Fatalf("updating hash Secret %s: %v", cur.Name, err)
	}
}
