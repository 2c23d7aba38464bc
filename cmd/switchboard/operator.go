package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newOperatorCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "operator",
		Short: "not implemented yet",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("switchboard operator is not implemented yet")
		},
	}
}
