{{/* Chart name, truncated to fit label values. */}}
{{- define "switchboard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Prefix of every resource name. */}}
{{- define "switchboard.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "switchboard.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels on every object. */}}
{{- define "switchboard.labels" -}}
helm.sh/chart: {{ include "switchboard.chart" . }}
app.kubernetes.io/name: {{ include "switchboard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: switchboard
{{- end -}}

{{/* Selector labels of one component: call with (dict "ctx" $ "component" "server"). */}}
{{- define "switchboard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "switchboard.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/*
The image of every switchboard container: repository@digest when image.digest is set (the tag is
then dropped, as cert-manager's chart does, so that the reference names one thing, the image
that was signed and verified), else repository:tag.
*/}}
{{- define "switchboard.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "switchboard.operatorServiceAccount" -}}
{{- if .Values.operator.serviceAccount.create -}}
{{- default (printf "%s-operator" (include "switchboard.fullname" .)) .Values.operator.serviceAccount.name -}}
{{- else -}}
{{- required "operator.serviceAccount.name is required when operator.serviceAccount.create is false" .Values.operator.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "switchboard.serverServiceAccount" -}}
{{- if .Values.server.serviceAccount.create -}}
{{- default (printf "%s-server" (include "switchboard.fullname" .)) .Values.server.serviceAccount.name -}}
{{- else -}}
{{- required "server.serviceAccount.name is required when server.serviceAccount.create is false" .Values.server.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "switchboard.webhooksServiceAccount" -}}
{{- if .Values.webhooks.serviceAccount.create -}}
{{- default (printf "%s-webhooks" (include "switchboard.fullname" .)) .Values.webhooks.serviceAccount.name -}}
{{- else -}}
{{- required "webhooks.serviceAccount.name is required when webhooks.serviceAccount.create is false" .Values.webhooks.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The namespace of the KeyWebhooks' signing secrets' copies, which the operator writes and the
webhook sender reads, and nothing else: "<release namespace>-webhook-signing" unless named. */}}
{{- define "switchboard.webhookSigningNamespace" -}}
{{- $ns := default (printf "%s-webhook-signing" .Release.Namespace) .Values.webhooks.signingNamespace.name -}}
{{- if gt (len $ns) 63 -}}
{{- fail (printf "webhooks.signingNamespace.name: %q is longer than a namespace's 63 characters; name a shorter one" $ns) -}}
{{- end -}}
{{- if eq $ns .Release.Namespace -}}
{{- fail "webhooks.signingNamespace.name must differ from the release namespace, whose every Secret the webhook sender could read otherwise" -}}
{{- end -}}
{{- $ns -}}
{{- end -}}

{{/* The restricted Pod Security Standard, for pods and containers. */}}
{{- define "switchboard.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "switchboard.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
privileged: false
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Environment every container gets: its namespace, the system namespace. */}}
{{- define "switchboard.podNamespaceEnv" -}}
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- end -}}

{{- define "switchboard.panelServiceAccount" -}}
{{- if .Values.panel.serviceAccount.create -}}
{{- default (printf "%s-panel" (include "switchboard.fullname" .)) .Values.panel.serviceAccount.name -}}
{{- else -}}
{{- required "panel.serviceAccount.name is required when panel.serviceAccount.create is false" .Values.panel.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The operator's reveal endpoint runs when the panel signs people in with impersonation: the
panel then claims each key it shows through the operator (internal/operator/reveal), with no right of
its own on Secrets. "true" or "".
*/}}
{{- define "switchboard.revealEnabled" -}}
{{- if and .Values.panel.enabled .Values.panel.separate .Values.panel.oidc.enabled (eq .Values.panel.oidc.mode "impersonate") -}}true{{- end -}}
{{- end }}

{{/* The reveal endpoint's Service, port and CA bundle ConfigMap. */}}
{{- define "switchboard.revealService" -}}{{ include "switchboard.fullname" . }}-reveal{{- end }}
{{- define "switchboard.revealPort" -}}9445{{- end }}
{{- define "switchboard.revealBundle" -}}{{ include "switchboard.fullname" . }}-reveal-ca{{- end }}

{{/* The operator's admission webhook: its Service, port and configuration. */}}
{{- define "switchboard.webhookService" -}}{{ include "switchboard.fullname" . }}-webhook{{- end }}
{{- define "switchboard.webhookPort" -}}9443{{- end }}
{{- define "switchboard.webhookConfiguration" -}}{{ include "switchboard.fullname" . }}-apikey-windows{{- end }}
