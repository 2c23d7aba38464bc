// Command switchboard runs the parts of the Connections API: the operator that turns APIKeys
// and Connections into hashed keys and ids, the /v1 API server, and a whole local system for
// development.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/logging"
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
	root.AddCommand(operatorComponent.command(), serverComponent.command(), panelComponent.command(), webhooksComponent.command(),
		newDevCommand(), newVersionCommand())
	return root
}

// bindLogFlags binds the zap flags (--zap-log-level, …) to f and returns what builds the
// process's logger from them, writing to w: capped to internal/logging's verbosity (client-go
// logs Secret bodies above it) and set as controller-runtime's. Every command that runs long
// sets its logger through here.
func bindLogFlags(f *pflag.FlagSet) func(w io.Writer) logr.Logger {
	var opts zap.Options
	gofs := flag.NewFlagSet("zap", flag.ExitOnError)
	opts.BindFlags(gofs)
	f.AddGoFlagSet(gofs)
	return func(w io.Writer) logr.Logger {
		opts.DestWriter = w
		return logging.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	}
}

// podNamespace is the namespace the process runs in, as the Downward API tells it
// (POD_NAMESPACE), else switchboard's default system namespace.
func podNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return switchboardv1alpha1.DefaultSystemNamespace
}
