package server

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/switchboard-dev/switchboard/internal/ratelimit"
)

// Error codes of the /v1 API. They are the contract clients branch on; the README has one table
// of them all and api/openapi/openapi.yaml lists them too.
const (
	CodeAPIKeyMissing    = "API_KEY_MISSING"
	CodeAPIKeyInvalid    = "API_KEY_INVALID"
	CodeNotFound         = "NOT_FOUND"
	CodeMethodNotAllowed = "METHOD_NOT_ALLOWED"
	CodeInvalidParameter = "INVALID_PARAMETER"
	CodeRateLimited      = "RATE_LIMITED"
	CodeKeyRateLimited   = "API_KEY_RATE_LIMITED"
	CodeSourceNotAllowed = "SOURCE_NOT_ALLOWED"
	// CodeAudienceNotAllowed: the key's spec.audiences do not include the route's audience.
	CodeAudienceNotAllowed = "AUDIENCE_NOT_ALLOWED"
	// CodeTooManyConcurrent: the namespace's responses being written on this replica already
	// add up to --max-in-flight-bytes-per-namespace (list.go).
	CodeTooManyConcurrent = "TOO_MANY_CONCURRENT_REQUESTS"
	// CodeBodyNotAllowed: the request carried a body, which no /v1 route reads (the front
	// door refuses it before any handler, and closes the connection).
	CodeBodyNotAllowed = "BODY_NOT_ALLOWED"
	CodeNotReady       = "NOT_READY"
	CodeInternal       = "INTERNAL_ERROR"
)

const (
	msgMissing        = "The Authorization header is missing or malformed: send exactly `Authorization: Bearer <API_KEY>`."
	msgInvalid        = "The API key is not valid: it is unknown, mistyped, revoked, expired, or was replaced by a rotation whose grace period has ended. Rotate the key in the panel to get a new one."
	msgNotFound       = "There is nothing at this path. The API serves GET /v1/connections."
	msgNotReady       = "The server is starting and has not loaded its data yet; retry in a moment."
	msgLimited        = "Authentication failed, and too many authentications from this address have failed; retry after the number of seconds in Retry-After."
	msgBodyNotAllowed = "The request carries a body, and no /v1 route reads one: send requests without a body (no Content-Length other than 0, no Transfer-Encoding)."
	msgInternal       = "The server failed to answer; retry, and report the request id if it persists."

	msgTooManyConcurrent = "Too many responses for this namespace's keys are being sent at once (slow readers hold them until read); retry after the number of seconds in Retry-After, read responses promptly, and page large lists with ?limit=."
)

// realm names the protection space in WWW-Authenticate (RFC 6750 section 3).
const realm = `Bearer realm="switchboard"`

type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// writeError writes the JSON error object every non-2xx answer of the API carries.
func writeError(w http.ResponseWriter, status int, code, message string) {
	raw := errorJSON(code, message)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(raw)))
	w.WriteHeader(status)
	_, _ = w.Write(raw) //nolint:gosec // JSON (application/json, nosniff), HTML-escaped by json.Marshal
}

// errorJSON is the JSON error object of code and message.
func errorJSON(code, message string) []byte {
	raw, err := json.Marshal(errorBody{Error: errorObject{Code: code, Message: message}})
	if err != nil { // cannot happen with two strings; keep the contract's shape anyway
		raw = []byte(`{"error":{"code":"INTERNAL_ERROR","message":"encoding the error failed"}}`)
	}
	return raw
}

// retryAfter formats a Retry-After value in whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.FormatInt(ratelimit.Seconds(d), 10)
}
