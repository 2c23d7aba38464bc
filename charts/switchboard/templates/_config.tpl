{{/*
The components' configuration files (config.switchboard.dev/v1alpha1, docs/configuration.md),
built from the values: each is a dict rendered by toYaml, so that every string is quoted as YAML
needs and every integer stays one (int64: a float such as 1.6777216e+07 would not decode). The
values keep their meaning: a negative bound is none (the configuration's 0). No Secret's value
is ever here: the files name the mounted files that hold them.
*/}}

{{/* The configuration's bound: negative is none (0). */}}
{{- define "switchboard.bound" -}}
{{- if lt (float64 .) 0.0 }}0{{ else }}{{ . }}{{ end -}}
{{- end }}

{{- define "switchboard.serverConfig" -}}
{{- $v := .Values.server -}}
{{- $c := dict
  "apiVersion" "config.switchboard.dev/v1alpha1"
  "kind" "ServerConfiguration"
  "listen" ":8080"
  "systemNamespace" .Release.Namespace
  "keyPrefix" .Values.keyPrefix
  "audience" $v.audience
  "metricsBindAddress" (ternary ":8081" "" .Values.metrics.enabled)
  "metricsSecure" .Values.metrics.secure
  "healthProbeBindAddress" ":8082"
  "peersAreProxies" (and .Values.ingress.enabled .Values.ingress.withoutTrustedProxies | default false)
  "maxInFlightBytesPerNamespace" (int64 $v.maxInFlightBytesPerNamespace)
  "maxConnections" (int64 $v.maxConnections)
  "maxConnectionsPerClient" (int64 $v.maxConnectionsPerClient)
  "authFailureLimit" (dict "burst" (int64 $v.authFailureBurst))
  "lastUsed" (dict "interval" $v.lastUsed.interval "writesPerSecond" (float64 $v.lastUsed.writesPerSecond))
  "binding" (dict "serviceAccountTokens" $v.binding.serviceAccountTokens "tokenAudience" $v.binding.tokenAudience "trustDomain" $v.binding.trustDomain "clientCertHeader" $v.binding.clientCertHeader)
-}}
{{- /* A rate of 0 asked for the default, as its flag did. */ -}}
{{- if ne (float64 $v.authFailureRate) 0.0 }}{{ $_ := set $c.authFailureLimit "rate" (include "switchboard.bound" $v.authFailureRate | float64) }}{{ end -}}
{{- with $v.trustedProxies }}{{ $_ := set $c "trustedProxies" . }}{{ end -}}
{{- with $v.rateLimit.redis }}{{ if .url }}{{ $_ := set $c "rateLimitRedis" (dict "url" .url "timeout" .timeout) }}{{ end }}{{ end -}}
{{- /* Credits decided in memory are shared by as many replicas as may run: the autoscaler's most. */ -}}
{{- $replicas := ternary $v.autoscaling.maxReplicas $v.replicas $v.autoscaling.enabled -}}
{{- $_ := set $c "rateLimitCredits" (dict "onRedisFailure" $v.rateLimit.credits.onRedisFailure "replicas" (int64 $replicas)) -}}
{{- $authz := dict -}}
{{- with $v.authz.grpc }}{{ if .enabled -}}
{{- $g := dict "listen" ":9001" "maxMessageBytes" (int64 .maxMessageBytes) "stripAuthorization" .stripAuthorization -}}
{{- if .tls.secretName }}{{ $_ := set $g "tlsCertFile" "/etc/switchboard/authz-grpc-tls/tls.crt" }}{{ $_ := set $g "tlsKeyFile" "/etc/switchboard/authz-grpc-tls/tls.key" }}{{ end -}}
{{- if .tls.clientCASecretName }}{{ $_ := set $g "clientCAFile" "/etc/switchboard/authz-grpc-client-ca/ca.crt" }}{{ end -}}
{{- with .gateways }}{{ $_ := set $g "gateways" . }}{{ end -}}
{{- $_ := set $authz "grpc" $g -}}
{{- end }}{{ end -}}
{{- with $v.authz.http }}{{ if .enabled -}}
{{- $_ := set $authz "http" (dict "listen" ":9002" "maxConnections" (int64 .maxConnections) "maxConnectionsPerClient" (int64 .maxConnectionsPerClient)) -}}
{{- end }}{{ end -}}
{{- if $authz }}{{ $_ := set $c "authz" $authz }}{{ end -}}
{{- with $v.leakReports }}{{ if .enabled -}}
{{- /* Secrets are files of the mounted Secrets (server-deployment.yaml), never values. */ -}}
{{- $lr := dict "listen" ":9003" "maxBodyBytes" (int64 .maxBodyBytes) "maxBatch" (int64 .maxBatch) "rate" (float64 .rate) "burst" (int64 .burst) -}}
{{- $_ := set $lr "unverifiedLimit" (dict "rate" (float64 .unverifiedLimit.rate) "burst" (int64 .unverifiedLimit.burst) "clients" (int64 .unverifiedLimit.clients)) -}}
{{- $_ := set $lr "replays" (dict "entries" (int64 .replays.entries) "ttl" .replays.ttl) -}}
{{- $p := dict "enabled" .partner.enabled "publicKeysURL" .partner.publicKeysURL -}}
{{- if .partner.tokenSecret.name }}{{ $_ := set $p "tokenFile" "/etc/switchboard/leak-reports/partner-token/token" }}{{ end -}}
{{- $a := dict "apiBaseURL" .organizationAlerts.apiBaseURL "catchUp" (dict "period" .organizationAlerts.catchUp.period "maxRequests" (int64 .organizationAlerts.catchUp.maxRequests)) -}}
{{- if .organizationAlerts.organization }}{{ $_ := set $a "organization" .organizationAlerts.organization }}{{ end -}}
{{- if .organizationAlerts.webhookSecret.name -}}
{{- $_ := set $a "webhookSecretFile" "/etc/switchboard/leak-reports/webhook-secret/secret" -}}
{{- $_ := set $a "apiTokenFile" "/etc/switchboard/leak-reports/api-token/token" -}}
{{- end -}}
{{- $_ := set $lr "partner" $p -}}
{{- $_ := set $lr "organizationAlerts" $a -}}
{{- $_ := set $c "leakReports" $lr -}}
{{- end }}{{ end -}}
{{- if and .Values.panel.enabled (not .Values.panel.separate) -}}
{{- $_ := set $c "panel" (merge (dict "listen" ":8083") (include "switchboard.panelSettings" . | fromYaml)) -}}
{{- end -}}
{{- toYaml $c -}}
{{- end }}

{{/* The panel's settings, wherever it runs (PanelSettings). */}}
{{- define "switchboard.panelSettings" -}}
{{- $p := .Values.panel -}}
{{- toYaml (dict "secureCookies" $p.secureCookies "maxSessions" (int64 $p.maxSessions) "maxSessionsPerUser" (int64 $p.maxSessionsPerUser)
  "loginRate" (float64 $p.loginRate) "loginBurst" (int64 $p.loginBurst)) -}}
{{- end }}

{{- define "switchboard.panelConfig" -}}
{{- $c := dict
  "apiVersion" "config.switchboard.dev/v1alpha1"
  "kind" "PanelConfiguration"
  "listen" ":8083"
  "healthProbeBindAddress" ":8082"
-}}
{{- $c = merge $c (include "switchboard.panelSettings" . | fromYaml) -}}
{{- /* The sign-in limiter counts each person behind the ingress by the address it forwards. */ -}}
{{- with .Values.server.trustedProxies }}{{ $_ := set $c "trustedProxies" . }}{{ end -}}
{{- with .Values.panel.oidc }}{{ if .enabled -}}
{{- /* The client secret is a file from the Secret, never a value. */ -}}
{{- $o := dict "issuerURL" .issuerURL "clientID" .clientID "clientSecretFile" "/etc/switchboard/oidc/client-secret"
  "redirectURL" .redirectURL "scopes" .scopes "mode" .mode
  "usernameClaim" .claimMappings.username.claim "usernamePrefix" .claimMappings.username.prefix
  "groupsClaim" .claimMappings.groups.claim "groupsPrefix" .claimMappings.groups.prefix
  "allowLegacyImpersonation" .allowLegacyImpersonation -}}
{{- if include "switchboard.revealEnabled" $ -}}
{{- $_ := set $o "revealURL" (printf "https://%s.%s.svc:%s" (include "switchboard.revealService" $) $.Release.Namespace (include "switchboard.revealPort" $)) -}}
{{- $_ := set $o "revealCAConfigMap" (printf "%s/%s" $.Release.Namespace (include "switchboard.revealBundle" $)) -}}
{{- end -}}
{{- with .providerName }}{{ $_ := set $o "providerName" . }}{{ end -}}
{{- if .caConfigMap.name }}{{ $_ := set $o "caFile" "/etc/switchboard/oidc-ca/ca.crt" }}{{ end -}}
{{- $_ := set $c "oidc" $o -}}
{{- end }}{{ end -}}
{{- toYaml $c -}}
{{- end }}

{{- define "switchboard.operatorConfig" -}}
{{- $v := .Values.operator -}}
{{- $c := dict
  "apiVersion" "config.switchboard.dev/v1alpha1"
  "kind" "OperatorConfiguration"
  "systemNamespace" .Release.Namespace
  "keyPrefix" .Values.keyPrefix
  "revealTTL" $v.revealTTL
  "minRenewalIntervalPercentage" (include "switchboard.bound" $v.minRenewalIntervalPercentage | int64)
  "leakReportRetention" $v.leakReportRetention
  "leaderElect" true
  "metricsBindAddress" (ternary ":8080" "" .Values.metrics.enabled)
  "metricsSecure" .Values.metrics.secure
  "healthProbeBindAddress" ":8081"
-}}
{{- /* A negative interval is no floor (0s); a zero one asked for the default, as its flag did. */ -}}
{{- if hasPrefix "-" $v.minRenewalInterval }}{{ $_ := set $c "minRenewalInterval" "0s" }}
{{- else if not (regexMatch "^(0+(\\.0+)?(ns|us|µs|ms|s|m|h))+$" $v.minRenewalInterval) }}{{ $_ := set $c "minRenewalInterval" $v.minRenewalInterval }}{{ end -}}
{{- if $v.webhook.enabled -}}
{{- $_ := set $c "webhook" (dict "bindAddress" (printf ":%s" (include "switchboard.webhookPort" .)) "configurationName" (include "switchboard.webhookConfiguration" .)
  "names" (list (printf "%s.%s.svc" (include "switchboard.webhookService" .) .Release.Namespace))) -}}
{{- end -}}
{{- if include "switchboard.revealEnabled" . -}}
{{- $svc := include "switchboard.revealService" . -}}
{{- $_ := set $c "reveal" (dict "bindAddress" (printf ":%s" (include "switchboard.revealPort" .)) "caConfigMap" (include "switchboard.revealBundle" .)
  "names" (list $svc (printf "%s.%s" $svc .Release.Namespace) (printf "%s.%s.svc" $svc .Release.Namespace))) -}}
{{- end -}}
{{- /* The webhook sender reads this file too: the networks, also the operator's check of KeyWebhooks. */ -}}
{{- with .Values.webhooks -}}
{{- $_ := set $c "webhooks" (dict "deniedNetworks" .deniedNetworks "allowedNetworks" .allowedNetworks "allowHTTP" .allowHTTP
  "concurrency" (.concurrency | int64) "perNamespaceConcurrency" (.perNamespaceConcurrency | int64) "attemptTimeout" .attemptTimeout
  "signingNamespace" (include "switchboard.webhookSigningNamespace" $)) -}}
{{- end -}}
{{- toYaml $c -}}
{{- end }}
