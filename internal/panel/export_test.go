package panel

import (
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// InterceptUserClients makes the client of every session h signs in from now on go through
// wrap, so that a test can stage a race with another identity.
func InterceptUserClients(h http.Handler, wrap func(client.WithWatch) client.WithWatch) {
	h.(*handler).interceptUser = wrap
}
