package webhookdelivery

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/switchboard-dev/switchboard/internal/apikey"
)

// compileSchema compiles t's embedded schema, asserting formats (date-time, uri), which Draft
// 2020-12 otherwise only annotates.
func compileSchema(t *testing.T, et EventType) *jsonschema.Schema {
	t.Helper()
	raw := Schema(et)
	if raw == nil {
		t.Fatalf("no schema for %s", et)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("schema of %s: %v", et, err)
	}
	if got := doc.(map[string]any)["$schema"]; got != "https://json-schema.org/draft/2020-12/schema" {
		t.Fatalf("schema of %s is of draft %v, want 2020-12", et, got)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	loc := "https://switchboard.dev/schemas/webhooks/" + string(et) + ".json"
	if err := c.AddResource(loc, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(loc)
	if err != nil {
		t.Fatalf("schema of %s: %v", et, err)
	}
	return s
}

// validateJSON validates a payload against s.
func validateJSON(s *jsonschema.Schema, payload []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

// decodeStrict decodes a payload as an Event, refusing fields Event does not have, and
// validates it: the Go side of what the schema says.
func decodeStrict(payload []byte) (Event, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	var e Event
	if err := dec.Decode(&e); err != nil {
		return e, err
	}
	return e, e.Validate()
}

// readExample returns example/<type>.json.
func readExample(t *testing.T, et EventType) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("example", string(et)+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEveryEventTypeHasASchemaAndAnExample checks that schema/ and example/ hold one file per
// EventType and nothing else, and that each schema is titled with its type.
func TestEveryEventTypeHasASchemaAndAnExample(t *testing.T) {
	var want []string
	for _, et := range EventTypes {
		want = append(want, string(et)+".json")
	}
	slices.Sort(want)
	for _, dir := range []string{"schema", "example"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range entries {
			got = append(got, e.Name())
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s/ holds %v, want %v", dir, got, want)
		}
	}
	for _, et := range EventTypes {
		var s struct{ Title string }
		if err := json.Unmarshal(Schema(et), &s); err != nil || s.Title != string(et) {
			t.Errorf("schema of %s is titled %q (%v)", et, s.Title, err)
		}
	}
	if Schema("apikey.borrowed") != nil {
		t.Error("Schema returned a schema for an unknown type")
	}
}

// TestExamplesValidate checks that every example validates against its type's schema and no
// other's, and that NewMessage encodes the event it decodes to as exactly the example's
// compact JSON: schema, example and Go type say the same.
func TestExamplesValidate(t *testing.T) {
	compiled := map[EventType]*jsonschema.Schema{}
	for _, et := range EventTypes {
		compiled[et] = compileSchema(t, et)
	}
	for _, et := range EventTypes {
		t.Run(string(et), func(t *testing.T) {
			example := readExample(t, et)
			for other, s := range compiled {
				err := validateJSON(s, example)
				if other == et && err != nil {
					t.Errorf("the example does not validate: %v", err)
				}
				if other != et && err == nil {
					t.Errorf("the example validates against the schema of %s", other)
				}
			}
			e, err := decodeStrict(example)
			if err != nil {
				t.Fatalf("the example is no valid Event: %v", err)
			}
			m, err := NewMessage("msg_1", e)
			if err != nil {
				t.Fatal(err)
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, example); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(m.Body, compact.Bytes()) {
				t.Errorf("NewMessage encodes\n%s\nthe example is\n%s", m.Body, compact.Bytes())
			}
		})
	}
}

// TestWrongPayloadsDoNotValidate checks, for a table of payloads each wrong in one way, that
// the schema refuses it and so does the Go side (a strict decode and Validate).
func TestWrongPayloadsDoNotValidate(t *testing.T) {
	key, err := apikey.Generate(apikey.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		et     EventType
		change func(p map[string]any, data map[string]any)
	}{
		{"a whole key for a hint", KeyRevealed, func(_, d map[string]any) { d["keyHint"] = key }},
		{"a whole key for the previous hint", KeyRotated, func(_, d map[string]any) { d["previousKeyHint"] = key }},
		{"a key in a field of its own", KeyCreated, func(_, d map[string]any) { d["key"] = key }},
		{"a top-level field of its own", KeyCreated, func(p, _ map[string]any) { p["id"] = "x" }},
		{"another type", KeyCreated, func(p, _ map[string]any) { p["type"] = string(KeyLeaked) }},
		{"no timestamp", KeyRevoked, func(p, _ map[string]any) { delete(p, "timestamp") }},
		{"a timestamp that is no date-time", KeyRevoked, func(p, _ map[string]any) { p["timestamp"] = "yesterday" }},
		{"no name", KeyCreated, func(_, d map[string]any) { delete(d, "name") }},
		{"a name that is no Kubernetes name", KeyCreated, func(_, d map[string]any) { d["name"] = "Billing API" }},
		{"key generation 0", KeyCreated, func(_, d map[string]any) { d["keyGeneration"] = 0 }},
		{"key generation as a string", KeyCreated, func(_, d map[string]any) { d["keyGeneration"] = "1" }},
		{"leaked without url", KeyLeaked, func(_, d map[string]any) { delete(d, "url") }},
		{"leaked with a relative url", KeyLeaked, func(_, d map[string]any) { d["url"] = "config.env" }},
		{"a url elsewhere than leaked", KeyRevoked, func(_, d map[string]any) { d["url"] = "https://example.com" }},
		{"expiring without expiresAt", KeyExpiring, func(_, d map[string]any) { delete(d, "expiresAt") }},
		{"expiresAt elsewhere", KeyCreated, func(_, d map[string]any) { d["expiresAt"] = "2026-12-04T09:00:00Z" }},
		{"a previous hint elsewhere", KeyCreated, func(_, d map[string]any) { d["previousKeyHint"] = "sb_live_AbCd…wxyz" }},
		{"lastUsedAt that is no date-time", KeyExpired, func(_, d map[string]any) { d["lastUsedAt"] = "never" }},
		{"a reason too long", KeyRevoked, func(_, d map[string]any) { d["reason"] = strings.Repeat("é", 1025) }},
		{"credits_low without credits", KeyCreditsLow, func(_, d map[string]any) { delete(d, "credits") }},
		{"credits_low without a threshold", KeyCreditsLow, func(_, d map[string]any) { delete(d["credits"].(map[string]any), "thresholdPercent") }},
		{"credits_low at a threshold of its own", KeyCreditsLow, func(_, d map[string]any) { d["credits"].(map[string]any)["thresholdPercent"] = 85 }},
		{"a threshold in credits_exhausted", KeyCreditsExhausted, func(_, d map[string]any) { d["credits"].(map[string]any)["thresholdPercent"] = 90 }},
		{"credits elsewhere", KeyRevoked, func(_, d map[string]any) {
			d["credits"] = map[string]any{"period": "M1", "periodEnd": "2026-12-01T00:00:00Z", "used": 1, "remaining": 0, "amount": 1}
		}},
		{"a negative balance", KeyCreditsExhausted, func(_, d map[string]any) { d["credits"].(map[string]any)["remaining"] = -1 }},
		{"no period end", KeyCreditsRefilled, func(_, d map[string]any) { delete(d["credits"].(map[string]any), "periodEnd") }},
		{"a period too long", KeyCreditsRefilled, func(_, d map[string]any) { d["credits"].(map[string]any)["period"] = strings.Repeat("M", 33) }},
		{"a field of its own in credits", KeyCreditsLow, func(_, d map[string]any) { d["credits"].(map[string]any)["key"] = key }},
		{"misused without misuse", KeyMisused, func(_, d map[string]any) { delete(d, "misuse") }},
		{"misuse elsewhere", KeyRevoked, func(_, d map[string]any) {
			d["misuse"] = map[string]any{"mode": "Enforce", "misuses": 1, "lastMisuseAt": "2026-12-01T00:00:00Z"}
		}},
		{"no misuse counted", KeyMisused, func(_, d map[string]any) { d["misuse"].(map[string]any)["misuses"] = 0 }},
		{"a mode of its own", KeyMisused, func(_, d map[string]any) { d["misuse"].(map[string]any)["mode"] = "Audit" }},
		{"no lastMisuseAt", KeyMisused, func(_, d map[string]any) { delete(d["misuse"].(map[string]any), "lastMisuseAt") }},
		{"a key for a principal", KeyMisused, func(_, d map[string]any) {
			d["misuse"].(map[string]any)["presenters"].([]any)[0].(map[string]any)["principal"] = key
		}},
		{"a key for an address", KeyMisused, func(_, d map[string]any) {
			d["misuse"].(map[string]any)["presenters"].([]any)[0].(map[string]any)["address"] = key
		}},
		{"nine presenters", KeyMisused, func(_, d map[string]any) {
			m := d["misuse"].(map[string]any)
			p := m["presenters"].([]any)
			for len(p) < 9 {
				p = append(p, p[0])
			}
			m["presenters"] = p
		}},
		{"a field of its own in misuse", KeyMisused, func(_, d map[string]any) { d["misuse"].(map[string]any)["key"] = key }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p map[string]any
			if err := json.Unmarshal(readExample(t, tc.et), &p); err != nil {
				t.Fatal(err)
			}
			tc.change(p, p["data"].(map[string]any))
			payload, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := validateJSON(compileSchema(t, tc.et), payload); err == nil {
				t.Errorf("the schema of %s validates %s", tc.et, payload)
			}
			if _, err := decodeStrict(payload); err == nil {
				t.Errorf("Event.Validate accepts %s", payload)
			}
		})
	}
}

// TestNewMessageNeverCarriesAKey checks that NewMessage refuses an event whose hint is a key,
// and says so without quoting it.
func TestNewMessageNeverCarriesAKey(t *testing.T) {
	key, err := apikey.Generate(apikey.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	e := Event{Type: KeyCreated, Timestamp: time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC),
		Data: KeyData{Namespace: "team-a", Name: "billing-api", KeyGeneration: 1, KeyHint: key}}
	if _, err := NewMessage("msg_1", e); err == nil || strings.Contains(err.Error(), key) {
		t.Errorf("NewMessage with a key for hint: %v", err)
	}
	e.Data.KeyHint = apikey.Hint(key)
	m, err := NewMessage("msg_1", e)
	if err != nil {
		t.Fatalf("NewMessage refuses apikey.Hint's hint: %v", err)
	}
	if bytes.Contains(m.Body, []byte(key)) {
		t.Error("the body holds the key")
	}
	if _, err := NewMessage("msg.1", e); err == nil {
		t.Error("NewMessage accepted an id with a dot")
	}
	e.Type = "apikey.borrowed"
	if _, err := NewMessage("msg_1", e); err == nil {
		t.Error("NewMessage accepted an unknown type")
	}
}

// TestCreditsMustAddUp: a balance whose used and remaining do not make its amount is refused
// (the schema cannot say it; Validate does), and so is one beyond the largest amount.
func TestCreditsMustAddUp(t *testing.T) {
	e := Event{Type: KeyCreditsExhausted, Timestamp: time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC),
		Data: KeyData{Namespace: "team-a", Name: "billing-api", KeyGeneration: 1, KeyHint: "sb_live_AbCd…wxyz",
			Credits: &CreditsData{Period: "M1", PeriodEnd: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Used: 100, Remaining: 0, Amount: 100}}}
	if err := e.Validate(); err != nil {
		t.Fatalf("a balance that adds up: %v", err)
	}
	e.Data.Credits.Amount = 1000
	if err := e.Validate(); err == nil {
		t.Error("Validate accepts used 100 + remaining 0 for an amount of 1000")
	}
	e.Data.Credits.Used, e.Data.Credits.Amount = 9<<40, 9<<40
	if err := e.Validate(); err != nil {
		t.Errorf("a period of a full cap and 8 full grants (9 × 2^40): %v", err)
	}
	e.Data.Credits.Used, e.Data.Credits.Amount = 9<<40+1, 9<<40+1
	if err := e.Validate(); err == nil {
		t.Error("Validate accepts an amount beyond 9 × 2^40, what a cap and 8 grants hold")
	}
}
