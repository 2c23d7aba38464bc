//go:build !unit

package chart

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// gatewayPeer is the NetworkPolicyPeer the renderings below admit to the authz ports: the pods
// of Envoy Gateway's namespace.
var gatewayPeer = map[string]any{
	"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "envoy-gateway-system"}},
	"podSelector":       map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/component": "proxy"}},
}

var gatewayPeerSets = []string{
	"server.authz.allowedClients[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=envoy-gateway-system",
	"server.authz.allowedClients[0].podSelector.matchLabels.app\\.kubernetes\\.io/component=proxy",
}

// render renders the chart with sets.
func render(t *testing.T, sets []string) []*unstructured.Unstructured {
	t.Helper()
	out, err := run(t, testenv.Helm(t), append([]string{"template", "switchboard", chartDir(), "--namespace", releaseNamespace}, setArgs(sets)...)...)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, out)
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// number is a decoded YAML number: decode goes through JSON, which makes every number a
// float64.
func number(t *testing.T, v any) int64 {
	t.Helper()
	switch n := v.(type) {
	case float64:
		return int64(n)
	case int64:
		return n
	}
	t.Fatalf("%v (%T) is not a number", v, v)
	return 0
}

// authzArgs spells the server configuration's audience and authz listeners as the flags that
// set them, in the order the chart once passed them.
func authzArgs(c *configv1alpha1.ServerConfiguration) []string {
	out := []string{"--audience=" + c.Audience}
	if g := c.Authz.GRPC; g.Listen != "" {
		out = append(out, "--authz-grpc-listen="+g.Listen, fmt.Sprintf("--authz-grpc-max-message-bytes=%d", *g.MaxMessageBytes))
		if g.StripAuthorization {
			out = append(out, "--authz-strip-authorization")
		}
		if g.TLSCertFile != "" {
			out = append(out, "--authz-grpc-tls-cert-file="+g.TLSCertFile, "--authz-grpc-tls-key-file="+g.TLSKeyFile)
		}
		if g.ClientCAFile != "" {
			out = append(out, "--authz-grpc-client-ca-file="+g.ClientCAFile)
		}
		for _, gw := range g.Gateways {
			out = append(out, "--authz-grpc-gateways="+gw)
		}
	}
	if h := c.Authz.HTTP; h.Listen != "" {
		out = append(out, "--authz-http-listen="+h.Listen, fmt.Sprintf("--authz-http-max-connections=%d", *h.MaxConnections),
			fmt.Sprintf("--authz-http-max-connections-per-client=%d", *h.MaxConnectionsPerClient))
	}
	return out
}

// TestHelmAuthzListeners: the listeners are off by default; each one turned on gets its flag,
// its container port, a port of the Service switchboard-authz with its appProtocol, and (with
// TLS) its certificate and client CA mounted read-only from the Secrets named; with the
// NetworkPolicy on, the authz ports admit exactly server.authz.allowedClients. Every rendering
// is also dry-run against the API server.
func TestHelmAuthzListeners(t *testing.T) {
	for _, ns := range []string{releaseNamespace, signingNamespace} {
		if err := env.EnsureNamespace(context.Background(), ns); err != nil {
			t.Fatal(err)
		}
	}
	type port struct {
		name        string
		port        int64
		target      string
		appProtocol string
	}
	tests := []struct {
		name           string
		sets           []string
		args           []string          // the audience and authz args, in order
		containerPorts map[string]int64  // authz container ports by name
		servicePorts   []port            // the ports of Service switchboard-authz; nil: no Service
		mounts         map[string]string // volume name → mount path
		secrets        map[string]string // volume name → Secret name
		policyPorts    []string          // the authz ports the NetworkPolicy opens to allowedClients
	}{
		{
			name: "defaults",
			args: []string{"--audience=connections"},
		},
		{
			name:           "gRPC only",
			sets:           []string{"networkPolicy.enabled=false", "server.authz.grpc.enabled=true"},
			args:           []string{"--audience=connections", "--authz-grpc-listen=:9001", "--authz-grpc-max-message-bytes=262144", "--authz-strip-authorization"},
			containerPorts: map[string]int64{"authz-grpc": 9001},
			servicePorts:   []port{{"grpc", 9001, "authz-grpc", "grpc"}},
		},
		{
			name: "HTTP only, on another Service port, with the server's own audience renamed",
			sets: []string{"networkPolicy.enabled=false", "server.authz.http.enabled=true", "server.authz.http.port=80", "server.audience=billing-v2",
				"server.authz.http.maxConnections=100", "server.authz.http.maxConnectionsPerClient=8"},
			args:           []string{"--audience=billing-v2", "--authz-http-listen=:9002", "--authz-http-max-connections=100", "--authz-http-max-connections-per-client=8"},
			containerPorts: map[string]int64{"authz-http": 9002},
			servicePorts:   []port{{"http", 80, "authz-http", "http"}},
		},
		{
			name: "both, gRPC over mTLS",
			sets: []string{"networkPolicy.enabled=false", "server.authz.grpc.enabled=true", "server.authz.http.enabled=true",
				"server.authz.grpc.tls.secretName=switchboard-authz-tls", "server.authz.grpc.tls.clientCASecretName=gateways-ca",
				"server.authz.grpc.gateways[0]=10.42.7.0/24"},
			args: []string{"--audience=connections", "--authz-grpc-listen=:9001", "--authz-grpc-max-message-bytes=262144", "--authz-strip-authorization",
				"--authz-grpc-tls-cert-file=/etc/switchboard/authz-grpc-tls/tls.crt",
				"--authz-grpc-tls-key-file=/etc/switchboard/authz-grpc-tls/tls.key",
				"--authz-grpc-client-ca-file=/etc/switchboard/authz-grpc-client-ca/ca.crt", "--authz-grpc-gateways=10.42.7.0/24",
				"--authz-http-listen=:9002", "--authz-http-max-connections=256", "--authz-http-max-connections-per-client=12"},
			containerPorts: map[string]int64{"authz-grpc": 9001, "authz-http": 9002},
			servicePorts:   []port{{"grpc", 9001, "authz-grpc", "grpc"}, {"http", 9002, "authz-http", "http"}},
			mounts:         map[string]string{"authz-grpc-tls": "/etc/switchboard/authz-grpc-tls", "authz-grpc-client-ca": "/etc/switchboard/authz-grpc-client-ca"},
			secrets:        map[string]string{"authz-grpc-tls": "switchboard-authz-tls", "authz-grpc-client-ca": "gateways-ca"},
		},
		{
			name:           "gRPC, the Authorization field left to the upstream",
			sets:           []string{"networkPolicy.enabled=false", "server.authz.grpc.enabled=true", "server.authz.grpc.stripAuthorization=false", "server.authz.grpc.maxMessageBytes=524288"},
			args:           []string{"--audience=connections", "--authz-grpc-listen=:9001", "--authz-grpc-max-message-bytes=524288"},
			containerPorts: map[string]int64{"authz-grpc": 9001},
			servicePorts:   []port{{"grpc", 9001, "authz-grpc", "grpc"}},
		},
		{
			name: "TLS values while gRPC is off change nothing",
			sets: []string{"server.authz.grpc.tls.secretName=switchboard-authz-tls"},
			args: []string{"--audience=connections"},
		},
		{
			name:        "NetworkPolicy, listeners off",
			sets:        []string{"networkPolicy.enabled=true"},
			args:        []string{"--audience=connections"},
			policyPorts: nil,
		},
		{
			name:           "NetworkPolicy, both listeners, the gateways allowed",
			sets:           append([]string{"networkPolicy.enabled=true", "server.authz.grpc.enabled=true", "server.authz.http.enabled=true"}, gatewayPeerSets...),
			args:           []string{"--audience=connections", "--authz-grpc-listen=:9001", "--authz-grpc-max-message-bytes=262144", "--authz-strip-authorization", "--authz-http-listen=:9002", "--authz-http-max-connections=256", "--authz-http-max-connections-per-client=12"},
			containerPorts: map[string]int64{"authz-grpc": 9001, "authz-http": 9002},
			servicePorts:   []port{{"grpc", 9001, "authz-grpc", "grpc"}, {"http", 9002, "authz-http", "http"}},
			policyPorts:    []string{"authz-grpc", "authz-http"},
		},
		{
			name:           "NetworkPolicy, HTTP only",
			sets:           append([]string{"networkPolicy.enabled=true", "server.authz.http.enabled=true"}, gatewayPeerSets...),
			args:           []string{"--audience=connections", "--authz-http-listen=:9002", "--authz-http-max-connections=256", "--authz-http-max-connections-per-client=12"},
			containerPorts: map[string]int64{"authz-http": 9002},
			servicePorts:   []port{{"http", 9002, "authz-http", "http"}},
			policyPorts:    []string{"authz-http"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := render(t, tt.sets)
			deploy := find(objs, "Deployment", "switchboard-server")
			if deploy == nil {
				t.Fatal("no server Deployment")
			}
			containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
			c := containers[0].(map[string]any)

			if got := authzArgs(serverConfig(t, objs)); !slices.Equal(got, tt.args) {
				t.Errorf("audience and authz configuration: %q, want %q", got, tt.args)
			}

			ports, _, _ := unstructured.NestedSlice(c, "ports")
			gotPorts := map[string]int64{}
			for _, p := range ports {
				m := p.(map[string]any)
				if name := m["name"].(string); strings.HasPrefix(name, "authz-") {
					gotPorts[name] = number(t, m["containerPort"])
				}
			}
			if len(gotPorts) != 0 || len(tt.containerPorts) != 0 {
				if !reflect.DeepEqual(gotPorts, tt.containerPorts) {
					t.Errorf("authz container ports: %v, want %v", gotPorts, tt.containerPorts)
				}
			}

			svc := find(objs, "Service", "switchboard-authz")
			switch {
			case svc == nil && tt.servicePorts != nil:
				t.Error("no Service switchboard-authz")
			case svc != nil && tt.servicePorts == nil:
				t.Error("a Service switchboard-authz with no listener on")
			case svc != nil:
				sp, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
				var got []port
				for _, p := range sp {
					m := p.(map[string]any)
					got = append(got, port{m["name"].(string), number(t, m["port"]), m["targetPort"].(string), m["appProtocol"].(string)})
				}
				if !reflect.DeepEqual(got, tt.servicePorts) {
					t.Errorf("Service switchboard-authz ports: %v, want %v", got, tt.servicePorts)
				}
				if typ, _, _ := unstructured.NestedString(svc.Object, "spec", "type"); typ != "ClusterIP" {
					t.Errorf("Service switchboard-authz is of type %s, want ClusterIP (never outside the cluster)", typ)
				}
				sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
				if sel["app.kubernetes.io/component"] != "server" {
					t.Errorf("Service switchboard-authz selects %v, not the server pods", sel)
				}
			}

			mounts, _, _ := unstructured.NestedSlice(c, "volumeMounts")
			gotMounts := map[string]string{}
			for _, m := range mounts {
				mm := m.(map[string]any)
				if mm["name"] == "config" {
					continue // the configuration's, checked by serverConfig
				}
				gotMounts[mm["name"].(string)] = mm["mountPath"].(string)
				if mm["readOnly"] != true {
					t.Errorf("volume %s is mounted writable", mm["name"])
				}
			}
			volumes, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "volumes")
			gotSecrets := map[string]string{}
			for _, v := range volumes {
				vm := v.(map[string]any)
				if vm["name"] == "config" {
					continue
				}
				name, _, _ := unstructured.NestedString(vm, "secret", "secretName")
				gotSecrets[vm["name"].(string)] = name
			}
			if len(gotMounts)+len(tt.mounts) > 0 && !reflect.DeepEqual(gotMounts, tt.mounts) {
				t.Errorf("volume mounts: %v, want %v", gotMounts, tt.mounts)
			}
			if len(gotSecrets)+len(tt.secrets) > 0 && !reflect.DeepEqual(gotSecrets, tt.secrets) {
				t.Errorf("Secret volumes: %v, want %v", gotSecrets, tt.secrets)
			}

			if np := find(objs, "NetworkPolicy", "switchboard-server"); np != nil {
				checkAuthzPolicy(t, np, tt.policyPorts)
			} else if tt.policyPorts != nil {
				t.Error("no NetworkPolicy switchboard-server")
			}

			dryRunApply(t, objs)
			checkRestricted(t, objs)
		})
	}
}

// checkAuthzPolicy: the rules of the server's NetworkPolicy that name an authz port open
// exactly want, and only to gatewayPeer; no rule admits every source to them.
func checkAuthzPolicy(t *testing.T, np *unstructured.Unstructured, want []string) {
	t.Helper()
	rules, _, _ := unstructured.NestedSlice(np.Object, "spec", "ingress")
	var got []string
	for _, r := range rules {
		rm := r.(map[string]any)
		ports, _, _ := unstructured.NestedSlice(rm, "ports")
		var authz []string
		for _, p := range ports {
			if name, _ := p.(map[string]any)["port"].(string); strings.HasPrefix(name, "authz-") {
				authz = append(authz, name)
			}
		}
		if len(authz) == 0 {
			continue
		}
		if len(authz) != len(ports) {
			t.Errorf("a rule mixes the authz ports with others: %v", ports)
		}
		got = append(got, authz...)
		from, _, _ := unstructured.NestedSlice(rm, "from")
		if !reflect.DeepEqual(from, []any{gatewayPeer}) {
			t.Errorf("the authz ports %v admit %v, want only %v", authz, from, gatewayPeer)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("the NetworkPolicy opens the authz ports %v, want %v", got, want)
	}
}

// TestHelmAuthzPolicyTemplateFailsClosed: with the schema skipped, the template itself still
// refuses the listeners behind a NetworkPolicy that names no gateway, which would render an
// empty `from` and admit every source.
func TestHelmAuthzPolicyTemplateFailsClosed(t *testing.T) {
	out, err := run(t, testenv.Helm(t), "template", "switchboard", chartDir(), "--namespace", releaseNamespace, "--skip-schema-validation",
		"--set", "networkPolicy.enabled=true", "--set", "server.authz.grpc.enabled=true")
	if err == nil {
		t.Fatalf("helm template rendered the authz listeners with no allowed clients:\n%.300s", out)
	}
	if !strings.Contains(err.Error(), "server.authz.allowedClients") {
		t.Fatalf("the refusal does not name server.authz.allowedClients: %v", err)
	}
}

// TestPanelTrustsTheServersProxies: the panel's own Deployment gets server.trustedProxies, so
// that its sign-in limiter counts each person behind the ingress by the address the ingress
// forwards, not all of them as the ingress's one address.
func TestPanelTrustsTheServersProxies(t *testing.T) {
	c := panelConfig(t, render(t, []string{"server.trustedProxies={10.0.0.0/24,10.0.1.0/24}"}))
	if !slices.Equal(c.TrustedProxies, []string{"10.0.0.0/24", "10.0.1.0/24"}) {
		t.Fatalf("the panel's configuration has trusted proxies %q", c.TrustedProxies)
	}
}
