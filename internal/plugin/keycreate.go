package plugin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/reveal"
)

// defaultTimeout bounds every wait for the operator.
const defaultTimeout = 60 * time.Second

// keyCreateOptions are the flags of `key create`.
type keyCreateOptions struct {
	*Options
	description string
	expiresIn   time.Duration
	expiresAt   string
	secretName  string
	selector    string
	timeout     time.Duration
	output      string
}

func newKeyCreateCommand(o *Options) *cobra.Command {
	opts := &keyCreateOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create an API key and print it once",
		Long: "Create an APIKey, wait for the operator to issue its key, claim the key's one-time reveal and\n" +
			"print the key on stdout. It is shown only this once: store it right away.",
		Example: "  kubectl switchboard key create ci --description 'CI pipeline' --expires-in 720h\n" +
			"  KEY=$(kubectl switchboard key create ci -o json | jq -r .key)",
		Args: exactlyOneName("key create"),
		RunE: func(cmd *cobra.Command, args []string) error { return opts.run(cmd.Context(), args[0]) },
	}
	f := cmd.Flags()
	f.StringVar(&opts.description, "description", "", "what the key is for")
	f.DurationVar(&opts.expiresIn, "expires-in", 0, "the key expires this long after now (e.g. 720h)")
	f.StringVar(&opts.expiresAt, "expires-at", "", "the key expires at this RFC 3339 instant (e.g. 2027-01-31T00:00:00Z)")
	f.StringVar(&opts.secretName, "secret-name", "", "deliver the key into this Secret of the namespace instead of printing it")
	f.StringVar(&opts.selector, "selector", "", "only Connections matching this label selector are listed with the key (e.g. team=data,env!=prod)")
	f.DurationVar(&opts.timeout, "timeout", defaultTimeout, "how long to wait for the operator to issue the key")
	f.StringVarP(&opts.output, "output", "o", "", "output format: json prints {name, namespace, key, hint, expires_at} and nothing else\n(with --secret-name: {name, namespace, secret_name, hint, expires_at})")
	cmd.MarkFlagsMutuallyExclusive("expires-in", "expires-at")
	return cmd
}

// build validates the flags and returns the APIKey to create.
func (o *keyCreateOptions) build(namespace, name string) (*switchboardv1alpha1.APIKey, error) {
	if err := checkOutput(o.output); err != nil {
		return nil, err
	}
	if o.timeout <= 0 {
		return nil, fmt.Errorf("--timeout must be positive, got %s", o.timeout)
	}
	key := &switchboardv1alpha1.APIKey{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       switchboardv1alpha1.APIKeySpec{Description: o.description, SecretName: o.secretName},
	}
	now := o.Clock.Now()
	switch {
	case o.expiresIn < 0:
		return nil, fmt.Errorf("--expires-in must be positive, got %s", o.expiresIn)
	case o.expiresIn > 0:
		t := metav1.NewTime(now.Add(o.expiresIn).Truncate(time.Second))
		key.Spec.ExpiresAt = &t
	case o.expiresAt != "":
		at, err := time.Parse(time.RFC3339, o.expiresAt)
		if err != nil {
			return nil, fmt.Errorf("--expires-at must be an RFC 3339 time such as 2027-01-31T00:00:00Z: %w", err)
		}
		if !at.After(now) {
			return nil, fmt.Errorf("--expires-at %s is not in the future", o.expiresAt)
		}
		t := metav1.NewTime(at)
		key.Spec.ExpiresAt = &t
	}
	if o.selector != "" {
		sel, err := parseSelector(o.selector)
		if err != nil {
			return nil, fmt.Errorf("--selector %q is not a label selector: %w", o.selector, err)
		}
		key.Spec.ConnectionSelector = sel
	}
	return key, nil
}

func (o *keyCreateOptions) run(ctx context.Context, name string) error {
	c, ns, err := o.connect()
	if err != nil {
		return err
	}
	key, err := o.build(ns, name)
	if err != nil {
		return err
	}
	perms := []permission{apiKeyPermission("create", "create the APIKey"), apiKeyPermission("get", "wait for its key")}
	if o.secretName == "" {
		perms = append(perms, claimPermissions("the key's")...)
	}
	if err := checkAccess(ctx, c, ns, perms...); err != nil {
		return err
	}
	if err := c.Create(ctx, key); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("APIKey %q already exists in namespace %q; pick another name, or run `kubectl switchboard key rotate %s` for a new key", name, ns, name)
		}
		return explain(err, action{verb: "create", resource: "apikeys.switchboard.dev", kind: "APIKey", namespace: ns, name: ""})
	}
	published, err := waitForKey(ctx, c, client.ObjectKeyFromObject(key), o.timeout, "published the key", keyShowable)
	if err == nil {
		if err = printIssued(ctx, o.Options, published, o.output, "created", ""); err == nil {
			return nil
		}
	}
	// Whatever went wrong, the user does not have the key: do not leave it behind.
	return o.abandon(c, key, err)
}

// abandon deletes the APIKey create made when its key cannot be given to the user (the
// operator did not answer, or somebody else claimed the key), so that nobody holds a key its
// creator never saw and the same name can be used again.
func (o *keyCreateOptions) abandon(c client.Client, key *switchboardv1alpha1.APIKey, cause error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	uid := key.UID
	if err := c.Delete(ctx, key, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("%w; the APIKey %q was left in place because deleting it failed: %s", cause, key.Name, oneLine(err.Error()))
	}
	return fmt.Errorf("%w; the APIKey %q was deleted again, nothing was kept", cause, key.Name)
}

// keyResult is the -o json shape of a key shown once.
type keyResult struct {
	Name      string  `json:"name"`
	Namespace string  `json:"namespace"`
	Key       string  `json:"key"`
	Hint      string  `json:"hint"`
	ExpiresAt *string `json:"expires_at"`
}

// deliveredResult is the -o json shape of a key delivered into a Secret.
type deliveredResult struct {
	Name       string  `json:"name"`
	Namespace  string  `json:"namespace"`
	SecretName string  `json:"secret_name"`
	Hint       string  `json:"hint"`
	ExpiresAt  *string `json:"expires_at"`
}

// printIssued shows the outcome of an issued key: where it was delivered, or the key itself
// after claiming its one-time reveal. done is the past participle for messages ("created").
func printIssued(ctx context.Context, o *Options, k *switchboardv1alpha1.APIKey, output, done, note string) error {
	c, _, err := o.connect()
	if err != nil {
		return err
	}
	var expires *string
	if k.Spec.ExpiresAt != nil {
		s := k.Spec.ExpiresAt.UTC().Format(time.RFC3339)
		expires = &s
	}
	if k.Spec.SecretName != "" {
		if output == outputJSON {
			return writeJSON(o.Out, deliveredResult{Name: k.Name, Namespace: k.Namespace, SecretName: k.Spec.SecretName, Hint: k.Status.KeyHint, ExpiresAt: expires})
		}
		fmt.Fprintf(o.Out, "APIKey %q %s (hint %s); its key is in Secret %q of namespace %q, data key %q.%s\n",
			k.Name, done, k.Status.KeyHint, k.Spec.SecretName, k.Namespace, keysecret.DataKey, note)
		return nil
	}
	got, err := reveal.Claim(ctx, c, k)
	switch {
	case errors.Is(err, reveal.ErrAlreadyClaimed):
		return fmt.Errorf("APIKey %q: %w", k.Name, err)
	case err != nil:
		return explain(err, action{verb: "delete", resource: "secrets", kind: "Secret", namespace: k.Namespace, name: ""})
	}
	if output == outputJSON {
		err = writeJSON(o.Out, keyResult{Name: k.Name, Namespace: k.Namespace, Key: got.Key, Hint: got.Hint, ExpiresAt: expires})
	} else {
		_, err = fmt.Fprintln(o.Out, got.Key)
	}
	if err != nil {
		return fmt.Errorf("printing the key: %w", err)
	}
	fmt.Fprintf(o.ErrOut, "Warning: APIKey %s/%s %s (hint %s). This key will not be shown again: store it now.%s\n",
		k.Namespace, k.Name, done, got.Hint, note)
	return nil
}

// keyRevealOptions are the flags of `key reveal`.
type keyRevealOptions struct {
	*Options
	timeout time.Duration
	output  string
}

func newKeyRevealCommand(o *Options) *cobra.Command {
	opts := &keyRevealOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "reveal NAME",
		Short: "Claim and print the key of an APIKey created with kubectl apply or GitOps",
		Long: "Claim the one-time reveal of an existing APIKey's current key (for instance one created with\n" +
			"kubectl apply) and print the key once. It fails if somebody else claimed it first.",
		Args: exactlyOneName("key reveal"),
		RunE: func(cmd *cobra.Command, args []string) error { return opts.run(cmd.Context(), args[0]) },
	}
	cmd.Flags().DurationVar(&opts.timeout, "timeout", defaultTimeout, "how long to wait for the operator to publish the key")
	cmd.Flags().StringVarP(&opts.output, "output", "o", "", "output format: json prints {name, namespace, key, hint, expires_at} and nothing else")
	return cmd
}

func (o *keyRevealOptions) run(ctx context.Context, name string) error {
	if err := checkOutput(o.output); err != nil {
		return err
	}
	c, ns, err := o.connect()
	if err != nil {
		return err
	}
	perms := append([]permission{apiKeyPermission("get", "read the APIKey")}, claimPermissions("the key's")...)
	if err := checkAccess(ctx, c, ns, perms...); err != nil {
		return err
	}
	k, err := waitForKey(ctx, c, types.NamespacedName{Namespace: ns, Name: name}, o.timeout, "published the key", keyShowable)
	if err != nil {
		return err
	}
	return printIssued(ctx, o.Options, k, o.output, "revealed", "")
}

// parseSelector turns a kubectl-style label selector ("team=data,env!=prod,tier in (a,b)")
// into the LabelSelector of spec.connectionSelector.
func parseSelector(s string) (*metav1.LabelSelector, error) {
	parsed, err := labels.Parse(s)
	if err != nil {
		return nil, err
	}
	reqs, _ := parsed.Requirements()
	sel := &metav1.LabelSelector{}
	for _, r := range reqs {
		var values []string
		if r.Values().Len() > 0 {
			values = sets.List(sets.Set[string](r.Values()))
		}
		var op metav1.LabelSelectorOperator
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals:
			if sel.MatchLabels == nil {
				sel.MatchLabels = map[string]string{}
			}
			sel.MatchLabels[r.Key()] = values[0] // Parse guarantees exactly one value
			continue
		case selection.NotEquals, selection.NotIn:
			op = metav1.LabelSelectorOpNotIn
		case selection.In:
			op = metav1.LabelSelectorOpIn
		case selection.Exists:
			op = metav1.LabelSelectorOpExists
		case selection.DoesNotExist:
			op = metav1.LabelSelectorOpDoesNotExist
		default:
			return nil, fmt.Errorf("operator %q is not supported by a label selector", r.Operator())
		}
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: r.Key(), Operator: op, Values: values})
	}
	return sel, nil
}
