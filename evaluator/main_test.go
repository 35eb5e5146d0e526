package evaluator_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: a host
// function or a client wait that outlives its call.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
