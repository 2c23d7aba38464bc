package plugin

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
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
	policy      policyFlags
}

func newKeyCreateCommand(o *Options) *cobra.Command {
	opts := &keyCreateOptions{Options: o}
	cmd := nameCommand(&cobra.Command{
		Use:   "create NAME",
		Short: "Create an API key and print it once",
		Long: "Create an APIKey, wait for the operator to issue its key, claim the key's one-time reveal and\n" +
			"print the key on stdout. It is shown only this once: store it right away.",
		Example: "  kubectl switchboard key create ci --description 'CI pipeline' --expires-in 720h\n" +
			"  kubectl switchboard key create partner --rate-limit 100/1m --burst 20 --allowed-source-ranges 203.0.113.0/24\n" +
			"  kubectl switchboard key create billing-sync --audiences billing,connections\n" +
			"  KEY=$(kubectl switchboard key create ci -o json | jq -r .key)",
	}, opts.run)
	f := cmd.Flags()
	f.StringVar(&opts.description, "description", "", "what the key is for")
	f.DurationVar(&opts.expiresIn, "expires-in", 0, "the key expires this long after now (e.g. 720h)")
	f.StringVar(&opts.expiresAt, "expires-at", "", "the key expires at this RFC 3339 instant (e.g. 2027-01-31T00:00:00Z)")
	f.StringVar(&opts.secretName, "secret-name", "", "deliver the key into this Secret of the namespace instead of printing it")
	f.StringVar(&opts.selector, "selector", "", "only Connections matching this label selector are listed with the key (e.g. team=data,env!=prod)")
	f.DurationVar(&opts.timeout, "timeout", defaultTimeout, "how long to wait for the operator to issue the key")
	opts.policy.addFlags(f)
	f.StringVarP(&opts.output, "output", "o", "", "output format: json prints {name, namespace, key, hint, expires_at} and nothing else\n(with --secret-name: {name, namespace, secret_name, hint, expires_at})")
	cmd.MarkFlagsMutuallyExclusive("expires-in", "expires-at")
	return cmd
}

// build validates the flags and returns the APIKey to create.
func (o *keyCreateOptions) build(namespace, name string) (*switchboardv1alpha1.APIKey, error) {
	if err := checkOutput(o.output, "text", outputJSON); err != nil {
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
	policy := keyclient.Policy{}
	if err := o.policy.change(&policy); err != nil {
		return nil, err
	}
	policy.Apply(&key.Spec)
	return key, nil
}

func (o *keyCreateOptions) run(ctx context.Context, name string) error {
	keys, ns, err := o.keys()
	if err != nil {
		return err
	}
	key, err := o.build(ns, name)
	if err != nil {
		return err
	}
	issued, err := keys.Create(ctx, key, o.timeout)
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("APIKey %q already exists in namespace %q; pick another name, or run `kubectl switchboard key rotate %s` for a new key", name, ns, name)
	}
	if err != nil {
		return explainKey(err)
	}
	return printIssued(o.Options, issued, o.output, "created", "")
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
