package deploy_test

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// TestManifests builds every kustomization and checks that its objects
// agree with each other and with exprd's flags.
func TestManifests(t *testing.T) {
	t.Parallel()
	checks := []struct {
		name  string
		check func(*manifest) error
	}{
		{"ports match --listen and --metrics-listen", checkPorts},
		{"probes ask grpc.health.v1 on the grpc port", checkProbes},
		{"services target the container's ports", checkServices},
		{"grace period outlasts the drain", checkDrain},
		{"selectors match the pod", checkSelectors},
		{"autoscaling and disruption budget", checkScaling},
		{"resources", checkResources},
		{"security context locked down", checkSecurity},
		{"network policy", checkNetworkPolicy},
		{"egress to named destinations only", checkEgress},
		{"config files and manuals are mounted", checkFiles},
		{"image", checkImage},
		{"auth on, tokens from a Secret", checkAuth},
		{"tool registry read-only", checkRegistryReadOnly},
		{"UTCP variables bound from a mounted Secret", checkUTCPVariables},
		{"Secrets are listed, required, readable files", checkSecrets},
		{"etcd members agree and keep a quorum", checkEtcdMembers},
		{"etcd pod locked down, probed, pinned", checkEtcdPod},
		{"only exprd reaches etcd", checkEtcdNetworkPolicy},
		{"--registry-store is the etcd Service", checkRegistryStore},
		{"NATS members route to each other and keep a quorum", checkNATSMembers},
		{"NATS pod locked down, probed, pinned", checkNATSPod},
		{"only exprd reaches NATS", checkNATSNetworkPolicy},
		{"--turn-store and --nats-url are the NATS Service", checkTurnStore},
	}
	for _, dir := range kustomizations(t) {
		t.Run(strings.TrimPrefix(dir, k8sDir+"/"), func(t *testing.T) {
			t.Parallel()
			m := mustBuild(t, dir)
			for _, c := range checks {
				t.Run(c.name, func(t *testing.T) {
					if err := c.check(m); err != nil {
						t.Errorf("%s:\n%v", dir, err)
					}
				})
			}
		})
	}
}

// listenPort is the port of a listen address setting such as ":50051".
func (m *manifest) listenPort(flag string) (int32, error) {
	s, err := m.explicit(flag)
	if err != nil {
		return 0, err
	}
	_, port, err := net.SplitHostPort(s.value)
	if err != nil {
		return 0, fmt.Errorf("--%s=%q (%s): %w", flag, s.value, s.from, err)
	}
	n, err := strconv.ParseInt(port, 10, 32)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("--%s=%q (%s): want a fixed port, so the container port can name it", flag, s.value, s.from)
	}
	return int32(n), nil
}

func checkPorts(m *manifest) error {
	c, err := m.container()
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range c.Ports {
		for _, msg := range validation.IsValidPortName(p.Name) {
			errs = append(errs, fmt.Errorf("container port %q: %s", p.Name, msg))
		}
		if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
			errs = append(errs, fmt.Errorf("container port %s: protocol got %s, want TCP", p.Name, p.Protocol))
		}
	}
	for _, want := range []struct{ port, flag string }{{"grpc", "listen"}, {"metrics", "metrics-listen"}} {
		p, err := m.containerPort(want.port)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n, err := m.listenPort(want.flag)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if n != p.ContainerPort {
			errs = append(errs, fmt.Errorf("container port %s: got %d, want %d, the port of --%s", want.port, p.ContainerPort, n, want.flag))
		}
	}
	return errors.Join(errs...)
}

func checkProbes(m *manifest) error {
	c, err := m.container()
	if err != nil {
		return err
	}
	grpcPort, err := m.containerPort("grpc")
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range []struct {
		name     string
		probe    *corev1.Probe
		required bool
	}{{"startupProbe", c.StartupProbe, false}, {"readinessProbe", c.ReadinessProbe, true}, {"livenessProbe", c.LivenessProbe, true}} {
		switch {
		case p.probe == nil && p.required:
			errs = append(errs, fmt.Errorf("%s: missing", p.name))
		case p.probe == nil:
		case p.probe.GRPC == nil:
			errs = append(errs, fmt.Errorf("%s: got %+v, want the native grpc probe (grpc.health.v1)", p.name, p.probe.ProbeHandler))
		case p.probe.GRPC.Port != grpcPort.ContainerPort:
			errs = append(errs, fmt.Errorf("%s: grpc.port got %d, want %d, the container's grpc port", p.name, p.probe.GRPC.Port, grpcPort.ContainerPort))
		}
	}
	return errors.Join(errs...)
}

// matches reports whether a label selector selects the pod template.
func (m *manifest) matches(sel *metav1.LabelSelector) error {
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		return errors.New("empty selector: it selects every pod in the namespace")
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return err
	}
	pod := m.deployment.Spec.Template.Labels
	if !s.Matches(labels.Set(pod)) {
		return fmt.Errorf("selector %s does not select the pod's labels %v", s, pod)
	}
	return nil
}

func checkServices(m *manifest) error {
	var errs []error
	headless := false
	for _, s := range m.services {
		if err := m.matches(&metav1.LabelSelector{MatchLabels: s.Spec.Selector}); err != nil {
			errs = append(errs, fmt.Errorf("Service %s: %w", s.Name, err))
		}
		for _, p := range s.Spec.Ports {
			target := p.TargetPort.String()
			if p.TargetPort == (intstr.IntOrString{}) {
				target = fmt.Sprint(p.Port)
			}
			cp, err := m.containerPort(target)
			if err != nil {
				errs = append(errs, fmt.Errorf("Service %s port %s: targetPort: %w", s.Name, p.Name, err))
				continue
			}
			// Meshes and gateways treat the port as gRPC (HTTP/2) by its
			// appProtocol or its name, and then balance per stream.
			if cp.Name == "grpc" && (p.AppProtocol == nil || *p.AppProtocol != "grpc" || !strings.HasPrefix(p.Name, "grpc")) {
				errs = append(errs, fmt.Errorf("Service %s port %s: got name %q, appProtocol %v; want a name starting grpc and appProtocol grpc", s.Name, p.Name, p.Name, deref(p.AppProtocol)))
			}
		}
		if s.Spec.ClusterIP == corev1.ClusterIPNone {
			headless = true
			if s.Spec.PublishNotReadyAddresses {
				errs = append(errs, fmt.Errorf("Service %s: publishNotReadyAddresses sends clients to draining pods", s.Name))
			}
		}
	}
	if !headless {
		errs = append(errs, errors.New("no headless Service (clusterIP: None) for client-side balancing"))
	}
	return errors.Join(errs...)
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func checkDrain(m *manifest) error {
	drain, err := m.drainTimeout()
	if err != nil {
		return err
	}
	c, err := m.container()
	if err != nil {
		return err
	}
	var sleep time.Duration
	if l := c.Lifecycle; l != nil && l.PreStop != nil {
		switch {
		case l.PreStop.Exec != nil:
			return fmt.Errorf("preStop exec %q: the distroless image has no shell or tools to run; use preStop sleep", l.PreStop.Exec.Command)
		case l.PreStop.Sleep != nil:
			sleep = time.Duration(l.PreStop.Sleep.Seconds) * time.Second
		}
	}
	if grace := m.gracePeriod(); grace <= sleep+drain {
		return fmt.Errorf("terminationGracePeriodSeconds: got %v, want more than the preStop sleep %v + --drain-timeout %v", grace, sleep, drain)
	}
	return nil
}

// gracePeriod is the pod's terminationGracePeriodSeconds.
func (m *manifest) gracePeriod() time.Duration {
	if g := m.deployment.Spec.Template.Spec.TerminationGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return 30 * time.Second // Kubernetes' default
}

func checkSelectors(m *manifest) error {
	var errs []error
	spec := m.deployment.Spec.Template.Spec
	for what, sel := range map[string]*metav1.LabelSelector{
		"Deployment " + m.deployment.Name + " selector":   m.deployment.Spec.Selector,
		"PodDisruptionBudget " + m.pdb.Name + " selector": m.pdb.Spec.Selector,
		"NetworkPolicy " + m.netpol.Name + " podSelector": &m.netpol.Spec.PodSelector,
	} {
		if err := m.matches(sel); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}
	for i, tsc := range spec.TopologySpreadConstraints {
		if err := m.matches(tsc.LabelSelector); err != nil {
			errs = append(errs, fmt.Errorf("topologySpreadConstraints[%d]: %w", i, err))
		}
	}
	ref := m.hpa.Spec.ScaleTargetRef
	if ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || ref.Name != m.deployment.Name {
		errs = append(errs, fmt.Errorf("HorizontalPodAutoscaler %s: scaleTargetRef got %s %s/%s, want apps/v1 Deployment/%s", m.hpa.Name, ref.APIVersion, ref.Kind, ref.Name, m.deployment.Name))
	}
	return errors.Join(errs...)
}

func checkScaling(m *manifest) error {
	var errs []error
	if r := m.deployment.Spec.Replicas; r != nil {
		errs = append(errs, fmt.Errorf("Deployment: replicas %d is set while the HPA scales it: every apply resets the count; leave it out", *r))
	}
	minR := int32(1)
	if m.hpa.Spec.MinReplicas != nil {
		minR = *m.hpa.Spec.MinReplicas
	}
	if minR < 2 {
		errs = append(errs, fmt.Errorf("HPA minReplicas: got %d, want at least 2, so a drain or eviction leaves one serving", minR))
	}
	if m.hpa.Spec.MaxReplicas < minR {
		errs = append(errs, fmt.Errorf("HPA maxReplicas: got %d, want at least minReplicas %d", m.hpa.Spec.MaxReplicas, minR))
	}
	c, err := m.container()
	if err != nil {
		return err
	}
	for _, metric := range m.hpa.Spec.Metrics {
		if r := metric.Resource; r != nil && r.Target.AverageUtilization != nil {
			if _, ok := c.Resources.Requests[r.Name]; !ok {
				errs = append(errs, fmt.Errorf("HPA scales on %s utilization, but the container requests no %s", r.Name, r.Name))
			}
		}
	}
	pdb := m.pdb.Spec
	switch {
	case pdb.MinAvailable == nil && pdb.MaxUnavailable == nil:
		errs = append(errs, errors.New("PodDisruptionBudget: set maxUnavailable or minAvailable"))
	case pdb.MinAvailable != nil && pdb.MinAvailable.Type == intstr.Int && pdb.MinAvailable.IntVal >= minR:
		errs = append(errs, fmt.Errorf("PodDisruptionBudget minAvailable %d: at HPA minReplicas %d no pod may ever be evicted", pdb.MinAvailable.IntVal, minR))
	case pdb.MaxUnavailable != nil && pdb.MaxUnavailable.Type == intstr.Int && pdb.MaxUnavailable.IntVal < 1:
		errs = append(errs, fmt.Errorf("PodDisruptionBudget maxUnavailable %d: no pod may ever be evicted", pdb.MaxUnavailable.IntVal))
	}
	return errors.Join(errs...)
}

// containerResources checks that a container requests and limits CPU and
// memory, the request no more than the limit.
func containerResources(c corev1.Container) []error {
	var errs []error
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, hasReq := c.Resources.Requests[name]
		lim, hasLim := c.Resources.Limits[name]
		switch {
		case !hasReq || !hasLim:
			errs = append(errs, fmt.Errorf("container %s: %s: got requests %v, limits %v; want both", c.Name, name, hasReq, hasLim))
		case req.Cmp(lim) > 0:
			errs = append(errs, fmt.Errorf("container %s: %s: request %s is over the limit %s", c.Name, name, req.String(), lim.String()))
		}
	}
	return errs
}

func checkResources(m *manifest) error {
	var errs []error
	for _, c := range m.deployment.Spec.Template.Spec.Containers {
		errs = append(errs, containerResources(c)...)
		lim, ok := c.Resources.Limits[corev1.ResourceMemory]
		if !ok {
			continue
		}
		for _, e := range c.Env {
			if e.Name != "GOMEMLIMIT" {
				continue
			}
			soft, err := goMemLimit(e.Value)
			if err != nil {
				errs = append(errs, fmt.Errorf("container %s: GOMEMLIMIT %q: %w", c.Name, e.Value, err))
				continue
			}
			// Under the limit, or the kernel kills first; not far under, or
			// the GC runs hot while memory sits unused.
			if hard := lim.Value(); soft >= hard || soft < hard/2 {
				errs = append(errs, fmt.Errorf("container %s: GOMEMLIMIT %s: got %d bytes, want between half and all of limits.memory %s (%d bytes)", c.Name, e.Value, soft, lim.String(), hard))
			}
		}
	}
	return errors.Join(errs...)
}

// goMemLimit parses GOMEMLIMIT as the Go runtime does: a number of bytes
// with an optional B, KiB, MiB, GiB or TiB suffix.
func goMemLimit(s string) (int64, error) {
	units := []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}
	shift := uint(0)
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			s, shift = n, u.shift
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, errors.New("want a positive number of bytes, optionally with B, KiB, MiB, GiB or TiB")
	}
	return n << shift, nil
}

func checkSecurity(m *manifest) error {
	errs := podSecurity(m.deployment.Spec.Template.Spec)
	for _, ns := range m.namespaces {
		if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "restricted" {
			errs = append(errs, fmt.Errorf("Namespace %s: pod-security.kubernetes.io/enforce: got %q, want restricted, which the pods meet", ns.Name, got))
		}
	}
	return errors.Join(errs...)
}

// podSecurity checks a pod template against the restricted Pod Security
// Standard, and more: no service account token, a read-only root.
func podSecurity(spec corev1.PodSpec) []error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if a := spec.AutomountServiceAccountToken; a == nil || *a {
		fail("pod: automountServiceAccountToken: got %v, want false (it does not call the API server)", deref(a))
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		fail("pod: host namespaces: got hostNetwork %v, hostPID %v, hostIPC %v; want none", spec.HostNetwork, spec.HostPID, spec.HostIPC)
	}
	pod := spec.SecurityContext
	if pod == nil {
		pod = &corev1.PodSecurityContext{}
	}
	for _, c := range spec.Containers {
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		nonRoot, user, seccomp := sc.RunAsNonRoot, sc.RunAsUser, sc.SeccompProfile
		if nonRoot == nil {
			nonRoot = pod.RunAsNonRoot
		}
		if user == nil {
			user = pod.RunAsUser
		}
		if seccomp == nil {
			seccomp = pod.SeccompProfile
		}
		if nonRoot == nil || !*nonRoot {
			fail("container %s: runAsNonRoot: got %v, want true", c.Name, deref(nonRoot))
		}
		if user == nil || *user == 0 {
			fail("container %s: runAsUser: got %v, want a non-zero UID", c.Name, deref(user))
		}
		if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
			fail("container %s: seccompProfile: got %v, want RuntimeDefault", c.Name, deref(seccomp))
		}
		if a := sc.AllowPrivilegeEscalation; a == nil || *a {
			fail("container %s: allowPrivilegeEscalation: got %v, want false", c.Name, deref(a))
		}
		if r := sc.ReadOnlyRootFilesystem; r == nil || !*r {
			fail("container %s: readOnlyRootFilesystem: got %v, want true", c.Name, deref(r))
		}
		if p := sc.Privileged; p != nil && *p {
			fail("container %s: privileged: got true, want false", c.Name)
		}
		caps := sc.Capabilities
		if caps == nil || len(caps.Drop) != 1 || caps.Drop[0] != "ALL" || len(caps.Add) > 0 {
			fail("container %s: capabilities: got %+v, want drop [ALL] and add none", c.Name, deref(caps))
		}
	}
	return errs
}

func checkNetworkPolicy(m *manifest) error {
	var errs []error
	np := m.netpol.Spec
	for _, want := range []string{"Ingress", "Egress"} {
		found := false
		for _, pt := range np.PolicyTypes {
			found = found || string(pt) == want
		}
		if !found {
			errs = append(errs, fmt.Errorf("NetworkPolicy %s: policyTypes %v: want %s among them", m.netpol.Name, np.PolicyTypes, want))
		}
	}
	open := map[int32]bool{}
	for i, rule := range np.Ingress {
		if len(rule.Ports) == 0 {
			errs = append(errs, fmt.Errorf("NetworkPolicy ingress[%d]: no ports: it opens every port", i))
		}
		for _, p := range rule.Ports {
			if p.Port == nil {
				errs = append(errs, fmt.Errorf("NetworkPolicy ingress[%d]: a port rule with no port opens every port", i))
				continue
			}
			cp, err := m.containerPort(p.Port.String())
			if err != nil {
				errs = append(errs, fmt.Errorf("NetworkPolicy ingress[%d]: %w", i, err))
				continue
			}
			open[cp.ContainerPort] = true
		}
	}
	for _, name := range []string{"grpc", "metrics"} {
		if cp, err := m.containerPort(name); err == nil && !open[cp.ContainerPort] {
			errs = append(errs, fmt.Errorf("NetworkPolicy: no ingress rule opens the %s port %d", name, cp.ContainerPort))
		}
	}
	wants := []struct {
		what  string
		port  int32
		proto corev1.Protocol
	}{{"DNS", 53, corev1.ProtocolUDP}, {"DNS", 53, corev1.ProtocolTCP}}
	// The base lets exprd out to DNS only; each provider a manual or
	// models.yaml names needs its port let out (to its address: checkEgress).
	providers, err := m.providerPorts()
	if err != nil {
		errs = append(errs, err)
	}
	for _, u := range slices.Sorted(maps.Keys(providers)) {
		wants = append(wants, struct {
			what  string
			port  int32
			proto corev1.Protocol
		}{u, providers[u], corev1.ProtocolTCP})
	}
	for _, want := range wants {
		if !egressAllows(np.Egress, want.port, want.proto) {
			errs = append(errs, fmt.Errorf("NetworkPolicy egress: nothing allows %s (%d/%s)", want.what, want.port, want.proto))
		}
	}
	return errors.Join(errs...)
}

func egressAllows(rules []networkingv1.NetworkPolicyEgressRule, port int32, proto corev1.Protocol) bool {
	for _, r := range rules {
		if len(r.Ports) == 0 {
			return true
		}
		for _, p := range r.Ports {
			pp := corev1.ProtocolTCP
			if p.Protocol != nil {
				pp = *p.Protocol
			}
			if pp == proto && (p.Port == nil || (p.Port.Type == intstr.Int && p.Port.IntVal <= port && port <= max(p.Port.IntVal, deref32(p.EndPort)))) {
				return true
			}
		}
	}
	return false
}

func deref32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func checkFiles(m *manifest) error {
	s, err := m.settings()
	if err != nil {
		return err
	}
	var errs []error
	if d, ok := s["demo"]; ok && d.value != "false" {
		errs = append(errs, fmt.Errorf("--demo=%s (%s): the demo state, functions and scripted model are not for a deployment", d.value, d.from))
	}
	for _, flag := range []string{"models-config", "utcp-env-file", "auth-tokens-file", "tls-cert", "tls-key", "tls-client-ca"} {
		if f, ok := s[flag]; ok && f.value != "" {
			if _, err := m.mountedFile(f.value); err != nil {
				errs = append(errs, fmt.Errorf("--%s (%s): %w", flag, f.from, err))
			}
		}
	}
	dir, err := m.explicit("manuals-dir")
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	vm, rel, err := m.mountOf(path.Join(dir.value, "x"))
	if err != nil || rel != "x" {
		return errors.Join(append(errs, fmt.Errorf("--manuals-dir=%s: want the mount path of the manuals ConfigMap volume (%v)", dir.value, err))...)
	}
	files, err := m.volumeFiles(vm.Name)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("--manuals-dir: %w", err))...)
	}
	for name := range files {
		// exprd skips other files without a word; that is never meant.
		if ext := strings.ToLower(path.Ext(name)); ext != ".json" && ext != ".yaml" && ext != ".yml" {
			errs = append(errs, fmt.Errorf("--manuals-dir: %s is not .json, .yaml or .yml, so exprd ignores it", name))
		}
	}
	return errors.Join(errs...)
}

func checkImage(m *manifest) error {
	var errs []error
	overlay := !strings.HasSuffix(m.dir, "/base")
	for _, c := range m.deployment.Spec.Template.Spec.Containers {
		_, tag, hasTag := strings.Cut(c.Image[strings.LastIndex(c.Image, "/")+1:], ":")
		digest := strings.Contains(c.Image, "@sha256:")
		switch {
		case !hasTag && !digest:
			errs = append(errs, fmt.Errorf("container %s: image %s: want a tag or digest", c.Name, c.Image))
		case overlay && tag == "latest":
			errs = append(errs, fmt.Errorf("container %s: image %s: an overlay pins a release (images: newTag), not latest", c.Name, c.Image))
		}
	}
	return errors.Join(errs...)
}
