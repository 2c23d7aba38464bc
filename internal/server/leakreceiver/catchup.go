package leakreceiver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"

	"github.com/switchboard-dev/switchboard/internal/config"
	"github.com/switchboard-dev/switchboard/internal/server/leakreceiver/secretscanning"
)

// The catch-up. GitHub does not deliver an organization's webhook again on its own: a
// delivery lost (the receiver down or overloaded, an answer that failed) would leave its leak
// unrecorded. So one replica at a time (the holder of the Lease CatchUpLease in the system
// namespace) lists the organization's open alerts every period, within a budget of REST
// requests, and records the leak of any key issued here that is not recorded yet, by the
// same path as the webhook's. What it handled is remembered as a delivery's is: an alert
// handled by either is not handled again within the replays' TTL.

// CatchUpLease names the Lease the replicas hold to list the alerts one at a time.
const CatchUpLease = "switchboard-leak-catch-up.switchboard.dev"

// The Lease's timing: controller-runtime's defaults. A replica that dies holding it is
// replaced within LeaseDuration.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

// CatchUp configures the listing of an organization's open alerts.
type CatchUp struct {
	// Organization is the organization whose open alerts are listed; "" lists none. It needs
	// the webhook (Config.WebhookSecret) and its API token.
	Organization string
	// Period is the time between two listings; MaxCalls bounds the REST requests of one.
	Period   time.Duration
	MaxCalls int
	// Leases holds the Lease (required with Organization).
	Leases coordinationv1client.LeasesGetter
	// Identity names this replica in the Lease (default: the host's name and a random suffix).
	Identity string
	// Clock paces the listings (default: the real clock).
	Clock clock.WithTicker
}

// check refuses what cannot run, and names this replica in the Lease when c does not.
func (c *CatchUp) check(webhook bool) error {
	if c.Organization == "" {
		return nil
	}
	switch {
	case !webhook:
		return errors.New("leak reports: listing an organization's alerts needs its webhook and API token")
	case !config.ValidOrganization(c.Organization):
		return fmt.Errorf("leak reports: organization %q is not a GitHub login", c.Organization)
	case c.Leases == nil:
		return errors.New("leak reports: listing an organization's alerts needs a client of Leases")
	case c.Period <= 0 || c.MaxCalls <= 0:
		return errors.New("leak reports: the catch-up's period and budget must be positive (the configuration's, validated)")
	}
	if c.Identity == "" {
		host, _ := os.Hostname()
		suffix := make([]byte, 4)
		_, _ = rand.Read(suffix)
		c.Identity = host + "_" + hex.EncodeToString(suffix)
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return nil
}

// Run lists the organization's open alerts every period while this replica holds the Lease,
// until ctx is done; it returns at once when no organization is configured. Losing the Lease
// (the API server unreachable) stops the listings until it is held again; nothing else of
// the server depends on it.
func (r *Receiver) Run(ctx context.Context) {
	c := r.cfg.CatchUp
	if c.Organization == "" {
		return
	}
	log := r.cfg.Logger.WithValues("source", sourceCatchUp, "organization", c.Organization)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: r.cfg.Namespace, Name: CatchUpLease},
		Client:     c.Leases,
		LockConfig: resourcelock.ResourceLockConfig{Identity: c.Identity},
	}
	var leading sync.Mutex // one listing at a time in this process, too
	for ctx.Err() == nil {
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
			ReleaseOnCancel: true, Name: "leak-catch-up",
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					leading.Lock()
					defer leading.Unlock()
					log.Info("listing the organization's open alerts, one replica at a time", "period", c.Period, "maxCalls", c.MaxCalls)
					r.catchUp(ctx, log)
				},
				OnStoppedLeading: func() {},
			},
		})
		if err != nil { // the constants above are valid: a bug
			log.Error(err, "the catch-up cannot elect a replica")
			return
		}
		elector.Run(ctx)
	}
}

// catchUp lists the alerts once the index is ready, then every period, until ctx is done.
func (r *Receiver) catchUp(ctx context.Context, log logr.Logger) {
	c := r.cfg.CatchUp
	ready := time.NewTicker(100 * time.Millisecond)
	defer ready.Stop()
	for !r.cfg.Ready() { // a key must never be judged against a partial index
		select {
		case <-ctx.Done():
			return
		case <-ready.C:
		}
	}
	for {
		r.listOnce(ctx, log)
		select {
		case <-ctx.Done():
			return
		case <-c.Clock.After(c.Period):
		}
	}
}

// listOnce lists the open alerts within the budget and handles those not handled before.
func (r *Receiver) listOnce(ctx context.Context, log logr.Logger) {
	c := r.cfg.CatchUp
	var handled, failed int
	res, err := r.alerts.ListOpen(ctx, c.Organization, c.MaxCalls, func(a secretscanning.OrgAlert) {
		id := a.Ref.ID()
		if _, ok := r.replays.alert(id, r.cfg.Clock.Now()); ok {
			return
		}
		if _, err := r.handleAlert(ctx, log, sourceCatchUp, a.Report, id); err != nil {
			failed++ // not remembered: the next listing tries again
			log.Error(err, "recording a leak report", "hint", a.Hint, "alert", id)
			return
		}
		handled++
	})
	catchUpRequests.Add(float64(res.Calls))
	switch {
	case ctx.Err() != nil:
		return // the Lease was lost or the server stops: not a failure of GitHub's
	case err != nil:
		catchUpRuns.WithLabelValues("failed").Inc()
		log.Error(err, "listing the organization's open alerts", "requests", res.Calls)
	case res.More:
		catchUpRuns.WithLabelValues("budget_spent").Inc()
		log.Info("the budget of requests ran out before the last page: the oldest open alerts were not listed",
			"requests", res.Calls, "alerts", res.Alerts, "handled", handled, "failed", failed)
	default:
		catchUpRuns.WithLabelValues("complete").Inc()
		log.V(1).Info("listed the organization's open alerts", "requests", res.Calls, "alerts", res.Alerts, "handled", handled,
			"failed", failed, "withoutSecret", res.Skipped)
	}
}
