package main

import (
	"context"

	"github.com/switchboard-dev/switchboard/internal/webhooksender"
)

// webhooksComponent is `switchboard webhooks`.
var webhooksComponent = component[*oc]{
	use:   "webhooks",
	short: "Send key events to tenants' KeyWebhooks (Standard Webhooks), from the outboxes of the system namespace",
	long: `Deliver the key events the operator records in the WebhookOutboxes of the system namespace to
the endpoints tenants subscribe with KeyWebhooks, signed in the Standard Webhooks format, at least
once, retried on the specification's schedule, and never to loopback, link-local, the cloud
metadata endpoints or the networks the platform denies (NAT64 and 6to4 addresses judged by the
IPv4 address they carry). It is the one component that needs egress to the internet. Replicas elect a
leader. It reads the operator's configuration file (--config): its webhooks section, and the
settings it shares with the operator (systemNamespace, leaderElect, metrics, probes, API client).`,
	bind: func(f *configFlags[*oc]) {
		value(f, "system-namespace", "namespace of the outboxes, the signing secrets' copies and the leader election Lease; $POD_NAMESPACE when set",
			func(c *oc) *string { return &c.SystemNamespace })
		optional(f, "leader-elect", "elect one sending replica through a Lease", func(c *oc) **bool { return &c.LeaderElect })
		bindOperatorListenerFlags(f)
	},
	systemNamespace: func(c *oc) *string { return &c.SystemNamespace },
	run: func(ctx context.Context, c *oc, p process) error {
		return webhooksender.Run(ctx, c, webhooksender.Deps{RESTConfig: p.rest, Logger: p.log})
	},
}
