//go:build !unit

package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
	"github.com/switchboard-dev/switchboard/internal/server/authz"
	"github.com/switchboard-dev/switchboard/internal/server/keycheck"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex/keyindextest"
	"github.com/switchboard-dev/switchboard/internal/server/workload/dpop/dpoptest"
	"github.com/switchboard-dev/switchboard/internal/server/workload/satoken"
)

// workloadPod is a ServiceAccount of a namespace and a pod of it: what a kubelet asks tokens
// for. envtest runs no kubelet: the pod never runs, which a token does not need.
type workloadPod struct {
	ns, sa string
	pod    *corev1.Pod
}

func newWorkloadPod(t *testing.T, ns, sa, pod string) *workloadPod {
	t.Helper()
	if err := env.Client.Create(ctx(t), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod},
		Spec: corev1.PodSpec{ServiceAccountName: sa, Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}}}
	if err := env.Client.Create(ctx(t), p); err != nil {
		t.Fatal(err)
	}
	return &workloadPod{ns: ns, sa: sa, pod: p}
}

// token asks the API server for a token of the ServiceAccount bound to the pod, for aud.
func (w *workloadPod) token(t *testing.T, aud string) string {
	t.Helper()
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := kube.CoreV1().ServiceAccounts(w.ns).CreateToken(ctx(t), w.sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{aud}, ExpirationSeconds: ptr.To[int64](600),
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: w.pod.Name, UID: w.pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// bind writes b into k's hash Secret, as the operator does for a key with spec.binding.
func bind(t *testing.T, k *keyFixture, b keysecret.Binding) {
	t.Helper()
	before := k.Secret.DeepCopy()
	k.Secret.Data[keysecret.DataBinding] = b.Encode()
	if err := env.Client.Patch(ctx(t), k.Secret, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
}

// proofs are what a request carries beside its key.
type proofs struct {
	token, dpop string
	peer        string // ext_authz's attributes.source.principal
	xfcc        string // X-Forwarded-Client-Cert, as an edge proxy sets it
}

// bindingServer is an authorization server, asked over every protocol with proofs.
type bindingServer struct{ *authzServer }

func (s bindingServer) ask(t *testing.T, protocol, key string, p proofs) (int, string) {
	t.Helper()
	var a answer
	header := func(h http.Header) {
		h.Set("Authorization", "Bearer "+key)
		if p.token != "" {
			h.Set(keycheck.HeaderWorkloadToken, p.token)
		}
		if p.dpop != "" {
			h.Set(keycheck.HeaderDPoP, p.dpop)
		}
		if p.xfcc != "" {
			h.Set(keycheck.DefaultClientCertHeader, p.xfcc)
		}
	}
	switch protocol {
	case "/v1":
		a = httpAnswer(t, s.request(t, http.MethodGet, "/v1/connections", header))
	case "forward-auth", "forward-auth nginx":
		path := authz.ForwardAuthPath + "/"
		if protocol == "forward-auth nginx" {
			path = authz.ForwardAuthNginxPath + "/"
		}
		req, err := http.NewRequest(http.MethodGet, s.httpURL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		header(req.Header)
		a = httpAnswer(t, s.do(t, req))
	case "ext_authz gRPC":
		headers := map[string]string{":method": "GET", ":path": "/v1/connections", "authorization": "Bearer " + key}
		if p.token != "" {
			headers["switchboard-workload-token"] = p.token
		}
		if p.xfcc != "" {
			headers["x-forwarded-client-cert"] = p.xfcc
		}
		resp, err := s.grpc.Check(ctx(t), &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
			Source: &authv3.AttributeContext_Peer{Principal: p.peer, Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
				SocketAddress: &corev3.SocketAddress{Address: "10.1.2.3", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 40000}}}}},
			Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{Method: "GET", Path: "/v1/connections", Headers: headers}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		a = grpcAnswer(t, resp)
	default:
		t.Fatalf("no protocol %s", protocol)
	}
	return a.status, a.code
}

var bindingProtocols = []string{"/v1", "forward-auth", "forward-auth nginx", "ext_authz gRPC"}

// wrongWorkload is each protocol's refusal of a request that proves no bound workload: 403
// API_KEY_WRONG_WORKLOAD everywhere (NGINX's mode answers 403 too).
func wantWrongWorkload(t *testing.T, what, protocol string, status int, code string) {
	t.Helper()
	if status != http.StatusForbidden || code != apicode.KeyWrongWorkload {
		t.Errorf("%s over %s: %d %s, want 403 %s", what, protocol, status, code, apicode.KeyWrongWorkload)
	}
}

// TestBindingEnforced: a key bound (Enforce) to ServiceAccount web, as the operator records it in
// the hash Secret, answers over every protocol a request carrying a token the API server issued
// to a pod of web for switchboard's audience, and refuses with 403 API_KEY_WRONG_WORKLOAD one
// with no token, another ServiceAccount's token, a token of another audience, another
// namespace's web's, a deleted pod's; over ext_authz the gateway's peer principal proves a bound
// SPIFFE ID, and another does not.
func TestBindingEnforced(t *testing.T) {
	ns, other := env.Namespace(t, "binding"), env.Namespace(t, "binding-other")
	newConnection(t, ns, "one", "conn_bound1", nil)
	web, api := newWorkloadPod(t, ns, "web", "web-0"), newWorkloadPod(t, ns, "api", "api-0")
	elsewhere := newWorkloadPod(t, other, "web", "web-0")
	doomed := newWorkloadPod(t, ns, "web", "web-1")
	k := newKey(t, ns, "bound", switchboardv1alpha1.APIKeySpec{})
	mesh := "spiffe://cluster.local/ns/" + ns + "/sa/mesh"
	s := bindingServer{startAuthzServer(t, noFailureLimit(nil), Deps{}, true)}
	if status, _ := s.ask(t, "/v1", k.Key, proofs{}); status != http.StatusOK {
		t.Fatalf("the key before its binding: %d", status)
	}
	bind(t, k, keysecret.Binding{Mode: switchboardv1alpha1.BindingEnforce, ServiceAccounts: []string{"web"}, SPIFFEIDs: []string{mesh}})
	eventually(t, "the binding enforced", func() bool {
		status, _ := s.ask(t, "/v1", k.Key, proofs{})
		return status == http.StatusForbidden
	})

	webToken, doomedToken := web.token(t, "switchboard.dev"), doomed.token(t, "switchboard.dev")
	refused := map[string]proofs{
		"no token":                         {},
		"api's token":                      {token: api.token(t, "switchboard.dev")},
		"web's token of another audience":  {token: web.token(t, "other.example")},
		"another namespace's web's token":  {token: elsewhere.token(t, "switchboard.dev")},
		"a token that is not one":          {token: "not.a.token"},
		"a token and a proof that are not": {token: "x", dpop: "y"},
	}
	for _, protocol := range bindingProtocols {
		if status, code := s.ask(t, protocol, k.Key, proofs{token: webToken}); status != http.StatusOK {
			t.Errorf("web's token over %s: %d %s, want 200", protocol, status, code)
		}
		if status, code := s.ask(t, protocol, k.Key, proofs{token: doomedToken}); status != http.StatusOK {
			t.Errorf("web-1's token over %s: %d %s, want 200", protocol, status, code)
		}
		for what, p := range refused {
			status, code := s.ask(t, protocol, k.Key, p)
			wantWrongWorkload(t, what, protocol, status, code)
		}
	}
	if err := env.Client.Delete(ctx(t), doomed.pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted pod's token refused", func() bool {
		status, _ := s.ask(t, "/v1", k.Key, proofs{token: doomedToken})
		return status == http.StatusForbidden
	})
	for _, protocol := range bindingProtocols {
		status, code := s.ask(t, protocol, k.Key, proofs{token: doomedToken})
		wantWrongWorkload(t, "a deleted pod's token", protocol, status, code)
	}

	// The mesh's peer principal, which only ext_authz carries.
	if status, code := s.ask(t, "ext_authz gRPC", k.Key, proofs{peer: mesh}); status != http.StatusOK {
		t.Errorf("the bound peer principal: %d %s, want 200", status, code)
	}
	status, code := s.ask(t, "ext_authz gRPC", k.Key, proofs{peer: "spiffe://cluster.local/ns/" + ns + "/sa/api"})
	wantWrongWorkload(t, "another peer principal", "ext_authz gRPC", status, code)
}

// TestBindingClientCertHeader: a server that reads the edge's X-Forwarded-Client-Cert
// (binding.clientCertHeader) answers a key bound to a SPIFFE ID over /v1 and forward-auth when
// the header's nearest element names it and the request comes from a trusted proxy (here the
// loopback, the tests' gateway); it refuses another SPIFFE ID, the same header from a peer it
// does not trust, and the header where it reads none; ext_authz never reads the header (its
// peer is attributes.source.principal).
func TestBindingClientCertHeader(t *testing.T) {
	ns := env.Namespace(t, "binding-xfcc")
	newConnection(t, ns, "one", "conn_xfcc1", nil)
	k := newKey(t, ns, "bound", switchboardv1alpha1.APIKeySpec{})
	mesh := "spiffe://cluster.local/ns/" + ns + "/sa/mesh"
	bind(t, k, keysecret.Binding{Mode: switchboardv1alpha1.BindingEnforce, SPIFFEIDs: []string{mesh}})
	edge := func(uri string) string {
		return "By=spiffe://cluster.local/ns/edge/sa/gateway;Hash=468ed33be74eee6556d90c0149c1309e9ba61d6425303443c0748a02dd8de688;Subject=\"CN=client\";URI=" + uri
	}
	start := func(trusted, header string) bindingServer {
		c := noFailureLimit(&sc{TrustedProxies: []string{trusted}})
		c.Binding.ClientCertHeader = header
		s := bindingServer{startAuthzServer(t, c, Deps{}, true)}
		eventually(t, "the binding enforced", func() bool {
			status, _ := s.ask(t, "/v1", k.Key, proofs{})
			return status == http.StatusForbidden
		})
		return s
	}
	reading := start("127.0.0.1/32", keycheck.DefaultClientCertHeader)
	for _, protocol := range []string{"/v1", "forward-auth", "forward-auth nginx"} {
		if status, code := reading.ask(t, protocol, k.Key, proofs{xfcc: edge(mesh)}); status != http.StatusOK {
			t.Errorf("the bound SPIFFE ID from the trusted edge over %s: %d %s, want 200", protocol, status, code)
		}
		status, code := reading.ask(t, protocol, k.Key, proofs{xfcc: edge("spiffe://cluster.local/ns/" + ns + "/sa/api")})
		wantWrongWorkload(t, "another SPIFFE ID", protocol, status, code)
		status, code = reading.ask(t, protocol, k.Key, proofs{xfcc: edge(mesh) + "," + edge("spiffe://cluster.local/ns/"+ns+"/sa/api")})
		wantWrongWorkload(t, "the bound SPIFFE ID in an earlier element", protocol, status, code)
	}
	status, code := reading.ask(t, "ext_authz gRPC", k.Key, proofs{xfcc: edge(mesh)})
	wantWrongWorkload(t, "the header over ext_authz", "ext_authz gRPC", status, code)

	untrusted := start("10.0.0.0/8", keycheck.DefaultClientCertHeader)
	notReading := start("127.0.0.1/32", "")
	for _, protocol := range []string{"/v1", "forward-auth", "forward-auth nginx"} {
		status, code := untrusted.ask(t, protocol, k.Key, proofs{xfcc: edge(mesh)})
		wantWrongWorkload(t, "the header from a peer not trusted", protocol, status, code)
		status, code = notReading.ask(t, protocol, k.Key, proofs{xfcc: edge(mesh)})
		wantWrongWorkload(t, "the header where none is read", protocol, status, code)
	}
}

// TestBindingDPoP: over /v1, a key bound to a public key is answered with a proof that key
// signed for the request's method and URL and the presented key, once: a replay, another key's
// proof, a proof for another method or URL are refused; and 10,000 replays of a proof
// accepted are all refused.
func TestBindingDPoP(t *testing.T) {
	ns := env.Namespace(t, "binding-dpop")
	newConnection(t, ns, "one", "conn_dpop1", nil)
	signer, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k := newKey(t, ns, "bound", switchboardv1alpha1.APIKeySpec{})
	bind(t, k, keysecret.Binding{Mode: switchboardv1alpha1.BindingEnforce, PublicKeys: []string{dpoptest.Thumbprint(&signer.PublicKey)}})
	s := bindingServer{startAuthzServer(t, noFailureLimit(nil), Deps{}, true)}
	url := s.URL + "/v1/connections"
	proof := func(key *ecdsa.PrivateKey, method, url string) string {
		t.Helper()
		p, err := dpoptest.Make(key, dpoptest.Claims{Method: method, URL: url, APIKey: k.Key, IssuedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	eventually(t, "the binding enforced", func() bool {
		status, _ := s.ask(t, "/v1", k.Key, proofs{})
		return status == http.StatusForbidden
	})
	accepted := proof(signer, http.MethodGet, url)
	if status, code := s.ask(t, "/v1", k.Key, proofs{dpop: accepted}); status != http.StatusOK {
		t.Fatalf("a proof of the bound key: %d %s, want 200", status, code)
	}
	for what, p := range map[string]string{
		"the proof replayed":       accepted,
		"another key's proof":      proof(stranger, http.MethodGet, url),
		"a proof for POST":         proof(signer, http.MethodPost, url),
		"a proof for another URL":  proof(signer, http.MethodGet, s.URL+"/v1/other"),
		"a proof for another host": proof(signer, http.MethodGet, "https://api.example.com/v1/connections"),
	} {
		status, code := s.ask(t, "/v1", k.Key, proofs{dpop: p})
		wantWrongWorkload(t, what, "/v1", status, code)
	}
	// The gateways tell the URL the client addressed: forward-auth in X-Forwarded-Proto, -Host and
	// -Uri, NGINX's mode in X-Original-URL, ext_authz in the attributes' scheme, host and path.
	public := "https://api.example.com/v1/connections?page=2"
	forwarded := func(path string, h map[string]string) int {
		req, err := http.NewRequest(http.MethodGet, s.httpURL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+k.Key)
		for name, v := range h {
			req.Header.Set(name, v)
		}
		return s.do(t, req).Status
	}
	extAuthz := func(p string) int {
		resp, err := s.grpc.Check(ctx(t), &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
			Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{Method: "GET", Scheme: "https", Host: "api.example.com",
				Path: "/v1/connections?page=2", Headers: map[string]string{"authorization": "Bearer " + k.Key, "dpop": p}}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		return int(resp.GetStatus().GetCode())
	}
	for _, gw := range []struct {
		name string
		ask  func(proof string) int
		ok   int
	}{
		{"forward-auth", func(p string) int {
			return forwarded(authz.ForwardAuthPath+"/", map[string]string{"DPoP": p, "X-Forwarded-Method": "GET", "X-Forwarded-Proto": "https",
				"X-Forwarded-Host": "api.example.com", "X-Forwarded-Uri": "/v1/connections?page=2"})
		}, http.StatusOK},
		{"forward-auth nginx", func(p string) int {
			return forwarded(authz.ForwardAuthNginxPath+"/", map[string]string{"DPoP": p, "X-Original-Method": "GET", "X-Original-URL": public})
		}, http.StatusOK},
		{"ext_authz gRPC", extAuthz, 0},
	} {
		good := proof(signer, http.MethodGet, public)
		if got := gw.ask(good); got != gw.ok {
			t.Errorf("%s: a proof for the URL the gateway tells: %d, want %d", gw.name, got, gw.ok)
		}
		if got := gw.ask(good); got == gw.ok {
			t.Errorf("%s: the proof replayed was admitted", gw.name)
		}
		if got := gw.ask(proof(signer, http.MethodGet, "https://api.example.com/v1/other")); got == gw.ok {
			t.Errorf("%s: a proof for another URL was admitted", gw.name)
		}
	}

	admitted := 0
	for range 10000 {
		if status, _ := s.ask(t, "/v1", k.Key, proofs{dpop: accepted}); status == http.StatusOK {
			admitted++
		}
	}
	if admitted != 0 {
		t.Errorf("10,000 replays of a proof: %d admitted, want 0", admitted)
	}
}

// TestBindingReportOnly: a key bound in ReportOnly admits every request, and the server writes
// who presented it into status.binding with lastUsedAt: the bound presenter and the others, and
// how many requests proved no bound workload.
func TestBindingReportOnly(t *testing.T) {
	ns := env.Namespace(t, "binding-report")
	newConnection(t, ns, "one", "conn_report1", nil)
	web, api := newWorkloadPod(t, ns, "web", "web-0"), newWorkloadPod(t, ns, "api", "api-0")
	k := newKey(t, ns, "reported", switchboardv1alpha1.APIKeySpec{})
	bind(t, k, keysecret.Binding{Mode: switchboardv1alpha1.BindingReportOnly, ServiceAccounts: []string{"web"}})
	c := noFailureLimit(&sc{LastUsed: configv1alpha1.LastUsed{Interval: &metav1.Duration{Duration: time.Second}}})
	s := bindingServer{startAuthzServer(t, c, Deps{LastUsedFlush: 100 * time.Millisecond}, true)}
	webToken, apiToken := web.token(t, "switchboard.dev"), api.token(t, "switchboard.dev")
	// The binding is read once its Secret's update reaches the index: until then the presenters
	// are not recorded, so wait for the first.
	eventually(t, "the binding read", func() bool {
		if status, _ := s.ask(t, "/v1", k.Key, proofs{token: webToken}); status != http.StatusOK {
			t.Fatalf("ReportOnly refused web's token: %d", status)
		}
		var ak switchboardv1alpha1.APIKey
		if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(k.APIKey), &ak); err != nil {
			t.Fatal(err)
		}
		return ak.Status.Binding != nil
	})
	for _, p := range []proofs{{}, {token: apiToken}, {token: apiToken}} {
		for _, protocol := range bindingProtocols {
			if status, code := s.ask(t, protocol, k.Key, p); status != http.StatusOK {
				t.Errorf("ReportOnly over %s with %+v: %d %s, want 200", protocol, p, status, code)
			}
		}
	}
	want := map[string]bool{"system:serviceaccount:" + ns + ":web": true, "system:serviceaccount:" + ns + ":api": false, "": false}
	var got *switchboardv1alpha1.APIKeyBindingStatus
	eventually(t, "status.binding with every presenter and 12 misuses", func() bool {
		var ak switchboardv1alpha1.APIKey
		if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(k.APIKey), &ak); err != nil {
			t.Fatal(err)
		}
		got = ak.Status.Binding
		if got == nil || got.Misuses != 12 || got.LastMisuseAt == nil || ak.Status.LastUsedAt == nil {
			return false
		}
		seen := map[string]bool{}
		for _, p := range got.Presenters {
			if bound, ok := want[p.Principal]; !ok || bound != p.Bound || p.Requests < 1 || p.LastSeen.IsZero() {
				t.Fatalf("presenter %+v, want one of %v", p, want)
			}
			seen[p.Principal] = true
		}
		return len(seen) == len(want)
	})
	if len(got.Presenters) > switchboardv1alpha1.MaxBindingPresenters {
		t.Errorf("%d presenters written", len(got.Presenters))
	}
}

// TestBoundDecisionCost measures the decision of a key bound to a ServiceAccount whose real
// token the verifier has cached, beside the same key unbound: what a binding adds to a request.
// It logs the numbers and asserts none of them (they depend on the machine).
func TestBoundDecisionCost(t *testing.T) {
	ns := env.Namespace(t, "binding-cost")
	web := newWorkloadPod(t, ns, "web", "web-0")
	md, err := metadata.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := satoken.NewPodInformer(md, ns)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go pods.Run(runCtx)
	eventually(t, "the pod informer synced", pods.HasSynced)
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := satoken.New(satoken.Options{Audience: "switchboard.dev", Client: kube.Discovery().RESTClient(), Pods: pods})
	if err != nil {
		t.Fatal(err)
	}
	if err := verifier.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	idx := keyindex.New()
	bound, bearer := mustKey(t), mustKey(t)
	boundKey := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bound", UID: "uid-bound"}}
	bearerKey := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bearer", UID: "uid-bearer"}}
	if err := keyindextest.PutBoundKey(idx, boundKey, bound, keysecret.Binding{Mode: switchboardv1alpha1.BindingEnforce, ServiceAccounts: []string{"web"}}); err != nil {
		t.Fatal(err)
	}
	if err := keyindextest.PutKey(idx, bearerKey, bearer); err != nil {
		t.Fatal(err)
	}
	ready := &atomic.Bool{}
	ready.Store(true)
	checker, err := keycheck.New(keycheck.Config{Index: idx, Ready: ready, KeyPrefix: "sb", Tokens: verifier})
	if err != nil {
		t.Fatal(err)
	}
	token := web.token(t, "switchboard.dev")
	r, err := http.NewRequest(http.MethodGet, "http://api.example/v1/connections", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.RemoteAddr = "192.0.2.1:1234"
	r.Header.Set(keycheck.HeaderWorkloadToken, token)
	decide := func(key string) func(b *testing.B) {
		return func(b *testing.B) {
			req := keycheck.Request{Authorization: []string{"Bearer " + key}, HTTP: r, Proofs: keycheck.HTTPProofs{Request: r}}
			b.ReportAllocs()
			for b.Loop() {
				req.Now = time.Now()
				if v := checker.Decide(context.Background(), &req); !v.Allowed() {
					b.Fatal(v.Code)
				}
			}
		}
	}
	for name, key := range map[string]string{"bearer": bearer, "bound, token cached": bound} {
		res := testing.Benchmark(decide(key))
		if res.N == 0 {
			t.Fatalf("%s: the decision failed", name)
		}
		t.Logf("%s key: %d ns/op, %d allocs/op, %d B/op", name, res.NsPerOp(), res.AllocsPerOp(), res.AllocedBytesPerOp())
	}
}

func mustKey(t *testing.T) string {
	t.Helper()
	k, err := apikey.Generate(apikey.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
