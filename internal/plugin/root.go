// Package plugin implements kubectl-switchboard, the kubectl plugin that creates, lists, rotates
// and revokes switchboard API keys and port-forwards to the web panel. Every call is made with
// the user's own Kubernetes identity (their kubeconfig), so RBAC decides what they may do.
package plugin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/logging"
	"github.com/switchboard-dev/switchboard/internal/scheme"
	"github.com/switchboard-dev/switchboard/internal/version"
)

// Options is the state shared by all commands: where to reach the cluster and as whom, where
// to write, and the clock.
type Options struct {
	genericiooptions.IOStreams

	// Flags are the standard kubectl flags (--kubeconfig, --context, -n, …).
	Flags *genericclioptions.ConfigFlags
	// Clock tells the time for rotation requests, expiries and ages; tests may inject one.
	Clock clock.PassiveClock
	// PollInterval is how often an APIKey is read while waiting for the operator (default
	// keyclient.DefaultPollInterval).
	PollInterval time.Duration

	once      sync.Once
	client    client.Client
	config    *rest.Config
	namespace string
	explicit  bool
	err       error
}

// NewCommand returns the kubectl-switchboard root command. streams are where it reads and
// writes; flags may be nil, in which case the standard kubectl flags are created and bound.
func NewCommand(streams genericiooptions.IOStreams, flags *genericclioptions.ConfigFlags) *cobra.Command {
	if flags == nil {
		flags = genericclioptions.NewConfigFlags(true)
	}
	return newRootCommand(&Options{IOStreams: streams, Flags: flags, Clock: clock.RealClock{}})
}

// newRootCommand builds the command tree on o.
func newRootCommand(o *Options) *cobra.Command {
	streams, flags := o.IOStreams, o.Flags
	root := &cobra.Command{
		Use:   "kubectl-switchboard",
		Short: "Manage switchboard API keys with your own Kubernetes identity",
		Long: "kubectl switchboard creates, lists, rotates and revokes switchboard API keys and opens the\n" +
			"web panel. It acts with your kubeconfig's identity: RBAC decides what you may do.",
		Version:       version.Version,
		SilenceErrors: true,
		SilenceUsage:  true,
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl switchboard",
		},
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	flags.AddFlags(root.PersistentFlags())

	key := &cobra.Command{Use: "key", Short: "Create, list, reveal, rotate and revoke API keys, set what they may do, and show their status and history"}
	key.AddCommand(newKeyCreateCommand(o), newKeyListCommand(o), newKeyRevealCommand(o),
		newKeyRotateCommand(o), newKeyRevokeCommand(o), newKeyPolicyCommand(o), newKeyStatusCommand(o), newKeyHistoryCommand(o),
		newKeyCanICommand(o))
	conn := &cobra.Command{Use: "connection", Aliases: []string{"connections", "conn"}, Short: "List Connections"}
	conn.AddCommand(newConnectionListCommand(o))
	root.AddCommand(key, conn, newPanelCommand(o), newVersionCommand(o))
	return root
}

// Main runs the plugin with args (without the program name) and returns the process exit
// code. A failure is reported as one line on streams.ErrOut.
func Main(ctx context.Context, streams genericiooptions.IOStreams, flags *genericclioptions.ConfigFlags, args []string) int {
	cmd := NewCommand(streams, flags)
	cmd.SetArgs(args)
	// Every call to the cluster takes its logger from this context: none logs a Secret's body.
	if err := cmd.ExecuteContext(logging.IntoContext(ctx)); err != nil {
		if !errors.Is(err, errNo) { // an answer, printed already
			fmt.Fprintln(streams.ErrOut, "error: "+oneLine(err.Error()))
		}
		return 1
	}
	return 0
}

// oneLine folds a multi-line message (some API server messages have several) into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// nameCommand makes cmd, which carries its texts and flags, `key VERB NAME`: cobra checks that
// its one argument is an object's name, and run gets it with the command's context.
func nameCommand(cmd *cobra.Command, run func(ctx context.Context, name string) error) *cobra.Command {
	cmd.Args = exactlyOneName("key " + cmd.Name())
	cmd.RunE = func(cmd *cobra.Command, args []string) error { return run(cmd.Context(), args[0]) }
	return cmd
}

// exactlyOneName requires one argument that can be an object name, with a clear message.
func exactlyOneName(use string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("%s needs exactly one NAME argument, got %d", use, len(args))
		}
		if errs := validation.IsDNS1123Subdomain(args[0]); len(errs) > 0 {
			return fmt.Errorf("%q is not a valid name: %s", args[0], errs[0])
		}
		return nil
	}
}

// getKey connects and reads APIKey name of the namespace, explaining a refusal as the other
// commands do.
func (o *Options) getKey(ctx context.Context, name string) (client.Client, string, *switchboardv1alpha1.APIKey, error) {
	c, ns, err := o.connect()
	if err != nil {
		return nil, "", nil, err
	}
	key := &switchboardv1alpha1.APIKey{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, key); err != nil {
		return nil, "", nil, explain(err, action{verb: "get", resource: "apikeys.switchboard.dev", kind: "APIKey", namespace: ns, name: name})
	}
	return c, ns, key, nil
}

// connect builds, once, the client for the user's kubeconfig and resolves the namespace.
func (o *Options) connect() (client.Client, string, error) {
	o.once.Do(func() {
		loader := o.Flags.ToRawKubeConfigLoader()
		o.namespace, o.explicit, o.err = loader.Namespace()
		if o.err != nil {
			o.err = fmt.Errorf("reading the kubeconfig: %w", o.err)
			return
		}
		o.config, o.err = o.Flags.ToRESTConfig()
		if o.err != nil {
			o.err = fmt.Errorf("reading the kubeconfig: %w", o.err)
			return
		}
		o.config = rest.CopyConfig(o.config)
		o.config.UserAgent = "kubectl-switchboard/" + version.Version
		o.client, o.err = client.New(o.config, client.Options{Scheme: scheme.Scheme})
		if o.err != nil {
			o.err = fmt.Errorf("connecting to the cluster: %w", o.err)
		}
	})
	return o.client, o.namespace, o.err
}

// answeredYes reads the answer to a question asked on stderr: y or yes, in any case, confirms.
func (o *Options) answeredYes() bool {
	answer, _ := bufio.NewReader(o.In).ReadString('\n')
	answer = strings.ToLower(strings.TrimSpace(answer))
	return answer == "y" || answer == "yes"
}

// systemNamespace is where switchboard is installed: the default one, not the user's current
// namespace, unless an explicit -n/--namespace says otherwise.
func (o *Options) systemNamespace() string {
	if o.Flags.Namespace != nil && *o.Flags.Namespace != "" {
		return *o.Flags.Namespace
	}
	return switchboardv1alpha1.DefaultSystemNamespace
}

// keys connects and returns the key workflow acting with the user's identity, and the namespace.
func (o *Options) keys() (*keyclient.Client, string, error) {
	c, ns, err := o.connect()
	if err != nil {
		return nil, "", err
	}
	return keyclient.New(c, keyclient.Options{Clock: o.Clock, PollInterval: o.PollInterval}), ns, nil
}
