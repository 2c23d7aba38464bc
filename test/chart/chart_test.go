//go:build !unit

// Package chart tests the Helm chart and the kustomize tree the way a cluster would see them:
// every rendering is applied with a server-side dry run against a real kube-apiserver, so the
// API server itself validates each object (schemas, CRD schemas, admission).
package chart

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/config"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Run(m, &env) }

const releaseNamespace = "switchboard-system"

// signingNamespace is the release's namespace of the signing secrets' copies (its default name;
// config/default's too).
const signingNamespace = releaseNamespace + "-webhook-signing"

// allFeatures turns on every optional part of the chart.
var allFeatures = []string{
	"server.autoscaling.enabled=true",
	"ingress.enabled=true",
	"ingress.className=nginx",
	"ingress.hosts[0].host=api.example.com",
	"ingress.tls[0].secretName=api-tls",
	"ingress.tls[0].hosts[0]=api.example.com",
	"metrics.serviceMonitor.enabled=true",
	"monitoring.prometheusRule.enabled=true",
	"monitoring.dashboard.enabled=true",
	"networkPolicy.enabled=true",
	"networkPolicy.apiFrom[0].namespaceSelector.matchLabels.name=ingress",
	"networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.name=monitoring",
	"server.trustedProxies[0]=10.0.0.0/8",
	"server.rateLimit.redis.url=redis://redis.cache.svc:6379/0",
	"server.rateLimit.redis.passwordSecret.name=redis-auth",
	"server.podAnnotations.example\\.com/team=platform",
	"operator.nodeSelector.kubernetes\\.io/os=linux",
	"server.audience=connections",
	"server.authz.grpc.enabled=true",
	"server.authz.grpc.tls.secretName=switchboard-authz-tls",
	"server.authz.grpc.tls.clientCASecretName=gateways-ca",
	"server.authz.http.enabled=true",
	"server.authz.allowedClients[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=envoy-gateway-system",
	"server.leakReports.enabled=true",
	"server.leakReports.partner.enabled=true",
	"server.leakReports.partner.tokenSecret.name=github-keys-token",
	"server.leakReports.organizationAlerts.webhookSecret.name=github-webhook",
	"server.leakReports.organizationAlerts.apiTokenSecret.name=github-api",
	"server.leakReports.organizationAlerts.organization=acme",
	"panel.oidc.enabled=true",
	"panel.oidc.issuerURL=https://idp.example.com",
	"panel.oidc.clientID=switchboard-panel",
	"panel.oidc.redirectURL=https://panel.example.com/oidc/callback",
	"panel.oidc.clientSecret.secretName=panel-oidc",
	"panel.oidc.caConfigMap.name=idp-ca",
	"panel.oidc.mode=impersonate",
	"panel.oidc.providerName=Example SSO",
}

func chartDir() string { return filepath.Join(testenv.RepoRoot(), "charts", "switchboard") }

func run(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = testenv.RepoRoot()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

func setArgs(sets []string) []string {
	var args []string
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return args
}

func TestHelmLintStrict(t *testing.T) {
	helm := testenv.Helm(t)
	for name, sets := range map[string][]string{"defaults": nil, "every feature": allFeatures} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"lint", "--strict", "--namespace", releaseNamespace, chartDir()}, setArgs(sets)...)
			if out, err := run(t, helm, args...); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

func TestHelmTemplateServerSideDryRun(t *testing.T) {
	helm := testenv.Helm(t)
	ctx := context.Background()
	for _, ns := range []string{releaseNamespace, signingNamespace} {
		if err := env.EnsureNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	installMonitoringCRDs(t)
	tests := []struct {
		name string
		sets []string
		want []string // kinds the rendering must hold
		not  []string // kinds it must not hold
	}{
		{
			name: "defaults",
			want: []string{"CustomResourceDefinition/apikeys.switchboard.dev", "CustomResourceDefinition/connections.switchboard.dev", "CustomResourceDefinition/leakreports.switchboard.dev",
				"Deployment/switchboard-operator", "Deployment/switchboard-server", "Service/switchboard-api", "Service/switchboard-panel",
				"PodDisruptionBudget/switchboard-server", "ClusterRole/switchboard-operator", "Role/switchboard-operator", "ClusterRole/switchboard-server",
				"Role/switchboard-server", "ServiceAccount/switchboard-operator", "ServiceAccount/switchboard-server",
				"Deployment/switchboard-panel", "PodDisruptionBudget/switchboard-panel", "ClusterRole/switchboard-panel", "ServiceAccount/switchboard-panel",
				"Namespace/" + signingNamespace, "Role/switchboard-webhooks", "Role/switchboard-webhooks-signing",
				"NetworkPolicy/switchboard-server", "NetworkPolicy/switchboard-operator", "NetworkPolicy/switchboard-panel", "NetworkPolicy/switchboard-webhooks"},
			not: []string{"Ingress", "ServiceMonitor", "HorizontalPodAutoscaler", "Service/switchboard-authz",
				"Service/switchboard-leak-reports", "Role/switchboard-server-leak-reports",
				"PrometheusRule", "ConfigMap/switchboard-dashboard"},
		},
		{
			name: "every feature",
			sets: allFeatures,
			want: []string{"Ingress/switchboard-api", "ServiceMonitor/switchboard", "PrometheusRule/switchboard", "ConfigMap/switchboard-dashboard", "NetworkPolicy/switchboard-server",
				"NetworkPolicy/switchboard-operator", "NetworkPolicy/switchboard-panel", "HorizontalPodAutoscaler/switchboard-server", "Service/switchboard-authz",
				"Service/switchboard-leak-reports", "Role/switchboard-server-leak-reports", "RoleBinding/switchboard-server-leak-reports"},
		},
		{
			name: "panel on the server pods",
			sets: []string{"panel.separate=false", "networkPolicy.enabled=true"},
			want: []string{"Service/switchboard-panel", "Deployment/switchboard-server"},
			not:  []string{"Deployment/switchboard-panel", "ClusterRole/switchboard-panel", "NetworkPolicy/switchboard-panel"},
		},
		{
			name: "ingress without trusted proxies, opted out",
			sets: []string{"ingress.enabled=true", "ingress.withoutTrustedProxies=true"},
			want: []string{"Ingress/switchboard-api"},
		},
		{
			name: "single sign-on, token mode",
			sets: ssoValues("token"),
			want: []string{"Deployment/switchboard-panel", "ClusterRole/switchboard-panel"},
			not:  []string{"ClusterRole/switchboard-panel-impersonate", "ClusterRole/switchboard-panel-reveal", "Service/switchboard-reveal"},
		},
		{
			name: "single sign-on, impersonate mode",
			sets: ssoValues("impersonate"),
			want: []string{"Deployment/switchboard-panel", "ClusterRole/switchboard-panel-impersonate", "ClusterRoleBinding/switchboard-panel-impersonate",
				"ClusterRole/switchboard-panel-reveal", "Role/switchboard-panel-reveal", "Service/switchboard-reveal", "ConfigMap/switchboard-reveal-ca"},
		},
		{
			name: "panel, metrics and CRDs off",
			sets: []string{"panel.enabled=false", "metrics.enabled=false", "server.podDisruptionBudget.enabled=false", "crds.enabled=false"},
			not: []string{"Service/switchboard-panel", "Deployment/switchboard-panel", "Service/switchboard-server-metrics", "PodDisruptionBudget",
				"CustomResourceDefinition"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"template", "switchboard", chartDir(), "--namespace", releaseNamespace}, setArgs(tt.sets)...)
			out, err := run(t, helm, args...)
			if err != nil {
				t.Fatal(err)
			}
			objs := decode(t, out)
			kinds := map[string]bool{}
			for _, o := range objs {
				kinds[o.GetKind()] = true
				kinds[o.GetKind()+"/"+o.GetName()] = true
			}
			for _, k := range tt.want {
				if !kinds[k] {
					t.Errorf("the rendering has no %s", k)
				}
			}
			for _, k := range tt.not {
				if kinds[k] {
					t.Errorf("the rendering has %s, which these values turn off", k)
				}
			}
			dryRunApply(t, objs)
			checkRestricted(t, objs)
		})
	}
}

// ssoValues configure single sign-on in mode, fully.
func ssoValues(mode string) []string {
	return []string{"panel.oidc.enabled=true", "panel.oidc.issuerURL=https://idp.example.com", "panel.oidc.clientID=switchboard-panel",
		"panel.oidc.redirectURL=https://panel.example.com/oidc/callback", "panel.oidc.clientSecret.secretName=panel-oidc",
		"panel.oidc.caConfigMap.name=idp-ca", "panel.oidc.mode=" + mode}
}

func TestHelmRejectsBadValues(t *testing.T) {
	helm := testenv.Helm(t)
	tests := []struct {
		name string
		set  string
		want string // the value helm's message must name
	}{
		{name: "key prefix with capitals", set: "keyPrefix=Live", want: "/keyPrefix"},
		{name: "zero operator replicas", set: "operator.replicas=0", want: "/operator/replicas"},
		{name: "reveal TTL not a duration", set: "operator.revealTTL=soon", want: "/operator/revealTTL"},
		{name: "minimum renewal interval not a duration", set: "operator.minRenewalInterval=often", want: "/operator/minRenewalInterval"},
		{name: "minimum renewal interval of the whole lifetime", set: "operator.minRenewalIntervalPercentage=100", want: "/operator/minRenewalIntervalPercentage"},
		// 0 would be the operator's default, not "none": the schema says to write -1.
		{name: "minimum renewal interval percentage of zero", set: "operator.minRenewalIntervalPercentage=0", want: "/operator/minRenewalIntervalPercentage"},
		{name: "unknown top-level value", set: "replicaCount=3", want: "replicaCount"},
		{name: "CRDs switched on by a string", set: "crds.enabled=yes", want: "/crds/enabled"},
		{name: "unknown CRD value", set: "crds.upgrade=true", want: "/crds"},
		// A digest is the algorithm and the whole hex: a tag or a short digest is not one.
		{name: "image digest without its algorithm", set: "image.digest=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", want: "/image/digest"},
		{name: "image digest cut short", set: "image.digest=sha256:0123abcd", want: "/image/digest"},
		{name: "image digest a tag", set: "image.digest=v0.1.0", want: "/image/digest"},
		{name: "bad service type", set: "server.service.type=Internal", want: "/server/service/type"},
		{name: "client-certificate header not a header name", set: "server.binding.clientCertHeader=X Client Cert", want: "/server/binding/clientCertHeader"},
		{name: "trusted proxy not a CIDR", set: "server.trustedProxies[0]=proxy.local", want: "/server/trustedProxies/0"},
		{name: "unknown log level", set: "server.logLevel=verbose", want: "/server/logLevel"},
		{name: "ingress without hosts", set: "ingress.enabled=true,ingress.hosts=null,server.trustedProxies[0]=10.0.0.0/8", want: "/ingress"},
		// docs/security.md section 3: behind an Ingress every client would share one address.
		{name: "ingress without trusted proxies", set: "ingress.enabled=true", want: "/server/trustedProxies"},
		{name: "HPA with a zero CPU target", set: "server.autoscaling.targetCPUUtilizationPercentage=0", want: "/server/autoscaling/targetCPUUtilizationPercentage"},
		{name: "no panel sessions at all", set: "panel.maxSessions=0", want: "/panel/maxSessions"},
		// The password of the rate-limit Redis comes from a Secret, never from the URL.
		{name: "Redis URL with a password", set: "server.rateLimit.redis.url=redis://:hunter2@redis:6379", want: "/server/rateLimit/redis/url"},
		{name: "Redis URL of another scheme", set: "server.rateLimit.redis.url=http://redis:6379", want: "/server/rateLimit/redis/url"},
		{name: "Redis timeout not a duration", set: "server.rateLimit.redis.timeout=fast", want: "/server/rateLimit/redis/timeout"},
		{name: "panel sign-ins never regained", set: "panel.loginRate=0", want: "/panel/loginRate"},
		{name: "audience not a DNS label", set: "server.audience=Billing_V2", want: "/server/audience"},
		{name: "empty audience", set: "server.audience=", want: "/server/audience"},
		{name: "authz gRPC port out of range", set: "server.authz.grpc.port=0", want: "/server/authz/grpc/port"},
		{name: "authz HTTP port out of range", set: "server.authz.http.port=65536", want: "/server/authz/http/port"},
		{name: "leak reports serving nothing", set: "server.leakReports.enabled=true", want: "/server/leakReports"},
		{name: "an organization webhook without an API token", set: "server.leakReports.organizationAlerts.webhookSecret.name=gh,server.leakReports.organizationAlerts.organization=acme", want: "/server/leakReports/organizationAlerts"},
		{name: "an organization webhook without the organization", set: "server.leakReports.organizationAlerts.webhookSecret.name=gh,server.leakReports.organizationAlerts.apiTokenSecret.name=t", want: "/server/leakReports/organizationAlerts"},
		{name: "an organization that is a path", set: "server.leakReports.organizationAlerts.organization=../x", want: "/server/leakReports/organizationAlerts/organization"},
		{name: "a catch-up period not a duration", set: "server.leakReports.organizationAlerts.catchUp.period=often", want: "/server/leakReports/organizationAlerts/catchUp/period"},
		{name: "no unverified request at all", set: "server.leakReports.unverifiedLimit.burst=0", want: "/server/leakReports/unverifiedLimit/burst"},
		{name: "a leak reports keys URL with a query", set: "server.leakReports.partner.publicKeysURL=https://api.github.com/keys?x=1", want: "/server/leakReports/partner/publicKeysURL"},
		{name: "authz listener switched on by a string", set: "server.authz.http.enabled=yes", want: "/server/authz/http/enabled"},
		{name: "authz TLS Secret not a name", set: "server.authz.grpc.tls.secretName=TLS_Secret", want: "/server/authz/grpc/tls/secretName"},
		// mTLS needs the listener's own certificate.
		{name: "client CA without a certificate", set: "server.authz.grpc.enabled=true,server.authz.grpc.tls.clientCASecretName=gateways-ca", want: "/server/authz/grpc/tls/secretName"},
		// docs/gateways.md: the authz listeners are an oracle of keys; with the policy on, the
		// chart must know which gateways may reach them.
		{name: "authz gRPC behind a NetworkPolicy naming no gateway", set: "networkPolicy.enabled=true,server.authz.grpc.enabled=true", want: "/server/authz/allowedClients"},
		{name: "authz HTTP behind a NetworkPolicy naming no gateway", set: "networkPolicy.enabled=true,server.authz.http.enabled=true", want: "/server/authz/allowedClients"},
		// Without the NetworkPolicy nothing would enforce the list: refused rather than ignored.
		{name: "allowed clients without the NetworkPolicy", set: "networkPolicy.enabled=false,server.authz.allowedClients[0].namespaceSelector.matchLabels.name=gw", want: "/networkPolicy/enabled"},
		// The NetworkPolicy is on by default: an authz listener alone names no gateway.
		{name: "authz gRPC with the default NetworkPolicy naming no gateway", set: "server.authz.grpc.enabled=true", want: "/server/authz/allowedClients"},
		{name: "an empty gateway address", set: "server.authz.grpc.gateways[0]=", want: "/server/authz/grpc/gateways/0"},
		{name: "allowed client not a NetworkPolicyPeer", set: "networkPolicy.enabled=true,server.authz.http.enabled=true,server.authz.allowedClients[0].port=9002", want: "/server/authz/allowedClients/0"},
		{name: "unknown authz value", set: "server.authz.grpc.audience=orders", want: "/server/authz/grpc"},
		// Single sign-on: nothing half-configured, the secret only by reference.
		{name: "SSO without an issuer", set: "panel.oidc.enabled=true", want: "/panel/oidc/issuerURL"},
		{name: "SSO with a plain-HTTP issuer", set: "panel.oidc.issuerURL=http://idp.example.com", want: "/panel/oidc/issuerURL"},
		{name: "SSO client secret as a value", set: "panel.oidc.clientSecret=hunter2", want: "/panel/oidc/clientSecret"},
		{name: "SSO without the client secret's Secret", set: strings.Join(ssoValues("token"), ",") + ",panel.oidc.clientSecret.secretName=", want: "/panel/oidc/clientSecret/secretName"},
		{name: "SSO unknown mode", set: "panel.oidc.mode=sudo", want: "/panel/oidc/mode"},
		{name: "SSO callback elsewhere", set: "panel.oidc.redirectURL=https://panel.example.com/callback", want: "/panel/oidc/redirectURL"},
		{name: "SSO without openid", set: "panel.oidc.scopes={email}", want: "/panel/oidc/scopes"},
		{name: "SSO in the server pods", set: strings.Join(ssoValues("impersonate"), ",") + ",panel.separate=false", want: "/panel/separate"},
		// The alerts and the dashboard read the metrics: without them every alert would be blind
		// (and SwitchboardOperatorAbsent would always fire).
		{name: "alerts without metrics", set: "metrics.enabled=false,monitoring.prometheusRule.enabled=true", want: "/metrics/enabled"},
		{name: "dashboard without metrics", set: "metrics.enabled=false,monitoring.dashboard.enabled=true", want: "/metrics/enabled"},
		{name: "auth failure ratio above 1", set: "monitoring.prometheusRule.authFailureRatio=2", want: "/monitoring/prometheusRule/authFailureRatio"},
		{name: "expiry warning of zero days", set: "monitoring.prometheusRule.expiringWithinDays=0", want: "/monitoring/prometheusRule/expiringWithinDays"},
		{name: "dashboard namespace not a name", set: "monitoring.dashboard.namespace=Grafana", want: "/monitoring/dashboard/namespace"},
		{name: "unknown monitoring value", set: "monitoring.prometheusRule.severity=page", want: "/monitoring/prometheusRule"},
		{name: "signing namespace not a name", set: "webhooks.signingNamespace.name=Signing_Copies", want: "/webhooks/signingNamespace/name"},
		{name: "credits admitted when Redis fails", set: "server.rateLimit.credits.onRedisFailure=Admit", want: "/server/rateLimit/credits/onRedisFailure"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := run(t, helm, "template", "switchboard", chartDir(), "--namespace", releaseNamespace, "--set", tt.set)
			if err == nil {
				t.Fatalf("helm template accepted %s:\n%.300s", tt.set, out)
			}
			if !strings.Contains(err.Error(), "values don't meet the specifications of the schema") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("helm's message does not name %q:\n%v", tt.want, err)
			}
		})
	}
}

func TestKustomizeServerSideDryRun(t *testing.T) {
	kubectl := filepath.Join(testenv.AssetsDir(), "kubectl")
	out, err := run(t, kubectl, "kustomize", filepath.Join(testenv.RepoRoot(), "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	objs := decode(t, out)
	kinds := map[string]bool{}
	for _, o := range objs {
		kinds[o.GetKind()+"/"+o.GetName()] = true
		switch ns := o.GetNamespace(); {
		case ns == signingNamespace && o.GetName() != "switchboard-webhooks-signing":
			t.Errorf("%s/%s is in the signing namespace %s, which holds the sender's Secret grant only", o.GetKind(), o.GetName(), ns)
		case ns != "" && ns != releaseNamespace && ns != signingNamespace:
			t.Errorf("%s/%s is in namespace %q, not %s", o.GetKind(), o.GetName(), ns, releaseNamespace)
		}
	}
	for _, k := range []string{"Namespace/switchboard-system", "CustomResourceDefinition/apikeys.switchboard.dev", "CustomResourceDefinition/connections.switchboard.dev", "CustomResourceDefinition/leakreports.switchboard.dev",
		"ClusterRole/switchboard-operator", "ClusterRole/switchboard-server", "ClusterRole/switchboard-panel", "Deployment/switchboard-operator",
		"Deployment/switchboard-server", "Deployment/switchboard-panel", "Service/switchboard-panel", "Service/switchboard-api",
		"PodDisruptionBudget/switchboard-server", "PodDisruptionBudget/switchboard-panel", "Namespace/" + signingNamespace,
		"Role/switchboard-webhooks-signing", "RoleBinding/switchboard-webhooks-signing"} {
		if !kinds[k] {
			t.Errorf("config/default renders no %s", k)
		}
	}
	for _, ns := range []string{releaseNamespace, signingNamespace} {
		if err := env.EnsureNamespace(context.Background(), ns); err != nil {
			t.Fatal(err)
		}
	}
	dryRunApply(t, objs)
	checkRestricted(t, objs)
}

// TestContainerArgsParse runs the switchboard binary with each container's args from both
// renderings, reading the chart's configuration files from their ConfigMaps, with
// --print-config (which parses every flag, decodes, defaults and validates the configuration,
// but starts nothing), so that a renamed flag, an unknown field or a bad value fails here and
// not in a CrashLoopBackOff.
func TestContainerArgsParse(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "switchboard")
	if out, err := run(t, "go", "build", "-o", bin, "./cmd/switchboard"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	helm := testenv.Helm(t)
	templated, err := run(t, helm, append([]string{"template", "switchboard", chartDir(), "--namespace", releaseNamespace}, setArgs(allFeatures)...)...)
	if err != nil {
		t.Fatal(err)
	}
	kustomized, err := run(t, filepath.Join(testenv.AssetsDir(), "kubectl"), "kustomize", filepath.Join(testenv.RepoRoot(), "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for source, stream := range map[string]string{"chart": templated, "config/default": kustomized} {
		for _, o := range decode(t, stream) {
			if o.GetKind() != "Deployment" {
				continue
			}
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				args, _, _ := unstructured.NestedStringSlice(c.(map[string]any), "args")
				seen++
				if i := slices.Index(args, "--config="+configPath); i >= 0 {
					// The file the pod mounts, from the rendered ConfigMap.
					component := strings.TrimPrefix(o.GetName(), "switchboard-")
					if component == "webhooks" {
						component = "operator" // the sender reads the operator's configuration
					}
					file := filepath.Join(t.TempDir(), "config.yaml")
					if err := os.WriteFile(file, []byte(configData(t, decode(t, stream), component)), 0o600); err != nil {
						t.Fatal(err)
					}
					args = append(slices.Clone(args[:i]), append([]string{"--config=" + file}, args[i+1:]...)...)
				}
				out, err := run(t, bin, append(args, "--print-config")...)
				if err != nil {
					t.Errorf("%s: %s: the binary refuses its args: %v\n%s", source, o.GetName(), err, out)
				}
				// The operator writes the signing secrets' copies where the sender reads them:
				// the namespace the rendering makes and grants the sender Secrets in.
				if args[0] == "operator" || args[0] == "webhooks" {
					c := &configv1alpha1.OperatorConfiguration{}
					if err := config.Decode([]byte(out), c); err != nil || c.Webhooks.SigningNamespace != signingNamespace {
						t.Errorf("%s: %s: webhooks.signingNamespace %q (%v), want %s", source, o.GetName(), c.Webhooks.SigningNamespace, err, signingNamespace)
					}
				}
			}
		}
	}
	if seen != 8 {
		t.Fatalf("checked %d containers, want 8 (operator, server, panel and webhooks in each rendering)", seen)
	}
}

// decode splits a multi-document YAML stream into objects.
func decode(t *testing.T, stream string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(stream), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("decoding the rendering: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	if len(objs) == 0 {
		t.Fatal("the rendering is empty")
	}
	return objs
}

// dryRunApply applies each object with a server-side dry run: the API server validates it
// fully (types, CRD schemas, admission) and stores nothing.
func dryRunApply(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, o := range objs {
		o.SetManagedFields(nil)
		// Patch, not Client.Apply: only Patch takes FieldValidation, and Strict is what turns a
		// mistyped field in a template into an error instead of a silently dropped value.
		err := env.Client.Patch(ctx, o, client.Apply, //nolint:staticcheck // see above
			client.DryRunAll, client.FieldOwner("chart-test"), client.ForceOwnership, client.FieldValidation("Strict"))
		if err != nil {
			t.Errorf("server-side dry run of %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

// checkRestricted checks every pod template against the restricted Pod Security Standard and
// for probes and resource requests.
func checkRestricted(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		name := o.GetName()
		pod, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
		if v, _, _ := unstructured.NestedBool(pod, "securityContext", "runAsNonRoot"); !v {
			t.Errorf("%s: pod runAsNonRoot is not true", name)
		}
		if v, _, _ := unstructured.NestedString(pod, "securityContext", "seccompProfile", "type"); v != "RuntimeDefault" {
			t.Errorf("%s: pod seccompProfile is %q", name, v)
		}
		containers, _, _ := unstructured.NestedSlice(pod, "containers")
		for _, c := range containers {
			cm := c.(map[string]any)
			if v, found, _ := unstructured.NestedBool(cm, "securityContext", "allowPrivilegeEscalation"); !found || v {
				t.Errorf("%s: allowPrivilegeEscalation is not false", name)
			}
			if v, _, _ := unstructured.NestedBool(cm, "securityContext", "readOnlyRootFilesystem"); !v {
				t.Errorf("%s: readOnlyRootFilesystem is not true", name)
			}
			if drop, _, _ := unstructured.NestedStringSlice(cm, "securityContext", "capabilities", "drop"); len(drop) != 1 || drop[0] != "ALL" {
				t.Errorf("%s: capabilities.drop is %v, want [ALL]", name, drop)
			}
			for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
				if v, _, _ := unstructured.NestedString(cm, probe, "httpGet", "path"); v != path {
					t.Errorf("%s: %s path is %q, want %s", name, probe, v, path)
				}
			}
			if req, _, _ := unstructured.NestedMap(cm, "resources", "requests"); req["cpu"] == nil || req["memory"] == nil {
				t.Errorf("%s: no cpu and memory requests", name)
			}
		}
	}
}

// installMonitoringCRDs installs the Prometheus Operator's own ServiceMonitor and PrometheusRule
// CRDs (0.93.0, testdata/), so the chart's are dry-run against the schemas users install.
func installMonitoringCRDs(t *testing.T) {
	t.Helper()
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{
		Paths: []string{
			filepath.Join("testdata", "monitoring.coreos.com_servicemonitors.yaml"),
			filepath.Join("testdata", "monitoring.coreos.com_prometheusrules.yaml"),
		}, MaxTime: time.Minute,
	}); err != nil {
		t.Fatalf("installing the Prometheus Operator's CRDs: %v", err)
	}
}
