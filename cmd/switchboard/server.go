package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newServerCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "server",
		Short: "not implemented yet",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("switchboard server is not implemented yet")
		},
	}
}
