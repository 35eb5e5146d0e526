package egress

// MustParse is Parse for entries known when the program is written (tests,
// the demo); it panics on an entry Parse refuses.
func MustParse(entries ...string) *Policy {
	p, err := Parse(entries)
	if err != nil {
		panic(err)
	}
	return p
}
