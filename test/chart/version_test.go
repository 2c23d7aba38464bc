//go:build !unit

package chart

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/switchboard-dev/switchboard/internal/operator"
	"github.com/switchboard-dev/switchboard/internal/scheme"
	"github.com/switchboard-dev/switchboard/internal/version"
)

// versionReader is the rendering's Role that lets system:authenticated read the version
// ConfigMap, and its RoleBinding; the test fails when there is none.
func versionReader(t *testing.T, source string, objs []*unstructured.Unstructured) (*rbacv1.Role, *rbacv1.RoleBinding) {
	t.Helper()
	var role *rbacv1.Role
	for _, o := range objs {
		if o.GetKind() != "Role" {
			continue
		}
		r := &rbacv1.Role{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, r); err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(r.Rules, func(p rbacv1.PolicyRule) bool { return slices.Contains(p.ResourceNames, version.ConfigMap) }) &&
			!slices.ContainsFunc(r.Rules, func(p rbacv1.PolicyRule) bool { return slices.Contains(p.Resources, "leases") }) {
			role = r
		}
	}
	if role == nil {
		t.Fatalf("%s: no Role grants the version ConfigMap %s", source, version.ConfigMap)
	}
	for _, o := range objs {
		if o.GetKind() != "RoleBinding" {
			continue
		}
		b := &rbacv1.RoleBinding{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, b); err != nil {
			t.Fatal(err)
		}
		if b.RoleRef.Kind == "Role" && b.RoleRef.Name == role.Name {
			return role, b
		}
	}
	t.Fatalf("%s: nothing binds Role %s", source, role.Name)
	return nil, nil
}

// TestVersionReadableByEveryoneSignedIn applies each rendering's version reader Role and
// RoleBinding, as rendered, in a namespace of the real API server; the operator, with the rules
// its rendered Role gives it there, publishes its version; then a user with no rights of its
// own may get that one ConfigMap and do nothing else in the namespace.
func TestVersionReadableByEveryoneSignedIn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for source, objs := range renderings(t) {
		t.Run(strings.ReplaceAll(source, "/", "-"), func(t *testing.T) {
			role, binding := versionReader(t, source, objs)
			if want := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:authenticated"}}; !slices.Equal(binding.Subjects, want) {
				t.Errorf("%s binds %v, want %v", binding.Name, binding.Subjects, want)
			}
			ns := env.Namespace(t, "version")
			for _, o := range []client.Object{role, binding} {
				o.SetNamespace(ns)
				o.SetResourceVersion("")
				if err := env.Client.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
			}

			var operatorRules []rbacv1.PolicyRule
			for name, r := range rolesOf(t, objs, "Role") {
				if name != "switchboard-webhooks" && slices.ContainsFunc(r.Rules, func(p rbacv1.PolicyRule) bool { return slices.Contains(p.Resources, "leases") }) {
					operatorRules = r.Rules
				}
			}
			asOperator, err := client.New(env.ServiceAccount(t, ns, "operator", operatorRules...), client.Options{Scheme: scheme.Scheme})
			if err != nil {
				t.Fatal(err)
			}
			info := version.Info{Version: "v0.3.0", Commit: "0123abc", GoVersion: "go1.26.0", Platform: "linux/amd64"}
			if err := operator.PublishVersion(ctx, asOperator, asOperator, ns, info); err != nil {
				t.Fatalf("the operator, with its rendered Role: %v", err)
			}
			info.Version = "v0.4.0"
			if err := operator.PublishVersion(ctx, asOperator, asOperator, ns, info); err != nil {
				t.Fatalf("the operator, upgraded, with its rendered Role: %v", err)
			}

			other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}}
			if err := env.Client.Create(ctx, other); err != nil {
				t.Fatal(err)
			}
			nobody, err := client.New(env.ServiceAccount(t, env.Namespace(t, "nobody"), "nobody"), client.Options{Scheme: scheme.Scheme})
			if err != nil {
				t.Fatal(err)
			}
			var cm corev1.ConfigMap
			if err := nobody.Get(ctx, client.ObjectKey{Namespace: ns, Name: version.ConfigMap}, &cm); err != nil {
				t.Fatalf("a user with no rights of its own cannot read the version: %v", err)
			}
			if got, ok := version.FromData(cm.Data); !ok || got != info {
				t.Errorf("the version ConfigMap says %v, want %+v", cm.Data, info)
			}
			denied := map[string]error{
				"get another ConfigMap":   nobody.Get(ctx, client.ObjectKeyFromObject(other), &corev1.ConfigMap{}),
				"list ConfigMaps":         nobody.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns)),
				"update the version":      nobody.Update(ctx, &cm),
				"delete the version":      nobody.Delete(ctx, &cm),
				"list Secrets":            nobody.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)),
				"create a ConfigMap here": nobody.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine"}}),
			}
			for what, err := range denied {
				if !apierrors.IsForbidden(err) {
					t.Errorf("a user with no rights of its own may %s: %v", what, err)
				}
			}
		})
	}
}
