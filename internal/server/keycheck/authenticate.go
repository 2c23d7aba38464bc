package keycheck

import (
	"time"

	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
)

// authOutcome is the result of authenticating one request.
type authOutcome struct {
	key *keyindex.Key
	// previousGeneration is the generation of the old key presented during its grace (0: the
	// current key), so that its use is recorded apart.
	previousGeneration int64
	// code is empty when the key authenticates, else API_KEY_MISSING or API_KEY_INVALID.
	code string
	// result says why a well-formed key was refused (for metrics and logs).
	result keyindex.Result
	// headerPresent tells a missing header from a malformed one (for WWW-Authenticate).
	headerPresent bool
	// wellFormed is the presented key when apikey.Parse accepted it (so it is short and
	// plain), kept only to compute its hint for the access log. A foreign token is never kept.
	wellFormed string
	// binding is the key's binding (nil: a bearer key), recorded with its hash.
	binding *keyindex.Binding
}

// authenticate runs parse → checksum → SHA-256 → one index lookup → state check on the values
// of the Authorization field, however the protocol carried them. It makes no API call and does
// not allocate.
func authenticate(idx *keyindex.Index, prefix string, values []string, now time.Time) authOutcome {
	if len(values) == 0 {
		return authOutcome{code: apicode.APIKeyMissing}
	}
	if len(values) > 1 {
		return authOutcome{code: apicode.APIKeyMissing, headerPresent: true}
	}
	token, ok := parseAuthorization(values[0])
	if !ok {
		return authOutcome{code: apicode.APIKeyMissing, headerPresent: true}
	}
	if err := apikey.Parse(token, prefix); err != nil {
		return authOutcome{code: apicode.APIKeyInvalid, result: keyindex.Unknown, headerPresent: true}
	}
	sum := apikey.Sum(token)
	key, result, prev, binding := idx.LookupBound(&sum, now)
	if result != keyindex.OK {
		return authOutcome{code: apicode.APIKeyInvalid, result: result, headerPresent: true, wellFormed: token}
	}
	return authOutcome{key: key, previousGeneration: prev, headerPresent: true, wellFormed: token, binding: binding}
}
