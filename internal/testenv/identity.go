package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ServiceAccount creates a ServiceAccount in namespace, bound to a Role with rules (no Role
// when there are none), and returns a client configuration that carries an hour's token minted
// for it with the TokenRequest API (envtest runs no token controller): a tenant user as RBAC
// sees one.
func (e *Env) ServiceAccount(t testing.TB, namespace, name string, rules ...rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	objs := []client.Object{&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}}
	if len(rules) > 0 {
		objs = append(objs,
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Rules: rules},
			&rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
			})
	}
	for _, obj := range objs {
		if err := e.Client.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T %s/%s: %v", obj, namespace, name, err)
		}
	}
	clientset, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	token, err := clientset.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("minting a token for %s/%s: %v", namespace, name, err)
	}
	return &rest.Config{Host: e.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: e.Config.CAData}, BearerToken: token.Status.Token}
}

// User returns a client configuration that authenticates as the user name in groups with a
// client certificate, as the API server's own users do: for running a component under the
// identity its admission policies name (group system:masters keeps every RBAC right).
func (e *Env) User(name string, groups ...string) (*rest.Config, error) {
	u, err := e.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: groups}, &rest.Config{QPS: e.Config.QPS, Burst: e.Config.Burst})
	if err != nil {
		return nil, fmt.Errorf("creating user %s: %w", name, err)
	}
	return u.Config(), nil
}
