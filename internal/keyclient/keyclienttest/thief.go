// Package keyclienttest helps tests of the key workflow and its views (the plugin, the panel)
// stage the races the workflow must survive: another identity claiming a key's one-time reveal
// first (Thief), and two callers writing one rotation request at once (WriteRace).
package keyclienttest

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// Thief is a second identity (say a tenant user who may get and delete the namespace's
// Secrets) that claims reveal Secrets just before their owner reads them, and keeps the keys.
type Thief struct {
	c      client.Client
	mu     sync.Mutex
	budget int
	keys   []string
	errs   []error
}

// NewThief returns a thief acting with c, which steals nothing until Arm.
func NewThief(c client.Client) *Thief { return &Thief{c: c} }

// Arm lets the thief steal the next n reveal Secrets the owner reads.
func (th *Thief) Arm(n int) {
	th.mu.Lock()
	defer th.mu.Unlock()
	th.budget = n
}

// Keys are the keys stolen so far, in order.
func (th *Thief) Keys() []string {
	th.mu.Lock()
	defer th.mu.Unlock()
	return append([]string(nil), th.keys...)
}

// Err reports the first failed theft: a test that armed the thief must check it.
func (th *Thief) Err() error {
	th.mu.Lock()
	defer th.mu.Unlock()
	if len(th.errs) == 0 {
		return nil
	}
	return th.errs[0]
}

// Intercept wraps the owner's own client so that, while armed, the thief claims each Secret
// the owner is about to read: the race made certain, with both identities real.
func (th *Thief) Intercept(owner client.WithWatch) client.WithWatch {
	return interceptor.NewClient(owner, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Secret); ok && th.take() {
				th.steal(ctx, key)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
}

func (th *Thief) take() bool {
	th.mu.Lock()
	defer th.mu.Unlock()
	if th.budget <= 0 {
		return false
	}
	th.budget--
	return true
}

// steal claims the Secret as any claimer would: read it, delete it with preconditions.
func (th *Thief) steal(ctx context.Context, key client.ObjectKey) {
	var s corev1.Secret
	err := th.c.Get(ctx, key, &s)
	if err == nil {
		uid, rv := s.UID, s.ResourceVersion
		err = th.c.Delete(ctx, &s, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	}
	th.mu.Lock()
	defer th.mu.Unlock()
	if err != nil {
		th.errs = append(th.errs, fmt.Errorf("the thief could not claim %s: %w", key, err))
		return
	}
	th.keys = append(th.keys, string(s.Data[keysecret.DataKey]))
}
