//go:build !unit

package fault

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// keyPattern matches any whole key of any prefix, so the scan also finds keys the tests never
// claimed (an operator that logged a key it generated, say).
var keyPattern = regexp.MustCompile(`[a-z][a-z0-9]{0,15}_live_[0-9A-Za-z]{49}`)

// issued holds the keys the tests claimed, to scan for them by value as well.
var issued = &keySet{}

type keySet struct {
	mu   sync.Mutex
	keys []string
}

func (s *keySet) add(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = append(s.keys, k)
}

func (s *keySet) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...)
}

// scanAfter registers the secret-hygiene scan to run when the test ends, after its processes
// have stopped: no key in any process output, Event, APIKey status or annotation, or hash Secret.
func scanAfter(t *testing.T) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for where, text := range hygieneSources(ctx, t) {
			if m := keyPattern.FindString(text); m != "" {
				t.Errorf("secret hygiene: a key appears in %s", where)
			}
			for _, k := range issued.all() {
				if strings.Contains(text, k) {
					t.Errorf("secret hygiene: an issued key appears in %s", where)
				}
			}
		}
	})
}

// hygieneSources returns every text the scan reads, by where it comes from.
func hygieneSources(ctx context.Context, t *testing.T) map[string]string {
	sources := map[string]string{}
	logs.mu.Lock()
	for name, bufs := range logs.outs {
		for i, b := range bufs {
			sources["output of "+name+" #"+string(rune('0'+i%10))] = b.String()
		}
	}
	logs.mu.Unlock()

	var events eventsv1.EventList
	if err := env.Client.List(ctx, &events); err != nil {
		t.Errorf("listing events: %v", err)
	}
	var coreEvents corev1.EventList
	if err := env.Client.List(ctx, &coreEvents); err != nil {
		t.Errorf("listing core events: %v", err)
	}
	var keys switchboardv1alpha1.APIKeyList
	if err := env.Client.List(ctx, &keys); err != nil {
		t.Errorf("listing APIKeys: %v", err)
	}
	var hashes corev1.SecretList
	if err := env.Client.List(ctx, &hashes, client.InNamespace(systemNamespace)); err != nil {
		t.Errorf("listing hash Secrets: %v", err)
	}
	for what, v := range map[string]any{"Events": events.Items, "core Events": coreEvents.Items} {
		raw, _ := json.Marshal(v)
		sources[what] = string(raw)
	}
	for i := range keys.Items {
		k := &keys.Items[i]
		raw, _ := json.Marshal(struct {
			Annotations map[string]string
			Status      switchboardv1alpha1.APIKeyStatus
		}{k.Annotations, k.Status})
		sources["APIKey "+k.Namespace+"/"+k.Name+" status and annotations"] = string(raw)
	}
	for i := range hashes.Items {
		raw, _ := json.Marshal(hashes.Items[i])
		sources["Secret "+systemNamespace+"/"+hashes.Items[i].Name] = string(raw)
	}
	return sources
}

// TestHygieneScanFindsAKey proves the scan can fail: a key planted in an APIKey annotation is found.
func TestHygieneScanFindsAKey(t *testing.T) {
	ns := env.Namespace(t, "hygiene")
	planted := "sb_live_" + strings.Repeat("A", 49)
	ak := &switchboardv1alpha1.APIKey{}
	ak.Namespace, ak.Name = ns, "planted"
	ak.Annotations = map[string]string{"oops": planted}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := env.Client.Create(ctx, ak); err != nil {
		t.Fatal(err)
	}
	found := false
	for where, text := range hygieneSources(ctx, t) {
		if keyPattern.FindString(text) == planted && strings.Contains(where, "planted") {
			found = true
		}
	}
	if !found {
		t.Fatal("the hygiene scan did not find a key planted in an annotation")
	}
	if err := env.Client.Delete(ctx, ak); err != nil {
		t.Fatal(err)
	}
}
