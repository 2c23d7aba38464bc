package bearer

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-dev/switchboard/internal/apikey"
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
			token, ok := ParseAuthorization(tt.value)
			if token != tt.token || ok != tt.ok {
				t.Errorf("ParseAuthorization(%q) = %q, %v; want %q, %v", tt.value, token, ok, tt.token, tt.ok)
			}
		})
	}
}

// FuzzAuthorization checks the header parser's invariants on any input: no panic, and a token
// is returned only when the value is exactly a Bearer scheme, one space and a b64token.
func FuzzAuthorization(f *testing.F) {
	for _, seed := range []string{"", "Bearer", "Bearer ", "Bearer x", "bearer sb_live_abc", "Basic eA==",
		"Bearer  x", "Bearer x y", "Bearer ==", "Bearer a=", "Bearer \u00e9", "BEARER x\t", strings.Repeat("Bearer ", 50)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		token, ok := ParseAuthorization(value)
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

// FuzzKeyParse checks the key parser (internal/apikey, which every bearer token goes through) on any input: no panic, only the documented errors, and
// a key that parses has the key's shape and a stable hash.
func FuzzKeyParse(f *testing.F) {
	valid, err := apikey.Generate("sb")
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{"", valid, valid[:len(valid)-1], valid + "x", "sb_live_", "acme_live_x", strings.ToUpper(valid)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := apikey.Parse(key, "sb")
		switch {
		case err == nil:
			if len(key) != len("sb_live_")+apikey.SecretLength || !strings.HasPrefix(key, "sb_live_") {
				t.Fatalf("accepted a key of the wrong shape: %q", key)
			}
			if apikey.Sum(key) != sha256.Sum256([]byte(key)) {
				t.Fatal("Sum is not the SHA-256 of the key")
			}
		case !errors.Is(err, apikey.ErrMalformed) && !errors.Is(err, apikey.ErrWrongPrefix) && !errors.Is(err, apikey.ErrChecksum):
			t.Fatalf("undocumented error %v", err)
		}
	})
}
