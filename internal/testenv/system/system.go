// Package system runs the whole of switchboard inside one test binary: a real control plane
// (testenv), the real operator, and the real /v1 API server, as the packages whose tests need
// all of it (the plugin, the panel) run it. It is a package of its own because testenv is
// imported by the operator's and the server's own tests, which this package imports.
package system

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/operator"
	"github.com/switchboard-dev/switchboard/internal/operator/keyadmission"
	"github.com/switchboard-dev/switchboard/internal/server"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// Options shape the system. The zero value is what tests usually want.
type Options struct {
	// SystemNamespace holds the hash Secrets (default switchboard-system).
	SystemNamespace string
	// Logger receives the operator's and the server's logs (default: none).
	Logger logr.Logger
	// Operator, when set, adjusts the operator's configuration and deps before it starts.
	Operator func(*configv1alpha1.OperatorConfiguration, *operator.Deps)
	// Server, when set, adjusts the server's configuration before it starts.
	Server func(*configv1alpha1.ServerConfiguration)
	// APIServerArgs are extra kube-apiserver flags (testenv.StartOptions).
	APIServerArgs map[string]string
	// Reveal serves the operator's reveal endpoint on loopback (RevealURL, RevealBundle).
	Reveal bool
	// Webhook serves the operator's APIKey admission webhook on loopback, with the
	// ValidatingWebhookConfiguration the chart installs (pointing there).
	Webhook bool
}

// System is a running whole system.
type System struct {
	*testenv.Env
	// APIURL is the /v1 API server's base URL ("http://127.0.0.1:port").
	APIURL string
	// SystemNamespace holds the hash Secrets.
	SystemNamespace string
	// RevealURL ("https://127.0.0.1:port") and RevealBundle ("namespace/name") reach the
	// operator's reveal endpoint, with Options.Reveal.
	RevealURL, RevealBundle string

	cancel       context.CancelFunc
	operatorDone chan error
	serverDone   chan error
}

// Start starts the control plane, creates the system namespace, and starts the operator and
// the server in this process. The server is tuned for tests: no failure limiter (tests fail
// on purpose), no shutdown delay, lastUsedAt written within a second, no extra listeners.
func Start(opts Options) (*System, error) {
	if opts.SystemNamespace == "" {
		opts.SystemNamespace = switchboardv1alpha1.DefaultSystemNamespace
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	env, err := testenv.StartWith(testenv.StartOptions{APIServerArgs: opts.APIServerArgs})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &System{Env: env, SystemNamespace: opts.SystemNamespace, cancel: cancel,
		operatorDone: make(chan error, 1), serverDone: make(chan error, 1)}
	fail := func(err error) (*System, error) {
		cancel()
		return nil, errors.Join(err, env.Stop())
	}
	if err := env.EnsureNamespace(ctx, opts.SystemNamespace); err != nil {
		return fail(fmt.Errorf("creating the system namespace: %w", err))
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(fmt.Errorf("listening for the /v1 API server: %w", err))
	}
	s.APIURL = "http://" + listener.Addr().String()

	operatorConfig := testenv.OperatorConfiguration(opts.SystemNamespace)
	operatorDeps := operator.Deps{RESTConfig: env.Config, Logger: opts.Logger.WithName("operator")}
	if opts.Reveal {
		addr, err := testenv.FreeLoopback()
		if err != nil {
			return fail(err)
		}
		operatorConfig.Reveal = configv1alpha1.RevealEndpoint{BindAddress: addr, Names: []string{"127.0.0.1"}}
		s.RevealURL = "https://" + addr
		s.RevealBundle = opts.SystemNamespace + "/" + configv1alpha1.DefaultRevealCAConfigMap
	}
	if opts.Webhook {
		addr, err := testenv.FreeLoopback()
		if err != nil {
			return fail(err)
		}
		url := "https://" + addr + keyadmission.Path
		vwc := keyadmission.Configuration(configv1alpha1.DefaultWebhookConfigurationName, admissionregistrationv1.WebhookClientConfig{URL: &url})
		if err := env.Client.Create(ctx, vwc); err != nil {
			return fail(fmt.Errorf("creating the webhook configuration: %w", err))
		}
		operatorConfig.Webhook = configv1alpha1.WebhookEndpoint{BindAddress: addr, Names: []string{"127.0.0.1"}}
	}
	if opts.Operator != nil {
		opts.Operator(operatorConfig, &operatorDeps)
	}
	serverConfig := &configv1alpha1.ServerConfiguration{
		SystemNamespace:        opts.SystemNamespace,
		Metrics:                configv1alpha1.Metrics{MetricsBindAddress: ptr.To("")},
		HealthProbeBindAddress: ptr.To(""),
		Shutdown:               configv1alpha1.Shutdown{ShutdownDelay: &metav1.Duration{}},
		LastUsed:               configv1alpha1.LastUsed{Interval: &metav1.Duration{Duration: time.Second}},
		AuthFailureLimit:       configv1alpha1.AuthFailureLimit{Rate: ptr.To(0.0)},
	}
	if opts.Server != nil {
		opts.Server(serverConfig)
	}
	serverDeps := server.Deps{RESTConfig: env.Config, Listener: listener, LastUsedFlush: 200 * time.Millisecond, Logger: opts.Logger.WithName("server")}
	go func() { s.operatorDone <- operator.Run(ctx, operatorConfig, operatorDeps) }()
	go func() { s.serverDone <- server.Run(ctx, serverConfig, serverDeps) }()
	return s, nil
}

// OperatorErr is nil while the operator runs, and says why once it has stopped.
func (s *System) OperatorErr() error { return stopped("the operator", s.operatorDone) }

// ServerErr is nil while the /v1 API server runs, and says why once it has stopped.
func (s *System) ServerErr() error { return stopped("the /v1 API server", s.serverDone) }

// stopped peeks at done: nil while the part runs, else why it stopped (kept for the next peek).
func stopped(what string, done chan error) error {
	select {
	case err := <-done:
		done <- err
		if err == nil {
			return fmt.Errorf("%s stopped", what)
		}
		return fmt.Errorf("%s stopped: %w", what, err)
	default:
		return nil
	}
}

// Connections calls GET /v1/connections on the server with key as the bearer key, and returns
// the status and the error code of the answer ("" when it has none).
func (s *System) Connections(ctx context.Context, key string) (status int, code string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.APIURL+"/v1/connections", nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("GET /v1/connections: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body) // a 200's body has no error: the code stays ""
	return resp.StatusCode, body.Error.Code, nil
}

// Stop stops the operator and the server, then the control plane. It returns the error of a
// part that stopped with one.
func (s *System) Stop() error {
	s.cancel()
	var errs []error
	for what, done := range map[string]chan error{"the operator": s.operatorDone, "the /v1 API server": s.serverDone} {
		if err := <-done; err != nil {
			errs = append(errs, fmt.Errorf("%s stopped with an error: %w", what, err))
		}
	}
	if err := s.Env.Stop(); err != nil {
		errs = append(errs, fmt.Errorf("stopping the control plane: %w", err))
	}
	return errors.Join(errs...)
}

// Main is a TestMain body: it starts the system, hands it to use (which keeps what the
// package's tests need), runs the tests, stops everything and exits. The exit code is non-zero
// when a test failed or a part stopped with an error.
func Main(m *testing.M, opts Options, use func(*System)) {
	s, err := Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "system:", err)
		os.Exit(1)
	}
	use(s)
	code := m.Run()
	if err := s.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "system:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
