package deploy_test

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	etcdversion "go.etcd.io/etcd/api/v3/version"
	"go.etcd.io/etcd/pkg/v3/flags"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The checks of the shared tool registry's etcd (overlays/example/etcd):
// its members agree on who they are and keep a quorum, its pod is locked
// down like exprd's, and it runs the etcd the tests run embedded.

// etcdObjects are a build's etcd (stateful: its container is etcdContainer).
type etcdObjects struct{ stateful }

// etcdContainer names the StatefulSet's container that runs etcd.
const etcdContainer = "etcd"

// etcdMember is one member as etcd itself reads its args.
type etcdMember struct {
	pod string // the StatefulSet's pod: etcd-0, etcd-1, ...
	cfg *embed.Config
}

// members parses every member's args with etcd's own flags, each after
// the kubelet's expansion of $(VAR) for that pod.
func (e *etcdObjects) members() ([]etcdMember, error) {
	c, err := e.container()
	if err != nil {
		return nil, err
	}
	if len(c.Command) == 0 || path.Base(c.Command[0]) != "etcd" {
		return nil, fmt.Errorf("container %s: command %q: want etcd's path (/usr/local/bin/etcd): the image has a CMD and no ENTRYPOINT, so args alone would replace the CMD", c.Name, c.Command)
	}
	if e.replicas() < 1 {
		return nil, fmt.Errorf("StatefulSet %s: replicas %d: no member to serve the registry", e.sts.Name, e.replicas())
	}
	var out []etcdMember
	for i := range e.replicas() {
		pod := fmt.Sprintf("%s-%d", e.sts.Name, i)
		vars, err := podVars(c, pod, e.namespace())
		if err != nil {
			return nil, err
		}
		args := slices.Clone(c.Command[1:])
		for _, a := range c.Args {
			x, missing := expandVars(a, vars)
			if len(missing) > 0 {
				return nil, fmt.Errorf("member %s: arg %s: $(%s) is no variable of the container's, so the kubelet leaves it as written", pod, a, missing[0])
			}
			args = append(args, x)
		}
		cfg, err := parseEtcdArgs(args)
		if err != nil {
			return nil, fmt.Errorf("member %s: etcd's flags: %w", pod, err)
		}
		if len(cfg.ListenClientUrls) == 0 || len(cfg.ListenPeerUrls) == 0 {
			return nil, fmt.Errorf("member %s: got --listen-client-urls %v, --listen-peer-urls %v; want both", pod, cfg.ListenClientUrls, cfg.ListenPeerUrls)
		}
		out = append(out, etcdMember{pod, cfg})
	}
	return out, nil
}

// podVars is the variables a container's args may name as $(VAR): its
// env, with the two fields a member needs from the downward API.
// Variables etcd reads itself (ETCD_*) are refused: the checks read
// etcd's settings from its args.
func podVars(c *corev1.Container, pod, namespace string) (map[string]string, error) {
	vars := map[string]string{}
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "ETCD_") {
			return nil, fmt.Errorf("container %s: env %s: etcd reads it as a flag, which the checks do not follow; give the flag in args", c.Name, e.Name)
		}
		switch f := e.ValueFrom; {
		case f == nil:
			vars[e.Name], _ = expandVars(e.Value, vars)
		case f.FieldRef != nil && f.FieldRef.FieldPath == "metadata.name":
			vars[e.Name] = pod
		case f.FieldRef != nil && f.FieldRef.FieldPath == "metadata.namespace":
			vars[e.Name] = namespace
		default:
			return nil, fmt.Errorf("container %s: env %s: only literal values, metadata.name and metadata.namespace are stood in for", c.Name, e.Name)
		}
	}
	return vars, nil
}

// expandVars expands $(VAR) as the kubelet does in a container's args: a
// defined variable is replaced, an undefined one left as written (and
// returned in missing), and $$ is a $.
func expandVars(s string, vars map[string]string) (_ string, missing []string) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String(), missing
			}
			if v, ok := vars[s[i+2:i+2+end]]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
				missing = append(missing, s[i+2:i+2+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String(), missing
}

// parseEtcdArgs reads etcd's command line as etcd does
// (etcdmain/config.go: the flags embed.Config declares and the few
// etcdmain adds), then validates it with embed.Config.Validate.
func parseEtcdArgs(args []string) (*embed.Config, error) {
	cfg := embed.NewConfig()
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.AddFlags(fs)
	state := flags.NewSelectiveStringValue(embed.ClusterStateFlagNew, embed.ClusterStateFlagExisting)
	fs.Var(state, "initial-cluster-state", "")
	configFile := fs.String("config-file", "", "")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%q is not a valid flag", fs.Arg(0))
	}
	if *configFile != "" {
		return nil, errors.New("--config-file: etcd then ignores its flags, and the checks do not read the file")
	}
	cfg.ListenPeerUrls = flags.UniqueURLsFromFlag(fs, "listen-peer-urls")
	cfg.AdvertisePeerUrls = flags.UniqueURLsFromFlag(fs, "initial-advertise-peer-urls")
	cfg.ListenClientUrls = flags.UniqueURLsFromFlag(fs, "listen-client-urls")
	cfg.ListenClientHttpUrls = flags.UniqueURLsFromFlag(fs, "listen-client-http-urls")
	cfg.AdvertiseClientUrls = flags.UniqueURLsFromFlag(fs, "advertise-client-urls")
	cfg.ListenMetricsUrls = flags.UniqueURLsFromFlag(fs, "listen-metrics-urls")
	cfg.ClusterState = state.String()
	if flags.IsSet(fs, "listen-client-urls") && !flags.IsSet(fs, "advertise-client-urls") {
		cfg.AdvertiseClientUrls = nil
	}
	return cfg, cfg.Validate()
}

// urlPort is a URL's port as a number, its scheme's default when it
// names none.
func urlPort(u url.URL) int32 {
	if p := u.Port(); p != "" {
		n, _ := strconv.ParseInt(p, 10, 32)
		return int32(n)
	}
	return map[string]int32{"http": 80, "https": 443}[u.Scheme]
}

// ports is the set of the URLs' ports.
func ports(us []url.URL) map[int32]bool {
	out := map[int32]bool{}
	for _, u := range us {
		out[urlPort(u)] = true
	}
	return out
}

func checkEtcdMembers(m *manifest) error {
	if m.etcd == nil {
		return nil
	}
	e := m.etcd
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	n := e.replicas()
	if n%2 == 0 {
		fail("StatefulSet %s: replicas %d: want an odd number: %d members lose the quorum after as many failures as %d do", e.sts.Name, n, n, n-1)
	}
	if n > 1 && e.sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		fail("StatefulSet %s: podManagementPolicy %q with %d members: want Parallel: with OrderedReady the first member waits for a quorum the others would bring, and they are never created", e.sts.Name, e.sts.Spec.PodManagementPolicy, n)
	}
	i := slices.IndexFunc(e.services, func(s *corev1.Service) bool { return s.Name == e.sts.Spec.ServiceName })
	switch {
	case i < 0:
		fail("StatefulSet %s: serviceName %q: got no Service of that name selecting the members, want the headless Service that gives them their names", e.sts.Name, e.sts.Spec.ServiceName)
	case e.services[i].Spec.ClusterIP != corev1.ClusterIPNone:
		fail("Service %s (the StatefulSet's serviceName): clusterIP %q: want None, so that each member has a DNS name", e.services[i].Name, e.services[i].Spec.ClusterIP)
	case !e.services[i].Spec.PublishNotReadyAddresses:
		fail("Service %s (the StatefulSet's serviceName): publishNotReadyAddresses false: want true, since members must find each other to form the quorum that makes them ready", e.services[i].Name)
	}
	claims := map[string]bool{}
	for _, pvc := range e.sts.Spec.VolumeClaimTemplates {
		claims[pvc.Name] = true
		if !slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteOnce) && !slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteOncePod) {
			fail("volumeClaimTemplate %s: accessModes %v: want ReadWriteOnce, one member's disk each", pvc.Name, pvc.Spec.AccessModes)
		}
		if _, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; !ok {
			fail("volumeClaimTemplate %s: no storage request", pvc.Name)
		}
	}
	if len(claims) == 0 {
		fail("StatefulSet %s: no volumeClaimTemplates: a member's data would not outlive its pod", e.sts.Name)
	}
	if n > 1 {
		if err := quorumBudget("etcd", e.pdb, n); err != nil {
			errs = append(errs, err)
		}
	}
	members, err := e.members()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	c, err := e.container()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("%s-%d", e.sts.Name, i)
	}
	for _, mb := range members {
		cfg := mb.cfg
		fail := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("member %s: "+format, append([]any{mb.pod}, a...)...))
		}
		if cfg.Name != mb.pod {
			fail("--name %q: want the pod's name, %s", cfg.Name, mb.pod)
		}
		peerPorts, clientPorts := ports(cfg.ListenPeerUrls), ports(cfg.ListenClientUrls)
		for p := range mapsUnion(peerPorts, clientPorts, ports(cfg.ListenMetricsUrls)) {
			if _, err := e.containerPort(fmt.Sprint(p)); err != nil {
				fail("a listen URL's port: %v", err)
			}
		}
		cluster, _, err := cfg.PeerURLsMapAndToken("etcd")
		if err != nil {
			fail("--initial-cluster: %v", err)
			continue
		}
		got := make([]string, 0, len(cluster))
		for name := range cluster {
			got = append(got, name)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			fail("--initial-cluster names %v: want the StatefulSet's %d pods %v", got, n, want)
		}
		for _, name := range got {
			for _, u := range cluster[name] {
				if !slices.Contains(e.memberHosts(name), u.Hostname()) || !peerPorts[urlPort(u)] {
					fail("--initial-cluster: %s=%s: want the pod's name through the headless Service (%s) and the peer port %v", name, u.String(), e.memberHosts(name)[2], slices.Sorted(maps.Keys(peerPorts)))
				}
			}
		}
		advertised := urlStrings(cfg.AdvertisePeerUrls)
		if listed := urlStrings(cluster[mb.pod]); !slices.Equal(advertised, listed) {
			fail("--initial-advertise-peer-urls %v: want what --initial-cluster lists for it, %v", advertised, listed)
		}
		for _, u := range cfg.AdvertiseClientUrls {
			if !slices.Contains(e.memberHosts(mb.pod), u.Hostname()) || !clientPorts[urlPort(u)] {
				fail("--advertise-client-urls %s: want the pod's name through the headless Service (%s) and a client port %v", u.String(), e.memberHosts(mb.pod)[2], slices.Sorted(maps.Keys(clientPorts)))
			}
		}
		if vm, _, err := mountIn(c, path.Join(cfg.Dir, "member")); err != nil || !claims[vm.Name] {
			fail("--data-dir %s: got it on no volumeClaimTemplate's mount (%v), want it on the member's own disk", cfg.Dir, err)
		}
		if r := cfg.AutoCompactionRetention; r == "" || r == "0" {
			fail("--auto-compaction-retention %q: want history compacted: every manual replaced is a revision, and an uncompacted history grows to the quota, when etcd refuses every write", r)
		}
	}
	return errors.Join(errs...)
}

// quorumBudget checks that a disruption budget lets no eviction take a
// quorum of n members.
func quorumBudget(what string, pdb *policyv1.PodDisruptionBudget, n int) error {
	if pdb == nil {
		return fmt.Errorf("no PodDisruptionBudget selects %s's pods: a node drain may evict a quorum of the %d members at once", what, n)
	}
	quorum := n/2 + 1
	var down int
	switch s := pdb.Spec; {
	case s.MaxUnavailable != nil:
		v, err := intstr.GetScaledValueFromIntOrPercent(s.MaxUnavailable, n, true)
		if err != nil {
			return fmt.Errorf("PodDisruptionBudget %s: maxUnavailable: %w", pdb.Name, err)
		}
		down = v
	case s.MinAvailable != nil:
		v, err := intstr.GetScaledValueFromIntOrPercent(s.MinAvailable, n, true)
		if err != nil {
			return fmt.Errorf("PodDisruptionBudget %s: minAvailable: %w", pdb.Name, err)
		}
		down = n - v
	default:
		return fmt.Errorf("PodDisruptionBudget %s: set maxUnavailable or minAvailable", pdb.Name)
	}
	if n-down < quorum || down < 1 {
		return fmt.Errorf("PodDisruptionBudget %s: lets %d of %d members be evicted at once: want at least 1 and at most %d, so that %d keep the quorum", pdb.Name, down, n, n-quorum, quorum)
	}
	return nil
}

func checkEtcdPod(m *manifest) error {
	if m.etcd == nil {
		return nil
	}
	e := m.etcd
	c, err := e.container()
	if err != nil {
		return err
	}
	errs := podSecurity(e.sts.Spec.Template.Spec)
	errs = append(errs, containerResources(*c)...)
	if l := e.sts.Spec.Template.Spec.EnableServiceLinks; l == nil || *l {
		errs = append(errs, fmt.Errorf("pod: enableServiceLinks: got %v, want false: the kubelet would set ETCD_SERVICE_HOST, ETCD_PORT, ... for a Service named etcd, and etcd takes every ETCD_* for a flag, past the args the checks read", deref(l)))
	}
	if err := etcdImage(c.Image); err != nil {
		errs = append(errs, fmt.Errorf("container %s: %w", c.Name, err))
	}
	members, err := e.members()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	health := mapsUnion(ports(members[0].cfg.ListenMetricsUrls), ports(members[0].cfg.ListenClientUrls))
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		paths []string
	}{
		// Not /readyz for liveness: a member without a quorum is not
		// ready, and restarting it brings no quorum back.
		{"livenessProbe", c.LivenessProbe, []string{"/livez"}},
		{"readinessProbe", c.ReadinessProbe, []string{"/readyz"}},
	} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			errs = append(errs, fmt.Errorf("container %s: %s: got %v, want an httpGet of %v", c.Name, p.name, p.probe, p.paths))
			continue
		}
		g := p.probe.HTTPGet
		if !slices.Contains(p.paths, g.Path) {
			errs = append(errs, fmt.Errorf("container %s: %s: path %q: want %v", c.Name, p.name, g.Path, p.paths))
		}
		cp, err := e.containerPort(g.Port.String())
		if err != nil {
			errs = append(errs, fmt.Errorf("container %s: %s: %w", c.Name, p.name, err))
		} else if !health[cp.ContainerPort] {
			errs = append(errs, fmt.Errorf("container %s: %s: port %d: want one etcd serves health on (--listen-metrics-urls, --listen-client-urls: %v)", c.Name, p.name, cp.ContainerPort, slices.Sorted(maps.Keys(health))))
		}
	}
	return errors.Join(errs...)
}

// etcdImage checks that an image is pinned to the etcd release the tests
// run embedded (go.etcd.io/etcd/server/v3 in go.mod), so that what is
// deployed is what was tested.
func etcdImage(image string) error {
	ref, _, _ := strings.Cut(image, "@")
	_, tag, ok := strings.Cut(ref[strings.LastIndex(ref, "/")+1:], ":")
	if want := "v" + etcdversion.Version; !ok || tag != want {
		return fmt.Errorf("image %s: got tag %q, want %s, the etcd release the tests run (go.etcd.io/etcd/server/v3 in deploy/go.mod): pin the two together", image, tag, want)
	}
	return nil
}

// mountIn finds the volume mount of a container that a path lies in.
func mountIn(c *corev1.Container, p string) (corev1.VolumeMount, string, error) {
	for _, vm := range c.VolumeMounts {
		if rel, ok := strings.CutPrefix(p, strings.TrimSuffix(vm.MountPath, "/")+"/"); ok {
			return vm, path.Clean(rel), nil
		}
	}
	return corev1.VolumeMount{}, "", fmt.Errorf("%s is on no volume mount of container %s", p, c.Name)
}

func urlStrings(us []url.URL) []string {
	out := make([]string, 0, len(us))
	for _, u := range us {
		out = append(out, u.String())
	}
	slices.Sort(out)
	return out
}

func mapsUnion[K comparable](ms ...map[K]bool) map[K]bool {
	out := map[K]bool{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = out[k] || v
		}
	}
	return out
}

// TestExpandVars checks the kubelet's $(VAR) expansion the member checks
// rely on.
func TestExpandVars(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"POD_NAME": "etcd-1", "NS": "exprd"}
	for _, tt := range []struct {
		in, want string
		missing  []string
	}{
		{"--name=$(POD_NAME)", "--name=etcd-1", nil},
		{"http://$(POD_NAME).etcd-headless.$(NS).svc:2380", "http://etcd-1.etcd-headless.exprd.svc:2380", nil},
		{"$(HOSTNAME)", "$(HOSTNAME)", []string{"HOSTNAME"}},
		{"$$(POD_NAME) costs $5", "$(POD_NAME) costs $5", nil},
		{"$(POD_NAME", "$(POD_NAME", nil},
	} {
		got, missing := expandVars(tt.in, vars)
		if got != tt.want || !slices.Equal(missing, tt.missing) {
			t.Errorf("expandVars(%q): got %q, missing %v; want %q, missing %v", tt.in, got, missing, tt.want, tt.missing)
		}
	}
}
