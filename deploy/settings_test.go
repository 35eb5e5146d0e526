package deploy_test

import (
	"fmt"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// setting is a flag's value in the pod and where it came from.
type setting struct {
	value, from string
}

// boolFlags are exprd's flags that take no value on the command line.
var boolFlags = map[string]bool{"demo": true, "registry-writes-without-auth": true, "show-provider-messages": true}

// settings reads exprd's settings from the Deployment as exprd reads them
// (cmd/exprd/config.go): the args, a later flag winning; then EXPRD_<FLAG>
// variables with a literal value; then the --config file, read from its
// ConfigMap. A flag left at its default is absent. Whether exprd accepts
// them all is TestExprdServesManifest's question.
func (m *manifest) settings() (map[string]setting, error) {
	c, err := m.container()
	if err != nil {
		return nil, err
	}
	if len(c.Command) > 0 {
		return nil, fmt.Errorf("container exprd: command %q replaces the image's ENTRYPOINT; set args only", c.Command)
	}
	out := map[string]setting{}
	args := c.Args
	for i := 0; i < len(args); i++ {
		name, ok := strings.CutPrefix(args[i], "-")
		name = strings.TrimPrefix(name, "-")
		if !ok || name == "" || strings.HasPrefix(name, "-") {
			return nil, fmt.Errorf("arg %q: exprd takes flags only", args[i])
		}
		if n, v, ok := strings.Cut(name, "="); ok {
			out[n] = setting{v, "args"}
			continue
		}
		if boolFlags[name] {
			out[name] = setting{"true", "args"}
			continue
		}
		if i+1 == len(args) {
			return nil, fmt.Errorf("arg %q: no value follows", args[i])
		}
		i++
		out[name] = setting{args[i], "args"}
	}
	for _, e := range c.Env {
		key, ok := strings.CutPrefix(e.Name, "EXPRD_")
		if !ok || e.ValueFrom != nil {
			continue
		}
		name := strings.ToLower(strings.ReplaceAll(key, "_", "-"))
		if _, set := out[name]; !set {
			out[name] = setting{e.Value, "env " + e.Name}
		}
	}
	cfg, ok := out["config"]
	if !ok {
		return out, nil
	}
	data, err := m.mountedFile(cfg.value)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	var file map[string]yaml.Node
	if err := yaml.Unmarshal([]byte(data), &file); err != nil {
		return nil, fmt.Errorf("--config %s: %w", cfg.value, err)
	}
	for k, n := range file {
		if n.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("--config %s: %s: want a single value (line %d)", cfg.value, k, n.Line)
		}
		if _, set := out[k]; !set {
			out[k] = setting{n.Value, "config " + cfg.value}
		}
	}
	return out, nil
}

// explicit is a setting the checks compare with other objects, so it must
// be written down in the manifests rather than left to exprd's default.
func (m *manifest) explicit(name string) (setting, error) {
	s, err := m.settings()
	if err != nil {
		return setting{}, err
	}
	v, ok := s[name]
	if !ok {
		return setting{}, fmt.Errorf("--%s is not set in the Deployment's args, env or --config file: set it, so the checks can compare it", name)
	}
	return v, nil
}

// drainTimeout is the pod's --drain-timeout.
func (m *manifest) drainTimeout() (time.Duration, error) {
	s, err := m.explicit("drain-timeout")
	if err != nil {
		return 0, err
	}
	d, err := time.ParseDuration(s.value)
	if err != nil {
		return 0, fmt.Errorf("--drain-timeout (%s): %w", s.from, err)
	}
	return d, nil
}
