package apikey

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// policyState is generation 2 of an APIKey, revealed and pending (as TestPlan's), changed by f.
func policyState(f func(s *keyState)) *keyState {
	key := planKeyObj(2, true)
	s := &keyState{key: key, now: planNow, hash: planHash(key, 2, true), reveal: keysecret.NewReveal(key, 2, "k2")}
	s.reveals = []*corev1.Secret{s.reveal}
	if f != nil {
		f(s)
	}
	return s
}

// deliveredPolicyState is generation 2 delivered into app-key and held there, changed by f.
func deliveredPolicyState(f func(s *keyState)) *keyState {
	return policyState(func(s *keyState) {
		s.key.Spec.SecretName = "app-key"
		s.key.Status.RevealSecretName = ""
		s.hash = planHash(s.key, 2, false)
		s.reveal, s.reveals = nil, nil
		s.delivery = keysecret.NewDelivery(s.key, 2, "k2")
		if f != nil {
			f(s)
		}
	})
}

// reportLeak gives s a LeakReport of the hash its hash Secret holds under data key k.
func reportLeak(s *keyState, k string) {
	sum := string(s.hash.Data[k])
	s.leaks = map[string]*switchboardv1alpha1.LeakReport{sum: {Spec: switchboardv1alpha1.LeakReportSpec{KeyHash: sum}}}
}

// policyCase is one input of one policy and what it should decide: nothing (decided false),
// or an action by its type's name ("none": decided, nothing to do).
type policyCase struct {
	name    string
	s       *keyState
	decided bool
	do      string
}

// TestPolicies: a table for each policy of the chain, each policy alone: when it decides, with
// which action, and when it leaves the decision to the policies after it.
func TestPolicies(t *testing.T) {
	p := planParams{revealTTL: planTTL, expiryWarning: 7 * 24 * time.Hour, unusedAfter: 90 * 24 * time.Hour}
	past := metav1.NewTime(planNow.Add(-time.Minute))
	day := 24 * time.Hour
	tables := map[string][]policyCase{
		"OrphanHashes": {
			{"an orphan", policyState(func(s *keyState) { s.orphans = []*corev1.Secret{{}} }), true, "deleteOrphans"},
			{"none", policyState(nil), false, ""},
		},
		"APIKeyGone": {
			{"gone", &keyState{now: planNow}, true, "none"},
			{"there", policyState(nil), false, ""},
		},
		"BeingDeleted": {
			{"with the finalizer", policyState(func(s *keyState) { s.key.DeletionTimestamp = &past }), true, "cleanUp"},
			{"without it", policyState(func(s *keyState) { s.key.DeletionTimestamp = &past; s.key.Finalizers = nil }), true, "none"},
			{"not deleted", policyState(nil), false, ""},
		},
		"NoFinalizer": {
			{"none", policyState(func(s *keyState) { s.key.Finalizers = nil }), true, "addFinalizer"},
			{"there", policyState(nil), false, ""},
		},
		"Revoked": {
			{"spec.revoked with a hash", policyState(func(s *keyState) { s.key.Spec.Revoked = true }), true, "revoke"},
			{"spec.revoked, settled", policyState(func(s *keyState) {
				s.key.Spec.Revoked = true
				s.hash, s.reveal, s.reveals, s.key.Status.RevealSecretName = nil, nil, nil, ""
			}), true, "none"},
			{"the record's revocation keeps the hash", policyState(func(s *keyState) {
				keysecret.SetRevoked(s.hash, past.Time, switchboardv1alpha1.ReasonUnusedRevoked)
				s.reveal, s.reveals, s.key.Status.RevealSecretName = nil, nil, ""
			}), true, "none"},
			{"a status saying revoked", policyState(func(s *keyState) { s.key.Status.RevokedAt = &past }), false, ""},
		},
		"Leaked": {
			{"the current key reported", policyState(func(s *keyState) { reportLeak(s, keysecret.DataHash) }), true, "refuseLeaked"},
			{"the current key of an expired APIKey reported", policyState(func(s *keyState) {
				reportLeak(s, keysecret.DataHash)
				s.key.Spec.ExpiresAt = &past
			}), true, "refuseLeaked"},
			{"the previous key, in grace, reported", policyState(func(s *keyState) {
				keysecret.SetCurrent(s.hash, s.key, 3, apikey.Sum("k3"), planNow.Add(time.Hour))
				reportLeak(s, keysecret.DataPreviousHash)
			}), true, "refuseLeaked"},
			{"refused, its replacement not issued", policyState(func(s *keyState) {
				keysecret.SetLeaked(s.hash, keysecret.Leak{Hash: string(s.hash.Data[keysecret.DataHash]), Generation: 2})
			}), true, "refuseLeaked"},
			{"refused, its replacement held back", policyState(func(s *keyState) {
				keysecret.SetLeaked(s.hash, keysecret.Leak{Hash: string(s.hash.Data[keysecret.DataHash]), Generation: 2, ReplaceAfter: planNow.Add(time.Second)})
			}), false, ""},
			{"refused, its replacement held back until now", policyState(func(s *keyState) {
				keysecret.SetLeaked(s.hash, keysecret.Leak{Hash: string(s.hash.Data[keysecret.DataHash]), Generation: 2, ReplaceAfter: planNow})
			}), true, "refuseLeaked"},
			{"refused and replaced, the report seen again", policyState(func(s *keyState) {
				reportLeak(s, keysecret.DataHash)
				keysecret.SetLeaked(s.hash, keysecret.Leak{Hash: string(s.hash.Data[keysecret.DataHash]), Generation: 2})
				keysecret.SetCurrent(s.hash, s.key, 3, apikey.Sum("k3"), time.Time{})
			}), false, ""},
			{"a report of another hash", policyState(func(s *keyState) {
				s.leaks = map[string]*switchboardv1alpha1.LeakReport{apikey.Sum("other").String(): {}}
			}), false, ""},
			{"no report", policyState(nil), false, ""},
			{"replaced with an overlap, the leaked key still accepted", deliveredPolicyState(func(s *keyState) {
				leaked := string(s.hash.Data[keysecret.DataHash])
				keysecret.SetLeaked(s.hash, keysecret.Leak{Hash: leaked, Generation: 2, AcceptedUntil: planNow.Add(time.Minute)})
				keysecret.SetCurrent(s.hash, s.key, 3, apikey.Sum("k3"), planNow.Add(time.Minute))
				reportLeak(s, keysecret.DataPreviousHash)
			}), false, ""},
			{"replaced with an overlap that ended", deliveredPolicyState(func(s *keyState) {
				leaked := string(s.hash.Data[keysecret.DataHash])
				keysecret.SetLeaked(s.hash, keysecret.Leak{Hash: leaked, Generation: 2, AcceptedUntil: planNow})
				keysecret.SetCurrent(s.hash, s.key, 3, apikey.Sum("k3"), planNow)
				reportLeak(s, keysecret.DataPreviousHash)
			}), true, "refuseLeaked"},
		},
		"LeakRollout": {
			{"replaced, its rollout pending", deliveredPolicyState(func(s *keyState) {
				keysecret.SetLeaked(s.hash, keysecret.Leak{Hash: apikey.Sum("k1").String(), Generation: 1, Rollout: keysecret.RolloutPending})
			}), true, "rollLeaked"},
			{"not replaced yet", deliveredPolicyState(func(s *keyState) {
				keysecret.SetLeaked(s.hash, keysecret.Leak{Hash: string(s.hash.Data[keysecret.DataHash]), Generation: 2, Rollout: keysecret.RolloutPending})
			}), false, ""},
			{"rolled already", deliveredPolicyState(func(s *keyState) {
				keysecret.SetLeaked(s.hash, keysecret.Leak{Hash: apikey.Sum("k1").String(), Generation: 1, Rollout: "1 workload rolled (Deployment/web)"})
			}), false, ""},
			{"a leak recorded before rollouts were", deliveredPolicyState(func(s *keyState) {
				keysecret.SetLeaked(s.hash, keysecret.Leak{Hash: apikey.Sum("k1").String(), Generation: 1})
			}), false, ""},
			{"no longer delivered", deliveredPolicyState(func(s *keyState) {
				keysecret.SetLeaked(s.hash, keysecret.Leak{Hash: apikey.Sum("k1").String(), Generation: 1, Rollout: keysecret.RolloutPending})
				s.key.Spec.SecretName = "elsewhere"
			}), false, ""},
			{"expired", deliveredPolicyState(func(s *keyState) {
				keysecret.SetLeaked(s.hash, keysecret.Leak{Hash: apikey.Sum("k1").String(), Generation: 1, Rollout: keysecret.RolloutPending})
				s.key.Spec.ExpiresAt = &past
			}), false, ""},
			{"no leak", deliveredPolicyState(nil), false, ""},
		},
		"StatusBehindRecord": {
			{"a forged hint", policyState(func(s *keyState) { s.key.Status.KeyHint = "other" }), true, "publish"},
			{"in line", policyState(nil), false, ""},
		},
		"KeyToIssue": {
			{"a first key", &keyState{key: planKeyObj(0, false), now: planNow}, true, "issue"},
			{"a rotation", policyState(func(s *keyState) { s.key.Spec.Rotation.RequestedAt = "r9" }), true, "issue"},
			{"a rotation of an expired key", policyState(func(s *keyState) { s.key.Spec.Rotation.RequestedAt = "r9"; s.key.Spec.ExpiresAt = &past }), false, ""},
			{"nothing asked", policyState(nil), false, ""},
		},
		"ExpiredBeforeFirstKey": {
			{"expired, no key", &keyState{key: func() *switchboardv1alpha1.APIKey {
				k := planKeyObj(0, false)
				k.Spec.ExpiresAt = &past
				return k
			}(), now: planNow}, true, "none"},
			{"a first key to issue", &keyState{key: planKeyObj(0, false), now: planNow}, false, ""},
		},
		"TemplateNotApplied": {
			{"not applied", deliveredPolicyState(func(s *keyState) {
				s.key.Spec.SecretTemplate = &switchboardv1alpha1.APIKeySecretTemplate{Labels: map[string]string{"app": "x"}}
			}), true, "applyTemplate"},
			{"applied", deliveredPolicyState(nil), false, ""},
			{"revealed, not delivered", policyState(nil), false, ""},
		},
		"DeliveryUnconfirmed": {
			{"not in the cache", deliveredPolicyState(func(s *keyState) { s.delivery = nil }), true, "checkDelivery"},
			{"confirmed gone", deliveredPolicyState(func(s *keyState) { s.delivery, s.confirmed.delivery = nil, true }), false, ""},
			{"held", deliveredPolicyState(nil), false, ""},
		},
		"DeliveryLost": {
			{"gone", deliveredPolicyState(func(s *keyState) { s.delivery, s.confirmed.delivery = nil, true }), true, "issue"},
			{"someone else's Secret", deliveredPolicyState(func(s *keyState) {
				s.delivery = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-key"}}
			}), false, ""},
			{"held", deliveredPolicyState(nil), false, ""},
		},
		"UnusedTooLong": {
			{"unused past revokeWhenUnusedFor", policyState(func(s *keyState) {
				s.key.Spec.RevokeWhenUnusedFor = &metav1.Duration{Duration: 45 * day}
				s.key.CreationTimestamp = metav1.NewTime(planNow.Add(-46 * day))
			}), true, "revokeUnused"},
			{"used since", policyState(func(s *keyState) {
				s.key.Spec.RevokeWhenUnusedFor = &metav1.Duration{Duration: 45 * day}
				s.key.CreationTimestamp = metav1.NewTime(planNow.Add(-46 * day))
				s.key.Status.LastUsedAt = &past
			}), false, ""},
			{"no hash to record it in", policyState(func(s *keyState) {
				s.key.Spec.RevokeWhenUnusedFor = &metav1.Duration{Duration: 45 * day}
				s.key.CreationTimestamp = metav1.NewTime(planNow.Add(-46 * day))
				s.hash = nil
			}), false, ""},
		},
		"LifetimeNotRecorded": {
			{"a lifetime set after the issue", policyState(func(s *keyState) { s.key.Spec.Lifetime = &metav1.Duration{Duration: 30 * day} }), true, "recordLife"},
			{"none, none recorded", policyState(nil), false, ""},
		},
		"RenewalDue": {
			{"due", func() *keyState {
				s := deliveredPolicyState(func(s *keyState) {
					s.key.Spec.Lifetime, s.key.Spec.RenewBefore = &metav1.Duration{Duration: 30 * day}, &metav1.Duration{Duration: 7 * day}
				})
				keysecret.SetIssued(s.hash, keysecret.Issued{Hint: "h2", RotationHandled: "r1", Delivery: "app-key", IssuedAt: planNow.Add(-25 * day), NotAfter: planNow.Add(5 * day)})
				return s
			}(), true, "issue"},
			{"not yet", func() *keyState {
				s := deliveredPolicyState(func(s *keyState) {
					s.key.Spec.Lifetime, s.key.Spec.RenewBefore = &metav1.Duration{Duration: 30 * day}, &metav1.Duration{Duration: 7 * day}
				})
				keysecret.SetIssued(s.hash, keysecret.Issued{Hint: "h2", RotationHandled: "r1", Delivery: "app-key", IssuedAt: planNow.Add(-day), NotAfter: planNow.Add(29 * day)})
				return s
			}(), false, ""},
		},
		"HashUnconfirmed": {
			{"none in the cache", policyState(func(s *keyState) { s.hash = nil }), true, "checkHash"},
			{"confirmed gone", policyState(func(s *keyState) { s.hash, s.confirmed.hash = nil, true }), false, ""},
			{"there", policyState(nil), false, ""},
		},
		"HashBehindStatus": {
			{"behind, confirmed", policyState(func(s *keyState) {
				s.hash, s.confirmed.hash = keysecret.NewHash(s.key, "system", 1, apikey.Sum("h1")), true
			}), true, "none"},
			{"in line", policyState(nil), false, ""},
		},
		"RecordIncomplete": {
			{"an older switchboard's hash", policyState(func(s *keyState) { s.hash = keysecret.NewHash(s.key, "system", 2, apikey.Sum("h2")) }), true, "completeRecord"},
			{"complete", policyState(nil), false, ""},
		},
		"GraceEndsOnEvidence": {
			{"the old key unused for the quiet period, not delivered", graceState(false, nil), true, "dropPrevious"},
			{"the old key used within it", graceState(false, func(s *keyState) { usedAt(s, 1, time.Minute) }), false, ""},
			{"delivered, a pod holds the old key", graceState(true, func(s *keyState) { s.consumers = &consumerState{holders: []string{"api-1 (deployment/api)"}} }), false, ""},
			{"delivered, workloads not readable", graceState(true, func(s *keyState) { s.consumers = &consumerState{unreadable: "forbidden"} }), false, ""},
			{"delivered, every pod restarted", graceState(true, func(s *keyState) { s.consumers = &consumerState{} }), true, "dropPrevious"},
			{"not asked for", graceState(false, func(s *keyState) { s.key.Spec.GraceEndsWhenUnusedFor = nil }), false, ""},
		},
		"GraceEnded": {
			{"ended", policyState(func(s *keyState) {
				s.hash.Data[keysecret.DataPreviousHash] = []byte(apikey.Sum("h1").String())
				s.hash.Data[keysecret.DataPreviousValidUntil] = []byte(planNow.Add(-time.Second).Format(time.RFC3339))
			}), true, "dropPrevious"},
			{"running", policyState(func(s *keyState) {
				s.hash.Data[keysecret.DataPreviousHash] = []byte(apikey.Sum("h1").String())
				s.hash.Data[keysecret.DataPreviousValidUntil] = []byte(planNow.Add(time.Minute).Format(time.RFC3339))
			}), false, ""},
		},
		"RevealDeadlinePassed": {
			{"passed", policyState(func(s *keyState) { s.now = planNow.Add(time.Hour) }), true, "expireReveal"},
			{"a forged later deadline in the status", policyState(func(s *keyState) {
				s.now = planNow.Add(time.Hour)
				future := metav1.NewTime(planNow.Add(48 * time.Hour))
				s.key.Status.RevealExpiresAt = &future
			}), true, "expireReveal"},
			{"pending", policyState(nil), false, ""},
		},
		"RevealUnconfirmed": {
			{"not in the cache", policyState(func(s *keyState) { s.reveal, s.reveals = nil, nil }), true, "checkReveal"},
			{"confirmed gone", policyState(func(s *keyState) { s.reveal, s.reveals, s.confirmed.reveal = nil, nil, true }), false, ""},
			{"there", policyState(nil), false, ""},
		},
		"OldReveals": {
			{"an older generation's", policyState(func(s *keyState) { s.reveals = append(s.reveals, keysecret.NewReveal(s.key, 1, "k1")) }), true, "sweep"},
			{"only the current one", policyState(nil), false, ""},
		},
	}
	for _, pol := range apiKeyPolicies {
		cases, ok := tables[pol.name]
		if !ok {
			t.Errorf("policy %s has no table", pol.name)
			continue
		}
		delete(tables, pol.name)
		for _, tc := range cases {
			t.Run(pol.name+"/"+tc.name, func(t *testing.T) {
				in := input{s: tc.s, obs: observeFacts(tc.s, p), p: p}
				if tc.s.key == nil && pol.name != "OrphanHashes" && pol.name != "APIKeyGone" {
					t.Skip("policies after APIKeyGone see an APIKey")
				}
				d, decided := pol.decide(in)
				got := "none"
				if d.do != nil {
					got = reflect.TypeOf(d.do).Name()
				}
				if decided != tc.decided || decided && got != tc.do {
					t.Fatalf("%s decided %t (%s: %s); want %t (%s)", pol.name, decided, got, d.why+d.problem, tc.decided, tc.do)
				}
			})
		}
	}
	for name := range tables {
		t.Errorf("a table for %s, which is no policy of the chain", name)
	}
}

// TestFindingsOf: the status reports the observation, with what the action found in its place.
func TestFindingsOf(t *testing.T) {
	at := planNow.Add(-time.Hour)
	observed := &observation{hash: hashFound, conflict: "someone else's", reveal: switchboardv1alpha1.ReasonRevealClaimed, life: life{known: true}}
	tests := []struct {
		name string
		obs  *observation
		d    decision
		out  outcome
		want keyFindings
	}{
		{"nothing done: the observation", observed, decision{}, outcome{},
			keyFindings{hash: hashFound, conflict: "someone else's", reveal: switchboardv1alpha1.ReasonRevealClaimed, life: life{known: true}}},
		{"an issue: its own conflict and reveal, no observed hash", observed, decision{do: issue{}}, outcome{issuing: 3, issued: true, published: true, reveal: switchboardv1alpha1.ReasonDelivered},
			keyFindings{issuing: 3, issued: true, reveal: switchboardv1alpha1.ReasonDelivered, life: life{known: true}}},
		{"a renewal says so", observed, decision{do: issue{renewal: true}}, outcome{issuing: 3, conflict: "taken"},
			keyFindings{issuing: 3, conflict: "taken", reveal: switchboardv1alpha1.ReasonRevealClaimed, life: life{known: true, renewal: true}}},
		{"a publication found the hash", &observation{hash: hashUnknown}, decision{do: publish{}}, outcome{published: true, hashFound: true, restored: true},
			keyFindings{hash: hashFound, restored: true}},
		{"a revocation for want of use", observed, decision{do: revokeUnused{}}, outcome{revokedAt: at},
			keyFindings{revoked: true, revokedAt: at, hash: hashFound, conflict: "someone else's", reveal: switchboardv1alpha1.ReasonRevealClaimed, life: life{known: true}}},
		{"revoked as observed", &observation{revoked: true, revokedAt: at}, decision{do: revoke{}}, outcome{reveal: switchboardv1alpha1.ReasonRevoked},
			keyFindings{revoked: true, revokedAt: at, reveal: switchboardv1alpha1.ReasonRevoked}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := findingsOf(tt.obs, tt.d, tt.out, tt.obs.life); got != tt.want {
				t.Fatalf("findingsOf = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}
