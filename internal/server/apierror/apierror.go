// Package apierror is the error answer of every switchboard endpoint that speaks for the API:
// the JSON error object that carries a code of internal/server/apicode, the same on /v1 and on
// a gateway's denial.
package apierror

import (
	"encoding/json"
	"net/http"
	"strconv"
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
