package plugin

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

func newKeyHistoryCommand(o *Options) *cobra.Command {
	return newKeyReportCommand(o, &cobra.Command{
		Use:   "history NAME",
		Short: "Show an API key's life: its events, oldest first, kept longer than Kubernetes Events",
		Long: "Show the events of one APIKey, oldest first: created, revealed, rotated, renewed, expiring,\n" +
			"unused, revoked, expired, leaked, each with its time, the key generation it happened to, that\n" +
			"key's hint and what happened. switchboard keeps the last 64 of each key (older ones are\n" +
			"dropped and counted), for as long as the APIKey exists, in an APIKeyHistory of the APIKey's\n" +
			"name that you can read and only switchboard writes. It never shows a key.",
		Example: "  kubectl switchboard key history ci -n demo\n" +
			"  kubectl switchboard key history ci -n demo -o yaml",
	}, func(ctx context.Context, c client.Client, key *switchboardv1alpha1.APIKey) (any, func() error, error) {
		var h switchboardv1alpha1.APIKeyHistory
		err := c.Get(ctx, client.ObjectKeyFromObject(key), &h)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, nil, explain(err, action{verb: "get", resource: "apikeyhistories.switchboard.dev", kind: "APIKeyHistory", namespace: key.Namespace, name: key.Name})
		}
		report := historyOf(key, &h)
		return report, func() error {
			if len(report.Events) == 0 {
				fmt.Fprintf(o.ErrOut, "No events recorded for APIKey %q in namespace %q yet.\n", key.Name, key.Namespace)
				return nil
			}
			return printKeyHistory(o.Out, report)
		}, nil
	})
}

// keyHistory is what `key history` shows, and its -o json|yaml shape.
type keyHistory struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Events are oldest first.
	Events []keyHistoryEvent `json:"events"`
	// Dropped counts the older events no longer kept.
	Dropped int64 `json:"dropped"`
}

// keyHistoryEvent is one event of the key's life; the hint, never the key.
type keyHistoryEvent struct {
	Time       metav1.Time `json:"time"`
	Type       string      `json:"type"`
	Generation int64       `json:"generation"`
	Hint       string      `json:"hint,omitempty"`
	Message    string      `json:"message,omitempty"`
}

// historyOf is key's history as h records it: none when h is not the history of this APIKey
// (missing, or left by a deleted APIKey of the same name, which the garbage collector takes).
func historyOf(key *switchboardv1alpha1.APIKey, h *switchboardv1alpha1.APIKeyHistory) *keyHistory {
	r := &keyHistory{Name: key.Name, Namespace: key.Namespace, Events: []keyHistoryEvent{}}
	if owner := metav1.GetControllerOf(h); owner == nil || owner.UID != key.UID {
		return r
	}
	r.Dropped = h.Spec.Dropped
	for _, e := range h.Spec.Events {
		r.Events = append(r.Events, keyHistoryEvent{Time: e.Time, Type: string(e.Type), Generation: e.KeyGeneration, Hint: e.KeyHint, Message: e.Message})
	}
	return r
}

// printKeyHistory writes r as a table, oldest first.
func printKeyHistory(out io.Writer, r *keyHistory) error {
	if r.Dropped > 0 {
		if _, err := fmt.Fprintf(out, "(%d older events dropped)\n", r.Dropped); err != nil {
			return err
		}
	}
	w := printers.GetNewTabWriter(out)
	fmt.Fprintln(w, "TIME\tTYPE\tGENERATION\tHINT\tMESSAGE")
	for _, e := range r.Events {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", e.Time.UTC().Format(time.RFC3339), strings.TrimPrefix(e.Type, "apikey."),
			e.Generation, orDash(e.Hint), orDash(oneLine(e.Message)))
	}
	return w.Flush()
}
