package keyclient

import (
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

func TestParseRateLimit(t *testing.T) {
	tests := []struct {
		rate  string
		burst int
		want  string // FormatRateLimit of the result, or the error's text
		ok    bool
	}{
		{"", 0, "", true},
		{"100/1m", 0, "100/1m", true},
		{" 10 / 1s ", 0, "10/1s", true},
		{"100/1m", 20, "100/1m,burst=20", true},
		{"100/1m", 100, "100/1m", true},
		{"5/90s", 0, "5/1m30s", true},
		{"1000000/24h", 0, "1000000/24h", true},
		{"2/2000ms", 0, "2/2s", true},
		{"", 5, "a burst needs a rate limit", false},
		{"100", 0, "is not REQUESTS/PERIOD", false},
		{"0/1m", 0, "the requests must be a whole number from 1 to 1000000", false},
		{"1000001/1m", 0, "from 1 to 1000000", false},
		{"x/1m", 0, "whole number", false},
		{"10/minute", 0, "whole seconds written like 30s, 1m, 1h or 1m30s", false},
		{"10/1500ms", 0, "whole seconds", false},
		{"10/0s", 0, "from 1s to 24h", false},
		{"10/25h", 0, "from 1s to 24h", false},
		{"10/1m", 11, "the burst must be from 1 to the rate limit's requests (10), not 11", false},
		{"10/1m", -1, "the burst must be from 1", false},
	}
	for _, tt := range tests {
		t.Run(tt.rate, func(t *testing.T) {
			rl, err := ParseRateLimit(tt.rate, tt.burst)
			switch {
			case tt.ok && err != nil:
				t.Fatalf("ParseRateLimit(%q, %d) = %v", tt.rate, tt.burst, err)
			case tt.ok && FormatRateLimit(rl) != tt.want:
				t.Fatalf("ParseRateLimit(%q, %d) shows as %q, want %q", tt.rate, tt.burst, FormatRateLimit(rl), tt.want)
			case !tt.ok && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("ParseRateLimit(%q, %d) = %v, want an error saying %q", tt.rate, tt.burst, err, tt.want)
			}
		})
	}
}

func TestParseSourceRanges(t *testing.T) {
	many := make([]string, 33)
	for i := range many {
		many[i] = "10.0." + strconv.Itoa(i) + ".0/24"
	}
	tests := []struct {
		name   string
		ranges []string
		want   string // FormatSourceRanges of the result, or the error's text
		ok     bool
	}{
		{"none", nil, "", true},
		{"empty entries", []string{"", " "}, "", true},
		{"both families", []string{"10.0.0.0/8", " 2001:db8::/32 ", "203.0.113.7/32"}, "10.0.0.0/8,2001:db8::/32,203.0.113.7/32", true},
		{"no prefix length", []string{"203.0.113.7"}, `"203.0.113.7" is not a CIDR such as 203.0.113.0/24`, false},
		{"not an address", []string{"office"}, "is not a CIDR", false},
		{"host bits", []string{"203.0.113.7/24"}, "must be written as its network address: 203.0.113.0/24", false},
		{"twice", []string{"10.0.0.0/8", "10.0.0.0/8"}, "given twice", false},
		{"too many", many, "at most 32 source ranges, not 33", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSourceRanges(tt.ranges)
			switch {
			case tt.ok && (err != nil || FormatSourceRanges(got) != tt.want):
				t.Fatalf("ParseSourceRanges(%q) = %q, %v; want %q", tt.ranges, FormatSourceRanges(got), err, tt.want)
			case !tt.ok && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("ParseSourceRanges(%q) = %v, want an error saying %q", tt.ranges, err, tt.want)
			}
		})
	}
}

func TestParseAudiences(t *testing.T) {
	var sixteen, seventeen []string
	for i := range 17 {
		seventeen = append(seventeen, "api-"+strconv.Itoa(i))
	}
	sixteen = seventeen[:16]
	long := strings.Repeat("a", 63)
	tests := []struct {
		name string
		in   string
		want string // FormatAudiences of the result, or the error's text
		ok   bool
	}{
		{"nothing", "", "", true},
		{"only separators", " , ,\t", "", true},
		{"one", "connections", "connections", true},
		{"commas and spaces", " billing, connections  billing-v2,", "billing,connections,billing-v2", true},
		{"digits", "0,v2,42-x", "0,v2,42-x", true},
		{"63 characters", long, long, true},
		{"sixteen", strings.Join(sixteen, ","), strings.Join(sixteen, ","), true},
		{"capitals", "Billing", `audience "Billing" must be written in lower case: billing`, false},
		{"a dot", "connections,billing.v2", `audience "billing.v2" is not a DNS label: lower-case letters, digits and '-', starting and ending with a letter or digit, such as connections or billing-v2`, false},
		{"an underscore", "billing_v2", "is not a DNS label", false},
		{"a leading dash", "-billing", `audience "-billing" is not a DNS label`, false},
		{"a trailing dash", "billing-", `audience "billing-" is not a DNS label`, false},
		{"not ASCII", "café", "is not a DNS label", false},
		{"64 characters", long + "a", `is longer than 63 characters`, false},
		{"twice", "billing connections billing", `audience "billing" is given twice`, false},
		{"seventeen", strings.Join(seventeen, " "), "at most 16 audiences, not 17", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseAudiences(tt.in)
			switch {
			case tt.ok && (err != nil || FormatAudiences(got) != tt.want):
				t.Fatalf("ParseAudiences(%q) = %q, %v; want %q", tt.in, FormatAudiences(got), err, tt.want)
			case tt.ok && tt.want == "" && got != nil:
				t.Fatalf("ParseAudiences(%q) = %#v, want nil (every audience)", tt.in, got)
			case !tt.ok && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("ParseAudiences(%q) = %v, want an error saying %q", tt.in, err, tt.want)
			}
		})
	}
}

func TestPolicyRoundTrip(t *testing.T) {
	p := Policy{
		RateLimit:           &switchboardv1alpha1.APIKeyRateLimit{Requests: 5, Period: metav1.Duration{Duration: time.Second}},
		AllowedSourceRanges: []switchboardv1alpha1.CIDR{"10.0.0.0/8"},
		Audiences:           []switchboardv1alpha1.Audience{"billing", "connections"},
	}
	var key switchboardv1alpha1.APIKey
	p.Apply(&key.Spec)
	if got := PolicyOf(&key); FormatRateLimit(got.RateLimit) != "5/1s" || FormatSourceRanges(got.AllowedSourceRanges) != "10.0.0.0/8" ||
		FormatAudiences(got.Audiences) != "billing,connections" {
		t.Fatalf("PolicyOf(Apply(p)) = %+v", got)
	}
	Policy{}.Apply(&key.Spec)
	if key.Spec.RateLimit != nil || key.Spec.AllowedSourceRanges != nil || key.Spec.Audiences != nil {
		t.Fatalf("an empty policy left %+v", key.Spec)
	}
}

func TestFormatPeriod(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Second: "1s", time.Minute: "1m", 90 * time.Second: "1m30s", time.Hour: "1h", 61 * time.Minute: "1h1m", 3601 * time.Second: "1h0m1s", 24 * time.Hour: "24h",
	} {
		if got := FormatPeriod(d); got != want {
			t.Errorf("FormatPeriod(%s) = %q, want %q", d, got, want)
		}
	}
	if got := FormatRateLimit(&switchboardv1alpha1.APIKeyRateLimit{Requests: 5, Burst: ptr.To[int32](2)}); !strings.HasSuffix(got, ",burst=2") {
		t.Errorf("FormatRateLimit with a burst = %q", got)
	}
}
