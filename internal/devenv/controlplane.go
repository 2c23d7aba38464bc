package devenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/switchboard-dev/switchboard/internal/proc"
)

// controlPlane is etcd + kube-apiserver from the assets dir, with data under the state dir.
type controlPlane struct {
	assets   string
	stateDir string
	pki      pki

	etcd      *proc.Process
	apiServer *proc.Process
	config    *rest.Config
}

func newControlPlane(assets, stateDir string) *controlPlane {
	return &controlPlane{assets: assets, stateDir: stateDir, pki: pki{dir: filepath.Join(stateDir, "pki")}}
}

func (cp *controlPlane) logDir() string      { return filepath.Join(cp.stateDir, "logs") }
func (cp *controlPlane) etcdDataDir() string { return filepath.Join(cp.stateDir, "etcd") }
func (cp *controlPlane) etcdLog() string     { return filepath.Join(cp.logDir(), "etcd.log") }
func (cp *controlPlane) apiServerLog() string {
	return filepath.Join(cp.logDir(), "kube-apiserver.log")
}

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
	if err := cp.pki.ensure(); err != nil {
		return err
	}
	if err := os.MkdirAll(cp.logDir(), 0o700); err != nil {
		return err
	}
	hadData := dirHasEntries(cp.etcdDataDir())
	etcdPort, err := freePort()
	if err != nil {
		return err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	cp.etcd, err = startChild("etcd", filepath.Join(cp.assets, "etcd"), cp.etcdLog(),
		"--name=switchboard-dev",
		"--data-dir="+cp.etcdDataDir(),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls=http://127.0.0.1:0",
		// A local development store: speed over durability against power loss.
		"--unsafe-no-fsync=true",
	)
	if err != nil {
		return err
	}
	if err := cp.etcd.WaitHTTP(ctx, http.DefaultClient, etcdURL+"/health", 60*time.Second); err != nil {
		if exit := (*proc.ExitError)(nil); hadData && errors.As(err, &exit) {
			// The log's tail is a Go stack trace here; the path is more use than the trace.
			cause := exit.Err
			if cause == nil {
				cause = errors.New("exit status 0")
			}
			return brokenState(fmt.Errorf("etcd could not open its data in %s (%w; see %s)", cp.etcdDataDir(), cause, cp.etcdLog()))
		}
		return err
	}

	apiPort, err := freePort()
	if err != nil {
		return err
	}
	p := cp.pki
	cp.apiServer, err = startChild("kube-apiserver", filepath.Join(cp.assets, "kube-apiserver"), cp.apiServerLog(),
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(apiPort),
		"--cert-dir="+p.dir,
		"--tls-cert-file="+p.servingCert(),
		"--tls-private-key-file="+p.servingKey(),
		"--client-ca-file="+p.caCert(),
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		// No controller-manager creates default ServiceAccounts here.
		"--disable-admission-plugins=ServiceAccount",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+p.saPub(),
		"--service-account-signing-key-file="+p.saKey(),
	)
	if err != nil {
		return err
	}
	cp.config = &rest.Config{
		Host:            "https://127.0.0.1:" + strconv.Itoa(apiPort),
		TLSClientConfig: rest.TLSClientConfig{CAFile: p.caCert(), CertFile: p.adminCert(), KeyFile: p.adminKey()},
		QPS:             100,
		Burst:           200,
	}
	httpClient, err := rest.HTTPClientFor(cp.config)
	if err != nil {
		return err
	}
	return cp.apiServer.WaitHTTP(ctx, httpClient, cp.config.Host+"/readyz", 120*time.Second)
}

// stop stops kube-apiserver, then etcd.
func (cp *controlPlane) stop() error {
	return errors.Join(cp.apiServer.Stop(15*time.Second), cp.etcd.Stop(15*time.Second))
}

// startChild starts a control-plane binary with its output appended to logPath.
func startChild(name, bin, logPath string, args ...string) (*proc.Process, error) {
	cmd := exec.Command(bin, args...) //nolint:gosec // the binaries are the control plane from --assets, chosen by the person running dev
	return proc.Start(cmd, proc.Options{Name: name, LogPath: logPath})
}

// writeKubeconfig writes an admin kubeconfig with the certificates embedded.
func (cp *controlPlane) writeKubeconfig(path string) error {
	p := cp.pki
	read := func(name string) []byte { b, _ := os.ReadFile(filepath.Clean(name)); return b }
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["switchboard-dev"] = &clientcmdapi.Cluster{Server: cp.config.Host, CertificateAuthorityData: read(p.caCert())}
	cfg.AuthInfos["switchboard-dev-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: read(p.adminCert()), ClientKeyData: read(p.adminKey())}
	cfg.Contexts["switchboard-dev"] = &clientcmdapi.Context{Cluster: "switchboard-dev", AuthInfo: "switchboard-dev-admin", Namespace: "demo"}
	cfg.CurrentContext = "switchboard-dev"
	return clientcmd.WriteToFile(*cfg, path)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func dirHasEntries(dir string) bool {
	entries, err := os.ReadDir(dir)
	return err == nil && len(entries) > 0
}
