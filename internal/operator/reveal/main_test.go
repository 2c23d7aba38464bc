//go:build !unit

package reveal_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient/reveal"
	"github.com/switchboard-dev/switchboard/internal/testenv"
	"github.com/switchboard-dev/switchboard/internal/testenv/system"
)

// sys is the real control plane with the real operator serving the reveal endpoint on
// loopback, and the real /v1 server (a key the endpoint hands over must authenticate there).
var sys *system.System

func TestMain(m *testing.M) {
	system.Main(m, system.Options{Reveal: true}, func(s *system.System) { sys = s })
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// bundle is the ConfigMap of the endpoint's certificates.
func bundle() client.ObjectKey {
	ns, name, _ := strings.Cut(sys.RevealBundle, "/")
	return client.ObjectKey{Namespace: ns, Name: name}
}

// callerRules are the grant the chart gives the panel's ServiceAccount for the endpoint.
func callerRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{NonResourceURLs: []string{reveal.Path}, Verbs: []string{"post"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{bundle().Name}, Verbs: []string{"get"}},
	}
}

// caller is a ServiceAccount bound cluster-wide to rules, as the panel's.
func caller(t *testing.T, name string, rules []rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	ns := sys.Namespace(t, name)
	cfg := sys.ServiceAccount(t, ns, name)
	bind(t, "", "ClusterRole", ns+"-"+name, rules, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name})
	return cfg
}

// bind creates a Role (or ClusterRole, ns "") with rules bound to subject.
func bind(t *testing.T, ns, kind, name string, rules []rbacv1.PolicyRule, subject rbacv1.Subject) {
	t.Helper()
	meta := metav1.ObjectMeta{Namespace: ns, Name: name}
	var objs []client.Object
	if kind == "Role" {
		objs = []client.Object{&rbacv1.Role{ObjectMeta: meta, Rules: rules},
			&rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name}, Subjects: []rbacv1.Subject{subject}}}
	} else {
		objs = []client.Object{&rbacv1.ClusterRole{ObjectMeta: meta, Rules: rules},
			&rbacv1.ClusterRoleBinding{ObjectMeta: meta, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name}, Subjects: []rbacv1.Subject{subject}}}
	}
	for _, obj := range objs {
		if err := sys.Client.Create(testContext(t), obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, name, err)
		}
	}
}

// group is an RBAC subject for a group of people.
func group(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

// issued creates an APIKey in ns and waits until the operator publishes its reveal Secret.
func issued(t *testing.T, ns, name string) *switchboardv1alpha1.APIKey {
	t.Helper()
	key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := sys.Client.Create(testContext(t), key); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the operator publishes the reveal Secret of "+name, func() error {
		if err := sys.Client.Get(testContext(t), client.ObjectKeyFromObject(key), key); err != nil {
			return err
		}
		if key.Status.RevealSecretName == "" {
			return fmt.Errorf("status.revealSecretName is empty")
		}
		return nil
	})
	return key
}

// secretExists reports whether Secret ns/name is still there.
func secretExists(t *testing.T, ns, name string) bool {
	t.Helper()
	err := sys.Client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{})
	if err != nil && !strings.Contains(err.Error(), "not found") {
		t.Fatal(err)
	}
	return err == nil
}

// v1Status is the status of GET /v1/connections with key.
func v1Status(t *testing.T, key string) int {
	t.Helper()
	var status int
	testenv.Eventually(t, 30*time.Second, "GET /v1/connections answers 200", func() error {
		got, _, err := sys.Connections(testContext(t), key)
		if err != nil {
			return err
		}
		status = got
		if got != http.StatusOK {
			return fmt.Errorf("GET /v1/connections: %d", got)
		}
		return nil
	})
	return status
}
