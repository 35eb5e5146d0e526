package deploy_test

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The checks between exprd and the shared tool registry's etcd: exprd's
// --registry-store names etcd's Service, and the NetworkPolicies let
// exprd, and only exprd, reach etcd's client port.

// registryStoreStartTimeout is --registry-store-start-timeout's default.
const registryStoreStartTimeout = 60 * time.Second

// registryStore is exprd's --registry-store as cmd/exprd/store.go reads
// it: nil endpoints for memory.
type registryStore struct {
	endpoints []string // host:port
	tls       bool     // etcds://
	from      string
}

func (m *manifest) registryStore() (registryStore, error) {
	s, err := m.settings()
	if err != nil {
		return registryStore{}, err
	}
	st, ok := s["registry-store"]
	if !ok || st.value == "memory" || st.value == "" {
		return registryStore{from: st.from}, nil
	}
	scheme, list, ok := strings.Cut(st.value, "://")
	if !ok || (scheme != "etcd" && scheme != "etcds") {
		return registryStore{}, fmt.Errorf("--registry-store=%s (%s): want memory, etcd://host:port[,host:port...] or etcds://...", st.value, st.from)
	}
	out := registryStore{tls: scheme == "etcds", from: st.from}
	for _, hp := range strings.Split(list, ",") {
		host, port, err := net.SplitHostPort(strings.TrimSpace(hp))
		if err != nil || host == "" || port == "" {
			return registryStore{}, fmt.Errorf("--registry-store=%s (%s): %q is not host:port", st.value, st.from, hp)
		}
		out.endpoints = append(out.endpoints, net.JoinHostPort(host, port))
	}
	return out, nil
}

// serviceHosts are the DNS names of a Service a pod in namespace from
// resolves: the short name only in the Service's own namespace.
func serviceHosts(s *corev1.Service, from string) []string {
	ns := s.Namespace
	if ns == "" {
		ns = "default"
	}
	hosts := []string{s.Name + "." + ns, s.Name + "." + ns + ".svc", s.Name + "." + ns + ".svc.cluster.local"}
	if from == ns {
		hosts = append(hosts, s.Name)
	}
	return hosts
}

func checkRegistryStore(m *manifest) error {
	store, err := m.registryStore()
	if err != nil {
		return err
	}
	switch {
	case m.etcd == nil && store.endpoints == nil:
		return nil
	case m.etcd == nil:
		return fmt.Errorf("--registry-store (%s) names etcd at %v, but the build runs none: the checks can tell neither that it is reachable nor that only exprd reaches it", store.from, store.endpoints)
	case store.endpoints == nil:
		return fmt.Errorf("--registry-store: got memory, but the build runs etcd %s: want etcd://<its Service>:<client port>, or manuals registered over the API stay on the replica that took them", m.etcd.sts.Name)
	}
	e := m.etcd
	members, err := e.members()
	if err != nil {
		return err
	}
	clientURLs := members[0].cfg.ListenClientUrls
	clientPorts := ports(clientURLs)
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if plain := clientURLs[0].Scheme == "http"; plain == store.tls {
		fail("--registry-store (%s): TLS %v, but etcd's --listen-client-urls are %s", store.from, store.tls, clientURLs[0].Scheme)
	}
	ns := m.deployment.Namespace
	if ns == "" {
		ns = "default"
	}
	for _, ep := range store.endpoints {
		host, port, _ := net.SplitHostPort(ep)
		i := slices.IndexFunc(e.services, func(s *corev1.Service) bool { return slices.Contains(serviceHosts(s, ns), host) })
		if i < 0 {
			var names []string
			for _, s := range e.services {
				names = append(names, serviceHosts(s, ns)...)
			}
			fail("--registry-store (%s) endpoint %s: got a host that is no Service of etcd's, want one of %v", store.from, ep, names)
			continue
		}
		svc := e.services[i]
		if svc.Spec.PublishNotReadyAddresses {
			fail("--registry-store (%s) endpoint %s: Service %s publishes members that are not ready: want the Service of ready members only", store.from, ep, svc.Name)
		}
		j := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return strconv.Itoa(int(p.Port)) == port })
		if j < 0 {
			fail("--registry-store (%s) endpoint %s: Service %s has no port %s", store.from, ep, svc.Name, port)
			continue
		}
		target := svc.Spec.Ports[j].TargetPort.String()
		if svc.Spec.Ports[j].TargetPort == (intstr.IntOrString{}) {
			target = port
		}
		cp, err := e.containerPort(target)
		if err != nil {
			fail("--registry-store (%s) endpoint %s: Service %s port %s: %v", store.from, ep, svc.Name, port, err)
		} else if !clientPorts[cp.ContainerPort] {
			fail("--registry-store (%s) endpoint %s: Service %s port %s reaches etcd's port %d: want its client port %v", store.from, ep, svc.Name, port, cp.ContainerPort, slices.Sorted(maps.Keys(clientPorts)))
		}
	}
	// exprd waits for etcd's snapshot before it serves: the kubelet must
	// let it wait that long, so that exprd, not a probe, ends the start
	// and says why.
	wait := registryStoreStartTimeout
	if s, err := m.settings(); err == nil {
		if v, ok := s["registry-store-start-timeout"]; ok {
			if wait, err = time.ParseDuration(v.value); err != nil {
				fail("--registry-store-start-timeout (%s): %v", v.from, err)
			}
		}
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
		fail("--registry-store-start-timeout %v: got at least the %s's %v, want less, so that exprd ends a start that cannot read etcd and logs why, before the kubelet kills it", wait, which, window)
	}
	return errors.Join(errs...)
}

// probeWindow is how long a failing probe takes to fail the container:
// its initial delay and failureThreshold periods, Kubernetes' defaults
// for the fields left out.
func probeWindow(p *corev1.Probe) time.Duration {
	if p == nil {
		return 0
	}
	period, threshold := p.PeriodSeconds, p.FailureThreshold
	if period == 0 {
		period = 10
	}
	if threshold == 0 {
		threshold = 3
	}
	return time.Duration(p.InitialDelaySeconds+period*threshold) * time.Second
}

// peerKind says whose pods a NetworkPolicy peer is: exprd's, etcd's or
// NATS's, in the policy's own namespace; anything else is an error.
func (m *manifest) peerKind(p networkingv1.NetworkPolicyPeer) (string, error) {
	pods := map[string]labels.Set{"exprd": m.deployment.Spec.Template.Labels}
	if m.etcd != nil {
		pods["etcd"] = m.etcd.sts.Spec.Template.Labels
	}
	if m.nats != nil {
		pods["nats"] = m.nats.sts.Spec.Template.Labels
	}
	switch {
	case p.IPBlock != nil:
		return "", fmt.Errorf("ipBlock %s: addresses, not pods of exprd's, etcd's or NATS's", p.IPBlock.CIDR)
	case p.NamespaceSelector != nil:
		return "", fmt.Errorf("namespaceSelector %v: pods of other namespaces; want the policy's own (no namespaceSelector)", p.NamespaceSelector.MatchLabels)
	case p.PodSelector == nil || len(p.PodSelector.MatchLabels) == 0 && len(p.PodSelector.MatchExpressions) == 0:
		return "", errors.New("an empty podSelector: every pod of the namespace")
	}
	var who []string
	for _, kind := range slices.Sorted(maps.Keys(pods)) {
		if selects(p.PodSelector, pods[kind]) {
			who = append(who, kind)
		}
	}
	switch len(who) {
	case 0:
		return "", fmt.Errorf("podSelector %v: none of %v's pods", p.PodSelector.MatchLabels, slices.Sorted(maps.Keys(pods)))
	case 1:
		return who[0], nil
	}
	return "", fmt.Errorf("podSelector %v: the pods of %v at once", p.PodSelector.MatchLabels, who)
}

// store is a StatefulSet that only exprd may reach (etcd, NATS), as the
// NetworkPolicy checks see it.
type store struct {
	kind    string // "etcd", "nats": its peerKind
	name    string // the StatefulSet's
	flag    string // exprd's flag that names it
	pod     labels.Set
	netpol  *networkingv1.NetworkPolicy
	members int
	// client is the port exprd connects to; peer the one the members
	// connect to each other on.
	client, peer         map[int32]bool
	clientName, peerName string
	containerPort        func(string) (*corev1.ContainerPort, error)
}

// storePorts resolves a rule's ports against the store's container ports
// (a named port names the destination pod's port). A rule with no ports,
// a port rule with no port or a range is an error: it opens more.
func storePorts(st store, ps []networkingv1.NetworkPolicyPort) ([]int32, error) {
	if len(ps) == 0 {
		return nil, errors.New("no ports: every port")
	}
	var out []int32
	for _, p := range ps {
		switch {
		case p.Port == nil:
			return nil, errors.New("a port rule with no port: every port")
		case p.EndPort != nil:
			return nil, fmt.Errorf("ports %s to %d: a range", p.Port.String(), *p.EndPort)
		case p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP:
			return nil, fmt.Errorf("port %s: protocol %s, want TCP", p.Port.String(), *p.Protocol)
		}
		cp, err := st.containerPort(p.Port.String())
		if err != nil {
			return nil, err
		}
		out = append(out, cp.ContainerPort)
	}
	return out, nil
}

func checkEtcdNetworkPolicy(m *manifest) error {
	if m.etcd == nil {
		return nil
	}
	e := m.etcd
	members, err := e.members()
	if err != nil {
		return err
	}
	return checkStoreNetworkPolicy(m, store{
		kind: "etcd", name: e.sts.Name, flag: "--registry-store", pod: e.sts.Spec.Template.Labels, netpol: e.netpol, members: e.replicas(),
		client: ports(members[0].cfg.ListenClientUrls), peer: ports(members[0].cfg.ListenPeerUrls), clientName: "client", peerName: "peer",
		containerPort: e.containerPort,
	})
}

// checkStoreNetworkPolicy checks that the store's NetworkPolicy lets in
// exprd's pods on the client port and the members on the peer port, and
// nothing else; lets the members out to DNS and each other's peer port
// only; and that exprd's lets it out to the store's client port.
func checkStoreNetworkPolicy(m *manifest, st store) error {
	clientPorts, peerPorts := st.client, st.peer
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	np := st.netpol
	if np == nil {
		fail("no NetworkPolicy selects %s's pods: any pod of the cluster may connect to it, past exprd's auth", st.name)
	} else {
		if selects(&np.Spec.PodSelector, labels.Set(m.deployment.Spec.Template.Labels)) {
			fail("NetworkPolicy %s: podSelector selects exprd's pods too: want %s's only", np.Name, st.name)
		}
		for _, want := range []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress} {
			if !slices.Contains(np.Spec.PolicyTypes, want) {
				fail("NetworkPolicy %s: policyTypes %v: want %s among them", np.Name, np.Spec.PolicyTypes, want)
			}
		}
		exprdIn, peersIn := false, false
		for i, r := range np.Spec.Ingress {
			if len(r.From) == 0 {
				fail("NetworkPolicy %s ingress[%d]: no `from`: every pod and address", np.Name, i)
			}
			ps, err := storePorts(st, r.Ports)
			if err != nil {
				fail("NetworkPolicy %s ingress[%d]: %v", np.Name, i, err)
				continue
			}
			for j, peer := range r.From {
				who, err := m.peerKind(peer)
				if err != nil {
					fail("NetworkPolicy %s ingress[%d].from[%d]: %v", np.Name, i, j, err)
					continue
				}
				for _, p := range ps {
					switch {
					case who == "exprd" && clientPorts[p]:
						exprdIn = true
					case who == st.kind && peerPorts[p]:
						peersIn = true
					default:
						fail("NetworkPolicy %s ingress[%d]: lets %s's pods in to port %d: want exprd's to the %s port %v and %s's to the %s port %v, nothing else", np.Name, i, who, p, st.clientName, slices.Sorted(maps.Keys(clientPorts)), st.kind, st.peerName, slices.Sorted(maps.Keys(peerPorts)))
					}
				}
			}
		}
		if !exprdIn {
			fail("NetworkPolicy %s: no ingress rule lets exprd's pods in to the %s port %v: %s cannot connect", np.Name, st.clientName, slices.Sorted(maps.Keys(clientPorts)), st.flag)
		}
		if !peersIn && st.members > 1 {
			fail("NetworkPolicy %s: no ingress rule lets the members in to each other's %s port %v: they form no quorum", np.Name, st.peerName, slices.Sorted(maps.Keys(peerPorts)))
		}
		for i, r := range np.Spec.Egress {
			if len(r.To) == 0 || len(r.Ports) == 0 {
				fail("NetworkPolicy %s egress[%d]: got to %v, ports %v: want both named (kube-dns on 53, the members on the %s port)", np.Name, i, r.To, r.Ports, st.peerName)
				continue
			}
			for j, peer := range r.To {
				if selects(peer.NamespaceSelector, kubeDNS.namespace) && selects(peer.PodSelector, kubeDNS.pod) && peer.IPBlock == nil {
					for _, p := range r.Ports {
						if p.Port == nil || p.Port.IntValue() != 53 || p.EndPort != nil {
							fail("NetworkPolicy %s egress[%d]: to kube-dns on port %v: want 53 only", np.Name, i, deref(p.Port))
						}
					}
					continue
				}
				who, err := m.peerKind(peer)
				if err == nil && who != st.kind {
					err = fmt.Errorf("%s's pods: %s connects to its peers and DNS only", who, st.kind)
				}
				if err != nil {
					fail("NetworkPolicy %s egress[%d].to[%d]: %v", np.Name, i, j, err)
					continue
				}
				ps, err := storePorts(st, r.Ports)
				if err != nil {
					fail("NetworkPolicy %s egress[%d]: %v", np.Name, i, err)
					continue
				}
				for _, p := range ps {
					if !peerPorts[p] {
						fail("NetworkPolicy %s egress[%d]: lets the members out to each other's port %d: want the %s port %v only", np.Name, i, p, st.peerName, slices.Sorted(maps.Keys(peerPorts)))
					}
				}
			}
		}
	}

	// exprd's side: out to the members' client port, and no other of theirs.
	toStore := false
	for i, r := range m.netpol.Spec.Egress {
		for j, peer := range r.To {
			if peer.PodSelector == nil || !selects(peer.PodSelector, st.pod) {
				continue
			}
			if peer.NamespaceSelector != nil {
				fail("NetworkPolicy %s egress[%d].to[%d]: %s's pods by a namespaceSelector: want the policy's own namespace (none)", m.netpol.Name, i, j, st.kind)
			}
			ps, err := storePorts(st, r.Ports)
			if err != nil {
				fail("NetworkPolicy %s egress[%d] (to %s): %v", m.netpol.Name, i, st.kind, err)
				continue
			}
			for _, p := range ps {
				if clientPorts[p] {
					toStore = true
				} else {
					fail("NetworkPolicy %s egress[%d]: lets exprd out to %s's port %d: want the %s port %v only", m.netpol.Name, i, st.kind, p, st.clientName, slices.Sorted(maps.Keys(clientPorts)))
				}
			}
		}
	}
	if !toStore {
		fail("NetworkPolicy %s: no egress rule lets exprd out to %s's pods on the %s port %v: %s cannot connect", m.netpol.Name, st.kind, st.clientName, slices.Sorted(maps.Keys(clientPorts)), st.flag)
	}
	return errors.Join(errs...)
}
