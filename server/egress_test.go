package server_test

import "github.com/exprd/exprd/utcp"

// loopbackEgress lets a test registry reach providers on loopback.
var loopbackEgress = utcp.WithInsecureHTTP("localhost")
