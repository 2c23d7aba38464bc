// Package operator runs switchboard's controllers in a controller-runtime manager.
package operator

import (
	"context"
	"errors"

	"k8s.io/client-go/rest"
)

// Options configure the operator.
type Options struct {
	// SystemNamespace holds the hash Secrets.
	SystemNamespace string
	// KeyPrefix begins every generated key.
	KeyPrefix string
}

// Run runs the operator until ctx is done.
func Run(_ context.Context, _ *rest.Config, _ Options) error {
	return errors.New("the operator is not implemented yet")
}
