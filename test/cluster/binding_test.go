//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// testWorkloadBinding is issue 42's check on the released chart: a key bound to the
// ServiceAccount web answers a request carrying a projected token of a pod running as web, made
// by the cluster's own API server, through the Service; the same key is refused with 403
// API_KEY_WRONG_WORKLOAD without a token, with a token of another ServiceAccount's pod or of
// another audience, and once web's pod is gone. It proves the chart grants the server what the
// proofs need (pods' metadata, the issuer's published keys) on a real cluster.
func testWorkloadBinding(t *testing.T) {
	ctx := context.Background()
	const ns = "tenant-bound"
	s.tenantWith(t, ns, "bound", "  binding:\n    mode: Enforce\n    serviceAccounts: [web]")
	key := s.claim(t, ns, "bound")
	s.issued = append(s.issued, key)
	api := s.serviceURL(t, "switchboard-api")

	// Pods that never run (no node matches them): a token is bound to the Pod object, which is
	// all the server looks for.
	podOf := func(sa string) *corev1.Pod {
		if _, err := s.cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod, err := s.cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: sa + "-0"}, Spec: corev1.PodSpec{
			ServiceAccountName: sa, AutomountServiceAccountToken: ptr.To(false),
			NodeSelector: map[string]string{"switchboard.dev/never": "true"},
			Containers:   []corev1.Container{{Name: "app", Image: "registry.invalid/app:never"}},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return pod
	}
	tokenOf := func(pod *corev1.Pod, audience string) string {
		tr, err := s.cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, pod.Spec.ServiceAccountName, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](600),
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	web, other := podOf("web"), podOf("api")
	webToken := tokenOf(web, "switchboard.dev")
	ask := func(token string) apiResponse {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+"/v1/connections", nil)
		if err != nil {
			return apiResponse{err: err}
		}
		req.Header.Set("Authorization", "Bearer "+key)
		if token != "" {
			req.Header.Set("Switchboard-Workload-Token", token)
		}
		resp, err := s.c.HTTPClient().Do(req)
		if err != nil {
			return apiResponse{err: err}
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		return apiResponse{status: resp.StatusCode, body: body, err: err}
	}
	wrongWorkload := func(what string, r apiResponse) error {
		if r.status != http.StatusForbidden || r.errorCode() != "API_KEY_WRONG_WORKLOAD" {
			return fmt.Errorf("%s: %s, want 403 API_KEY_WRONG_WORKLOAD", what, r)
		}
		return nil
	}
	eventually(t, time.Minute, "every server answering web's token", func() error {
		for i := range 6 {
			if r := ask(webToken); r.status != http.StatusOK {
				return fmt.Errorf("request %d with web's token: %s", i+1, r)
			}
		}
		return nil
	})
	for what, token := range map[string]string{
		"no token":                    "",
		"a token of api's pod":        tokenOf(other, "switchboard.dev"),
		"web's token for the cluster": tokenOf(web, "https://kubernetes.default.svc.cluster.local"),
		"something that is no token":  "not.a.token",
	} {
		if err := wrongWorkload(what, ask(token)); err != nil {
			t.Error(err)
		}
	}
	if err := s.cs.CoreV1().Pods(ns).Delete(ctx, web.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "every server refusing the token of web's deleted pod", func() error {
		for i := range 6 {
			if err := wrongWorkload(fmt.Sprintf("request %d with the deleted pod's token", i+1), ask(webToken)); err != nil {
				return err
			}
		}
		return nil
	})
}
