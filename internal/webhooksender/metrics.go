package webhooksender

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The sender's metrics, registered as they are made with controller-runtime's registry (served
// with the controllers' own).
var (
	registered     = promauto.With(ctrlmetrics.Registry)
	metricAttempts = registered.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_webhook_attempts_total", Help: "Delivery attempts by outcome: delivered, retry (failed, attempted again later), disable (410 Gone), giveup (the last attempt failed)."}, []string{"outcome"})
	metricDropped  = registered.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_webhook_dropped_total", Help: "Key events never delivered, by reason: gave_up (every attempt failed), disabled (the endpoint answered 410 Gone), webhook_deleted (its KeyWebhook is gone)."}, []string{"reason"})
	metricPending  = registered.NewGauge(prometheus.GaugeOpts{Name: "switchboard_webhook_pending", Help: "Key events waiting in the outboxes for delivery, as the leading sender last saw them."})
)
