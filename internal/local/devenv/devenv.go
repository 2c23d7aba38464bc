// Package devenv runs the whole of switchboard on one machine for development: envtest's
// control plane (etcd and kube-apiserver as child processes) with its data under a state dir,
// the CRDs, the operator and the /v1 API server (and the panel) in this process, and a seeded
// demo namespace.
package devenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/operator"
	"github.com/switchboard-dev/switchboard/internal/panel"
	"github.com/switchboard-dev/switchboard/internal/panel/loopback"
	"github.com/switchboard-dev/switchboard/internal/scheme"
	"github.com/switchboard-dev/switchboard/internal/server"
	"github.com/switchboard-dev/switchboard/internal/version"
	"github.com/switchboard-dev/switchboard/internal/webhooksender"
)

// Options configure a dev run.
type Options struct {
	// StateDir holds etcd's data, etcd's and the API server's certificates, the logs of etcd
	// and kube-apiserver and the admin kubeconfig: the keys to the control plane, so it is made
	// 0700. It survives restarts unless Fresh.
	StateDir string
	// Listen is the /v1 API's address.
	Listen string
	// PanelListen is the panel's address; "0" or "" runs no panel.
	PanelListen string
	// Fresh deletes the state dir first.
	Fresh bool
	// Assets is the directory of the etcd and kube-apiserver binaries.
	Assets string
	// SystemNamespace holds the hash Secrets.
	SystemNamespace string
	// KeyPrefix begins every generated key.
	KeyPrefix string
	// Out receives what a person reads: where things are, the demo key, "ready", "stopped".
	Out io.Writer
	// SSO runs a local OpenID Provider (bin/oidc-op) that the panel signs in with and the API
	// server trusts, and prints the user and password to sign in with.
	SSO bool
	// OIDCProvider is the provider binary for SSO (default: the newest bin/oidc-op-*).
	OIDCProvider string
}

// Defaults used by `switchboard dev`.
const (
	DefaultStateDir    = ".switchboard/dev"
	DefaultListen      = "127.0.0.1:8080"
	DefaultPanelListen = "127.0.0.1:8081"
	stateMarker        = ".switchboard-dev"
)

// DefaultAssets is bin/k8s/<version> under the current directory.
func DefaultAssets() string { return filepath.Join("bin", "k8s", version.Kubernetes) }

// Run starts everything, prints the demo key and `ready`, and runs until ctx is done or a part
// fails; then it stops everything it started, in order, and says so.
func Run(ctx context.Context, opts Options) (err error) {
	start := time.Now()
	if opts.Out == nil {
		opts.Out = os.Stdout
	}
	out := opts.Out
	if err := checkListen("--listen", opts.Listen); err != nil {
		return err
	}
	if enabled(opts.PanelListen) {
		if err := checkListen("--panel-listen", opts.PanelListen); err != nil {
			return err
		}
	}
	if err := checkBinaries(opts.Assets); err != nil {
		return err
	}
	if opts.SSO && !enabled(opts.PanelListen) {
		return errors.New("--sso signs in to the panel: it needs --panel-listen")
	}
	stateDir, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return err
	}
	unlock, err := prepareStateDir(stateDir, opts.Fresh)
	if err != nil {
		return err
	}
	defer unlock()

	var sso *ssoProvider
	if opts.SSO {
		if sso, err = startSSO(opts, stateDir); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, sso.Stop()) }()
	}
	cp := newControlPlane(opts.Assets, stateDir)
	if sso != nil {
		cp.authConfig = sso.authCfg
	}
	defer func() {
		started := cp.apiServer != nil
		if stopErr := cp.stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
			return
		}
		if started {
			_, _ = fmt.Fprintln(out, "switchboard dev: stopped kube-apiserver and etcd; data kept in", stateDir)
		}
	}()
	if err := cp.start(ctx); err != nil {
		if errors.Is(err, ErrBrokenState) {
			return fmt.Errorf("%w: start over with `switchboard dev --fresh` (deletes %s)", err, stateDir)
		}
		return err
	}
	kubeconfig := filepath.Join(stateDir, "kubeconfig")
	if err := cp.writeKubeconfig(kubeconfig); err != nil {
		return fmt.Errorf("writing %s: %w", kubeconfig, err)
	}
	_, _ = fmt.Fprintf(out, "switchboard dev: control plane up at %s in %s (logs in %s)\n",
		cp.config.Host, time.Since(start).Round(10*time.Millisecond), cp.logDir())

	c, err := client.New(cp.config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return err
	}
	if err := installCRDs(cp.config); err != nil {
		return err
	}
	// The system namespace, and beside it the one of the KeyWebhooks' signing secrets' copies
	// (the operator's and the sender's configuration default to it, as a cluster's does).
	for _, ns := range []string{opts.SystemNamespace, configv1alpha1.DefaultWebhookSigningNamespace(opts.SystemNamespace)} {
		if err := ensureNamespace(ctx, c, ns); err != nil {
			return err
		}
	}

	panelURL := ""
	if enabled(opts.PanelListen) {
		// A host of the panel's own: on 127.0.0.1 its cookies would reach every other local app.
		if panelURL = loopback.PrivateURL(opts.PanelListen); panelURL == "" {
			panelURL = "http://" + opts.PanelListen + "/"
		}
	}
	var ssoSection *configv1alpha1.OIDC
	if sso != nil {
		ssoSection = sso.section(panelURL)
	}
	comps := startComponents(ctx, cp.config, opts, ssoSection)
	defer func() {
		comps.stop()
		_, _ = fmt.Fprintln(out, "switchboard dev: stopped the operator and the API server"+map[bool]string{true: " and the panel"}[enabled(opts.PanelListen)])
	}()
	// A part that fails before `ready` cancels compCtx, with the failure as its cause.
	compCtx := comps.ctx

	if err := seed(compCtx, c, sso != nil); err != nil {
		return comps.failure(err)
	}
	demo, err := claimDemoKey(compCtx, c)
	if err != nil {
		return comps.failure(err)
	}
	baseURL := "http://" + opts.Listen
	if err := waitAPI(compCtx, c, baseURL, demo.key); err != nil {
		return comps.failure(err)
	}
	printBanner(out, opts, kubeconfig, baseURL, panelURL, demo, sso)
	_, _ = fmt.Fprintf(out, "switchboard dev: ready in %s; Ctrl-C stops everything\n", time.Since(start).Round(10*time.Millisecond))

	select {
	case <-ctx.Done():
		_, _ = fmt.Fprintln(out, "switchboard dev: stopping")
		return nil
	case <-compCtx.Done():
		return comps.failure(nil)
	}
}

func printBanner(out io.Writer, opts Options, kubeconfig, baseURL, panelURL string, demo demoKey, sso *ssoProvider) {
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(out, format+"\n", args...) }
	p("")
	p("  kubectl and kubectl-switchboard:  export KUBECONFIG=%s", kubeconfig)
	if demo.key != "" {
		p("  demo key (shown once; store it now, it is kept only as a hash):")
		p("    %s", demo.key)
		p("  try it:")
		p("    curl -s -H 'Authorization: Bearer %s' %s/v1/connections", demo.key, baseURL)
	} else {
		p("  demo key %s/%s (hint %s) was shown when an earlier run created it; for a new one:", DemoNamespace, DemoAPIKeyName, demo.hint)
		p("    kubectl switchboard key rotate %s -n %s", DemoAPIKeyName, DemoNamespace)
	}
	if enabled(opts.PanelListen) {
		p("  panel (API keys):  %s", panelURL)
		if sso != nil {
			// A development provider's throwaway password, made for this run: printing it is the point.
			p("    sign in with single sign-on as user %s, password %s (the local provider at %s)", SSOUser, sso.password, sso.IssuerURL)
			p("    or with the token from:  kubectl create token %s -n %s", DemoPanelUser, DemoNamespace)
		} else {
			p("    sign in with the token from:  kubectl create token %s -n %s", DemoPanelUser, DemoNamespace)
		}
	}
	p("")
}

// waitAPI waits until /v1 answers: 200 with the demo key when this run has it, else the
// contract's 401 API_KEY_MISSING; and until every demo Connection has its id, so that the
// printed curl line shows them all.
func waitAPI(ctx context.Context, c client.Client, baseURL, key string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	want := http.StatusUnauthorized
	if key != "" {
		want = http.StatusOK
	}
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/v1/connections", nil)
		if err != nil {
			return err
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			last = resp.Status
			if resp.StatusCode == want && connectionsHaveIDs(ctx, c) {
				return nil
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			if context.Cause(ctx) != nil && !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				return context.Cause(ctx)
			}
			return fmt.Errorf("the /v1 API at %s did not answer %d within 60s (last: %s)", baseURL, want, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func connectionsHaveIDs(ctx context.Context, c client.Client) bool {
	var list switchboardv1alpha1.ConnectionList
	if err := c.List(ctx, &list, client.InNamespace(DemoNamespace)); err != nil {
		return false
	}
	for _, conn := range list.Items {
		if conn.Status.ID == "" {
			return false
		}
	}
	return true
}

// components are the parts dev runs in-process.
type components struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup
}

var errStopping = errors.New("switchboard dev is stopping")

// startComponents runs the operator and the API server (with the panel) from their
// configurations, built from the same types and defaults as the commands': only what a
// single local process needs differs (no Lease, no metrics or probes, no drain delay).
func startComponents(parent context.Context, cfg *rest.Config, opts Options, sso *configv1alpha1.OIDC) *components {
	ctx, cancel := context.WithCancelCause(parent)
	comps := &components{ctx: ctx, cancel: cancel}
	run := func(name string, fn func(context.Context) error) {
		comps.wg.Add(1)
		go func() {
			defer comps.wg.Done()
			err := fn(ctx)
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				err = errors.New("stopped on its own")
			}
			cancel(fmt.Errorf("%s: %w", name, err))
		}()
	}
	run("the operator", func(ctx context.Context) error {
		// The admission webhook, on loopback, as the chart installs it: the dev API server
		// refuses renewal windows that cannot open in time, as a cluster does.
		webhookAddr, err := installWebhook(ctx, cfg)
		if err != nil {
			return err
		}
		c := &configv1alpha1.OperatorConfiguration{
			SystemNamespace: opts.SystemNamespace,
			KeyPrefix:       opts.KeyPrefix,
			// One replica in one process: no Lease, and no extra listeners to collide.
			LeaderElect:            ptr.To(false),
			Metrics:                configv1alpha1.Metrics{MetricsBindAddress: ptr.To("")},
			HealthProbeBindAddress: ptr.To(""),
			Webhook:                configv1alpha1.WebhookEndpoint{BindAddress: webhookAddr, Names: []string{"127.0.0.1"}},
		}
		return operator.Run(ctx, c, operator.Deps{RESTConfig: rest.CopyConfig(cfg)})
	})
	run("the webhook sender", func(ctx context.Context) error {
		// The operator's configuration, as the chart gives both: the default networks denied
		// (loopback always), so a KeyWebhook to this machine is refused here as in a cluster.
		c := &configv1alpha1.OperatorConfiguration{
			SystemNamespace:        opts.SystemNamespace,
			LeaderElect:            ptr.To(false),
			Metrics:                configv1alpha1.Metrics{MetricsBindAddress: ptr.To("")},
			HealthProbeBindAddress: ptr.To(""),
		}
		return webhooksender.Run(ctx, c, webhooksender.Deps{RESTConfig: rest.CopyConfig(cfg)})
	})
	run("the API server", func(ctx context.Context) error {
		c := &configv1alpha1.ServerConfiguration{
			Listen:                 ptr.To(opts.Listen),
			SystemNamespace:        opts.SystemNamespace,
			KeyPrefix:              opts.KeyPrefix,
			Metrics:                configv1alpha1.Metrics{MetricsBindAddress: ptr.To("")},
			HealthProbeBindAddress: ptr.To(""),
			// No load balancer to drain from: Ctrl-C stops at once.
			Shutdown: configv1alpha1.Shutdown{ShutdownDelay: &metav1.Duration{}, ShutdownTimeout: &metav1.Duration{Duration: 5 * time.Second}},
		}
		deps := server.Deps{RESTConfig: rest.CopyConfig(cfg)}
		if enabled(opts.PanelListen) {
			c.Panel = &configv1alpha1.ServerPanel{Listen: opts.PanelListen, PanelSettings: configv1alpha1.PanelSettings{OIDC: sso}}
			handler, err := panel.NewHandler(&c.Panel.PanelSettings, c.TrustedProxies, panel.Deps{RESTConfig: rest.CopyConfig(cfg)})
			if err != nil {
				return fmt.Errorf("the panel: %w", err)
			}
			deps.PanelHandler = handler
		}
		return server.Run(ctx, c, deps)
	})
	return comps
}

// failure is the error to report: the first part's failure when one failed, else err.
func (c *components) failure(err error) error {
	if cause := context.Cause(c.ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	if err == nil {
		return errors.New("a part of switchboard dev stopped")
	}
	return err
}

func (c *components) stop() {
	c.cancel(errStopping)
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
	}
}

func enabled(addr string) bool { return addr != "" && addr != "0" }

// checkListen fails early, with the fix, when addr is taken.
func checkListen(flag, addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("%s is already in use (another switchboard dev?): stop what listens there or pass %s with a free address", addr, flag)
		}
		return fmt.Errorf("cannot listen on %s (%s): %w", addr, flag, err)
	}
	return l.Close()
}

// freeLoopbackAddr returns 127.0.0.1 with a port that is free now, for a child or a server
// started later to listen on (as envtest picks its ports: another process may take it first).
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// prepareStateDir creates (or with fresh, recreates) the state dir and locks it, so two dev
// runs never share one etcd data dir.
func prepareStateDir(dir string, fresh bool) (unlock func(), err error) {
	if fresh {
		if err := removeStateDir(dir); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the state dir: %w", err)
	}
	marker := filepath.Join(dir, stateMarker)
	if _, err := os.Stat(marker); err != nil {
		if dirHasEntries(dir) {
			return nil, fmt.Errorf("%s is not a switchboard dev state dir (it has files but no %s): pass --state-dir with an empty or new directory", dir, stateMarker)
		}
		if err := os.WriteFile(marker, []byte("state of `switchboard dev`; --fresh deletes this directory\n"), 0o600); err != nil {
			return nil, err
		}
	}
	// It holds the keys to the control plane (etcd's client certificate, the admin kubeconfig,
	// the service-account signing key): only its owner may enter, also when it existed before.
	if err := os.Chmod(dir, 0o700); err != nil { //nolint:gosec // a directory: its owner must enter it
		return nil, fmt.Errorf("making the state dir private: %w", err)
	}
	lock, err := os.OpenFile(filepath.Clean(filepath.Join(dir, "lock")), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("another switchboard dev is running on %s: stop it, or pass --state-dir with another directory", dir)
	}
	return func() { _ = lock.Close() }, nil
}

// removeStateDir deletes dir only when it is a dev state dir (or empty): --fresh with a typo
// must not delete someone's home directory.
func removeStateDir(dir string) error {
	if !dirHasEntries(dir) {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, stateMarker)); err != nil {
		return fmt.Errorf("refusing --fresh: %s is not a switchboard dev state dir (no %s in it)", dir, stateMarker)
	}
	lock, err := os.OpenFile(filepath.Clean(filepath.Join(dir, "lock")), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		defer func() { _ = lock.Close() }()
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			return fmt.Errorf("another switchboard dev is running on %s: stop it before --fresh", dir)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("--fresh: deleting %s: %w", dir, err)
	}
	return nil
}
