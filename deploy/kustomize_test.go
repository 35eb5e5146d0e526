package deploy_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/server"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"
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
	// services, pdb and netpol are exprd's: those that select neither
	// etcd's pods nor NATS's.
	services   []*corev1.Service
	configMaps map[string]*corev1.ConfigMap
	hpa        *autoscalingv2.HorizontalPodAutoscaler
	pdb        *policyv1.PodDisruptionBudget
	netpol     *networkingv1.NetworkPolicy
	namespaces []*corev1.Namespace
	accounts   []*corev1.ServiceAccount
	// etcd is the shared tool registry's store; nil when the build runs
	// none (the base: --registry-store memory).
	etcd *etcdObjects
	// nats is the turn store's NATS JetStream; nil when the build runs
	// none (the base: --turn-store memory).
	nats *natsObjects
	// secrets are the Secrets the operator creates, as secretsExample
	// beside the kustomization lists them: not part of the build.
	secrets map[string]*corev1.Secret
	// asWritten makes the Secrets' stand-ins their example values as
	// written, placeholders and all, as if applied unedited.
	asWritten bool
	// natsStandIn is the embedded members startPod stood in for NATS with.
	natsStandIn []*natsserver.Server
}

// secretsExample, beside a kustomization, lists the Secrets its pod mounts
// or reads, each value a placeholder or an example: kustomize does not
// make them, since their values do not belong in git. The checks hold the
// pod's Secret references to it, and the tests stand in for the Secrets
// with it (standIn).
const secretsExample = "secrets.example.yaml"

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
	var (
		errs         []error
		services     []*corev1.Service
		pdbs         []*policyv1.PodDisruptionBudget
		netpols      []*networkingv1.NetworkPolicy
		statefulSets []*appsv1.StatefulSet
	)
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
		case "apps/v1 StatefulSet":
			s := &appsv1.StatefulSet{}
			statefulSets, obj = append(statefulSets, s), s
		case "v1 Service":
			s := &corev1.Service{}
			services, obj = append(services, s), s
		case "v1 ConfigMap":
			c := &corev1.ConfigMap{}
			m.configMaps[r.GetName()], obj = c, c
		case "autoscaling/v2 HorizontalPodAutoscaler":
			m.hpa = &autoscalingv2.HorizontalPodAutoscaler{}
			obj = m.hpa
		case "policy/v1 PodDisruptionBudget":
			p := &policyv1.PodDisruptionBudget{}
			pdbs, obj = append(pdbs, p), p
		case "networking.k8s.io/v1 NetworkPolicy":
			n := &networkingv1.NetworkPolicy{}
			netpols, obj = append(netpols, n), n
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
	errs = append(errs, m.assign(statefulSets, services, pdbs, netpols)...)
	if m.secrets, err = readSecrets(fSys, path.Join(dir, secretsExample)); err != nil {
		errs = append(errs, err)
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

// assign sorts the Services, disruption budgets and NetworkPolicies into
// exprd's, etcd's and NATS's by the pods they select: a StatefulSet is
// etcd's or NATS's by its container's name (etcd, nats), and theirs are
// those that select its pods; the rest are exprd's, whose checks then say
// what is wrong with them.
func (m *manifest) assign(statefulSets []*appsv1.StatefulSet, services []*corev1.Service, pdbs []*policyv1.PodDisruptionBudget, netpols []*networkingv1.NetworkPolicy) []error {
	var errs []error
	byKind := map[string][]*appsv1.StatefulSet{}
	for _, s := range statefulSets {
		kind := ""
		for _, c := range s.Spec.Template.Spec.Containers {
			if c.Name == etcdContainer || c.Name == natsContainer {
				kind = c.Name
			}
		}
		if kind == "" {
			errs = append(errs, fmt.Errorf("StatefulSet %s: no container named %s or %s; the checks know etcd's and NATS's StatefulSets only", s.Name, etcdContainer, natsContainer))
			continue
		}
		byKind[kind] = append(byKind[kind], s)
	}
	for kind, ss := range byKind {
		if len(ss) > 1 {
			errs = append(errs, fmt.Errorf("%d StatefulSets running %s; the checks expect one", len(ss), kind))
		}
	}
	var etcdPod, natsPod labels.Set
	if ss := byKind[etcdContainer]; len(ss) > 0 {
		m.etcd = &etcdObjects{stateful{sts: ss[0], containerName: etcdContainer}}
		etcdPod = ss[0].Spec.Template.Labels
	}
	if ss := byKind[natsContainer]; len(ss) > 0 {
		m.nats = &natsObjects{stateful{sts: ss[0], containerName: natsContainer}}
		natsPod = ss[0].Spec.Template.Labels
	}
	ofEtcd := func(sel *metav1.LabelSelector) bool { return m.etcd != nil && selects(sel, etcdPod) }
	ofNATS := func(sel *metav1.LabelSelector) bool { return m.nats != nil && selects(sel, natsPod) }
	for _, s := range services {
		sel := &metav1.LabelSelector{MatchLabels: s.Spec.Selector}
		switch {
		case ofEtcd(sel):
			m.etcd.services = append(m.etcd.services, s)
		case ofNATS(sel):
			m.nats.services = append(m.nats.services, s)
		default:
			m.services = append(m.services, s)
		}
	}
	for _, p := range pdbs {
		switch {
		case ofEtcd(p.Spec.Selector) && m.etcd.pdb == nil:
			m.etcd.pdb = p
		case ofNATS(p.Spec.Selector) && m.nats.pdb == nil:
			m.nats.pdb = p
		case !ofEtcd(p.Spec.Selector) && !ofNATS(p.Spec.Selector) && m.pdb == nil:
			m.pdb = p
		default:
			errs = append(errs, fmt.Errorf("PodDisruptionBudget %s: a second one for the same pods; the checks expect one each", p.Name))
		}
	}
	for _, n := range netpols {
		switch {
		case ofEtcd(&n.Spec.PodSelector) && m.etcd.netpol == nil:
			m.etcd.netpol = n
		case ofNATS(&n.Spec.PodSelector) && m.nats.netpol == nil:
			m.nats.netpol = n
		case !ofEtcd(&n.Spec.PodSelector) && !ofNATS(&n.Spec.PodSelector) && m.netpol == nil:
			m.netpol = n
		default:
			errs = append(errs, fmt.Errorf("NetworkPolicy %s: a second one for the same pods; the checks expect one each", n.Name))
		}
	}
	return errs
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

// volume is the pod's volume of that name.
func (m *manifest) volume(name string) (*corev1.Volume, error) {
	vs := m.deployment.Spec.Template.Spec.Volumes
	for i := range vs {
		if vs[i].Name == name {
			return &vs[i], nil
		}
	}
	return nil, fmt.Errorf("no volume %s in the pod", name)
}

// volumeFiles is the files a ConfigMap or Secret volume shows, by path in
// the mount. A Secret's files hold its stand-in values (standIn).
func (m *manifest) volumeFiles(volume string) (map[string]string, error) {
	for _, v := range m.deployment.Spec.Template.Spec.Volumes {
		if v.Name != volume {
			continue
		}
		if v.Secret != nil {
			return m.secretFiles(v.Secret)
		}
		if v.ConfigMap == nil {
			return nil, fmt.Errorf("volume %s is neither a ConfigMap nor a Secret", volume)
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

// secretFiles is the files a Secret volume shows, by path in the mount:
// its items, or every key when it lists none, each with its stand-in value.
func (m *manifest) secretFiles(v *corev1.SecretVolumeSource) (map[string]string, error) {
	sec, ok := m.secrets[v.SecretName]
	if !ok {
		return nil, fmt.Errorf("Secret %s: not in %s beside the kustomization (it has %v), so what the pod mounts is unknown", v.SecretName, secretsExample, slices.Sorted(maps.Keys(m.secrets)))
	}
	files := map[string]string{}
	if len(v.Items) == 0 {
		for k := range secretKeys(sec) {
			files[k], _ = m.secretValue(v.SecretName, k)
		}
		return files, nil
	}
	for _, it := range v.Items {
		d, ok := m.secretValue(v.SecretName, it.Key)
		if !ok {
			return nil, fmt.Errorf("Secret %s: no key %s in %s (it has %v)", v.SecretName, it.Key, secretsExample, slices.Sorted(maps.Keys(secretKeys(sec))))
		}
		files[it.Path] = d
	}
	return files, nil
}

// secretKeys is a Secret's keys, from data and stringData.
func secretKeys(s *corev1.Secret) map[string]bool {
	keys := map[string]bool{}
	for k := range s.Data {
		keys[k] = true
	}
	for k := range s.StringData {
		keys[k] = true
	}
	return keys
}

// secretValue is the stand-in for a key of an example Secret: its value
// with each <placeholder> replaced by a test value.
func (m *manifest) secretValue(name, key string) (string, bool) {
	sec, ok := m.secrets[name]
	if !ok {
		return "", false
	}
	v, ok := sec.StringData[key]
	if !ok {
		var b []byte
		if b, ok = sec.Data[key]; !ok {
			return "", false
		}
		v = string(b)
	}
	if m.asWritten {
		return v, true
	}
	return standIn(name, key, v), true
}

// placeholder is a value's part the operator fills in: <token>.
var placeholder = regexp.MustCompile(`<[^<>\s]+>`)

// standIn replaces each placeholder of a Secret's value with a test value:
// the same on every call, different for each placeholder, and as long as a
// real token (exprd refuses one under 16 characters).
func standIn(secret, key, value string) string {
	n := 0
	return placeholder.ReplaceAllStringFunc(value, func(p string) string {
		n++
		h := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%d/%s", secret, key, n, p))
		return "standin" + hex.EncodeToString(h[:12])
	})
}

// readSecrets decodes a secretsExample file strictly, every document a
// v1 Secret; none when there is no file.
func readSecrets(fSys filesys.FileSystem, file string) (map[string]*corev1.Secret, error) {
	if !fSys.Exists(file) {
		return nil, nil
	}
	data, err := fSys.ReadFile(file)
	if err != nil {
		return nil, err
	}
	out := map[string]*corev1.Secret{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var errs []error
	for i := 0; ; i++ {
		doc, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		js, err := sigsyaml.YAMLToJSONStrict(doc)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s document %d: %w", file, i, err))
			continue
		}
		if string(bytes.TrimSpace(js)) == "null" {
			continue
		}
		s := &corev1.Secret{}
		strict, err := sigsjson.UnmarshalStrict(js, s, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
		for _, e := range append(strict, err) {
			if e != nil {
				errs = append(errs, fmt.Errorf("%s document %d: %w", file, i, e))
			}
		}
		if s.APIVersion != "v1" || s.Kind != "Secret" || s.Name == "" {
			errs = append(errs, fmt.Errorf("%s document %d: got %s %s %q, want a v1 Secret with a name", file, i, s.APIVersion, s.Kind, s.Name))
			continue
		}
		if _, dup := out[s.Name]; dup {
			errs = append(errs, fmt.Errorf("%s: Secret %s given twice", file, s.Name))
		}
		out[s.Name] = s
	}
	return out, errors.Join(errs...)
}

// netpol is a NetworkPolicy document for exprd's pods, for TestBuildIsStrict.
func netpol(name string) string {
	return "---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: " + name + "}\nspec: {podSelector: {matchLabels: {app: exprd}}}\n"
}

// statefulSet is a StatefulSet document, for TestBuildIsStrict.
func statefulSet(name string) string {
	return "---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: " + name + "}\nspec:\n  selector: {matchLabels: {app: " + name + "}}\n  template:\n    metadata: {labels: {app: " + name + "}}\n    spec: {containers: [{name: etcd, image: etcd:1}]}\n"
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
		{"two NetworkPolicies for exprd's pods", deployment + netpol("a") + netpol("b"), "NetworkPolicy b: a second one for the same pods"},
		{"two StatefulSets", deployment + statefulSet("etcd") + statefulSet("etcd2"), "2 StatefulSets"},
		{"a StatefulSet of neither etcd nor NATS", deployment + strings.ReplaceAll(statefulSet("redis"), "name: etcd,", "name: redis,"), "the checks know etcd's and NATS's"},
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
