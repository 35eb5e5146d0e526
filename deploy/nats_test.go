package deploy_test

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The checks of the turn store's NATS JetStream (overlays/example/nats):
// its members route to each other and keep a quorum, JetStream keeps its
// store on each member's volume claim, its pod is locked down like exprd's
// and runs the nats-server the tests run embedded, only exprd reaches its
// client port, and exprd's --turn-store, --nats-url and --nats-replicas
// name it.

// natsContainer names the StatefulSet's container that runs nats-server.
const natsContainer = "nats"

// natsOpenTimeout is how long exprd waits for NATS at start
// (cmd/exprd/turns.go, open: context.WithTimeout(ctx, 30*time.Second));
// TestNATSOpenTimeout holds it to the source.
const natsOpenTimeout = 30 * time.Second

// natsObjects are a build's NATS (stateful: its container is
// natsContainer).
type natsObjects struct{ stateful }

// natsMember is one member's settings as nats-server itself reads them.
type natsMember struct {
	pod  string
	opts *natsserver.Options
}

// natsConfigVar matches a $VAR of a NATS config file.
var natsConfigVar = regexp.MustCompile(`\$([A-Za-z_][A-Za-z0-9_]*)`)

// natsMembers reads every member's settings with nats-server's own flags
// and config parser (server.ConfigureOptions): its args after the
// kubelet's $(VAR) expansion for that pod, its --config file from the
// ConfigMap mounted there, the file's $VARs from the container's env for
// that pod (as nats-server reads its environment).
func (m *manifest) natsMembers() ([]natsMember, error) {
	n := m.nats
	c, err := n.container()
	if err != nil {
		return nil, err
	}
	if len(c.Command) > 0 {
		return nil, fmt.Errorf("container %s: command %q replaces the image's ENTRYPOINT (/nats-server); set args only", c.Name, c.Command)
	}
	if n.replicas() < 1 {
		return nil, fmt.Errorf("StatefulSet %s: replicas %d: no member to keep turns", n.sts.Name, n.replicas())
	}
	var out []natsMember
	for i := range n.replicas() {
		pod := fmt.Sprintf("%s-%d", n.sts.Name, i)
		vars, err := podVars(c, pod, n.namespace())
		if err != nil {
			return nil, err
		}
		var args []string
		for _, a := range c.Args {
			x, missing := expandVars(a, vars)
			if len(missing) > 0 {
				return nil, fmt.Errorf("member %s: arg %s: $(%s) is no variable of the container's, so the kubelet leaves it as written", pod, a, missing[0])
			}
			args = append(args, x)
		}
		opts, err := m.parseNATSArgs(c, args, vars)
		if err != nil {
			return nil, fmt.Errorf("member %s: nats-server's settings: %w", pod, err)
		}
		out = append(out, natsMember{pod, opts})
	}
	return out, nil
}

// parseNATSArgs reads nats-server's command line as nats-server does,
// its --config file written to a scratch file first with the container's
// variables that the file names defined at its top.
func (m *manifest) parseNATSArgs(c *corev1.Container, args []string, vars map[string]string) (*natsserver.Options, error) {
	args = slices.Clone(args)
	for i, a := range args {
		var file string
		var at int
		switch {
		case (a == "--config" || a == "-config" || a == "-c" || a == "--c") && i+1 < len(args):
			file, at = args[i+1], i+1
		case strings.HasPrefix(a, "--config=") || strings.HasPrefix(a, "-config=") || strings.HasPrefix(a, "-c="):
			_, file, _ = strings.Cut(a, "=")
			at = i
		default:
			continue
		}
		data, err := m.natsFile(c, file)
		if err != nil {
			return nil, fmt.Errorf("--config %s: %w", file, err)
		}
		var defs strings.Builder
		seen := map[string]bool{}
		for _, sub := range natsConfigVar.FindAllStringSubmatch(data, -1) {
			if v, ok := vars[sub[1]]; ok && !seen[sub[1]] {
				seen[sub[1]] = true
				fmt.Fprintf(&defs, "%s: %q\n", sub[1], v)
			}
		}
		f, err := os.CreateTemp(scratch, "nats-*.conf")
		if err != nil {
			return nil, err
		}
		defer os.Remove(f.Name())
		_, err = f.WriteString(defs.String() + data)
		if err = errors.Join(err, f.Close()); err != nil {
			return nil, err
		}
		if at == i {
			args[i] = "--config=" + f.Name()
		} else {
			args[at] = f.Name()
		}
		break
	}
	fs := flag.NewFlagSet("nats-server", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	noop := func() {}
	for _, a := range args {
		if strings.HasPrefix(strings.TrimLeft(a, "-"), "sl") || strings.HasPrefix(strings.TrimLeft(a, "-"), "signal") {
			return nil, fmt.Errorf("arg %s: signals a running server, and exits", a)
		}
	}
	opts, err := natsserver.ConfigureOptions(fs, args, noop, noop, noop)
	if err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%q is not a flag of nats-server's", fs.Arg(0))
	}
	if opts.ConfigFile == "" {
		return nil, errors.New("no --config: the checks read nats-server's settings from its config file")
	}
	return opts, nil
}

// natsFile is the content of a file of a ConfigMap volume mounted in the
// NATS container.
func (m *manifest) natsFile(c *corev1.Container, p string) (string, error) {
	vm, rel, err := mountIn(c, p)
	if err != nil {
		return "", err
	}
	for _, v := range m.nats.sts.Spec.Template.Spec.Volumes {
		if v.Name != vm.Name {
			continue
		}
		if v.ConfigMap == nil {
			return "", fmt.Errorf("volume %s is not a ConfigMap", v.Name)
		}
		cm, ok := m.configMaps[v.ConfigMap.Name]
		if !ok {
			return "", fmt.Errorf("volume %s: ConfigMap %s is not in the build (ConfigMaps: %v)", v.Name, v.ConfigMap.Name, slices.Sorted(maps.Keys(m.configMaps)))
		}
		key := rel
		for _, it := range v.ConfigMap.Items {
			if it.Path == rel {
				key = it.Key
			}
		}
		d, ok := cm.Data[key]
		if !ok {
			return "", fmt.Errorf("volume %s: ConfigMap %s has no key %s", v.Name, cm.Name, key)
		}
		return d, nil
	}
	return "", fmt.Errorf("no volume %s in the pod", vm.Name)
}

func checkNATSMembers(m *manifest) error {
	if m.nats == nil {
		return nil
	}
	n := m.nats
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	count := n.replicas()
	if count%2 == 0 {
		fail("StatefulSet %s: replicas %d: want an odd number: %d members lose JetStream's quorum after as many failures as %d do", n.sts.Name, count, count, count-1)
	}
	if count > 1 && n.sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		fail("StatefulSet %s: podManagementPolicy %q with %d members: want Parallel: a member is started (its startup probe) only once JetStream has a meta leader, which the others must bring", n.sts.Name, n.sts.Spec.PodManagementPolicy, count)
	}
	i := slices.IndexFunc(n.services, func(s *corev1.Service) bool { return s.Name == n.sts.Spec.ServiceName })
	switch {
	case i < 0:
		fail("StatefulSet %s: serviceName %q: got no Service of that name selecting the members, want the headless Service that gives them their names", n.sts.Name, n.sts.Spec.ServiceName)
	case n.services[i].Spec.ClusterIP != corev1.ClusterIPNone:
		fail("Service %s (the StatefulSet's serviceName): clusterIP %q: want None, so that each member has a DNS name", n.services[i].Name, n.services[i].Spec.ClusterIP)
	case !n.services[i].Spec.PublishNotReadyAddresses:
		fail("Service %s (the StatefulSet's serviceName): publishNotReadyAddresses false: want true, since members must route to each other to elect the meta leader that makes them ready", n.services[i].Name)
	}
	claims := map[string]int64{}
	for _, pvc := range n.sts.Spec.VolumeClaimTemplates {
		if !slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteOnce) && !slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteOncePod) {
			fail("volumeClaimTemplate %s: accessModes %v: want ReadWriteOnce, one member's disk each", pvc.Name, pvc.Spec.AccessModes)
		}
		q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		if !ok {
			fail("volumeClaimTemplate %s: no storage request", pvc.Name)
		}
		claims[pvc.Name] = q.Value()
	}
	if len(claims) == 0 {
		fail("StatefulSet %s: no volumeClaimTemplates: a member's JetStream store would not outlive its pod", n.sts.Name)
	}
	if count > 1 {
		if err := quorumBudget("NATS", n.pdb, count); err != nil {
			errs = append(errs, err)
		}
	}
	members, err := m.natsMembers()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	c, err := n.container()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	want := make([]string, count)
	for i := range want {
		want[i] = fmt.Sprintf("%s-%d", n.sts.Name, i)
	}
	for _, mb := range members {
		o := mb.opts
		fail := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("member %s: "+format, append([]any{mb.pod}, a...)...))
		}
		if !o.JetStream {
			fail("jetstream: off: exprd's turn store is JetStream")
		}
		if o.ServerName != mb.pod {
			fail("server_name %q: want the pod's name, %s: JetStream's clustering tells members apart by it, and a member must keep it across restarts", o.ServerName, mb.pod)
		}
		for what, p := range map[string]int{"port (clients)": o.Port, "cluster port": o.Cluster.Port, "http_port (monitoring, the probes)": o.HTTPPort} {
			if p <= 0 {
				fail("%s %d: want a fixed port", what, p)
			} else if _, err := n.containerPort(strconv.Itoa(p)); err != nil {
				fail("%s: %v", what, err)
			}
		}
		if count > 1 {
			if o.Cluster.Name == "" {
				fail("cluster.name: unset: want one, the same on every member")
			}
			got := map[string]bool{}
			for _, u := range o.Routes {
				pod, _, _ := strings.Cut(u.Hostname(), ".")
				p, _ := strconv.Atoi(u.Port())
				if !slices.Contains(n.memberHosts(pod), u.Hostname()) || !slices.Contains(want, pod) || p != o.Cluster.Port {
					fail("cluster.routes: %s: want a member's name through the headless Service (%s) and the cluster port %d", u.String(), n.memberHosts(want[0])[0], o.Cluster.Port)
					continue
				}
				got[pod] = true
			}
			if g := slices.Sorted(maps.Keys(got)); !slices.Equal(g, want) {
				fail("cluster.routes name %v: want the StatefulSet's %d pods %v", g, count, want)
			}
		}
		vm, _, err := mountIn(c, path.Join(o.StoreDir, "jetstream"))
		size, onClaim := claims[vm.Name]
		if o.StoreDir == "" || err != nil || !onClaim {
			fail("jetstream.store_dir %q: got it on no volumeClaimTemplate's mount (%v), want it on the member's own disk", o.StoreDir, err)
		} else if o.JetStreamMaxStore <= 0 || o.JetStreamMaxStore >= size {
			fail("jetstream.max_file_store %d: want it set, under the volume claim's %d bytes, so that JetStream refuses writes before the disk is full", o.JetStreamMaxStore, size)
		}
		// nats-server ignores SIGTERM while in lame duck mode, so the
		// kubelet kills it at the grace period's end.
		if l := c.Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Exec != nil && slices.ContainsFunc(l.PreStop.Exec.Command, func(s string) bool { return strings.Contains(s, "ldm") }) {
			ldm, grace := o.LameDuckDuration, podGracePeriod(n.sts.Spec.Template.Spec)
			if ldm == 0 {
				ldm = natsserver.DEFAULT_LAME_DUCK_DURATION
			}
			if lgp := o.LameDuckGracePeriod; lgp > 0 {
				ldm += lgp
			} else {
				ldm += natsserver.DEFAULT_LAME_DUCK_GRACE_PERIOD
			}
			if grace <= ldm {
				fail("terminationGracePeriodSeconds %v: want more than lame_duck_duration plus lame_duck_grace_period, %v, or the kubelet kills the member mid-way", grace, ldm)
			}
		}
	}
	return errors.Join(errs...)
}

// podGracePeriod is a pod's terminationGracePeriodSeconds.
func podGracePeriod(spec corev1.PodSpec) time.Duration {
	if g := spec.TerminationGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return 30 * time.Second
}

func checkNATSPod(m *manifest) error {
	if m.nats == nil {
		return nil
	}
	n := m.nats
	c, err := n.container()
	if err != nil {
		return err
	}
	errs := podSecurity(n.sts.Spec.Template.Spec)
	errs = append(errs, containerResources(*c)...)
	if l := n.sts.Spec.Template.Spec.EnableServiceLinks; l == nil || *l {
		errs = append(errs, fmt.Errorf("pod: enableServiceLinks: got %v, want false: the kubelet would set NATS_SERVICE_HOST, NATS_PORT, ... for a Service named nats, which nats.conf's $VARs could pick up", deref(l)))
	}
	if err := natsImage(c.Image); err != nil {
		errs = append(errs, fmt.Errorf("container %s: %w", c.Name, err))
	}
	members, err := m.natsMembers()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	monitor := members[0].opts.HTTPPort
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		paths []string
	}{
		// Not the full /healthz for liveness: it fails while JetStream has
		// no meta leader or a stream is behind, and restarting the member
		// brings neither back.
		{"livenessProbe", c.LivenessProbe, []string{"/healthz?js-enabled-only=true"}},
		{"readinessProbe", c.ReadinessProbe, []string{"/healthz?js-server-only=true", "/healthz?js-enabled-only=true", "/healthz"}},
	} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			errs = append(errs, fmt.Errorf("container %s: %s: got %v, want an httpGet of %v", c.Name, p.name, p.probe, p.paths))
			continue
		}
		g := p.probe.HTTPGet
		if !slices.Contains(p.paths, g.Path) {
			errs = append(errs, fmt.Errorf("container %s: %s: path %q: want %v", c.Name, p.name, g.Path, p.paths))
		}
		cp, err := n.containerPort(g.Port.String())
		if err != nil {
			errs = append(errs, fmt.Errorf("container %s: %s: %w", c.Name, p.name, err))
		} else if int(cp.ContainerPort) != monitor {
			errs = append(errs, fmt.Errorf("container %s: %s: port %d: want the monitoring port nats-server serves /healthz on (http_port %d)", c.Name, p.name, cp.ContainerPort, monitor))
		}
	}
	return errors.Join(errs...)
}

// natsDigest is an image digest.
var natsDigest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// natsImage checks that an image is pinned to the nats-server release the
// tests run embedded (github.com/nats-io/nats-server/v2 in go.mod), by a
// tag of that release (2.15.2, or a variant: 2.15.2-alpine), and, when a
// digest is given too, that it is one.
func natsImage(image string) error {
	ref, digest, hasDigest := strings.Cut(image, "@")
	if hasDigest && !natsDigest.MatchString(digest) {
		return fmt.Errorf("image %s: digest %q: want sha256: and 64 hex digits", image, digest)
	}
	_, tag, ok := strings.Cut(ref[strings.LastIndex(ref, "/")+1:], ":")
	tag = strings.TrimPrefix(tag, "v")
	if want := natsserver.VERSION; !ok || (tag != want && !strings.HasPrefix(tag, want+"-")) {
		return fmt.Errorf("image %s: got tag %q, want %s, the nats-server release the tests run (github.com/nats-io/nats-server/v2 in deploy/go.mod): pin the two together", image, tag, want)
	}
	return nil
}

// turnStore is exprd's --turn-store nats and --nats-url as
// cmd/exprd/turns.go reads them: nil urls for memory.
type turnStore struct {
	urls     []*url.URL
	replicas int
	from     string
}

func (m *manifest) turnStore() (turnStore, error) {
	s, err := m.settings()
	if err != nil {
		return turnStore{}, err
	}
	st, ok := s["turn-store"]
	if !ok || st.value == "memory" {
		return turnStore{from: st.from}, nil
	}
	if st.value != "nats" {
		return turnStore{}, fmt.Errorf("--turn-store=%s (%s): want memory or nats", st.value, st.from)
	}
	out := turnStore{from: st.from, replicas: 1}
	u, err := m.explicit("nats-url")
	if err != nil {
		return turnStore{}, err
	}
	for _, raw := range strings.Split(u.value, ",") {
		p, err := url.Parse(strings.TrimSpace(raw))
		if err != nil || (p.Scheme != "nats" && p.Scheme != "tls") || p.Hostname() == "" || p.Port() == "" {
			return turnStore{}, fmt.Errorf("--nats-url=%s (%s): %q: want nats://host:port or tls://host:port", u.value, u.from, raw)
		}
		out.urls = append(out.urls, p)
	}
	if r, ok := s["nats-replicas"]; ok {
		if out.replicas, err = strconv.Atoi(r.value); err != nil {
			return turnStore{}, fmt.Errorf("--nats-replicas (%s): %w", r.from, err)
		}
	}
	return out, nil
}

func checkTurnStore(m *manifest) error {
	ts, err := m.turnStore()
	if err != nil {
		return err
	}
	switch {
	case m.nats == nil && ts.urls == nil:
		return nil
	case m.nats == nil:
		return fmt.Errorf("--turn-store nats (%s) at %v, but the build runs no NATS: the checks can tell neither that it is reachable nor that only exprd reaches it", ts.from, ts.urls)
	case ts.urls == nil:
		return fmt.Errorf("--turn-store: got memory, but the build runs NATS %s: want --turn-store=nats and --nats-url=nats://<its Service>:<client port>, or a turn lives and dies with its replica", m.nats.sts.Name)
	}
	n := m.nats
	members, err := m.natsMembers()
	if err != nil {
		return err
	}
	o := members[0].opts
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	ns := m.deployment.Namespace
	if ns == "" {
		ns = "default"
	}
	for _, u := range ts.urls {
		if tls := u.Scheme == "tls"; tls != (o.TLSConfig != nil) {
			fail("--nats-url %s: TLS %v, but nats-server's client port has TLS %v", u, tls, o.TLSConfig != nil)
		}
		host, port := u.Hostname(), u.Port()
		i := slices.IndexFunc(n.services, func(s *corev1.Service) bool { return slices.Contains(serviceHosts(s, ns), host) })
		if i < 0 {
			var names []string
			for _, s := range n.services {
				names = append(names, serviceHosts(s, ns)...)
			}
			fail("--nats-url %s: got a host that is no Service of NATS's, want one of %v", u, names)
			continue
		}
		svc := n.services[i]
		if svc.Spec.PublishNotReadyAddresses {
			fail("--nats-url %s: Service %s publishes members that are not ready: want the Service of ready members only", u, svc.Name)
		}
		j := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return strconv.Itoa(int(p.Port)) == port })
		if j < 0 {
			fail("--nats-url %s: Service %s has no port %s", u, svc.Name, port)
			continue
		}
		target := svc.Spec.Ports[j].TargetPort.String()
		if svc.Spec.Ports[j].TargetPort == (intstr.IntOrString{}) {
			target = port
		}
		cp, err := n.containerPort(target)
		if err != nil {
			fail("--nats-url %s: Service %s port %s: %v", u, svc.Name, port, err)
		} else if int(cp.ContainerPort) != o.Port {
			fail("--nats-url %s: Service %s port %s reaches nats-server's port %d: want its client port %d", u, svc.Name, port, cp.ContainerPort, o.Port)
		}
	}
	switch members := n.replicas(); {
	case ts.replicas > members:
		fail("--nats-replicas %d: over the %d members: JetStream cannot place the turns' stream and bucket, and exprd does not start", ts.replicas, members)
	case members > 1 && ts.replicas < 3:
		fail("--nats-replicas %d with %d members: want 3 (or 5): a turn whose only copies are on a member being drained or lost can be neither resumed nor taken over", ts.replicas, members)
	}
	// exprd opens the turn store at start, after the registry's store:
	// the startup probe must let it wait for both, so that exprd, not the
	// kubelet, ends a start that cannot reach them and says why.
	wait := natsOpenTimeout
	if rs, err := m.registryStore(); err == nil && rs.endpoints != nil {
		rw := registryStoreStartTimeout
		if s, err := m.settings(); err == nil {
			if v, ok := s["registry-store-start-timeout"]; ok {
				rw, _ = time.ParseDuration(v.value)
			}
		}
		wait += rw
	}
	c, err := m.container()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	probe, which := c.StartupProbe, "startupProbe"
	if probe == nil {
		probe, which = c.LivenessProbe, "livenessProbe"
	}
	if window := probeWindow(probe); probe != nil && window <= wait {
		fail("the %s's window %v: want more than exprd's wait at start for its stores, %v (the registry's --registry-store-start-timeout and NATS's %v), or the kubelet kills a start that exprd would end with the reason in its log", which, window, wait, natsOpenTimeout)
	}
	return errors.Join(errs...)
}

func checkNATSNetworkPolicy(m *manifest) error {
	if m.nats == nil {
		return nil
	}
	n := m.nats
	members, err := m.natsMembers()
	if err != nil {
		return err
	}
	o := members[0].opts
	return checkStoreNetworkPolicy(m, store{
		kind: "nats", name: n.sts.Name, flag: "--nats-url", pod: n.sts.Spec.Template.Labels, netpol: n.netpol, members: n.replicas(),
		client: map[int32]bool{int32(o.Port): true}, peer: map[int32]bool{int32(o.Cluster.Port): true}, clientName: "client", peerName: "cluster",
		containerPort: n.containerPort,
	})
}

// TestNATSOpenTimeout holds natsOpenTimeout to exprd's source.
func TestNATSOpenTimeout(t *testing.T) {
	t.Parallel()
	const file, want = "cmd/exprd/turns.go", "context.WithTimeout(ctx, 30*time.Second)"
	src, err := os.ReadFile(path.Join(repoRoot, file))
	if err != nil || !strings.Contains(string(src), want) || natsOpenTimeout != 30*time.Second {
		t.Errorf("%s: got no %s (%v): exprd's wait for NATS at start changed; change natsOpenTimeout with it", file, want, err)
	}
}

// startNATS runs a nats-server with JetStream on loopback for a test,
// standing in for the manifests' NATS as the embedded etcd does for
// theirs, and returns its client URL.
func startNATS(t *testing.T) string {
	t.Helper()
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	return ns.ClientURL()
}

// startNATSCluster stands in for the manifests' NATS with its own members:
// each member's settings as the checks read them (natsMembers: nats.conf,
// its server_name, cluster name and JetStream limits), moved to loopback
// as exprd's listen addresses are (client and cluster ports free ones, the
// routes to them, the store a scratch directory, no monitoring port or pid
// file), every member in this process. It returns the members' client
// URLs once JetStream has a meta leader, so that exprd can place its
// stream and bucket with the manifest's --nats-replicas.
//
// The free ports are found by listening and closing, and a member binds
// them later: another process of the machine may take one meanwhile (in
// CI a member once never became ready), so a stand-in whose members do not
// become ready is shut down and started again on new ports, three times
// at most.
func startNATSCluster(t *testing.T, m *manifest) (string, error) {
	t.Helper()
	var err error
	for range 3 {
		var urls string
		if urls, err = startNATSClusterOnce(t, m); !errors.Is(err, errNotReady) {
			return urls, err
		}
		t.Logf("NATS's stand-in, again on new ports: %v", err)
	}
	return "", err
}

// errNotReady is a stand-in member that did not become ready.
var errNotReady = errors.New("not ready for connections")

// startNATSClusterOnce is one try of startNATSCluster.
func startNATSClusterOnce(t *testing.T, m *manifest) (string, error) {
	t.Helper()
	members, err := m.natsMembers()
	if err != nil {
		return "", err
	}
	freePort := func() (int, error) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port, nil
	}
	clusterPorts := make([]int, len(members))
	var routes []*url.URL
	for i := range members {
		if clusterPorts[i], err = freePort(); err != nil {
			return "", err
		}
		routes = append(routes, &url.URL{Scheme: "nats", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(clusterPorts[i]))})
	}
	var servers []*natsserver.Server
	var urls []string
	for i, mb := range members {
		o := mb.opts.Clone()
		o.ConfigFile, o.PidFile, o.PortsFileDir = "", "", ""
		o.Host, o.Port, o.HTTPPort, o.HTTPHost = "127.0.0.1", -1, 0, ""
		o.StoreDir = t.TempDir()
		o.NoLog, o.NoSigs = true, true
		if len(members) > 1 {
			o.Cluster.Host, o.Cluster.Port = "127.0.0.1", clusterPorts[i]
			o.Routes = routes
		}
		ns, err := natsserver.NewServer(o)
		if err != nil {
			return "", fmt.Errorf("member %s on loopback: %w", mb.pod, err)
		}
		ns.Start()
		t.Cleanup(ns.Shutdown)
		servers = append(servers, ns)
	}
	m.natsStandIn = servers
	for i, ns := range servers {
		if !ns.ReadyForConnections(20 * time.Second) {
			for _, s := range servers {
				s.Shutdown()
			}
			return "", fmt.Errorf("member %s on loopback: %w", members[i].pod, errNotReady)
		}
		urls = append(urls, ns.ClientURL())
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		leader, current := false, true
		for _, ns := range servers {
			leader = leader || ns.JetStreamIsLeader()
			current = current && ns.JetStreamIsCurrent()
		}
		if leader && current {
			return strings.Join(urls, ","), nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the %d members on loopback: JetStream has no meta leader after 30 s", len(servers))
		}
	}
}

// natsStreamCopies is, for each JetStream stream on the members, the
// replicas its config asks for and the members that hold a copy.
func natsStreamCopies(servers []*natsserver.Server) (map[string]int, map[string]int, error) {
	want, held := map[string]int{}, map[string]int{}
	for _, ns := range servers {
		jsz, err := ns.Jsz(&natsserver.JSzOptions{Accounts: true, Streams: true, Config: true})
		if err != nil {
			return nil, nil, err
		}
		for _, a := range jsz.AccountDetails {
			for _, st := range a.Streams {
				held[st.Name]++
				if st.Config != nil {
					want[st.Name] = st.Config.Replicas
				}
			}
		}
	}
	return want, held, nil
}
