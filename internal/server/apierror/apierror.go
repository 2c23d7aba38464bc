// Package apierror is the error answer of every switchboard endpoint that speaks for the API:
// the codes clients branch on and the JSON error object that carries them, the same on /v1 and
// on a gateway's denial.
package apierror

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// The error codes. They are the contract clients branch on; docs/api.md has one table of them
// all and api/openapi/openapi.yaml lists them too.
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
	// add up to --max-in-flight-bytes-per-namespace (internal/server/v1api).
	CodeTooManyConcurrent = "TOO_MANY_CONCURRENT_REQUESTS"
	// CodeBodyNotAllowed: the request carried a body, which no /v1 route reads (the front
	// door refuses it before any handler, and closes the connection).
	CodeBodyNotAllowed = "BODY_NOT_ALLOWED"
	CodeNotReady       = "NOT_READY"
	CodeInternal       = "INTERNAL_ERROR"
)

type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Write writes the JSON error object every non-2xx answer carries, with status.
func Write(w http.ResponseWriter, status int, code, message string) {
	raw := JSON(code, message)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(raw)))
	w.WriteHeader(status)
	_, _ = w.Write(raw) //nolint:gosec // JSON (application/json, nosniff), HTML-escaped by json.Marshal
}

// JSON is the JSON error object of code and message, for protocols that carry the body
// otherwise than in an http.ResponseWriter (Envoy's ext_authz).
func JSON(code, message string) []byte {
	raw, err := json.Marshal(errorBody{Error: errorObject{Code: code, Message: message}})
	if err != nil { // cannot happen with two strings; keep the contract's shape anyway
		raw = []byte(`{"error":{"code":"INTERNAL_ERROR","message":"encoding the error failed"}}`)
	}
	return raw
}
