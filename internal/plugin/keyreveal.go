package plugin

import (
	"context"
	"time"

	"github.com/spf13/cobra"
)

// keyRevealOptions are the flags of `key reveal`.
type keyRevealOptions struct {
	*Options
	timeout time.Duration
	output  string
}

func newKeyRevealCommand(o *Options) *cobra.Command {
	opts := &keyRevealOptions{Options: o}
	cmd := nameCommand(&cobra.Command{
		Use:   "reveal NAME",
		Short: "Claim and print the key of an APIKey created with kubectl apply or GitOps",
		Long: "Claim the one-time reveal of an existing APIKey's current key (for instance one created with\n" +
			"kubectl apply) and print the key once. It fails if somebody else claimed it first.",
	}, opts.run)
	cmd.Flags().DurationVar(&opts.timeout, "timeout", defaultTimeout, "how long to wait for the operator to publish the key")
	cmd.Flags().StringVarP(&opts.output, "output", "o", "", "output format: json prints {name, namespace, key, hint, expires_at} and nothing else")
	return cmd
}

func (o *keyRevealOptions) run(ctx context.Context, name string) error {
	if err := checkOutput(o.output, "text", outputJSON); err != nil {
		return err
	}
	keys, ns, err := o.keys()
	if err != nil {
		return err
	}
	issued, err := keys.Reveal(ctx, ns, name, o.timeout)
	if err != nil {
		return explainKey(err)
	}
	return printIssued(o.Options, issued, o.output, "revealed", "")
}
