//go:build !unit

package v1alpha1_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

func rateLimit(requests int32, period string, burst *int32) *switchboardv1alpha1.APIKeyRateLimit {
	d, err := time.ParseDuration(period)
	if err != nil {
		panic(err)
	}
	return &switchboardv1alpha1.APIKeyRateLimit{Requests: requests, Period: metav1.Duration{Duration: d}, Burst: burst}
}

// TestPolicyRoundTrips: a key with a rate limit and source ranges is stored as written.
func TestPolicyRoundTrips(t *testing.T) {
	ns := env.Namespace(t, "policy")
	key := &switchboardv1alpha1.APIKey{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "limited"},
		Spec: switchboardv1alpha1.APIKeySpec{
			RateLimit:           rateLimit(100, "1m", ptr.To[int32](20)),
			AllowedSourceRanges: []switchboardv1alpha1.CIDR{"10.0.0.0/8", "2001:db8::/32", "203.0.113.7/32"},
			APIKeyLifecycle:     switchboardv1alpha1.APIKeyLifecycle{GraceEndsWhenUnusedFor: &metav1.Duration{Duration: 2 * time.Minute}},
		},
	}
	if err := env.Client.Create(ctx(t), key); err != nil {
		t.Fatalf("creating a valid limited APIKey: %v", err)
	}
	var got switchboardv1alpha1.APIKey
	if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(key), &got); err != nil {
		t.Fatal(err)
	}
	rl := got.Spec.RateLimit
	if rl == nil || rl.Requests != 100 || rl.Period.Duration != time.Minute || rl.EffectiveBurst() != 20 || len(got.Spec.AllowedSourceRanges) != 3 ||
		got.Spec.GraceEndsWhenUnusedFor == nil || got.Spec.GraceEndsWhenUnusedFor.Duration != 2*time.Minute {
		t.Fatalf("the policy did not round-trip: %+v %v", rl, got.Spec.AllowedSourceRanges)
	}
}

// TestInvalidPoliciesAreRejected: every bad rate limit and source range is refused with a
// message naming the field and what is wanted.
func TestInvalidPoliciesAreRejected(t *testing.T) {
	ns := env.Namespace(t, "badpolicy")
	tooMany := make([]switchboardv1alpha1.CIDR, 33)
	for i := range tooMany {
		tooMany[i] = switchboardv1alpha1.CIDR(fmt.Sprintf("10.0.%d.0/24", i))
	}
	manyLabels := map[string]string{}
	for i := range 17 {
		manyLabels[fmt.Sprintf("l%d", i)] = "v"
	}
	dur := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	window := func(days []switchboardv1alpha1.Weekday, d time.Duration) switchboardv1alpha1.APIKeyRenewalWindow {
		return switchboardv1alpha1.APIKeyRenewalWindow{Days: days, Start: "02:00", Duration: metav1.Duration{Duration: d}, TimeZone: "Europe/Paris"}
	}
	var tooManyAudiences []switchboardv1alpha1.Audience
	for i := range 17 {
		tooManyAudiences = append(tooManyAudiences, switchboardv1alpha1.Audience(fmt.Sprintf("api-%d", i)))
	}
	tests := []struct {
		name   string
		spec   switchboardv1alpha1.APIKeySpec
		errors []string
	}{
		{"no requests", switchboardv1alpha1.APIKeySpec{RateLimit: rateLimit(0, "1m", nil)},
			[]string{"spec.rateLimit.requests", "greater than or equal to 1"}},
		{"too many requests", switchboardv1alpha1.APIKeySpec{RateLimit: rateLimit(1_000_001, "1m", nil)},
			[]string{"spec.rateLimit.requests", "less than or equal to 1000000"}},
		{"a period below a second", switchboardv1alpha1.APIKeySpec{RateLimit: rateLimit(10, "500ms", nil)},
			[]string{"spec.rateLimit.period", "whole seconds written like 30s, 1m, 1h or 1m30s"}},
		{"a period with a fraction", switchboardv1alpha1.APIKeySpec{RateLimit: rateLimit(10, "1.5s", nil)},
			[]string{"spec.rateLimit.period", "whole seconds"}},
		{"a zero period", switchboardv1alpha1.APIKeySpec{RateLimit: rateLimit(10, "0s", nil)},
			[]string{"spec.rateLimit.period", "must be from 1s to 24h"}},
		{"a period over a day", switchboardv1alpha1.APIKeySpec{RateLimit: rateLimit(10, "25h", nil)},
			[]string{"spec.rateLimit.period", "must be from 1s to 24h"}},
		{"a zero burst", switchboardv1alpha1.APIKeySpec{RateLimit: rateLimit(10, "1m", ptr.To[int32](0))},
			[]string{"spec.rateLimit.burst", "greater than or equal to 1"}},
		{"a burst over requests", switchboardv1alpha1.APIKeySpec{RateLimit: rateLimit(10, "1s", ptr.To[int32](100))},
			[]string{"spec.rateLimit", "rateLimit.burst cannot exceed rateLimit.requests", "requests: 100, period: 10s"}},
		{"an address without a prefix length", switchboardv1alpha1.APIKeySpec{AllowedSourceRanges: []switchboardv1alpha1.CIDR{"10.0.0.0/8", "203.0.113.7"}},
			[]string{"spec.allowedSourceRanges[1]", "must be a CIDR such as 203.0.113.0/24"}},
		{"not an address", switchboardv1alpha1.APIKeySpec{AllowedSourceRanges: []switchboardv1alpha1.CIDR{"office"}},
			[]string{"spec.allowedSourceRanges[0]", "must be a CIDR"}},
		{"host bits set", switchboardv1alpha1.APIKeySpec{AllowedSourceRanges: []switchboardv1alpha1.CIDR{"203.0.113.7/24"}},
			[]string{"spec.allowedSourceRanges[0]", "203.0.113.0/24 rather than 203.0.113.7/24"}},
		{"IPv6 host bits set", switchboardv1alpha1.APIKeySpec{AllowedSourceRanges: []switchboardv1alpha1.CIDR{"2001:db8::1/32"}},
			[]string{"spec.allowedSourceRanges[0]", "network address"}},
		{"too many ranges", switchboardv1alpha1.APIKeySpec{AllowedSourceRanges: tooMany},
			[]string{"spec.allowedSourceRanges", "must have at most 32 items"}},
		{"a range twice", switchboardv1alpha1.APIKeySpec{AllowedSourceRanges: []switchboardv1alpha1.CIDR{"10.0.0.0/8", "10.0.0.0/8"}},
			[]string{"spec.allowedSourceRanges[1]", "Duplicate value"}},
		{"a range too long", switchboardv1alpha1.APIKeySpec{AllowedSourceRanges: []switchboardv1alpha1.CIDR{switchboardv1alpha1.CIDR(strings.Repeat("1", 44))}},
			[]string{"spec.allowedSourceRanges[0]", "may not be more than 43"}},
		{"an audience with capitals", switchboardv1alpha1.APIKeySpec{Audiences: []switchboardv1alpha1.Audience{"Billing"}},
			[]string{"spec.audiences[0]", "an audience is a DNS label"}},
		{"an audience with a dot", switchboardv1alpha1.APIKeySpec{Audiences: []switchboardv1alpha1.Audience{"connections", "billing.v2"}},
			[]string{"spec.audiences[1]", "an audience is a DNS label"}},
		{"an audience ending in a dash", switchboardv1alpha1.APIKeySpec{Audiences: []switchboardv1alpha1.Audience{"billing-"}},
			[]string{"spec.audiences[0]", "starting and ending with a letter or digit"}},
		{"an empty audience", switchboardv1alpha1.APIKeySpec{Audiences: []switchboardv1alpha1.Audience{""}},
			[]string{"spec.audiences[0]", "at least 1"}},
		{"an audience too long", switchboardv1alpha1.APIKeySpec{Audiences: []switchboardv1alpha1.Audience{switchboardv1alpha1.Audience(strings.Repeat("a", 64))}},
			[]string{"spec.audiences[0]", "may not be more than 63"}},
		{"an audience twice", switchboardv1alpha1.APIKeySpec{Audiences: []switchboardv1alpha1.Audience{"billing", "billing"}},
			[]string{"spec.audiences[1]", "Duplicate value"}},
		{"renewBefore without a lifetime", switchboardv1alpha1.APIKeySpec{APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{RenewBefore: dur(time.Hour)}},
			[]string{"spec", "renewBefore and renewBeforePercentage need a lifetime"}},
		{"renewBefore and a percentage", switchboardv1alpha1.APIKeySpec{APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{Lifetime: dur(720 * time.Hour), RenewBefore: dur(time.Hour), RenewBeforePercentage: ptr.To[int32](10)}},
			[]string{"spec", "give renewBefore or renewBeforePercentage, not both"}},
		{"renewBefore as long as the lifetime", switchboardv1alpha1.APIKeySpec{APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{Lifetime: dur(24 * time.Hour), RenewBefore: dur(24 * time.Hour)}},
			[]string{"spec", "renewBefore must be shorter than lifetime"}},
		{"a lifetime under two minutes", switchboardv1alpha1.APIKeySpec{APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{Lifetime: dur(time.Minute)}},
			[]string{"spec.lifetime", "lifetime must be from 2m to 87600h"}},
		{"a leakOverlap under 5s", switchboardv1alpha1.APIKeySpec{APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{LeakOverlap: dur(4 * time.Second)}},
			[]string{"spec.leakOverlap", "leakOverlap is from 5s to 5m"}},
		{"a leakOverlap over 5m", switchboardv1alpha1.APIKeySpec{APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{LeakOverlap: dur(5*time.Minute + time.Second)}},
			[]string{"spec.leakOverlap", "leakOverlap is from 5s to 5m"}},
		{"a percentage of 100", switchboardv1alpha1.APIKeySpec{APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{Lifetime: dur(24 * time.Hour), RenewBeforePercentage: ptr.To[int32](100)}},
			[]string{"spec.renewBeforePercentage", "less than or equal to 99"}},
		{"revokeWhenUnusedFor under a day", switchboardv1alpha1.APIKeySpec{APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{RevokeWhenUnusedFor: dur(time.Hour)}},
			[]string{"spec.revokeWhenUnusedFor", "at least 24h"}},
		{"graceEndsWhenUnusedFor under two minutes", switchboardv1alpha1.APIKeySpec{APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{GraceEndsWhenUnusedFor: dur(time.Minute)}},
			[]string{"spec.graceEndsWhenUnusedFor", "from 2m to 720h"}},
		{"graceEndsWhenUnusedFor over 30 days", switchboardv1alpha1.APIKeySpec{APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{GraceEndsWhenUnusedFor: dur(721 * time.Hour)}},
			[]string{"spec.graceEndsWhenUnusedFor", "from 2m to 720h"}},
		{"renewal windows without a renewal", switchboardv1alpha1.APIKeySpec{APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{Lifetime: dur(720 * time.Hour),
			RenewalWindows: []switchboardv1alpha1.APIKeyRenewalWindow{window(nil, 2*time.Hour)}}},
			[]string{"spec", "renewalWindows need renewBefore or renewBeforePercentage"}},
		{"a daily window of 2h with a renewal period of 1h", switchboardv1alpha1.APIKeySpec{APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{Lifetime: dur(720 * time.Hour), RenewBefore: dur(time.Hour),
			RenewalWindows: []switchboardv1alpha1.APIKeyRenewalWindow{window(nil, 2*time.Hour)}}},
			[]string{"spec", "no renewal window opens within the renewal period"}},
		{"a Monday window with 3 days to renew", switchboardv1alpha1.APIKeySpec{APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{Lifetime: dur(720 * time.Hour), RenewBefore: dur(72 * time.Hour),
			RenewalWindows: []switchboardv1alpha1.APIKeyRenewalWindow{window([]switchboardv1alpha1.Weekday{"Monday"}, 2*time.Hour)}}},
			[]string{"spec", "no renewal window opens within the renewal period"}},
		{"Monday and Thursday windows with 80h to renew", switchboardv1alpha1.APIKeySpec{APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{Lifetime: dur(720 * time.Hour), RenewBefore: dur(80 * time.Hour),
			RenewalWindows: []switchboardv1alpha1.APIKeyRenewalWindow{window([]switchboardv1alpha1.Weekday{"Thursday", "Monday"}, 2*time.Hour)}}},
			[]string{"spec", "no renewal window opens within the renewal period"}},
		{"a Monday window with 10% of 30 days to renew", switchboardv1alpha1.APIKeySpec{APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{Lifetime: dur(720 * time.Hour), RenewBeforePercentage: ptr.To[int32](10),
			RenewalWindows: []switchboardv1alpha1.APIKeyRenewalWindow{window([]switchboardv1alpha1.Weekday{"Monday"}, 2*time.Hour)}}},
			[]string{"spec", "no renewal window opens within the renewal period"}},
		{"a window on a day that is not one", switchboardv1alpha1.APIKeySpec{APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{Lifetime: dur(720 * time.Hour), RenewBefore: dur(200 * time.Hour),
			RenewalWindows: []switchboardv1alpha1.APIKeyRenewalWindow{window([]switchboardv1alpha1.Weekday{"Funday"}, 2*time.Hour)}}},
			[]string{"spec.renewalWindows[0].days[0]", "Unsupported value"}},
		{"a window at 25:00", switchboardv1alpha1.APIKeySpec{APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{Lifetime: dur(720 * time.Hour), RenewBefore: dur(200 * time.Hour),
			RenewalWindows: []switchboardv1alpha1.APIKeyRenewalWindow{{Start: "25:00", Duration: metav1.Duration{Duration: time.Hour}}}}},
			[]string{"spec.renewalWindows[0].start"}},
		{"a window with both start and cron", switchboardv1alpha1.APIKeySpec{APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{Lifetime: dur(720 * time.Hour), RenewBefore: dur(200 * time.Hour),
			RenewalWindows: []switchboardv1alpha1.APIKeyRenewalWindow{{Start: "02:00", Cron: "0 2 * * *", Duration: metav1.Duration{Duration: time.Hour}}}}},
			[]string{"spec.renewalWindows[0]", "give exactly one of them"}},
		{"a window with neither start nor cron", switchboardv1alpha1.APIKeySpec{APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{Lifetime: dur(720 * time.Hour), RenewBefore: dur(200 * time.Hour),
			RenewalWindows: []switchboardv1alpha1.APIKeyRenewalWindow{{Duration: metav1.Duration{Duration: time.Hour}}}}},
			[]string{"spec.renewalWindows[0]", "give exactly one of them"}},
		{"a cron window with days", switchboardv1alpha1.APIKeySpec{APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{Lifetime: dur(720 * time.Hour), RenewBefore: dur(200 * time.Hour),
			RenewalWindows: []switchboardv1alpha1.APIKeyRenewalWindow{{Cron: "0 2 * * *", Days: []switchboardv1alpha1.Weekday{"Monday"}, Duration: metav1.Duration{Duration: time.Hour}}}}},
			[]string{"spec.renewalWindows[0]", "days go with start"}},
		{"a cron descriptor", switchboardv1alpha1.APIKeySpec{APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{Lifetime: dur(720 * time.Hour), RenewBefore: dur(200 * time.Hour),
			RenewalWindows: []switchboardv1alpha1.APIKeyRenewalWindow{{Cron: "@every 1h", Duration: metav1.Duration{Duration: time.Hour}}}}},
			[]string{"spec.renewalWindows[0].cron"}},
		{"a cron expression with seconds", switchboardv1alpha1.APIKeySpec{APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{Lifetime: dur(720 * time.Hour), RenewBefore: dur(200 * time.Hour),
			RenewalWindows: []switchboardv1alpha1.APIKeyRenewalWindow{{Cron: "0 0 2 * * *", Duration: metav1.Duration{Duration: time.Hour}}}}},
			[]string{"spec.renewalWindows[0].cron"}},
		{"too many template labels", switchboardv1alpha1.APIKeySpec{SecretTemplate: &switchboardv1alpha1.APIKeySecretTemplate{Labels: manyLabels}},
			[]string{"spec.secretTemplate.labels", "must have at most 16 items"}},
		{"too many audiences", switchboardv1alpha1.APIKeySpec{Audiences: tooManyAudiences},
			[]string{"spec.audiences", "must have at most 16 items"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("bad-%d", i)}, Spec: tt.spec}
			err := env.Client.Create(ctx(t), key)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			for _, want := range tt.errors {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

// TestRateLimitNeedsRequestsAndPeriod sends raw JSON, which a typed client cannot produce.
func TestRateLimitNeedsRequestsAndPeriod(t *testing.T) {
	ns := env.Namespace(t, "rawpolicy")
	body := `{"apiVersion":"switchboard.dev/v1alpha1","kind":"APIKey","metadata":{"name":"k","namespace":"` + ns +
		`"},"spec":{"rateLimit":{"burst":5}}}`
	err := kubernetes.NewForConfigOrDie(env.Config).Discovery().RESTClient().Post().AbsPath("/apis/switchboard.dev/v1alpha1/namespaces", ns, "apikeys").
		Body([]byte(body)).SetHeader("Content-Type", "application/json").Do(ctx(t)).Error()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want an Invalid error, got %v", err)
	}
	for _, want := range []string{"spec.rateLimit.requests: Required value", "spec.rateLimit.period: Required value"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestWidePrinterColumns asks the API server for the table `kubectl get apikeys -o wide` prints:
// the policy's columns hold the key's rate limit and source ranges.
func TestWidePrinterColumns(t *testing.T) {
	ns := env.Namespace(t, "wide")
	key := &switchboardv1alpha1.APIKey{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "limited"},
		Spec: switchboardv1alpha1.APIKeySpec{
			RateLimit:           rateLimit(100, "1m", nil),
			AllowedSourceRanges: []switchboardv1alpha1.CIDR{"10.0.0.0/8"},
		},
	}
	if err := env.Client.Create(ctx(t), key); err != nil {
		t.Fatal(err)
	}
	raw, err := kubernetes.NewForConfigOrDie(env.Config).Discovery().RESTClient().Get().AbsPath("/apis/switchboard.dev/v1alpha1/namespaces", ns, "apikeys").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(ctx(t)).Raw()
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	cells := map[string]any{}
	for i, c := range table.ColumnDefinitions {
		if c.Priority == 1 { // the -o wide columns
			cells[c.Name] = table.Rows[0].Cells[i]
		}
	}
	if cells["Requests"] != float64(100) || cells["Period"] != "1m0s" || fmt.Sprint(cells["Sources"]) != `["10.0.0.0/8"]` {
		t.Errorf("wide columns %v, want Requests 100, Period 1m0s, Sources [\"10.0.0.0/8\"]", cells)
	}
}

// TestRenewalWindowsThatOpenInTime: windows of which one opens within the renewal period are
// accepted (the other side of the cases TestInvalidPoliciesAreRejected refuses).
func TestRenewalWindowsThatOpenInTime(t *testing.T) {
	ns := env.Namespace(t, "windows")
	window := func(days []switchboardv1alpha1.Weekday, d time.Duration) switchboardv1alpha1.APIKeyRenewalWindow {
		return switchboardv1alpha1.APIKeyRenewalWindow{Days: days, Start: "02:00", Duration: metav1.Duration{Duration: d}, TimeZone: "America/New_York"}
	}
	tests := []struct {
		name        string
		renewBefore time.Duration
		percentage  int32
		windows     []switchboardv1alpha1.APIKeyRenewalWindow
	}{
		{"daily 2h, 22h to renew", 22 * time.Hour, 0, []switchboardv1alpha1.APIKeyRenewalWindow{window(nil, 2*time.Hour)}},
		{"Monday 2h, a week to renew", 166 * time.Hour, 0, []switchboardv1alpha1.APIKeyRenewalWindow{window([]switchboardv1alpha1.Weekday{"Monday"}, 2*time.Hour)}},
		{"Monday and Thursday, 94h", 94 * time.Hour, 0, []switchboardv1alpha1.APIKeyRenewalWindow{window([]switchboardv1alpha1.Weekday{"Thursday", "Monday"}, 2*time.Hour)}},
		{"one of two windows opens in time", 30 * time.Hour, 0, []switchboardv1alpha1.APIKeyRenewalWindow{
			window([]switchboardv1alpha1.Weekday{"Sunday"}, time.Hour), window(nil, 8*time.Hour)}},
		{"25% of 30 days, Mondays", 0, 25, []switchboardv1alpha1.APIKeyRenewalWindow{window([]switchboardv1alpha1.Weekday{"Monday"}, time.Hour)}},
		// CEL leaves cron windows to the operator's webhook (internal/operator/keyadmission), not
		// installed here: the schema admits a well-formed expression.
		{"a cron window, checked by the webhook only", 24 * time.Hour, 0, []switchboardv1alpha1.APIKeyRenewalWindow{
			{Cron: "0 2 * * 1-5", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "Europe/Paris"}}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("w-%d", i)}}
			key.Spec.Lifetime = &metav1.Duration{Duration: 720 * time.Hour}
			if tt.percentage > 0 {
				key.Spec.RenewBeforePercentage = ptr.To(tt.percentage)
			} else {
				key.Spec.RenewBefore = &metav1.Duration{Duration: tt.renewBefore}
			}
			key.Spec.RenewalWindows = tt.windows
			if err := env.Client.Create(ctx(t), key); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
}

// TestLeakOverlapBounds: spec.leakOverlap is accepted at both of its bounds (the other side of
// the cases TestInvalidPoliciesAreRejected refuses).
func TestLeakOverlapBounds(t *testing.T) {
	ns := env.Namespace(t, "overlap")
	for i, bound := range []string{switchboardv1alpha1.MinLeakOverlap, switchboardv1alpha1.MaxLeakOverlap} {
		d, err := time.ParseDuration(bound)
		if err != nil {
			t.Fatal(err)
		}
		key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("o-%d", i)}}
		key.Spec.SecretName = "o-key"
		key.Spec.LeakOverlap = &metav1.Duration{Duration: d}
		if err := env.Client.Create(ctx(t), key); err != nil {
			t.Fatalf("leakOverlap %s refused: %v", bound, err)
		}
	}
}
