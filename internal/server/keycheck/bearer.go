package keycheck

import "strings"

// parseAuthorization extracts the token of an `Authorization: Bearer <token>` header value:
// the first step of authenticate, for every request of every protocol.
//
// The scheme is matched case-insensitively ("bearer" works too), as RFC 7235 section 2.1 makes
// auth-schemes case-insensitive. Exactly one space separates it from the token, and the token
// must be an RFC 6750 b64token: one run of letters, digits and -._~+/ with optional trailing '='.
// Anything else (another scheme, no token, two tokens, extra or other whitespace) is malformed.
// It does not allocate.
func parseAuthorization(value string) (token string, ok bool) {
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

func isB64TokenChar(c byte) bool { return b64token[c] }

// b64token marks the characters of an RFC 6750 b64token other than the trailing '=': a table,
// because this runs for every character of every presented key.
var b64token = func() (t [256]bool) {
	for c := range 256 {
		switch b := byte(c); {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
			t[c] = true
		case b == '-', b == '.', b == '_', b == '~', b == '+', b == '/':
			t[c] = true
		}
	}
	return t
}()
