package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"runtime"
	"strconv"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	streamhttp "k8s.io/streaming/pkg/httpstream"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/panel/loopback"
)

// PanelServiceName is the Service of the web panel in the release namespace.
const PanelServiceName = "switchboard-panel"

// panelOptions are the flags of `panel`.
type panelOptions struct {
	*Options
	service string
	address string
	port    int
	open    bool
}

func newPanelCommand(o *Options) *cobra.Command {
	opts := &panelOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "panel",
		Short: "Port-forward to the switchboard web panel and print its local URL",
		Long: "Forward a local port to the switchboard-panel Service (namespace " + switchboardv1alpha1.DefaultSystemNamespace + " unless -n says\n" +
			"otherwise) and print the local URL. Sign in there with a Kubernetes token. Stops on Ctrl-C.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return opts.run(cmd.Context()) },
	}
	f := cmd.Flags()
	f.StringVar(&opts.service, "service", PanelServiceName, "name of the panel Service")
	f.StringVar(&opts.address, "address", "127.0.0.1", "local address to listen on")
	f.IntVar(&opts.port, "port", 0, "local port to listen on (0 picks a free one)")
	f.BoolVar(&opts.open, "open", false, "open the URL in a web browser")
	return cmd
}

func (o *panelOptions) run(ctx context.Context) error {
	if o.port < 0 || o.port > 65535 {
		return fmt.Errorf("--port %d is not a port number", o.port)
	}
	c, _, err := o.connect()
	if err != nil {
		return err
	}
	// The panel lives in the release namespace.
	ns := o.systemNamespace()
	pod, port, err := findPanelPod(ctx, c, ns, o.service)
	if err != nil {
		return err
	}
	return o.forward(ctx, pod, port)
}

// findPanelPod returns a running, ready Pod behind the panel Service and the container port
// its HTTP port targets, as `kubectl port-forward svc/NAME` does.
func findPanelPod(ctx context.Context, c client.Client, ns, name string) (*corev1.Pod, int32, error) {
	var svc corev1.Service
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &svc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, 0, fmt.Errorf("the panel Service %q was not found in namespace %q: is switchboard installed there with the panel enabled? (pass -n for another namespace)", name, ns)
		}
		return nil, 0, explain(err, action{verb: "get", resource: "services", kind: "Service", namespace: ns, name: name})
	}
	svcPort, err := panelPort(&svc)
	if err != nil {
		return nil, 0, err
	}
	if len(svc.Spec.Selector) == 0 {
		return nil, 0, fmt.Errorf("the panel Service %s/%s has no pod selector to forward to", ns, name)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(svc.Spec.Selector)}); err != nil {
		return nil, 0, explain(err, action{verb: "list", resource: "pods", kind: "Pods", namespace: ns})
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !podReady(pod) {
			continue
		}
		port, err := containerPort(pod, svcPort)
		if err != nil {
			return nil, 0, err
		}
		return pod, port, nil
	}
	return nil, 0, fmt.Errorf("no running and ready pod behind the panel Service %s/%s (%d pod%s match its selector): is the switchboard server running with --panel-listen?",
		ns, name, len(pods.Items), map[bool]string{true: "", false: "s"}[len(pods.Items) == 1])
}

// panelPort picks the Service's port named "http" (or "panel"), else its only or first port.
func panelPort(svc *corev1.Service) (corev1.ServicePort, error) {
	if len(svc.Spec.Ports) == 0 {
		return corev1.ServicePort{}, fmt.Errorf("the panel Service %s/%s has no ports", svc.Namespace, svc.Name)
	}
	for _, p := range svc.Spec.Ports {
		if p.Name == "http" || p.Name == "panel" {
			return p, nil
		}
	}
	return svc.Spec.Ports[0], nil
}

// containerPort resolves a Service port's targetPort on a pod: a number is used as it is, a
// name is looked up among the pod's container ports, none means the Service port itself.
func containerPort(pod *corev1.Pod, sp corev1.ServicePort) (int32, error) {
	switch {
	case sp.TargetPort.Type == intstr.Int && sp.TargetPort.IntVal > 0:
		return sp.TargetPort.IntVal, nil
	case sp.TargetPort.Type == intstr.String && sp.TargetPort.StrVal != "":
		for _, ctr := range pod.Spec.Containers {
			for _, p := range ctr.Ports {
				if p.Name == sp.TargetPort.StrVal {
					return p.ContainerPort, nil
				}
			}
		}
		return 0, fmt.Errorf("pod %s/%s has no container port named %q (the panel Service's targetPort)", pod.Namespace, pod.Name, sp.TargetPort.StrVal)
	}
	return sp.Port, nil
}

// podReady reports whether a pod runs and passes its readiness checks.
func podReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// forward port-forwards to the pod until ctx is done, printing the local URL once ready.
func (o *panelOptions) forward(ctx context.Context, pod *corev1.Pod, port int32) error {
	dialer, err := portForwardDialer(o.config, pod)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ready := make(chan struct{})
	ports := []string{fmt.Sprintf("%d:%d", o.port, port)}
	fw, err := portforward.NewOnAddressesForStreamingWithContext(ctx, dialer, []string{o.address}, ports, ready, io.Discard, o.ErrOut)
	if err != nil {
		return fmt.Errorf("setting up the port-forward: %w", err)
	}
	failed := make(chan error, 1)
	go func() { failed <- fw.ForwardPorts() }()
	select {
	case err := <-failed:
		return fmt.Errorf("port-forwarding to pod %s/%s: %s", pod.Namespace, pod.Name, oneLine(errText(err)))
	case <-ready:
	}
	forwarded, err := fw.GetPorts()
	if err != nil {
		return fmt.Errorf("port-forwarding to pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if len(forwarded) == 0 {
		return fmt.Errorf("port-forwarding to pod %s/%s: no local port is listening", pod.Namespace, pod.Name)
	}
	local := hostPort(o.address, forwarded[0].Local)
	// On 127.0.0.1 or localhost the browser would share the panel's cookies with every other
	// local web app: the URL names a host of the panel's own under .localhost instead.
	u := loopback.PrivateURL(local)
	if u == "" {
		u = (&url.URL{Scheme: "http", Host: local, Path: "/"}).String()
	}
	fmt.Fprintf(o.Out, "switchboard panel: %s\n", u)
	fmt.Fprintf(o.ErrOut, "Forwarding %s to pod %s/%s port %d; press Ctrl-C to stop.\n", local, pod.Namespace, pod.Name, port)
	if o.open {
		if err := openBrowser(u); err != nil {
			fmt.Fprintf(o.ErrOut, "Could not open a browser (%v); open the URL yourself.\n", err)
		}
	}
	select {
	case err := <-failed:
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("port-forward to pod %s/%s stopped: %s", pod.Namespace, pod.Name, oneLine(errText(err)))
	case <-ctx.Done():
		return nil
	}
}

// portForwardDialer dials the pod's portforward subresource over WebSockets, falling back to
// SPDY for API servers that do not offer it, as kubectl port-forward does.
func portForwardDialer(config *rest.Config, pod *corev1.Pod) (streamhttp.Dialer, error) {
	transport, upgrader, err := spdy.RoundTripperFor(config)
	if err != nil {
		return nil, fmt.Errorf("setting up the port-forward: %w", err)
	}
	clientset, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("setting up the port-forward: %w", err)
	}
	target := clientset.CoreV1().RESTClient().Post().Namespace(pod.Namespace).Resource("pods").Name(pod.Name).SubResource("portforward").URL()
	spdyDialer := spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: transport}, http.MethodPost, target)
	wsDialer, err := portforward.NewSPDYOverWebsocketDialerForStreaming(target, config)
	if err != nil {
		return spdyDialer, nil //nolint:nilerr // SPDY alone still works
	}
	return portforward.NewFallbackDialerForStreaming(wsDialer, spdyDialer, func(err error) bool {
		return streamhttp.IsUpgradeFailure(err) || streamhttp.IsHTTPSProxyError(err)
	}), nil
}

func errText(err error) string {
	if err == nil {
		return "the connection closed"
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return err.Error()
}

func hostPort(address string, port uint16) string {
	if address == "" || address == "0.0.0.0" || address == "::" {
		address = "127.0.0.1"
	}
	return net.JoinHostPort(address, strconv.Itoa(int(port)))
}

// openBrowser opens u with the desktop's URL opener.
func openBrowser(u string) error {
	// u is the http://sb-….localhost:PORT/ (or ADDRESS:PORT) URL built above, never user text.
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", u) //nolint:gosec // see above
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", u) //nolint:gosec // see above
	default:
		cmd = exec.Command("xdg-open", u) //nolint:gosec // see above
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
