//go:build nodev

package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newDevCommand stands in for `switchboard dev` in builds without it (-tags nodev, as the image
// is built): dev links controller-runtime's envtest, whose package init needs a writable
// directory, and the image has no control plane to run anyway.
func newDevCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "dev",
		Short: "Not in this build: run `make dev` from a checkout",
		Args:  cobra.ArbitraryArgs,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("this switchboard was built without `dev` (-tags nodev, as the image is); run `make dev` from a checkout of switchboard")
		},
		DisableFlagParsing: true,
	}
}
