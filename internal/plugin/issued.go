package plugin

import (
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// keyResult is the -o json shape of a key shown once.
type keyResult struct {
	Name      string  `json:"name"`
	Namespace string  `json:"namespace"`
	Key       string  `json:"key"`
	Hint      string  `json:"hint"`
	ExpiresAt *string `json:"expires_at"`
}

// deliveredResult is the -o json shape of a key delivered into a Secret.
type deliveredResult struct {
	Name       string  `json:"name"`
	Namespace  string  `json:"namespace"`
	SecretName string  `json:"secret_name"`
	Hint       string  `json:"hint"`
	ExpiresAt  *string `json:"expires_at"`
}

// printIssued shows a key handed over: where it was delivered, or the key itself, once, on
// stdout with a warning on stderr. done is the past participle for messages ("created"); note
// ends the warning.
func printIssued(o *Options, issued *keyclient.Issued, output, done, note string) error {
	k := issued.APIKey
	var expires *string
	if k.Spec.ExpiresAt != nil {
		s := k.Spec.ExpiresAt.UTC().Format(time.RFC3339)
		expires = &s
	}
	if stolen := stolenWarning(issued); stolen != "" {
		fmt.Fprintln(o.ErrOut, stolen)
	}
	if issued.Delivered() {
		if output == outputJSON {
			return writeJSON(o.Out, deliveredResult{Name: k.Name, Namespace: k.Namespace, SecretName: k.Spec.SecretName, Hint: issued.Hint(), ExpiresAt: expires})
		}
		fmt.Fprintf(o.Out, "APIKey %q %s (hint %s); its key is in Secret %q of namespace %q, data key %q.%s\n",
			k.Name, done, issued.Hint(), k.Spec.SecretName, k.Namespace, keysecret.DataKey, note)
		return nil
	}
	var err error
	if output == outputJSON {
		err = writeJSON(o.Out, keyResult{Name: k.Name, Namespace: k.Namespace, Key: issued.Revealed.Key, Hint: issued.Hint(), ExpiresAt: expires})
	} else {
		_, err = fmt.Fprintln(o.Out, issued.Revealed.Key)
	}
	if err != nil {
		return fmt.Errorf("printing the key: %w", err)
	}
	fmt.Fprintf(o.ErrOut, "Warning: APIKey %s/%s %s (hint %s). This key will not be shown again: store it now.%s\n",
		k.Namespace, k.Name, done, issued.Hint(), note)
	return nil
}

// stolenWarning says, loudly, that keys this rotation issued were claimed by someone else and
// stopped, and what that cost: the replaced key's grace period. "" when nothing was stolen.
func stolenWarning(issued *keyclient.Issued) string {
	if len(issued.Stolen) == 0 {
		return ""
	}
	k := issued.APIKey
	return fmt.Sprintf("WARNING: someone else claimed the new key of APIKey %s/%s (%s) before you. It was stopped at once by rotating again with no grace, "+
		"so it no longer works; because only one previous key is kept, the key this rotation replaced (%s) stopped working too, whatever --grace said. "+
		"Someone who may read and delete Secrets in namespace %q took it: review who may.",
		k.Namespace, k.Name, strings.Join(issued.Stolen, ", "), orDash(issued.Replaced), k.Namespace)
}
