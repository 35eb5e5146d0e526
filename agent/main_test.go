package agent_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: a tool
// the loop did not cancel, a model request it did not close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
