package plugin

import (
	"cmp"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
)

func newKeyListCommand(o *Options) *cobra.Command {
	return newListCommand[switchboardv1alpha1.APIKeyList](o, "List the API keys of the namespace", action{resource: "apikeys.switchboard.dev", kind: "APIKeys"}, "API keys",
		"NAME\tHINT\tSTATE\tCREATED\tLAST USED\tEXPIRES\tRATE LIMIT\tSOURCES\tAUDIENCES", func(w io.Writer, k *switchboardv1alpha1.APIKey, now time.Time) {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.Name, orDash(k.Status.KeyHint), keyclient.State(k, now),
				ago(keyclient.CreatedAt(k), now), ago(k.Status.LastUsedAt, now), until(k.Spec.ExpiresAt, now), rateLimitColumn(k), sourcesColumn(k), audiencesColumn(k))
		})
}

func newConnectionListCommand(o *Options) *cobra.Command {
	return newListCommand[switchboardv1alpha1.ConnectionList](o, "List the Connections of the namespace", action{resource: "connections.switchboard.dev", kind: "Connections"}, "Connections",
		"NAME\tID\tPROVIDER\tREADY\tAGE", func(w io.Writer, conn *switchboardv1alpha1.Connection, now time.Time) {
			ready := "Unknown"
			if cond := meta.FindStatusCondition(conn.Status.Conditions, switchboardv1alpha1.ConditionReady); cond != nil {
				ready = string(cond.Status)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", conn.Name, orDash(conn.Status.ID), orDash(conn.Spec.Provider), ready, age(conn.CreationTimestamp, now))
		})
}

// newListCommand is `list`, which lists the objects of the namespace (a T, whose items are E) as
// kubectl get does: a table of header and a row of each, or with -o json or yaml the list itself.
// listed is the resource and kind listed, for errors; plural names the objects when there are none.
func newListCommand[T any, L interface {
	*T
	client.ObjectList
}, E k8sruntime.Object](o *Options, short string, listed action, plural, header string, row func(w io.Writer, item E, now time.Time)) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   short,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output, "a table", outputJSON, outputYAML); err != nil {
				return err
			}
			c, ns, err := o.connect()
			if err != nil {
				return err
			}
			list := L(new(T))
			if err := c.List(cmd.Context(), list, client.InNamespace(ns)); err != nil {
				return explain(err, action{verb: "list", resource: listed.resource, kind: listed.kind, namespace: ns})
			}
			if output != "" {
				return printObjects(o.Out, list, output)
			}
			items, err := itemsOf[E](list)
			if err != nil {
				return err
			}
			if len(items) == 0 {
				fmt.Fprintf(o.ErrOut, "No %s found in namespace %q.\n", plural, ns)
				return nil
			}
			now := o.Clock.Now()
			w := printers.GetNewTabWriter(o.Out)
			fmt.Fprintln(w, header)
			for _, item := range items {
				row(w, item, now)
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (default: a table)")
	return cmd
}

// orDash shows an empty column as "-".
func orDash(s string) string {
	return cmp.Or(s, "-")
}

// ago says how long before now t was ("5m ago"), or never.
func ago(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "never"
	}
	d := now.Sub(t.Time)
	if d < 0 {
		return "in " + duration.HumanDuration(-d)
	}
	return duration.HumanDuration(d) + " ago"
}

// until says when t comes ("in 29d") or came ("2h ago"), or never.
func until(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "never"
	}
	d := t.Sub(now)
	if d <= 0 {
		return duration.HumanDuration(-d) + " ago"
	}
	return "in " + duration.HumanDuration(d)
}

// age is the time since t, as kubectl's AGE column shows it.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
