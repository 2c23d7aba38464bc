//go:build !unit

package plugin

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestPanelErrors(t *testing.T) {
	ns := env.Namespace(t, "panel")
	mustFail(t, admin(t, ns, "panel", "-n", ns), `the panel Service "switchboard-panel" was not found in namespace "`+ns+`"`)

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: PanelServiceName},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "switchboard-server"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("panel")}},
		},
	}
	if err := env.Client.Create(testContext(t), svc); err != nil {
		t.Fatal(err)
	}
	mustFail(t, admin(t, ns, "panel", "-n", ns), "no running and ready pod behind the panel Service")
}

// TestPanelForwardFailureIsClear goes as far as envtest allows: it has no kubelet, so the API
// server cannot reach the pod's node; the plugin must say so in one line, not hang.
func TestPanelForwardFailureIsClear(t *testing.T) {
	ns := env.Namespace(t, "panelpod")
	ctx := testContext(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "no-kubelet-"}}
	if err := env.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = 1 // nothing listens there
	if err := env.Client.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "server-0", Labels: map[string]string{"app": "switchboard-server"}},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{
			Name: "server", Image: "switchboard", Ports: []corev1.ContainerPort{{Name: "panel", ContainerPort: 8081}},
		}}},
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: PanelServiceName},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "switchboard-server"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("panel")}},
		},
	}
	if err := env.Client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	r := admin(t, ns, "panel", "-n", ns)
	mustFail(t, r, "port-forwarding to pod "+ns+"/server-0")
	if r.stdout != "" {
		t.Fatalf("printed a URL although nothing is forwarded: %q", r.stdout)
	}
}
