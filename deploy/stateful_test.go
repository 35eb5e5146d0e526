package deploy_test

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
)

// stateful is a build's StatefulSet of a store (etcd, NATS), and the
// Services, the disruption budget and the NetworkPolicy that select its
// pods; containerName is the container that runs the store.
type stateful struct {
	sts           *appsv1.StatefulSet
	services      []*corev1.Service
	pdb           *policyv1.PodDisruptionBudget
	netpol        *networkingv1.NetworkPolicy
	containerName string
}

// container is the store's container in the pod template.
func (s *stateful) container() (*corev1.Container, error) {
	cs := s.sts.Spec.Template.Spec.Containers
	for i := range cs {
		if cs[i].Name == s.containerName {
			return &cs[i], nil
		}
	}
	return nil, fmt.Errorf("StatefulSet %s: no container named %s", s.sts.Name, s.containerName)
}

// containerPort resolves a port given by name or number to the store's
// container port.
func (s *stateful) containerPort(nameOrNumber string) (*corev1.ContainerPort, error) {
	c, err := s.container()
	if err != nil {
		return nil, err
	}
	for i, p := range c.Ports {
		if p.Name == nameOrNumber || fmt.Sprint(p.ContainerPort) == nameOrNumber {
			return &c.Ports[i], nil
		}
	}
	return nil, fmt.Errorf("container %s has no port %q (it has %v)", s.containerName, nameOrNumber, c.Ports)
}

// replicas is the member count, Kubernetes' default 1 when unset.
func (s *stateful) replicas() int {
	if r := s.sts.Spec.Replicas; r != nil {
		return int(*r)
	}
	return 1
}

// namespace is the StatefulSet's, "default" when the build sets none.
func (s *stateful) namespace() string {
	if s.sts.Namespace == "" {
		return "default"
	}
	return s.sts.Namespace
}

// memberHosts are the DNS names of a member's pod through the governing
// Service, from the short one that resolves only in its namespace to the
// cluster's full one.
func (s *stateful) memberHosts(pod string) []string {
	base := pod + "." + s.sts.Spec.ServiceName
	return []string{base, base + "." + s.namespace(), base + "." + s.namespace() + ".svc", base + "." + s.namespace() + ".svc.cluster.local"}
}
