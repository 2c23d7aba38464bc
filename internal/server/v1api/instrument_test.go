package v1api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-dev/switchboard/internal/apikey"
)

// TestAccessLogShowsOnlyAHint: at verbosity 1 every request is logged with the hint of the key
// it presented, and only when that key was well-formed: a long foreign token (someone's JWT sent
// to the wrong API) is never written, not even in part.
func TestAccessLogShowsOnlyAHint(t *testing.T) {
	a, valid := memoryHandler(t, 1, 1, nil)
	unknown, err := apikey.Generate("sb")
	if err != nil {
		t.Fatal(err)
	}
	foreign := "eyJhbGciOiJSUzI1NiJ9." + strings.Repeat("c2VjcmV0", 800) + ".sig"
	var lines []string
	h := instrument(a, funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 1}))
	tests := []struct {
		name, token, hint string
		status            int
	}{
		{"valid key", valid, apikey.Hint(valid), http.StatusOK},
		{"unknown well-formed key", unknown, apikey.Hint(unknown), http.StatusUnauthorized},
		{"long foreign token", foreign, "", http.StatusUnauthorized},
		{"key with a foreign prefix", "acme_live_" + strings.Repeat("x", 200), "", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines = nil
			r := httptest.NewRequest(http.MethodGet, "/v1/connections", nil)
			r.Header.Set("Authorization", "Bearer "+tt.token)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d", w.Code, tt.status)
			}
			if len(lines) != 1 {
				t.Fatalf("%d log lines, want one access log line: %q", len(lines), lines)
			}
			line := lines[0]
			if !strings.Contains(line, `"key"="`+tt.hint+`"`) {
				t.Errorf("the line does not carry the hint %q: %s", tt.hint, line)
			}
			// No run of 12 characters of the secret part may appear (a hint shows 4 + 4).
			secret := tt.token[strings.LastIndexByte(tt.token, '_')+1:]
			for i := 0; i+12 <= len(secret); i++ {
				if strings.Contains(line, secret[i:i+12]) {
					t.Fatalf("the line holds part of the token: %s", line)
				}
			}
		})
	}
}

// TestRequestID: a caller's short plain X-Request-Id is answered as it is; anything else gets a
// generated id, unique, plain, and in a header value that an append cannot share.
func TestRequestID(t *testing.T) {
	tests := []struct {
		name, sent string
		kept       bool
	}{
		{"caller's id", "req-42_a.B", true},
		{"64 characters", strings.Repeat("a", 64), true},
		{"none", "", false},
		{"65 characters", strings.Repeat("a", 65), false},
		{"not plain", "id with spaces", false},
		{"a header injection attempt", "x\r\nSet-Cookie: a=b", false},
	}
	a, key := memoryHandler(t, 1, 1, nil)
	h := instrument(a, logr.Discard())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/v1/connections", nil)
			r.Header.Set("Authorization", "Bearer "+key)
			if tt.sent != "" {
				r.Header["X-Request-Id"] = []string{tt.sent}
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			got := w.Header()["X-Request-Id"]
			if len(got) != 1 {
				t.Fatalf("X-Request-Id = %q, want one value", got)
			}
			if tt.kept {
				if got[0] != tt.sent {
					t.Errorf("X-Request-Id = %q, want the caller's %q", got[0], tt.sent)
				}
				return
			}
			if len(got[0]) != idLength || !plainID(got[0]) {
				t.Errorf("generated X-Request-Id %q is not %d plain characters", got[0], idLength)
			}
		})
	}
	t.Run("generated ids are unique across batches", func(t *testing.T) {
		seen := map[string]bool{}
		for range 5 * idBatchSize {
			v := requestID(httptest.NewRequest(http.MethodGet, "/", nil))
			if cap(v) != 1 {
				t.Fatalf("the id's header value has capacity %d: an append would write into the next id", cap(v))
			}
			if seen[v[0]] {
				t.Fatalf("id %q given twice", v[0])
			}
			seen[v[0]] = true
		}
	})
}

// TestCountRequest: the pre-bound series count what WithLabelValues would, and a status
// outside them is still counted.
func TestCountRequest(t *testing.T) {
	tests := []struct {
		rt     route
		status int
		label  string
	}{
		{routeIDConnections, http.StatusOK, "200"},
		{routeIDV1Other, http.StatusNotFound, "404"},
		{routeIDOpenAPI, http.StatusMethodNotAllowed, "405"},
		{routeIDConnections, http.StatusTeapot, "418"},
	}
	for _, tt := range tests {
		t.Run(routes[tt.rt].label+" "+tt.label, func(t *testing.T) {
			series := requestsTotal.WithLabelValues(routes[tt.rt].label, tt.label)
			before := testutil.ToFloat64(series)
			countRequest(tt.rt, tt.status, 0.001)
			countRequest(tt.rt, tt.status, 0.001)
			if got := testutil.ToFloat64(series) - before; got != 2 {
				t.Errorf("counted %v, want 2", got)
			}
		})
	}
	if got, want := routeOf("/v1/connections"), routeIDConnections; got != want {
		t.Errorf("routeOf = %v, want %v", got, want)
	}
	if got, want := routeOf("/v1/x"), routeIDV1Other; got != want {
		t.Errorf("routeOf = %v, want %v", got, want)
	}
}
