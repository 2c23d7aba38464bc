package main

import (
	"fmt"
	"time"
)

// notLower says whether ratio, as printed, is lower than before.
func notLower(ratio, before float64) string {
	if round2(ratio) < before {
		return "**lower**"
	}
	return "not lower"
}

func (r *report) writeBinding(p printer) {
	res := r.binding
	p("## 13. Workload binding: what a bound key adds to a check")
	p("")
	p("The server's own check (`keycheck.Checker.Decide`) run in the bench's process over an index of %d keys, each", res.indexKeys)
	p("call timed alone: %d rounds, interleaved, each of %d checks of the bearer key and of the cached token, and %d of each", res.rounds, res.checks[bindBearer], res.checks[bindTokenFirst])
	p("first sight; every check an admitted `GET /v1/connections` of a key whose binding is enforced, its proofs read from")
	p("the request's headers as /v1 reads them. The tokens are real: issued by the bench's control plane (TokenRequest,")
	p("audience `switchboard.dev`, bound to a pod; %s, %d bytes) and verified as the server verifies them (satoken: the", res.tokenAlg, res.tokenBytes)
	p("cluster's published keys, the pod alive in a metadata informer). A cached token is one the verifier has seen; a")
	p("first sight is a token never seen (%d issued before the measurement, in %s), its signature and claims checked. A DPoP", res.minted, res.mintTime.Round(time.Millisecond))
	p("proof is single use, so every one is a first sight: ES256, a fresh id, made by the bench before each round (signing is")
	p("the client's work); %d API keys, each bound to a public key of its own, take turns by round, as the replay cache holds", bindingDPoPKeys)
	p("at most 1,024 ids of a public key within a proof's window. The verifier fetched the cluster's keys %d times during the checks (no API", res.keyFetches)
	p("call in a check) and held %d tokens after them. Load average before and after: %s, %s; the machine's %d cores were",
		res.cachedAfter, res.loadBefore, res.loadAfter, r.cores)
	p("shared with other work, which lands in the tails.")
	p("")
	p("| check | checks | p50 | p99 | p99.9 | p99 added to the bearer key | issue 42's target |")
	p("|---|---|---|---|---|---|---|")
	base := percentile(res.latency[bindBearer], 0.99)
	for _, kind := range bindingKinds {
		lat := res.latency[kind]
		added, target := percentile(lat, 0.99)-base, "(baseline)"
		if t, written := bindingTarget(kind); t > 0 {
			verdict := "met"
			if added > t {
				verdict = "**not met**"
			}
			target = fmt.Sprintf("≤ %s: %s", written, verdict)
		}
		p("| %s | %d | %s | %s | %s | %s | %s |", kind, len(lat), us(percentile(lat, 0.5)), us(percentile(lat, 0.99)),
			us(percentile(lat, 0.999)), us(added), target)
	}
	p("")
	p("A bearer key's check never reads the proofs (its request carried the token too). A cached token costs its SHA-256")
	p("and a few map lookups (the cache, the pod); a first sight adds the signature's verification and the claims' parsing.")
	p("")
	p("Unbound keys' throughput: issue 42 asks that section 1's ratios not fall for a key without a binding, which pays one")
	p("nil check. In the report before issues 41 and 42 (section 1 at %s), switchboard's throughput over the same bytes", beforeBinding)
	p("with no limits (the headline) was %.2f, and that server's CPU per request over switchboard's %.2f.", noLimitsBeforeBinding, noLimitsCPUBeforeBinding)
	if r.ran["throughput"] {
		toUnlimited := ratiosTo(rpsOf(r.authRuns), rpsOf(r.unlimitedRuns))
		cpu := median(usOf(r.unlimitedRuns)) / median(usOf(r.authRuns))
		p("This run's section 1 measured **%.2f** (%s; the median of the per-round ratios %.2f, %d rounds of %s) and by CPU",
			round2(toUnlimited.ofMedians), notLower(toUnlimited.ofMedians, noLimitsBeforeBinding), round2(median(toUnlimited.rounds)), r.rounds, r.duration)
		p("per request **%.2f** (%s); its table gives the CPU other processes took meanwhile.", round2(cpu), notLower(cpu, noLimitsCPUBeforeBinding))
	} else {
		p("Section 1 gives them as measured since.")
	}
	p("")
}
