package devenv

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/local/devenv/crds"
)

// DemoNamespace is where dev seeds its demo Connections and APIKey.
const DemoNamespace = "demo"

// DemoAPIKeyName is the seeded APIKey.
const DemoAPIKeyName = "demo"

// DemoPanelUser is the ServiceAccount whose token signs in to the panel in dev: it may manage
// the APIKeys of the demo namespace and nothing else, as a tenant would.
const DemoPanelUser = "demo-admin"

// installCRDs installs (or updates) the CRDs embedded in the binary and waits until they serve.
func installCRDs(cfg *rest.Config) error {
	var list []*apiextensionsv1.CustomResourceDefinition
	err := fs.WalkDir(crds.Bases, "bases", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := crds.Bases.ReadFile(path)
		if err != nil {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			return fmt.Errorf("decoding embedded CRD %s: %w", path, err)
		}
		list = append(list, crd)
		return nil
	})
	if err != nil {
		return err
	}
	if len(list) == 0 {
		return errors.New("no CRDs are embedded in this binary: run `make manifests` and rebuild")
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: list, MaxTime: time.Minute}); err != nil {
		return fmt.Errorf("installing the CRDs: %w", err)
	}
	return nil
}

func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// demoObjects are the seeded objects. They are created once; a restart leaves them (and any
// edits made to them) alone.
func demoObjects() []client.Object {
	labels := map[string]string{"switchboard.dev/seeded-by": "switchboard-dev"}
	return []client.Object{
		&switchboardv1alpha1.Connection{
			ObjectMeta: metav1.ObjectMeta{Namespace: DemoNamespace, Name: "warehouse", Labels: labels},
			Spec: switchboardv1alpha1.ConnectionSpec{
				DisplayName: "Warehouse", Provider: "postgres",
				Metadata: map[string]switchboardv1alpha1.MetadataValue{"region": "eu-west-1"},
			},
		},
		&switchboardv1alpha1.Connection{
			ObjectMeta: metav1.ObjectMeta{Namespace: DemoNamespace, Name: "crm", Labels: labels},
			Spec:       switchboardv1alpha1.ConnectionSpec{DisplayName: "CRM", Provider: "salesforce"},
		},
		&switchboardv1alpha1.APIKey{
			ObjectMeta: metav1.ObjectMeta{Namespace: DemoNamespace, Name: DemoAPIKeyName, Labels: labels},
			Spec:       switchboardv1alpha1.APIKeySpec{Description: "seeded by switchboard dev"},
		},
	}
}

// panelUserObjects let DemoPanelUser do in the demo namespace what the panel offers. There is
// no controller-manager here to aggregate CRD rights into the built-in "edit" role, so the Role
// spells them out.
func panelUserObjects() []client.Object {
	labels := map[string]string{"switchboard.dev/seeded-by": "switchboard-dev"}
	meta := metav1.ObjectMeta{Namespace: DemoNamespace, Name: DemoPanelUser, Labels: labels}
	return []client.Object{
		&corev1.ServiceAccount{ObjectMeta: meta},
		&rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{switchboardv1alpha1.GroupVersion.Group}, Resources: []string{"apikeys"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{switchboardv1alpha1.GroupVersion.Group}, Resources: []string{"connections"}, Verbs: []string{"get", "list", "watch"}},
			// Claiming a one-time reveal reads and deletes its Secret.
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "delete"}},
		}},
		&rbacv1.RoleBinding{
			ObjectMeta: meta,
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: DemoPanelUser},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: DemoNamespace, Name: DemoPanelUser}},
		},
	}
}

func seed(ctx context.Context, c client.Client, sso bool) error {
	if err := ensureNamespace(ctx, c, DemoNamespace); err != nil {
		return err
	}
	objs := append(demoObjects(), panelUserObjects()...)
	if sso {
		objs = append(objs, ssoUserObjects()...)
	}
	for _, obj := range objs {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("seeding %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return nil
}

// demoKey is what dev can tell about the demo key: the key itself when this run claimed it, or
// only its hint when an earlier run did.
type demoKey struct {
	key  string
	hint string
}

// claimDemoKey waits until the operator has issued the demo key, then claims it. A key that an
// earlier run already claimed is reported by hint only: the plaintext is gone for good.
func claimDemoKey(ctx context.Context, c client.Client) (demoKey, error) {
	var out demoKey
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		var key switchboardv1alpha1.APIKey
		if err := c.Get(ctx, types.NamespacedName{Namespace: DemoNamespace, Name: DemoAPIKeyName}, &key); err != nil {
			lastErr = err
			return false, nil //nolint:nilerr // not there yet: keep polling, report it on timeout
		}
		if key.Status.KeyGeneration == 0 {
			lastErr = errors.New("the operator has not issued the demo key yet")
			return false, nil
		}
		out.hint = key.Status.KeyHint
		revealed, err := keyclient.Claim(ctx, c, &key)
		switch {
		case err == nil:
			out.key, out.hint = revealed.Key, revealed.Hint
			return true, nil
		case errors.Is(err, keyclient.ErrNotPublished), errors.Is(err, keyclient.ErrAlreadyClaimed):
			return true, nil
		default:
			lastErr = err
			return false, nil //nolint:nilerr // a transient failure: keep polling, report it on timeout
		}
	})
	if err != nil {
		if lastErr != nil && !errors.Is(err, lastErr) {
			return out, fmt.Errorf("claiming the demo key %s/%s: %w (last: %w)", DemoNamespace, DemoAPIKeyName, err, lastErr)
		}
		return out, fmt.Errorf("claiming the demo key %s/%s: %w", DemoNamespace, DemoAPIKeyName, err)
	}
	return out, nil
}
