//go:build !unit

package satoken_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/switchboard-dev/switchboard/internal/server/workload/satoken"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

const audience = "switchboard.dev"

var (
	env       *testenv.Env
	clientset *kubernetes.Clientset
	// pods is one informer of all pods for the package's tests, started by TestMain.
	pods *satoken.PodInformer
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

// run is TestMain's body: the control plane, and the package's pod informer on it.
func run(m *testing.M) int {
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "testenv: stopping the control plane:", err)
		}
	}()
	if clientset, err = kubernetes.NewForConfig(env.Config); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	md, err := metadata.NewForConfig(env.Config)
	if err == nil {
		pods, err = satoken.NewPodInformer(md, "")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go pods.Run(ctx)
	return m.Run()
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// workload is a namespace, a ServiceAccount and a Pod of it scheduled on a Node: what a
// kubelet would ask tokens for. envtest runs no kubelet: the Pod never runs, which a token
// does not need.
type workload struct {
	ns   string
	sa   *corev1.ServiceAccount
	node *corev1.Node
	pod  *corev1.Pod
}

func newWorkload(t testing.TB) *workload {
	t.Helper()
	ctx := ctxFor(t)
	w := &workload{ns: env.Namespace(t, "satoken")}
	w.sa = &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "consumer"}}
	if err := env.Client.Create(ctx, w.sa); err != nil {
		t.Fatal(err)
	}
	w.node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "node-"}}
	if err := env.Client.Create(ctx, w.node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), w.node) })
	w.pod = w.createPod(t)
	return w
}

// createPod creates the workload's pod (again, after a deletion: same name, new UID) and waits
// until the package's informer has it.
func (w *workload) createPod(t testing.TB) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "consumer-0"},
		Spec: corev1.PodSpec{ServiceAccountName: w.sa.Name, NodeName: w.node.Name,
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
	if err := env.Client.Create(ctxFor(t), pod); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the informer sees the pod", func() error {
		if uid, ok := pods.PodUID(pod.Namespace, pod.Name); !ok || uid != pod.UID {
			return errNotYet
		}
		return nil
	})
	w.pod = pod
	return pod
}

// deletePod deletes the workload's pod at once and waits until the informer has seen it go.
func (w *workload) deletePod(t testing.TB) {
	t.Helper()
	if err := env.Client.Delete(ctxFor(t), w.pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the informer sees the pod deleted", func() error {
		if _, ok := pods.PodUID(w.pod.Namespace, w.pod.Name); ok {
			return errNotYet
		}
		return nil
	})
}

type notYet struct{}

func (notYet) Error() string { return "not yet" }

var errNotYet error = notYet{}

// token asks the API server for a token of the workload's ServiceAccount bound to its pod, for
// aud, valid for 10 minutes (the least it issues).
func (w *workload) token(t testing.TB, aud string) string {
	t.Helper()
	bound := &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: w.pod.Name, UID: w.pod.UID}
	tr, err := clientset.CoreV1().ServiceAccounts(w.ns).CreateToken(ctxFor(t), w.sa.Name, tokenRequest(aud, bound), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// tokenRequest asks for a token for aud, valid for 10 minutes (the least the API server
// issues), bound to the object bound if any.
func tokenRequest(aud string, bound *authenticationv1.BoundObjectReference) *authenticationv1.TokenRequest {
	return &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{aud}, ExpirationSeconds: ptr.To[int64](600), BoundObjectRef: bound,
	}}
}

// payload decodes a token's claims without verifying them: the test's view of what the API
// server issued.
func payload(t testing.TB, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("a token of %d parts", len(parts))
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(raw, &claims); err != nil {
		t.Fatal(err)
	}
	return claims
}

// issuedAt is a token's iat, to set the fake clock from what the API server issued rather than
// from how long the test took.
func issuedAt(t testing.TB, token string) time.Time {
	t.Helper()
	return time.Unix(int64(payload(t, token)["iat"].(float64)), 0)
}

// jwksCounter counts the requests for the cluster's key set made through its transport.
type jwksCounter struct {
	next  http.RoundTripper
	count atomic.Int64
}

func (c *jwksCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path == "/openid/v1/jwks" {
		c.count.Add(1)
	}
	return c.next.RoundTrip(req)
}

// newVerifier returns a started Verifier on the package's pod informer, through a client that
// counts its key fetches, with opts' audience, clock and client filled in when unset.
func newVerifier(t testing.TB, clk *clocktesting.FakeClock, opts satoken.Options) (*satoken.Verifier, *jwksCounter) {
	t.Helper()
	counter := &jwksCounter{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Audience == "" {
		opts.Audience = audience
	}
	opts.Clock, opts.Client, opts.Pods = clk, cs.Discovery().RESTClient(), pods
	v, err := satoken.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Start(ctxFor(t)); err != nil {
		t.Fatalf("fetching the cluster's keys: %v", err)
	}
	return v, counter
}
