package scripted_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: a
// handler or a connection the server did not end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
