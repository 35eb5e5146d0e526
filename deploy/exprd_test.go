package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/internal/exprdproc"
)

// TestExprdServesManifest starts the exprd the image holds the way the pod
// would: the container's args and env, its ConfigMaps written to a
// directory that stands in for each mount, and only the listen addresses
// moved to loopback. It must serve, report SERVING to each probe, have
// registered every manual, serve /metrics, and drain on SIGTERM for the
// --drain-timeout the checks read from the manifests. Not parallel: the
// container's env is set on this process, which exprd inherits.
func TestExprdServesManifest(t *testing.T) {
	bin := imageBinary(t)
	for _, dir := range kustomizations(t) {
		t.Run(strings.TrimPrefix(dir, k8sDir+"/"), func(t *testing.T) {
			m := mustBuild(t, dir)
			c, err := m.container()
			if err != nil {
				t.Fatal(err)
			}
			log := &exprdproc.LogBuffer{}
			proc, err := startPod(t, m, bin, log)
			if err != nil {
				t.Fatal(err)
			}

			conn, err := grpc.NewClient(proc.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			for _, p := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
				if p == nil || p.GRPC == nil {
					continue
				}
				service := ""
				if p.GRPC.Service != nil {
					service = *p.GRPC.Service
				}
				resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
				if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
					t.Errorf("grpc.health.v1 Check(%q): got %v, %v; want SERVING", service, resp.GetStatus(), err)
				}
			}

			want, err := m.manualNames(c)
			if err != nil {
				t.Fatal(err)
			}
			tools, err := exprdv1.NewToolRegistryClient(conn).ListTools(ctx, &exprdv1.ListToolsRequest{})
			if err != nil {
				t.Fatalf("ToolRegistry.ListTools: %v", err)
			}
			got := map[string]bool{}
			for _, tool := range tools.Tools {
				got[tool.Manual] = true
			}
			if g := slices.Sorted(maps.Keys(got)); !slices.Equal(g, want) {
				t.Errorf("manuals registered: got %v, want %v, the files of --manuals-dir (and no demo)", g, want)
			}

			resp, err := http.Get("http://" + proc.Metrics + "/metrics")
			if err != nil {
				t.Fatalf("GET /metrics: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("go_goroutines")) {
				t.Errorf("GET /metrics: got %s with %d bytes, want 200 with go_goroutines", resp.Status, len(body))
			}

			drain, err := m.drainTimeout()
			if err != nil {
				t.Fatal(err)
			}
			// As the kubelet stops a container: SIGTERM to its process.
			if err := proc.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if got, err := loggedDrainTimeout(log, 5*time.Second); err != nil {
				t.Error(err)
			} else if got != drain {
				t.Errorf("exprd draining: timeout got %v, want %v, the --drain-timeout the checks read", got, drain)
			}
			grace := m.gracePeriod()
			if err := proc.Wait(grace); err != nil {
				t.Errorf("after SIGTERM: %v, want exit 0 within terminationGracePeriodSeconds %v\n%s", err, grace, log)
			}
		})
	}
}

// startPod starts exprd as the pod would run it, its log going to log.
func startPod(t *testing.T, m *manifest, bin string, log io.Writer) (*exprdproc.Proc, error) {
	c, err := m.container()
	if err != nil {
		return nil, err
	}
	args, err := m.podFiles(c, t.TempDir())
	if err != nil {
		return nil, err
	}
	setPodEnv(t, m, c)
	args = append(args, "--listen=127.0.0.1:0", "--metrics-listen=127.0.0.1:0")
	proc, err := exprdproc.Start(bin, log, args...)
	if err != nil {
		return nil, fmt.Errorf("exprd %s: %w", strings.Join(args, " "), err)
	}
	t.Cleanup(proc.Stop)
	return proc, nil
}

// podFiles writes each volume the container mounts under root (a
// ConfigMap's files; an emptyDir empty) and returns the container's args
// with every mount path moved there. The --config file's mount paths are
// moved too, since it may name other files.
func (m *manifest) podFiles(c *corev1.Container, root string) ([]string, error) {
	s, err := m.settings()
	if err != nil {
		return nil, err
	}
	mounts := map[string]string{}
	for _, vm := range c.VolumeMounts {
		mounts[vm.MountPath] = filepath.Join(root, vm.Name)
	}
	// Longest first, so that a mount inside another moves to its own dir.
	paths := slices.SortedFunc(maps.Keys(mounts), func(a, b string) int { return len(b) - len(a) })
	move := func(p string) string {
		for _, mp := range paths {
			if p == mp || strings.HasPrefix(p, mp+"/") {
				return mounts[mp] + strings.TrimPrefix(p, mp)
			}
		}
		return p
	}
	for _, vm := range c.VolumeMounts {
		dir := mounts[vm.MountPath]
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		vol := slices.IndexFunc(m.deployment.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name })
		if vol < 0 {
			return nil, fmt.Errorf("volumeMount %s: no such volume", vm.Name)
		}
		v := m.deployment.Spec.Template.Spec.Volumes[vol]
		switch {
		case v.EmptyDir != nil:
			continue
		case v.ConfigMap == nil:
			return nil, fmt.Errorf("volume %s: only ConfigMap and emptyDir volumes are stood in for", v.Name)
		}
		files, err := m.volumeFiles(v.Name)
		if err != nil {
			return nil, err
		}
		for name, data := range files {
			if cfg, ok := s["config"]; ok && path.Join(vm.MountPath, name) == cfg.value {
				for _, mp := range paths {
					data = strings.ReplaceAll(data, mp+"/", mounts[mp]+"/")
				}
			}
			p := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return nil, err
			}
			if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
				return nil, err
			}
		}
	}
	var args []string
	for _, a := range c.Args {
		if name, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "-") {
			args = append(args, name+"="+move(v))
			continue
		}
		args = append(args, move(a))
	}
	return args, nil
}

// setPodEnv gives this process the container's env, and only that, for
// exprd to inherit; t.Setenv puts the test's own back afterwards. A
// Secret's value is not in the manifests: a placeholder stands in for it.
func setPodEnv(t *testing.T, m *manifest, c *corev1.Container) {
	if len(c.EnvFrom) > 0 {
		t.Fatalf("container exprd: envFrom hides which variables exprd gets; list them in env")
	}
	set := map[string]bool{}
	for _, e := range c.Env {
		v := e.Value
		switch f := e.ValueFrom; {
		case f == nil:
		case f.SecretKeyRef != nil:
			v = "placeholder-for-secret-" + f.SecretKeyRef.Name + "-" + f.SecretKeyRef.Key
		case f.ConfigMapKeyRef != nil:
			cm, ok := m.configMaps[f.ConfigMapKeyRef.Name]
			if !ok {
				t.Fatalf("env %s: ConfigMap %s is not in the build", e.Name, f.ConfigMapKeyRef.Name)
			}
			v = cm.Data[f.ConfigMapKeyRef.Key]
		case f.FieldRef != nil:
			v = "placeholder-for-" + f.FieldRef.FieldPath
		case f.ResourceFieldRef != nil:
			q := c.Resources.Limits[corev1.ResourceName(strings.TrimPrefix(f.ResourceFieldRef.Resource, "limits."))]
			v = q.String()
		}
		t.Setenv(e.Name, v)
		set[e.Name] = true
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !set[k] {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

// manualNames is the manuals exprd registers from --manuals-dir, sorted:
// a call template by its name, any other file by its base name, each
// with non-word characters turned into _ (utcp/loaddir.go).
func (m *manifest) manualNames(c *corev1.Container) ([]string, error) {
	dir, err := m.explicit("manuals-dir")
	if err != nil {
		return nil, err
	}
	vm, _, err := m.mountOf(path.Join(dir.value, "x"))
	if err != nil {
		return nil, err
	}
	files, err := m.volumeFiles(vm.Name)
	if err != nil {
		return nil, err
	}
	nonWord := regexp.MustCompile(`\W`)
	names := []string{}
	for file, data := range files {
		if strings.HasPrefix(file, ".") || strings.Contains(file, "/") {
			continue
		}
		name := strings.TrimSuffix(file, path.Ext(file))
		var tmpl struct {
			Name string `json:"name"`
			Type string `json:"call_template_type"`
		}
		if yaml.Unmarshal([]byte(data), &tmpl) == nil && tmpl.Type != "" && tmpl.Name != "" {
			name = tmpl.Name
		}
		names = append(names, nonWord.ReplaceAllString(name, "_"))
	}
	slices.Sort(names)
	return names, nil
}

// loggedDrainTimeout waits for exprd's "exprd draining" line and returns its
// timeout.
func loggedDrainTimeout(b *exprdproc.LogBuffer, wait time.Duration) (time.Duration, error) {
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for line := range strings.Lines(b.String()) {
			var rec struct{ Msg, Timeout string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "exprd draining" {
				return time.ParseDuration(rec.Timeout)
			}
		}
	}
	return 0, fmt.Errorf("no \"exprd draining\" log line %v after SIGTERM:\n%s", wait, b.String())
}
