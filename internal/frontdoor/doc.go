// Package frontdoor builds switchboard's serving listeners with the limits every one of them
// keeps whoever connects: how many connections (in all and per client address), how long each
// phase, how large a message, and how much memory all requests being read and decoded at once
// may take. A listener built here starts hardened; docs/security.md names each limit and the
// test that attacks it. Every door of the product (the API port, forward-auth, ext_authz over
// gRPC, the panel, metrics, probes, the reveal endpoint and the admission webhook) is one of
// this package's, listed in its table (table.go). A process declares each of its listeners
// (Listener: its door, its address, what it serves) to a Group, which opens, serves and drains
// them: the product's one way to open a serving socket.
package frontdoor
