package server

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"sort"
	"strings"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/server/internal/rpcstatus"
	"github.com/exprd/exprd/utcp"
	utcpmanual "github.com/exprd/exprd/utcp/manual"
	"github.com/exprd/exprd/utcp/toolscope"
)

// Pages of ListTools and SearchTools (AIP-158): a page_size of 0 is the
// default, more than the maximum is read as the maximum, and a page token
// is opaque to the client and valid only with the request it came from.
const (
	DefaultListPageSize   = 50
	MaxListPageSize       = 500
	DefaultSearchPageSize = 10
	MaxSearchPageSize     = 100
	// MaxSearchDepth is how deep SearchTools ranks: pages end there.
	MaxSearchDepth = 100
	// MaxPageBytes bounds a page's encoded tools, so that a page with
	// schemas stays under a client's default 4 MiB receive limit: a page
	// ends early (with a next_page_token) rather than grow past it. A
	// page always holds at least one tool.
	MaxPageBytes = 2 << 20
)

// page collects a page's tools up to its size and MaxPageBytes.
type page struct {
	size, bytes int
	n           int
}

// fits reports whether a tool of b encoded bytes may join the page, and
// counts it if so.
func (p *page) fits(b int) bool {
	if p.n >= p.size || (p.n > 0 && p.bytes+b > MaxPageBytes) {
		return false
	}
	p.n++
	p.bytes += b
	return true
}

func pageSize(n uint32, def, max int) int {
	switch {
	case n == 0:
		return def
	case int(n) > max:
		return max
	}
	return int(n)
}

// A page token is base64url of: 8 bytes of the request's fingerprint (the
// fields that must stay the same between pages), then where the next page
// starts (a tool name for a list, an offset for a search).
func pageToken(fingerprint, next string) string {
	h := sha256.Sum256([]byte(fingerprint))
	return base64.RawURLEncoding.EncodeToString(append(h[:8], next...))
}

var errPageToken = errors.New("not a page token of this request: give the previous response's next_page_token with the same request fields")

// readPageToken returns where the page starts; "" for no token.
func readPageToken(tok, fingerprint string) (string, error) {
	if tok == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	h := sha256.Sum256([]byte(fingerprint))
	if err != nil || len(b) < 8 || string(b[:8]) != string(h[:8]) {
		return "", errPageToken
	}
	return string(b[8:]), nil
}

// ListTools lists the tools the caller sees (its tools: scopes): one it
// does not see is left out as if it were not registered, and so is a
// manual of which it sees none.
func (t *toolRegistry) ListTools(ctx context.Context, req *exprdv1.ListToolsRequest) (*exprdv1.ListToolsResponse, error) {
	v := toolscope.FromContext(ctx)
	manual := utcp.SanitizeManualName(req.GetManual())
	fp := "list\x00" + manual
	after, err := readPageToken(req.GetPageToken(), fp)
	if err != nil {
		return nil, rpcstatus.BadRequest("page_token", err.Error())
	}
	size := pageSize(req.GetPageSize(), DefaultListPageSize, MaxListPageSize)
	tools := t.reg.List() // sorted by name
	i := 0
	if after != "" {
		i = sort.Search(len(tools), func(i int) bool { return tools[i].Name > after })
	}
	out := &exprdv1.ListToolsResponse{}
	pg := page{size: size}
	listed := func(tool *utcpmanual.Tool) bool {
		return (manual == "" || tool.ManualName() == manual) && v.Sees(tool.Name)
	}
	for ; i < len(tools); i++ {
		if listed(tools[i]) {
			info := t.toolInfo(tools[i], req.GetView())
			if !pg.fits(proto.Size(info)) {
				break
			}
			out.Tools = append(out.Tools, info)
		}
	}
	for ; i < len(tools); i++ { // is there one more?
		if listed(tools[i]) {
			out.NextPageToken = pageToken(fp, out.Tools[len(out.Tools)-1].GetName())
			break
		}
	}
	return out, nil
}

// SearchTools ranks the tools the caller sees (its tools: scopes): one it
// does not see is not found, as if it were not registered, and takes no
// place in the ranking's pages.
func (t *toolRegistry) SearchTools(ctx context.Context, req *exprdv1.SearchToolsRequest) (*exprdv1.SearchToolsResponse, error) {
	if strings.TrimSpace(req.GetQuery()) == "" {
		return nil, rpcstatus.BadRequest("query", "the query is empty")
	}
	fp := "search\x00" + req.GetQuery()
	at, err := readPageToken(req.GetPageToken(), fp)
	if err != nil {
		return nil, rpcstatus.BadRequest("page_token", err.Error())
	}
	offset := 0
	if at != "" {
		if len(at) != 4 {
			return nil, rpcstatus.BadRequest("page_token", errPageToken.Error())
		}
		// Compared before the conversion: a 32-bit int would make a
		// large offset negative.
		n := binary.BigEndian.Uint32([]byte(at))
		if n >= MaxSearchDepth {
			return nil, rpcstatus.BadRequest("page_token", errPageToken.Error())
		}
		offset = int(n)
	}
	size := pageSize(req.GetPageSize(), DefaultSearchPageSize, MaxSearchPageSize)
	end := min(offset+size, MaxSearchDepth)
	// One more than the page, to know whether there is a next one; of
	// every match when the caller sees only some tools, then those.
	v := toolscope.FromContext(ctx)
	want := min(end+1, MaxSearchDepth)
	ask := want
	if !v.All() {
		ask = 0
	}
	found, err := t.reg.SearchContext(ctx, req.GetQuery(), ask)
	var qe *utcp.QueryError
	switch {
	case errors.As(err, &qe):
		return nil, rpcstatus.BadRequest("query", clientText(err))
	case err != nil:
		return nil, status.FromContextError(err).Err()
	}
	if !v.All() {
		seen := found[:0:0]
		for _, f := range found {
			if len(seen) == want {
				break
			}
			if v.Sees(f.Tool.Name) {
				seen = append(seen, f)
			}
		}
		found = seen
	}
	out := &exprdv1.SearchToolsResponse{}
	pg := page{size: size}
	for i := offset; i < end && i < len(found); i++ {
		st := &exprdv1.ScoredTool{Tool: t.toolInfo(found[i].Tool, req.GetView()), Score: found[i].Score}
		if !pg.fits(proto.Size(st)) {
			end = i
			break
		}
		out.Tools = append(out.Tools, st)
	}
	if len(found) > end {
		out.NextPageToken = pageToken(fp, string(binary.BigEndian.AppendUint32(nil, uint32(end))))
	}
	return out, nil
}
