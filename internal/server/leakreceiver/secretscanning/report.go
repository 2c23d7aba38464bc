package secretscanning

import (
	"errors"
	"net/http"

	"github.com/switchboard-dev/switchboard/internal/apikey"
)

// The kinds of error this package returns, each wrapped with what went wrong; HTTPStatus maps
// them to the answer. None contains a token.
var (
	// ErrUnauthenticated: the request's signature is missing, garbled, made with a key GitHub
	// does not publish, or does not match the body. Nothing in the request is believed.
	ErrUnauthenticated = errors.New("request not signed by GitHub")
	// ErrTooLarge: the body or the batch is past its bound.
	ErrTooLarge = errors.New("request too large")
	// ErrMalformed: a signed request that is not in GitHub's format.
	ErrMalformed = errors.New("request not in GitHub's format")
	// ErrUnavailable: GitHub could not be asked (its signing keys, an alert) or answered with
	// an error; GitHub's log of deliveries shows a server error, and the partner program sends
	// the request again.
	ErrUnavailable = errors.New("GitHub unavailable")
	// ErrBadGateway: GitHub's REST API answered, but with something that cannot be read (not
	// JSON, not the expected shape, an alert without its secret, too large). Not the request's
	// fault: GitHub's log of deliveries shows a server error, never a bad request.
	ErrBadGateway = errors.New("GitHub's answer could not be read")
)

// HTTPStatus is the status code that answers a request that failed with err: 401 for a
// request not signed by GitHub, 413 for one too large, 400 for one not in GitHub's format, 502
// when GitHub's API answered what cannot be read, 503 when GitHub could not be asked (so that
// it delivers again), 500 otherwise.
func HTTPStatus(err error) int {
	switch {
	case errors.Is(err, ErrBadGateway):
		return http.StatusBadGateway
	case errors.Is(err, ErrUnauthenticated):
		return http.StatusUnauthorized
	case errors.Is(err, ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrMalformed):
		return http.StatusBadRequest
	case errors.Is(err, ErrUnavailable):
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// Report is one token GitHub found, after the request that carried it was verified. The token
// itself is not kept: the caller knows it by its SHA-256, which is also the identity of the
// leak (the same key reported twice is one leak).
type Report struct {
	// Hash is the token's SHA-256, the form in which switchboard stores keys.
	Hash apikey.Hash
	// FalsePositive says why the token cannot be a key of this installation (another prefix,
	// not a key's shape, a bad checksum: apikey.Parse's error); nil for a candidate, which is
	// a leaked key if Hash belongs to one that was issued.
	FalsePositive error
	// Hint is the token's apikey.Hint for a candidate ("" otherwise): enough for a person to
	// recognise a key, not to use it.
	Hint string
	// Type is the token's type as GitHub names it: the partner program's registered type, or
	// the custom pattern's secret_type.
	Type string
	// URL is where the token was found, if GitHub says (it may be empty).
	URL string
	// Source is what the token was found in: the partner program's source ("content",
	// "commit", "issue_comment", …) or the alert location's type ("commit", "issue_body", …).
	Source string
}

// Candidate says whether the token has this installation's key format, so may be an issued
// key.
func (r Report) Candidate() bool { return r.FalsePositive == nil }

// classify turns a token into its report, without a lookup.
func classify(token, prefix, typ, url, source string) Report {
	r := Report{Hash: apikey.Sum(token), Type: typ, URL: url, Source: source}
	if err := apikey.Parse(token, prefix); err != nil {
		r.FalsePositive = err
		return r
	}
	r.Hint = apikey.Hint(token)
	return r
}

// Labels GitHub accepts in a partner's feedback.
const (
	// LabelTruePositive says the token was a real credential.
	LabelTruePositive = "true_positive"
	// LabelFalsePositive says it was not.
	LabelFalsePositive = "false_positive"
)

// FeedbackEntry is one element of the answer to a partner program request, in GitHub's
// feedback format, by hash (GitHub also accepts token_raw, which switchboard never sends).
type FeedbackEntry struct {
	// TokenHash is the lower-case hex SHA-256 of the token.
	TokenHash string `json:"token_hash"`
	// TokenType is the type GitHub sent with the token.
	TokenType string `json:"token_type"`
	// Label is LabelTruePositive or LabelFalsePositive.
	Label string `json:"label"`
}

// Feedback is the answer to a partner program request that carried reports: one entry per
// report, true_positive when issued says its hash belongs to a key switchboard issued (asked
// for candidates only: a token not of the key format is a false positive without a lookup).
// The caller writes it as JSON with status 200.
func Feedback(reports []Report, issued func(apikey.Hash) bool) []FeedbackEntry {
	out := make([]FeedbackEntry, 0, len(reports))
	for _, r := range reports {
		label := LabelFalsePositive
		if r.Candidate() && issued(r.Hash) {
			label = LabelTruePositive
		}
		out = append(out, FeedbackEntry{TokenHash: r.Hash.String(), TokenType: r.Type, Label: label})
	}
	return out
}
