package plugin

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// keyRevokeOptions are the flags of `key revoke`.
type keyRevokeOptions struct {
	*Options
	yes bool
}

func newKeyRevokeCommand(o *Options) *cobra.Command {
	opts := &keyRevokeOptions{Options: o}
	cmd := nameCommand(&cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke an API key for good",
		Long: "Revoke an APIKey: every request with its key (and with a previous key still in its rotation\n" +
			"grace period) is refused from now on. It cannot be undone. Asks for confirmation unless --yes.",
	}, opts.run)
	cmd.Flags().BoolVarP(&opts.yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

func (o *keyRevokeOptions) run(ctx context.Context, name string) error {
	keys, ns, err := o.keys()
	if err != nil {
		return err
	}
	_, already, err := keys.Revoke(ctx, ns, name, o.confirm)
	if err != nil {
		return explainKey(err)
	}
	if already {
		fmt.Fprintf(o.Out, "APIKey %q in namespace %q is already revoked\n", name, ns)
		return nil
	}
	fmt.Fprintf(o.Out, "APIKey %q in namespace %q revoked\n", name, ns)
	return nil
}

// confirm asks on stdin unless --yes was given.
func (o *keyRevokeOptions) confirm(k *switchboardv1alpha1.APIKey) error {
	if o.yes {
		return nil
	}
	fmt.Fprintf(o.ErrOut, "Revoke APIKey %q in namespace %q (hint %s)? Clients using it are refused at once; this cannot be undone. [y/N]: ",
		k.Name, k.Namespace, orDash(k.Status.KeyHint))
	if o.answeredYes() {
		return nil
	}
	return fmt.Errorf("not confirmed: APIKey %q was not revoked (answer y, or pass --yes)", k.Name)
}
