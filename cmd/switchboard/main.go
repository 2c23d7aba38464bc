// Command switchboard runs the parts of the Connections API: the operator that turns APIKeys
// and Connections into hashed keys and ids, the /v1 API server, and a whole local system for
// development.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/switchboard-dev/switchboard/internal/version"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "switchboard:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "switchboard",
		Short:         "The Connections API, Kubernetes-native",
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newOperatorCommand(), newServerCommand(), newPanelCommand(), newDevCommand())
	return root
}
