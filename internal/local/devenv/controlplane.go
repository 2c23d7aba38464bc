package devenv

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/switchboard-dev/switchboard/internal/local/proc"
)

// controlPlane is etcd and envtest's kube-apiserver (from the assets dir) with their state
// under the state dir, so that a restart without --fresh keeps every object, key and
// revocation. envtest does most of it; what is kept here:
//   - etcd reachable only by this user: etcd serves clients and peers over TLS and accepts only
//     a client certificate from a CA made on every start, whose key is never written; the
//     certificates are in the state dir (0700), and kube-apiserver uses the client one. envtest
//     would run etcd on plain HTTP, which every local user reaches, and waits for it with a
//     client that has no certificate, so etcd is run here with internal/local/proc;
//   - persistence across restarts: envtest starts from nothing each time. etcd's data dir is
//     kept; so is the API server's certificate dir, with the serving CA (which envtest keeps
//     only in memory) beside it, and the service-account issuer is fixed, so that tokens minted
//     for the panel stay valid across restarts;
//   - a parent-death signal: envtest starts kube-apiserver in its own group but without one,
//     and `switchboard dev` killed outright would leave it running;
//   - the admin kubeconfig at a stable path, with the demo namespace as its default.
type controlPlane struct {
	assets   string
	stateDir string
	// authConfig, when set, is kube-apiserver's --authentication-config (switchboard dev --sso).
	authConfig string

	etcd      *proc.Process
	etcdURL   *url.URL // https://127.0.0.1:PORT
	apiServer *envtest.APIServer
	logs      []*os.File
	config    *rest.Config
}

func newControlPlane(assets, stateDir string) *controlPlane {
	return &controlPlane{assets: assets, stateDir: stateDir}
}

func (cp *controlPlane) logDir() string      { return filepath.Join(cp.stateDir, "logs") }
func (cp *controlPlane) etcdDataDir() string { return filepath.Join(cp.stateDir, "etcd") }
func (cp *controlPlane) etcdLog() string     { return filepath.Join(cp.logDir(), "etcd.log") }
func (cp *controlPlane) apiServerLog() string {
	return filepath.Join(cp.logDir(), "kube-apiserver.log")
}
func (cp *controlPlane) certDir() string    { return filepath.Join(cp.stateDir, "apiserver") }
func (cp *controlPlane) etcdPKIDir() string { return filepath.Join(cp.stateDir, "etcd-pki") }
func (cp *controlPlane) wrapperDir() string { return filepath.Join(cp.stateDir, "bin") }

// etcdFile is the path of a file of etcdPKIDir: ca.crt, server.{crt,key}, client.{crt,key}.
func (cp *controlPlane) etcdFile(name string) string { return filepath.Join(cp.etcdPKIDir(), name) }

// servingCAFile holds the CA of the API server's serving certificate in certDir.
const servingCAFile = "serving-ca.crt"

// serviceAccountIssuer is fixed (envtest derives it from the port, which changes with every
// run), so that the tokens of one run are valid in the next.
const serviceAccountIssuer = "https://kubernetes.default.svc"

// checkBinaries names `make envtest` when a binary is missing.
func checkBinaries(assets string) error {
	for _, bin := range []string{"etcd", "kube-apiserver"} {
		info, err := os.Stat(filepath.Join(assets, bin))
		if err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is missing in %s: run `make envtest` to build the control plane (or pass --assets DIR)", bin, assets)
		}
	}
	return nil
}

// start runs etcd, then kube-apiserver, and waits until the API server is ready.
func (cp *controlPlane) start(ctx context.Context) error {
	if err := checkBinaries(cp.assets); err != nil {
		return err
	}
	servingCA, err := loadServingCA(cp.certDir())
	if err != nil {
		return err
	}
	for _, dir := range []string{cp.logDir(), cp.certDir(), cp.wrapperDir()} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	apiServerLog, apiServerTail, err := cp.openLog(cp.apiServerLog())
	if err != nil {
		return err
	}
	if err := cp.startEtcd(ctx); err != nil {
		return err
	}

	apiServerPath, err := withParentDeathSignal(cp.wrapperDir(), filepath.Join(cp.assets, "kube-apiserver"))
	if err != nil {
		return err
	}
	cp.apiServer = &envtest.APIServer{
		Path: apiServerPath, CertDir: cp.certDir(), EtcdURL: cp.etcdURL, Out: apiServerLog, Err: apiServerLog,
		StartTimeout: 120 * time.Second, StopTimeout: 15 * time.Second,
	}
	cp.apiServer.Address = "127.0.0.1"
	// envtest reuses a serving certificate it finds in CertDir, but then does not know its CA.
	cp.apiServer.CA = servingCA
	cp.apiServer.Configure().
		Set("advertise-address", "127.0.0.1").
		Set("service-account-issuer", serviceAccountIssuer).
		Set("etcd-cafile", cp.etcdFile("ca.crt")).
		Set("etcd-certfile", cp.etcdFile("client.crt")).
		Set("etcd-keyfile", cp.etcdFile("client.key"))
	if cp.authConfig != "" {
		cp.apiServer.Configure().Set("authentication-config", cp.authConfig)
	}
	if err := cp.apiServer.Start(); err != nil {
		cp.apiServer = nil
		return fmt.Errorf("starting kube-apiserver: %w; the end of its output (all of it in %s):\n%s", err, cp.apiServerLog(), apiServerTail.Lines(15))
	}
	if servingCA == nil {
		if err := os.WriteFile(filepath.Join(cp.certDir(), servingCAFile), cp.apiServer.CA, 0o600); err != nil {
			return err
		}
	}

	plane := &envtest.ControlPlane{APIServer: cp.apiServer}
	// system:masters is the group the API server grants everything without consulting RBAC.
	admin, err := plane.AddUser(envtest.User{Name: "switchboard-dev-admin", Groups: []string{"system:masters"}}, &rest.Config{QPS: 100, Burst: 200})
	if err != nil {
		return fmt.Errorf("creating the admin user: %w", err)
	}
	cp.config = admin.Config()
	return cp.waitReady(ctx)
}

// waitReady waits for /readyz: envtest waits for /healthz only.
func (cp *controlPlane) waitReady(ctx context.Context) error {
	httpClient, err := rest.HTTPClientFor(cp.config)
	if err != nil {
		return err
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		last = proc.HTTPStatus(ctx, httpClient, strings.TrimSuffix(cp.config.Host, "/")+"/readyz", http.StatusOK)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("kube-apiserver did not become ready (%w; last: %w); see %s", err, last, cp.apiServerLog())
	}
	return nil
}

// stop stops kube-apiserver, then etcd, and closes their logs.
func (cp *controlPlane) stop() error {
	var errs []error
	if cp.apiServer != nil {
		errs = append(errs, cp.apiServer.Stop())
	}
	errs = append(errs, cp.etcd.Stop(15*time.Second))
	for _, f := range cp.logs {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

// openLog opens a log file for appending; the writer returned also keeps this run's tail.
func (cp *controlPlane) openLog(path string) (io.Writer, *proc.Tail, error) {
	f, err := os.OpenFile(filepath.Clean(path), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, err
	}
	cp.logs = append(cp.logs, f)
	tail := &proc.Tail{}
	return io.MultiWriter(f, tail), tail, nil
}

// loadServingCA returns the CA of the serving certificate kept in certDir, or nil when there
// is none (a first run). A certificate without its CA, or a CA that is not one, is a broken
// state dir, which only --fresh repairs.
func loadServingCA(certDir string) ([]byte, error) {
	_, certErr := os.Stat(filepath.Join(certDir, "apiserver.crt"))
	ca, caErr := os.ReadFile(filepath.Clean(filepath.Join(certDir, servingCAFile)))
	switch {
	case os.IsNotExist(certErr) && os.IsNotExist(caErr):
		return nil, nil
	case certErr != nil:
		return nil, brokenState(fmt.Errorf("%s holds a CA but no serving certificate", certDir))
	case caErr != nil:
		return nil, brokenState(fmt.Errorf("%s holds a serving certificate but not its CA (%w)", certDir, caErr))
	}
	block, _ := pem.Decode(ca)
	if block == nil {
		return nil, brokenState(fmt.Errorf("%s is not a PEM certificate", filepath.Join(certDir, servingCAFile)))
	}
	if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		return nil, brokenState(fmt.Errorf("reading %s: %w", filepath.Join(certDir, servingCAFile), err))
	}
	return ca, nil
}

// withParentDeathSignal returns the path of a wrapper that runs bin with SIGKILL as its
// parent-death signal (setpriv, from util-linux), so that it dies with `switchboard dev` even
// when dev is killed outright; envtest, which starts it, sets none. Without setpriv, bin
// itself is returned: the control plane then outlives a killed dev (a stopped dev still stops
// it).
func withParentDeathSignal(dir, bin string) (string, error) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return bin, nil //nolint:nilerr // no setpriv: run bin directly, as envtest would
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		return "", err
	}
	wrapper := filepath.Join(dir, filepath.Base(bin))
	script := "#!/bin/sh\n# Written by `switchboard dev`: " + filepath.Base(bin) + " dies with its parent.\n" +
		"exec " + shellQuote(setpriv) + " --pdeathsig KILL -- " + shellQuote(abs) + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o700); err != nil { //nolint:gosec // an executable script, in the state dir of the person running dev
		return "", err
	}
	return wrapper, nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// writeKubeconfig writes an admin kubeconfig with the credentials embedded and the demo
// namespace as the default.
func (cp *controlPlane) writeKubeconfig(path string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["switchboard-dev"] = &clientcmdapi.Cluster{Server: cp.config.Host, CertificateAuthorityData: cp.config.CAData}
	cfg.AuthInfos["switchboard-dev-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cp.config.CertData, ClientKeyData: cp.config.KeyData}
	cfg.Contexts["switchboard-dev"] = &clientcmdapi.Context{Cluster: "switchboard-dev", AuthInfo: "switchboard-dev-admin", Namespace: DemoNamespace}
	cfg.CurrentContext = "switchboard-dev"
	return clientcmd.WriteToFile(*cfg, path)
}

func dirHasEntries(dir string) bool {
	entries, err := os.ReadDir(dir)
	return err == nil && len(entries) > 0
}

// ErrBrokenState marks a state dir that cannot be reused; --fresh starts over.
var ErrBrokenState = errors.New("the state dir is broken")

func brokenState(cause error) error { return fmt.Errorf("%w (%w)", ErrBrokenState, cause) }
