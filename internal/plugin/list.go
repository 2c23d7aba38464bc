package plugin

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
)

// listOptions are the flags of the list commands.
type listOptions struct {
	*Options
	output string
}

func newKeyListCommand(o *Options) *cobra.Command {
	opts := &listOptions{Options: o}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the API keys of the namespace",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return opts.runKeys(cmd.Context()) },
	}
	cmd.Flags().StringVarP(&opts.output, "output", "o", "", "output format: json or yaml (default: a table)")
	return cmd
}

func newConnectionListCommand(o *Options) *cobra.Command {
	opts := &listOptions{Options: o}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the Connections of the namespace",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return opts.runConnections(cmd.Context()) },
	}
	cmd.Flags().StringVarP(&opts.output, "output", "o", "", "output format: json or yaml (default: a table)")
	return cmd
}

func (o *listOptions) runKeys(ctx context.Context) error {
	if err := checkListOutput(o.output); err != nil {
		return err
	}
	c, ns, err := o.connect()
	if err != nil {
		return err
	}
	var keys switchboardv1alpha1.APIKeyList
	if err := c.List(ctx, &keys, client.InNamespace(ns)); err != nil {
		return explain(err, action{verb: "list", resource: "apikeys.switchboard.dev", kind: "APIKeys", namespace: ns})
	}
	if o.output != "" {
		return printObjects(o.Out, &keys, o.output)
	}
	if len(keys.Items) == 0 {
		fmt.Fprintf(o.ErrOut, "No API keys found in namespace %q.\n", ns)
		return nil
	}
	now := o.Clock.Now()
	w := printers.GetNewTabWriter(o.Out)
	fmt.Fprintln(w, "NAME\tHINT\tSTATE\tCREATED\tLAST USED\tEXPIRES\tRATE LIMIT\tSOURCES\tAUDIENCES")
	for i := range keys.Items {
		k := &keys.Items[i]
		hint := k.Status.KeyHint
		if hint == "" {
			hint = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.Name, hint, keyclient.State(k, now),
			ago(keyclient.CreatedAt(k), now), ago(k.Status.LastUsedAt, now), until(k.Spec.ExpiresAt, now), rateLimitColumn(k), sourcesColumn(k), audiencesColumn(k))
	}
	return w.Flush()
}

func (o *listOptions) runConnections(ctx context.Context) error {
	if err := checkListOutput(o.output); err != nil {
		return err
	}
	c, ns, err := o.connect()
	if err != nil {
		return err
	}
	var conns switchboardv1alpha1.ConnectionList
	if err := c.List(ctx, &conns, client.InNamespace(ns)); err != nil {
		return explain(err, action{verb: "list", resource: "connections.switchboard.dev", kind: "Connections", namespace: ns})
	}
	if o.output != "" {
		return printObjects(o.Out, &conns, o.output)
	}
	if len(conns.Items) == 0 {
		fmt.Fprintf(o.ErrOut, "No Connections found in namespace %q.\n", ns)
		return nil
	}
	now := o.Clock.Now()
	w := printers.GetNewTabWriter(o.Out)
	fmt.Fprintln(w, "NAME\tID\tPROVIDER\tREADY\tAGE")
	for i := range conns.Items {
		conn := &conns.Items[i]
		ready := "Unknown"
		if cond := meta.FindStatusCondition(conn.Status.Conditions, switchboardv1alpha1.ConditionReady); cond != nil {
			ready = string(cond.Status)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", conn.Name, orDash(conn.Status.ID), orDash(conn.Spec.Provider), ready, age(conn.CreationTimestamp, now))
	}
	return w.Flush()
}

// orDash shows an empty column as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
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
