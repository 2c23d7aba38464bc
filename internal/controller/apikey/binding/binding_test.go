package binding

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate/keystatetest"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

const thumb = "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"

// names returns n ServiceAccount names prefix-00 … in order.
func saNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%02d", prefix, i)
	}
	return out
}

// TestResolve: spec.binding and the consumers found become one sorted, bounded record.
func TestResolve(t *testing.T) {
	enforce := func(b switchboardv1alpha1.APIKeyBinding) *switchboardv1alpha1.APIKeyBinding {
		b.Mode = switchboardv1alpha1.BindingEnforce
		return &b
	}
	for _, tc := range []struct {
		name        string
		binding     *switchboardv1alpha1.APIKeyBinding
		bound       *keystate.BoundConsumers
		want        *keysecret.Binding
		dropped     []string
		wantDropped int
	}{
		{name: "no binding: no record", binding: nil, bound: &keystate.BoundConsumers{ServiceAccounts: []string{"web"}}, want: nil},
		{name: "named ServiceAccounts, sorted",
			binding: enforce(switchboardv1alpha1.APIKeyBinding{ServiceAccounts: []string{"web", "api"}}),
			want:    &keysecret.Binding{Mode: switchboardv1alpha1.BindingEnforce, ServiceAccounts: []string{"api", "web"}}},
		{name: "ReportOnly, SPIFFE IDs and public keys copied, sorted",
			binding: &switchboardv1alpha1.APIKeyBinding{Mode: switchboardv1alpha1.BindingReportOnly,
				SPIFFEIDs: []string{"spiffe://c/ns/b/sa/x", "spiffe://c/ns/a/sa/x"}, PublicKeys: []string{thumb}},
			want: &keysecret.Binding{Mode: switchboardv1alpha1.BindingReportOnly,
				SPIFFEIDs: []string{"spiffe://c/ns/a/sa/x", "spiffe://c/ns/b/sa/x"}, PublicKeys: []string{thumb}}},
		{name: "consumers join the named ones, each once",
			binding: enforce(switchboardv1alpha1.APIKeyBinding{Consumers: true, ServiceAccounts: []string{"web"}}),
			bound:   &keystate.BoundConsumers{ServiceAccounts: []string{"batch", "default", "web"}},
			want:    &keysecret.Binding{Mode: switchboardv1alpha1.BindingEnforce, ServiceAccounts: []string{"batch", "default", "web"}}},
		{name: "consumers found but not asked for: not recorded",
			binding: enforce(switchboardv1alpha1.APIKeyBinding{ServiceAccounts: []string{"web"}}),
			bound:   &keystate.BoundConsumers{ServiceAccounts: []string{"batch"}},
			want:    &keysecret.Binding{Mode: switchboardv1alpha1.BindingEnforce, ServiceAccounts: []string{"web"}}},
		{name: "consumers unreadable: the named ones only",
			binding: enforce(switchboardv1alpha1.APIKeyBinding{Consumers: true, ServiceAccounts: []string{"web"}}),
			bound:   &keystate.BoundConsumers{Unreadable: "forbidden to list pods"},
			want:    &keysecret.Binding{Mode: switchboardv1alpha1.BindingEnforce, ServiceAccounts: []string{"web"}}},
		{name: "consumers only, none found: an empty record (Enforce refuses all)",
			binding: enforce(switchboardv1alpha1.APIKeyBinding{Consumers: true}),
			bound:   &keystate.BoundConsumers{},
			want:    &keysecret.Binding{Mode: switchboardv1alpha1.BindingEnforce}},
		{name: "past the bound: the named ones kept, the first consumers sorted fill it",
			binding:     enforce(switchboardv1alpha1.APIKeyBinding{Consumers: true, ServiceAccounts: []string{"zz-named"}}),
			bound:       &keystate.BoundConsumers{ServiceAccounts: saNames("c", 70)},
			want:        &keysecret.Binding{Mode: switchboardv1alpha1.BindingEnforce, ServiceAccounts: append(saNames("c", 63), "zz-named")},
			dropped:     saNames("c", 70)[63:],
			wantDropped: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := keystatetest.Key(1, false)
			key.Spec.Binding = tc.binding
			got, dropped := Resolve(key, tc.bound)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("record %+v, want %+v", got, tc.want)
			}
			if len(dropped) != tc.wantDropped || (tc.dropped != nil && !slices.Equal(dropped, tc.dropped)) {
				t.Fatalf("dropped %v, want %v", dropped, tc.dropped)
			}
			if got != nil && len(got.ServiceAccounts) > keysecret.MaxBoundServiceAccounts {
				t.Fatalf("%d ServiceAccounts recorded, past the bound", len(got.ServiceAccounts))
			}
			if got != nil {
				if _, err := keysecret.ParseBinding(got.Encode()); err != nil {
					t.Fatalf("the record does not parse as the server reads it: %v", err)
				}
			}
		})
	}
}

// bindingState is a delivered key's state (generation 2, its hash Secret found) with binding b,
// its hash Secret holding record have (nil: none), its consumers bound.
func bindingState(b *switchboardv1alpha1.APIKeyBinding, have *keysecret.Binding, bound *keystate.BoundConsumers) *keystate.State {
	return keystatetest.Delivered(func(s *keystate.State) {
		s.Key.Spec.Binding = b
		Set(s.Hash, have)
		s.Bound = bound
	})
}

// TestPolicies: the record is written when, and only when, it is not what spec.binding resolves
// to; and the condition says what it holds.
func TestPolicies(t *testing.T) {
	web := &switchboardv1alpha1.APIKeyBinding{Mode: switchboardv1alpha1.BindingEnforce, ServiceAccounts: []string{"web"}}
	consumers := &switchboardv1alpha1.APIKeyBinding{Mode: switchboardv1alpha1.BindingEnforce, Consumers: true}
	webRecord := &keysecret.Binding{Mode: switchboardv1alpha1.BindingEnforce, ServiceAccounts: []string{"web"}}
	for _, tc := range []struct {
		name    string
		s       *keystate.State
		write   bool
		want    *keysecret.Binding
		reason  string
		healthy bool
	}{
		{name: "no binding, no record: nothing", s: bindingState(nil, nil, nil)},
		{name: "binding removed: the record goes", s: bindingState(nil, webRecord, nil), write: true},
		{name: "binding added: recorded", s: bindingState(web, nil, nil), write: true, want: webRecord, reason: switchboardv1alpha1.ReasonBindingRecorded, healthy: true},
		{name: "recorded already: nothing", s: bindingState(web, webRecord, nil), want: webRecord, reason: switchboardv1alpha1.ReasonBindingRecorded, healthy: true},
		{name: "mode changed: written", s: bindingState(web, &keysecret.Binding{Mode: switchboardv1alpha1.BindingReportOnly, ServiceAccounts: []string{"web"}}, nil),
			write: true, want: webRecord, reason: switchboardv1alpha1.ReasonBindingRecorded, healthy: true},
		{name: "a consumer's pod started: written", s: bindingState(consumers, &keysecret.Binding{Mode: switchboardv1alpha1.BindingEnforce},
			&keystate.BoundConsumers{ServiceAccounts: []string{"web"}, Watched: true}), write: true, want: webRecord, reason: switchboardv1alpha1.ReasonBindingRecorded, healthy: true},
		{name: "the consumer's pod gone: written", s: bindingState(consumers, webRecord, &keystate.BoundConsumers{Watched: true}),
			write: true, want: &keysecret.Binding{Mode: switchboardv1alpha1.BindingEnforce}, reason: switchboardv1alpha1.ReasonBindingRecorded, healthy: true},
		{name: "consumers unreadable: the named ones, and the condition says why",
			s: bindingState(&switchboardv1alpha1.APIKeyBinding{Mode: switchboardv1alpha1.BindingEnforce, Consumers: true, ServiceAccounts: []string{"web"}}, webRecord,
				&keystate.BoundConsumers{Unreadable: "forbidden to list pods"}), want: webRecord, reason: switchboardv1alpha1.ReasonConsumersNotReadable},
		{name: "too many consumers: bounded, and the condition says so",
			s:     bindingState(consumers, nil, &keystate.BoundConsumers{ServiceAccounts: saNames("c", 70)}),
			write: true, want: &keysecret.Binding{Mode: switchboardv1alpha1.BindingEnforce, ServiceAccounts: saNames("c", 64)}, reason: switchboardv1alpha1.ReasonBindingBounded},
		{name: "no hash Secret found: nothing written (the issue writes it)", s: keystatetest.Delivered(func(s *keystate.State) {
			s.Key.Spec.Binding, s.Hash = web, nil
		}), want: webRecord, reason: switchboardv1alpha1.ReasonBindingRecorded, healthy: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := keystate.Observe(tc.s, keystate.Params{RevealTTL: keystatetest.TTL}, Observe)
			d := Policies.Evaluate(keystate.Input{S: tc.s, Obs: obs})
			r, isRecord := d.Do.(record)
			if isRecord != tc.write {
				t.Fatalf("decided %q (%T), want a write: %t", d.Policy, d.Do, tc.write)
			}
			if isRecord && !reflect.DeepEqual(r.want, tc.want) {
				t.Fatalf("writes %+v, want %+v", r.want, tc.want)
			}
			if !reflect.DeepEqual(obs.Binding.Want, tc.want) {
				t.Fatalf("wants %+v, want %+v", obs.Binding.Want, tc.want)
			}
			if obs.Binding.Reason != tc.reason || obs.Binding.Healthy != tc.healthy {
				t.Fatalf("condition %s (healthy %t): %s; want %s (healthy %t)", obs.Binding.Reason, obs.Binding.Healthy, obs.Binding.Message, tc.reason, tc.healthy)
			}
			if isRecord {
				// What the action writes is what the next observation finds recorded.
				Set(tc.s.Hash, r.want)
				if again := keystate.Observe(tc.s, keystate.Params{}, Observe); !again.Binding.Recorded {
					t.Fatal("after the write the record is still not what spec.binding resolves to")
				}
			}
		})
	}
}

// TestCondition: WorkloadBinding is absent without spec.binding, Pending until the record is
// written, then what the finding says; a bounded record names what it left out.
func TestCondition(t *testing.T) {
	s := bindingState(&switchboardv1alpha1.APIKeyBinding{Mode: switchboardv1alpha1.BindingEnforce, Consumers: true}, nil,
		&keystate.BoundConsumers{ServiceAccounts: saNames("c", 70)})
	obs := keystate.Observe(s, keystate.Params{}, Observe)
	key := s.Key
	cond := func() metav1.Condition {
		for _, c := range key.Status.Conditions {
			if c.Type == switchboardv1alpha1.ConditionWorkloadBinding {
				return c
			}
		}
		return metav1.Condition{}
	}
	SetCondition(key, &obs.Binding, false)
	if c := cond(); c.Reason != switchboardv1alpha1.ReasonBindingPending || c.Status != metav1.ConditionFalse {
		t.Fatalf("before the write: %+v", c)
	}
	SetCondition(key, &obs.Binding, true)
	c := cond()
	if c.Reason != switchboardv1alpha1.ReasonBindingBounded || c.Status != metav1.ConditionFalse ||
		!strings.Contains(c.Message, "records 64 of 70 ServiceAccounts") || !strings.Contains(c.Message, "c-64, c-65") {
		t.Fatalf("bounded: %+v", c)
	}
	key.Spec.Binding = nil
	SetCondition(key, &obs.Binding, true)
	if c := cond(); c.Type != "" {
		t.Fatalf("without spec.binding: %+v", c)
	}
}
