//go:build !unit

package plugin

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
)

// TestCanIAgreesWithTheServer: for every row, `key can-i` answers what the real /v1 server
// answers the same key, method and path: yes where the server lets the request past the key's
// policy, and no with the server's code and (for permissions) its very message where it refuses.
func TestCanIAgreesWithTheServer(t *testing.T) {
	ns := env.Namespace(t, "cani")
	r := admin(t, ns, "key", "create", "reader", "-o", "json", "--timeout", "30s")
	mustSucceed(t, r)
	var created keyResult
	if err := json.Unmarshal([]byte(r.stdout), &created); err != nil {
		t.Fatal(err)
	}
	// A role follows the key's own rules: its deny and allow decide what they leave.
	writer := &switchboardv1alpha1.APIKeyRole{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "writer"}, Spec: switchboardv1alpha1.APIKeyRoleSpec{Rules: []switchboardv1alpha1.PermissionRule{
		{Effect: switchboardv1alpha1.PermissionDeny, Methods: []switchboardv1alpha1.HTTPMethod{"PUT"}, Paths: []string{"/v1/**"}},
		{Effect: switchboardv1alpha1.PermissionAllow, Methods: []switchboardv1alpha1.HTTPMethod{"POST"}, Paths: []string{"/v1/connections"}},
	}}}
	if err := env.Client.Create(testContext(t), writer); err != nil {
		t.Fatal(err)
	}
	k := getAPIKey(t, ns, "reader")
	before := k.DeepCopy()
	k.Spec.PermissionRoles = []string{"writer"}
	k.Spec.AllowedSourceRanges = []switchboardv1alpha1.CIDR{"127.0.0.0/8"}
	k.Spec.Permissions = []switchboardv1alpha1.PermissionRule{
		{Effect: switchboardv1alpha1.PermissionDeny, Methods: []switchboardv1alpha1.HTTPMethod{"DELETE"}, Paths: []string{"/v1/**"}},
		{Effect: switchboardv1alpha1.PermissionAllow, Methods: []switchboardv1alpha1.HTTPMethod{"GET", "HEAD"}, Paths: []string{"/v1/connections"}},
		{Effect: switchboardv1alpha1.PermissionAllow, Methods: []switchboardv1alpha1.HTTPMethod{"GET"}, Paths: []string{"/v1/connections/{id}"},
			Condition: `request.params.id.startsWith("conn_")`},
	}
	if err := env.Client.Patch(testContext(t), k, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	// The server holds the rules once it refuses what only they refuse.
	deadline := time.Now().Add(20 * time.Second)
	for ask(t, created.Key, http.MethodGet, "/v1/other").code != apicode.PermissionDenied {
		if time.Now().After(deadline) {
			t.Fatal("the server did not take the key's permissions")
		}
		time.Sleep(50 * time.Millisecond)
	}

	for _, row := range []struct {
		method, path string
		allowed      bool // what the rules say, so that the rows cover both answers
	}{
		{"GET", "/v1/connections", true},
		{"HEAD", "/v1/connections", true},
		{"GET", "/v1/connections/conn_1", true},
		{"GET", "/v1/connections/other", false},
		{"DELETE", "/v1/connections/conn_1", false},
		{"PUT", "/v1/connections", false},
		{"POST", "/v1/connections", true},
		{"POST", "/v1/connections/conn_1", false},
		{"GET", "/v1/other", false},
		{"GET", "/v1/conn%65ctions", true},
		{"GET", "/v1/connections/..%2Fsecrets", false},
	} {
		server := ask(t, created.Key, row.method, row.path)
		got := admin(t, ns, "key", "can-i", "reader", row.method, row.path, "--source", "127.0.0.1")
		yes := got.code == 0 && got.stdout == "yes\n"
		if yes != row.allowed {
			t.Errorf("can-i %s %s: exit %d, %q; want allowed=%v", row.method, row.path, got.code, got.stdout, row.allowed)
		}
		if serverRefused := server.status == http.StatusForbidden; serverRefused == yes {
			t.Errorf("%s %s: the server answered %d %s, can-i %q", row.method, row.path, server.status, server.code, got.stdout)
		}
		if !yes {
			want := "no: 403 " + server.code + ": " + server.message + "\n"
			if got.code != 1 || got.stdout != want || got.stderr != "" {
				t.Errorf("can-i %s %s: exit %d, %q (stderr %q); want exit 1, %q", row.method, row.path, got.code, got.stdout, got.stderr, want)
			}
		}
	}

	// The audiences and source ranges come first, as on the server.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--source", "10.0.0.1"}, "no: 403 " + apicode.SourceNotAllowed},
		{nil, "no: 403 " + apicode.SourceNotAllowed},
		{[]string{"--source", "127.0.0.1", "--audience", "billing"}, "yes"},
	} {
		got := admin(t, ns, append([]string{"key", "can-i", "reader", "GET", "/v1/connections"}, tc.args...)...)
		if !strings.HasPrefix(got.stdout, tc.want) {
			t.Errorf("can-i %v: %q, want %q…", tc.args, got.stdout, tc.want)
		}
	}
	k = getAPIKey(t, ns, "reader")
	before = k.DeepCopy()
	k.Spec.Audiences = []switchboardv1alpha1.Audience{"connections"}
	if err := env.Client.Patch(testContext(t), k, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	if got := admin(t, ns, "key", "can-i", "reader", "GET", "/v1/connections", "--source", "127.0.0.1", "--audience", "billing"); got.code != 1 ||
		!strings.HasPrefix(got.stdout, "no: 403 "+apicode.AudienceNotAllowed) {
		t.Errorf("another audience: exit %d, %q", got.code, got.stdout)
	}

	// A role that does not exist refuses everything, on the server and in can-i alike.
	k = getAPIKey(t, ns, "reader")
	before = k.DeepCopy()
	k.Spec.PermissionRoles = []string{"writer", "absent"}
	if err := env.Client.Patch(testContext(t), k, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	const absent = "no: 403 " + apicode.PermissionDenied + ": permissions role absent does not exist\n"
	for deadline := time.Now().Add(20 * time.Second); ask(t, created.Key, http.MethodGet, "/v1/connections").message != "permissions role absent does not exist"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the server did not take the missing role")
		}
	}
	if got := admin(t, ns, "key", "can-i", "reader", "GET", "/v1/connections", "--source", "127.0.0.1"); got.code != 1 || got.stdout != absent {
		t.Errorf("can-i with a missing role: exit %d, %q; want %q", got.code, got.stdout, absent)
	}
}

// answerOf is the server's answer to one request.
type answerOf struct {
	status        int
	code, message string
}

// ask makes method path on the /v1 server with key.
func ask(t *testing.T, key, method, path string) answerOf {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), method, sys.APIURL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body) // a 200's or a HEAD's body has no error
	return answerOf{resp.StatusCode, body.Error.Code, body.Error.Message}
}
