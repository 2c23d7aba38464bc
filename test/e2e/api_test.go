//go:build e2e

package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"
)

// response is one /v1 answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// call makes a plain HTTP request; authorization is the whole header value ("" sends none).
func (s *system) call(t *testing.T, method, path, authorization string) response {
	t.Helper()
	req, err := http.NewRequest(method, s.baseURL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: body}
}

func (s *system) get(t *testing.T, key string) response {
	t.Helper()
	return s.call(t, http.MethodGet, "/v1/connections", "Bearer "+key)
}

// errorCode checks the contract's error shape and returns error.code.
func (r response) errorCode(t *testing.T) string {
	t.Helper()
	var body struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil || body.Error == nil || body.Error.Code == "" || body.Error.Message == "" {
		t.Fatalf("%d answer is not {\"error\":{\"code\",\"message\"}}: %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("error Content-Type is %q, want application/json", ct)
	}
	return body.Error.Code
}

func (r response) expectError(t *testing.T, what string, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d, want %d (%s)", what, r.status, status, r.body)
	}
	if got := r.errorCode(t); got != code {
		t.Fatalf("%s: code %s, want %s", what, got, code)
	}
}

type connection struct {
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	DisplayName string            `json:"display_name"`
	Provider    string            `json:"provider"`
	Metadata    map[string]string `json:"metadata"`
	CreatedAt   string            `json:"created_at"`
}

// connections checks a 200 list answer and returns its connections' names, sorted.
func (r response) connections(t *testing.T) ([]string, []connection) {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", r.status, r.body)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &raw); err != nil {
		t.Fatalf("the list is not a JSON object: %v: %s", err, r.body)
	}
	if _, ok := raw["connections"]; !ok {
		t.Fatalf("the list has no connections array: %s", r.body)
	}
	if strings.Contains(string(r.body), "credentialsSecretRef") {
		t.Fatalf("the list exposes credentialsSecretRef: %s", r.body)
	}
	var list struct {
		Connections []connection `json:"connections"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatal(err)
	}
	if list.Connections == nil {
		t.Fatalf("connections is null, want an array: %s", r.body)
	}
	var names []string
	for _, c := range list.Connections {
		if !strings.HasPrefix(c.ID, "conn_") {
			t.Errorf("connection %q has id %q, want conn_…", c.Name, c.ID)
		}
		if _, err := time.Parse(time.RFC3339, c.CreatedAt); err != nil {
			t.Errorf("connection %q: created_at %q is not RFC 3339", c.Name, c.CreatedAt)
		}
		names = append(names, c.Name)
	}
	sort.Strings(names)
	return names, list.Connections
}

func equal(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }
