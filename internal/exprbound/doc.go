// Package exprbound is the sandbox every service that runs Expr shares:
// the evaluator's steps and CodeMode's programs are each an environment
// plus a [Policy] over it.
//
//   - [Check] walks the parsed tree and asks a Policy about every name,
//     call and let: the whitelist, since expr cannot disable its builtins.
//   - [Compile] parses, checks, patches every predicate with an iteration
//     counter ([TickName], [TickPatcher]; expr's VM cannot be interrupted),
//     type-checks and swaps in the sandbox's version of expr's operations.
//     expr charges its memory budget for arrays and maps, but builds
//     strings uncharged (a + b, replace, join) or charges them only after
//     building them (repeat): `reduce(1..40, #acc + #acc, "x")` would ask
//     for a terabyte. Its integer arithmetic wraps (9223372036854775807 + 1
//     is negative, and -1..9223372036854775807, whose count of items
//     wraps, is empty), and its sortBy is not stable. The swapped
//     operations refuse a string over the limit before allocating it,
//     measure a value before toJSON or string renders it, refuse an
//     integer overflow (a range's count of items too), a division or a
//     modulo by zero ([ArithmeticError]), and sort stably.
//     A member read by name of a value that may be a JSON object reads a
//     map[string]any directly, where expr goes through reflect; anything
//     else is expr's own (FuzzMemberAccess holds the two alike).
//   - [Cache] keeps compiled programs (a bounded LRU); [VMs] pools the VMs
//     that run them, in the caller's goroutine.
//   - [Normalize] turns what a program, a host function or a tool produced
//     into JSON types under [ValueLimits].
//   - [PanicMessage] words the Go panics expr turns into errors.
//
// The operations called by name, the counter and the variable the sort
// declares start with [ReservedPrefix]: a policy must keep expressions from
// naming or declaring such names.
package exprbound
