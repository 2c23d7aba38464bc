//go:build cluster

package cluster

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// saveLogs keeps the current pods' logs for testNoLeaks, before an upgrade replaces the pods.
func (s *suite) saveLogs(t *testing.T) {
	t.Helper()
	list := &corev1.PodList{}
	if err := s.k8s.List(context.Background(), list, client.InNamespace(systemNamespace)); err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		s.logs = append(s.logs, s.kubectl(t, "logs", "-n", systemNamespace, p.Name))
	}
}

// testNoLeaks looks for every key the suite was given in the logs of every operator and
// server pod it ran, in every Event and in every APIKey.
func testNoLeaks(t *testing.T) {
	s.saveLogs(t)
	places := map[string]string{
		"pod logs":               strings.Join(s.logs, "\n"),
		"Events (core/v1)":       s.kubectl(t, "get", "events", "-A", "-o", "json"),
		"Events (events.k8s.io)": s.kubectl(t, "get", "events.v1.events.k8s.io", "-A", "-o", "json"),
		"APIKeys":                s.kubectl(t, "get", "apikeys", "-A", "-o", "json"),
	}
	if !strings.Contains(places["pod logs"], "Starting workers") && !strings.Contains(places["pod logs"], "starting") {
		t.Fatalf("the pod logs look empty; are they the real logs?\n%.500s", places["pod logs"])
	}
	if len(s.issued) == 0 {
		t.Fatal("no key was issued to look for")
	}
	for where, text := range places {
		for _, key := range s.issued {
			if strings.Contains(text, key) || strings.Contains(text, key[len(key)-20:]) {
				t.Errorf("an issued key (hint %s…) appears in %s", key[:12], where)
			}
		}
	}
}
