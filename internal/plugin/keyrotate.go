package plugin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-dev/switchboard/internal/keyclient"
)

// keyRotateOptions are the flags of `key rotate`.
type keyRotateOptions struct {
	*Options
	grace   time.Duration
	timeout time.Duration
	output  string
}

func newKeyRotateCommand(o *Options) *cobra.Command {
	opts := &keyRotateOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "rotate NAME",
		Short: "Replace an API key with a new one and print the new key once",
		Long: "Ask the operator for a new key for an APIKey, claim it and print it once. The previous key\n" +
			"stays valid for --grace (default 0: it stops working at once). If someone else claims the new\n" +
			"key first, it is stopped by rotating again at once with no grace (which ends the previous key\n" +
			"too: only one previous key is kept), and you get the next one, with a warning. While another\n" +
			"rotation of the key is requested and not carried out yet, nothing is changed and you are told so:\n" +
			"its key is for whoever requested it.",
		Example: "  kubectl switchboard key rotate ci --grace 24h",
		Args:    exactlyOneName("key rotate"),
		RunE:    func(cmd *cobra.Command, args []string) error { return opts.run(cmd.Context(), args[0]) },
	}
	f := cmd.Flags()
	f.DurationVar(&opts.grace, "grace", 0, "how long the previous key keeps working (e.g. 1h, 24h, 168h); 0 stops it at once")
	f.DurationVar(&opts.timeout, "timeout", defaultTimeout, "how long to wait for the operator to issue the new key")
	f.StringVarP(&opts.output, "output", "o", "", "output format: json prints {name, namespace, key, hint, expires_at} and nothing else")
	return cmd
}

func (o *keyRotateOptions) run(ctx context.Context, name string) error {
	if err := checkOutput(o.output); err != nil {
		return err
	}
	if o.grace < 0 || o.timeout <= 0 {
		return fmt.Errorf("--grace must not be negative and --timeout must be positive (got %s and %s)", o.grace, o.timeout)
	}
	keys, ns, err := o.keys()
	if err != nil {
		return err
	}
	issued, err := keys.Rotate(ctx, ns, name, keyclient.RotateRequest{Grace: o.grace, Timeout: o.timeout})
	var timeout *keyclient.TimeoutError
	if errors.As(err, &timeout) && timeout.SecretName == "" {
		return fmt.Errorf("%w; the rotation stays requested: once the new key is issued, `kubectl switchboard key reveal %s` claims it", err, name)
	}
	if err != nil {
		return explainKey(err)
	}
	return printIssued(o.Options, issued, o.output, "rotated", previousKeyNote(issued, o.Clock.Now()))
}

// previousKeyNote says until when the replaced key works.
func previousKeyNote(issued *keyclient.Issued, now time.Time) string {
	until := issued.PreviousValidUntil(now)
	if until == nil {
		return " The previous key no longer works."
	}
	return fmt.Sprintf(" The previous key keeps working until %s.", until.Format(time.RFC3339))
}
