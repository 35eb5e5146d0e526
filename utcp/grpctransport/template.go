package grpctransport

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
)

// Template defaults: go-utcp's provider address when the template gives
// none.
const (
	DefaultHost = "127.0.0.1"
	DefaultPort = 9339
)

// UTCPService is the service name of go-utcp's provider contract
// (gen/grpcpb). A template naming it, or naming no service, calls the
// provider's CallTool and CallToolStream; any other service is called
// through server reflection.
const UTCPService = "grpcpb.UTCPService"

// Metadata keys the transport sends.
const (
	// MetadataTarget carries the template's `target`, as go-utcp sends it.
	MetadataTarget = "target"
	// MetadataAuthorization carries basic auth ("Basic base64(user:pass)").
	MetadataAuthorization = "authorization"
)

// spec is a grpc call template, decoded and checked.
type spec struct {
	host     string // as given, brackets stripped
	addr     string // host:port, the connection's target
	useSSL   bool
	service  string // full service name ("" for UTCPService)
	method   string // method_name as given
	toolName string // exprd's tool_name: the provider's own name for the tool
	md       []string
	fields   map[string]any // the template as given (resolved), for discovery
	env      utcp.Env       // the registry's, set when the transport is built
	// conn is the connection the template's calls use, once opened: its
	// last refused dial tells an egress refusal from an unreachable host.
	conn atomic.Pointer[sharedConn]
}

// utcpService reports whether the template calls go-utcp's UTCPService.
func (s *spec) utcpService() bool { return s.service == "" || s.service == UTCPService }

// decodeSpec reads a grpc call template. Errors are *manual.FieldError (or
// *manual.Error for auth, from manual.ParseCallTemplate) naming the field.
func decodeSpec(raw json.RawMessage) (*spec, error) {
	ct, err := manual.ParseCallTemplate(raw)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var f map[string]any
	if err := dec.Decode(&f); err != nil {
		return nil, &manual.FieldError{Msg: "the template is not a JSON object"}
	}
	s := &spec{fields: f}

	host, err := optString(f, "host")
	if err != nil {
		return nil, err
	}
	port, hasPort, err := optPort(f)
	if err != nil {
		return nil, err
	}
	if host == "" {
		host = DefaultHost
	}
	if h, p, splitErr := net.SplitHostPort(host); splitErr == nil {
		// go-utcp writes host and port apart; "host:port" in host is
		// accepted when port is not also given.
		if hasPort {
			return nil, &manual.FieldError{Path: "host", Msg: "has a port, and `port` is given too; give one"}
		}
		n, convErr := strconv.Atoi(p)
		if convErr != nil || n < 1 || n > 65535 {
			return nil, &manual.FieldError{Path: "host", Msg: fmt.Sprintf("port %q is not a number in [1, 65535]", p)}
		}
		host, port, hasPort = h, n, true
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" || strings.ContainsAny(host, "/ \t\r\n@?#") {
		return nil, &manual.FieldError{Path: "host", Msg: "must be a host name or an IP address"}
	}
	if !hasPort {
		port = DefaultPort
	}
	s.host = host
	s.addr = net.JoinHostPort(host, strconv.Itoa(port))

	if s.useSSL, err = optBool(f, "use_ssl"); err != nil {
		return nil, err
	}
	if s.service, err = optString(f, "service_name"); err != nil {
		return nil, err
	}
	if s.service != "" && !protoreflect.FullName(s.service).IsValid() {
		return nil, &manual.FieldError{Path: "service_name", Msg: fmt.Sprintf("%q is not a full protobuf service name (package.Service)", s.service)}
	}
	if s.method, err = optString(f, "method_name"); err != nil {
		return nil, err
	}
	if !s.utcpService() {
		switch {
		case s.method == "":
			return nil, &manual.FieldError{Path: "method_name", Msg: "missing (needed to call " + s.service + " through reflection)"}
		case !protoreflect.Name(s.method).IsValid():
			return nil, &manual.FieldError{Path: "method_name", Msg: fmt.Sprintf("%q is not a protobuf method name", s.method)}
		}
	}
	if s.toolName, err = optString(f, "tool_name"); err != nil {
		return nil, err
	}

	target, err := optString(f, "target")
	if err != nil {
		return nil, err
	}
	if target != "" {
		if !printable(target) {
			return nil, &manual.FieldError{Path: MetadataTarget, Msg: "must be printable ASCII (it is sent as metadata)"}
		}
		s.md = append(s.md, MetadataTarget, target)
	}
	if ct.Auth != nil {
		kv, err := authMetadata(ct.Auth)
		if err != nil {
			return nil, err
		}
		s.md = append(s.md, kv...)
	}
	return s, nil
}

// authMetadata turns a template's auth into per-RPC metadata.
func authMetadata(a *manual.Auth) ([]string, error) {
	switch a.Type {
	case manual.AuthBasic:
		cred := base64.StdEncoding.EncodeToString([]byte(a.Username + ":" + a.Password))
		return []string{MetadataAuthorization, "Basic " + cred}, nil
	case manual.AuthAPIKey:
		key := strings.ToLower(a.VarName)
		if !validMetadataKey(key) {
			return nil, &manual.FieldError{Path: "auth.var_name", Msg: fmt.Sprintf("%q is not a gRPC metadata key (letters, digits, '-', '_', '.'; not grpc-)", a.VarName)}
		}
		if a.APIKey == "" {
			return nil, &manual.FieldError{Path: "auth.api_key", Msg: "must not be empty"}
		}
		if !strings.HasSuffix(key, "-bin") && !printable(a.APIKey) {
			return nil, &manual.FieldError{Path: "auth.api_key", Msg: "must be printable ASCII (it is sent as metadata)"}
		}
		switch a.Location {
		case manual.LocationHeader:
			return []string{key, a.APIKey}, nil
		case manual.LocationCookie:
			return []string{"cookie", a.VarName + "=" + a.APIKey}, nil
		default:
			return nil, &manual.FieldError{Path: "auth.location", Msg: fmt.Sprintf("%q has no meaning over gRPC; use \"header\" (sent as metadata)", a.Location)}
		}
	default:
		return nil, &manual.FieldError{Path: "auth.auth_type", Msg: fmt.Sprintf("%q is not supported by the grpc transport (basic and api_key are)", a.Type)}
	}
}

// validMetadataKey is gRPC's rule for a metadata key (lower case).
func validMetadataKey(k string) bool {
	if k == "" || strings.HasPrefix(k, "grpc-") || strings.HasPrefix(k, ":") {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// printable reports whether s is printable ASCII, what a gRPC metadata value
// (not -bin) may hold.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func optString(f map[string]any, key string) (string, error) {
	v, ok := f[key]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", &manual.FieldError{Path: key, Msg: "must be a string, got " + kindOf(v)}
	}
	return s, nil
}

func optBool(f map[string]any, key string) (bool, error) {
	v, ok := f[key]
	if !ok || v == nil {
		return false, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, &manual.FieldError{Path: key, Msg: "must be a boolean, got " + kindOf(v)}
	}
	return b, nil
}

// optPort reads `port`: a number, or a string of digits, in [1, 65535].
func optPort(f map[string]any) (int, bool, error) {
	v, ok := f["port"]
	if !ok || v == nil {
		return 0, false, nil
	}
	var text string
	switch x := v.(type) {
	case json.Number:
		text = x.String()
	case string:
		text = x
	default:
		return 0, false, &manual.FieldError{Path: "port", Msg: "must be a number, got " + kindOf(v)}
	}
	n, err := strconv.Atoi(text)
	if err != nil || n < 1 || n > 65535 {
		return 0, false, &manual.FieldError{Path: "port", Msg: fmt.Sprintf("must be a number in [1, 65535], got %s", text)}
	}
	return n, true, nil
}

func kindOf(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "null"
}
