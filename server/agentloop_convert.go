package server

import (
	"errors"
	"fmt"

	"github.com/exprd/exprd/agent"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/server/internal/rpcstatus"
)

// The conversions between AgentLoop's messages and the agent's and model's
// types.

// toolChoice reads a ToolChoice (nil is auto); a tool name goes with
// MODE_TOOL and only with it.
func toolChoice(c *exprdv1.ToolChoice, field string) (model.ToolChoice, error) {
	mode, tool := c.GetMode(), c.GetTool()
	if (mode == exprdv1.ToolChoice_MODE_TOOL) != (tool != "") {
		return model.ToolChoice{}, rpcstatus.BadRequest(field+".tool", "a tool name is given with MODE_TOOL, and only with it")
	}
	switch mode {
	case exprdv1.ToolChoice_MODE_UNSPECIFIED, exprdv1.ToolChoice_MODE_AUTO:
		return model.ToolChoice{Mode: model.ToolChoiceAuto}, nil
	case exprdv1.ToolChoice_MODE_NONE:
		return model.ToolChoice{Mode: model.ToolChoiceNone}, nil
	case exprdv1.ToolChoice_MODE_REQUIRED:
		return model.ToolChoice{Mode: model.ToolChoiceRequired}, nil
	case exprdv1.ToolChoice_MODE_TOOL:
		return model.ChooseTool(tool), nil
	}
	return model.ToolChoice{}, rpcstatus.BadRequest(field+".mode", fmt.Sprintf("unknown mode %v", mode))
}

func stopFromProto(c *exprdv1.StopCondition) (agent.StopCondition, error) {
	list := func(cs *exprdv1.StopConditions) ([]agent.StopCondition, error) {
		var out []agent.StopCondition
		for _, sub := range cs.GetConditions() {
			s, err := stopFromProto(sub)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		if len(out) == 0 {
			return nil, errors.New("and/or need at least one condition")
		}
		return out, nil
	}
	switch x := c.GetCond().(type) {
	case *exprdv1.StopCondition_MaxSteps:
		if x.MaxSteps == 0 {
			return nil, errors.New("max_steps must be at least 1")
		}
		return agent.MaxSteps(int(x.MaxSteps)), nil
	case *exprdv1.StopCondition_HasToolCall:
		if x.HasToolCall == "" {
			return agent.HasToolCall(), nil
		}
		return agent.HasToolCall(x.HasToolCall), nil
	case *exprdv1.StopCondition_And:
		cs, err := list(x.And)
		return agent.And(cs...), err
	case *exprdv1.StopCondition_Or:
		cs, err := list(x.Or)
		return agent.Or(cs...), err
	case *exprdv1.StopCondition_Not:
		s, err := stopFromProto(x.Not)
		if err != nil {
			return nil, err
		}
		return agent.Not(s), nil
	}
	return nil, errors.New("the condition is empty")
}

// stopReasons are the reasons a turn that reaches Done ends for.
var stopReasons = map[agent.StopReason]exprdv1.AgentDone_StopReason{
	agent.StopCompleted:    exprdv1.AgentDone_STOP_REASON_COMPLETED,
	agent.StopConditionMet: exprdv1.AgentDone_STOP_REASON_STOP_CONDITION,
}

var roles = map[exprdv1.AgentMessage_Role]model.Role{
	exprdv1.AgentMessage_ROLE_SYSTEM:    model.RoleSystem,
	exprdv1.AgentMessage_ROLE_USER:      model.RoleUser,
	exprdv1.AgentMessage_ROLE_ASSISTANT: model.RoleAssistant,
	exprdv1.AgentMessage_ROLE_TOOL:      model.RoleTool,
}

// messageFromProto reads a message of the conversation; field names it in
// an error.
func messageFromProto(m *exprdv1.AgentMessage, field string) (model.Message, error) {
	role, ok := roles[m.GetRole()]
	if !ok {
		return model.Message{}, rpcstatus.BadRequest(field+".role", fmt.Sprintf("role %v: ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT or ROLE_TOOL", m.GetRole()))
	}
	msg := model.Message{Role: role, Content: m.GetContent(), ToolCallID: m.GetToolCallId()}
	for _, c := range m.GetToolCalls() {
		msg.ToolCalls = append(msg.ToolCalls, model.ToolCall{ID: c.GetId(), Name: c.GetName(), Arguments: c.GetArgumentsJson()})
	}
	return msg, nil
}

func callProto(c agent.ToolCall) *exprdv1.AgentToolCall {
	return &exprdv1.AgentToolCall{Id: c.ID, Name: c.Name, ArgumentsJson: jsonText(c.Arguments)}
}

func usageProto(u model.Usage) *exprdv1.Usage {
	return &exprdv1.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
}

func stepProto(s agent.Step) *exprdv1.StepFinished {
	return &exprdv1.StepFinished{Step: uint32(s.Index), FinishReason: string(s.FinishReason), Usage: usageProto(s.Usage), Text: s.Text}
}
