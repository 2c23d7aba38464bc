package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newDevCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "dev",
		Short: "not implemented yet",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("switchboard dev is not implemented yet")
		},
	}
}
