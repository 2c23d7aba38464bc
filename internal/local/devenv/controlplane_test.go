//go:build !unit

package devenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// A restart on the same state dir keeps the objects, the admin kubeconfig's path, and the
// tokens minted before it: etcd's data, the API server's certificates and the service-account
// issuer are what envtest would make anew each time.
func TestControlPlaneRestartKeepsState(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	stateDir := t.TempDir()
	kubeconfig := stateDir + "/kubeconfig"

	start := func() *controlPlane {
		t.Helper()
		cp := newControlPlane(testenv.AssetsDir(), stateDir)
		if err := cp.start(ctx); err != nil {
			_ = cp.stop()
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cp.stop() })
		if err := cp.writeKubeconfig(kubeconfig); err != nil {
			t.Fatal(err)
		}
		return cp
	}
	// fromKubeconfig is a clientset as a user who exported KUBECONFIG gets one.
	fromKubeconfig := func() kubernetes.Interface {
		t.Helper()
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		return kubernetes.NewForConfigOrDie(cfg)
	}

	first := start()
	kube := fromKubeconfig()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kept", Name: "panel-user"}}
	if _, err := kube.CoreV1().ServiceAccounts("kept").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token, err := kube.CoreV1().ServiceAccounts("kept").CreateToken(ctx, "panel-user", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}

	second := start()
	kube = fromKubeconfig()
	if _, err := kube.CoreV1().Namespaces().Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Fatalf("the namespace created before the restart: %v", err)
	}
	// The token of the first run signs in to the second, as a panel session's would.
	withToken := kubernetes.NewForConfigOrDie(&rest.Config{Host: second.config.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: second.config.CAData}, BearerToken: token.Status.Token})
	review, err := withToken.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token minted before the restart: %v", err)
	}
	if got, want := review.Status.UserInfo.Username, "system:serviceaccount:kept:panel-user"; got != want {
		t.Fatalf("the token signs in as %q, want %q", got, want)
	}
}

// The attack of issue 29, performed: another local user (uid 65534) reads etcd's URLs and the
// paths of its certificates from its command line (as `ps` shows it) and the API server's
// address from dev's banner, then reads a reveal Secret's key from etcd, talks to etcd's peer
// port, and lists Secrets and deletes a ConfigMap through the API server, with whatever files
// it can read. Every attempt fails; the same probe as the dev user, who can read the state
// dir, succeeds at each, so the refusals are the control plane's, not the probe's. The state
// dir's parent may be entered by anyone, as a checkout in a home directory is.
func TestControlPlaneRefusesOtherLocalUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test runs a probe as another user (uid 65534), which needs root; `make test` runs as root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	shared, err := os.MkdirTemp("", "devenv-local-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(shared) })
	if err := os.Chmod(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	probeBin := copyExecutable(t, filepath.Join(shared, "probe.test"))

	stateDir := filepath.Join(shared, "state")
	unlock, err := prepareStateDir(stateDir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	cp := newControlPlane(testenv.AssetsDir(), stateDir)
	if err := cp.start(ctx); err != nil {
		_ = cp.stop()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.stop() })
	kubeconfig := filepath.Join(stateDir, "kubeconfig")
	if err := cp.writeKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}

	kube := kubernetes.NewForConfigOrDie(cp.config)
	marker := "sb_live_" + rand.Text()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "victim"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Secrets("victim").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "reveal"},
		Data: map[string][]byte{"key": []byte(marker)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps("victim").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "victim"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	target := probeTarget{EtcdPID: cp.etcd.Pid(), APIServer: cp.config.Host, Kubeconfig: kubeconfig, Marker: marker}

	other := runProbe(t, probeBin, shared, target, &syscall.Credential{Uid: 65534, Gid: 65534})
	for _, attempt := range other.attempts() {
		what, got := attempt[0], attempt[1]
		if got == probeOK {
			t.Errorf("uid 65534 succeeded: %s", what)
		} else {
			t.Logf("uid 65534 refused: %s: %s", what, got)
		}
	}
	if _, err := kube.CoreV1().ConfigMaps("victim").Get(ctx, "victim", metav1.GetOptions{}); err != nil {
		t.Errorf("the ConfigMap uid 65534 tried to delete: %v", err)
	}

	owner := runProbe(t, probeBin, shared, target, nil)
	for _, attempt := range owner.attempts() {
		what, got := attempt[0], attempt[1]
		if got != probeOK {
			t.Errorf("the dev user failed: %s: %s", what, got)
		}
	}
}

// probeEnv carries a probeTarget to the test binary run as a probe.
const probeEnv = "SWITCHBOARD_DEVENV_PROBE"

const probeOK = "ok"

// probeTarget is what the probe attacks.
type probeTarget struct {
	EtcdPID    int    // its command line names its URLs and certificate files
	APIServer  string // the URL the banner prints
	Kubeconfig string
	Marker     string // the reveal Secret's key, in namespace "victim"
}

// probeResult is what each attempt of the probe got: probeOK, or why not.
type probeResult struct {
	EtcdRead, EtcdPeer, APIList, APIDelete string
}

func (r probeResult) attempts() [][2]string {
	return [][2]string{
		{"reading the reveal Secret's key from etcd", r.EtcdRead},
		{"an HTTP answer from etcd's peer port", r.EtcdPeer},
		{"listing the reveal Secret through the API server", r.APIList},
		{"deleting a ConfigMap through the API server", r.APIDelete},
	}
}

// copyExecutable copies the test binary to path (mode 0755): go test's own copy is in a
// directory only its owner may enter.
func copyExecutable(t *testing.T, path string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(filepath.Clean(self))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(filepath.Clean(path), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755) //nolint:gosec // another user runs it
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// runProbe runs TestLocalUserProbe in bin, in dir, as cred (nil: as this user).
func runProbe(t *testing.T, bin, dir string, target probeTarget, cred *syscall.Credential) probeResult {
	t.Helper()
	spec, err := json.Marshal(target)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestLocalUserProbe$", "-test.v") //nolint:gosec // the test binary
	cmd.Dir = dir
	cmd.Env = []string{probeEnv + "=" + string(spec), "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the probe: %v\n%s", err, out)
	}
	_, result, found := bytes.Cut(out, []byte("probe result: "))
	if !found {
		t.Fatalf("the probe printed no result:\n%s", out)
	}
	result, _, _ = bytes.Cut(result, []byte("\n"))
	var r probeResult
	if err := json.Unmarshal(result, &r); err != nil {
		t.Fatalf("the probe's result %q: %v", result, err)
	}
	return r
}

// TestLocalUserProbe is the probe of TestControlPlaneRefusesOtherLocalUsers, which runs it in
// another process (as another user); run otherwise, it does nothing.
func TestLocalUserProbe(t *testing.T) {
	spec := os.Getenv(probeEnv)
	if spec == "" {
		return
	}
	var target probeTarget
	if err := json.Unmarshal([]byte(spec), &target); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var r probeResult
	r.EtcdRead, r.EtcdPeer = probeEtcd(ctx, target)
	r.APIList, r.APIDelete = probeAPIServer(ctx, target)
	out, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("probe result: %s\n", out)
}

// probeEtcd reads etcd's command line and, with the certificate files it names if they can be
// read, reads the reveal Secret's key through etcd's JSON gateway and asks the peer port for
// etcd's version.
func probeEtcd(ctx context.Context, target probeTarget) (read, peer string) {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", target.EtcdPID))
	if err != nil {
		return err.Error(), err.Error()
	}
	flags := map[string]string{}
	for arg := range strings.SplitSeq(strings.TrimRight(string(cmdline), "\x00"), "\x00") {
		if name, value, ok := strings.Cut(strings.TrimPrefix(arg, "--"), "="); ok {
			flags[name] = value
		}
	}
	tlsConfig := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // an attacker needs no proof of whom it reached
	if cert, err := tls.LoadX509KeyPair(flags["cert-file"], flags["key-file"]); err == nil {
		tlsConfig.Certificates = []tls.Certificate{cert}
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}

	key := base64.StdEncoding.EncodeToString([]byte("/registry/secrets/victim/reveal"))
	read = func() string {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, flags["listen-client-urls"]+"/v3/kv/range", strings.NewReader(`{"key":"`+key+`"}`))
		if err != nil {
			return err.Error()
		}
		body, err := probeDo(c, req)
		if err != nil {
			return err.Error()
		}
		var resp struct {
			KVs []struct {
				Value []byte `json:"value"`
			} `json:"kvs"`
		}
		if err := json.Unmarshal(body, &resp); err != nil {
			return err.Error()
		}
		if len(resp.KVs) != 1 || !bytes.Contains(resp.KVs[0].Value, []byte(target.Marker)) {
			return fmt.Sprintf("etcd answered without the key: %.200s", body)
		}
		return probeOK
	}()
	peer = func() string {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, flags["listen-peer-urls"]+"/version", nil)
		if err != nil {
			return err.Error()
		}
		if _, err := probeDo(c, req); err != nil {
			return err.Error()
		}
		return probeOK
	}()
	return read, peer
}

// probeAPIServer lists Secrets and deletes a ConfigMap of namespace "victim", as the
// kubeconfig's user if it can be read, else anonymously.
func probeAPIServer(ctx context.Context, target probeTarget) (list, del string) {
	cfg, err := clientcmd.BuildConfigFromFlags("", target.Kubeconfig)
	if err != nil {
		cfg = &rest.Config{Host: target.APIServer, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err.Error(), err.Error()
	}
	list = func() string {
		secrets, err := kube.CoreV1().Secrets("victim").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		for _, s := range secrets.Items {
			if string(s.Data["key"]) == target.Marker {
				return probeOK
			}
		}
		return "the list had no reveal Secret"
	}()
	del = probeOK
	if err := kube.CoreV1().ConfigMaps("victim").Delete(ctx, "victim", metav1.DeleteOptions{}); err != nil {
		del = err.Error()
	}
	return list, del
}

// probeDo returns the body of a 200 answer to req.
func probeDo(c *http.Client, req *http.Request) ([]byte, error) {
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %.200s", resp.Status, body)
	}
	return body, nil
}
