//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// authzAddresses are the chart's authz Service's gRPC address and forward-auth base URL.
func (s *suite) authzAddresses(t testing.TB) (grpcAddr, forwardAuth string) {
	t.Helper()
	svc := &corev1.Service{}
	if err := s.k8s.Get(context.Background(), client.ObjectKey{Namespace: systemNamespace, Name: release + "-authz"}, svc); err != nil {
		t.Fatalf("the authz Service: %v", err)
	}
	for _, p := range svc.Spec.Ports {
		switch p.Name {
		case "grpc":
			grpcAddr = fmt.Sprintf("%s:%d", svc.Spec.ClusterIP, p.Port)
		case "http":
			forwardAuth = fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, p.Port)
		}
	}
	if grpcAddr == "" || forwardAuth == "" {
		t.Fatalf("the authz Service has ports %v, want grpc and http", svc.Spec.Ports)
	}
	return grpcAddr, forwardAuth
}

// gatewayChecker asks Check as a gateway would, through the Service.
type gatewayChecker struct {
	client authv3.AuthorizationClient
}

func newGatewayChecker(t testing.TB, addr string) *gatewayChecker {
	t.Helper()
	// Dialled inside the cluster's network namespace, where ClusterIPs are, as a pod would.
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return s.c.DialContext(ctx, "tcp", a) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &gatewayChecker{client: authv3.NewAuthorizationClient(conn)}
}

// check returns the HTTP status the gateway would answer with (200 when allowed), or 0 when
// the call failed.
func (g *gatewayChecker) check(ctx context.Context, key string) int {
	resp, err := g.client.Check(ctx, &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source: &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: "192.0.2.10"},
		}}},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Headers: map[string]string{"authorization": "Bearer " + key},
		}},
		ContextExtensions: map[string]string{"switchboard.dev/audience": "connections"},
	}})
	switch {
	case err != nil:
		return 0
	case resp.GetOkResponse() != nil:
		return http.StatusOK
	}
	return int(resp.GetDeniedResponse().GetStatus().GetCode())
}

// forwardAuthStatus is the forward-auth endpoint's status for key on the audience connections.
func forwardAuthStatus(ctx context.Context, c *http.Client, base, key string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/authz/connections", nil)
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}
