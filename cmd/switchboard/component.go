package main

import (
	"context"
	"fmt"
	"io"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/config"
)

// The components' configurations: sc the server's, oc the operator's and the webhook sender's,
// pc the panel's.
type (
	sc = configv1alpha1.ServerConfiguration
	oc = configv1alpha1.OperatorConfiguration
	pc = configv1alpha1.PanelConfiguration
)

// component is one of the long-running commands (server, operator, panel, webhooks), which
// share one skeleton: the configuration T completed from --config and the flags bound into it
// (printed with --print-config), the logger, the Kubernetes client configuration, then run.
type component[T config.Object] struct {
	use, short, long string
	// prepare gives the flags' configuration the optional sections its flags bind into.
	prepare func(T)
	// bind binds the component's flags into its configuration.
	bind func(*configFlags[T])
	// systemNamespace, when set, selects the configuration's system namespace: the pod's by default.
	systemNamespace func(T) *string
	// run runs the completed configuration with what only the process has.
	run func(ctx context.Context, c T, p process) error
}

// process is what a component's run takes besides its configuration.
type process struct {
	log  logr.Logger
	rest *rest.Config
}

// command is the component's cobra command.
func (comp component[T]) command() *cobra.Command {
	var (
		flags     *configFlags[T]
		newLogger func(w io.Writer) logr.Logger
	)
	cmd := &cobra.Command{
		Use:   comp.use,
		Short: comp.short,
		Long:  comp.long,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := newLogger(cmd.ErrOrStderr())
			c, warnings, err := flags.complete()
			for _, w := range warnings {
				log.WithName("flags").Info(w)
			}
			if err != nil {
				return err
			}
			if flags.print {
				b, err := config.Marshal(c)
				if err == nil {
					_, err = cmd.OutOrStdout().Write(b)
				}
				return err
			}
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return fmt.Errorf("finding the Kubernetes API server: %w", err)
			}
			return comp.run(ctrl.SetupSignalHandler(), c, process{log: log, rest: cfg})
		},
	}
	newLogger = bindLogFlags(cmd.Flags())
	flags = newConfigFlags(cmd.Flags(), comp.prepare, comp.systemNamespace)
	comp.bind(flags)
	return cmd
}
