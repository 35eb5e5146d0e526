// Package readme tests the README's tour: every command block runs against
// a real exprd --demo and must print what the README shows.
package readme
