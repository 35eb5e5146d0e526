// Package cluster tests exprd as the manifests run it: several replicas
// sharing one tool registry through a real etcd, started in the test by
// etcd's embed package. It is a module of its own so that etcd's server
// and its dependencies never become exprd's.
package cluster
