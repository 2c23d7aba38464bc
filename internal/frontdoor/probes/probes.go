// Package probes serves a process's health probes, /healthz and /readyz, from named checks,
// through the front door's probe door (frontdoor.ProbeLimits). controller-runtime's manager
// serves its own probe listener with no connection bound and no hook to add one, so every
// switchboard process turns that off and serves its checks here instead.
package probes

import (
	"fmt"
	"net/http"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/switchboard-dev/switchboard/internal/frontdoor"
)

// Probes are a process's liveness (/healthz) and readiness (/readyz) checks. The zero value
// has none (each path then answers ok); checks are added before the probes are served.
type Probes struct {
	mu      sync.Mutex
	healthz map[string]healthz.Checker
	readyz  map[string]healthz.Checker
	served  bool
}

// AddHealthz adds a liveness check named name, served at /healthz and /healthz/<name>.
func (p *Probes) AddHealthz(name string, check healthz.Checker) error {
	return p.add(&p.healthz, "liveness", name, check)
}

// AddReadyz adds a readiness check named name, served at /readyz and /readyz/<name>.
func (p *Probes) AddReadyz(name string, check healthz.Checker) error {
	return p.add(&p.readyz, "readiness", name, check)
}

func (p *Probes) add(checks *map[string]healthz.Checker, kind, name string, check healthz.Checker) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.served:
		return fmt.Errorf("adding the %s check %q: the probes are served already", kind, name)
	case check == nil:
		return fmt.Errorf("adding the %s check %q: no check", kind, name)
	case (*checks)[name] != nil:
		return fmt.Errorf("adding the %s check %q: there is one of that name already", kind, name)
	}
	if *checks == nil {
		*checks = map[string]healthz.Checker{}
	}
	(*checks)[name] = check
	return nil
}

// Handler answers /healthz and /readyz with every check, and /healthz/<name> and
// /readyz/<name> with one, as controller-runtime's manager does. No check can be added after.
func (p *Probes) Handler() http.Handler {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.served = true
	mux := http.NewServeMux()
	for path, checks := range map[string]map[string]healthz.Checker{"/healthz": p.healthz, "/readyz": p.readyz} {
		h := http.StripPrefix(path, &healthz.Handler{Checks: checks})
		mux.Handle(path, h)
		mux.Handle(path+"/", h)
	}
	return mux
}

// Listener is the probes served at addr ("": not served), through the probe door.
func (p *Probes) Listener(addr string) frontdoor.Listener {
	l := frontdoor.Listener{Door: "probes", Address: addr}
	if addr != "" {
		l.Handler = p.Handler()
	}
	return l
}
