package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	// selector, all and allNamespaces choose the keys of a bulk rotation (keyrotatebulk.go);
	// yes skips its confirmation.
	selector      string
	all           bool
	allNamespaces bool
	yes           bool
}

func newKeyRotateCommand(o *Options) *cobra.Command {
	opts := &keyRotateOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "rotate (NAME | -l SELECTOR | --all) [-A]",
		Short: "Replace an API key, or every key a label selector or --all picks, with a new one",
		Long: "Ask the operator for a new key for an APIKey, claim it and print it once. The previous key\n" +
			"stays valid for --grace (default 0: it stops working at once). If someone else claims the new\n" +
			"key first, it is stopped by rotating again at once with no grace (which ends the previous key\n" +
			"too: only one previous key is kept), and you get the next one, with a warning. While another\n" +
			"rotation of the key is requested and not carried out yet, nothing is changed and you are told so:\n" +
			"its key is for whoever requested it.\n\n" +
			"With -l SELECTOR or --all instead of a NAME, every APIKey of the namespace (of all namespaces\n" +
			"with -A) that the selector picks is rotated the same way, one after the other, after you confirm\n" +
			"the list (--yes skips the question, for automation). Each key rotated is printed: where it was\n" +
			"delivered, or the new key itself, once; then a summary. Revoked, expired and deleted keys are\n" +
			"skipped; a key that fails does not stop the others, and the command fails at the end.",
		Example: "  kubectl switchboard key rotate ci --grace 24h\n" +
			"  kubectl switchboard key rotate -l app=billing --grace 24h\n" +
			"  kubectl switchboard key rotate --all -A --grace 168h --yes -o json",
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return opts.dispatch(cmd.Context(), args) },
	}
	f := cmd.Flags()
	f.DurationVar(&opts.grace, "grace", 0, "how long the previous key keeps working (e.g. 1h, 24h, 168h); 0 stops it at once")
	f.DurationVar(&opts.timeout, "timeout", defaultTimeout, "how long to wait for the operator to issue the new key (for each key, with -l or --all)")
	f.StringVarP(&opts.output, "output", "o", "", "output format: json prints {name, namespace, key, hint, expires_at} (or secret_name instead of key) and nothing else, one line per key")
	f.StringVarP(&opts.selector, "selector", "l", "", "rotate every APIKey with these labels (e.g. app=billing,tier!=test) instead of one NAME")
	f.BoolVar(&opts.all, "all", false, "rotate every APIKey of the namespace instead of one NAME")
	f.BoolVarP(&opts.allNamespaces, "all-namespaces", "A", false, "with -l or --all: the APIKeys of every namespace")
	f.BoolVarP(&opts.yes, "yes", "y", false, "with -l or --all: do not ask for confirmation")
	return cmd
}

// dispatch runs a rotation of one NAME or, with -l or --all, a bulk rotation, refusing
// mixtures of the two before anything is asked of the cluster.
func (o *keyRotateOptions) dispatch(ctx context.Context, args []string) error {
	bulk := o.selector != "" || o.all
	switch {
	case bulk && len(args) > 0:
		return fmt.Errorf("key rotate takes a NAME or -l/--all, not both: drop %q, or drop -l and --all to rotate that one key", strings.Join(args, " "))
	case o.selector != "" && o.all:
		return errors.New("key rotate takes -l SELECTOR or --all, not both: --all already picks every key")
	case o.allNamespaces && !bulk:
		return errors.New("-A/--all-namespaces needs -l SELECTOR or --all: a NAME is looked up in one namespace (-n)")
	case !bulk && len(args) == 0:
		return errors.New("key rotate needs a NAME, or -l SELECTOR or --all to rotate several keys")
	}
	if err := checkOutput(o.output, "text", outputJSON); err != nil {
		return err
	}
	if o.grace < 0 || o.timeout <= 0 {
		return fmt.Errorf("--grace must not be negative and --timeout must be positive (got %s and %s)", o.grace, o.timeout)
	}
	if bulk {
		return o.runBulk(ctx)
	}
	if err := exactlyOneName("key rotate")(nil, args); err != nil {
		return err
	}
	return o.run(ctx, args[0])
}

func (o *keyRotateOptions) run(ctx context.Context, name string) error {
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
