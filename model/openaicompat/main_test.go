package openaicompat_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: a
// stream not closed, a connection not released.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
