package webhooksender

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/internal/metrics"
)

// The sender's metrics, on controller-runtime's registry (served with the controllers' own).
var (
	metricAttempts = metrics.Registered.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_webhook_attempts_total", Help: "Delivery attempts by outcome: delivered, retry (failed, attempted again later), disable (410 Gone), giveup (the last attempt failed)."}, []string{"outcome"})
	metricDropped  = metrics.Registered.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_webhook_dropped_total", Help: "Key events never delivered, by reason: gave_up (every attempt failed), disabled (the endpoint answered 410 Gone), webhook_deleted (its KeyWebhook is gone)."}, []string{"reason"})
	metricPending  = metrics.Registered.NewGauge(prometheus.GaugeOpts{Name: "switchboard_webhook_pending", Help: "Key events waiting in the outboxes for delivery, as the leading sender last saw them."})
)
