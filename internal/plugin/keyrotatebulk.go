package plugin

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
)

// maxNamesAsked bounds the names listed in the confirmation question.
const maxNamesAsked = 10

// runBulk rotates every APIKey that -l or --all picks, in the namespace or (-A) all of them,
// one after the other with the single rotation's workflow, after confirmation.
func (o *keyRotateOptions) runBulk(ctx context.Context) error {
	selector := labels.Everything()
	if o.selector != "" {
		var err error
		if selector, err = labels.Parse(o.selector); err != nil {
			return fmt.Errorf("-l %q is not a label selector: %w", o.selector, err)
		}
	}
	c, ns, err := o.connect()
	if err != nil {
		return err
	}
	keys, _, err := o.keys()
	if err != nil {
		return err
	}
	opts := []client.ListOption{client.MatchingLabelsSelector{Selector: selector}}
	where := fmt.Sprintf("namespace %q", ns)
	if o.allNamespaces {
		ns, where = "", "any namespace"
	} else {
		opts = append(opts, client.InNamespace(ns))
	}
	var list switchboardv1alpha1.APIKeyList
	if err := c.List(ctx, &list, opts...); err != nil {
		return explain(err, action{verb: "list", resource: "apikeys.switchboard.dev", kind: "APIKeys", namespace: ns})
	}
	sort.Slice(list.Items, func(i, j int) bool {
		a, b := &list.Items[i], &list.Items[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	now := o.Clock.Now()
	var todo []*switchboardv1alpha1.APIKey
	var skipped []string
	for i := range list.Items {
		k := &list.Items[i]
		switch s := keyclient.State(k, now); s {
		case keyclient.StateRevoked, keyclient.StateExpired, keyclient.StateDeleting:
			skipped = append(skipped, fmt.Sprintf("%s (%s)", o.keyName(k), strings.ToLower(string(s))))
		default:
			todo = append(todo, k)
		}
	}
	if len(todo) == 0 {
		if len(list.Items) == 0 {
			with := ""
			if o.selector != "" {
				with = fmt.Sprintf(" has labels %q", o.selector)
			}
			fmt.Fprintf(o.ErrOut, "Nothing to rotate: no APIKey in %s%s.\n", where, with)
			return nil
		}
		fmt.Fprintf(o.ErrOut, "Nothing to rotate in %s: every APIKey picked is revoked, expired or being deleted: %s.\n",
			where, strings.Join(skipped, ", "))
		return nil
	}
	if err := o.confirmBulk(todo, where); err != nil {
		return err
	}

	var rotated, delivered, printed, failed int
	for _, k := range todo {
		issued, err := keys.Rotate(ctx, k.Namespace, k.Name, keyclient.RotateRequest{Grace: o.grace, Timeout: o.timeout})
		if err != nil {
			failed++
			fmt.Fprintf(o.ErrOut, "error: APIKey %s: %s\n", o.keyName(k), oneLine(explainKey(err).Error()))
			continue
		}
		rotated++
		if issued.Delivered() {
			delivered++
		} else {
			printed++
		}
		if err := o.printRotated(issued); err != nil {
			return err
		}
	}

	summary := fmt.Sprintf("Rotated %d of the %s picked in %s", rotated, apiKeys(len(todo)), where)
	var parts []string
	if delivered > 0 {
		parts = append(parts, fmt.Sprintf("%d into its delivery Secret", delivered))
		if delivered > 1 {
			parts[len(parts)-1] = fmt.Sprintf("%d into their delivery Secrets", delivered)
		}
	}
	if printed > 0 {
		parts = append(parts, fmt.Sprintf("%d printed above, once", printed))
	}
	if len(parts) > 0 {
		summary += " (" + strings.Join(parts, ", ") + ")"
	}
	summary += fmt.Sprintf("; %d failed", failed)
	if len(skipped) > 0 {
		summary += fmt.Sprintf("; skipped %d: %s", len(skipped), strings.Join(skipped, ", "))
	}
	summary += "."
	// The summary is for the person: with -o json, stdout is JSON only.
	if o.output == outputJSON {
		fmt.Fprintln(o.ErrOut, summary)
	} else {
		fmt.Fprintln(o.Out, summary)
	}
	if printed > 0 && o.output != outputJSON {
		fmt.Fprintln(o.ErrOut, "Warning: the new keys printed above will not be shown again: store them now.")
	}
	if failed > 0 {
		return fmt.Errorf("%d of the %s picked could not be rotated (see above)", failed, apiKeys(len(todo)))
	}
	return nil
}

// apiKeys is "1 APIKey" or "n APIKeys".
func apiKeys(n int) string {
	if n == 1 {
		return "1 APIKey"
	}
	return fmt.Sprintf("%d APIKeys", n)
}

// keyName is name, or namespace/name when keys of all namespaces are rotated.
func (o *keyRotateOptions) keyName(k *switchboardv1alpha1.APIKey) string {
	if o.allNamespaces {
		return k.Namespace + "/" + k.Name
	}
	return k.Name
}

// printRotated shows one key of a bulk rotation. With -o json it is the single rotation's JSON
// line; as text, a line that names the key, since several are printed.
func (o *keyRotateOptions) printRotated(issued *keyclient.Issued) error {
	note := previousKeyNote(issued, o.Clock.Now())
	if o.output == outputJSON || issued.Delivered() {
		return printIssued(o.Options, issued, o.output, "rotated", note)
	}
	if stolen := stolenWarning(issued); stolen != "" {
		fmt.Fprintln(o.ErrOut, stolen)
	}
	k := issued.APIKey
	if _, err := fmt.Fprintf(o.Out, "APIKey %q in namespace %q rotated (hint %s).%s New key: %s\n", k.Name, k.Namespace, issued.Hint(), note, issued.Revealed.Key); err != nil {
		return fmt.Errorf("printing the key: %w", err)
	}
	return nil
}

// confirmBulk lists the keys about to be rotated and asks on stdin, unless --yes was given.
func (o *keyRotateOptions) confirmBulk(todo []*switchboardv1alpha1.APIKey, where string) error {
	if o.yes {
		return nil
	}
	names := make([]string, 0, maxNamesAsked)
	revealed := 0
	for i, k := range todo {
		if k.Spec.SecretName == "" {
			revealed++
		}
		if i < maxNamesAsked {
			names = append(names, o.keyName(k))
		}
	}
	list := strings.Join(names, ", ")
	if more := len(todo) - len(names); more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	grace := "Their previous keys stop working at once (no --grace)"
	if o.grace > 0 {
		grace = "Their previous keys keep working for " + o.grace.String()
	}
	shown := ""
	switch {
	case revealed == 1 && len(todo) == 1:
		shown = "; it has no delivery Secret, so its new key is printed here, once"
	case revealed == 1:
		shown = "; 1 of them has no delivery Secret, so its new key is printed here, once"
	case revealed > 1:
		shown = fmt.Sprintf("; %d of them have no delivery Secret, so their new keys are printed here, once", revealed)
	}
	if len(todo) == 1 {
		grace = strings.Replace(strings.Replace(grace, "Their previous keys", "Its previous key", 1), "stop working", "stops working", 1)
		grace = strings.Replace(grace, "keep working", "keeps working", 1)
	}
	fmt.Fprintf(o.ErrOut, "Rotate %s in %s: %s? %s%s. [y/N]: ", apiKeys(len(todo)), where, list, grace, shown)
	if o.answeredYes() {
		return nil
	}
	return fmt.Errorf("not confirmed: no APIKey was rotated (answer y, or pass --yes)")
}
