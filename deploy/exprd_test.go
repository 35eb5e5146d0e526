package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"

	"github.com/exprd/exprd/cluster/etcdtest"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/internal/testkit/exprdproc"
)

// TestExprdServesManifest starts the exprd the image holds the way the pod
// would: the container's args and env, its ConfigMaps and stand-in Secrets
// written to a directory that stands in for each mount, and only the listen
// addresses, the registry's etcd (an embedded etcd) and the turns' NATS
// (its members, embedded) moved to loopback. It must serve, report SERVING
// to each probe (with no token), refuse calls without a token when auth is
// on, list every manual with the example's token, refuse every registry
// write (PERMISSION_DENIED with auth on, FAILED_PRECONDITION with it off),
// serve /metrics, report on /readyz the registry store the manifest names,
// keep its turns in NATS with --nats-replicas copies when the manifest
// runs NATS, and drain on SIGTERM for the --drain-timeout the checks read
// from the manifests. Not parallel: the
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
			bare, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// With auth on, calls carry the example's token for the tool
			// registry, as written into the stand-in Secret.
			toks, err := m.exampleTokens()
			if err != nil {
				t.Fatal(err)
			}
			ctx := bare
			if len(toks) > 0 {
				i := slices.IndexFunc(toks, func(tk token) bool {
					return slices.Contains(tk.scopes, "toolregistry") || slices.Contains(tk.scopes, "*")
				})
				if i < 0 {
					t.Fatalf("auth tokens: got none with the toolregistry scope, want one to list the tools with")
				}
				ctx = withToken(bare, toks[i].value)
			}

			for _, p := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
				if p == nil || p.GRPC == nil {
					continue
				}
				service := ""
				if p.GRPC.Service != nil {
					service = *p.GRPC.Service
				}
				// No token: the kubelet's probe has none.
				resp, err := healthpb.NewHealthClient(conn).Check(bare, &healthpb.HealthCheckRequest{Service: service})
				if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
					t.Errorf("grpc.health.v1 Check(%q): got %v, %v; want SERVING", service, resp.GetStatus(), err)
				}
			}

			want, err := m.manualNames()
			if err != nil {
				t.Fatal(err)
			}
			registry := exprdv1.NewToolRegistryClient(conn)
			if len(toks) > 0 {
				_, err := registry.ListTools(bare, &exprdv1.ListToolsRequest{})
				if got := status.Code(err); got != codes.Unauthenticated {
					t.Errorf("ToolRegistry.ListTools without a token: got %v (%v), want Unauthenticated: auth is on", got, err)
				}
			}
			tools, err := listTools(ctx, registry)
			if err != nil {
				t.Fatalf("ToolRegistry.ListTools: %v", err)
			}
			got := map[string]bool{}
			for _, tool := range tools {
				got[tool.GetManual()] = true
			}
			if g := slices.Sorted(maps.Keys(got)); !slices.Equal(g, want) {
				t.Errorf("manuals registered: got %v, want %v, the files of --manuals-dir (and no demo)", g, want)
			}

			// The registry is read-only: no example token may write it, and
			// with auth off no one may.
			wantWrite, callers := codes.PermissionDenied, toks
			if len(toks) == 0 {
				wantWrite, callers = codes.FailedPrecondition, []token{{name: "(no token, auth off)"}}
			}
			for _, tk := range callers {
				cctx := bare
				if tk.value != "" {
					cctx = withToken(bare, tk.value)
				}
				_, err := registry.RegisterManual(cctx, &exprdv1.RegisterManualRequest{
					Name:   "probe",
					Source: &exprdv1.RegisterManualRequest_ManualJson{ManualJson: `{"utcp_version": "1.1.0", "tools": []}`},
				})
				if got := status.Code(err); got != wantWrite {
					t.Errorf("ToolRegistry.RegisterManual as %s: got %v (%v), want %v: the registry is read-only", tk.name, got, err, wantWrite)
				}
				for _, name := range want {
					_, err := registry.DeregisterManual(cctx, &exprdv1.DeregisterManualRequest{Name: name})
					if got := status.Code(err); got != wantWrite {
						t.Errorf("ToolRegistry.DeregisterManual(%s) as %s: got %v (%v), want %v: the registry is read-only", name, tk.name, got, err, wantWrite)
					}
				}
			}
			if after, err := listTools(ctx, registry); err != nil || len(after) != len(tools) {
				t.Errorf("ToolRegistry.ListTools after the refused writes: got %d tools (%v), want %d", len(after), err, len(tools))
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

			// The registry's store is the one the manifest names: etcd
			// (the embedded stand-in) when it runs one.
			store, err := m.registryStore()
			if err != nil {
				t.Fatal(err)
			}
			wantStore := "memory"
			if store.endpoints != nil {
				wantStore = "etcd"
			}
			if got, err := readyzStore(proc.Metrics); err != nil || got != wantStore {
				t.Errorf("GET /readyz: got registry store %q (%v), want %q", got, err, wantStore)
			}

			// The turn store is the manifest's: exprd placed its stream
			// and buckets on the stand-in members with --nats-replicas
			// copies, one a member.
			if turns, err := m.turnStore(); err != nil {
				t.Fatal(err)
			} else if turns.urls != nil {
				want, held, err := natsStreamCopies(m.natsStandIn)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("NATS's stand-in: streams' replicas %v, members holding each %v", want, held)
				if len(want) == 0 {
					t.Errorf("NATS's stand-in: got no JetStream streams, want exprd's turn store's (--turn-store nats)")
				}
				for name, r := range want {
					if r != turns.replicas || held[name] != turns.replicas {
						t.Errorf("NATS's stand-in: stream %s: got %d replicas on %d members, want --nats-replicas %d on as many", name, r, held[name], turns.replicas)
					}
				}
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
	// The manifests' etcd is stood in for by one embedded member on
	// loopback, as the listen addresses are moved there.
	store, err := m.registryStore()
	if err != nil {
		return nil, err
	}
	if store.endpoints != nil {
		if store.tls {
			return nil, errors.New("--registry-store etcds://: the embedded etcd that stands in for it speaks plaintext only")
		}
		args = append(args, "--registry-store=etcd://"+etcdtest.Start(t).Endpoint())
	}
	// The manifests' NATS likewise, by its members run embedded on
	// loopback, each with its own nats.conf: exprd places its stream and
	// bucket with the manifest's --nats-replicas.
	turns, err := m.turnStore()
	if err != nil {
		return nil, err
	}
	if turns.urls != nil {
		if turns.urls[0].Scheme == "tls" {
			return nil, errors.New("--nats-url tls://: the embedded nats-server that stands in for it speaks plaintext only")
		}
		urls, err := startNATSCluster(t, m)
		if err != nil {
			return nil, fmt.Errorf("NATS's stand-in: %w", err)
		}
		args = append(args, "--nats-url="+urls)
	}
	proc, err := exprdproc.Start(bin, log, args...)
	if err != nil {
		return nil, fmt.Errorf("exprd %s: %w", strings.Join(args, " "), err)
	}
	t.Cleanup(proc.Stop)
	return proc, nil
}

// podFiles writes each volume the container mounts under root (a
// ConfigMap's files, a Secret's stand-in files; an emptyDir empty) as the
// kubelet lays them out, and returns the container's args with every mount
// path moved there. The --config file's mount paths are moved too, since it
// may name other files.
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
		mode := os.FileMode(0o644)
		switch {
		case v.EmptyDir != nil:
			continue
		case v.Secret != nil:
			if v.Secret.DefaultMode != nil {
				mode = os.FileMode(*v.Secret.DefaultMode)
			}
		case v.ConfigMap != nil:
			if v.ConfigMap.DefaultMode != nil {
				mode = os.FileMode(*v.ConfigMap.DefaultMode)
			}
		default:
			return nil, fmt.Errorf("volume %s: only ConfigMap, Secret and emptyDir volumes are stood in for", v.Name)
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
				files[name] = data
			}
		}
		if err := writeAtomic(dir, files, mode|0o400); err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
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

// writeAtomic writes a ConfigMap's or Secret's files into dir as the
// kubelet does: into a hidden timestamped directory, linked from ..data,
// each file at the top a symlink through ..data. exprd must follow the
// links and skip the hidden entries.
func writeAtomic(dir string, files map[string]string, mode os.FileMode) error {
	const ts = "..2026_01_01_00_00_00.000000001"
	top := map[string]bool{}
	for name, data := range files {
		p := filepath.Join(dir, ts, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			return err
		}
		first, _, _ := strings.Cut(name, "/")
		top[first] = true
	}
	if err := os.MkdirAll(filepath.Join(dir, ts), 0o755); err != nil {
		return err
	}
	if err := os.Symlink(ts, filepath.Join(dir, "..data")); err != nil {
		return err
	}
	for name := range top {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// exampleTokens is the bearer tokens exprd reads, as the stand-in Secret
// holds them; none when auth is off.
func (m *manifest) exampleTokens() ([]token, error) {
	src, err := m.tokens()
	if err != nil || src == nil {
		return nil, err
	}
	return parseTokens(src.content)
}

// listTools lists every registered tool, a page at a time.
func listTools(ctx context.Context, registry exprdv1.ToolRegistryClient) ([]*exprdv1.ToolInfo, error) {
	var out []*exprdv1.ToolInfo
	req := &exprdv1.ListToolsRequest{PageSize: 500}
	for {
		resp, err := registry.ListTools(ctx, req)
		if err != nil {
			return nil, err
		}
		out = append(out, resp.GetTools()...)
		if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
			return out, nil
		}
	}
}

// withToken makes calls carry a bearer token.
func withToken(ctx context.Context, tok string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

// setPodEnv gives this process the container's env, and only that, for
// exprd to inherit; t.Setenv puts the test's own back afterwards. A
// Secret's value is not in the manifests: its stand-in from the example
// Secrets, else a placeholder, stands in for it.
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
			var ok bool
			if v, ok = m.secretValue(f.SecretKeyRef.Name, f.SecretKeyRef.Key); !ok {
				v = "placeholder-for-secret-" + f.SecretKeyRef.Name + "-" + f.SecretKeyRef.Key
			}
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

// manualNames is the manuals exprd registers from --manuals-dir, sorted.
func (m *manifest) manualNames() ([]string, error) {
	manuals, err := m.manuals()
	if err != nil {
		return nil, err
	}
	names := []string{}
	for _, mf := range manuals {
		names = append(names, mf.name)
	}
	slices.Sort(names)
	return names, nil
}

// readyzStore is the registry store the metrics port's /readyz reports.
func readyzStore(metricsAddr string) (string, error) {
	resp, err := http.Get("http://" + metricsAddr + "/readyz")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var body struct {
		Ready    bool
		Registry struct{ Store string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return "", fmt.Errorf("%s: %w", resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK || !body.Ready {
		return body.Registry.Store, fmt.Errorf("%s, ready %v", resp.Status, body.Ready)
	}
	return body.Registry.Store, nil
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
