package egresstest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: a DNS
// server goroutine or a connection that was not ended.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
