package probes

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// TestProbes: /healthz and /readyz answer with all their checks, /<path>/<name> with one, as
// controller-runtime's manager answers them (the charts' probes and people's curl rely on
// both).
func TestProbes(t *testing.T) {
	var p Probes
	failing := func(*http.Request) error { return errors.New("not yet") }
	for _, err := range []error{
		p.AddHealthz("ping", healthz.Ping),
		p.AddReadyz("ping", healthz.Ping),
		p.AddReadyz("index", failing),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	h := p.Handler()
	tests := []struct {
		path string
		want int
	}{
		{"/healthz", http.StatusOK},
		{"/healthz/", http.StatusOK},
		{"/healthz/ping", http.StatusOK},
		{"/readyz", http.StatusInternalServerError},
		{"/readyz/ping", http.StatusOK},
		{"/readyz/index", http.StatusInternalServerError},
		{"/readyz/nothing", http.StatusNotFound},
		{"/readyz?exclude=index", http.StatusOK},
		{"/metrics", http.StatusNotFound},
		{"/", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
			if rec.Code != tt.want {
				t.Errorf("GET %s = %d, want %d", tt.path, rec.Code, tt.want)
			}
		})
	}
	if err := p.AddReadyz("late", healthz.Ping); err == nil {
		t.Error("a check was added after the probes were served")
	}
}

// TestAddRefusesWhatCannotBeServed: a check without a function, or a second of a name.
func TestAddRefusesWhatCannotBeServed(t *testing.T) {
	var p Probes
	if err := p.AddHealthz("nil", nil); err == nil {
		t.Error("a nil check was added")
	}
	if err := p.AddReadyz("ping", healthz.Ping); err != nil {
		t.Fatal(err)
	}
	if err := p.AddReadyz("ping", healthz.Ping); err == nil {
		t.Error("a second readiness check named ping was added")
	}
	if err := p.AddHealthz("ping", healthz.Ping); err != nil {
		t.Errorf("a liveness check may share a readiness check's name: %v", err)
	}
}
