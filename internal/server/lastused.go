package server

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyindex"
)

// usageWriter writes APIKey status.lastUsedAt in batches, off the request path: requests only
// store a timestamp in memory (keyindex.Usage.Touch); every tick this loop patches the keys used
// since their last write, each at most once per interval. A slow or failing API server delays
// these writes and nothing else.
type usageWriter struct {
	index    *keyindex.Index
	client   client.Client
	clock    clock.PassiveClock
	interval time.Duration // at most one write per key per interval
	tick     time.Duration
	timeout  time.Duration // per patch
	log      logr.Logger
}

func (u *usageWriter) run(ctx context.Context) {
	t := time.NewTicker(u.tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			u.flush(ctx)
		}
	}
}

// flush writes lastUsedAt for every key that needs it. Writes are second-granular, like every
// metav1.Time.
func (u *usageWriter) flush(ctx context.Context) {
	for _, k := range u.index.Keys() {
		if ctx.Err() != nil {
			return
		}
		usage := k.Usage()
		used := usage.LastUsed()
		if used.IsZero() || !used.After(usage.LastWritten()) {
			continue
		}
		now := u.clock.Now()
		if at := usage.WrittenAt(); !at.IsZero() && now.Sub(at) < u.interval {
			continue
		}
		at := used.Truncate(time.Second)
		// Another replica (or this one, before a restart) may have written it recently.
		if !k.LastUsedAt.IsZero() && at.Sub(k.LastUsedAt) < u.interval {
			continue
		}
		err := u.patch(ctx, k, at)
		switch {
		case err == nil:
			usage.MarkWritten(used, now)
			lastUsedWrites.WithLabelValues("ok").Inc()
		case apierrors.IsNotFound(err):
			// Deleted since: nothing to record.
			usage.MarkWritten(used, now)
			lastUsedWrites.WithLabelValues("gone").Inc()
		default:
			lastUsedWrites.WithLabelValues("error").Inc()
			u.log.V(1).Info("writing lastUsedAt failed; will retry", "namespace", k.Namespace, "name", k.Name, "key", k.Hint, "error", err.Error())
		}
	}
}

// patch merges status.lastUsedAt and nothing else. The status subresource ignores metadata, so
// the patch cannot carry a UID precondition: the writer only patches keys the index still holds
// by UID, which leaves a window of one informer event for an APIKey deleted and re-created under
// the same name to receive its predecessor's last use.
func (u *usageWriter) patch(ctx context.Context, k *keyindex.Key, at time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	stamp := metav1.NewTime(at).UTC().Format(time.RFC3339)
	body := fmt.Appendf(nil, `{"status":{"lastUsedAt":%q}}`, stamp)
	obj := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}
	return u.client.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, body))
}
