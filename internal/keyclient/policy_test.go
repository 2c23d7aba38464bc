package keyclient

import (
	"strconv"
	"strings"
	"testing"
	"time"

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
