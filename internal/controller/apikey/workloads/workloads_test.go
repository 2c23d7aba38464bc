package workloads

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestUseOf(t *testing.T) {
	secretVolume := corev1.Volume{Name: "key", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "app-key"}}}
	projected := corev1.Volume{Name: "all", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "app-key"}}},
		{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "app-key"}}},
	}}}}
	otherSecret := corev1.Volume{Name: "key", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "other"}}}
	keyRef := func(name string) []corev1.EnvVar {
		return []corev1.EnvVar{{Name: "API_KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "apiKey"}}}}
	}
	envFrom := func(name string) []corev1.EnvFromSource {
		return []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}
	}
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want Use
	}{
		{"nothing", corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}, Use{}},
		{"a secret volume", corev1.PodSpec{Volumes: []corev1.Volume{secretVolume}}, Use{Volume: true}},
		{"a secret volume mounted whole", corev1.PodSpec{Volumes: []corev1.Volume{secretVolume},
			Containers: []corev1.Container{{VolumeMounts: []corev1.VolumeMount{{Name: "key", MountPath: "/key"}}}}}, Use{Volume: true}},
		{"a secret volume mounted by subPath", corev1.PodSpec{Volumes: []corev1.Volume{secretVolume},
			Containers: []corev1.Container{{VolumeMounts: []corev1.VolumeMount{{Name: "key", MountPath: "/key", SubPath: "apiKey"}}}}}, Use{Volume: true, SubPath: true}},
		{"by subPathExpr", corev1.PodSpec{Volumes: []corev1.Volume{secretVolume},
			Containers: []corev1.Container{{VolumeMounts: []corev1.VolumeMount{{Name: "key", MountPath: "/key", SubPathExpr: "$(K)"}}}}}, Use{Volume: true, SubPath: true}},
		{"a projected volume", corev1.PodSpec{Volumes: []corev1.Volume{projected}}, Use{Volume: true}},
		{"a ConfigMap of the same name is not the Secret", corev1.PodSpec{Volumes: []corev1.Volume{{Name: "c", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-key"}}}}}}, Use{}},
		{"another Secret's volume, mounted by subPath", corev1.PodSpec{Volumes: []corev1.Volume{otherSecret},
			Containers: []corev1.Container{{VolumeMounts: []corev1.VolumeMount{{Name: "key", SubPath: "apiKey"}}}}}, Use{}},
		{"env secretKeyRef", corev1.PodSpec{Containers: []corev1.Container{{Env: keyRef("app-key")}}}, Use{Env: true}},
		{"env secretKeyRef of another Secret", corev1.PodSpec{Containers: []corev1.Container{{Env: keyRef("other")}}}, Use{}},
		{"envFrom secretRef", corev1.PodSpec{Containers: []corev1.Container{{EnvFrom: envFrom("app-key")}}}, Use{Env: true}},
		{"an init container's env", corev1.PodSpec{InitContainers: []corev1.Container{{Env: keyRef("app-key")}}}, Use{Env: true}},
		{"an ephemeral container's envFrom", corev1.PodSpec{EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			EnvFrom: envFrom("app-key")}}}}, Use{Env: true}},
		{"a plain value is not a reference", corev1.PodSpec{Containers: []corev1.Container{{Env: []corev1.EnvVar{{Name: "app-key", Value: "app-key"}}}}}, Use{}},
		{"volume and env", corev1.PodSpec{Volumes: []corev1.Volume{projected}, Containers: []corev1.Container{{Env: keyRef("app-key")}}}, Use{Env: true, Volume: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := UseOf(&tc.spec, "app-key"); got != tc.want {
				t.Fatalf("UseOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestUseReadsAndNeedsRestart(t *testing.T) {
	for _, tc := range []struct {
		use            Use
		reads, restart bool
	}{
		{Use{}, false, false},
		{Use{Volume: true}, true, false},
		{Use{Volume: true, SubPath: true}, true, true},
		{Use{Env: true}, true, true},
	} {
		if r, n := tc.use.Reads(), tc.use.NeedsRestart(); r != tc.reads || n != tc.restart {
			t.Errorf("%+v: Reads %v NeedsRestart %v, want %v %v", tc.use, r, n, tc.reads, tc.restart)
		}
	}
}

func TestResultString(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Result
		want string
	}{
		{"not opted in", Result{Forbidden: []string{"list deployments.apps", "list statefulsets.apps", "list daemonsets.apps"}},
			"workloads not rolled: the namespace did not opt in (no Role lets switchboard's operator list and patch its Deployments, StatefulSets and DaemonSets)"},
		{"nothing reads it", Result{}, "no workload reads the delivery Secret, none rolled"},
		{"rolled", Result{Rolled: []string{"Deployment/web", "DaemonSet/agent"}}, "2 workloads rolled (Deployment/web, DaemonSet/agent)"},
		{"partly granted", Result{Rolled: []string{"Deployment/web"}, Forbidden: []string{"list statefulsets.apps", "list daemonsets.apps"}},
			"1 workload rolled (Deployment/web); not allowed by the namespace's grant: list statefulsets.apps, list daemonsets.apps"},
		{"patch refused", Result{Forbidden: []string{"patch Deployment/web"}},
			"0 workloads rolled; not allowed by the namespace's grant: patch Deployment/web"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.String(); got != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
