package server_test

import (
	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/utcp"
)

// loopbackEgress lets a test registry reach its providers on loopback, as
// --demo does.
var loopbackEgress = utcp.WithEgress(egress.MustParse("loopback"))
