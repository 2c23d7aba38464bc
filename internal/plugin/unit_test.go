package plugin

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
)

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }

func TestRelativeTimes(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"ago nil", ago(nil, now), "never"},
		{"ago past", ago(at(-5*time.Minute), now), "5m ago"},
		{"until nil", until(nil, now), "never"},
		{"until future", until(at(30*24*time.Hour), now), "in 30d"},
		{"until past", until(at(-2*time.Hour), now), "120m ago"},
		{"age", age(*at(-90 * time.Second), now), "90s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Fatalf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestExplain(t *testing.T) {
	gr := schema.GroupResource{Group: "switchboard.dev", Resource: "apikeys"}
	create := action{verb: "create", resource: "apikeys.switchboard.dev", kind: "APIKey", namespace: "team-a"}
	get := action{verb: "get", resource: "apikeys.switchboard.dev", kind: "APIKey", namespace: "team-a", name: "ci"}
	tests := []struct {
		name   string
		err    error
		action action
		want   string
		is     error
	}{
		{
			name:   "forbidden names user, verb and resource from the API server",
			err:    apierrors.NewForbidden(gr, "", errors.New(`User "system:serviceaccount:team-a:bot" cannot create resource "apikeys" in API group "switchboard.dev" in the namespace "team-a"`)),
			action: create,
			want:   `forbidden: you (system:serviceaccount:team-a:bot) may not create apikeys.switchboard.dev in namespace "team-a"; ask a cluster administrator for a Role that grants "create" on "apikeys.switchboard.dev"`,
			is:     ErrForbidden,
		},
		{
			name:   "forbidden on a core resource has no group",
			err:    apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "ci-key-1", errors.New(`User "u" cannot delete resource "secrets" in API group "" in the namespace "team-a"`)),
			action: create,
			want:   `forbidden: you (u) may not delete secrets in namespace "team-a"; ask a cluster administrator for a Role that grants "delete" on "secrets"`,
			is:     ErrForbidden,
		},
		{
			name:   "forbidden with an unusual message falls back to the attempted action",
			err:    apierrors.NewForbidden(gr, "", errors.New("denied by webhook")),
			action: create,
			want:   `forbidden: you may not create apikeys.switchboard.dev in namespace "team-a"; ask a cluster administrator for a Role that grants "create" on "apikeys.switchboard.dev"`,
			is:     ErrForbidden,
		},
		{
			name:   "unreachable API server",
			err:    fmt.Errorf("failed to get server groups: %w", &url.Error{Op: "Get", URL: "https://10.0.0.1:6443/api?timeout=32s", Err: errors.New("connection refused")}),
			action: get,
			want:   "cannot reach the Kubernetes API server at https://10.0.0.1:6443: connection refused",
		},
		{
			name:   "bad credentials",
			err:    apierrors.NewUnauthorized("Unauthorized"),
			action: get,
			want:   "the Kubernetes API server did not accept your credentials (Unauthorized): check your kubeconfig, or log in again",
		},
		{
			name:   "not found",
			err:    apierrors.NewNotFound(gr, "ci"),
			action: get,
			want:   `APIKey "ci" not found in namespace "team-a"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := explain(tt.err, tt.action)
			if got.Error() != tt.want {
				t.Fatalf("explain =\n  %s\nwant\n  %s", got, tt.want)
			}
			if tt.is != nil && !errors.Is(got, tt.is) {
				t.Fatalf("explain(%v) does not wrap %v", tt.err, tt.is)
			}
		})
	}
}

func TestContainerPort(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "server", Ports: []corev1.ContainerPort{{Name: "api", ContainerPort: 8080}, {Name: "panel", ContainerPort: 8443}},
	}}}}
	tests := []struct {
		name    string
		port    corev1.ServicePort
		want    int32
		wantErr string
	}{
		{name: "numeric targetPort", port: corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(9000)}, want: 9000},
		{name: "named targetPort", port: corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("panel")}, want: 8443},
		{name: "no targetPort means the service port", port: corev1.ServicePort{Port: 8081}, want: 8081},
		{name: "unknown name", port: corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("web")}, wantErr: `no container port named "web"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := containerPort(pod, tt.port)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("containerPort = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestPanelPort(t *testing.T) {
	tests := []struct {
		name  string
		ports []corev1.ServicePort
		want  string
	}{
		{name: "named http wins", ports: []corev1.ServicePort{{Name: "metrics", Port: 1}, {Name: "http", Port: 2}}, want: "http"},
		{name: "otherwise the first", ports: []corev1.ServicePort{{Name: "a", Port: 1}, {Name: "b", Port: 2}}, want: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := panelPort(&corev1.Service{Spec: corev1.ServiceSpec{Ports: tt.ports}})
			if err != nil || got.Name != tt.want {
				t.Fatalf("panelPort = %q, %v; want %q", got.Name, err, tt.want)
			}
		})
	}
	if _, err := panelPort(&corev1.Service{}); err == nil {
		t.Fatal("a Service without ports was accepted")
	}
}

func TestBuildValidatesFlags(t *testing.T) {
	base := func() *keyCreateOptions {
		return &keyCreateOptions{Options: &Options{Clock: clocktesting.NewFakePassiveClock(now)}, timeout: time.Minute}
	}
	tests := []struct {
		name    string
		change  func(*keyCreateOptions)
		wantErr string
		check   func(*testing.T, *switchboardv1alpha1.APIKey)
	}{
		{name: "expires-in", change: func(o *keyCreateOptions) { o.expiresIn = 720 * time.Hour }, check: func(t *testing.T, k *switchboardv1alpha1.APIKey) {
			if !k.Spec.ExpiresAt.Time.Equal(now.Add(720 * time.Hour)) {
				t.Fatalf("expiresAt = %v", k.Spec.ExpiresAt)
			}
		}},
		{name: "expires-at", change: func(o *keyCreateOptions) { o.expiresAt = "2027-01-31T00:00:00Z" }, check: func(t *testing.T, k *switchboardv1alpha1.APIKey) {
			if k.Spec.ExpiresAt.UTC().Format(time.RFC3339) != "2027-01-31T00:00:00Z" {
				t.Fatalf("expiresAt = %v", k.Spec.ExpiresAt)
			}
		}},
		{name: "selector", change: func(o *keyCreateOptions) { o.selector = "team=data,env!=prod,tier in (a,b),!legacy" }, check: func(t *testing.T, k *switchboardv1alpha1.APIKey) {
			want := &metav1.LabelSelector{
				MatchLabels: map[string]string{"team": "data"},
				MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "env", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"prod"}},
					{Key: "legacy", Operator: metav1.LabelSelectorOpDoesNotExist},
					{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}},
				},
			}
			// The selector must select what kubectl's would.
			got, err := metav1.LabelSelectorAsSelector(k.Spec.ConnectionSelector)
			if err != nil {
				t.Fatal(err)
			}
			wantSel, _ := metav1.LabelSelectorAsSelector(want)
			if got.String() != wantSel.String() {
				t.Fatalf("connectionSelector = %s, want %s", got, wantSel)
			}
		}},
		{name: "greater-than is not a label selector operator", change: func(o *keyCreateOptions) { o.selector = "size>3" }, wantErr: "not supported"},
		{name: "expires-at in the past", change: func(o *keyCreateOptions) { o.expiresAt = "2020-01-01T00:00:00Z" }, wantErr: "not in the future"},
		{name: "expires-at not a time", change: func(o *keyCreateOptions) { o.expiresAt = "tomorrow" }, wantErr: "RFC 3339"},
		{name: "negative expires-in", change: func(o *keyCreateOptions) { o.expiresIn = -time.Hour }, wantErr: "must be positive"},
		{name: "bad selector", change: func(o *keyCreateOptions) { o.selector = "a==b==c" }, wantErr: "not a label selector"},
		{name: "bad output", change: func(o *keyCreateOptions) { o.output = "yaml" }, wantErr: "unsupported output format"},
		{name: "zero timeout", change: func(o *keyCreateOptions) { o.timeout = 0 }, wantErr: "--timeout must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base()
			tt.change(o)
			k, err := o.build("team-a", "ci")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, k)
		})
	}
}

// TestPolicyFlags: each flag changes its part of the policy only, "none" and "any" remove a
// limit, and a bad value names its flag.
func TestPolicyFlags(t *testing.T) {
	current := func() keyclient.Policy {
		return keyclient.Policy{
			RateLimit:           &switchboardv1alpha1.APIKeyRateLimit{Requests: 5, Period: metav1.Duration{Duration: time.Second}},
			AllowedSourceRanges: []switchboardv1alpha1.CIDR{"10.0.0.0/8"},
			Audiences:           []switchboardv1alpha1.Audience{"billing"},
		}
	}
	tests := []struct {
		name  string
		flags policyFlags
		want  string // rate limit | sources | audiences after the change, or the error's text
		ok    bool
	}{
		{"nothing given", policyFlags{}, "5/1s | 10.0.0.0/8 | billing", true},
		{"audiences", policyFlags{audiences: []string{"billing", "connections"}}, "5/1s | 10.0.0.0/8 | billing,connections", true},
		{"audiences with spaces", policyFlags{audiences: []string{"billing", " connections  billing-v2"}}, "5/1s | 10.0.0.0/8 | billing,connections,billing-v2", true},
		{"any audience", policyFlags{audiences: []string{"any"}}, "5/1s | 10.0.0.0/8 | ", true},
		{"any audience among others", policyFlags{audiences: []string{"billing", "any"}}, `--audiences: "any" allows every audience and is given alone`, false},
		{"a bad audience", policyFlags{audiences: []string{"connections", "billing.v2"}}, `--audiences: audience "billing.v2" is not a DNS label`, false},
		{"an audience twice", policyFlags{audiences: []string{"billing", "billing"}}, `--audiences: audience "billing" is given twice`, false},
		{"everything removed", policyFlags{rateLimit: "none", sourceRanges: []string{"any"}, audiences: []string{"any"}}, " |  | ", true},
		{"rate limit", policyFlags{rateLimit: "100/1m", burst: 20}, "100/1m,burst=20 | 10.0.0.0/8 | billing", true},
		{"source ranges", policyFlags{sourceRanges: []string{"192.0.2.0/24"}}, "5/1s | 192.0.2.0/24 | billing", true},
		{"a burst alone", policyFlags{burst: 3}, "--burst needs --rate-limit", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := current()
			err := tt.flags.change(&p)
			got := keyclient.FormatRateLimit(p.RateLimit) + " | " + keyclient.FormatSourceRanges(p.AllowedSourceRanges) + " | " + keyclient.FormatAudiences(p.Audiences)
			switch {
			case tt.ok && (err != nil || got != tt.want):
				t.Fatalf("change = %q, %v; want %q", got, err, tt.want)
			case !tt.ok && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("change = %v, want an error saying %q", err, tt.want)
			}
			if given := len(tt.flags.audiences) > 0 || len(tt.flags.sourceRanges) > 0 || tt.flags.rateLimit != "" || tt.flags.burst != 0; given != tt.flags.given() {
				t.Fatalf("given() = %v", tt.flags.given())
			}
		})
	}
}

func TestPolicyColumns(t *testing.T) {
	key := func(ranges []switchboardv1alpha1.CIDR, audiences []switchboardv1alpha1.Audience) *switchboardv1alpha1.APIKey {
		return &switchboardv1alpha1.APIKey{Spec: switchboardv1alpha1.APIKeySpec{AllowedSourceRanges: ranges, Audiences: audiences}}
	}
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"no source ranges", sourcesColumn(key(nil, nil)), "anywhere"},
		{"one source range", sourcesColumn(key([]switchboardv1alpha1.CIDR{"10.0.0.0/8"}, nil)), "10.0.0.0/8"},
		{"two source ranges", sourcesColumn(key([]switchboardv1alpha1.CIDR{"10.0.0.0/8", "2001:db8::/32"}, nil)), "10.0.0.0/8,2001:db8::/32"},
		{"five source ranges", sourcesColumn(key([]switchboardv1alpha1.CIDR{"10.0.0.0/8", "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "::1/128"}, nil)), "10.0.0.0/8,192.0.2.0/24,+3"},
		{"no audiences", audiencesColumn(key(nil, nil)), "any"},
		{"empty audiences", audiencesColumn(key(nil, []switchboardv1alpha1.Audience{})), "any"},
		{"one audience", audiencesColumn(key(nil, []switchboardv1alpha1.Audience{"connections"})), "connections"},
		{"two audiences", audiencesColumn(key(nil, []switchboardv1alpha1.Audience{"billing", "connections"})), "billing,connections"},
		{"three audiences", audiencesColumn(key(nil, []switchboardv1alpha1.Audience{"billing", "connections", "reports"})), "billing,connections,+1"},
		{"no rate limit", rateLimitColumn(key(nil, nil)), "none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Fatalf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestArgumentErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"key", "create"}, "needs exactly one NAME argument, got 0"},
		{[]string{"key", "create", "Bad_Name"}, `"Bad_Name" is not a valid name`},
		{[]string{"key", "create", "ci", "--expires-in", "1h", "--expires-at", "2030-01-01T00:00:00Z"}, "none of the others can be"},
		{[]string{"key", "list", "-o", "wide"}, `unsupported output format "wide"`},
		{[]string{"key", "rotate", "ci", "--grace", "soon"}, `invalid argument "soon"`},
		{[]string{"key", "policy", "ci", "--audiences", "Billing"}, `--audiences: audience "Billing" must be written in lower case: billing`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			// A kubeconfig that does not exist: argument errors must come before any connection.
			args := append([]string{"--kubeconfig", "/nonexistent", "--server", "https://127.0.0.1:1"}, tt.args...)
			var out, errOut strings.Builder
			code := Main(context.Background(), streams(&out, &errOut, ""), nil, args)
			if code == 0 || !strings.Contains(errOut.String(), tt.want) {
				t.Fatalf("exit %d, stderr %q; want non-zero and %q", code, errOut.String(), tt.want)
			}
			if strings.Count(strings.TrimRight(errOut.String(), "\n"), "\n") != 0 || out.Len() != 0 {
				t.Fatalf("want one line on stderr and nothing on stdout, got stdout %q stderr %q", out.String(), errOut.String())
			}
		})
	}
}
