package v1alpha1

import "testing"

func TestValidAudience(t *testing.T) {
	tests := []struct {
		audience string
		valid    bool
	}{
		{"connections", true}, {"a", true}, {"billing-v2", true}, {"0", true},
		{"", false}, {"-a", false}, {"a-", false}, {"A", false}, {"a.b", false}, {"a_b", false},
		{string(make([]byte, 63)), false},
	}
	for _, tt := range tests {
		if got := ValidAudience(tt.audience); got != tt.valid {
			t.Errorf("ValidAudience(%q) = %v, want %v", tt.audience, got, tt.valid)
		}
	}
	long := make([]byte, 64)
	for i := range long {
		long[i] = 'a'
	}
	if ValidAudience(string(long)) || !ValidAudience(string(long[:63])) {
		t.Error("the bound of 63 characters is not where the CRD puts it")
	}
}
