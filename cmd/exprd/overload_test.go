package main

import (
	"io"
	"log/slog"
	"testing"

	"github.com/exprd/exprd/internal/overload"
	"github.com/exprd/exprd/membudget"
)

// The overload flags at their limits pass; one past, each is named.
func TestConfigOverloadFlags(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string // "" for none
	}{
		{"the defaults", nil, ""},
		{"off", []string{"--overload=false"}, ""},
		{"thresholds at the line", []string{"--overload-refuse", "1", "--overload-shed", "1"}, ""},
		{"refuse at shed", []string{"--overload-refuse", "0.5", "--overload-shed", "0.5"}, ""},
		{"refuse past shed", []string{"--overload-refuse", "0.51", "--overload-shed", "0.5"}, "overload-refuse 0.51, overload-shed 0.5: want each in (0, 1], refuse at most shed"},
		{"shed past the line", []string{"--overload-shed", "1.01"}, "overload-refuse 0.9, overload-shed 1.01: want each in (0, 1], refuse at most shed"},
		{"no refuse threshold", []string{"--overload-refuse", "0"}, "overload-refuse 0, overload-shed 0.95: want each in (0, 1], refuse at most shed"},
		{"the smallest line", []string{"--overload-line", "1"}, ""},
		{"the line from the budget", []string{"--overload-line", "0"}, ""},
		{"a negative line", []string{"--overload-line", "-1"}, "overload-line: -1, want 0 (the memory budget and a quarter) or more"},
		{"the shortest interval", []string{"--overload-interval", "1ns"}, ""},
		{"no interval", []string{"--overload-interval", "0s"}, "overload-interval: 0s, want a positive duration"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig(tt.args, io.Discard)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("got %v, want none", err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

// The manager's line is the memory budget and a quarter, at most 90% of
// the soft memory limit, or the flag's; --overload=false makes none.
func TestConfigOverloadManager(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, tt := range []struct {
		args         []string
		budget, soft int64
		wantLine     int64 // 0: no manager
	}{
		{nil, 800 << 20, 0, 1000 << 20},
		{nil, 800 << 20, 2000 << 20, 1000 << 20},
		{nil, 800 << 20, 1000 << 20, 900 << 20},
		{[]string{"--overload-line", "12345"}, 800 << 20, 1000, 12345},
		{[]string{"--overload=false"}, 800 << 20, 0, 0},
	} {
		c, err := parseConfig(tt.args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		m, err := c.overload.manager(membudget.New(tt.budget, 0), tt.soft, log)
		if err != nil {
			t.Fatal(err)
		}
		if tt.wantLine == 0 {
			if m != nil {
				t.Errorf("%v: a manager, want none", tt.args)
			}
			continue
		}
		st := m.Stats()
		if st.Line != tt.wantLine || st.RefuseAt != int64(float64(tt.wantLine)*overload.DefaultRefuse) || st.ShedAt != int64(float64(tt.wantLine)*overload.DefaultShed) {
			t.Errorf("%v: %+v, want a line of %d", tt.args, st, tt.wantLine)
		}
	}
}
