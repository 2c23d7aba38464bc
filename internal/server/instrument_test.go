package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"

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
	h := instrument(a, nil, funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 1}))
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
