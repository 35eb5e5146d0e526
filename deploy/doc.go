// Package deploy checks exprd's deployment offline: the image's Dockerfile
// and the Kubernetes manifests under k8s/. It is a module of its own so that
// kustomize and the Kubernetes API types never enter exprd's module.
//
// The tests build every kustomization under k8s/ with kustomize's krusty,
// decode each object strictly into its typed Kubernetes struct, check that
// the objects agree with each other and with exprd's flags, start the exprd
// the Dockerfile builds with the Deployment's args and ConfigMaps (and, for
// the example overlay, an embedded etcd standing in for its StatefulSet),
// check the Dockerfile itself, and check the Grafana dashboard and the
// Prometheus alert rules against the metrics a running exprd exports. Run
// them with `go test ./...` in this directory.
package deploy
