package keycheck

import (
	"strings"
	"testing"
)

func TestParseAuthorization(t *testing.T) {
	key := "sb_live_0123456789abcdefghijABCDEFGHIJklmnopqrstuvw012345"
	tests := []struct {
		name, value, token string
		ok                 bool
	}{
		{"bearer key", "Bearer " + key, key, true},
		{"scheme in lower case", "bearer " + key, key, true},
		{"scheme in upper case", "BEARER " + key, key, true},
		{"b64token characters", "Bearer a-._~+/9==", "a-._~+/9==", true},
		{"empty", "", "", false},
		{"scheme alone", "Bearer", "", false},
		{"scheme and space", "Bearer ", "", false},
		{"two spaces", "Bearer  " + key, "", false},
		{"tab", "Bearer\t" + key, "", false},
		{"trailing space", "Bearer " + key + " ", "", false},
		{"two tokens", "Bearer a b", "", false},
		{"comma", "Bearer a,b", "", false},
		{"other scheme", "Basic " + key, "", false},
		{"scheme prefix", "Bearerx " + key, "", false},
		{"no scheme", key, "", false},
		{"only padding", "Bearer ==", "", false},
		{"padding inside", "Bearer a=b", "", false},
		{"non-ASCII", "Bearer cl\u00e9", "", false},
		{"NUL", "Bearer a\x00", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			token, ok := parseAuthorization(tt.value)
			if token != tt.token || ok != tt.ok {
				t.Errorf("parseAuthorization(%q) = %q, %v; want %q, %v", tt.value, token, ok, tt.token, tt.ok)
			}
		})
	}
}

// FuzzAuthorization checks the header parser's invariants on any input: no panic, and a token
// is returned only when the value is exactly a Bearer scheme, one space and a b64token.
func FuzzParseAuthorization(f *testing.F) {
	for _, seed := range []string{"", "Bearer", "Bearer ", "Bearer x", "bearer sb_live_abc", "Basic eA==",
		"Bearer  x", "Bearer x y", "Bearer ==", "Bearer a=", "Bearer \u00e9", "BEARER x\t", strings.Repeat("Bearer ", 50)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		token, ok := parseAuthorization(value)
		if !ok {
			if token != "" {
				t.Fatalf("a refused header returned a token %q", token)
			}
			return
		}
		if token == "" || !strings.EqualFold(value, "Bearer "+token) || len(value) != len("Bearer ")+len(token) {
			t.Fatalf("accepted %q as token %q", value, token)
		}
		if strings.ContainsAny(token, " \t\r\n,") || strings.TrimRight(token, "=") == "" {
			t.Fatalf("accepted a token that is not a b64token: %q", token)
		}
	})
}
