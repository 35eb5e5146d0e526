package deploy_test

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
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

// removeArg drops every --name and --name= arg.
func removeArg(c *corev1.Container, name string) {
	c.Args = slices.DeleteFunc(c.Args, func(a string) bool { return a == "--"+name || strings.HasPrefix(a, "--"+name+"=") })
}

// etcdOf is the manifest's etcd container, for a mutation to change.
func etcdOf(t *testing.T, m *manifest) *corev1.Container {
	t.Helper()
	if m.etcd == nil {
		t.Fatal("the build runs no etcd")
	}
	c, err := m.etcd.container()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// natsOf is the manifest's NATS container, for a mutation to change.
func natsOf(t *testing.T, m *manifest) *corev1.Container {
	t.Helper()
	if m.nats == nil {
		t.Fatal("the build runs no NATS")
	}
	c, err := m.nats.container()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// editNATSConf replaces old with new in the NATS config file.
func editNATSConf(t *testing.T, m *manifest, old, new string) {
	t.Helper()
	for _, cm := range m.configMaps {
		if d, ok := cm.Data["nats.conf"]; ok {
			if !strings.Contains(d, old) {
				t.Fatalf("nats.conf: no %q to replace", old)
			}
			cm.Data["nats.conf"] = strings.Replace(d, old, new, 1)
			return
		}
	}
	t.Fatal("no ConfigMap with nats.conf")
}

// secretVolume is the pod's Secret volume of that name.
func secretVolume(t *testing.T, m *manifest, name string) *corev1.SecretVolumeSource {
	t.Helper()
	v, err := m.volume(name)
	if err != nil || v.Secret == nil {
		t.Fatalf("volume %s: got %v, %v; want a Secret volume", name, v, err)
	}
	return v.Secret
}

// manualsOf is the manifest's manuals ConfigMap.
func manualsOf(t *testing.T, m *manifest) *corev1.ConfigMap {
	t.Helper()
	for _, cm := range m.configMaps {
		if strings.HasPrefix(cm.Name, "exprd-manuals") {
			return cm
		}
	}
	t.Fatal("no exprd-manuals ConfigMap")
	return nil
}

// breakage is a one-change mutation of a manifest and the check it trips.
type breakage struct {
	name   string
	check  func(*manifest) error
	mutate func(*testing.T, *manifest)
}

// TestChecksCatch breaks the base or the example overlay one way at a time
// and expects the check named for that way to fail, so that no check
// passes vacuously.
func TestChecksCatch(t *testing.T) {
	t.Parallel()
	base := []breakage{
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
		{"egress on 443 to anywhere (the old base)", checkEgress, func(t *testing.T, m *manifest) {
			m.netpol.Spec.Egress = append(m.netpol.Spec.Egress, networkingv1.NetworkPolicyEgressRule{
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromInt32(443)), Protocol: ptr(corev1.ProtocolTCP)}},
			})
		}},
		{"egress to 0.0.0.0/0", checkEgress, func(t *testing.T, m *manifest) {
			m.netpol.Spec.Egress = append(m.netpol.Spec.Egress, networkingv1.NetworkPolicyEgressRule{
				To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: []string{"10.0.0.0/8"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromInt32(443))}},
			})
		}},
		{"egress to ::/0", checkEgress, func(t *testing.T, m *manifest) {
			m.netpol.Spec.Egress = append(m.netpol.Spec.Egress, networkingv1.NetworkPolicyEgressRule{
				To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "::/0"}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromInt32(443))}},
			})
		}},
		{"egress on every port", checkEgress, func(t *testing.T, m *manifest) {
			m.netpol.Spec.Egress = append(m.netpol.Spec.Egress, networkingv1.NetworkPolicyEgressRule{
				To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "192.0.2.0/24"}}},
			})
		}},
		{"egress to the cloud metadata service", checkEgress, func(t *testing.T, m *manifest) {
			m.netpol.Spec.Egress = append(m.netpol.Spec.Egress, networkingv1.NetworkPolicyEgressRule{
				To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "169.254.0.0/16"}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromInt32(80))}},
			})
		}},
		{"egress to every pod of every namespace", checkEgress, func(t *testing.T, m *manifest) {
			m.netpol.Spec.Egress = append(m.netpol.Spec.Egress, networkingv1.NetworkPolicyEgressRule{
				To:    []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromInt32(8080))}},
			})
		}},
		{"DNS to every pod of kube-system", checkEgress, func(t *testing.T, m *manifest) {
			m.netpol.Spec.Egress[0].To[0].PodSelector = nil
		}},
		{"DNS to another namespace's pods", checkEgress, func(t *testing.T, m *manifest) {
			m.netpol.Spec.Egress[0].To[0].NamespaceSelector.MatchLabels = map[string]string{"kubernetes.io/metadata.name": "dns"}
		}},
		{"registry writes opened without auth", checkRegistryReadOnly, func(t *testing.T, m *manifest) {
			exprdOf(t, m).Args = append(exprdOf(t, m).Args, "--registry-writes-without-auth")
		}},
		{"registry writes opened by EXPRD_ variable", checkRegistryReadOnly, func(t *testing.T, m *manifest) {
			c := exprdOf(t, m)
			c.Env = append(c.Env, corev1.EnvVar{Name: "EXPRD_REGISTRY_WRITES_WITHOUT_AUTH", Value: "true"})
		}},
		{"tokens written in the Deployment", checkAuth, func(t *testing.T, m *manifest) {
			c := exprdOf(t, m)
			c.Env = append(c.Env, corev1.EnvVar{Name: "EXPRD_AUTH_TOKENS", Value: "ops 0123456789abcdef0123 *"})
		}},
	}
	overlay := []breakage{
		{"auth off", checkAuth, func(t *testing.T, m *manifest) {
			removeArg(exprdOf(t, m), "auth-tokens-file")
		}},
		{"tokens file in a ConfigMap", checkAuth, func(t *testing.T, m *manifest) {
			v, err := m.volume("config")
			if err != nil {
				t.Fatal(err)
			}
			m.configMaps[v.ConfigMap.Name].Data["tokens"] = "ops <token> *\n"
			setArg(exprdOf(t, m), "auth-tokens-file", "/etc/exprd/config/tokens")
		}},
		{"a misspelt scope", checkAuth, func(t *testing.T, m *manifest) {
			m.secrets["exprd-auth"].StringData["tokens"] = "example-client <token> exprtool,toolregistery\n"
		}},
		{"a platform token with registry.write", checkRegistryReadOnly, func(t *testing.T, m *manifest) {
			m.secrets["exprd-auth"].StringData["tokens"] += "platform <token> toolregistry,registry.write\n"
		}},
		{"registry.write on a line of its own after ;", checkRegistryReadOnly, func(t *testing.T, m *manifest) {
			m.secrets["exprd-auth"].StringData["tokens"] = "a <token> exprtool; b <token> registry.write\n"
		}},
		{"the weather key's file misnamed", checkUTCPVariables, func(t *testing.T, m *manifest) {
			secretVolume(t, m, "utcp-vars").Items[0].Path = "weather_APIKEY"
		}},
		{"a manual with _ in its name, the key's _ not doubled", checkUTCPVariables, func(t *testing.T, m *manifest) {
			cm := manualsOf(t, m)
			cm.Data["my_weather.json"] = cm.Data["weather.json"]
			delete(cm.Data, "weather.json")
			secretVolume(t, m, "utcp-vars").Items[0].Path = "my_weather_API_KEY"
		}},
		{"the weather key from the environment (the old overlay)", checkUTCPVariables, func(t *testing.T, m *manifest) {
			c := exprdOf(t, m)
			removeArg(c, "utcp-secrets-dir")
			c.Env = append(c.Env, corev1.EnvVar{Name: "weather_API_KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "exprd-utcp"}, Key: "weather_API_KEY", Optional: ptr(true)}}})
		}},
		{"--utcp-secrets-dir on a ConfigMap", checkUTCPVariables, func(t *testing.T, m *manifest) {
			setArg(exprdOf(t, m), "utcp-secrets-dir", "/etc/exprd/config")
		}},
		{"--utcp-env naming a variable the pod lacks", checkUTCPVariables, func(t *testing.T, m *manifest) {
			setArg(exprdOf(t, m), "utcp-env", "weather_API_KEY")
		}},
		{"the UTCP Secret optional", checkSecrets, func(t *testing.T, m *manifest) {
			secretVolume(t, m, "utcp-vars").Optional = ptr(true)
		}},
		{"the tokens unreadable by exprd's user", checkSecrets, func(t *testing.T, m *manifest) {
			secretVolume(t, m, "auth").DefaultMode = ptr(int32(0o400))
		}},
		{"a Secret volume without items", checkSecrets, func(t *testing.T, m *manifest) {
			secretVolume(t, m, "auth").Items = nil
		}},
		{"a Secret key the example does not list", checkSecrets, func(t *testing.T, m *manifest) {
			for _, e := range exprdOf(t, m).Env {
				if e.Name == "OPENAI_API_KEY" {
					e.ValueFrom.SecretKeyRef.Key = "OPENAI_KEY"
				}
			}
		}},
		{"no way out to the model API or the weather provider", checkNetworkPolicy, func(t *testing.T, m *manifest) {
			m.netpol.Spec.Egress = m.netpol.Spec.Egress[:1]
		}},
		{"the providers' range widened to 0.0.0.0/0", checkEgress, func(t *testing.T, m *manifest) {
			m.netpol.Spec.Egress[1].To[0].IPBlock.CIDR = "0.0.0.0/0"
		}},
		{"the registry kept in memory beside the etcd", checkRegistryStore, func(t *testing.T, m *manifest) {
			setArg(exprdOf(t, m), "registry-store", "memory")
		}},
		{"--registry-store on the headless Service", checkRegistryStore, func(t *testing.T, m *manifest) {
			setArg(exprdOf(t, m), "registry-store", "etcd://etcd-headless.exprd.svc:2379")
		}},
		{"--registry-store on the peer port", checkRegistryStore, func(t *testing.T, m *manifest) {
			setArg(exprdOf(t, m), "registry-store", "etcd://etcd.exprd.svc:2380")
		}},
		{"--registry-store in another namespace", checkRegistryStore, func(t *testing.T, m *manifest) {
			setArg(exprdOf(t, m), "registry-store", "etcd://etcd.tools.svc:2379")
		}},
		{"--registry-store over TLS to a plaintext etcd", checkRegistryStore, func(t *testing.T, m *manifest) {
			setArg(exprdOf(t, m), "registry-store", "etcds://etcd.exprd.svc:2379")
		}},
		{"the start timeout past the startup probe", checkRegistryStore, func(t *testing.T, m *manifest) {
			setArg(exprdOf(t, m), "registry-store-start-timeout", "90s")
		}},
		{"the etcd image on another release", checkEtcdPod, func(t *testing.T, m *manifest) {
			etcdOf(t, m).Image = "gcr.io/etcd-development/etcd:v3.6.5"
		}},
		{"the etcd image floating", checkEtcdPod, func(t *testing.T, m *manifest) {
			etcdOf(t, m).Image = "gcr.io/etcd-development/etcd:latest"
		}},
		{"etcd as root", checkEtcdPod, func(t *testing.T, m *manifest) {
			m.etcd.sts.Spec.Template.Spec.SecurityContext.RunAsUser = ptr(int64(0))
		}},
		{"etcd's root filesystem writable", checkEtcdPod, func(t *testing.T, m *manifest) {
			etcdOf(t, m).SecurityContext.ReadOnlyRootFilesystem = ptr(false)
		}},
		{"Service variables in etcd's environment", checkEtcdPod, func(t *testing.T, m *manifest) {
			m.etcd.sts.Spec.Template.Spec.EnableServiceLinks = nil
		}},
		{"etcd's service account token mounted", checkEtcdPod, func(t *testing.T, m *manifest) {
			m.etcd.sts.Spec.Template.Spec.AutomountServiceAccountToken = nil
		}},
		{"etcd without a memory limit", checkEtcdPod, func(t *testing.T, m *manifest) {
			delete(etcdOf(t, m).Resources.Limits, corev1.ResourceMemory)
		}},
		{"etcd's liveness on /readyz", checkEtcdPod, func(t *testing.T, m *manifest) {
			etcdOf(t, m).LivenessProbe.HTTPGet.Path = "/readyz"
		}},
		{"etcd's readiness probe on the peer port", checkEtcdPod, func(t *testing.T, m *manifest) {
			etcdOf(t, m).ReadinessProbe.HTTPGet.Port = intstr.FromInt32(2380)
		}},
		{"no etcd readiness probe", checkEtcdPod, func(t *testing.T, m *manifest) {
			etcdOf(t, m).ReadinessProbe = nil
		}},
		{"a misspelt etcd flag", checkEtcdMembers, func(t *testing.T, m *manifest) {
			setArg(etcdOf(t, m), "listen-client-url", "http://0.0.0.0:2379")
		}},
		{"etcd args without its command", checkEtcdMembers, func(t *testing.T, m *manifest) {
			etcdOf(t, m).Command = nil
		}},
		{"a member more than --initial-cluster lists", checkEtcdMembers, func(t *testing.T, m *manifest) {
			m.etcd.sts.Spec.Replicas = ptr(int32(5))
		}},
		{"an even number of members", checkEtcdMembers, func(t *testing.T, m *manifest) {
			m.etcd.sts.Spec.Replicas = ptr(int32(2))
			setArg(etcdOf(t, m), "initial-cluster", "etcd-0=http://etcd-0.etcd-headless.$(POD_NAMESPACE).svc:2380,etcd-1=http://etcd-1.etcd-headless.$(POD_NAMESPACE).svc:2380")
		}},
		{"--initial-cluster through the client Service", checkEtcdMembers, func(t *testing.T, m *manifest) {
			setArg(etcdOf(t, m), "initial-cluster", "etcd-0=http://etcd-0.etcd.$(POD_NAMESPACE).svc:2380,etcd-1=http://etcd-1.etcd.$(POD_NAMESPACE).svc:2380,etcd-2=http://etcd-2.etcd.$(POD_NAMESPACE).svc:2380")
		}},
		{"a member advertising the client port as its peer URL", checkEtcdMembers, func(t *testing.T, m *manifest) {
			setArg(etcdOf(t, m), "initial-advertise-peer-urls", "http://$(POD_NAME).etcd-headless.$(POD_NAMESPACE).svc:2379")
		}},
		{"a variable the pod does not set", checkEtcdMembers, func(t *testing.T, m *manifest) {
			setArg(etcdOf(t, m), "name", "$(HOSTNAME)")
		}},
		{"the data directory off the volume claim", checkEtcdMembers, func(t *testing.T, m *manifest) {
			setArg(etcdOf(t, m), "data-dir", "/tmp/etcd")
		}},
		{"no history compaction", checkEtcdMembers, func(t *testing.T, m *manifest) {
			removeArg(etcdOf(t, m), "auto-compaction-retention")
		}},
		{"no volume claim", checkEtcdMembers, func(t *testing.T, m *manifest) {
			m.etcd.sts.Spec.VolumeClaimTemplates = nil
		}},
		{"members started one by one", checkEtcdMembers, func(t *testing.T, m *manifest) {
			m.etcd.sts.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
		}},
		{"members unnamed until ready", checkEtcdMembers, func(t *testing.T, m *manifest) {
			for _, s := range m.etcd.services {
				s.Spec.PublishNotReadyAddresses = false
			}
		}},
		{"a disruption budget that loses the quorum", checkEtcdMembers, func(t *testing.T, m *manifest) {
			m.etcd.pdb.Spec.MaxUnavailable = ptr(intstr.FromInt32(2))
		}},
		{"no etcd disruption budget", checkEtcdMembers, func(t *testing.T, m *manifest) {
			m.etcd.pdb = nil
		}},
		{"no etcd NetworkPolicy", checkEtcdNetworkPolicy, func(t *testing.T, m *manifest) {
			m.etcd.netpol = nil
		}},
		{"etcd's client port open to every pod", checkEtcdNetworkPolicy, func(t *testing.T, m *manifest) {
			m.etcd.netpol.Spec.Ingress[0].From[0].PodSelector = &metav1.LabelSelector{}
		}},
		{"etcd's client port open to another namespace", checkEtcdNetworkPolicy, func(t *testing.T, m *manifest) {
			m.etcd.netpol.Spec.Ingress[0].From = append(m.etcd.netpol.Spec.Ingress[0].From, networkingv1.NetworkPolicyPeer{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "tools"}},
				PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "inventory"}},
			})
		}},
		{"etcd's client port open to an address range", checkEtcdNetworkPolicy, func(t *testing.T, m *manifest) {
			m.etcd.netpol.Spec.Ingress[0].From = append(m.etcd.netpol.Spec.Ingress[0].From, networkingv1.NetworkPolicyPeer{
				IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"},
			})
		}},
		{"etcd's every port open to exprd", checkEtcdNetworkPolicy, func(t *testing.T, m *manifest) {
			m.etcd.netpol.Spec.Ingress[0].Ports = nil
		}},
		{"etcd's peer port open to exprd", checkEtcdNetworkPolicy, func(t *testing.T, m *manifest) {
			r := &m.etcd.netpol.Spec.Ingress[0]
			r.Ports = append(r.Ports, networkingv1.NetworkPolicyPort{Port: ptr(intstr.FromString("peer"))})
		}},
		{"etcd's peers shut out", checkEtcdNetworkPolicy, func(t *testing.T, m *manifest) {
			m.etcd.netpol.Spec.Ingress = m.etcd.netpol.Spec.Ingress[:1]
		}},
		{"etcd let out anywhere", checkEtcdNetworkPolicy, func(t *testing.T, m *manifest) {
			m.etcd.netpol.Spec.Egress = append(m.etcd.netpol.Spec.Egress, networkingv1.NetworkPolicyEgressRule{
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromInt32(443))}},
			})
		}},
		{"etcd's NetworkPolicy without egress", checkEtcdNetworkPolicy, func(t *testing.T, m *manifest) {
			m.etcd.netpol.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		}},
		{"exprd not let out to etcd", checkEtcdNetworkPolicy, func(t *testing.T, m *manifest) {
			m.netpol.Spec.Egress = slices.DeleteFunc(m.netpol.Spec.Egress, func(r networkingv1.NetworkPolicyEgressRule) bool {
				return len(r.To) > 0 && r.To[0].PodSelector != nil && r.To[0].PodSelector.MatchLabels["app.kubernetes.io/name"] == "etcd"
			})
		}},
		{"exprd let out to etcd's peer port", checkEtcdNetworkPolicy, func(t *testing.T, m *manifest) {
			r := &m.netpol.Spec.Egress[len(m.netpol.Spec.Egress)-2]
			r.Ports = append(r.Ports, networkingv1.NetworkPolicyPort{Port: ptr(intstr.FromInt32(2380))})
		}},
		{"the NATS image on another release", checkNATSPod, func(t *testing.T, m *manifest) {
			natsOf(t, m).Image = "docker.io/library/nats:2.10.22"
		}},
		{"the NATS image floating", checkNATSPod, func(t *testing.T, m *manifest) {
			natsOf(t, m).Image = "docker.io/library/nats:latest"
		}},
		{"the NATS image with a digest that is none", checkNATSPod, func(t *testing.T, m *manifest) {
			natsOf(t, m).Image += "@sha256:0123"
		}},
		{"NATS as root", checkNATSPod, func(t *testing.T, m *manifest) {
			m.nats.sts.Spec.Template.Spec.SecurityContext.RunAsUser = ptr(int64(0))
		}},
		{"NATS's root filesystem writable", checkNATSPod, func(t *testing.T, m *manifest) {
			natsOf(t, m).SecurityContext.ReadOnlyRootFilesystem = ptr(false)
		}},
		{"NATS with a capability", checkNATSPod, func(t *testing.T, m *manifest) {
			natsOf(t, m).SecurityContext.Capabilities.Drop = nil
		}},
		{"NATS without seccomp", checkNATSPod, func(t *testing.T, m *manifest) {
			natsOf(t, m).SecurityContext.SeccompProfile = nil
			m.nats.sts.Spec.Template.Spec.SecurityContext.SeccompProfile = nil
		}},
		{"Service variables in NATS's environment", checkNATSPod, func(t *testing.T, m *manifest) {
			m.nats.sts.Spec.Template.Spec.EnableServiceLinks = nil
		}},
		{"NATS's service account token mounted", checkNATSPod, func(t *testing.T, m *manifest) {
			m.nats.sts.Spec.Template.Spec.AutomountServiceAccountToken = ptr(true)
		}},
		{"NATS without a memory limit", checkNATSPod, func(t *testing.T, m *manifest) {
			delete(natsOf(t, m).Resources.Limits, corev1.ResourceMemory)
		}},
		{"NATS's liveness on the full /healthz", checkNATSPod, func(t *testing.T, m *manifest) {
			natsOf(t, m).LivenessProbe.HTTPGet.Path = "/healthz"
		}},
		{"NATS's readiness probe on the client port", checkNATSPod, func(t *testing.T, m *manifest) {
			natsOf(t, m).ReadinessProbe.HTTPGet.Port = intstr.FromInt32(4222)
		}},
		{"no NATS readiness probe", checkNATSPod, func(t *testing.T, m *manifest) {
			natsOf(t, m).ReadinessProbe = nil
		}},
		{"a misspelt nats-server flag", checkNATSMembers, func(t *testing.T, m *manifest) {
			c := natsOf(t, m)
			c.Args = append(c.Args, "--cluster_nam", "x")
		}},
		{"a misspelt nats.conf setting", checkNATSMembers, func(t *testing.T, m *manifest) {
			editNATSConf(t, m, "max_file_store:", "max_file_stor:")
		}},
		{"NATS without its config file", checkNATSMembers, func(t *testing.T, m *manifest) {
			natsOf(t, m).Args = []string{"--jetstream"}
		}},
		{"NATS's command replacing its entrypoint", checkNATSMembers, func(t *testing.T, m *manifest) {
			natsOf(t, m).Command = []string{"nats-server"}
		}},
		{"JetStream off", checkNATSMembers, func(t *testing.T, m *manifest) {
			editNATSConf(t, m, "jetstream {", "jetstream {\n  enabled: false")
		}},
		{"every member one server_name", checkNATSMembers, func(t *testing.T, m *manifest) {
			editNATSConf(t, m, "server_name: $POD_NAME", "server_name: nats")
		}},
		{"server_name from a variable the pod does not set", checkNATSMembers, func(t *testing.T, m *manifest) {
			editNATSConf(t, m, "server_name: $POD_NAME", "server_name: $HOSTNAME_OF_POD")
		}},
		{"a member more than the routes name", checkNATSMembers, func(t *testing.T, m *manifest) {
			m.nats.sts.Spec.Replicas = ptr(int32(5))
		}},
		{"an even number of NATS members", checkNATSMembers, func(t *testing.T, m *manifest) {
			m.nats.sts.Spec.Replicas = ptr(int32(2))
			editNATSConf(t, m, "    nats://nats-2.nats-headless:6222\n", "")
		}},
		{"routes through the client Service", checkNATSMembers, func(t *testing.T, m *manifest) {
			editNATSConf(t, m, "nats://nats-1.nats-headless:6222", "nats://nats:6222")
		}},
		{"a route to the client port", checkNATSMembers, func(t *testing.T, m *manifest) {
			editNATSConf(t, m, "nats://nats-1.nats-headless:6222", "nats://nats-1.nats-headless:4222")
		}},
		{"JetStream's store off the volume claim", checkNATSMembers, func(t *testing.T, m *manifest) {
			editNATSConf(t, m, "store_dir: /data", "store_dir: /tmp/js")
		}},
		{"JetStream's store as large as the disk", checkNATSMembers, func(t *testing.T, m *manifest) {
			editNATSConf(t, m, "max_file_store: 8G", "max_file_store: 20G")
		}},
		{"the lame duck outlasting the grace period", checkNATSMembers, func(t *testing.T, m *manifest) {
			editNATSConf(t, m, "lame_duck_duration: 30s", `lame_duck_duration: "2m"`)
		}},
		{"NATS's cluster port not the container's", checkNATSMembers, func(t *testing.T, m *manifest) {
			editNATSConf(t, m, "  port: 6222", "  port: 7222")
		}},
		{"NATS members started one by one", checkNATSMembers, func(t *testing.T, m *manifest) {
			m.nats.sts.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
		}},
		{"NATS members unnamed until ready", checkNATSMembers, func(t *testing.T, m *manifest) {
			for _, s := range m.nats.services {
				s.Spec.PublishNotReadyAddresses = false
			}
		}},
		{"no NATS volume claim", checkNATSMembers, func(t *testing.T, m *manifest) {
			m.nats.sts.Spec.VolumeClaimTemplates = nil
		}},
		{"a NATS disruption budget that loses the quorum", checkNATSMembers, func(t *testing.T, m *manifest) {
			m.nats.pdb.Spec.MaxUnavailable = ptr(intstr.FromInt32(2))
		}},
		{"no NATS disruption budget", checkNATSMembers, func(t *testing.T, m *manifest) {
			m.nats.pdb = nil
		}},
		{"no NATS NetworkPolicy", checkNATSNetworkPolicy, func(t *testing.T, m *manifest) {
			m.nats.netpol = nil
		}},
		{"NATS's client port open to every pod", checkNATSNetworkPolicy, func(t *testing.T, m *manifest) {
			m.nats.netpol.Spec.Ingress[0].From[0].PodSelector = &metav1.LabelSelector{}
		}},
		{"NATS's client port open to etcd", checkNATSNetworkPolicy, func(t *testing.T, m *manifest) {
			m.nats.netpol.Spec.Ingress[0].From = append(m.nats.netpol.Spec.Ingress[0].From, networkingv1.NetworkPolicyPeer{
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "etcd"}},
			})
		}},
		{"NATS's client port open to an address range", checkNATSNetworkPolicy, func(t *testing.T, m *manifest) {
			m.nats.netpol.Spec.Ingress[0].From = append(m.nats.netpol.Spec.Ingress[0].From, networkingv1.NetworkPolicyPeer{
				IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"},
			})
		}},
		{"NATS's monitoring port open to exprd", checkNATSNetworkPolicy, func(t *testing.T, m *manifest) {
			r := &m.nats.netpol.Spec.Ingress[0]
			r.Ports = append(r.Ports, networkingv1.NetworkPolicyPort{Port: ptr(intstr.FromString("monitor"))})
		}},
		{"NATS's members shut out", checkNATSNetworkPolicy, func(t *testing.T, m *manifest) {
			m.nats.netpol.Spec.Ingress = m.nats.netpol.Spec.Ingress[:1]
		}},
		{"NATS let out anywhere", checkNATSNetworkPolicy, func(t *testing.T, m *manifest) {
			m.nats.netpol.Spec.Egress = append(m.nats.netpol.Spec.Egress, networkingv1.NetworkPolicyEgressRule{
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromInt32(443))}},
			})
		}},
		{"exprd not let out to NATS", checkNATSNetworkPolicy, func(t *testing.T, m *manifest) {
			m.netpol.Spec.Egress = slices.DeleteFunc(m.netpol.Spec.Egress, func(r networkingv1.NetworkPolicyEgressRule) bool {
				return len(r.To) > 0 && r.To[0].PodSelector != nil && r.To[0].PodSelector.MatchLabels["app.kubernetes.io/name"] == "nats"
			})
		}},
		{"exprd let out to NATS's cluster port", checkNATSNetworkPolicy, func(t *testing.T, m *manifest) {
			r := &m.netpol.Spec.Egress[len(m.netpol.Spec.Egress)-1]
			r.Ports = append(r.Ports, networkingv1.NetworkPolicyPort{Port: ptr(intstr.FromInt32(6222))})
		}},
		{"turns kept in memory beside the NATS", checkTurnStore, func(t *testing.T, m *manifest) {
			setArg(exprdOf(t, m), "turn-store", "memory")
		}},
		{"--nats-url on the headless Service", checkTurnStore, func(t *testing.T, m *manifest) {
			setArg(exprdOf(t, m), "nats-url", "nats://nats-headless.exprd.svc:4222")
		}},
		{"--nats-url on the cluster port", checkTurnStore, func(t *testing.T, m *manifest) {
			setArg(exprdOf(t, m), "nats-url", "nats://nats.exprd.svc:6222")
		}},
		{"--nats-url in another namespace", checkTurnStore, func(t *testing.T, m *manifest) {
			setArg(exprdOf(t, m), "nats-url", "nats://nats.turns.svc:4222")
		}},
		{"--nats-url over TLS to a plaintext NATS", checkTurnStore, func(t *testing.T, m *manifest) {
			setArg(exprdOf(t, m), "nats-url", "tls://nats.exprd.svc:4222")
		}},
		{"--nats-url left to its default", checkTurnStore, func(t *testing.T, m *manifest) {
			removeArg(exprdOf(t, m), "nats-url")
		}},
		{"one copy of each turn on three members", checkTurnStore, func(t *testing.T, m *manifest) {
			removeArg(exprdOf(t, m), "nats-replicas")
		}},
		{"more copies of each turn than members", checkTurnStore, func(t *testing.T, m *manifest) {
			setArg(exprdOf(t, m), "nats-replicas", "5")
		}},
		{"the startup probe shorter than the wait for both stores", checkTurnStore, func(t *testing.T, m *manifest) {
			exprdOf(t, m).StartupProbe.FailureThreshold = 30
		}},
	}
	for dir, tests := range map[string][]breakage{"base": base, "overlays/example": overlay} {
		for _, tt := range tests {
			t.Run(dir+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				m := mustBuild(t, k8sDir+"/"+dir)
				if err := tt.check(m); err != nil {
					t.Fatalf("%s fails before the mutation: %v", dir, err)
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
		{"the weather key's file misnamed", "overlays/example", func(t *testing.T, m *manifest) {
			secretVolume(t, m, "utcp-vars").Items[0].Path = "weather_APIKEY"
		}},
		{"the weather key from the environment (the old overlay)", "overlays/example", func(t *testing.T, m *manifest) {
			c := exprdOf(t, m)
			removeArg(c, "utcp-secrets-dir")
			c.Env = append(c.Env, corev1.EnvVar{Name: "weather_API_KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "exprd-utcp"}, Key: "weather_API_KEY"}}})
		}},
		{"a Secret file that is no variable's key", "overlays/example", func(t *testing.T, m *manifest) {
			secretVolume(t, m, "utcp-vars").Items = append(secretVolume(t, m, "utcp-vars").Items,
				corev1.KeyToPath{Key: "weather_API_KEY", Path: "weather-API-KEY"})
		}},
		{"the example Secrets applied as written", "overlays/example", func(t *testing.T, m *manifest) {
			m.asWritten = true
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
