// Package overload is the backstop behind the memory budget: it watches
// the process's own heap and, as the heap nears a line, refuses new work,
// then cancels the calls in flight that hold the most, one at a time,
// until the heap is back under. Envoy's overload manager is the model.
//
// The memory budget (membudget) bounds what is reserved from it; what no
// one reserves (strings a program builds, a builtin's buffers, goroutine
// stacks) goes around it. Nothing else stands between that and the OOM
// killer, which ends every call at once.
//
// # What is measured
//
// Every Interval (DefaultInterval, 100 ms) a Manager reads, through
// runtime/metrics:
//
//   - /gc/heap/live:bytes: the heap the last GC found live. Garbage is
//     not in it: garbage is the GC's to free (a soft memory limit,
//     GOMEMLIMIT, makes it collect harder as the process nears it), and
//     cancelling a call to free memory the GC would free anyway would
//     lose work for nothing. /memory/classes/heap/objects:bytes, the
//     other candidate, counts the dead objects not yet swept too: a
//     burst of short-lived allocations would read as an overload.
//   - /memory/classes/heap/stacks:bytes: goroutine stacks, which are
//     resident, live as long as their goroutines, and are in no budget
//     (every open stream has goroutines of its own, and a deep recursion
//     grows one's stack).
//
// The measure (Reading.Heap) is the sum, or, when what the runtime holds
// resident (/memory/classes/total:bytes less
// /memory/classes/heap/released:bytes) is past the soft memory limit, that,
// if it is more: past the limit the GC is not keeping up, and what it has
// not freed is resident as much as what is live. It is as of the last GC: what is
// allocated since shows at the next one, which the runtime starts by the
// time the heap has grown by GOGC percent (or sooner near GOMEMLIMIT).
// What is freed since shows only at the next GC too, and an idle process
// that refuses work may not run one for minutes. So when the measure is
// past the refuse threshold and something may have been freed since (a
// tracked call ended, or one was cancelled), and no GC has completed over
// the last interval, the Manager runs one itself (runtime.GC) and reads
// again; after a cancelled call has ended it always does, so that it never
// cancels a second call for memory the first has already let go of. These
// collections are counted (Stats.Collections); there is at most one an
// interval, only while over the refuse threshold, and those for calls
// that ended (not cancelled ones) take at most a tenth of the time: after
// one that took d, none for 9·d.
//
// # The line and the thresholds
//
// The line is the most the measure should ever reach; exprd makes it the
// memory budget and a quarter more (LineFor), but no more than 90% of the
// runtime's soft memory limit (LineUnder): the GC needs room above what is
// live, or it runs back to back. Past Refuse of it
// (DefaultRefuse, 90%) Admit refuses new work, and Enter the new work of
// a caller that has a call in flight (membudget.CallerOf): a caller with
// none is admitted, one call at a time, so that those whose many calls
// fill the heap are refused and one that sends a request at a time is
// still served; past Shed (DefaultShed, 95%) each check cancels one call
// in flight. "Past" is strictly over: a
// measure equal to a threshold is under it.
//
// # The memory budget
//
// Refusing new RPCs does not stop the work already in flight from taking
// more: a stream's next state, a program's next megabyte, a tool's answer
// being read, a turn's history. So while it refuses, a Manager given the
// budget (Config.Budget) restricts it (membudget.Budget.Restrict): a
// reservation in its large part is refused at once for a caller that
// already holds more than a small reservation's worth of it or would pass
// its fair share, and made for one that holds next to nothing, one
// request at a time, as Enter admits callers.
//
// And whenever a caller within its fair share of the budget waits for
// room, the Manager cancels calls of the caller holding the most past the
// share until they held what the waiting reservation needs (preempt,
// membudget.Budget.OnWait), at most once every PreemptEvery.
//
// # Which call is cancelled
//
// Calls in flight register with Track and say what they hold with
// Call.Add: the code that holds memory for a call finds its Call with
// FromContext(ctx) (nil-safe: Add on a nil *Call does nothing). The call
// cancelled is, of the caller whose calls hold the most by those counts in
// all (membudget.CallerOf; a call of no caller is a caller of its own),
// the one holding the most; among equal counts (and when nothing counts
// at all, every count is 0), the oldest, which has had the longest to
// accumulate what no one counts. By call alone, a user whose one state was
// large went before a caller whose 128 streams held 8 MB each. Its context
// is cancelled with a *ShedError as its cause (errors.Is ErrOverloaded),
// so that its error can say why. A call cancelled that has not let go of
// its memory by the next check may lead to one more being cancelled: the
// Manager cannot tell memory being freed from memory held.
package overload
