package plugin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// getKey reads an APIKey, with a clear error when it is missing or forbidden.
func getKey(ctx context.Context, c client.Client, ns, name string) (*switchboardv1alpha1.APIKey, error) {
	var k switchboardv1alpha1.APIKey
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &k); err != nil {
		return nil, explain(err, action{verb: "get", resource: "apikeys.switchboard.dev", kind: "APIKey", namespace: ns, name: name})
	}
	return &k, nil
}

// patchSpec applies a JSON merge patch of the APIKey's spec.
func patchSpec(ctx context.Context, c client.Client, k *switchboardv1alpha1.APIKey, spec map[string]any) error {
	body, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, k, client.RawPatch(types.MergePatchType, body)); err != nil {
		return explain(err, action{verb: "patch", resource: "apikeys.switchboard.dev", kind: "APIKey", namespace: k.Namespace, name: k.Name})
	}
	return nil
}

// keyRevokeOptions are the flags of `key revoke`.
type keyRevokeOptions struct {
	*Options
	yes bool
}

func newKeyRevokeCommand(o *Options) *cobra.Command {
	opts := &keyRevokeOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke an API key for good",
		Long: "Revoke an APIKey: every request with its key (and with a previous key still in its rotation\n" +
			"grace period) is refused from now on. It cannot be undone. Asks for confirmation unless --yes.",
		Args: exactlyOneName("key revoke"),
		RunE: func(cmd *cobra.Command, args []string) error { return opts.run(cmd.Context(), args[0]) },
	}
	cmd.Flags().BoolVarP(&opts.yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

func (o *keyRevokeOptions) run(ctx context.Context, name string) error {
	c, ns, err := o.connect()
	if err != nil {
		return err
	}
	k, err := getKey(ctx, c, ns, name)
	if err != nil {
		return err
	}
	if k.Spec.Revoked {
		fmt.Fprintf(o.Out, "APIKey %q in namespace %q is already revoked\n", name, ns)
		return nil
	}
	if !o.yes {
		fmt.Fprintf(o.ErrOut, "Revoke APIKey %q in namespace %q (hint %s)? Clients using it are refused at once; this cannot be undone. [y/N]: ",
			name, ns, orDash(k.Status.KeyHint))
		answer, _ := bufio.NewReader(o.In).ReadString('\n')
		switch strings.ToLower(strings.TrimSpace(answer)) {
		case "y", "yes":
		default:
			return fmt.Errorf("not confirmed: APIKey %q was not revoked (answer y, or pass --yes)", name)
		}
	}
	if err := patchSpec(ctx, c, k, map[string]any{"revoked": true}); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "APIKey %q in namespace %q revoked\n", name, ns)
	return nil
}

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
			"stays valid for --grace (default 0: it stops working at once).",
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
	c, ns, err := o.connect()
	if err != nil {
		return err
	}
	k, err := getKey(ctx, c, ns, name)
	if err != nil {
		return err
	}
	if err := refusal(k); err != nil {
		return err
	}
	perms := []permission{apiKeyPermission("patch", "request the rotation")}
	if k.Spec.SecretName == "" {
		perms = append(perms, claimPermissions("the new key's")...)
	}
	if err := checkAccess(ctx, c, ns, perms...); err != nil {
		return err
	}
	requestedAt := o.Clock.Now().UTC().Format(time.RFC3339Nano)
	previous := k.Status.KeyGeneration
	rotation := switchboardv1alpha1.APIKeyRotation{RequestedAt: requestedAt, GracePeriod: metav1.Duration{Duration: o.grace}}
	if err := patchSpec(ctx, c, k, map[string]any{"rotation": rotation}); err != nil {
		return err
	}
	rotated, err := waitForKey(ctx, c, client.ObjectKeyFromObject(k), o.timeout, "issued the new key", func(k *switchboardv1alpha1.APIKey) (bool, error) {
		if k.Status.LastHandledRotationAt != requestedAt || k.Status.KeyGeneration <= previous {
			return false, refusal(k)
		}
		return keyShowable(k)
	})
	if errors.Is(err, ErrTimeout) && k.Spec.SecretName == "" {
		return fmt.Errorf("%w; the rotation stays requested: once the new key is issued, `kubectl switchboard key reveal %s` claims it", err, k.Name)
	}
	if err != nil {
		return err
	}
	return printIssued(ctx, o.Options, rotated, o.output, "rotated", previousKeyNote(rotated, o.Clock.Now()))
}

// previousKeyNote says until when the replaced key works.
func previousKeyNote(k *switchboardv1alpha1.APIKey, now time.Time) string {
	until := k.Status.PreviousKeyValidUntil
	if until == nil || !until.After(now) {
		return " The previous key no longer works."
	}
	return fmt.Sprintf(" The previous key keeps working until %s.", until.UTC().Format(time.RFC3339))
}
