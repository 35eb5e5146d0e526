package agent

import (
	"fmt"
	"slices"

	"github.com/exprd/exprd/model"
)

// FieldError names what is wrong in something the caller gave: a field of
// the Config (with ErrInvalidConfig), or of the PrepareStep a hook returned
// (with ErrHook). Field is the field's path in snake case, as the wire
// names it: "messages[2].role", "tool_choice", "tools[0].name".
type FieldError struct {
	Field, Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// checkMessages refuses the messages the model package would refuse to
// send (model.ErrInvalidRequest), naming the field at fault.
func checkMessages(msgs []model.Message) *FieldError {
	for i, m := range msgs {
		field := func(f string) string { return fmt.Sprintf("messages[%d].%s", i, f) }
		switch m.Role {
		case model.RoleSystem, model.RoleUser:
			if len(m.ToolCalls) > 0 {
				return &FieldError{field("tool_calls"), fmt.Sprintf("a %s message cannot carry tool calls", m.Role)}
			}
			if m.ToolCallID != "" {
				return &FieldError{field("tool_call_id"), fmt.Sprintf("a %s message answers no tool call", m.Role)}
			}
		case model.RoleAssistant:
			if m.ToolCallID != "" {
				return &FieldError{field("tool_call_id"), "an assistant message answers no tool call"}
			}
			for j, c := range m.ToolCalls {
				switch {
				case c.ID == "":
					return &FieldError{field(fmt.Sprintf("tool_calls[%d].id", j)), "a tool call needs an id"}
				case c.Name == "":
					return &FieldError{field(fmt.Sprintf("tool_calls[%d].name", j)), "a tool call needs a name"}
				}
			}
		case model.RoleTool:
			if m.ToolCallID == "" {
				return &FieldError{field("tool_call_id"), "a tool message needs the id of the call it answers"}
			}
			if len(m.ToolCalls) > 0 {
				return &FieldError{field("tool_calls"), "a tool message cannot carry tool calls"}
			}
		default:
			return &FieldError{field("role"), fmt.Sprintf("unknown role %q: system, user, assistant or tool", m.Role)}
		}
	}
	return nil
}

// checkToolChoice refuses a tool choice the model package would refuse
// for a request offering tools.
func checkToolChoice(c model.ToolChoice, tools []string) *FieldError {
	switch c.Mode {
	case "", model.ToolChoiceAuto, model.ToolChoiceNone:
	case model.ToolChoiceRequired:
		if len(tools) == 0 {
			return &FieldError{"tool_choice", "required, but there are no tools to call"}
		}
	case model.ToolChoiceTool:
		if !slices.Contains(tools, c.Name) {
			list := "there are no tools"
			if len(tools) > 0 {
				list = "the tools are: " + listNames(tools)
			}
			return &FieldError{"tool_choice.tool", fmt.Sprintf("%s is not the name of a declared tool; %s", quoteName(c.Name), list)}
		}
		return nil
	default:
		return &FieldError{"tool_choice", fmt.Sprintf("unknown mode %q", c.Mode)}
	}
	if c.Name != "" {
		return &FieldError{"tool_choice", fmt.Sprintf("a tool name (%q) goes only with mode %q", c.Name, model.ToolChoiceTool)}
	}
	return nil
}
