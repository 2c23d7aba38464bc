package keyindex

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

var now = time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)

func mustKey(t testing.TB) string {
	t.Helper()
	k, err := apikey.Generate("sb")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func hashSecret(uid types.UID, current, previous string, until time.Time) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "apikey-" + string(uid), Labels: map[string]string{keysecret.LabelAPIKeyUID: string(uid)}},
		Type:       keysecret.TypeHash,
		Data:       map[string][]byte{keysecret.DataHash: []byte(apikey.Sum(current).String())},
	}
	if previous != "" {
		s.Data[keysecret.DataPreviousHash] = []byte(apikey.Sum(previous).String())
		s.Data[keysecret.DataPreviousValidUntil] = []byte(until.Format(time.RFC3339))
	}
	return s
}

func apiKey(uid types.UID, mutate func(*switchboardv1alpha1.APIKey)) *switchboardv1alpha1.APIKey {
	k := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: string(uid), UID: uid}}
	if mutate != nil {
		mutate(k)
	}
	return k
}

func lookup(x *Index, key string, at time.Time) Result {
	h := apikey.Sum(key)
	_, r := x.Lookup(&h, at)
	return r
}

func TestLookup(t *testing.T) {
	current, previous, other := mustKey(t), mustKey(t), mustKey(t)
	expiresAt := metav1.NewTime(now.Add(time.Hour))
	deleting := metav1.NewTime(now)
	tests := []struct {
		name   string
		secret *corev1.Secret
		key    *switchboardv1alpha1.APIKey
		try    string
		at     time.Time
		want   Result
	}{
		{"current key", hashSecret("u1", current, "", time.Time{}), apiKey("u1", nil), current, now, OK},
		{"unknown key", hashSecret("u1", current, "", time.Time{}), apiKey("u1", nil), other, now, Unknown},
		{"no APIKey in the cache", hashSecret("u1", current, "", time.Time{}), apiKey("u2", nil), current, now, Orphaned},
		{"revoked", hashSecret("u1", current, "", time.Time{}), apiKey("u1", func(k *switchboardv1alpha1.APIKey) { k.Spec.Revoked = true }), current, now, Revoked},
		{"being deleted", hashSecret("u1", current, "", time.Time{}), apiKey("u1", func(k *switchboardv1alpha1.APIKey) { k.DeletionTimestamp = &deleting }), current, now, Revoked},
		{"before expiry", hashSecret("u1", current, "", time.Time{}), apiKey("u1", func(k *switchboardv1alpha1.APIKey) { k.Spec.ExpiresAt = &expiresAt }), current, now, OK},
		{"at expiry", hashSecret("u1", current, "", time.Time{}), apiKey("u1", func(k *switchboardv1alpha1.APIKey) { k.Spec.ExpiresAt = &expiresAt }), current, now.Add(time.Hour), Expired},
		{"previous within grace", hashSecret("u1", current, previous, now.Add(time.Minute)), apiKey("u1", nil), previous, now, OK},
		{"previous at end of grace", hashSecret("u1", current, previous, now.Add(time.Minute)), apiKey("u1", nil), previous, now.Add(time.Minute), GraceEnded},
		{"current after a rotation", hashSecret("u1", current, previous, now), apiKey("u1", nil), current, now.Add(time.Hour), OK},
		{"revoked beats grace", hashSecret("u1", current, previous, now.Add(time.Minute)), apiKey("u1", func(k *switchboardv1alpha1.APIKey) { k.Spec.Revoked = true }), previous, now, Revoked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := New()
			if err := x.SetHashSecret(tt.secret); err != nil {
				t.Fatal(err)
			}
			if err := x.SetAPIKey(tt.key); err != nil {
				t.Fatal(err)
			}
			if got := lookup(x, tt.try, tt.at); got != tt.want {
				t.Errorf("Lookup = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestHashSecretChanges: updates replace a Secret's hashes, deletes remove them, and a Secret
// that breaks the contract contributes nothing.
func TestHashSecretChanges(t *testing.T) {
	first, second := mustKey(t), mustKey(t)
	x := New()
	if err := x.SetAPIKey(apiKey("u1", nil)); err != nil {
		t.Fatal(err)
	}
	if err := x.SetHashSecret(hashSecret("u1", first, "", time.Time{})); err != nil {
		t.Fatal(err)
	}
	// Rotation without grace: the first key goes at once.
	if err := x.SetHashSecret(hashSecret("u1", second, "", time.Time{})); err != nil {
		t.Fatal(err)
	}
	if lookup(x, first, now) != Unknown || lookup(x, second, now) != OK {
		t.Fatal("a replaced hash still authenticates, or the new one does not")
	}
	broken := []func(*corev1.Secret){
		func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque },
		func(s *corev1.Secret) { delete(s.Labels, keysecret.LabelAPIKeyUID) },
		func(s *corev1.Secret) { s.Data[keysecret.DataHash] = []byte("not hex") },
		func(s *corev1.Secret) { s.Data[keysecret.DataPreviousValidUntil] = []byte("soon") },
		func(s *corev1.Secret) { s.Data[keysecret.DataPreviousHash] = []byte("abc") },
	}
	for i, mutate := range broken {
		s := hashSecret("u1", second, first, now.Add(time.Hour))
		mutate(s)
		if err := x.SetHashSecret(s); err == nil {
			t.Errorf("broken Secret %d was accepted", i)
		}
		if lookup(x, second, now) != Unknown || lookup(x, first, now) != Unknown {
			t.Errorf("broken Secret %d left a hash that authenticates", i)
		}
	}
	if err := x.SetHashSecret(hashSecret("u1", second, "", time.Time{})); err != nil {
		t.Fatal(err)
	}
	x.DeleteHashSecret("apikey-u1")
	if lookup(x, second, now) != Unknown {
		t.Error("a deleted hash Secret still authenticates")
	}
	if s := x.Stats(); s.Hashes != 0 {
		t.Errorf("%d hashes left", s.Hashes)
	}
	x.DeleteAPIKey("u1")
	if s := x.Stats(); s.Keys != 0 {
		t.Errorf("%d keys left", s.Keys)
	}
}

func TestSelector(t *testing.T) {
	x := New()
	err := x.SetAPIKey(apiKey("u1", func(k *switchboardv1alpha1.APIKey) {
		k.Spec.ConnectionSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}
	}))
	if err == nil {
		t.Fatal("an invalid selector was accepted silently")
	}
	if err := x.SetHashSecret(hashSecret("u1", mustKey(t), "", time.Time{})); err != nil {
		t.Fatal(err)
	}
	for _, k := range x.Keys() {
		if k.Selector == nil || !k.Selector.Empty() && k.Selector.Matches(nil) {
			t.Error("an invalid selector must match nothing")
		}
	}
	if err := x.SetAPIKey(apiKey("u2", func(k *switchboardv1alpha1.APIKey) { k.Spec.ConnectionSelector = &metav1.LabelSelector{} })); err != nil {
		t.Fatal(err)
	}
	for _, k := range x.Keys() {
		if k.UID == "u2" && k.Selector != nil {
			t.Error("an empty selector must mean every Connection (nil)")
		}
	}
}

func connection(ns, name, id string, created time.Time) *switchboardv1alpha1.Connection {
	return &switchboardv1alpha1.Connection{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(created), Labels: map[string]string{"n": name}},
		Spec: switchboardv1alpha1.ConnectionSpec{
			DisplayName: "D " + name, Provider: "postgres", Metadata: map[string]string{"b": "2", "a": "1"},
			CredentialsSecretRef: &corev1.LocalObjectReference{Name: "top-secret"},
		},
		Status: switchboardv1alpha1.ConnectionStatus{ID: id},
	}
}

func listIDs(s *Snapshot) string {
	var ids []string
	for _, c := range s.Items() {
		ids = append(ids, c.ID+"/"+c.Name)
	}
	return strings.Join(ids, ",")
}

func TestConnections(t *testing.T) {
	x := New()
	set := func(c *switchboardv1alpha1.Connection) {
		t.Helper()
		if err := x.SetConnection(c); err != nil {
			t.Fatal(err)
		}
	}
	set(connection("a", "c", "conn_3", now))
	set(connection("a", "a", "conn_1", now))
	set(connection("a", "b", "conn_2", now))
	set(connection("a", "dup", "conn_2", now)) // same id, ordered by name
	set(connection("a", "noid", "", now))
	set(connection("b", "z", "conn_0", now))
	if got, want := listIDs(x.Connections("a")), "conn_1/a,conn_2/b,conn_2/dup,conn_3/c"; got != want {
		t.Fatalf("namespace a = %s, want %s", got, want)
	}
	before := x.Connections("a")
	beforeBody, beforeTag := before.Body().Body, before.Body().ETag
	set(connection("a", "a", "conn_9", now)) // moves to the end
	x.DeleteConnection("a", "b")
	if got, want := listIDs(x.Connections("a")), "conn_2/dup,conn_3/c,conn_9/a"; got != want {
		t.Errorf("after changes = %s, want %s", got, want)
	}
	if got := listIDs(before); got != "conn_1/a,conn_2/b,conn_2/dup,conn_3/c" {
		t.Errorf("an earlier snapshot changed: %s", got)
	}
	list := x.Connections("a").Body()
	body, tag := list.Body, list.ETag
	if list.LengthHeader[0] != strconv.Itoa(len(body)) || list.ETagHeader[0] != tag {
		t.Errorf("header values %v %v do not describe the body", list.LengthHeader, list.ETagHeader)
	}
	if tag == beforeTag || string(body) == string(beforeBody) {
		t.Error("the ETag or body did not change with the list")
	}
	x.DeleteConnection("b", "z")
	if b := x.Connections("b").Body().Body; string(b) != `{"connections":[]}` {
		t.Errorf("empty namespace = %s", b)
	}
	if b := x.Connections("nowhere").Body().Body; string(b) != `{"connections":[]}` {
		t.Errorf("unknown namespace = %s", b)
	}
	// Losing its id removes a Connection from the list.
	set(connection("a", "c", "", now))
	if got := listIDs(x.Connections("a")); got != "conn_2/dup,conn_9/a" {
		t.Errorf("after c lost its id: %s", got)
	}
	sel := labels.SelectorFromSet(labels.Set{"n": "dup"})
	selected := x.Connections("a").SelectedBody(sel.String(), sel)
	body, tag = selected.Body, selected.ETag
	if !strings.Contains(string(body), `"name":"dup"`) || strings.Contains(string(body), `"name":"a"`) || tag == "" {
		t.Errorf("selected body = %s", body)
	}
	if again := x.Connections("a").SelectedBody(sel.String(), sel); &again.Body[0] != &body[0] {
		t.Error("the selected body is not cached")
	}
	if got := After(x.Connections("a").Items(), "conn_2", "dup"); got != 1 {
		t.Errorf("After = %d, want 1", got)
	}
	if got := After(x.Connections("a").Items(), "conn_5", "zzz"); got != 1 {
		t.Errorf("After a missing key = %d, want 1", got)
	}
}

func TestEncodeConnection(t *testing.T) {
	raw, err := EncodeConnection(connection("a", "warehouse", "conn_1", now))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"conn_1","name":"warehouse","display_name":"D warehouse","provider":"postgres","metadata":{"a":"1","b":"2"},"created_at":"2026-11-22T04:00:00Z"}`
	if string(raw) != want {
		t.Errorf("got  %s\nwant %s", raw, want)
	}
	bare := connection("a", "bare", "conn_2", now)
	bare.Spec = switchboardv1alpha1.ConnectionSpec{}
	raw, err = EncodeConnection(bare)
	if err != nil {
		t.Fatal(err)
	}
	want = `{"id":"conn_2","name":"bare","display_name":null,"provider":null,"metadata":{},"created_at":"2026-11-22T04:00:00Z"}`
	if string(raw) != want {
		t.Errorf("got  %s\nwant %s", raw, want)
	}
	if !json.Valid(raw) {
		t.Error("not JSON")
	}
}

func TestUsage(t *testing.T) {
	x := New()
	if err := x.SetAPIKey(apiKey("u1", nil)); err != nil {
		t.Fatal(err)
	}
	u := x.Keys()[0].Usage()
	u.Touch(now)
	u.Touch(now.Add(500 * time.Millisecond)) // within a second: not stored
	if !u.LastUsed().Equal(now) {
		t.Errorf("LastUsed = %v, want %v", u.LastUsed(), now)
	}
	// An update of the APIKey keeps its usage record.
	if err := x.SetAPIKey(apiKey("u1", func(k *switchboardv1alpha1.APIKey) { k.Status.KeyHint = "h" })); err != nil {
		t.Fatal(err)
	}
	if x.Keys()[0].Usage() != u {
		t.Error("an update lost the usage record")
	}
	u.MarkWritten(now, now.Add(time.Second))
	if !u.LastWritten().Equal(now) || !u.WrittenAt().Equal(now.Add(time.Second)) {
		t.Error("MarkWritten did not record")
	}
}

// benchIndex holds n keys and returns one valid key.
func benchIndex(b *testing.B, n int) (*Index, string) {
	x := New()
	var key string
	for i := range n {
		key = mustKey(b)
		uid := types.UID(fmt.Sprintf("uid-%d", i))
		if err := x.SetAPIKey(apiKey(uid, nil)); err != nil {
			b.Fatal(err)
		}
		if err := x.SetHashSecret(hashSecret(uid, key, "", time.Time{})); err != nil {
			b.Fatal(err)
		}
	}
	return x, key
}

func BenchmarkLookup(b *testing.B) {
	x, key := benchIndex(b, 10000)
	h := apikey.Sum(key)
	b.ReportAllocs()
	for b.Loop() {
		if _, r := x.Lookup(&h, now); r != OK {
			b.Fatal(r)
		}
	}
}

func benchSnapshot(b *testing.B, n int) *Snapshot {
	x := New()
	for i := range n {
		if err := x.SetConnection(connection("ns", fmt.Sprintf("c%05d", i), fmt.Sprintf("conn_%05d", i), now)); err != nil {
			b.Fatal(err)
		}
	}
	return x.Connections("ns")
}

// BenchmarkAppendList measures building a list response from pre-encoded Connections, the
// per-request work for a key with a selector or a page.
func BenchmarkAppendList(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			items := benchSnapshot(b, n).Items()
			buf := make([]byte, 0, 1<<20)
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendList(buf[:0], items)
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}

// BenchmarkEncodeConnection measures the one-time encoding done when a Connection changes.
func BenchmarkEncodeConnection(b *testing.B) {
	c := connection("ns", "warehouse", "conn_1", now)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeConnection(c); err != nil {
			b.Fatal(err)
		}
	}
}

func sumOf(key string) apikey.Hash { return apikey.Sum(key) }
