package main

// xsaiReport is bench/cmd/agentxsai's JSON output (filled in below once its
// format is fixed).
type xsaiReport map[string]any

func (r report) xsaiSection() string { return "" }
