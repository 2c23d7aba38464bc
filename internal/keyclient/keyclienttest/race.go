package keyclienttest

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// WriteRace holds back the first n APIKey patches made through its clients until all n have
// come, so that n callers (two copies of one rotation request, say) all read the APIKey before
// any of them writes: the race made certain, with real clients against the real API server.
type WriteRace struct {
	n         int
	timeout   time.Duration
	arrived   sync.WaitGroup
	released  chan struct{}
	patches   atomic.Int32
	conflicts atomic.Int32
}

// NewWriteRace holds back n patches, for at most timeout (so that a caller that never writes
// fails the test instead of hanging it: check Raced).
func NewWriteRace(n int, timeout time.Duration) *WriteRace {
	r := &WriteRace{n: n, timeout: timeout, released: make(chan struct{})}
	r.arrived.Add(n)
	go func() { r.arrived.Wait(); close(r.released) }()
	return r
}

// Intercept wraps a caller's client.
func (r *WriteRace) Intercept(c client.WithWatch) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*switchboardv1alpha1.APIKey); ok && int(r.patches.Add(1)) <= r.n {
				r.arrived.Done()
				select {
				case <-r.released:
				case <-time.After(r.timeout):
				}
			}
			err := c.Patch(ctx, obj, patch, opts...)
			if apierrors.IsConflict(err) {
				r.conflicts.Add(1)
			}
			return err
		},
	})
}

// Raced reports that all n patches came, so that the race was really run.
func (r *WriteRace) Raced() bool {
	select {
	case <-r.released:
		return true
	default:
		return false
	}
}

// Conflicts is how many patches the API server refused for their resourceVersion precondition.
func (r *WriteRace) Conflicts() int { return int(r.conflicts.Load()) }
