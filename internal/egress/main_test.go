package egress_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: a dial,
// a DNS server or a listener that was not ended.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
