package server

import (
	"net/http"
	"strings"
	"time"

	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keyindex"
)

// ParseAuthorization extracts the token of an `Authorization: Bearer <token>` header value.
//
// The scheme is matched case-insensitively ("bearer" works too), as RFC 7235 section 2.1 makes
// auth-schemes case-insensitive. Exactly one space separates it from the token, and the token
// must be an RFC 6750 b64token: one run of letters, digits and -._~+/ with optional trailing '='.
// Anything else (another scheme, no token, two tokens, extra or other whitespace) is malformed.
// It does not allocate.
func ParseAuthorization(value string) (token string, ok bool) {
	const scheme = "Bearer "
	if len(value) <= len(scheme) || !strings.EqualFold(value[:len(scheme)], scheme) {
		return "", false
	}
	token = value[len(scheme):]
	i := 0
	for i < len(token) && isB64TokenChar(token[i]) {
		i++
	}
	if i == 0 {
		return "", false
	}
	for i < len(token) && token[i] == '=' {
		i++
	}
	if i != len(token) {
		return "", false
	}
	return token, true
}

func isB64TokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	case c == '-', c == '.', c == '_', c == '~', c == '+', c == '/':
		return true
	}
	return false
}

// authOutcome is the result of authenticating one request.
type authOutcome struct {
	key *keyindex.Key
	// code is empty when the key authenticates, else API_KEY_MISSING or API_KEY_INVALID.
	code string
	// result says why a well-formed key was refused (for metrics and logs).
	result keyindex.Result
	// headerPresent tells a missing header from a malformed one (for WWW-Authenticate).
	headerPresent bool
	// token is the presented key, kept only to compute its hint for a log line.
	token string
}

// authenticate runs parse → checksum → SHA-256 → one index lookup → state check. It makes no
// API call and does not allocate.
func authenticate(idx *keyindex.Index, prefix string, header http.Header, now time.Time) authOutcome {
	values := header["Authorization"]
	if len(values) == 0 {
		return authOutcome{code: CodeAPIKeyMissing}
	}
	if len(values) > 1 {
		return authOutcome{code: CodeAPIKeyMissing, headerPresent: true}
	}
	token, ok := ParseAuthorization(values[0])
	if !ok {
		return authOutcome{code: CodeAPIKeyMissing, headerPresent: true}
	}
	if err := apikey.Parse(token, prefix); err != nil {
		return authOutcome{code: CodeAPIKeyInvalid, result: keyindex.Unknown, headerPresent: true, token: token}
	}
	sum := apikey.Sum(token)
	key, result := idx.Lookup(&sum, now)
	if result != keyindex.OK {
		return authOutcome{code: CodeAPIKeyInvalid, result: result, headerPresent: true, token: token}
	}
	return authOutcome{key: key, headerPresent: true, token: token}
}
