package deploy_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ptr is a pointer to v.
func ptr[T any](v T) *T { return &v }

// exprdOf is the manifest's exprd container, for a mutation to change.
func exprdOf(t *testing.T, m *manifest) *corev1.Container {
	t.Helper()
	c, err := m.container()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// setArg replaces the --name= arg, or appends it.
func setArg(c *corev1.Container, name, value string) {
	for i, a := range c.Args {
		if strings.HasPrefix(a, "--"+name+"=") {
			c.Args[i] = "--" + name + "=" + value
			return
		}
	}
	c.Args = append(c.Args, "--"+name+"="+value)
}

// TestChecksCatch breaks the base one way at a time and expects the check
// named for that way to fail, so that no check passes vacuously.
func TestChecksCatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		check  func(*manifest) error
		mutate func(*testing.T, *manifest)
	}{
		{"grace period equal to sleep plus drain", checkDrain, func(t *testing.T, m *manifest) {
			m.deployment.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr(int64(30))
		}},
		{"drain timeout longer than the grace period", checkDrain, func(t *testing.T, m *manifest) {
			setArg(exprdOf(t, m), "drain-timeout", "1m")
		}},
		{"preStop exec in a shell-less image", checkDrain, func(t *testing.T, m *manifest) {
			exprdOf(t, m).Lifecycle.PreStop = &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "5"}}}
		}},
		{"listen port not the container port", checkPorts, func(t *testing.T, m *manifest) {
			setArg(exprdOf(t, m), "listen", ":50052")
		}},
		{"metrics-listen off", checkPorts, func(t *testing.T, m *manifest) {
			setArg(exprdOf(t, m), "metrics-listen", "")
		}},
		{"probe on another port", checkProbes, func(t *testing.T, m *manifest) {
			exprdOf(t, m).ReadinessProbe.GRPC.Port = 8080
		}},
		{"probe over HTTP", checkProbes, func(t *testing.T, m *manifest) {
			exprdOf(t, m).LivenessProbe.ProbeHandler = corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(9090)}}
		}},
		{"no readiness probe", checkProbes, func(t *testing.T, m *manifest) {
			exprdOf(t, m).ReadinessProbe = nil
		}},
		{"service targets a missing port", checkServices, func(t *testing.T, m *manifest) {
			m.services[0].Spec.Ports[0].TargetPort = intstr.FromString("grcp")
		}},
		{"service without appProtocol grpc", checkServices, func(t *testing.T, m *manifest) {
			m.services[0].Spec.Ports[0].AppProtocol = nil
		}},
		{"service selects other pods", checkServices, func(t *testing.T, m *manifest) {
			m.services[0].Spec.Selector = map[string]string{"app.kubernetes.io/name": "other"}
		}},
		{"no headless service", checkServices, func(t *testing.T, m *manifest) {
			for _, s := range m.services {
				s.Spec.ClusterIP = ""
			}
		}},
		{"PDB selects other pods", checkSelectors, func(t *testing.T, m *manifest) {
			m.pdb.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}
		}},
		{"empty NetworkPolicy podSelector", checkSelectors, func(t *testing.T, m *manifest) {
			m.netpol.Spec.PodSelector = metav1.LabelSelector{}
		}},
		{"HPA scales another Deployment", checkSelectors, func(t *testing.T, m *manifest) {
			m.hpa.Spec.ScaleTargetRef.Name = "other"
		}},
		{"replicas set beside the HPA", checkScaling, func(t *testing.T, m *manifest) {
			m.deployment.Spec.Replicas = ptr(int32(3))
		}},
		{"HPA minimum of one", checkScaling, func(t *testing.T, m *manifest) {
			m.hpa.Spec.MinReplicas = ptr(int32(1))
		}},
		{"PDB that never allows an eviction", checkScaling, func(t *testing.T, m *manifest) {
			m.pdb.Spec.MaxUnavailable, m.pdb.Spec.MinAvailable = nil, ptr(intstr.FromInt32(2))
		}},
		{"no memory limit", checkResources, func(t *testing.T, m *manifest) {
			delete(exprdOf(t, m).Resources.Limits, corev1.ResourceMemory)
		}},
		{"GOMEMLIMIT over the memory limit", checkResources, func(t *testing.T, m *manifest) {
			exprdOf(t, m).Env[0] = corev1.EnvVar{Name: "GOMEMLIMIT", Value: "2GiB"}
		}},
		{"writable root filesystem", checkSecurity, func(t *testing.T, m *manifest) {
			exprdOf(t, m).SecurityContext.ReadOnlyRootFilesystem = ptr(false)
		}},
		{"root user", checkSecurity, func(t *testing.T, m *manifest) {
			m.deployment.Spec.Template.Spec.SecurityContext.RunAsUser = ptr(int64(0))
		}},
		{"a capability added", checkSecurity, func(t *testing.T, m *manifest) {
			exprdOf(t, m).SecurityContext.Capabilities.Add = []corev1.Capability{"NET_BIND_SERVICE"}
		}},
		{"no seccomp profile", checkSecurity, func(t *testing.T, m *manifest) {
			exprdOf(t, m).SecurityContext.SeccompProfile = nil
			m.deployment.Spec.Template.Spec.SecurityContext.SeccompProfile = nil
		}},
		{"service account token mounted", checkSecurity, func(t *testing.T, m *manifest) {
			m.deployment.Spec.Template.Spec.AutomountServiceAccountToken = nil
		}},
		{"metrics port closed", checkNetworkPolicy, func(t *testing.T, m *manifest) {
			m.netpol.Spec.Ingress = m.netpol.Spec.Ingress[:1]
		}},
		{"ingress to a port the pod lacks", checkNetworkPolicy, func(t *testing.T, m *manifest) {
			m.netpol.Spec.Ingress[0].Ports[0].Port = ptr(intstr.FromString("http"))
		}},
		{"no DNS egress", checkNetworkPolicy, func(t *testing.T, m *manifest) {
			m.netpol.Spec.Egress = m.netpol.Spec.Egress[1:]
		}},
		{"demo on", checkFiles, func(t *testing.T, m *manifest) {
			setArg(exprdOf(t, m), "demo", "true")
		}},
		{"manuals dir not mounted", checkFiles, func(t *testing.T, m *manifest) {
			setArg(exprdOf(t, m), "manuals-dir", "/etc/exprd/tools")
		}},
		{"config file not in its ConfigMap", checkFiles, func(t *testing.T, m *manifest) {
			setArg(exprdOf(t, m), "config", "/etc/exprd/config/settings.yaml")
		}},
		{"a manual exprd would skip", checkFiles, func(t *testing.T, m *manifest) {
			for _, cm := range m.configMaps {
				if strings.HasPrefix(cm.Name, "exprd-manuals") {
					cm.Data = map[string]string{"weather.txt": "{}"}
				}
			}
		}},
		{"untagged image", checkImage, func(t *testing.T, m *manifest) {
			exprdOf(t, m).Image = "ghcr.io/exprd/exprd"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := mustBuild(t, k8sDir+"/base")
			if err := tt.check(m); err != nil {
				t.Fatalf("the base fails before the mutation: %v", err)
			}
			tt.mutate(t, m)
			if err := tt.check(m); err == nil {
				t.Errorf("after the mutation: got no error, want one")
			} else {
				t.Logf("caught: %v", err)
			}
		})
	}
}

// TestExprdRejects starts exprd as in TestExprdServesManifest with a
// manifest broken in a way only exprd itself can tell, and expects it not
// to serve.
func TestExprdRejects(t *testing.T) {
	bin := imageBinary(t)
	tests := []struct {
		name   string
		dir    string
		mutate func(*testing.T, *manifest)
	}{
		{"an unknown flag", "base", func(t *testing.T, m *manifest) {
			setArg(exprdOf(t, m), "max-iteration", "1000")
		}},
		{"a bad value in the config file", "base", func(t *testing.T, m *manifest) {
			for _, cm := range m.configMaps {
				if d, ok := cm.Data["exprd.yaml"]; ok {
					cm.Data["exprd.yaml"] = d + "max-iterations: lots\n"
				}
			}
		}},
		{"a manual that is not one", "base", func(t *testing.T, m *manifest) {
			for _, cm := range m.configMaps {
				if strings.HasPrefix(cm.Name, "exprd-manuals") {
					cm.Data = map[string]string{"broken.json": `{"tools": 1}`}
				}
			}
		}},
		{"the model key's variable unset", "overlays/example", func(t *testing.T, m *manifest) {
			c := exprdOf(t, m)
			for i, e := range c.Env {
				if e.Name == "OPENAI_API_KEY" {
					c.Env = append(c.Env[:i], c.Env[i+1:]...)
					break
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mustBuild(t, k8sDir+"/"+tt.dir)
			tt.mutate(t, m)
			if _, err := startPod(t, m, bin, nil); err == nil {
				t.Errorf("exprd served, want it to refuse to start")
			} else {
				t.Logf("refused: %v", err)
			}
		})
	}
}
