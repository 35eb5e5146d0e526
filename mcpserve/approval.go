package mcpserve

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Approval over MCP is the 2026-07-28 revision's multi-round trip
// (input_required): a call of a tool that needs a person's approval is
// answered with an elicitation for the host to put to its user, and a
// request state; the host calls again with the user's answer and the
// state. The endpoint is stateless, so the state carries what was asked
// (the caller, the MCP tool called, a hash of its arguments, the tools
// to approve, when it expires), signed with the approval key: any replica
// holding the same key takes the answer, and nothing is stored.
const (
	// ApprovalTTL is how long an approval's request state is good for,
	// from when it was asked.
	ApprovalTTL = 5 * time.Minute
	// MinApprovalKeyBytes is the shortest approval key taken.
	MinApprovalKeyBytes = 32
	// MaxApprovalArgsBytes bounds the arguments of a gateway call that
	// needs approval: the user is shown them whole, or not asked.
	MaxApprovalArgsBytes = 16 << 10
	// maxStateBytes bounds a request state read: what exprd signs is far
	// shorter, so a longer one is refused before it is decoded.
	maxStateBytes = 8 << 10
	// approvalID names the one input request of an approval.
	approvalID = "approval"
	// revisionMRTR is the first revision with input_required.
	revisionMRTR = "2026-07-28"
)

// approvalState is what a request state says, signed.
type approvalState struct {
	Caller  string   `json:"c"` // the token's name; "" with auth off
	Tool    string   `json:"t"` // the MCP tool called
	Args    []byte   `json:"a"` // sha256 of its arguments, canonical
	Tools   []string `json:"n"` // the tools approved, sorted
	Expires int64    `json:"e"` // unix seconds
}

// signer signs and checks request states.
type signer struct {
	key []byte
	now func() time.Time
}

// newSigner keys a signer with key, or a random key of its own when key
// is empty: then only this process takes its states back.
func newSigner(key []byte) (signer, error) {
	if len(key) == 0 {
		key = make([]byte, MinApprovalKeyBytes)
		_, _ = rand.Read(key)
	} else if len(key) < MinApprovalKeyBytes {
		return signer{}, fmt.Errorf("mcpserve: an approval key of %d bytes: want at least %d", len(key), MinApprovalKeyBytes)
	}
	return signer{key: bytes.Clone(key), now: time.Now}, nil
}

func (s signer) mac(payload []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("exprd-mcp-approval-v1\x00"))
	m.Write(payload)
	return m.Sum(nil)
}

func (s signer) sign(st approvalState) string {
	payload, _ := json.Marshal(st)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(s.mac(payload))
}

// errState is a request state exprd cannot take back.
var errState = errors.New("the approval's request state is not one this server gave, or was changed")

func (s signer) open(state string) (approvalState, error) {
	var st approvalState
	if len(state) > maxStateBytes {
		return st, errState
	}
	p, m, ok := strings.Cut(state, ".")
	enc := base64.RawURLEncoding.Strict() // one string a state
	payload, err1 := enc.DecodeString(p)
	mac, err2 := enc.DecodeString(m)
	if !ok || err1 != nil || err2 != nil || !hmac.Equal(mac, s.mac(payload)) {
		return st, errState
	}
	if err := json.Unmarshal(payload, &st); err != nil {
		return st, errState
	}
	if s.now().Unix() > st.Expires {
		return st, errors.New("the approval has expired: it is good for " + ApprovalTTL.String() + " from when it was asked")
	}
	return st, nil
}

// argsHash is a hash of a call's arguments that does not depend on how
// they were written: keys sorted, numbers as written, no spaces.
func argsHash(raw json.RawMessage) []byte {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if len(bytes.TrimSpace(raw)) == 0 || d.Decode(&v) != nil {
		v = nil
	}
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return sum[:]
}

// approve decides a call of the MCP tool req names that would call
// tools needing approval (need, not empty). It answers nil when the
// call is approved: its request state is exprd's, for this caller, this
// call and these tools, unexpired, and its user accepted. Otherwise it
// answers what to send: the input_required asking (a client of the
// 2026-07-28 revision that can elicit, asking for the first time), or a
// tool error saying why the call is refused; nothing has run.
func (h *Handler) approve(ctx context.Context, req *mcp.CallToolRequest, need []string, what string) *mcp.CallToolResult {
	need = slices.Clone(need)
	slices.Sort(need)
	need = slices.Compact(need)
	caller := ""
	if c := requestFrom(ctx).callerOrNil(); c != nil {
		caller = c.Name
	}
	p := req.Params
	if p.RequestState == "" {
		if req.ProtocolVersion() < revisionMRTR {
			return toolError("%s: %s needs a person's approval, which MCP asks only of clients of the %s revision (input_required); "+
				"this client speaks %s: leave it out, or call it through exprd's gRPC CodeMode.Run, which asks the client",
				p.Name, quoted(need), revisionMRTR, orNone(req.ProtocolVersion()))
		}
		if caps := req.ClientCapabilities(); caps == nil || caps.Elicitation == nil {
			return toolError("%s: %s needs a person's approval, and this client cannot be asked (it declares no elicitation capability): "+
				"leave it out, or call it through exprd's gRPC CodeMode.Run, which asks the client", p.Name, quoted(need))
		}
		st := approvalState{Caller: caller, Tool: p.Name, Args: argsHash(p.Arguments), Tools: need,
			Expires: h.signer.now().Add(ApprovalTTL).Unix()}
		return inputRequired(mcp.InputRequestMap{approvalID: &mcp.ElicitParams{
			Mode:            "form",
			Message:         what,
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}},
		}}, h.signer.sign(st))
	}
	st, err := h.signer.open(p.RequestState)
	if err == nil && (st.Caller != caller || st.Tool != p.Name || !bytes.Equal(st.Args, argsHash(p.Arguments)) || !slices.Equal(st.Tools, need)) {
		err = errors.New("the approval was asked for another call (its caller, tool or arguments differ)")
	}
	if err != nil {
		return toolError("%s: %v; nothing ran: call again without the request state to be asked anew", p.Name, err)
	}
	ans, ok := p.InputResponses[approvalID].(*mcp.ElicitResult)
	switch {
	case !ok:
		return toolError("%s: the approval's answer (input response %q, an elicitation's result) is missing; nothing ran", p.Name, approvalID)
	case ans.Action != "accept":
		return toolError("%s: the user did not approve %s (%s); nothing ran", p.Name, quoted(need), orNone(ans.Action))
	}
	return nil
}

func quoted(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// inputRequired is an input_required result. The SDK marks a result so
// (its resultType, unexported) only for the tools added to its server,
// not for the gateway's, served by a middleware; a result read from its
// JSON is marked as the JSON says, so it is built that way, for both.
func inputRequired(reqs mcp.InputRequestMap, state string) *mcp.CallToolResult {
	b, err := json.Marshal(map[string]any{"resultType": "input_required", "content": []any{}, "inputRequests": reqs, "requestState": state})
	var res mcp.CallToolResult
	if err == nil {
		err = json.Unmarshal(b, &res)
	}
	if err != nil || !res.NeedsInput() {
		return toolError("the approval could not be asked: its input_required result does not read back (%v); nothing ran", err)
	}
	return &res
}
