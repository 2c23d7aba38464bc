//go:build !unit

package keyclient_test

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/keyclient/keyclienttest"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

type rotation struct {
	issued *keyclient.Issued
	err    error
}

// rotateAtOnce creates APIKey name and rotates it with two clients of the owner at once, both
// asking for req; it returns the key created and the two outcomes.
func rotateAtOnce(t *testing.T, ns, name string, req keyclient.RotateRequest) (*keyclient.Issued, []rotation) {
	t.Helper()
	owner := identity(t, ns, "owner", ownerRules...)
	first, err := keyclient.New(owner, keyclient.Options{}).Create(testContext(t), newKey(ns, name), wait)
	if err != nil {
		t.Fatal(err)
	}
	// The operator's status update for the claim lands before the race, not in the middle.
	testenv.Eventually(t, wait, "the claim recorded", func() error {
		k, err := keyclient.New(owner, keyclient.Options{}).Get(testContext(t), ns, name)
		if err != nil {
			return err
		}
		if keyclient.RevealStatus(k) != keyclient.RevealGone {
			return fmt.Errorf("reveal state %d", keyclient.RevealStatus(k))
		}
		return nil
	})
	race := keyclienttest.NewWriteRace(2, wait)
	out := make([]rotation, 2)
	var wg sync.WaitGroup
	for i := range out {
		c := keyclient.New(race.Intercept(owner), keyclient.Options{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i].issued, out[i].err = c.Rotate(testContext(t), ns, name, req)
		}()
	}
	wg.Wait()
	if !race.Raced() || race.Conflicts() == 0 {
		t.Fatalf("the race was not run: both came to the write %v, writes refused for the precondition %d", race.Raced(), race.Conflicts())
	}
	return first, out
}

// Two copies of one rotation request at once (the rotate form posted twice, or the same form in
// two tabs; here in the same second, as an RFC 3339 requestedAt without fractions would make
// two requests of one person): exactly one caller wrote the request and gets the key; the other
// is told the rotation was requested elsewhere and claims nothing. Before, both waited for the
// key, and the one that lost the claim took the other's key for stolen and rotated again with
// no grace: the key just shown stopped, and so did the replaced key, whatever grace was asked.
func TestRotateSameRequestTwiceAtOnceHandsOverOnce(t *testing.T) {
	ns := env.Namespace(t, "rotate-twice")
	req := keyclient.RotateRequest{RequestedAt: time.Now().UTC().Format(time.RFC3339), Grace: time.Hour, Timeout: wait}
	first, out := rotateAtOnce(t, ns, "svc", req)

	var winner *keyclient.Issued
	var loser error
	for _, r := range out {
		if r.err == nil {
			winner = r.issued
		} else {
			loser = r.err
		}
	}
	if winner == nil || loser == nil {
		t.Fatalf("outcomes %v and %v: want one key handed over and one error", out[0].err, out[1].err)
	}
	var elsewhere *keyclient.RequestedElsewhereError
	if !errors.As(loser, &elsewhere) || !elsewhere.Same || elsewhere.RequestedAt != req.RequestedAt ||
		!errors.Is(loser, keyclient.ErrRequestedElsewhere) || errors.Is(loser, keyclient.ErrAlreadyClaimed) {
		t.Fatalf("the other copy: %v, want a *RequestedElsewhereError for the same request", loser)
	}
	if winner.Revealed.Generation != 2 || len(winner.Stolen) != 0 || winner.Replaced != first.Hint() {
		t.Fatalf("handed over generation %d replacing %s, stolen %v; want generation 2 replacing %s, nothing stolen",
			winner.Revealed.Generation, winner.Replaced, winner.Stolen, first.Hint())
	}
	if until := winner.PreviousValidUntil(time.Now()); until == nil || time.Until(*until) < 59*time.Minute {
		t.Fatalf("previous key valid until %v, want about an hour from now", until)
	}
	// One rotation, carried out once: the key handed over is the current one.
	var k switchboardv1alpha1.APIKey
	if err := env.Client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: "svc"}, &k); err != nil {
		t.Fatal(err)
	}
	if k.Status.KeyGeneration != 2 || k.Status.KeyHint != apikey.Hint(winner.Revealed.Key) || k.Spec.Rotation.RequestedAt != req.RequestedAt ||
		k.Spec.Rotation.GracePeriod.Duration != time.Hour {
		t.Fatalf("APIKey at generation %d, hint %s, rotation %+v; want generation 2 with the key handed over, the request asked for",
			k.Status.KeyGeneration, k.Status.KeyHint, k.Spec.Rotation)
	}
	requireV1(t, "the key handed over", winner.Revealed.Key, http.StatusOK)
	requireV1(t, "the replaced key, in its grace period", first.Revealed.Key, http.StatusOK)
}

// Two fresh rotation requests at once (two `kubectl switchboard key rotate` runs): each caller
// requests its own rotation, so whatever the interleaving, nobody takes the other's key for
// stolen: every key handed over works, and a caller without a key got a clear error.
func TestRotateTwoFreshRequestsAtOnceStopNothing(t *testing.T) {
	ns := env.Namespace(t, "rotate-two")
	first, out := rotateAtOnce(t, ns, "svc", keyclient.RotateRequest{Grace: time.Hour, Timeout: wait})
	handed := 0
	for _, r := range out {
		var elsewhere *keyclient.RequestedElsewhereError
		var superseded *keyclient.SupersededError
		switch {
		case r.err == nil:
			handed++
			if len(r.issued.Stolen) != 0 {
				t.Errorf("a key was taken for stolen: %v", r.issued.Stolen)
			}
			requireV1(t, "a key handed over", r.issued.Revealed.Key, http.StatusOK)
		case errors.As(r.err, &elsewhere) && !elsewhere.Same, errors.As(r.err, &superseded):
		default:
			t.Errorf("rotation failed: %v, want a key, or the other's request named", r.err)
		}
	}
	if handed == 0 {
		t.Fatal("neither rotation handed over a key")
	}
	var k switchboardv1alpha1.APIKey
	if err := env.Client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: "svc"}, &k); err != nil {
		t.Fatal(err)
	}
	if k.Status.KeyGeneration == 2 {
		// One rotation only: the key it replaced keeps the grace asked for. (After two, only
		// the second's previous key is kept, as for any two rotations.)
		requireV1(t, "the replaced key, in its grace period", first.Revealed.Key, http.StatusOK)
	}
}
