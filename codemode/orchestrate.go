package codemode

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/utcp/search"
)

// The orchestrator's defaults.
const (
	// DefaultCandidateLimit is how many ranked tools the model is offered.
	DefaultCandidateLimit = 16
	// DefaultCatalogLimit is how many tools the ranking keeps
	// (utcp_search_tools_limit).
	DefaultCatalogLimit = 50
	// CandidateLimitEnv is the variable go-utcp's CodeMode reads for its
	// candidate limit: exprd reads it once, at its start
	// (--codemode-candidates), never per request.
	CandidateLimitEnv = "UTCP_CODEMODE_CANDIDATE_LIMIT"
)

// OrchestrateOptions configure one prompt → plan → run.
type OrchestrateOptions struct {
	// CandidateLimit is how many of the ranked tools the model is offered
	// (0: DefaultCandidateLimit).
	CandidateLimit int
	// CatalogLimit is how many tools the ranking keeps (0:
	// DefaultCatalogLimit).
	CatalogLimit int
	// Model overrides the provider's model name.
	Model string
	// Run configures the run of the plan; its Tools are replaced by the
	// plan's.
	Run RunOptions
	// OnPlan, when set, gets the accepted plan before it runs.
	OnPlan func(Plan)
}

// Orchestration is what Orchestrate made of a prompt.
type Orchestration struct {
	// Handled is false when the model said no tool is needed.
	Handled bool
	Plan    Plan
	Result  Result
	// Candidates are the tools the model was offered, best first.
	Candidates []string
}

func (o OrchestrateOptions) limits() (candidates, catalog int, err error) {
	candidates, catalog = o.CandidateLimit, o.CatalogLimit
	if candidates == 0 {
		candidates = DefaultCandidateLimit
	}
	if catalog == 0 {
		catalog = DefaultCatalogLimit
	}
	if candidates < 0 || catalog < 0 {
		return 0, 0, fmt.Errorf("%w: candidate limit %d, catalog limit %d: want positive values", ErrInvalidOptions, candidates, catalog)
	}
	return min(candidates, catalog), catalog, nil
}

// reply is the model's answer.
type reply struct {
	Handled *bool    `json:"handled"`
	Tools   []string `json:"tools"`
	Code    string   `json:"code"`
	Stream  bool     `json:"stream"`
}

// Orchestrate turns a prompt into a plan with the model and runs it. It
// ranks the whole registry (as far as Run.Visible sees it) for the
// prompt, offers the model the top candidates with their schemas in a
// closed-world prompt, and checks the plan it answers (CheckPlan, then a
// compile); a plan that fails goes back to the model once with the
// error, then fails as invalid-plan. A model that says no tool is needed
// gives Handled false and no error.
func (rt *Runtime) Orchestrate(ctx context.Context, prompt string, provider model.Provider, opts OrchestrateOptions) (Orchestration, error) {
	nCand, nCat, err := opts.limits()
	if err != nil {
		return Orchestration{}, err
	}
	b, err := opts.Run.Budgets.withDefaults()
	if err != nil {
		return Orchestration{}, fmt.Errorf("%w: %v", ErrInvalidOptions, err)
	}
	// The ranking reads the prompt's first terms (utcp's search limits);
	// the model reads all of it.
	visible := opts.Run.Visible
	ask := nCat
	if visible != nil {
		ask = 0 // every match, then those the caller sees
	}
	ranked, err := rt.reg.SearchContext(ctx, search.TrimQuery(prompt), ask)
	if err != nil {
		return Orchestration{}, err
	}
	if visible != nil {
		seen := ranked[:0:0]
		for _, r := range ranked {
			if len(seen) == nCat {
				break
			}
			if visible(r.Tool.Name) {
				seen = append(seen, r)
			}
		}
		ranked = seen
	}
	out := Orchestration{}
	for i := 0; i < len(ranked) && i < nCand; i++ {
		out.Candidates = append(out.Candidates, ranked[i].Tool.Name)
	}
	msgs := []model.Message{model.System(systemPrompt(rt.reg, out.Candidates)), model.User(prompt)}
	var planErr *Error
	for round := range 2 {
		resp, err := model.Complete(ctx, provider, model.Request{Messages: msgs, Model: opts.Model})
		if err != nil {
			// The model server's own text stays in err, for logs: the
			// client and a calling model read only model.Describe's words.
			return out, &Error{Reason: HostFunction, Message: "the model: " + model.Describe(err), cause: fmt.Errorf("%w: %w", ErrModel, err)}
		}
		text := resp.Message.Content
		r, perr := parseReply(text)
		if perr == nil && (r.Handled != nil && !*r.Handled || len(r.Tools) == 0 && strings.TrimSpace(r.Code) == "") {
			out.Plan = Plan{} // a repair round may end here: no plan stands
			return out, nil
		}
		if perr == nil {
			out.Plan = Plan{Tools: r.Tools, Code: r.Code, Stream: r.Stream}
			perr = rt.checkPlan(out.Plan, out.Candidates, &b)
		}
		if perr == nil {
			planErr = nil
			break
		}
		planErr = perr
		if round == 0 {
			msgs = append(msgs, model.Assistant(text), model.User(repairPrompt(perr)))
		}
	}
	if planErr != nil {
		e := *planErr
		e.Reason = InvalidPlan
		e.Message = "the model's plan failed its checks after a repair round: " + planErr.Message
		return out, &e
	}
	out.Handled = true
	if opts.OnPlan != nil {
		opts.OnPlan(out.Plan)
	}
	run := opts.Run
	run.Tools = out.Plan.Tools
	out.Result, err = rt.Run(ctx, out.Plan.Code, run)
	return out, err
}

// checkPlan is CheckPlan plus a compile under the run's budgets.
func (rt *Runtime) checkPlan(plan Plan, candidates []string, b *Budgets) *Error {
	p, err := rt.compile(plan.Code, b)
	if err != nil {
		return err
	}
	return checkPlan(plan, candidates, p.analysis)
}

// parseReply reads the model's JSON answer, allowing a Markdown fence or
// text around the object.
func parseReply(text string) (reply, *Error) {
	var r reply
	s := strings.TrimSpace(text)
	if i, j := strings.Index(s, "{"), strings.LastIndex(s, "}"); i >= 0 && j > i {
		s = s[i : j+1]
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, errorf(InvalidPlan, `the answer is not the JSON object {"tools": [...], "code": "...", "stream": false}: %v`, err)
	}
	return r, nil
}

// ToolHandler returns a CallTool(ctx, prompt) (handled, value,
// err): Orchestrate with the tool handler's timeout (ToolHandlerTimeout)
// unless opts set one.
func (rt *Runtime) ToolHandler(provider model.Provider, opts OrchestrateOptions) func(ctx context.Context, prompt string) (bool, any, error) {
	if opts.Run.Budgets.Timeout == 0 {
		opts.Run.Budgets.Timeout = ToolHandlerTimeout
	}
	return func(ctx context.Context, prompt string) (bool, any, error) {
		out, err := rt.Orchestrate(ctx, prompt, provider, opts)
		if err != nil || !out.Handled {
			return out.Handled, nil, err
		}
		return true, out.Result.Value, nil
	}
}
