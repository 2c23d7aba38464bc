package keyadmission

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Turns for the renewal-window checks. A check costs up to renewalwindow's bound of calendar
// lookups (some 50 ms of a core), and any tenant may ask for as many as it likes (a
// `--dry-run=server` write costs it nothing): checks run one at a time, so that the webhook
// takes at most one core from the operator's reconcilers, and namespaces take turns, as the
// operator's work queue does (internal/fairqueue), so that one namespace's flood
// never keeps another's check waiting past the API server's timeout (failurePolicy Fail for
// cron windows: a check that times out is a refusal). A namespace holds at most
// checksPerNamespace checks, running or waiting: past them it is refused at once, and a check
// never waits longer than maxTurnWait for its turn.

const (
	// checksRunning is how many checks run at once.
	checksRunning = 1
	// checksPerNamespace is how many checks one namespace may have running or waiting: one
	// checked, one waiting its turn (a GitOps tool applying a few keys at once).
	checksPerNamespace = 2
	// maxTurnWait bounds the wait for a turn, well under the webhook's timeoutSeconds (10): a
	// refusal that says to retry is better than the API server's timeout, which says nothing.
	maxTurnWait = 3 * time.Second
)

// The refusals of turns.acquire.
var (
	// errNamespaceBusy: the namespace's own checks hold all its turns.
	errNamespaceBusy = errors.New("too many renewal-window checks in progress for namespace")
	// errNoTurn: the wait for a turn passed maxTurnWait, or the request ended first.
	errNoTurn = errors.New("too many renewal-window checks in progress")
)

// turns hands out the right to run a check: at most running at once, namespaces in rotation,
// each namespace's checks in the order they came.
type turns struct {
	running, perNamespace int
	maxWait               time.Duration

	mu sync.Mutex
	// inUse is how many checks run now.
	inUse int
	// held is each namespace's checks running or waiting; a key only while it has some.
	held map[string]int
	// lines are each namespace's waiting checks, oldest first; rotation the namespaces with
	// checks waiting, the next turn going to rotation[0] (each namespace once).
	lines    map[string][]*waiter
	rotation []string
}

// waiter is a check waiting for its turn; turn is closed when it is given one.
type waiter struct {
	turn  chan struct{}
	given bool
}

func newTurns(running, perNamespace int, maxWait time.Duration) *turns {
	return &turns{running: running, perNamespace: perNamespace, maxWait: maxWait,
		held: map[string]int{}, lines: map[string][]*waiter{}}
}

// acquire waits for namespace's turn to run a check, and returns the function that gives it
// back; errNamespaceBusy at once when the namespace's checks hold all its turns, errNoTurn
// when none came within maxWait or before ctx ended.
func (t *turns) acquire(ctx context.Context, namespace string) (release func(), err error) {
	t.mu.Lock()
	if t.held[namespace] >= t.perNamespace {
		t.mu.Unlock()
		return nil, errNamespaceBusy
	}
	t.held[namespace]++
	release = func() { t.release(namespace) }
	if t.inUse < t.running && len(t.rotation) == 0 {
		t.inUse++
		t.mu.Unlock()
		return release, nil
	}
	w := &waiter{turn: make(chan struct{})}
	if len(t.lines[namespace]) == 0 {
		t.rotation = append(t.rotation, namespace)
	}
	t.lines[namespace] = append(t.lines[namespace], w)
	t.mu.Unlock()

	timer := time.NewTimer(t.maxWait)
	defer timer.Stop()
	select {
	case <-w.turn:
		return release, nil
	case <-timer.C:
	case <-ctx.Done():
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if w.given {
		// Given at the very moment the wait ended: it is taken.
		return release, nil
	}
	t.leave(namespace, w)
	t.drop(namespace)
	return nil, errNoTurn
}

// release ends a check of namespace and gives its turn to the next namespace in rotation.
func (t *turns) release(namespace string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.drop(namespace)
	t.inUse--
	if len(t.rotation) == 0 {
		return
	}
	next := t.rotation[0]
	t.rotation = t.rotation[1:]
	line := t.lines[next]
	w := line[0]
	line[0] = nil
	if line = line[1:]; len(line) == 0 {
		delete(t.lines, next)
	} else {
		t.lines[next] = line
		t.rotation = append(t.rotation, next)
	}
	t.inUse++
	w.given = true
	close(w.turn)
}

// leave takes w out of namespace's line, and the namespace out of the rotation if it was its
// last waiting check. t.mu is held.
func (t *turns) leave(namespace string, w *waiter) {
	line := t.lines[namespace]
	for i := range line {
		if line[i] == w {
			line = append(line[:i:i], line[i+1:]...)
			break
		}
	}
	if len(line) > 0 {
		t.lines[namespace] = line
		return
	}
	delete(t.lines, namespace)
	for i, ns := range t.rotation {
		if ns == namespace {
			t.rotation = append(t.rotation[:i:i], t.rotation[i+1:]...)
			break
		}
	}
}

// drop counts one check of namespace fewer. t.mu is held.
func (t *turns) drop(namespace string) {
	if t.held[namespace]--; t.held[namespace] <= 0 {
		delete(t.held, namespace)
	}
}
