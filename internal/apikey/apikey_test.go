package apikey

import (
	"crypto/sha256"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestGenerateParseRoundTrip(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 200; i++ {
		key, err := Generate("sb")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(key, "sb_live_") || len(key) != 2+len(LiveMarker)+SecretLength {
			t.Fatalf("key has the wrong shape: length %d", len(key))
		}
		if err := Parse(key, "sb"); err != nil {
			t.Fatalf("a generated key does not parse: %v", err)
		}
		if seen[key] {
			t.Fatal("two generated keys are equal")
		}
		seen[key] = true
	}
}

func TestParse(t *testing.T) {
	valid, err := Generate("sb")
	if err != nil {
		t.Fatal(err)
	}
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'a' {
			b[i] = 'b'
		} else {
			b[i] = 'a'
		}
		return string(b)
	}
	other, err := Generate("acme")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		key  string
		want error
	}{
		{name: "valid", key: valid, want: nil},
		{name: "empty", key: "", want: ErrMalformed},
		{name: "truncated", key: valid[:len(valid)-1], want: ErrMalformed},
		{name: "one character too many", key: valid + "a", want: ErrMalformed},
		{name: "random character changed", key: flip(valid, 12), want: ErrChecksum},
		{name: "checksum character changed", key: flip(valid, len(valid)-1), want: ErrChecksum},
		{name: "test marker instead of live", key: strings.Replace(valid, "_live_", "_test_", 1), want: ErrMalformed},
		{name: "other prefix of the same length", key: "xy" + valid[2:], want: ErrWrongPrefix},
		{name: "other prefix", key: other, want: ErrMalformed},
		{name: "non-base62 character", key: valid[:20] + "-" + valid[21:], want: ErrMalformed},
		{name: "unicode", key: valid[:20] + "é" + valid[22:], want: ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Parse(tt.key, "sb"); !errors.Is(got, tt.want) {
				t.Errorf("Parse() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestValidatePrefix(t *testing.T) {
	tests := []struct {
		prefix string
		ok     bool
	}{
		{"sb", true}, {"a", true}, {"acme2", true}, {"abcdefghijklmnop", true},
		{"", false}, {"Sb", false}, {"s_b", false}, {"2sb", false}, {"abcdefghijklmnopq", false},
	}
	for _, tt := range tests {
		t.Run(tt.prefix, func(t *testing.T) {
			if err := ValidatePrefix(tt.prefix); (err == nil) != tt.ok {
				t.Errorf("ValidatePrefix(%q) = %v, want ok=%v", tt.prefix, err, tt.ok)
			}
			if _, err := Generate(tt.prefix); (err == nil) != tt.ok {
				t.Errorf("Generate(%q) = %v, want ok=%v", tt.prefix, err, tt.ok)
			}
		})
	}
}

func TestSumIsSHA256(t *testing.T) {
	for _, key := range []string{"", "sb_live_x", strings.Repeat("k", MaxKeyLength), strings.Repeat("k", 500)} {
		if got, want := Sum(key), Hash(sha256.Sum256([]byte(key))); got != want {
			t.Errorf("Sum(len %d) = %s, want %s", len(key), got, want)
		}
	}
}

func TestParseHash(t *testing.T) {
	h := Sum("sb_live_abc")
	got, err := ParseHash(h.String())
	if err != nil || got != h {
		t.Fatalf("ParseHash(String()) = %v, %v", got, err)
	}
	for _, bad := range []string{"", "zz", h.String()[:62], h.String() + "00", strings.Repeat("g", 64)} {
		if _, err := ParseHash(bad); err == nil {
			t.Errorf("ParseHash(%q) accepted a bad hash", bad)
		}
	}
}

func TestHint(t *testing.T) {
	key, err := Generate("sb")
	if err != nil {
		t.Fatal(err)
	}
	hint := Hint(key)
	secret := key[len("sb_live_"):]
	if want := "sb_live_" + secret[:4] + "…" + secret[len(secret)-4:]; hint != want {
		t.Fatalf("Hint() = %q, want %q", hint, want)
	}
	if strings.Contains(hint, secret[4:len(secret)-4]) {
		t.Fatal("the hint reveals the middle of the secret")
	}
	if Hint("short") != "…" {
		t.Fatal("a short string must not be echoed back as its own hint")
	}
}

// FuzzParse checks the key parser, which every presented token goes through, on any input: no
// panic, only the documented errors, and a key that parses has the key's shape and a hash that
// is its SHA-256.
func FuzzParse(f *testing.F) {
	key, err := Generate("sb")
	if err != nil {
		f.Fatal(err)
	}
	wrongSum := key[:len(key)-1] + "0"
	if wrongSum == key {
		wrongSum = key[:len(key)-1] + "1"
	}
	for _, s := range []string{"", key, "sb_live_", "Bearer " + key, key[:10], key[:len(key)-1], key + "x",
		"acme_live_x", "xx" + key[2:], wrongSum, strings.ToUpper(key), "sb_live_" + strings.Repeat("é", 30)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		switch err := Parse(s, "sb"); {
		case err == nil:
			if !strings.HasPrefix(s, "sb_live_") || len(s) != len("sb_live_")+SecretLength {
				t.Fatalf("accepted a key of the wrong shape: %q", s)
			}
			if Sum(s) != sha256.Sum256([]byte(s)) {
				t.Fatal("Sum is not the SHA-256 of the key")
			}
		case !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrWrongPrefix) && !errors.Is(err, ErrChecksum):
			t.Fatalf("undocumented error %v", err)
		}
		_ = Hint(s)
		_ = Sum(s)
	})
}

func BenchmarkParseAndSum(b *testing.B) {
	key, _ := Generate("sb")
	b.ReportAllocs()
	for b.Loop() {
		if Parse(key, "sb") != nil {
			b.Fatal("parse failed")
		}
		_ = Sum(key)
	}
}

// TestCRC32MatchesTheStandardLibrary: the slicing-by-8 checksum is hash/crc32's IEEE checksum
// for every length around its 8-byte steps and for every byte value.
func TestCRC32MatchesTheStandardLibrary(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	inputs := []string{""}
	for n := 1; n <= 80; n++ {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		inputs = append(inputs, string(b))
	}
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	inputs = append(inputs, string(all), "sb_live_0123456789abcdefghijABCDEFGHIJklmnopqrstuvw")
	for _, in := range inputs {
		if got, want := crc32Update(in), crc32.ChecksumIEEE([]byte(in)); got != want {
			t.Errorf("crc32Update(%d bytes) = %08x, want %08x", len(in), got, want)
		}
	}
}
