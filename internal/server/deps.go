package server

import (
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/switchboard-dev/switchboard/internal/server/leakreceiver"
)

// Deps are what Run takes besides its configuration: what only a process (or a test) has. The
// zero value of each field is the process's own.
type Deps struct {
	// RESTConfig reaches the Kubernetes API server (required).
	RESTConfig *rest.Config
	// Listener, when set, is served in place of listening on the configuration's listen (tests
	// pass ":0" listeners); AuthzGRPCListener, AuthzHTTPListener and LeakReportsListener stand
	// likewise for authz.grpc.listen, authz.http.listen and leakReports.listen, and serve even
	// where those are "". Run owns them: whatever it returns, they are closed.
	Listener, AuthzGRPCListener, AuthzHTTPListener, LeakReportsListener net.Listener
	// PanelHandler serves the configuration's panel section (panel.NewHandler): required when
	// panel.listen is set.
	PanelHandler http.Handler
	// Clock decides expiry and grace (default: the real clock).
	Clock clock.PassiveClock
	// CatchUpClock paces the leak reports' catch-up listings (default: the real clock).
	CatchUpClock clock.WithTicker
	// LeakReceiver, when set, adjusts the leak reports receiver's configuration once it is built
	// from the server's: for the tests of the receiver's door, an organization's webhook without
	// its catch-up, which a configuration does not allow.
	LeakReceiver func(*leakreceiver.Config)
	// LastUsedFlush is how often used keys are looked for (default 10s).
	LastUsedFlush time.Duration
	// Logger is the server's (default: controller-runtime's, named "server"). Whatever it is
	// given, it logs nothing above internal/logging's verbosity (client-go logs Secret bodies).
	Logger logr.Logger
}

// defaultLastUsedFlush is how often the server looks for used keys by default.
const defaultLastUsedFlush = 10 * time.Second
