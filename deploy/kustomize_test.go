package deploy_test

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// k8sDir holds the kustomize base and its overlays.
const k8sDir = "k8s"

// kustomizations lists every directory under k8s/ with a kustomization.yaml,
// so that a new overlay is checked without being named here.
func kustomizations(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(k8sDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "kustomization.yaml" {
			dirs = append(dirs, filepath.ToSlash(filepath.Dir(p)))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(dirs, "k8s/base") {
		t.Fatalf("kustomizations: got %v, want k8s/base among them", dirs)
	}
	return dirs
}

// manifest is one kustomization's output, every object decoded into its
// Kubernetes type.
type manifest struct {
	dir        string
	deployment *appsv1.Deployment
	services   []*corev1.Service
	configMaps map[string]*corev1.ConfigMap
	hpa        *autoscalingv2.HorizontalPodAutoscaler
	pdb        *policyv1.PodDisruptionBudget
	netpol     *networkingv1.NetworkPolicy
	namespaces []*corev1.Namespace
	accounts   []*corev1.ServiceAccount
}

// build runs kustomize on dir as `kubectl apply -k` would, and decodes
// every object strictly: an unknown or misspelt field, a duplicate field
// or a kind the table below does not know is an error.
func build(fSys filesys.FileSystem, dir string) (*manifest, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(fSys, dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	m := &manifest{dir: dir, configMaps: map[string]*corev1.ConfigMap{}}
	var errs []error
	for _, r := range res.Resources() {
		gvk := r.GetApiVersion() + " " + r.GetKind()
		id := fmt.Sprintf("%s %s/%s", gvk, r.GetNamespace(), r.GetName())
		data, err := r.MarshalJSON()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
			continue
		}
		var obj any
		switch gvk {
		case "apps/v1 Deployment":
			if m.deployment != nil {
				errs = append(errs, fmt.Errorf("%s: a second Deployment; the checks expect one", id))
			}
			m.deployment = &appsv1.Deployment{}
			obj = m.deployment
		case "v1 Service":
			s := &corev1.Service{}
			m.services, obj = append(m.services, s), s
		case "v1 ConfigMap":
			c := &corev1.ConfigMap{}
			m.configMaps[r.GetName()], obj = c, c
		case "autoscaling/v2 HorizontalPodAutoscaler":
			m.hpa = &autoscalingv2.HorizontalPodAutoscaler{}
			obj = m.hpa
		case "policy/v1 PodDisruptionBudget":
			m.pdb = &policyv1.PodDisruptionBudget{}
			obj = m.pdb
		case "networking.k8s.io/v1 NetworkPolicy":
			m.netpol = &networkingv1.NetworkPolicy{}
			obj = m.netpol
		case "v1 Namespace":
			n := &corev1.Namespace{}
			m.namespaces, obj = append(m.namespaces, n), n
		case "v1 ServiceAccount":
			a := &corev1.ServiceAccount{}
			m.accounts, obj = append(m.accounts, a), a
		default:
			errs = append(errs, fmt.Errorf("%s: no typed decoder for this kind: add one to build", id))
			continue
		}
		strict, err := sigsjson.UnmarshalStrict(data, obj, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
		}
		for _, e := range strict {
			errs = append(errs, fmt.Errorf("%s: %w", id, e))
		}
	}
	for what, missing := range map[string]bool{
		"Deployment": m.deployment == nil, "HorizontalPodAutoscaler": m.hpa == nil,
		"PodDisruptionBudget": m.pdb == nil, "NetworkPolicy": m.netpol == nil, "Service": len(m.services) == 0,
	} {
		if missing {
			errs = append(errs, fmt.Errorf("%s: no %s", dir, what))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// mustBuild is build for a test.
func mustBuild(t *testing.T, dir string) *manifest {
	t.Helper()
	m, err := build(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// container is exprd's container in the pod template.
func (m *manifest) container() (*corev1.Container, error) {
	cs := m.deployment.Spec.Template.Spec.Containers
	for i := range cs {
		if cs[i].Name == "exprd" {
			return &cs[i], nil
		}
	}
	return nil, fmt.Errorf("Deployment %s: no container named exprd", m.deployment.Name)
}

// containerPort resolves a port given by name or number to exprd's
// container port.
func (m *manifest) containerPort(nameOrNumber string) (*corev1.ContainerPort, error) {
	c, err := m.container()
	if err != nil {
		return nil, err
	}
	for i, p := range c.Ports {
		if p.Name == nameOrNumber || fmt.Sprint(p.ContainerPort) == nameOrNumber {
			return &c.Ports[i], nil
		}
	}
	return nil, fmt.Errorf("container exprd has no port %q (it has %v)", nameOrNumber, c.Ports)
}

// mountedFile finds the ConfigMap key behind an absolute path in exprd's
// container: the volume mounted at the path's directory, the ConfigMap of
// that volume, and the key (or item) that becomes the file.
func (m *manifest) mountedFile(p string) (string, error) {
	vm, rel, err := m.mountOf(p)
	if err != nil {
		return "", err
	}
	files, err := m.volumeFiles(vm.Name)
	if err != nil {
		return "", err
	}
	content, ok := files[rel]
	if !ok {
		return "", fmt.Errorf("%s: volume %s holds %v, not %s", p, vm.Name, slices.Sorted(maps.Keys(files)), rel)
	}
	return content, nil
}

// mountOf finds the volume mount a container path lies in and the path
// relative to it.
func (m *manifest) mountOf(p string) (corev1.VolumeMount, string, error) {
	c, err := m.container()
	if err != nil {
		return corev1.VolumeMount{}, "", err
	}
	for _, vm := range c.VolumeMounts {
		if rel, ok := strings.CutPrefix(p, strings.TrimSuffix(vm.MountPath, "/")+"/"); ok {
			if vm.SubPath != "" || vm.SubPathExpr != "" {
				return vm, "", fmt.Errorf("%s: mount %s uses subPath, which the checks do not follow", p, vm.MountPath)
			}
			return vm, path.Clean(rel), nil
		}
	}
	return corev1.VolumeMount{}, "", fmt.Errorf("%s is on no volume mount of container exprd", p)
}

// volumeFiles is the files a ConfigMap volume shows, by path in the mount.
func (m *manifest) volumeFiles(volume string) (map[string]string, error) {
	for _, v := range m.deployment.Spec.Template.Spec.Volumes {
		if v.Name != volume {
			continue
		}
		if v.ConfigMap == nil {
			return nil, fmt.Errorf("volume %s is not a ConfigMap", volume)
		}
		cm, ok := m.configMaps[v.ConfigMap.Name]
		if !ok {
			return nil, fmt.Errorf("volume %s: ConfigMap %s is not in the build (ConfigMaps: %v)", volume, v.ConfigMap.Name, slices.Sorted(maps.Keys(m.configMaps)))
		}
		files := map[string]string{}
		if len(v.ConfigMap.Items) == 0 {
			for k, d := range cm.Data {
				files[k] = d
			}
			return files, nil
		}
		for _, it := range v.ConfigMap.Items {
			d, ok := cm.Data[it.Key]
			if !ok {
				return nil, fmt.Errorf("volume %s: ConfigMap %s has no key %s", volume, cm.Name, it.Key)
			}
			files[it.Path] = d
		}
		return files, nil
	}
	return nil, fmt.Errorf("no volume %s in the pod", volume)
}

// TestBuildIsStrict feeds build objects the API server would refuse or
// silently change, and expects an error naming the problem.
func TestBuildIsStrict(t *testing.T) {
	t.Parallel()
	const deployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: exprd}
spec:
  selector: {matchLabels: {app: exprd}}
  template:
    metadata: {labels: {app: exprd}}
    spec:
      containers:
        - name: exprd
          image: exprd:1
`
	tests := []struct {
		name, object, want string
	}{
		{"a misspelt field", deployment + "          readinesProbe: {grpc: {port: 50051}}\n", `unknown field "spec.template.spec.containers[0].readinesProbe"`},
		{"a field in the wrong case", deployment + "          ImagePullPolicy: Always\n", `unknown field "spec.template.spec.containers[0].ImagePullPolicy"`},
		{"a value of the wrong type", deployment + "          ports: [{containerPort: grpc}]\n", "cannot unmarshal string"},
		{"a kind with no decoder", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", "no typed decoder"},
		{"a Deployment alone", deployment, "no HorizontalPodAutoscaler"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fSys := filesys.MakeFsInMemory()
			for name, data := range map[string]string{
				"/k/kustomization.yaml": "resources: [object.yaml]\n",
				"/k/object.yaml":        tt.object,
			} {
				if err := fSys.WriteFile(name, []byte(data)); err != nil {
					t.Fatal(err)
				}
			}
			_, err := build(fSys, "/k")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("build: got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
