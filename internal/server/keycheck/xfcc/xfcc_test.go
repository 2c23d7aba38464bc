package xfcc

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

const (
	checkout = "spiffe://cluster.local/ns/shop/sa/checkout"
	gateway  = "spiffe://cluster.local/ns/edge/sa/gateway"
	hash     = "468ed33be74eee6556d90c0149c1309e9ba61d6425303443c0748a02dd8de688"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Element
		err  error
	}{
		{name: "Envoy's one element", in: "By=" + gateway + ";Hash=" + hash + ";URI=" + checkout,
			want: []Element{{{"By", gateway}, {"Hash", hash}, {"URI", checkout}}}},
		{name: "quoted subject with separators", in: `Hash=` + hash + `;Subject="CN=a,O=b;c";URI=` + checkout,
			want: []Element{{{"Hash", hash}, {"Subject", "CN=a,O=b;c"}, {"URI", checkout}}}},
		{name: "escaped quote in a quoted value", in: `Subject="CN=say \"hi\"";URI=` + checkout,
			want: []Element{{{"Subject", `CN=say "hi"`}, {"URI", checkout}}}},
		{name: "other backslashes kept", in: `Subject="CN=a\,b\\c"`,
			want: []Element{{{"Subject", `CN=a\,b\\c`}}}},
		{name: "empty quoted value", in: `Subject=""`, want: []Element{{{"Subject", ""}}}},
		{name: "several elements, nearest last", in: "By=a;URI=spiffe://x/first,By=b;URI=" + checkout,
			want: []Element{{{"By", "a"}, {"URI", "spiffe://x/first"}}, {{"By", "b"}, {"URI", checkout}}}},
		{name: "joined fields' spaces", in: "URI=spiffe://x/a , URI=spiffe://x/b;\tHash=h ",
			want: []Element{{{"URI", "spiffe://x/a"}}, {{"URI", "spiffe://x/b"}, {"Hash", "h"}}}},
		{name: "quoted comma does not split elements", in: `Subject="a,b",URI=` + checkout,
			want: []Element{{{"Subject", "a,b"}}, {{"URI", checkout}}}},
		{name: "unquoted = in a URI", in: "URI=spiffe://x/a?b=c", want: []Element{{{"URI", "spiffe://x/a?b=c"}}}},
		{name: "empty URI", in: "Hash=h;URI=", want: []Element{{{"Hash", "h"}, {"URI", ""}}}},
		{name: "two URI SANs", in: "URI=spiffe://x/a;URI=spiffe://x/b", want: []Element{{{"URI", "spiffe://x/a"}, {"URI", "spiffe://x/b"}}}},

		{name: "empty", in: "", err: ErrMalformed},
		{name: "empty element", in: "URI=" + checkout + ",,URI=" + checkout, err: ErrMalformed},
		{name: "trailing comma", in: "URI=" + checkout + ",", err: ErrMalformed},
		{name: "trailing semicolon", in: "URI=" + checkout + ";", err: ErrMalformed},
		{name: "no =", in: "URI", err: ErrMalformed},
		{name: "no key", in: "=x", err: ErrMalformed},
		{name: "junk key", in: "U RI=x", err: ErrMalformed},
		{name: "unterminated quote", in: `Subject="CN=a;URI=` + checkout, err: ErrMalformed},
		{name: "escaped closing quote", in: `Subject="a\"`, err: ErrMalformed},
		{name: "junk after a quoted value", in: `Subject="a"b;URI=` + checkout, err: ErrMalformed},
		{name: "quote inside an unquoted value", in: `URI=spiffe://x/a"b`, err: ErrMalformed},
		{name: "control character", in: "URI=spiffe://x/a\nb", err: ErrMalformed},
		{name: "not XFCC at all", in: "-----BEGIN CERTIFICATE-----", err: ErrMalformed},
		{name: "elements past the bound", in: strings.Repeat("Hash=h,", MaxElements) + "Hash=h", err: ErrTooManyElements},
		{name: "pairs past the bound", in: strings.Repeat("Hash=h;", MaxPairs) + "Hash=h", err: ErrTooManyPairs},
		{name: "longer than the bound", in: "Cert=" + strings.Repeat("A", MaxLength), err: ErrTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.in)
			if !errors.Is(err, tt.err) {
				t.Fatalf("Parse(%q) error = %v, want %v", tt.in, err, tt.err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Parse(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseAtTheBounds(t *testing.T) {
	if e, err := Parse(strings.Repeat("Hash=h,", MaxElements-1) + "Hash=h"); err != nil || len(e) != MaxElements {
		t.Fatalf("%d elements: %d, %v; want all", MaxElements, len(e), err)
	}
	if e, err := Parse(strings.Repeat("Hash=h;", MaxPairs-1) + "Hash=h"); err != nil || len(e[0]) != MaxPairs {
		t.Fatalf("%d pairs: %v; want all", MaxPairs, err)
	}
	long := "URI=" + checkout + ";Cert=" + strings.Repeat("A", MaxLength-len("URI="+checkout+";Cert="))
	if id, err := SPIFFEID(long); err != nil || id != checkout {
		t.Fatalf("a header of exactly %d bytes: %q, %v; want %q", MaxLength, id, err, checkout)
	}
}

func TestSPIFFEID(t *testing.T) {
	tests := []struct {
		name, in, want string
		err            error
	}{
		{name: "one element", in: "By=" + gateway + ";Hash=" + hash + ";URI=" + checkout, want: checkout},
		{name: "the nearest proxy's element", in: "URI=spiffe://cluster.local/ns/evil/sa/forged,By=x;URI=" + checkout, want: checkout},
		{name: "an earlier element's URI does not count", in: "URI=" + checkout + ",By=x;Hash=" + hash, err: ErrNoSPIFFEID},
		{name: "quoted URI", in: `URI="` + checkout + `"`, want: checkout},
		{name: "lower-case key", in: "uri=" + checkout, want: checkout},
		{name: "no URI SAN", in: "By=" + gateway + ";Hash=" + hash, err: ErrNoSPIFFEID},
		{name: "empty URI SAN", in: "Hash=" + hash + ";URI=", err: ErrNoSPIFFEID},
		{name: "two URI SANs", in: "URI=" + checkout + ";URI=" + gateway, err: ErrNoSPIFFEID},
		{name: "not a SPIFFE ID", in: "URI=https://checkout.example", err: ErrNoSPIFFEID},
		{name: "no trust domain", in: "URI=spiffe:///ns/a", err: ErrNoSPIFFEID},
		{name: "upper-case trust domain", in: "URI=spiffe://Cluster.local/ns/a", err: ErrNoSPIFFEID},
		{name: "a space in the path", in: `URI="spiffe://cluster.local/ns/a b"`, err: ErrNoSPIFFEID},
		{name: "longer than a binding's", in: "URI=spiffe://cluster.local/" + strings.Repeat("a", MaxSPIFFEIDLength), err: ErrNoSPIFFEID},
		{name: "junk", in: `URI="` + checkout, err: ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SPIFFEID(tt.in)
			if !errors.Is(err, tt.err) || got != tt.want {
				t.Fatalf("SPIFFEID(%q) = %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.err)
			}
		})
	}
}

// FuzzParse checks that Parse never panics, keeps its bounds, and that SPIFFEID only ever
// returns a SPIFFE ID that Parse finds as the last element's only URI.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"By=" + gateway + ";Hash=" + hash + ";URI=" + checkout,
		`Subject="CN=a,O=b;c";URI=` + checkout + ",URI=spiffe://x/y",
		`Subject="say \"hi\""`, "URI=", ",", `"`, "a=b;c", "URI=spiffe://x/a?b=c",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		elements, err := Parse(in)
		if err != nil {
			if elements != nil {
				t.Fatalf("Parse(%q) returned elements with its error %v", in, err)
			}
		} else if len(elements) == 0 || len(elements) > MaxElements {
			t.Fatalf("Parse(%q) = %d elements", in, len(elements))
		}
		for _, e := range elements {
			if len(e) == 0 || len(e) > MaxPairs {
				t.Fatalf("Parse(%q): an element of %d pairs", in, len(e))
			}
		}
		id, err := SPIFFEID(in)
		if err != nil {
			if id != "" {
				t.Fatalf("SPIFFEID(%q) = %q with error %v", in, id, err)
			}
			return
		}
		uris := elements[len(elements)-1].Values("uri")
		if len(uris) != 1 || uris[0] != id || !strings.HasPrefix(id, "spiffe://") || len(id) > MaxSPIFFEIDLength {
			t.Fatalf("SPIFFEID(%q) = %q, but the last element's URIs are %q", in, id, uris)
		}
	})
}
