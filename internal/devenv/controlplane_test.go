//go:build !unit

package devenv

import (
	"context"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// A restart on the same state dir keeps the objects, the admin kubeconfig's path, and the
// tokens minted before it: etcd's data, the API server's certificates and the service-account
// issuer are what envtest would make anew each time.
func TestControlPlaneRestartKeepsState(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	stateDir := t.TempDir()
	kubeconfig := stateDir + "/kubeconfig"

	start := func() *controlPlane {
		t.Helper()
		cp := newControlPlane(testenv.AssetsDir(), stateDir)
		if err := cp.start(ctx); err != nil {
			_ = cp.stop()
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cp.stop() })
		if err := cp.writeKubeconfig(kubeconfig); err != nil {
			t.Fatal(err)
		}
		return cp
	}
	// fromKubeconfig is a clientset as a user who exported KUBECONFIG gets one.
	fromKubeconfig := func() kubernetes.Interface {
		t.Helper()
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		return kubernetes.NewForConfigOrDie(cfg)
	}

	first := start()
	kube := fromKubeconfig()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kept", Name: "panel-user"}}
	if _, err := kube.CoreV1().ServiceAccounts("kept").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token, err := kube.CoreV1().ServiceAccounts("kept").CreateToken(ctx, "panel-user", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}

	second := start()
	kube = fromKubeconfig()
	if _, err := kube.CoreV1().Namespaces().Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Fatalf("the namespace created before the restart: %v", err)
	}
	// The token of the first run signs in to the second, as a panel session's would.
	withToken := kubernetes.NewForConfigOrDie(&rest.Config{Host: second.config.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: second.config.CAData}, BearerToken: token.Status.Token})
	review, err := withToken.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token minted before the restart: %v", err)
	}
	if got, want := review.Status.UserInfo.Username, "system:serviceaccount:kept:panel-user"; got != want {
		t.Fatalf("the token signs in as %q, want %q", got, want)
	}
}
