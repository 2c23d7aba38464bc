package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/switchboard-dev/switchboard/internal/version"
)

// newVersionCommand is `switchboard version`: the build's version, commit and Go release, as
// text or, for machines, JSON or YAML with kubectl's field names.
func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the build's version, git commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Get()
			var b []byte
			var err error
			switch output {
			case "":
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "Version: %s\nGit Commit: %s\nGo Version: %s\nPlatform: %s\n",
					info.Version, info.Commit, info.GoVersion, info.Platform)
				return err
			case "json":
				b, err = json.MarshalIndent(info, "", "  ")
				b = append(b, '\n')
			case "yaml":
				b, err = yaml.Marshal(info)
			default:
				return fmt.Errorf("unsupported output format %q: use -o json, -o yaml, or no -o for text", output)
			}
			if err == nil {
				_, err = cmd.OutOrStdout().Write(b)
			}
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml")
	return cmd
}
