// Package testenv starts one real control plane (etcd + kube-apiserver, built from source by
// `make envtest`) per test package, with switchboard's CRDs installed, and hands tests a client.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/switchboard-dev/switchboard/internal/scheme"
	"github.com/switchboard-dev/switchboard/internal/version"
)

// Env is a running control plane.
type Env struct {
	// Config reaches the API server as a cluster admin.
	Config *rest.Config
	// Client is an uncached client with Scheme.
	Client client.WithWatch
	// Scheme is scheme.Scheme: the core types and switchboard's.
	Scheme *k8sruntime.Scheme

	env *envtest.Environment
}

// RepoRoot is the directory of the module's go.mod.
func RepoRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("testenv: cannot locate the source file")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// AssetsDir is where the control-plane binaries are: KUBEBUILDER_ASSETS, or bin/k8s/<version>.
func AssetsDir() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	return filepath.Join(RepoRoot(), "bin", "k8s", version.Kubernetes)
}

// Start starts etcd and kube-apiserver and installs the CRDs from config/crd/bases.
func Start() (*Env, error) { return StartWith(StartOptions{}) }

// StartOptions shape the control plane.
type StartOptions struct {
	// APIServerArgs are extra kube-apiserver flags, name without dashes to value (as
	// "authentication-config": a file, for tests of sign-in with an OpenID provider).
	APIServerArgs map[string]string
}

// StartWith is Start with options.
func StartWith(opts StartOptions) (*Env, error) {
	assets := AssetsDir()
	for _, bin := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			return nil, fmt.Errorf("control plane binary %s missing in %s: run `make envtest` first: %w", bin, assets, err)
		}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme.Scheme,
	}
	for k, v := range opts.APIServerArgs {
		env.ControlPlane.GetAPIServer().Configure().Set(k, v)
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting the control plane from %s: %w", assets, err)
	}
	// Tests create many objects quickly; client-go's default 5 QPS would make them crawl.
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	return &Env{Config: cfg, Client: c, Scheme: scheme.Scheme, env: env}, nil
}

// Stop stops the control plane.
func (e *Env) Stop() error { return e.env.Stop() }

// Run is a TestMain body: it starts the control plane, runs the tests, stops it and exits.
// The package's tests reach the control plane through the returned pointer, set before m.Run.
func Run(m *testing.M, env **Env) {
	e, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv: stopping the control plane:", err)
	}
	os.Exit(code)
}

// WriteKubeconfig writes a kubeconfig to path that reaches server (an https URL: the API
// server, or a proxy in front of it) with cfg's CA and credentials (client certificate or
// bearer token), for child processes and CLI tests; namespace, when given, is the context's
// default namespace, as in a user's kubeconfig.
func WriteKubeconfig(cfg *rest.Config, server, namespace, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest", Namespace: namespace}
	kc.CurrentContext = "envtest"
	return clientcmd.WriteToFile(*kc, path)
}

// Namespace creates a namespace with a generated name for one test and returns its name.
// Namespaces are not deleted: envtest runs no namespace controller, and each test's are unique.
func (e *Env) Namespace(t testing.TB, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Client.Create(ctx, ns); err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	return ns.Name
}

// EnsureNamespace creates the named namespace unless it exists.
func (e *Env) EnsureNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
