package deploy_test

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"net/url"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	_ "github.com/exprd/exprd/gen/exprd/v1" // registers exprd.v1's services, whose names are scopes
)

// The checks of exprd's trust model (only the operator is trusted; clients,
// models and tool providers are not): auth on, the tool registry read-only,
// UTCP variables bound from mounted Secrets, egress to named destinations.

// overlay reports whether the manifest is a deployment rather than the base,
// which has no Secrets to take tokens from.
func (m *manifest) overlay() bool { return !strings.HasSuffix(m.dir, "/base") }

// scopeRegistryWrite is the scope RegisterManual and DeregisterManual need
// (auth.ScopeRegistryWrite); "*" does not grant it.
const scopeRegistryWrite = "registry.write"

// knownScopes are the scopes exprd checks: each exprd.v1 service's name,
// lower-cased (server's scopeOf), "*" and registry.write. A misspelt scope
// grants nothing, without a word from exprd.
func knownScopes() map[string]bool {
	s := map[string]bool{"*": true, scopeRegistryWrite: true}
	protoregistry.GlobalFiles.RangeFilesByPackage("exprd.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			s[strings.ToLower(string(fd.Services().Get(i).Name()))] = true
		}
		return true
	})
	return s
}

// token is one line of a tokens file.
type token struct {
	name, value string
	scopes      []string
}

// minTokenChars is the shortest token auth.ParseTokens takes.
const minTokenChars = 16

// parseTokens reads a tokens file as auth.ParseTokens does: lines (";"
// ends one too) of NAME TOKEN SCOPES, blank and # lines skipped, a token
// shorter than minTokenChars or given twice refused (an example Secret's
// <token> is read as its stand-in, which is neither). It is a copy, not a
// call: auth.ParseTokens's package would bring seven modules into this
// module's go.mod that exprd's own tests do not need here, and its Tokens
// do not list their callers' names and scopes.
func parseTokens(s string) ([]token, error) {
	var out []token
	seen := map[string]bool{}
	n := 0
	for l := range strings.Lines(s) {
		for _, line := range strings.Split(l, ";") {
			n++
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			f := strings.Fields(line)
			if len(f) != 3 {
				return nil, fmt.Errorf("tokens line %d: got %d fields, want NAME TOKEN SCOPES", n, len(f))
			}
			if len(f[1]) < minTokenChars {
				return nil, fmt.Errorf("tokens line %d (%s): the token is shorter than %d characters", n, f[0], minTokenChars)
			}
			if seen[f[1]] {
				return nil, fmt.Errorf("tokens line %d (%s): the token is given twice", n, f[0])
			}
			seen[f[1]] = true
			t := token{name: f[0], value: f[1]}
			for _, sc := range strings.Split(f[2], ",") {
				if sc = strings.TrimSpace(sc); sc != "" {
					t.scopes = append(t.scopes, sc)
				}
			}
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("tokens: none given")
	}
	return out, nil
}

// TestParseTokens holds the copy to what auth.ParseTokens refuses.
func TestParseTokens(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, wantErr string }{
		{"a token", "ops 0123456789abcdef *", ""},
		{"two tokens on a line", "a 0123456789abcdef exprtool; b 0123456789abcdeF toolregistry\n", ""},
		{"a placeholder left as written", "ops <token> *", "tokens line 1 (ops): the token is shorter than 16 characters"},
		{"comments and blank lines", "# clients\n\nops 0123456789abcdef *\n", ""},
		{"a short token", "ops 0123456789abcde *", "tokens line 1 (ops): the token is shorter than 16 characters"},
		{"a token given twice", "a 0123456789abcdef *\nb 0123456789abcdef exprtool", "tokens line 2 (b): the token is given twice"},
		{"a scope missing", "ops 0123456789abcdef", "tokens line 1: got 2 fields, want NAME TOKEN SCOPES"},
		{"none", "# none\n", "tokens: none given"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseTokens(tc.in)
			var got string
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Errorf("got error %q, want %q", got, tc.wantErr)
			}
		})
	}
}

// tokensSource is where exprd's bearer tokens come from.
type tokensSource struct {
	content, from string
	secret        bool // from a Secret, not a ConfigMap or a literal
}

// tokens is exprd's bearer tokens as it reads them (cmd/exprd): the
// --auth-tokens-file, else EXPRD_AUTH_TOKENS; nil when auth is off.
func (m *manifest) tokens() (*tokensSource, error) {
	s, err := m.settings()
	if err != nil {
		return nil, err
	}
	if f, ok := s["auth-tokens-file"]; ok && f.value != "" {
		vm, rel, err := m.mountOf(f.value)
		if err != nil {
			return nil, fmt.Errorf("--auth-tokens-file (%s): %w", f.from, err)
		}
		v, err := m.volume(vm.Name)
		if err != nil {
			return nil, err
		}
		files, err := m.volumeFiles(vm.Name)
		if err != nil {
			return nil, fmt.Errorf("--auth-tokens-file (%s): %w", f.from, err)
		}
		content, ok := files[rel]
		if !ok {
			return nil, fmt.Errorf("--auth-tokens-file=%s (%s): volume %s holds %v, not %s", f.value, f.from, vm.Name, slices.Sorted(maps.Keys(files)), rel)
		}
		return &tokensSource{content, "--auth-tokens-file " + f.value + " (volume " + vm.Name + ")", v.Secret != nil}, nil
	}
	c, err := m.container()
	if err != nil {
		return nil, err
	}
	for _, e := range c.Env {
		if e.Name != "EXPRD_AUTH_TOKENS" {
			continue
		}
		switch f := e.ValueFrom; {
		case f == nil && e.Value == "":
			return nil, nil
		case f == nil:
			return &tokensSource{e.Value, "env EXPRD_AUTH_TOKENS (a literal)", false}, nil
		case f.SecretKeyRef != nil:
			v, ok := m.secretValue(f.SecretKeyRef.Name, f.SecretKeyRef.Key)
			if !ok {
				return nil, fmt.Errorf("env EXPRD_AUTH_TOKENS: Secret %s key %s is not in %s", f.SecretKeyRef.Name, f.SecretKeyRef.Key, secretsExample)
			}
			return &tokensSource{v, "env EXPRD_AUTH_TOKENS (Secret " + f.SecretKeyRef.Name + ")", true}, nil
		case f.ConfigMapKeyRef != nil:
			cm := m.configMaps[f.ConfigMapKeyRef.Name]
			if cm == nil {
				return nil, fmt.Errorf("env EXPRD_AUTH_TOKENS: ConfigMap %s is not in the build", f.ConfigMapKeyRef.Name)
			}
			return &tokensSource{cm.Data[f.ConfigMapKeyRef.Key], "env EXPRD_AUTH_TOKENS (ConfigMap " + cm.Name + ")", false}, nil
		default:
			return nil, fmt.Errorf("env EXPRD_AUTH_TOKENS: want a Secret's key")
		}
	}
	return nil, nil
}

func checkAuth(m *manifest) error {
	src, err := m.tokens()
	switch {
	case err != nil:
		return err
	case src == nil && m.overlay():
		return errors.New("auth: off, so any client may call every service; want --auth-tokens-file on a mounted Secret (or EXPRD_AUTH_TOKENS from a secretKeyRef)")
	case src == nil:
		return nil
	}
	var errs []error
	if !src.secret {
		errs = append(errs, fmt.Errorf("auth tokens from %s: want a Secret, not in a ConfigMap or the Deployment where whoever reads those reads the tokens", src.from))
	}
	toks, err := parseTokens(src.content)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("auth tokens from %s: %w", src.from, err))...)
	}
	known := knownScopes()
	for _, t := range toks {
		for _, sc := range t.scopes {
			if !known[sc] {
				errs = append(errs, fmt.Errorf("auth tokens from %s: token %s: scope %q: got an unknown scope, which grants nothing; want one of %v", src.from, t.name, sc, slices.Sorted(maps.Keys(known))))
			}
		}
	}
	return errors.Join(errs...)
}

func checkRegistryReadOnly(m *manifest) error {
	s, err := m.settings()
	if err != nil {
		return err
	}
	var errs []error
	if w, ok := s["registry-writes-without-auth"]; ok {
		if on, err := strconv.ParseBool(w.value); err != nil || on {
			errs = append(errs, fmt.Errorf("--registry-writes-without-auth=%s (%s): got registry writes open to any client, want the registry read-only (the flag left out)", w.value, w.from))
		}
	}
	src, err := m.tokens()
	if err != nil || src == nil {
		return errors.Join(append(errs, err)...)
	}
	toks, err := parseTokens(src.content)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, t := range toks {
		if slices.Contains(t.scopes, scopeRegistryWrite) {
			errs = append(errs, fmt.Errorf("auth tokens from %s: token %s: got scopes %v, want none with %s: the example's registry is read-only", src.from, t.name, t.scopes, scopeRegistryWrite))
		}
	}
	return errors.Join(errs...)
}

// manualFile is a file of --manuals-dir as exprd registers it
// (utcp/loaddir.go).
type manualFile struct {
	file, name string
	vars       []manualVar // ${VAR}s of its call templates
	urls       []string    // http(s) URLs of its call templates
}

// manualVar is a variable a manual's call template names, and where.
type manualVar struct{ name, at string }

// varRef is utcp's variable reference: ${NAME} or $NAME, in a string that
// does not contain $ref.
var varRef = regexp.MustCompile(`\$\{([a-zA-Z0-9_]+)\}|\$([a-zA-Z0-9_]+)`)

// manuals reads the files of --manuals-dir: a call template is named by its
// name, any other file by its base name, each with every character but a
// letter, digit or _ turned into _ (utcp.SanitizeManualName). Only call
// templates are searched for variables and URLs, as exprd checks them.
func (m *manifest) manuals() ([]manualFile, error) {
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
	var out []manualFile
	for _, file := range slices.Sorted(maps.Keys(files)) {
		if strings.HasPrefix(file, ".") || strings.Contains(file, "/") {
			continue
		}
		mf := manualFile{file: file, name: strings.TrimSuffix(file, path.Ext(file))}
		var doc map[string]any
		if yaml.Unmarshal([]byte(files[file]), &doc) == nil {
			var templates map[string]any
			if doc["call_template_type"] != nil || doc["provider_type"] != nil {
				if n, ok := doc["name"].(string); ok && n != "" {
					mf.name = n
				}
				templates = map[string]any{"": doc}
			} else if tools, ok := doc["tools"].([]any); ok {
				templates = map[string]any{}
				for i, tool := range tools {
					if t, ok := tool.(map[string]any); ok {
						templates[fmt.Sprintf("tools[%d].tool_call_template", i)] = t["tool_call_template"]
					}
				}
			}
			for _, at := range slices.Sorted(maps.Keys(templates)) {
				walkStrings(templates[at], at, func(at, s string) {
					if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
						mf.urls = append(mf.urls, s)
					}
					if strings.Contains(s, "$ref") {
						return
					}
					for _, sub := range varRef.FindAllStringSubmatch(s, -1) {
						mf.vars = append(mf.vars, manualVar{sub[1] + sub[2], at})
					}
				})
			}
		}
		mf.name = nonWord.ReplaceAllString(mf.name, "_")
		out = append(out, mf)
	}
	return out, nil
}

// walkStrings calls f with every string of a decoded document and its path.
func walkStrings(x any, at string, f func(at, s string)) {
	switch t := x.(type) {
	case string:
		f(at, t)
	case []any:
		for i, e := range t {
			walkStrings(e, fmt.Sprintf("%s[%d]", at, i), f)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			walkStrings(t[k], strings.TrimPrefix(at+"."+k, "."), f)
		}
	}
}

// namespacedKey is the key exprd binds a manual's variable under: the
// manual's name with each _ doubled, then _, then the variable
// (vars.NamespacedKey: demo_shop + API_TOKEN is demo__shop_API_TOKEN).
func namespacedKey(manual, name string) string {
	return strings.ReplaceAll(manual, "_", "__") + "_" + name
}

// parseNamespacedKey is vars.ParseNamespacedKey: the (manual, variable) a
// key binds, __ being an _ of the manual's name and the first single _
// ending it.
func parseNamespacedKey(key string) (manual, name string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		switch {
		case key[i] != '_':
			b.WriteByte(key[i])
		case i+1 < len(key) && key[i+1] == '_':
			b.WriteByte('_')
			i++
		default:
			manual, name = b.String(), key[i+1:]
			return manual, name, manual != "" && name != ""
		}
	}
	return "", "", false
}

// varKeyName is the file name exprd accepts in --utcp-secrets-dir.
var varKeyName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// splitList splits a comma-separated flag value as exprd does.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// utcpBindings is every UTCP variable key the operator's sources bind, and
// where from: the files of the Secret mounted at --utcp-secrets-dir, the
// variables --utcp-env lists, the keys of --utcp-env-file. The process
// environment is no source unless --utcp-env lists the key.
func (m *manifest) utcpBindings() (map[string]string, error) {
	s, err := m.settings()
	if err != nil {
		return nil, err
	}
	c, err := m.container()
	if err != nil {
		return nil, err
	}
	bound := map[string]string{}
	var errs []error
	if d, ok := s["utcp-secrets-dir"]; ok && d.value != "" {
		i := slices.IndexFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool {
			return strings.TrimSuffix(vm.MountPath, "/") == strings.TrimSuffix(d.value, "/")
		})
		if i < 0 {
			errs = append(errs, fmt.Errorf("--utcp-secrets-dir=%s (%s): got no volume mounted there, want the mount path of a Secret volume", d.value, d.from))
		} else if v, err := m.volume(c.VolumeMounts[i].Name); err != nil {
			errs = append(errs, err)
		} else if v.Secret == nil {
			errs = append(errs, fmt.Errorf("--utcp-secrets-dir=%s (%s): volume %s is not a Secret; UTCP variables are API keys", d.value, d.from, v.Name))
		} else if files, err := m.volumeFiles(v.Name); err != nil {
			errs = append(errs, fmt.Errorf("--utcp-secrets-dir: %w", err))
		} else {
			for _, f := range slices.Sorted(maps.Keys(files)) {
				if !varKeyName.MatchString(f) {
					errs = append(errs, fmt.Errorf("--utcp-secrets-dir: Secret %s file %q: want a variable's key (letters, digits and _), at the top of the mount: exprd refuses or skips it", v.Secret.SecretName, f))
					continue
				}
				bound[f] = "Secret " + v.Secret.SecretName + " at --utcp-secrets-dir"
			}
		}
	}
	if e, ok := s["utcp-env"]; ok {
		for _, key := range splitList(e.value) {
			i := slices.IndexFunc(c.Env, func(ev corev1.EnvVar) bool { return ev.Name == key })
			switch {
			case i < 0:
				errs = append(errs, fmt.Errorf("--utcp-env (%s) lists %s: the container sets no %s, so exprd refuses to start", e.from, key, key))
			case c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.SecretKeyRef == nil:
				errs = append(errs, fmt.Errorf("env %s (a UTCP variable): got a value written in the Deployment, want a secretKeyRef", key))
			case c.Env[i].ValueFrom.SecretKeyRef.Optional != nil && *c.Env[i].ValueFrom.SecretKeyRef.Optional:
				errs = append(errs, fmt.Errorf("env %s (a UTCP variable): optional, but exprd refuses to start without it: make it required", key))
			default:
				bound[key] = "env " + key + " (--utcp-env)"
			}
		}
	}
	if f, ok := s["utcp-env-file"]; ok && f.value != "" {
		if data, err := m.mountedFile(f.value); err == nil {
			for line := range strings.Lines(data) {
				line = strings.TrimPrefix(strings.TrimSpace(line), "export ")
				if k, _, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
					bound[strings.TrimSpace(k)] = "--utcp-env-file " + f.value
				}
			}
		}
	}
	return bound, errors.Join(errs...)
}

func checkUTCPVariables(m *manifest) error {
	manuals, err := m.manuals()
	if err != nil {
		return err
	}
	bound, err := m.utcpBindings()
	errs := []error{err}
	needed := map[string]bool{}
	for _, mf := range manuals {
		for _, v := range mf.vars {
			key := namespacedKey(mf.name, v.name)
			needed[key] = true
			if pm, pv, ok := parseNamespacedKey(key); !ok || pm != mf.name || pv != v.name {
				errs = append(errs, fmt.Errorf("manual %s (%s) %s: ${%s} can never be bound: its key %s reads as manual %q, variable %q; rename the variable", mf.name, mf.file, v.at, v.name, key, pm, pv))
				continue
			}
			if _, ok := bound[key]; !ok {
				errs = append(errs, fmt.Errorf("manual %s (%s) %s: ${%s}: got no key %s in the Secret mounted at --utcp-secrets-dir (bound: %v), want one: exprd refuses to start without it", mf.name, mf.file, v.at, v.name, key, slices.Sorted(maps.Keys(bound))))
			}
		}
	}
	// The environment is no longer a source: a variable left there (as
	// the example had weather_API_KEY) binds nothing.
	c, err := m.container()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, e := range c.Env {
		if needed[e.Name] && !strings.HasPrefix(bound[e.Name], "env ") {
			errs = append(errs, fmt.Errorf("env %s: got a manual's UTCP variable in the environment, which exprd reads only for keys --utcp-env lists; want it a file of the Secret at --utcp-secrets-dir", e.Name))
		}
	}
	return errors.Join(errs...)
}

func checkSecrets(m *manifest) error {
	var errs []error
	spec := m.deployment.Spec.Template.Spec
	fsGroup := spec.SecurityContext != nil && spec.SecurityContext.FSGroup != nil
	refs := map[string][]string{}
	for _, v := range spec.Volumes {
		sv := v.Secret
		if sv == nil {
			continue
		}
		if len(sv.Items) == 0 {
			errs = append(errs, fmt.Errorf("volume %s (Secret %s): got no items, want the keys listed: then a missing key stops the pod at the mount, and a key added to the Secret later is no file of exprd's", v.Name, sv.SecretName))
		}
		if sv.Optional != nil && *sv.Optional {
			errs = append(errs, fmt.Errorf("volume %s (Secret %s): optional, but exprd needs its files to start: make it required", v.Name, sv.SecretName))
		}
		for _, it := range sv.Items {
			refs[sv.SecretName] = append(refs[sv.SecretName], it.Key)
			mode := int32(0o644)
			if sv.DefaultMode != nil {
				mode = *sv.DefaultMode
			}
			if it.Mode != nil {
				mode = *it.Mode
			}
			// The kubelet writes a Secret's files as root, group fsGroup
			// (made group-readable) when the pod sets one.
			if mode&0o004 == 0 && !fsGroup {
				errs = append(errs, fmt.Errorf("volume %s (Secret %s) file %s: mode %#o, owned by root: exprd's user cannot read it; want it readable by others, or the pod's fsGroup set", v.Name, sv.SecretName, it.Path, mode))
			}
		}
	}
	for _, c := range spec.Containers {
		for _, e := range c.Env {
			if f := e.ValueFrom; f != nil && f.SecretKeyRef != nil {
				refs[f.SecretKeyRef.Name] = append(refs[f.SecretKeyRef.Name], f.SecretKeyRef.Key)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(refs)) {
		sec, ok := m.secrets[name]
		if !ok {
			errs = append(errs, fmt.Errorf("Secret %s: the pod needs it, but %s beside the kustomization does not list it", name, secretsExample))
			continue
		}
		for _, key := range refs[name] {
			if !secretKeys(sec)[key] {
				errs = append(errs, fmt.Errorf("Secret %s key %s: the pod needs it, but %s lists only %v", name, key, secretsExample, slices.Sorted(maps.Keys(secretKeys(sec)))))
			}
		}
	}
	return errors.Join(errs...)
}

// kubeDNS is what the DNS egress rule must name: the kube-dns pods in
// kube-system.
var kubeDNS = struct{ namespace, pod labels.Set }{
	labels.Set{"kubernetes.io/metadata.name": "kube-system"},
	labels.Set{"k8s-app": "kube-dns"},
}

// metadataService is the cloud metadata address (169.254.169.254; AWS's
// IPv6 one too), which no egress rule may reach.
var metadataService = []netip.Addr{netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("fd00:ec2::254")}

// selects reports whether a selector is set, not empty, and selects set.
func selects(sel *metav1.LabelSelector, set labels.Set) bool {
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(set)
}

func checkEgress(m *manifest) error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	dnsNamed := false
	for i, r := range m.netpol.Spec.Egress {
		if len(r.Ports) == 0 {
			fail("NetworkPolicy egress[%d]: got no ports, which allows every port; want the destination's", i)
		}
		for _, p := range r.Ports {
			if p.Port == nil {
				fail("NetworkPolicy egress[%d]: got a port rule with no port, which allows every port; want the destination's", i)
			}
		}
		if len(r.To) == 0 {
			fail("NetworkPolicy egress[%d]: got no `to`, which allows every address, 0.0.0.0/0 and ::/0; want the destination named (ipBlock of its ranges, or namespaceSelector and podSelector)", i)
		}
		for j, peer := range r.To {
			if b := peer.IPBlock; b != nil {
				pfx, err := netip.ParsePrefix(b.CIDR)
				if err != nil {
					fail("NetworkPolicy egress[%d].to[%d]: ipBlock %s: %v", i, j, b.CIDR, err)
					continue
				}
				if pfx.Bits() == 0 {
					fail("NetworkPolicy egress[%d].to[%d]: ipBlock %s: got every address, want the destination's ranges", i, j, b.CIDR)
				}
				for _, a := range metadataService {
					if pfx.Contains(a) && !slices.ContainsFunc(b.Except, func(e string) bool {
						ep, err := netip.ParsePrefix(e)
						return err == nil && ep.Contains(a)
					}) {
						fail("NetworkPolicy egress[%d].to[%d]: ipBlock %s: reaches %s, the cloud metadata service", i, j, b.CIDR, a)
					}
				}
			}
			if peer.NamespaceSelector != nil && len(peer.NamespaceSelector.MatchLabels) == 0 && len(peer.NamespaceSelector.MatchExpressions) == 0 &&
				(peer.PodSelector == nil || len(peer.PodSelector.MatchLabels) == 0 && len(peer.PodSelector.MatchExpressions) == 0) {
				fail("NetworkPolicy egress[%d].to[%d]: got every pod of every namespace, want the destination's pods by podSelector", i, j)
			}
		}
		one := []networkingv1.NetworkPolicyEgressRule{r}
		if len(r.To) > 0 && egressAllows(one, 53, corev1.ProtocolUDP) && egressAllows(one, 53, corev1.ProtocolTCP) &&
			!slices.ContainsFunc(r.To, func(p networkingv1.NetworkPolicyPeer) bool {
				return p.IPBlock != nil || !selects(p.NamespaceSelector, kubeDNS.namespace) || !selects(p.PodSelector, kubeDNS.pod)
			}) {
			dnsNamed = true
		}
	}
	if !dnsNamed {
		fail("NetworkPolicy egress: got no rule sending DNS (53/UDP and 53/TCP) to named pods, want one to %v pods in the namespace %v only", kubeDNS.pod, kubeDNS.namespace)
	}
	return errors.Join(errs...)
}

// providerPorts is the TCP port of each http(s) URL exprd connects to by
// the manifests: the manuals' call templates and models.yaml's base_url.
func (m *manifest) providerPorts() (map[string]int32, error) {
	out := map[string]int32{}
	manuals, err := m.manuals()
	if err != nil {
		return nil, err
	}
	var urls []string
	for _, mf := range manuals {
		urls = append(urls, mf.urls...)
	}
	s, err := m.settings()
	if err != nil {
		return nil, err
	}
	if mc, ok := s["models-config"]; ok && mc.value != "" {
		data, err := m.mountedFile(mc.value)
		if err != nil {
			return nil, fmt.Errorf("--models-config: %w", err)
		}
		var cfg struct {
			Providers map[string]struct {
				BaseURL string `json:"base_url"`
			} `json:"providers"`
		}
		if err := yaml.Unmarshal([]byte(data), &cfg); err != nil {
			return nil, fmt.Errorf("--models-config %s: %w", mc.value, err)
		}
		for _, p := range cfg.Providers {
			urls = append(urls, p.BaseURL)
		}
	}
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" || strings.Contains(u.Host, "$") {
			continue
		}
		port := map[string]int32{"http": 80, "https": 443}[u.Scheme]
		if p := u.Port(); p != "" {
			n, err := strconv.ParseInt(p, 10, 32)
			if err != nil {
				continue
			}
			port = int32(n)
		}
		if port != 0 {
			out[u.Scheme+"://"+u.Host] = port
		}
	}
	return out, nil
}

// registryWritesFlag matches the flag that opens the registry to writes
// with auth off, as a flag, an EXPRD_ variable or a config key.
var registryWritesFlag = regexp.MustCompile(`(?i)registry[-_]writes[-_]without[-_]auth`)

// findRegistryWritesFlag lists the files of fsys (but tests and docs)
// that name the flag.
func findRegistryWritesFlag(fsys fs.FS) ([]string, error) {
	var found []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, "_test.go") || strings.HasSuffix(p, ".md") {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		if err == nil && registryWritesFlag.Match(data) {
			found = append(found, p)
		}
		return err
	})
	return found, err
}

// TestNoRegistryWritesWithoutAuth looks for the flag that lets any client
// change the tool registry when auth is off, everywhere in deploy/ but the
// tests and docs: in a manifest, a patch not built yet, a config file or the
// Dockerfile. Its cases show that it finds each spelling.
func TestNoRegistryWritesWithoutAuth(t *testing.T) {
	t.Parallel()
	found, err := findRegistryWritesFlag(os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("files naming registry-writes-without-auth: got %v, want none: the deployed registry stays read-only", found)
	}
	for _, tt := range []struct {
		name, file, data string
		want             bool
	}{
		{"a clean patch", "k8s/overlays/x/patch.yaml", "value: --auth-tokens-file=/etc/exprd/auth/tokens\n", false},
		{"the flag in an args patch", "k8s/overlays/x/patch.yaml", "value: --registry-writes-without-auth\n", true},
		{"the flag with a value", "k8s/base/deployment.yaml", "- --registry-writes-without-auth=true\n", true},
		{"the variable", "k8s/base/deployment.yaml", "- name: EXPRD_REGISTRY_WRITES_WITHOUT_AUTH\n  value: \"true\"\n", true},
		{"the config key", "k8s/base/config/exprd.yaml", "registry-writes-without-auth: true\n", true},
		{"the Dockerfile", "Dockerfile", `ENTRYPOINT ["/usr/local/bin/exprd", "--registry-writes-without-auth"]` + "\n", true},
		{"the docs", "README.md", "never --registry-writes-without-auth\n", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := findRegistryWritesFlag(fstest.MapFS{tt.file: {Data: []byte(tt.data)}})
			if err != nil {
				t.Fatal(err)
			}
			if (len(got) > 0) != tt.want {
				t.Errorf("findRegistryWritesFlag(%s: %q): got %v, want found %v", tt.file, tt.data, got, tt.want)
			}
		})
	}
}

// TestSecretsExampleIsStrict feeds readSecrets what the API server would
// refuse, and expects an error naming the problem.
func TestSecretsExampleIsStrict(t *testing.T) {
	t.Parallel()
	const ok = "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {k: v}\n"
	for _, tt := range []struct {
		name, data, want string
	}{
		{"a valid Secret", ok + "---\n" + strings.ReplaceAll(ok, "name: s", "name: t"), ""},
		{"a misspelt field", ok + "strinData: {k: v}\n", `unknown field "strinData"`},
		{"a duplicate key", ok + "stringData: {k: w}\n", `already set`},
		{"another kind", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: s}\n", "want a v1 Secret"},
		{"a Secret twice", ok + "---\n" + ok, "given twice"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fSys := filesys.MakeFsInMemory()
			if err := fSys.WriteFile("/k/"+secretsExample, []byte(tt.data)); err != nil {
				t.Fatal(err)
			}
			_, err := readSecrets(fSys, "/k/"+secretsExample)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("readSecrets: got %v, want no error", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("readSecrets: got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestStandIn checks the stand-in values: each placeholder replaced, the
// same on every call, different per placeholder, long enough for a token.
func TestStandIn(t *testing.T) {
	t.Parallel()
	a := standIn("s", "k", "x <token> y <token>")
	fields := strings.Fields(a)
	if a != standIn("s", "k", "x <token> y <token>") || len(fields) != 4 || fields[1] == fields[3] || len(fields[1]) < 16 || placeholder.MatchString(a) {
		t.Errorf("standIn: got %q, want both placeholders replaced by distinct values of 16 characters or more, the same each call", a)
	}
	if got := standIn("s", "k", "no placeholder"); got != "no placeholder" {
		t.Errorf("standIn without placeholders: got %q, want it unchanged", got)
	}
}

// TestKeyNaming checks the test's copy of exprd's key naming (the running
// exprd checks it against the real one: see TestExprdServesManifest).
func TestKeyNaming(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ manual, name, key string }{
		{"weather", "API_KEY", "weather_API_KEY"},
		{"demo_shop", "API_TOKEN", "demo__shop_API_TOKEN"},
		{"a__b", "C", "a____b_C"},
	} {
		if got := namespacedKey(tt.manual, tt.name); got != tt.key {
			t.Errorf("namespacedKey(%q, %q): got %q, want %q", tt.manual, tt.name, got, tt.key)
		}
		if m, n, ok := parseNamespacedKey(tt.key); !ok || m != tt.manual || n != tt.name {
			t.Errorf("parseNamespacedKey(%q): got %q, %q, %v; want %q, %q, true", tt.key, m, n, ok, tt.manual, tt.name)
		}
	}
	if m, n, ok := parseNamespacedKey(namespacedKey("a", "_b_C")); ok && m == "a" && n == "_b_C" {
		t.Errorf("parseNamespacedKey(%q): got a, _b_C; want another pair, as exprd reads it", namespacedKey("a", "_b_C"))
	}
}
