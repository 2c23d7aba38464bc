//go:build !unit

package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/switchboard-dev/switchboard/api/openapi"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// schemaChecker validates JSON values against the schemas of the OpenAPI document: the subset
// of JSON Schema 2020-12 the document uses ($ref, type, properties, required,
// additionalProperties, items, enum, pattern, minimum/maximum, minLength, format date-time).
// Anything else in a schema is an error, so the document cannot outgrow the check unnoticed.
type schemaChecker struct{ doc map[string]any }

func loadDocument(t testing.TB) *schemaChecker {
	t.Helper()
	raw, err := yaml.YAMLToJSON(openapi.Document)
	if err != nil {
		t.Fatalf("openapi.yaml is not YAML: %v", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi = %v, want 3.1.0", doc["openapi"])
	}
	return &schemaChecker{doc: doc}
}

// resolve follows a local $ref.
func (c *schemaChecker) resolve(node map[string]any) (map[string]any, error) {
	for range 10 {
		ref, ok := node["$ref"].(string)
		if !ok {
			return node, nil
		}
		var cur any = c.doc
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("bad $ref %s", ref)
			}
			cur = m[part]
		}
		next, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("$ref %s resolves to nothing", ref)
		}
		node = next
	}
	return nil, fmt.Errorf("$ref loop")
}

var knownKeywords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true, "items": true,
	"enum": true, "pattern": true, "minimum": true, "maximum": true, "minLength": true, "format": true,
	"description": true, "$ref": true,
}

func typeOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		if x == float64(int64(x)) {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unknown"
}

// validate checks v against schema; path locates errors.
func (c *schemaChecker) validate(schema map[string]any, v any, path string) error {
	schema, err := c.resolve(schema)
	if err != nil {
		return err
	}
	for k := range schema {
		if !knownKeywords[k] {
			return fmt.Errorf("%s: the checker does not know the keyword %q", path, k)
		}
	}
	if typ, ok := schema["type"]; ok {
		var allowed []string
		switch x := typ.(type) {
		case string:
			allowed = []string{x}
		case []any:
			for _, a := range x {
				allowed = append(allowed, a.(string))
			}
		}
		got := typeOf(v)
		integerAsNumber := got == "integer" && slices.Contains(allowed, "number")
		if !slices.Contains(allowed, got) && !integerAsNumber {
			return fmt.Errorf("%s: %s, want %v", path, got, allowed)
		}
	}
	if enum, ok := schema["enum"].([]any); ok && !slices.Contains(enum, v) {
		return fmt.Errorf("%s: %v is not one of %v", path, v, enum)
	}
	switch x := v.(type) {
	case string:
		if p, ok := schema["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(x) {
			return fmt.Errorf("%s: %q does not match %s", path, x, p)
		}
		if n, ok := schema["minLength"].(float64); ok && float64(len(x)) < n {
			return fmt.Errorf("%s: shorter than %v", path, n)
		}
		if schema["format"] == "date-time" {
			if _, err := time.Parse(time.RFC3339, x); err != nil {
				return fmt.Errorf("%s: %q is not a date-time", path, x)
			}
		}
	case float64:
		if n, ok := schema["minimum"].(float64); ok && x < n {
			return fmt.Errorf("%s: %v < %v", path, x, n)
		}
		if n, ok := schema["maximum"].(float64); ok && x > n {
			return fmt.Errorf("%s: %v > %v", path, x, n)
		}
	case []any:
		if items, ok := schema["items"].(map[string]any); ok {
			for i, item := range x {
				if err := c.validate(items, item, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		for _, r := range asSlice(schema["required"]) {
			if _, ok := x[r.(string)]; !ok {
				return fmt.Errorf("%s: required property %q is missing", path, r)
			}
		}
		for k, val := range x {
			if ps, ok := props[k].(map[string]any); ok {
				if err := c.validate(ps, val, path+"."+k); err != nil {
					return err
				}
				continue
			}
			switch ap := schema["additionalProperties"].(type) {
			case bool:
				if !ap {
					return fmt.Errorf("%s: property %q is not in the schema", path, k)
				}
			case map[string]any:
				if err := c.validate(ap, val, path+"."+k); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// checkResponse checks one real response against the operation pathKey/method of the document.
func (c *schemaChecker) checkResponse(pathKey, method string, resp response) error {
	op, ok := c.doc["paths"].(map[string]any)[pathKey].(map[string]any)[strings.ToLower(method)].(map[string]any)
	if !ok {
		return fmt.Errorf("%s %s is not in the document", method, pathKey)
	}
	node, ok := op["responses"].(map[string]any)[strconv.Itoa(resp.Status)].(map[string]any)
	if !ok {
		return fmt.Errorf("%s %s: status %d is not documented", method, pathKey, resp.Status)
	}
	node, err := c.resolve(node)
	if err != nil {
		return err
	}
	for name, h := range asMap(node["headers"]) {
		h, err := c.resolve(asMap(h))
		if err != nil {
			return err
		}
		value := resp.Header.Get(name)
		if value == "" {
			// Headers marked required: false (the next page's Link, a rate-limited key's
			// RateLimit fields) are only sometimes there; the others always.
			if h["required"] == false {
				continue
			}
			return fmt.Errorf("%s %s %d: documented header %s is missing", method, pathKey, resp.Status, name)
		}
		if p, ok := asMap(h["schema"])["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(value) {
			return fmt.Errorf("%s %s %d: header %s %q does not match %s", method, pathKey, resp.Status, name, value, p)
		}
	}
	content := asMap(node["content"])
	if len(content) == 0 {
		if len(resp.Body) != 0 {
			return fmt.Errorf("%s %s %d: the document says no body, got %s", method, pathKey, resp.Status, resp.Body)
		}
		return nil
	}
	ct := resp.Header.Get("Content-Type")
	media, ok := content[ct].(map[string]any)
	if !ok {
		return fmt.Errorf("%s %s %d: Content-Type %q is not documented", method, pathKey, resp.Status, ct)
	}
	if ct != "application/json" {
		return nil
	}
	var v any
	if err := json.Unmarshal(resp.Body, &v); err != nil {
		return fmt.Errorf("%s %s %d: body is not JSON: %w", method, pathKey, resp.Status, err)
	}
	return c.validate(asMap(media["schema"]), v, "body")
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// TestOpenAPIDocumentMatchesResponses sends every kind of request and checks each real response
// against api/openapi/openapi.yaml.
func TestOpenAPIDocumentMatchesResponses(t *testing.T) {
	doc := loadDocument(t)
	ns := env.Namespace(t, "openapi")
	newConnection(t, ns, "a", "conn_a", map[string]string{"x": "1"})
	newConnection(t, ns, "b", "conn_b", nil)
	empty := env.Namespace(t, "openapi-empty")
	k := newKey(t, ns, "doc", switchboardv1alpha1.APIKeySpec{})
	e := newKey(t, empty, "doc", switchboardv1alpha1.APIKeySpec{})
	s := startServer(t, nil, &sc{AuthFailureLimit: failureLimit(0.001, 4)}, Deps{}, true)
	auth := func(key string) func(http.Header) {
		return func(h http.Header) { h.Set("Authorization", "Bearer "+key) }
	}
	etag := s.get(t, "/v1/connections", k.Key).Header.Get("ETag")
	cases := []struct {
		pathKey, method, path string
		header                func(http.Header)
		status                int
	}{
		{"/v1/connections", "GET", "/v1/connections", auth(k.Key), 200},
		{"/v1/connections", "GET", "/v1/connections?limit=1", auth(k.Key), 200},
		{"/v1/connections", "GET", "/v1/connections", auth(e.Key), 200},
		{"/v1/connections", "GET", "/v1/connections", func(h http.Header) { auth(k.Key)(h); h.Set("If-None-Match", etag) }, 304},
		{"/v1/connections", "GET", "/v1/connections?limit=0", auth(k.Key), 400},
		{"/v1/connections", "POST", "/v1/connections", auth(k.Key), 405},
		{"/v1/{anything}", "GET", "/v1/keys", auth(k.Key), 404},
		// Failures last: the burst of 4 is the startup probe's 401 and these three.
		{"/v1/connections", "GET", "/v1/connections", auth("sb_live_nope"), 401},
		{"/v1/connections", "GET", "/v1/connections", nil, 401},
		{"/v1/connections", "GET", "/v1/connections", func(h http.Header) { h.Set("Authorization", "Basic eA==") }, 401},
		{"/v1/{anything}", "GET", "/v1/keys", nil, 429},
		{"/openapi.yaml", "GET", "/openapi.yaml", nil, 200},
	}
	for _, tc := range cases {
		resp := s.request(t, tc.method, tc.path, tc.header)
		if resp.Status != tc.status {
			t.Errorf("%s %s: status %d, want %d: %s", tc.method, tc.path, resp.Status, tc.status, resp.Body)
			continue
		}
		method := tc.method
		if method == "POST" {
			// 405 is documented on the operation that exists (GET) for the path.
			method = "GET"
		}
		if err := doc.checkResponse(tc.pathKey, method, resp); err != nil {
			t.Errorf("%s %s: %v", tc.method, tc.path, err)
		}
	}

	// A body is refused before authentication, whatever the key, and the connection closed.
	for _, key := range []string{k.Key, ""} {
		req, err := http.NewRequest("GET", s.URL+"/v1/connections", strings.NewReader(`{"limit":1}`))
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			auth(key)(req.Header)
		}
		raw, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(raw.Body)
		_ = raw.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		resp := response{Status: raw.StatusCode, Header: raw.Header, Body: body}
		if resp.Status != 413 || !raw.Close {
			t.Errorf("GET with a body (key %v): status %d, closing %v, want 413 and the connection closed: %s", key != "", resp.Status, raw.Close, resp.Body)
		} else if err := doc.checkResponse("/v1/connections", "GET", resp); err != nil {
			t.Errorf("GET with a body: %v", err)
		}
	}

	g := newGate()
	notReady := startServer(t, g.config(), nil, Deps{}, false)
	resp := notReady.get(t, "/v1/connections", k.Key)
	if err := doc.checkResponse("/v1/connections", "GET", resp); err != nil || resp.Status != 503 {
		t.Errorf("before sync: %d: %v", resp.Status, err)
	}
	g.Open()
}

// TestSchemaCheckerCanFail proves the check above is not vacuous.
func TestSchemaCheckerCanFail(t *testing.T) {
	doc := loadDocument(t)
	ok := response{Status: 200, Header: http.Header{"Content-Type": {"application/json"}, "Etag": {`"x"`}, "X-Request-Id": {"r"}}}
	tests := []struct {
		name string
		body string
	}{
		{"extra top-level property", `{"connections":[],"total":0}`},
		{"null list", `{"connections":null}`},
		{"missing id", `{"connections":[{"name":"a","display_name":null,"provider":null,"metadata":{},"created_at":"2026-01-01T00:00:00Z"}]}`},
		{"bad id", `{"connections":[{"id":"x","name":"a","display_name":null,"provider":null,"metadata":{},"created_at":"2026-01-01T00:00:00Z"}]}`},
		{"leaked field", `{"connections":[{"id":"conn_a","name":"a","display_name":null,"provider":null,"metadata":{},"created_at":"2026-01-01T00:00:00Z","credentialsSecretRef":{"name":"s"}}]}`},
		{"bad time", `{"connections":[{"id":"conn_a","name":"a","display_name":null,"provider":null,"metadata":{},"created_at":"yesterday"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ok
			r.Body = []byte(tt.body)
			if err := doc.checkResponse("/v1/connections", "GET", r); err == nil {
				t.Error("the checker accepted an invalid response")
			}
		})
	}
	bad := response{Status: 401, Header: http.Header{"Content-Type": {"application/json"}, "Www-Authenticate": {"Bearer"}},
		Body: []byte(`{"error":{"code":"NOPE","message":"m"}}`)}
	if err := doc.checkResponse("/v1/connections", "GET", bad); err == nil {
		t.Error("the checker accepted an undocumented error code")
	}
	if err := doc.checkResponse("/v1/connections", "GET", response{Status: 418}); err == nil {
		t.Error("the checker accepted an undocumented status")
	}
}
