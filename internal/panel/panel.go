// Package panel serves the web panel's "API keys" section. Every action runs against the
// Kubernetes API server with the signed-in person's own bearer token.
package panel

import (
	"errors"
	"net/http"

	"k8s.io/client-go/rest"
)

// Options configure the panel.
type Options struct{}

// NewHandler returns the panel's HTTP handler. cfg locates the API server; its credentials are
// used for nothing but TokenReview.
func NewHandler(_ *rest.Config, _ Options) (http.Handler, error) {
	return nil, errors.New("the panel is not implemented yet")
}
