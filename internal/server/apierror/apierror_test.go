package apierror

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/switchboard-dev/switchboard/internal/server/apicode"
)

func TestJSON(t *testing.T) {
	tests := []struct {
		code, message, want string
	}{
		{apicode.APIKeyMissing, "Send a key.", `{"error":{"code":"API_KEY_MISSING","message":"Send a key."}}`},
		{apicode.NotFound, "", `{"error":{"code":"NOT_FOUND","message":""}}`},
		{apicode.InvalidParameter, `limit "x" <is> not a number`, `{"error":{"code":"INVALID_PARAMETER","message":"limit \"x\" \u003cis\u003e not a number"}}`},
	}
	for _, tt := range tests {
		if got := string(JSON(tt.code, tt.message)); got != tt.want {
			t.Errorf("JSON(%q, %q) = %s, want %s", tt.code, tt.message, got, tt.want)
		}
	}
}

// TestWrite: the status, the JSON body and the header fields every error answer carries.
func TestWrite(t *testing.T) {
	w := httptest.NewRecorder()
	Write(w, http.StatusNotFound, apicode.NotFound, "Nothing here.")
	want := `{"error":{"code":"NOT_FOUND","message":"Nothing here."}}`
	if w.Code != http.StatusNotFound || w.Body.String() != want {
		t.Errorf("%d %s, want 404 %s", w.Code, w.Body, want)
	}
	h := w.Header()
	if h.Get("Content-Type") != "application/json" || h.Get("Cache-Control") != "no-store" || h.Get("Content-Length") != strconv.Itoa(len(want)) {
		t.Errorf("header %v", h)
	}
}
