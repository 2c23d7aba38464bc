package webhooksender

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

// holdDelay is how long an endpoint that cannot be attempted (its signing secrets' copy
// missing, its URL refused) waits before it is looked at again, unless its KeyWebhook or its
// copy changes first.
const holdDelay = 30 * time.Second

// dispatcher picks due messages and runs one attempt per worker, within the bounds: the
// Runnable that only the leader runs.
type dispatcher struct {
	client  client.Client // cached reads, writes
	reader  client.Reader // fresh reads of an outbox before writing it
	cache   cache.Cache
	sender  *webhookdelivery.Sender
	policy  webhookdelivery.Policy
	system  string // the outboxes
	signing string // the signing secrets' copies
	global  int
	perNS   int
	clock   clock.Clock
	log     logr.Logger
	wakeups chan struct{}

	mu       sync.Mutex
	inflight map[string]bool      // endpoint UIDs attempted now
	nsBusy   map[string]int       // attempts in flight per namespace
	holds    map[string]time.Time // endpoint UID: not before
	written  map[string]int32     // outbox/message id: attempts recorded, -1 removed, until the cache shows it
	last     string               // the namespace served last
	workers  sync.WaitGroup
}

// NeedLeaderElection says that only the leader sends.
func (d *dispatcher) NeedLeaderElection() bool { return true }

// wake asks the loop to look at the outboxes again.
func (d *dispatcher) wake() {
	select {
	case d.wakeups <- struct{}{}:
	default:
	}
}

// Start runs the loop until ctx is done, then waits for the attempts in flight (each bounded
// by the attempt timeout; cancelled, an attempt is not recorded, and is made again).
func (d *dispatcher) Start(ctx context.Context) error {
	for _, watched := range []struct {
		obj     client.Object
		release func(client.Object) string
	}{
		{&switchboardv1alpha1.WebhookOutbox{}, nil},
		{&switchboardv1alpha1.KeyWebhook{}, func(o client.Object) string { return string(o.GetUID()) }},
		{&corev1.Secret{}, func(o client.Object) string { return o.GetLabels()[keysecret.LabelWebhookUID] }},
	} {
		inf, err := d.cache.GetInformer(ctx, watched.obj)
		if err != nil {
			return fmt.Errorf("watching for deliveries: %w", err)
		}
		release := watched.release
		on := func(obj any) {
			if o, ok := obj.(client.Object); ok && release != nil {
				d.release(release(o))
			}
			d.wake()
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: on, UpdateFunc: func(_, obj any) { on(obj) }, DeleteFunc: on,
		}); err != nil {
			return err
		}
	}
	defer d.workers.Wait()
	for {
		next := d.dispatch(ctx)
		wait := holdDelay
		if !next.IsZero() {
			wait = max(next.Sub(d.clock.Now()), 10*time.Millisecond)
		}
		timer := d.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-d.wakeups:
		case <-timer.C():
		}
		timer.Stop()
	}
}

// release lifts the hold of endpoint uid: its KeyWebhook or its signing secrets changed.
func (d *dispatcher) release(uid string) {
	if uid == "" {
		return
	}
	d.mu.Lock()
	delete(d.holds, uid)
	d.mu.Unlock()
}

// dispatch starts the attempts the bounds allow now and returns when the next message falls
// due (zero: none known).
func (d *dispatcher) dispatch(ctx context.Context) time.Time {
	var list switchboardv1alpha1.WebhookOutboxList
	if err := d.client.List(ctx, &list, client.InNamespace(d.system)); err != nil {
		d.log.Error(err, "listing the outboxes")
		return d.clock.Now().Add(time.Second)
	}
	now := d.clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	pending, seen := 0, map[string]bool{}
	for i := range list.Items {
		pending += len(list.Items[i].Spec.Messages)
		for _, m := range list.Items[i].Spec.Messages {
			seen[list.Items[i].Name+"/"+m.ID] = true
		}
	}
	metricPending.Set(float64(pending))
	for k, v := range d.written {
		if v < 0 && !seen[k] {
			delete(d.written, k)
		}
	}
	busy := func(uid string) bool {
		at, held := d.holds[uid]
		return d.inflight[uid] || (held && at.After(now))
	}
	due, next := dueMessages(list.Items, now, busy, d.stale)
	for _, at := range d.holds {
		if at.After(now) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	picked, last := roundRobin(due, d.global-len(d.inflight), func(ns string) int { return d.perNS - d.nsBusy[ns] }, d.last)
	d.last = last
	for _, c := range picked {
		d.inflight[c.message.WebhookUID] = true
		d.nsBusy[c.namespace]++
		d.workers.Add(1)
		go func() {
			defer d.workers.Done()
			d.attempt(ctx, c)
			d.mu.Lock()
			delete(d.inflight, c.message.WebhookUID)
			if d.nsBusy[c.namespace]--; d.nsBusy[c.namespace] <= 0 {
				delete(d.nsBusy, c.namespace)
			}
			d.mu.Unlock()
			d.wake()
		}()
	}
	return next
}

// stale says whether the cache's copy of message m of outbox predates what this sender
// recorded (the cache has not seen the write yet); d.mu is held.
func (d *dispatcher) stale(outbox string, m *switchboardv1alpha1.WebhookMessage) bool {
	key := outbox + "/" + m.ID
	w, ok := d.written[key]
	if !ok {
		return false
	}
	if w >= 0 && m.Attempts >= w {
		delete(d.written, key)
		return false
	}
	return true
}

// attempt makes one attempt at c and records it.
func (d *dispatcher) attempt(ctx context.Context, c candidate) {
	m := c.message
	log := d.log.WithValues("namespace", c.namespace, "keyWebhook", m.WebhookName, "webhookID", m.ID)
	kw := &switchboardv1alpha1.KeyWebhook{}
	err := d.client.Get(ctx, types.NamespacedName{Namespace: c.namespace, Name: m.WebhookName}, kw)
	switch {
	case apierrors.IsNotFound(err) || (err == nil && string(kw.UID) != m.WebhookUID):
		// The subscription it was recorded for is gone (perhaps replaced under its name).
		d.settle(ctx, c, outcome{drop: true}, log, "webhook_deleted")
		return
	case err != nil:
		log.Error(err, "reading the KeyWebhook")
		d.hold(m.WebhookUID, time.Second)
		return
	}
	ob := &switchboardv1alpha1.WebhookOutbox{}
	if err := d.client.Get(ctx, types.NamespacedName{Namespace: d.system, Name: c.outbox}, ob); err == nil {
		if st := findState(&ob.Spec, m.WebhookUID); st != nil && st.DisabledGeneration != 0 && st.DisabledGeneration == kw.Generation {
			d.settle(ctx, c, outcome{drop: true, count: true}, log, "disabled")
			return
		}
	}
	if int(m.Attempts) >= d.sender.Attempts() {
		d.settle(ctx, c, outcome{drop: true, count: true}, log, "gave_up")
		return
	}
	ep, err := d.endpoint(ctx, kw)
	if err != nil {
		// The operator says why on the KeyWebhook (InvalidEndpoint, SigningSecretMissing).
		log.V(1).Info("not attempted", "reason", err.Error())
		d.hold(m.WebhookUID, holdDelay)
		return
	}
	res, err := d.sender.Send(ctx, ep, webhookdelivery.Message{ID: m.ID, Body: []byte(m.Body)}, int(m.Attempts)+1)
	if ctx.Err() != nil {
		return // stopped mid-attempt: not recorded, so sent again by the next leader
	}
	if err != nil {
		log.Info("not attempted", "reason", err.Error())
		d.hold(m.WebhookUID, holdDelay)
		return
	}
	metricAttempts.WithLabelValues(strings.ToLower(res.Outcome.String())).Inc()
	o := outcome{result: res, generation: kw.Generation}
	if res.Err != nil {
		o.err = truncate(res.Err.Error(), 1024)
		log.Info("delivery failed", "outcome", res.Outcome.String(), "status", res.StatusCode, "error", o.err)
	}
	reason := ""
	switch res.Outcome {
	case webhookdelivery.Disable:
		reason = "disabled"
	case webhookdelivery.GiveUp:
		reason = "gave_up"
	}
	d.settle(ctx, c, o, log, reason)
}

// endpoint is where kw's messages go and how they are signed, or why they cannot be sent.
func (d *dispatcher) endpoint(ctx context.Context, kw *switchboardv1alpha1.KeyWebhook) (webhookdelivery.Endpoint, error) {
	u, err := d.policy.ParseEndpoint(kw.Spec.URL)
	if err != nil {
		return webhookdelivery.Endpoint{}, err
	}
	s := &corev1.Secret{}
	if err := d.client.Get(ctx, types.NamespacedName{Namespace: d.signing, Name: keysecret.SigningSecretName(kw.UID)}, s); err != nil {
		return webhookdelivery.Endpoint{}, fmt.Errorf("the copy of its signing secrets: %w", err)
	}
	signer, err := webhookdelivery.NewSigner(strings.Fields(string(s.Data[keysecret.DataSigningSecrets]))...)
	if err != nil {
		return webhookdelivery.Endpoint{}, err
	}
	return webhookdelivery.Endpoint{URL: u, Signer: signer}, nil
}

// hold keeps endpoint uid from being attempted for a while.
func (d *dispatcher) hold(uid string, delay time.Duration) {
	d.mu.Lock()
	d.holds[uid] = d.clock.Now().Add(delay)
	d.mu.Unlock()
}

// settle records o in c's outbox, with optimistic concurrency (the operator appends to it
// meanwhile), and counts what it dropped under dropReason.
func (d *dispatcher) settle(ctx context.Context, c candidate, o outcome, log logr.Logger, dropReason string) {
	m := c.message
	var removed []string
	attempts := int32(-1)
	key := types.NamespacedName{Namespace: d.system, Name: c.outbox}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ob := &switchboardv1alpha1.WebhookOutbox{}
		if err := d.reader.Get(ctx, key, ob); err != nil {
			return err
		}
		removed = apply(&ob.Spec, m.WebhookUID, m.ID, o, d.clock.Now())
		for _, x := range ob.Spec.Messages {
			if x.ID == m.ID {
				attempts = x.Attempts
			}
		}
		return d.client.Update(ctx, ob)
	})
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			log.Error(err, "recording an attempt in the outbox; the message will be attempted again")
		}
		return
	}
	if dropReason != "" && len(removed) > 0 {
		metricDropped.WithLabelValues(dropReason).Add(float64(len(removed)))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range removed {
		d.written[c.outbox+"/"+id] = -1
	}
	if attempts >= 0 {
		d.written[c.outbox+"/"+m.ID] = attempts
	}
}

// truncate cuts s to at most n bytes.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
