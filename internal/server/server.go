// Package server serves the /v1 Connections API from the informer cache.
package server

import (
	"context"
	"errors"

	"k8s.io/client-go/rest"
)

// Options configure the API server.
type Options struct {
	// Listen is the address of the /v1 API.
	Listen string
	// SystemNamespace holds the hash Secrets.
	SystemNamespace string
	// KeyPrefix begins every valid key.
	KeyPrefix string
}

// Run serves until ctx is done.
func Run(_ context.Context, _ *rest.Config, _ Options) error {
	return errors.New("the API server is not implemented yet")
}
